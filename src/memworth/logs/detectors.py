"""The change detectors a state file keeps between runs, so a run advances them over new episodes only.

A namespace's detectors (:class:`memworth.signals.outcome_streams.NamespaceScan`: every
memory's CUSUM, the explaining-away evidence, the namespace's reference rate) depend on
every outcome in order. Rather than re-running them over the whole kept log, a run takes
them up where the last run left them (:meth:`NamespaceScan.snapshot` saved in DuckDB
tables, :meth:`NamespaceScan.resume` reading them back), advances them over the episodes
after that, and saves them again. The library's own scan does all the detecting; this
module only stores and restores it.

The saved state says how many of the namespace's episodes it has read and which detector
settings read them. A run advances from there over the kept log, so a run with change
detection off (which leaves the detectors where they were), a state file written before
detectors were kept (none saved) or a run with other detector settings (the saved ones
are dropped) catches up over the kept episodes once, and gives what a run over all the
files at once gives.

The tables (since state version 2):

* ``scans``: one row per namespace: the detector settings, the episodes read, the
  reference rate's state;
* ``scan_memories``: one row per memory, by its row in the scan: its CUSUM state (its
  ``watched`` column added later; created in older files when they are opened, whose
  saved scans are then read again);
* ``scan_shared``: the explaining-away evidence, each memory's entries in order;
* ``scan_references``: the reference rate before each episode (the streams carry it);
* ``scan_components`` (added in memworth's mixture detector; created in older files when
  they are opened): a mixture detector's CUSUM per memory and alternative. A scan saved
  without it has one alternative; one saved under other detector settings is not resumed.
* ``scan_frozen`` (added with the frozen baseline, ``change_frozen_baseline``; created in
  older files when they are opened): each memory's counts at the start of its current
  excursion. A scan saved without them resumes when every statistic is 0 and is read again
  otherwise.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from memworth.governance import GovernancePolicy
from memworth.logs.read import first_row
from memworth.logs.streams import CREDITED
from memworth.signals.change_detection import ExplainingAway
from memworth.signals.outcome_streams import EpisodeColumns, EpisodeRows, NamespaceScan

__all__ = ["DETECTOR_TABLES", "follow", "keep"]

DETECTOR_TABLES = """
CREATE TABLE IF NOT EXISTS scans (
    namespace VARCHAR PRIMARY KEY, detector VARCHAR, episodes BIGINT,
    reference_keep DOUBLE, reference_successes DOUBLE, reference_weight DOUBLE
);
CREATE TABLE IF NOT EXISTS scan_memories (
    namespace VARCHAR, row INTEGER, memory_id VARCHAR, statistic DOUBLE, observations DOUBLE,
    successes DOUBLE, expected DOUBLE, since BIGINT, first_alarm BIGINT, watched DOUBLE
);
ALTER TABLE scan_memories ADD COLUMN IF NOT EXISTS watched DOUBLE;
CREATE TABLE IF NOT EXISTS scan_shared (namespace VARCHAR, row INTEGER, seq BIGINT, other INTEGER, value DOUBLE);
CREATE TABLE IF NOT EXISTS scan_references (namespace VARCHAR, pos BIGINT, reference DOUBLE);
CREATE TABLE IF NOT EXISTS scan_components (namespace VARCHAR, row INTEGER, alternative INTEGER, value DOUBLE);
CREATE TABLE IF NOT EXISTS scan_frozen (
    namespace VARCHAR, row INTEGER, observations DOUBLE, successes DOUBLE, expected DOUBLE
);
"""

_FROZEN = ("observations", "successes", "expected")
"""The columns of ``scan_frozen``: ``CusumState.frozen``'s, in order."""

_CUSUM = ("statistic", "observations", "successes", "expected", "since", "first_alarm", "watched")


def settings_of(policy: GovernancePolicy) -> str:
    """The detector settings a saved scan was made with (a scan under other settings is not resumed).

    They name which items are observations (:data:`memworth.logs.streams.CREDITED`): a scan
    saved before credit-0 items were left out read them, and is read again from the kept log.
    They also say that the scan counts its watched observations (``watched``): one saved
    before it did (its ``watched`` column empty) is read again too.
    """
    # The explaining-away rule's settings say which flags it holds, not what the scan keeps
    # (its shared evidence is the same under any of them): ``apart`` is left out of the name,
    # so that a scan saved under one value resumes under another.
    rule = ExplainingAway()
    return (
        f"{policy.detector()!r} ExplainingAway(margin={rule.margin!r}, suspect={rule.suspect!r}, "
        f"tie={rule.tie!r}, hold={rule.hold!r}) reference_half_life={policy.change_reference_half_life!r}"
        f" counts=watched observations={CREDITED!r}"
        + (" frozen_baseline=True" if policy.change.frozen_baseline else "")
    )


def follow(con: Any, namespace: str, policy: GovernancePolicy) -> tuple[NamespaceScan, int]:
    """The namespace's scan advanced to its last kept episode, and how many episodes it had read before.

    Resumes the saved scan when there is one made with ``policy``'s detector settings
    (else starts afresh) and advances it over the kept episodes it has not read.
    """
    saved = first_row(
        con,
        "SELECT detector, episodes, reference_keep, reference_successes, reference_weight FROM scans WHERE namespace = ?",
        [namespace],
    )
    scan, read = NamespaceScan(policy), 0
    if saved is not None and saved[0] == settings_of(policy):
        try:
            scan, read = _resume(con, namespace, policy, int(saved[1]), saved[2:]), int(saved[1])
        except ValueError:  # saved parts that do not fit together: read the kept log again
            scan, read = NamespaceScan(policy), 0
    _advance(con, namespace, scan, read)
    return scan, read


def keep(con: Any, namespace: str, scan: NamespaceScan, read: int) -> None:
    """Save ``scan`` for the next run (``read``: the episodes the saved one had read, as :func:`follow` said)."""
    import pyarrow as pa

    if scan.episodes == read and first_row(
        con, "SELECT 1 FROM scans WHERE namespace = ? AND detector = ?", [namespace, settings_of(scan.policy)]
    ):
        return  # nothing new since it was saved
    snap = scan.snapshot() | {"reference": scan.reference_column()}
    size = len(scan.ids)
    memories = pa.table(
        {"namespace": pa.array([namespace] * size, pa.string()), "row": pa.array(np.arange(size, dtype=np.int32))}
        | {"memory_id": pa.array(scan.ids, pa.string())}
        | {k: pa.array(snap[k]) for k in _CUSUM}
    )
    starts = snap["shared_starts"]
    owner = np.repeat(np.arange(size, dtype=np.int32), np.diff(starts))
    shared = pa.table(
        {
            "namespace": pa.array([namespace] * owner.size, pa.string()),
            "row": pa.array(owner),
            "seq": pa.array(np.arange(owner.size, dtype=np.int64)),
            "other": pa.array(snap["shared_keys"].astype(np.int32)),
            "value": pa.array(snap["shared_values"]),
        }
    )
    fresh = snap["reference"][read:]
    references = pa.table(
        {
            "namespace": pa.array([namespace] * fresh.size, pa.string()),
            "pos": pa.array(np.arange(read + 1, read + 1 + fresh.size, dtype=np.int64)),
            "reference": pa.array(fresh),
        }
    )
    parts = snap.get("components")
    alternatives = 0 if parts is None else parts.shape[1]
    components = pa.table(
        {
            "namespace": pa.array([namespace] * (size * alternatives), pa.string()),
            "row": pa.array(np.repeat(np.arange(size, dtype=np.int32), alternatives)),
            "alternative": pa.array(np.tile(np.arange(alternatives, dtype=np.int32), size)),
            "value": pa.array(np.zeros(0) if parts is None else parts.ravel()),
        }
    )
    held = snap.get("frozen")
    frozen = pa.table(
        {
            "namespace": pa.array([namespace] * (0 if held is None else size), pa.string()),
            "row": pa.array(np.arange(0 if held is None else size, dtype=np.int32)),
        }
        | {k: pa.array(np.zeros(0) if held is None else held[:, i]) for i, k in enumerate(_FROZEN)}
    )
    for table in ("scan_memories", "scan_shared", "scan_components", "scan_frozen"):
        con.execute(f"DELETE FROM {table} WHERE namespace = ?", [namespace])
    con.execute("DELETE FROM scan_references WHERE namespace = ? AND pos > ?", [namespace, read])
    tables = (("scan_memories", memories), ("scan_shared", shared), ("scan_references", references))
    for name, arrow in (*tables, ("scan_components", components), ("scan_frozen", frozen)):
        con.register("kept_rows", arrow)
        con.execute(f"INSERT INTO {name} SELECT * FROM kept_rows")
        con.unregister("kept_rows")
    keep_rate, successes, weight = (float(v) for v in snap["reference_state"])
    con.execute(
        """
        INSERT INTO scans VALUES (?, ?, ?, ?, ?, ?)
        ON CONFLICT (namespace) DO UPDATE SET detector = excluded.detector, episodes = excluded.episodes,
            reference_keep = excluded.reference_keep, reference_successes = excluded.reference_successes,
            reference_weight = excluded.reference_weight
        """,
        [namespace, settings_of(scan.policy), scan.episodes, keep_rate, successes, weight],
    )


def _resume(con: Any, namespace: str, policy: GovernancePolicy, read: int, rate: Any) -> NamespaceScan:
    """The saved scan of ``namespace``, over its first ``read`` kept episodes (ValueError: it does not fit)."""
    memories = con.execute(
        f"SELECT memory_id, {', '.join(_CUSUM)} FROM scan_memories WHERE namespace = ? ORDER BY row", [namespace]
    ).fetchnumpy()
    ids = [str(m) for m in memories["memory_id"]]
    shared = con.execute(
        "SELECT row, other, value FROM scan_shared WHERE namespace = ? ORDER BY seq", [namespace]
    ).fetchnumpy()
    owner = np.asarray(shared["row"], dtype=np.int64)
    if np.any(np.diff(owner) < 0) or (owner.size and (owner.min() < 0 or owner.max() >= len(ids))):
        raise ValueError("the shared evidence is not in memory order")
    references = con.execute(
        "SELECT reference FROM scan_references WHERE namespace = ? AND pos <= ? ORDER BY pos", [namespace, read]
    ).fetchnumpy()
    episodes = con.execute(
        "SELECT success, confidence, context FROM episodes WHERE namespace = ? AND pos <= ? ORDER BY pos",
        [namespace, read],
    ).fetchnumpy()
    items = con.execute(
        f"""
        SELECT i.pos, m.row FROM items i JOIN scan_memories m ON m.namespace = i.namespace AND m.memory_id = i.memory_id
        WHERE i.namespace = ? AND i.pos <= ? AND i.{CREDITED} ORDER BY i.pos, m.row
        """,
        [namespace, read],
    ).fetchnumpy()
    pos = np.asarray(items["pos"], dtype=np.int64)
    kept = first_row(
        con, f"SELECT count(*) FROM items WHERE namespace = ? AND pos <= ? AND {CREDITED}", [namespace, read]
    )[0]
    if pos.size != kept:
        raise ValueError("kept items of memories the saved scan does not know")
    alternatives = policy.detector().alternatives
    if alternatives > 1:
        found = con.execute(
            "SELECT row, alternative, value FROM scan_components WHERE namespace = ? ORDER BY row, alternative",
            [namespace],
        ).fetchnumpy()
        values = np.asarray(found["value"], dtype=np.float64)
        if values.size != len(ids) * alternatives:
            raise ValueError("the saved scan keeps no CUSUM per alternative")
        cells = np.asarray(found["row"], dtype=np.int64) * alternatives + np.asarray(found["alternative"], dtype=np.int64)
        if not np.array_equal(cells, np.arange(values.size)):
            raise ValueError("the saved CUSUMs per alternative do not fit the memories")
        extra = {"components": values.reshape(len(ids), alternatives)}
    else:
        extra = {}
    if policy.change.frozen_baseline:
        found = con.execute(
            f"SELECT row, {', '.join(_FROZEN)} FROM scan_frozen WHERE namespace = ? ORDER BY row", [namespace]
        ).fetchnumpy()
        if np.array_equal(np.asarray(found["row"], dtype=np.int64), np.arange(len(ids))) and len(ids):
            extra["frozen"] = np.column_stack([np.asarray(found[k], dtype=np.float64) for k in _FROZEN])
        # else saved without them: NamespaceScan.resume takes the live counts, or refuses
    snapshot = extra | {k: np.asarray(memories[k]) for k in _CUSUM} | {
        "shared_starts": np.r_[0, np.cumsum(np.bincount(owner, minlength=len(ids)))].astype(np.int64),
        "shared_keys": np.asarray(shared["other"], dtype=np.int64),
        "shared_values": np.asarray(shared["value"], dtype=np.float64),
        "reference_state": np.asarray([float(v) for v in rate], dtype=np.float64),
        "reference": np.asarray(references["reference"], dtype=np.float64),
    }
    columns = EpisodeColumns.of_arrays(
        ids,
        np.asarray(items["row"], dtype=np.int32),
        np.r_[0, np.cumsum(np.bincount(pos, minlength=read + 1)[1:])].astype(np.int64),
        np.asarray(episodes["success"], dtype=bool),
        np.asarray(episodes["confidence"], dtype=np.float64),
        _contexts(episodes["context"]),
    )
    return NamespaceScan.resume(policy, columns, snapshot, snapshot.pop("reference"))


_ADVANCE_EPISODES = 1 << 18
"""Most kept episodes :func:`_advance` reads from DuckDB and hands to the scan at once (as
integer arrays: a few dozen bytes an item). The scan advanced chunk by chunk is the scan
advanced over all of them at once."""


def _advance(con: Any, namespace: str, scan: NamespaceScan, read: int) -> None:
    """Advance ``scan`` over the kept episodes of ``namespace`` after the first ``read``,
    :data:`_ADVANCE_EPISODES` at a time, as integer rows (:meth:`NamespaceScan.advance_rows`).

    Each memory's row is the one a scan of the whole log gives it
    (:func:`memworth.logs.streams.streams_of`): those the scan knows keep theirs, the others
    follow in order of first retrieval after ``read``, ties by id; DuckDB numbers them once
    (a temporary table, ``scan_rows``) and each chunk's items come back as (episode, row)
    in the rows' order, so no item becomes a Python string. Items without credit are no
    observations (:data:`memworth.logs.streams.CREDITED`).
    """
    import pyarrow as pa

    after = first_row(con, "SELECT count(*) FROM episodes WHERE namespace = ? AND pos > ?", [namespace, read])
    end = read + (0 if after is None else int(after[0]))
    if end <= read:
        return
    known = len(scan.ids)
    con.register(
        "scan_known",
        pa.table({"memory_id": pa.array(scan.ids, pa.string()), "row": pa.array(np.arange(known, dtype=np.int32))}),
    )
    try:
        con.execute(
            f"""
            CREATE OR REPLACE TEMP TABLE scan_rows AS
            SELECT memory_id, row FROM scan_known
            UNION ALL
            SELECT memory_id, CAST(? + row_number() OVER (ORDER BY first, memory_id) - 1 AS INTEGER) AS row
            FROM (SELECT i.memory_id, min(i.pos) AS first FROM items i ANTI JOIN scan_known k ON k.memory_id = i.memory_id
                  WHERE i.namespace = ? AND i.pos > ? AND i.{CREDITED} GROUP BY i.memory_id)
            """,
            [known, namespace, read],
        )
    finally:
        con.unregister("scan_known")
    try:
        got = con.execute("SELECT memory_id FROM scan_rows WHERE row >= ? ORDER BY row", [known]).fetchnumpy()
        fresh = np.asarray(got["memory_id"], dtype=object).tolist()
        del got
        for start in range(read, end, _ADVANCE_EPISODES):
            _advance_chunk(con, namespace, scan, start, min(start + _ADVANCE_EPISODES, end), fresh, known)
    finally:
        con.execute("DROP TABLE IF EXISTS scan_rows")


def _advance_chunk(
    con: Any, namespace: str, scan: NamespaceScan, read: int, upto: int, fresh: list[str], known: int
) -> None:
    """Advance ``scan`` over the kept episodes of ``namespace`` after the first ``read``, up to
    ``upto``: each episode's items as rows of ``scan_rows``, in the rows' order. ``fresh``:
    the memories numbered from ``known`` on, by row; those first retrieved in this chunk are
    handed to the scan with it."""
    episodes = con.execute(
        "SELECT success, confidence, context FROM episodes WHERE namespace = ? AND pos > ? AND pos <= ? ORDER BY pos",
        [namespace, read, upto],
    ).fetchnumpy()
    count = len(episodes["success"])
    if count == 0:
        return
    items = con.execute(
        f"""
        SELECT i.pos, r.row FROM items i JOIN scan_rows r ON r.memory_id = i.memory_id
        WHERE i.namespace = ? AND i.pos > ? AND i.pos <= ? AND i.{CREDITED} ORDER BY i.pos, r.row
        """,
        [namespace, read, upto],
    ).fetchnumpy()
    pos = np.asarray(items["pos"], dtype=np.int64)
    rows = np.asarray(items["row"], dtype=np.int32)
    del items
    starts = np.searchsorted(pos, np.arange(read + 1, read + count + 2))
    have = len(scan.ids)
    top = int(rows.max()) + 1 if rows.size else have
    scan.advance(
        EpisodeRows(scan.ids, fresh[have - known : max(top, have) - known], rows, starts),
        np.asarray(episodes["success"], dtype=bool),
        np.asarray(episodes["confidence"], dtype=np.float64),
        _contexts(episodes["context"]),
    )


def _contexts(values: Any) -> list[str | None]:
    return [None if c is None or c != c else str(c) for c in np.asarray(values, dtype=object)]
