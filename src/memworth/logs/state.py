"""What a scoring run keeps: counts per memory and the ordered episode log, in DuckDB tables.

A run adds new rows to these tables; with ``--state FILE`` they live in a DuckDB file
between runs, so the next run reads only files it has not read and merges exactly:
counts add, decayed counts are aged by the episodes that came since and then add, and
the change detectors, kept in the state too, are advanced over the new episodes only
(:mod:`memworth.logs.detectors`). Sums are SQL ``GROUP BY``; credit that is not uniform is split by
:func:`memworth.credit.normalise_rows`, the library's own rule.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from memworth.credit import check_w_min, normalise_rows
from memworth.decay import decay_factor
from memworth.errors import ValidationError
from memworth.logs.detectors import DETECTOR_TABLES
from memworth.logs.read import LogError, check_episodes, first_row, in_namespace

__all__ = [
    "CREDITS",
    "DECAY_HORIZON",
    "Counting",
    "CreditError",
    "create_tables",
    "decay_term",
    "ingest",
    "new_files",
    "split_credit",
]

CREDITS = ("uniform", "score", "given")

VERSION = 4
"""The state file's layout: 1 kept counts and the episode log; 2 keeps the change detectors too
(a version 1 file is read by advancing the detectors over its kept log once, then upgraded);
3 keys kept episodes by (namespace, episode_id), not by id alone (an older file's episode
table is rebuilt with that key by :func:`create_tables`); 4 keeps each memory's count of
watched observations (``scan_memories.watched``, what its change e-value divides by: an older
file gets the column and its saved scans are read again from its kept log). A release that
reads up to 3 refuses a version 4 file rather than writing its 9-column rows into it."""

TABLES = """
CREATE TABLE IF NOT EXISTS settings (key VARCHAR PRIMARY KEY, value VARCHAR);
CREATE TABLE IF NOT EXISTS files (path VARCHAR PRIMARY KEY, size BIGINT, modified BIGINT, rows BIGINT);
CREATE TABLE IF NOT EXISTS clocks (namespace VARCHAR PRIMARY KEY, episodes BIGINT, last_ts DOUBLE);
CREATE TABLE IF NOT EXISTS episodes (
    namespace VARCHAR, pos BIGINT, episode_id VARCHAR, ts DOUBLE, success BOOLEAN,
    confidence DOUBLE, source VARCHAR, context VARCHAR, PRIMARY KEY (namespace, episode_id)
);
CREATE TABLE IF NOT EXISTS items (namespace VARCHAR, pos BIGINT, memory_id VARCHAR, credit DOUBLE);
CREATE TABLE IF NOT EXISTS counts (
    namespace VARCHAR, memory_id VARCHAR, success DOUBLE, failure DOUBLE, n DOUBLE,
    decayed_success DOUBLE, decayed_failure DOUBLE, decayed_n DOUBLE, PRIMARY KEY (namespace, memory_id)
);
"""


DECAY_HORIZON = 1080
"""Half-lives past which an episode's decay term is exactly 0.0: ``2 ** -1080`` is below half
the least double (``2 ** -1074``), so :func:`decay_term` rounds it, and anything smaller, to 0."""


def decay_term(distance: str, half_life: float) -> str:
    """SQL for the decay of an episode ``distance`` episodes (SQL, an integer) before its namespace's newest.

    The one decay expression of the SQL sums (:func:`ingest`, :mod:`memworth.logs.fast`):
    ``pow(2.0, -distance / half_life)``, as ``Tracker(half_life=...)`` ages counts.

    Examples
    --------
    >>> decay_term("k.episodes - i.pos", 100)
    'pow(2.0, -(k.episodes - i.pos) / 100.0)'
    """
    return f"pow(2.0, -({distance}) / {float(half_life)!r})"


@dataclass(frozen=True)
class Counting:
    """How rows become counts: the credit scheme, its floor and the decay half-life (episodes).

    A state file keeps the counting it was made with; a later run with another is refused,
    since counts under two schemes do not add up.
    """

    credit: str = "uniform"
    w_min: float = 0.0
    half_life: float = 100.0

    def validate(self) -> None:
        if self.credit not in CREDITS:
            raise ValidationError("credit", f"must be one of {', '.join(CREDITS)}, got {self.credit!r}")
        check_w_min(self.w_min, 1)
        decay_factor(0.0, self.half_life)  # refuses a half-life that is not finite and > 0

    @property
    def column(self) -> str | None:
        """The log column credit is split by (``None``: uniform)."""
        return {"uniform": None, "score": "score", "given": "weight"}[self.credit]


def create_tables(con: Any, counting: Counting) -> None:
    """Make the tables (if new) and check that the state was made with ``counting``."""
    found = first_row(con, "SELECT 1 FROM information_schema.tables WHERE table_name = 'settings'")
    version = first_row(con, "SELECT value FROM settings WHERE key = 'version'") if found else None
    if version is not None and int(version[0]) > VERSION:
        raise ValidationError(
            "state", f"was written by a newer memworth (state version {version[0]}, this one reads up to {VERSION})"
        )
    if found and (version is None or int(version[0]) < 3):  # version 1 wrote no version
        _key_episodes_by_namespace(con)
    con.execute(TABLES)
    con.execute(DETECTOR_TABLES)
    con.execute(
        "INSERT INTO settings VALUES ('version', ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        [str(VERSION)],
    )
    want = json.dumps(asdict(counting), sort_keys=True)
    got = first_row(con, "SELECT value FROM settings WHERE key = 'counting'")
    if got is None:
        con.execute("INSERT INTO settings VALUES ('counting', ?)", [want])
    elif got[0] != want:
        raise ValidationError(
            "state", f"was made with {got[0]}, this run counts with {want}; counts under both do not add up"
        )


def _key_episodes_by_namespace(con: Any) -> None:
    """Rebuild a version 1-2 state's ``episodes`` table (keyed by ``episode_id`` alone) with the
    key (namespace, episode_id); DuckDB cannot change a primary key in place."""
    if first_row(con, "SELECT 1 FROM information_schema.tables WHERE table_name = 'episodes'") is None:
        return
    con.execute("ALTER TABLE episodes RENAME TO episodes_by_id")
    con.execute(TABLES)
    con.execute(
        "INSERT INTO episodes SELECT namespace, pos, episode_id, ts, success, confidence, source, context "
        "FROM episodes_by_id"
    )
    con.execute("DROP TABLE episodes_by_id")


def new_files(con: Any, files: Sequence[str]) -> list[str]:
    """The files the state has not read yet (in the order given); one read before but changed since is refused."""
    out: list[str] = []
    for path in files:
        key = str(Path(path).resolve())
        if not Path(path).is_file():
            raise LogError(path, None, "file", "no such file")
        st = os.stat(path)
        seen = first_row(con, "SELECT size, modified FROM files WHERE path = ?", [key])
        if seen is None:
            if key not in (str(Path(p).resolve()) for p in out):
                out.append(path)
        elif (seen[0], seen[1]) != (st.st_size, st.st_mtime_ns):
            raise LogError(
                path, None, "file", "was scored before (it is in the state) and has changed since; rescore from scratch"
            )
    return out


def ingest(con: Any, files: Sequence[str], counting: Counting, *, keep_log: bool = True) -> int:
    """Add the checked rows of table ``incoming`` (read from ``files``) to the state; return episodes added.

    The episodes are checked here (:func:`memworth.logs.read.check_episodes`, in the same
    pass that groups the rows into episodes). ``keep_log``: also append the episodes and
    their items to the kept log (tables ``episodes`` and ``items``); a run that neither
    keeps a state file nor reads the log afterwards (:func:`memworth.logs.streams.reads_log`)
    has no use for it.
    """
    check_episodes(con, list(files), 0, into="episode_rows")
    _check_new_episodes(con, files)
    _order(con, files)
    con.execute(
        """
        CREATE OR REPLACE TEMP TABLE new_episodes AS
        SELECT e.namespace, coalesce(c.episodes, 0) + row_number() OVER (
                   PARTITION BY e.namespace ORDER BY e.ts, e.file, e.row) AS pos,
               e.episode_id, e.ts, e.success, e.confidence, e.source, e.context, e.k
        FROM episode_rows e
        LEFT JOIN clocks c ON c.namespace = e.namespace
        """
    )
    _credit(con, counting, files)
    added = int(first_row(con, "SELECT count(*) FROM new_episodes")[0])
    # Each namespace's clock moves on by its new episodes: old decayed counts age by that many.
    con.execute(
        """
        CREATE OR REPLACE TEMP TABLE new_clocks AS
        SELECT namespace, max(pos) AS episodes, max(ts) AS last_ts, max(pos) - coalesce(min(pos) - 1, 0) AS added
        FROM new_episodes GROUP BY namespace
        """
    )
    hl = float(counting.half_life)
    term = decay_term("k.episodes - i.pos", hl)
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE new_counts AS
        SELECT i.namespace, i.memory_id,
               fsum(i.credit * i.confidence) FILTER (WHERE i.success) AS success,
               fsum(i.credit * i.confidence) FILTER (WHERE NOT i.success) AS failure,
               count(*) AS n,
               fsum(i.credit * i.confidence * {term}) FILTER (WHERE i.success) AS decayed_success,
               fsum(i.credit * i.confidence * {term}) FILTER (WHERE NOT i.success) AS decayed_failure,
               fsum({term}) AS decayed_n
        FROM new_items i
        JOIN new_clocks k ON k.namespace = i.namespace
        GROUP BY i.namespace, i.memory_id
        """
    )
    con.execute(
        f"""
        UPDATE counts SET decayed_success = decayed_success * {decay_term("k.added", hl)},
                          decayed_failure = decayed_failure * {decay_term("k.added", hl)},
                          decayed_n = decayed_n * {decay_term("k.added", hl)}
        FROM new_clocks k WHERE counts.namespace = k.namespace
        """
    )
    con.execute(
        """
        INSERT INTO counts
        SELECT namespace, memory_id, coalesce(success, 0), coalesce(failure, 0), n,
               coalesce(decayed_success, 0), coalesce(decayed_failure, 0), decayed_n FROM new_counts
        ON CONFLICT (namespace, memory_id) DO UPDATE SET
            success = counts.success + excluded.success, failure = counts.failure + excluded.failure,
            n = counts.n + excluded.n, decayed_success = counts.decayed_success + excluded.decayed_success,
            decayed_failure = counts.decayed_failure + excluded.decayed_failure,
            decayed_n = counts.decayed_n + excluded.decayed_n
        """
    )
    if keep_log:
        con.execute(
            "INSERT INTO episodes SELECT namespace, pos, episode_id, ts, success, confidence, source, context "
            "FROM new_episodes"
        )
        con.execute("INSERT INTO items SELECT namespace, pos, memory_id, credit FROM new_items")
    con.execute(
        """
        INSERT INTO clocks SELECT namespace, episodes, last_ts FROM new_clocks
        ON CONFLICT (namespace) DO UPDATE SET episodes = excluded.episodes, last_ts = excluded.last_ts
        """
    )
    per_file = dict(con.execute("SELECT file, count(*) FROM incoming GROUP BY file").fetchall())
    for number, path in enumerate(files):
        st = os.stat(path)
        rows = per_file.get(number, 0)
        con.execute(
            "INSERT INTO files VALUES (?, ?, ?, ?)", [str(Path(path).resolve()), st.st_size, st.st_mtime_ns, rows]
        )
    return added


def _check_new_episodes(con: Any, files: Sequence[str]) -> None:
    """Refuse rows of an episode the state has scored already (an episode has one outcome)."""
    seen = first_row(
        con,
        "SELECT i.file, i.row, i.episode_id, i.namespace FROM incoming i JOIN episodes e USING (namespace, episode_id) "
        "ORDER BY i.file, i.row LIMIT 1",
    )
    if seen is not None:
        raise LogError(
            files[seen[0]],
            int(seen[1]),
            "episode_id",
            f"episode {seen[2]!r}{in_namespace(seen[3])} was scored in an earlier run (it is in the state); "
            "an episode has one outcome",
        )


def _order(con: Any, files: Sequence[str]) -> None:
    """Refuse new episodes older than the newest the state holds: detectors read outcomes in time order."""
    late = first_row(
        con,
        """
        SELECT i.file, i.row, i.ts, c.last_ts FROM incoming i JOIN clocks c USING (namespace)
        WHERE i.ts < c.last_ts ORDER BY i.file, i.row LIMIT 1
        """,
    )
    if late is not None:
        raise LogError(
            files[late[0]],
            int(late[1]),
            "timestamp",
            f"{late[2]!r} is older than the newest outcome in the state ({late[3]!r}); incremental runs must add "
            "later outcomes (rescore from scratch to insert earlier ones)",
        )


def _credit(con: Any, counting: Counting, files: Sequence[str]) -> None:
    """View ``new_items``: each row's credit, 1/k or its score / weight split by ``normalise_rows``,
    beside its episode's position, outcome and confidence."""
    k_max = first_row(con, "SELECT max(k) FROM new_episodes")[0]
    if k_max is not None:
        check_w_min(counting.w_min, int(k_max))
    base = """
        SELECT e.namespace, e.pos, i.memory_id, {credit} AS credit, i.file, i.row
        FROM incoming i JOIN new_episodes e USING (namespace, episode_id)
    """
    if counting.column is None:  # a view: its join runs where it is read, nothing is copied
        con.execute(
            """
            CREATE OR REPLACE TEMP VIEW new_items AS
            SELECT e.namespace, e.pos, i.memory_id, 1.0 / e.k AS credit, e.success, e.confidence
            FROM incoming i JOIN new_episodes e USING (namespace, episode_id)
            """
        )
        return
    import pyarrow as pa

    rows = con.sql(
        base.format(credit=f"i.{counting.column}") + " ORDER BY e.namespace, e.pos, i.file, i.row"
    ).to_arrow_table()
    values = rows.column("credit").to_numpy(zero_copy_only=False).astype(float)
    ns = rows.column("namespace").to_numpy(zero_copy_only=False)
    pos = rows.column("pos").to_numpy()
    starts = np.flatnonzero(np.r_[True, (pos[1:] != pos[:-1]) | (ns[1:] != ns[:-1])])
    try:
        credit = split_credit(values, starts, counting)
    except CreditError as exc:
        raise LogError(
            files[rows.column("file")[exc.at].as_py()],
            int(rows.column("row")[exc.at].as_py()),
            counting.column,
            exc.reason,
        ) from None
    table = pa.table(
        {
            "namespace": rows.column("namespace"),
            "pos": rows.column("pos"),
            "memory_id": rows.column("memory_id"),
            "credit": credit,
        }
    )
    con.register("credited", table)
    con.execute("CREATE OR REPLACE TEMP TABLE credited_items AS SELECT * FROM credited")
    con.unregister("credited")
    con.execute(
        """
        CREATE OR REPLACE TEMP VIEW new_items AS
        SELECT i.namespace, i.pos, i.memory_id, i.credit, e.success, e.confidence
        FROM credited_items i JOIN new_episodes e ON e.namespace = i.namespace AND e.pos = i.pos
        """
    )


class CreditError(ValueError):
    """An item whose episode's credit cannot be split: ``at`` is its index, ``reason`` says why."""

    def __init__(self, at: int, reason: str) -> None:
        super().__init__(reason)
        self.at, self.reason = at, reason


def split_credit(values: np.ndarray, starts: np.ndarray, counting: Counting) -> np.ndarray:
    """Each item's credit: its episode's ``values`` (scores or weights) split by ``normalise_rows``.

    Both engines call this (DuckDB in :func:`ingest`, Spark per partition). ``values``
    has one entry per item, the items of an episode side by side; ``starts`` is the
    index of each episode's first item. Under uniform credit it is ``1/k``.

    Raises
    ------
    CreditError
        An item has no value (NaN) or its episode's values cannot be split (sum to zero);
        ``at`` is the item's index.
    """
    sizes = np.diff(np.r_[starts, values.size])
    if counting.column is None:
        return np.repeat(1.0 / sizes, sizes)
    missing = np.flatnonzero(np.isnan(values))
    if missing.size:
        raise CreditError(
            int(missing[0]), f"is empty; --credit {counting.credit} needs a {counting.column} on every row"
        )
    credit = np.empty(values.size)
    for k in np.unique(sizes):  # episodes of k items at once, as one matrix
        first = starts[sizes == k]
        idx = first[:, None] + np.arange(k)[None, :]
        try:
            credit[idx] = normalise_rows(values[idx], w_min=counting.w_min, field=counting.column)
        except ValidationError as exc:
            zero = first[values[idx].sum(axis=1) <= 0]
            at = int(zero[0]) if zero.size else int(first[0])
            raise CreditError(at, exc.reason) from None
    return credit
