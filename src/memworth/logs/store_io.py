"""A store's outcome log in the log format, and a log in the format loaded into a store.

Both go through the backend protocol (:class:`memworth.store.backend.Backend`), so they
work for SQLite, PostgreSQL and the in-memory backend alike. An exported row is one
retrieved item of an episode with an outcome: its credit weight as ``weight``, the
outcome's source, confidence and time, the episode's namespace and context, in the
order the outcomes were committed.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from memworth.errors import ValidationError
from memworth.logs.format import NAMES
from memworth.logs.read import FORMATS, in_namespace, read_logs
from memworth.logs.score import ScoreSettings, _connect
from memworth.logs.state import create_tables, ingest
from memworth.outputs import file_to_write, written_whole
from memworth.progress import Progress
from memworth.progress import bar as progress_bar
from memworth.store.backend import Backend, NewMemory
from memworth.store.outcome_log import episodes_of
from memworth.store.records import Episode, EpisodeItem, Memory, OutcomeRow
from memworth.store.store import credit_increments

__all__ = ["export_log", "import_log", "log_rows"]

_NO_VECTOR = np.zeros(0, dtype=np.float32)
_EXPORTED = [c for c in NAMES if c != "score"]  # a store keeps credit weights, not the retrieval scores


def log_rows(backend: Backend, namespace: str | None = None) -> Iterator[dict[str, Any]]:
    """One row per retrieved item of every episode with an outcome (of ``namespace``, or all), in commit order."""
    log = list(backend.outcome_log())
    for start in range(0, len(log), 5000):
        chunk = [o for o in log[start : start + 5000] if namespace is None or o.namespace == namespace]
        episodes = episodes_of(backend, chunk)
        for o in chunk:
            ep = episodes.get((o.namespace, o.episode_id))
            if ep is None:
                continue
            for item in ep.items:
                yield {
                    "episode_id": ep.id,
                    "memory_id": item.memory_id,
                    "outcome": "success" if o.success else "failure",
                    "timestamp": o.recorded,
                    "weight": item.weight,
                    "source": o.source,
                    "confidence": o.confidence,
                    "namespace": ep.namespace,
                    "context": ep.context,
                }


def export_log(backend: Backend, path: str | Path, fmt: str, namespace: str | None = None) -> int:
    """Write the store's log to ``path`` as ``fmt`` (parquet, jsonl or csv); return the rows written."""
    if fmt not in FORMATS:
        raise ValidationError("format", f"must be one of {', '.join(FORMATS)}, got {fmt!r}")
    file_to_write(path, "out")  # before the log is read
    rows = list(log_rows(backend, namespace))
    with written_whole(path, "out") as part:
        if fmt == "jsonl":
            with open(part, "w", encoding="utf-8") as fh:
                for r in rows:
                    fh.write(json.dumps(r) + "\n")
            return len(rows)
        import pyarrow as pa

        types = {"timestamp": pa.float64(), "weight": pa.float64(), "confidence": pa.float64()}
        table = pa.table({c: pa.array([r[c] for r in rows], type=types.get(c, pa.string())) for c in _EXPORTED})
        if fmt == "parquet":
            import pyarrow.parquet as pq

            pq.write_table(table, part)
        else:
            import pyarrow.csv as pv

            pv.write_csv(table, part)
    return len(rows)


def _keys_by_namespace(backend: Backend) -> bool:
    """Whether ``backend`` keys an episode by (namespace, id), as PostgreSQL does since schema 7;
    SQLite and the in-memory backend keep an episode id unique across namespaces."""
    return backend.url.startswith(("postgresql:", "postgres:"))


def _check_new(backend: Backend, keys: Sequence[tuple[str, str]]) -> None:
    """Refuse, before anything is written, a log episode (namespace, id) the store cannot take:
    one it holds already, or, in a store that keys episodes by id alone, an id it holds in
    another namespace or that the log gives two namespaces."""
    by_id = not _keys_by_namespace(backend)
    if by_id:
        first: dict[str, str] = {}
        for ns, eid in keys:
            other = first.setdefault(eid, ns)
            if other != ns:
                raise ValidationError(
                    "episode_id",
                    f"episode {eid!r} is in namespaces {other!r} and {ns!r} of the log, and this store "
                    f"({backend.url.split(':', 1)[0]}) keeps an episode id unique across namespaces "
                    "(PostgreSQL keys it by namespace); nothing imported",
                )
    for ns in sorted({k[0] for k in keys}):
        ids = [eid for space, eid in keys if space == ns]
        for start in range(0, len(ids), 5000):
            known = backend.episodes(ids[start : start + 5000], namespace=None if by_id else ns)
            if known:
                eid, episode = next(iter(known.items()))
                raise ValidationError(
                    "episode_id",
                    f"episode {eid!r}{in_namespace(episode.namespace)} is in the store already; nothing imported",
                )


def import_log(
    backend: Backend, files: Sequence[str], settings: ScoreSettings, *, progress: Progress = False
) -> tuple[int, int, int]:
    """Load logs into a store: episodes, outcomes and the counters they cause, in time order.

    Memories are known by id: an id the store does not hold becomes an external memory
    (no text, no vector, governed by id, as :class:`memworth.Sidecar` adds them). The
    whole log is checked first; an episode the store has already is refused before
    anything is written. Returns (memories added, episodes, rows). ``progress``: bars over the
    files read and the episodes written (:mod:`memworth.progress`).
    """
    con = _connect(None)
    try:
        create_tables(con, settings.counting)
        needs = [settings.counting.column] if settings.counting.column else []
        rows = read_logs(con, files, settings.columns, fmt=settings.fmt, needs=needs, progress=progress)
        ingest(con, files, settings.counting)
        eps = con.execute(
            "SELECT namespace, pos, episode_id, ts, success, confidence, source, context FROM episodes ORDER BY ts, namespace, pos"
        ).fetchall()
        items: dict[tuple[str, int], list[tuple[str, float]]] = {}
        for ns, pos, mid, credit in con.execute(
            "SELECT namespace, pos, memory_id, credit FROM items ORDER BY namespace, pos, memory_id"
        ).fetchall():
            items.setdefault((ns, pos), []).append((mid, credit))
    finally:
        con.close()
    _check_new(backend, [(e[0], e[2]) for e in eps])
    added = 0
    now = time.time()
    for ns in sorted({e[0] for e in eps}):
        wanted = sorted({mid for (space, _pos), got in items.items() if space == ns for mid, _ in got})
        have = {m.id for m in backend.memories(ns, wanted)}
        new = [
            NewMemory(Memory(mid, "", ns, created=now, updated=now), _NO_VECTOR) for mid in wanted if mid not in have
        ]
        if new:
            backend.insert_memories(new)
            added += len(new)
    outcomes: list[OutcomeRow] = []
    increments = []
    shown = progress_bar(len(eps), "episodes imported", progress)
    for ns, pos, eid, ts, ok, conf, source, context in eps:
        shown.update(1)
        episode = Episode(
            eid,
            ns,
            "",
            context,
            float(ts),
            tuple(EpisodeItem(mid, float(credit), 1.0, i) for i, (mid, credit) in enumerate(items[(ns, pos)])),
        )
        backend.insert_episode(episode)
        outcomes.append(OutcomeRow(eid, bool(ok), source, float(conf), float(ts), namespace=ns))
        increments += credit_increments(episode, bool(ok), float(conf))
        if len(outcomes) >= 5000:
            backend.append_outcomes(outcomes, increments)
            outcomes, increments = [], []
    if outcomes:
        backend.append_outcomes(outcomes, increments)
    shown.close()
    return added, len(eps), rows
