"""``memworth score``: worth, intervals, class, change alarm and proposal of every memory in a log.

Counts are SQL sums in DuckDB (:mod:`memworth.logs.state`); everything read from them
comes from the library, with the store's settings object
(:class:`memworth.governance.GovernancePolicy`): raw worth, Beta and Wilson intervals,
decayed worth (:class:`memworth.estimators.Decayed`), the value class
(``policy.taxonomy()``), the sequential deprecation rule (``policy.sequential``), the
change-point alarm (the store's CUSUM, :mod:`memworth.logs.streams`) and the proposal
with its reason (``policy.propose``).
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path
from typing import Any

import numpy as np

from memworth.counts import Counts, CountsTable
from memworth.errors import MemworthError, ValidationError
from memworth.estimators import BetaBound, Decayed, RawWorth, WilsonBound
from memworth.governance import GovernancePolicy
from memworth.logs.fast import SUMMED, fast_counts
from memworth.logs.format import ColumnMap
from memworth.logs.read import read_logs
from memworth.logs.state import Counting, create_tables, ingest, new_files
from memworth.logs.streams import Streams, namespace_streams, reads_log
from memworth.outputs import file_to_write
from memworth.progress import Progress
from memworth.progress import bar as progress_bar

__all__ = [
    "COLUMNS_OUT",
    "COUNT_COLUMNS",
    "SCORING_MEMORY",
    "STRING_BYTES",
    "ScoreSettings",
    "Scored",
    "distinct_rows",
    "per_distinct_counts",
    "score_files",
    "score_namespace",
    "score_state",
    "string_chunks",
    "to_arrow",
]


@dataclass(frozen=True)
class ScoreSettings:
    """Everything a scoring run is settled by: counting, governance, interval level, how to read the logs."""

    counting: Counting = field(default_factory=Counting)
    policy: GovernancePolicy = field(default_factory=GovernancePolicy)
    level: float = 0.95
    columns: ColumnMap = field(default_factory=ColumnMap)
    fmt: str | None = None


@dataclass
class Scored:
    """What a run found: one row per memory (a pyarrow Table) and what it read."""

    table: Any
    files_read: list[str]
    files_skipped: list[str]
    rows_read: int
    episodes_added: int


def _connect(path: str | None, memory_limit: str | None = None) -> Any:
    try:
        import duckdb
    except ImportError:  # pragma: no cover - exercised only without the extra
        raise MemworthError("scoring logs needs DuckDB and pyarrow: pip install 'memworth[logs]'") from None
    con = duckdb.connect(":memory:" if path is None else path)
    con.execute("SET enable_progress_bar = false")  # the library prints nothing; the CLI has its own bar
    if memory_limit is not None:
        try:
            con.execute("SET memory_limit = ?", [memory_limit])
        except duckdb.Error as exc:
            con.close()
            raise ValidationError(
                "memory_limit", f"must be a size such as '4GB', got {memory_limit!r} ({exc})"
            ) from None
    return con


def score_files(
    files: Sequence[str],
    settings: ScoreSettings,
    *,
    state: str | Path | None = None,
    progress: Progress = False,
    memory_limit: str | None = None,
) -> Scored:
    """Read ``files`` (only those the ``state`` file has not read), merge, and score every memory.

    The state file is written only when everything succeeded (a copy is worked on, then
    renamed over it); a refused run leaves it as it was. ``memory_limit`` (e.g. ``"4GB"``)
    caps DuckDB's memory; past it DuckDB works on disk.
    """
    settings.counting.validate()
    if isinstance(settings.level, bool) or not isinstance(settings.level, (int, float)) or not 0 < settings.level < 1:
        raise ValidationError("level", f"must be a number in (0, 1), got {settings.level!r}")
    # Always a database file, so DuckDB can keep the log on disk rather than in memory:
    # a scratch one without --state, else a copy of the state renamed over it at the end.
    scratch = tempfile.mkdtemp(prefix="memworth-score-")
    work: str | None = os.path.join(scratch, "work.duckdb")
    if state is not None:
        file_to_write(state, "state")
        fd, work = tempfile.mkstemp(prefix=Path(state).name + ".", suffix=".tmp", dir=Path(state).resolve().parent)
        os.close(fd)
        os.unlink(work)
        if Path(state).exists():
            shutil.copyfile(state, work)
    ahead = _import_ahead()
    con = _connect(work, memory_limit)
    try:
        create_tables(con, settings.counting)
        todo = new_files(con, files)
        needs = [settings.counting.column] if settings.counting.column else []
        keep_log = state is not None or reads_log(settings.policy)
        summed = None
        if todo and not keep_log and settings.counting.column is None:  # only the sums are wanted: one pass
            c = settings.counting
            summed = fast_counts(con, todo, settings.columns, settings.fmt, c.half_life, c.w_min)
        if summed is not None:
            rows, added = summed
            done = progress_bar(len(todo), "files", progress)
            done.update(len(todo))
            done.close()
        else:  # a state to keep, a log to read later, credit to split, or a log to refuse: the checked path
            rows = read_logs(con, todo, settings.columns, fmt=settings.fmt, needs=needs, progress=progress) if todo else 0
            added = ingest(con, todo, settings.counting, keep_log=keep_log) if todo else 0
        ahead.join()
        with _scoring_memory(con, memory_limit, settings.policy.change.enabled):
            table = score_state(con, settings, progress=progress)
        if state is not None:
            con.execute("CHECKPOINT")
        con.close()
        if state is not None and work is not None:
            os.replace(work, state)
            work = None
        skipped = [f for f in files if f not in todo]
        return Scored(table, list(todo), skipped, rows, added)
    finally:
        con.close()
        if work is not None:
            for leftover in (work, work + ".wal"):
                if os.path.exists(leftover):
                    os.unlink(leftover)
        shutil.rmtree(scratch, ignore_errors=True)


SCORING_MEMORY = 10**9
"""Bytes of DuckDB's memory cap while the change detectors read the kept log and the memories are
scored (:func:`_scoring_memory`), unless the run's own cap is lower."""

_UNITS = {"bytes": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}


def _setting_bytes(text: str) -> float | None:
    """DuckDB's ``current_setting('memory_limit')`` (e.g. ``3.7 GiB``) in bytes; None if not read."""
    number, _, unit = text.strip().partition(" ")
    try:
        return float(number) * _UNITS[unit.strip()]
    except (KeyError, ValueError):
        return None


@contextmanager
def _scoring_memory(con: Any, memory_limit: str | None, detecting: bool) -> Iterator[None]:
    """Hold DuckDB to :data:`SCORING_MEMORY` while the scores are made with change detection on.

    The sums fill DuckDB's buffer pool up to its cap (about 3.9 GB of a 4 GB cap at 100M
    rows) and DuckDB keeps it; the detectors' read then grows the Python side by a few GB on
    top. Lowering the cap makes DuckDB let go of the cached pages (the log is in the
    database file); the queries after it (the detectors' chunks, one namespace's counts)
    need far less, and spill to disk past it. The run's cap is set back afterwards."""
    if not detecting:
        yield
        return
    now = con.execute("SELECT current_setting('memory_limit')").fetchall()[0][0]
    held = _setting_bytes(str(now))
    if held is None or held <= SCORING_MEMORY:
        yield
        return
    con.execute("SET memory_limit = ?", [f"{SCORING_MEMORY}B"])
    try:
        yield
    finally:
        if memory_limit is None:
            con.execute("RESET memory_limit")
        else:
            con.execute("SET memory_limit = ?", [memory_limit])


def _import_ahead() -> threading.Thread:
    """Import what scoring needs after the SQL (scipy's special functions and pyarrow, about
    half a second) in a thread, while DuckDB reads the logs (it lets go of the GIL meanwhile)."""

    def load() -> None:
        try:
            import pyarrow  # noqa: F401
            import scipy.special  # noqa: F401
        except ImportError:  # pragma: no cover - said where they are used
            pass

    thread = threading.Thread(target=load, name="memworth-import-ahead", daemon=True)
    thread.start()
    return thread


COLUMNS_OUT: tuple[tuple[str, str], ...] = (
    ("namespace", "string"),
    ("memory_id", "string"),
    ("success", "double"),
    ("failure", "double"),
    ("n", "double"),
    ("evidence", "double"),
    ("worth", "double"),
    ("beta_lower", "double"),
    ("beta_upper", "double"),
    ("wilson_lower", "double"),
    ("wilson_upper", "double"),
    ("decayed_success", "double"),
    ("decayed_failure", "double"),
    ("decayed_n", "double"),
    ("decayed_worth", "double"),
    ("value_class", "string"),
    ("change_statistic", "double"),
    ("change_alarm", "bool"),
    ("change_point", "int64"),
    ("change_held_by", "string"),
    ("sequential_lower", "double"),
    ("sequential_upper", "double"),
    ("sequential_deprecate", "bool"),
    ("action", "string"),
    ("proposed", "string"),
    ("reason", "string"),
)
"""The columns of a scored table, in order, with their types (``change_point`` and the text
columns after ``value_class`` may be null). Both engines give exactly these."""

COUNT_COLUMNS = ("success", "failure", "n", "decayed_success", "decayed_failure", "decayed_n")
"""The per-memory sums an engine hands to :func:`score_namespace`."""


_SUMS_FROM = {
    "counts": (
        "SELECT DISTINCT namespace FROM counts ORDER BY namespace",
        "SELECT count(*) FROM counts",
        "SELECT namespace, memory_id, success, failure, n, decayed_success, decayed_failure, decayed_n "
        "FROM counts WHERE namespace = ? ORDER BY memory_id",
    ),
    "fast_counts": (
        "SELECT DISTINCT namespace FROM fast_counts ORDER BY namespace",
        "SELECT count(*) FROM fast_counts",
        "SELECT namespace, memory_id, success, failure, n, decayed_success, decayed_failure, decayed_n "
        "FROM fast_counts WHERE namespace = ? ORDER BY memory_id",
    ),
}
"""The queries :func:`score_state` reads each memory's sums with, per table it may read them from
(``fast_counts``: :data:`memworth.logs.fast.SUMMED`)."""


def score_state(con: Any, settings: ScoreSettings, *, progress: Progress = False) -> Any:
    """One row per memory of the state tables of ``con``, as a pyarrow Table (sorted by namespace, memory).

    The sums are read from ``counts``, or from :data:`memworth.logs.fast.SUMMED` when
    :func:`memworth.logs.fast.fast_counts` left them there (a run that keeps no state)."""
    summed = con.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE temporary AND table_name = ?", [SUMMED]
    ).fetchall()[0][0]
    distinct_namespaces, count_all, one_namespace = _SUMS_FROM[SUMMED if summed else "counts"]
    namespaces = [str(r[0]) for r in con.execute(distinct_namespaces).fetchall()]
    total = int(con.execute(count_all).fetchall()[0][0])
    bar = progress_bar(total, "proposals", progress)
    parts: list[dict[str, Any]] = []
    for ns in namespaces:
        got = con.execute(one_namespace, [ns]).fetchnumpy()
        counts = {"memory_id": np.asarray(got["memory_id"], dtype=object)} | {
            c: np.asarray(got[c], dtype=float) for c in COUNT_COLUMNS
        }
        parts.append(score_namespace(settings, ns, counts, namespace_streams(con, ns, settings.policy)))
        bar.update(counts["memory_id"].size)
    bar.close()
    return to_arrow(parts)


def to_arrow(parts: Sequence[dict[str, Any]]) -> Any:
    """The scored table (pyarrow) from :func:`score_namespace`'s parts, in the order given."""
    import pyarrow as pa

    columns: dict[str, Any] = {}
    for name, kind in COLUMNS_OUT:
        values = [part[name] for part in parts]
        if kind == "string":
            flat = list(chain.from_iterable(c.tolist() if isinstance(c, np.ndarray) else c for c in values))
            columns[name] = _arrow_strings(flat) if name == "memory_id" else _arrow_repeated(flat)
        else:
            arr = np.concatenate([np.asarray(v) for v in values]) if values else np.zeros(0)
            columns[name] = _arrow_numbers(arr, kind, arr < 0 if name == "change_point" else None)
    return pa.table(columns)


def _arrow_numbers(values: np.ndarray, kind: str, null: np.ndarray | None) -> Any:
    """A pyarrow array of ``values`` (``kind``: double, int64 or bool; ``null``: where it is null)
    built from its buffers: ``pa.array`` imports pandas (seconds, on every run)."""
    import pyarrow as pa

    size = int(values.size)
    validity = None
    nulls = 0
    if null is not None and null.any():
        nulls = int(null.sum())
        validity = pa.py_buffer(np.packbits(~null, bitorder="little"))
    if kind == "bool":
        return pa.Array.from_buffers(
            pa.bool_(), size, [validity, pa.py_buffer(np.packbits(values.astype(bool), bitorder="little"))], nulls
        )
    dtype, arrow = (np.int64, pa.int64()) if kind == "int64" else (np.float64, pa.float64())
    return pa.Array.from_buffers(arrow, size, [validity, pa.py_buffer(np.ascontiguousarray(values, dtype=dtype))], nulls)


STRING_BYTES = 2**31 - 1
"""Most bytes of text one pyarrow ``string`` array holds (its offsets are int32)."""


def string_chunks(offsets: np.ndarray, limit: int = STRING_BYTES) -> list[tuple[int, int]]:
    """Row ranges ``[start, end)`` that split strings with byte ``offsets`` (one more than the
    strings, from 0) into as few pyarrow ``string`` arrays as fit: each at most ``limit`` bytes.

    One range when the text fits one array (every scored table short of 2 GiB of one
    column's text); a column past it becomes a chunked ``string`` column, its type unchanged.

    Examples
    --------
    >>> string_chunks(np.array([0, 3, 6, 9]), limit=6)
    [(0, 2), (2, 3)]
    >>> string_chunks(np.array([0]))
    [(0, 0)]
    """
    rows = offsets.size - 1
    chunks: list[tuple[int, int]] = []
    start = 0
    while start < rows:
        end = int(np.searchsorted(offsets, offsets[start] + limit, side="right")) - 1
        if end <= start:
            raise MemworthError(
                f"a text value of {int(offsets[start + 1] - offsets[start])} bytes is more than one "
                f"pyarrow string holds ({limit})"
            )
        chunks.append((start, min(end, rows)))
        start = chunks[-1][1]
    return chunks or [(0, 0)]


def _arrow_strings(values: Sequence[Any], limit: int = STRING_BYTES) -> Any:
    """A pyarrow string array of ``values`` (``None``: null), built from its buffers (see
    :func:`_arrow_numbers`); past ``limit`` bytes of text a chunked array (:func:`string_chunks`)."""
    import pyarrow as pa

    null = np.fromiter((v is None for v in values), dtype=bool, count=len(values))
    texts = ["" if v is None else str(v) for v in values] if null.any() else list(map(str, values))
    joined = "".join(texts)
    data_bytes = joined.encode()
    if len(data_bytes) == len(joined):  # ASCII (nearly every id): a text's bytes are its characters
        sizes = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
    else:
        sizes = np.fromiter((len(t.encode()) for t in texts), dtype=np.int64, count=len(texts))
    offsets = np.zeros(len(values) + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    data = pa.py_buffer(data_bytes)
    parts = []
    for start, end in string_chunks(offsets, limit):
        part = null[start:end]
        first = int(offsets[start])
        buffers = [
            pa.py_buffer(np.packbits(~part, bitorder="little")) if part.any() else None,
            pa.py_buffer((offsets[start : end + 1] - first).astype(np.int32)),
            data.slice(first, int(offsets[end]) - first),
        ]
        parts.append(pa.Array.from_buffers(pa.string(), end - start, buffers, int(part.sum())))
    return parts[0] if len(parts) == 1 else pa.chunked_array(parts, type=pa.string())


def _arrow_repeated(values: Sequence[Any], limit: int = STRING_BYTES) -> Any:
    """:func:`_arrow_strings` of a column that repeats a few values (a class, an action, a
    reason): each distinct value is encoded once and the array is taken from them by index,
    the same array as :func:`_arrow_strings` gives (which this falls back to when most values
    differ, or when the text is past ``limit`` bytes)."""
    distinct = list(dict.fromkeys(values))
    if 2 * len(distinct) > len(values):
        return _arrow_strings(values, limit)
    index = {v: i for i, v in enumerate(distinct)}
    codes = np.fromiter(map(index.__getitem__, values), dtype=np.int64, count=len(values))
    sizes = np.fromiter((0 if v is None else len(str(v).encode()) for v in distinct), dtype=np.int64, count=len(distinct))
    if int(np.bincount(codes, minlength=len(distinct)) @ sizes) > limit:
        return _arrow_strings(values, limit)
    return _arrow_strings(distinct, limit).take(_arrow_numbers(codes, "int64", None))


def score_namespace(
    settings: ScoreSettings, namespace: str, counts: dict[str, np.ndarray], found: Streams
) -> dict[str, Any]:
    """Every result column of one namespace's memories, from their sums and the namespace's streams.

    This is the one place a scored row is made, whichever engine did the sums: DuckDB
    (:func:`score_state`) and Spark (:func:`memworth.spark.score`, one call per namespace
    in ``applyInPandas``) both call it.

    Parameters
    ----------
    settings
        The run's settings (governance policy, interval level, half-life).
    namespace
        The namespace's name.
    counts
        ``memory_id`` and the sums :data:`COUNT_COLUMNS`, one entry per memory, sorted by id.
    found
        The namespace's window counts, outcome streams and CUSUM state
        (:func:`memworth.logs.streams.streams_of`).

    Returns
    -------
    dict
        One array or list per column of :data:`COLUMNS_OUT`; ``change_point`` is -1 where
        no change point was found (null in the table).
    """
    policy = settings.policy
    memory = np.asarray(counts["memory_id"], dtype=object).astype(str)
    table = CountsTable(*(np.asarray(counts[c], dtype=float) for c in ("success", "failure", "n")))
    decayed = CountsTable(
        *(np.asarray(counts[c], dtype=float) for c in ("decayed_success", "decayed_failure", "decayed_n"))
    )
    rows = distinct_rows(table)  # the intervals below run once per distinct counts
    beta_lo, beta_hi = per_distinct_counts(table, BetaBound(level=settings.level).interval, rows)
    z = float(_normal_quantile(settings.level))
    wilson_lo, wilson_hi = WilsonBound(z=z).interval(table)
    size = memory.size
    columns: dict[str, Any] = {
        "namespace": [namespace] * size,
        "memory_id": memory,
        "success": table.success,
        "failure": table.failure,
        "n": table.n,
        "evidence": table.evidence,
        "worth": np.asarray(RawWorth().value(table), dtype=float).reshape(size),
        "beta_lower": np.asarray(beta_lo, dtype=float).reshape(size),
        "beta_upper": np.asarray(beta_hi, dtype=float).reshape(size),
        "wilson_lower": np.asarray(wilson_lo, dtype=float).reshape(size),
        "wilson_upper": np.asarray(wilson_hi, dtype=float).reshape(size),
        "decayed_success": decayed.success,
        "decayed_failure": decayed.failure,
        "decayed_n": decayed.n,
        "decayed_worth": np.asarray(
            Decayed(RawWorth(), settings.counting.half_life).value(decayed), dtype=float
        ).reshape(size),
        "value_class": np.asarray(policy.taxonomy().classify_table(table), dtype=object).astype(str).reshape(size),
    }
    stat = np.zeros(size)
    alarm = np.zeros(size, dtype=bool)
    change_point = np.full(size, -1, dtype=np.int64)
    held_by: list[str | None] = [None] * size
    rule = policy.sequential(policy.low_worth.deprecate_below)  # the confidence sequence, over every memory at once
    seq_lo, seq_hi = per_distinct_counts(table, rule.sequence().interval, rows)
    tested = policy.worth_test(table, rows)  # the namespace's e-BH test of low worth, as the store runs it (run once)
    worth_actions = tested[0]
    seq_dep = np.asarray(worth_actions == "deprecate", dtype=bool).reshape(size)
    if found.state is not None:
        where = {mid: i for i, mid in enumerate(found.ids)}
        for row, mid in enumerate(memory.tolist()):
            m = where.get(mid)
            if m is None:
                continue
            stat[row] = float(found.state.statistic[m])
            alarm[row] = mid in found.held
            change_point[row] = int(found.state.since[m])
            if found.held.get(mid):
                held_by[row] = " ".join(found.held[mid])
    recent = [found.recent.get(mid) for mid in memory.tolist()] if found.recent else [None] * size
    window = None  # each memory's window counts (the window test's; none read without it)
    if found.recent:
        window = CountsTable(
            *(np.array([0.0 if r is None else getattr(r, f) for r in recent]) for f in ("success", "failure", "n"))
        )
    action, proposed, reason = (list(a) for a in policy.propose_table(table, window, tested=tested, distinct=rows))  # memories without a stream
    streamed = [row for row, mid in enumerate(memory.tolist()) if mid in found.streams] if found.streams else []
    if streamed:  # change detection on: those with an outcome stream go one by one
        counted = [Counts(float(table.success[r]), float(table.failure[r]), float(table.n[r])) for r in range(size)]
        worth_flags = policy.worth_flags(counted)  # e-BH over the namespace
        for row in streamed:
            mid = str(memory[row])
            p = policy.propose(
                mid,
                counted[row],
                "active",
                "normal",
                recent[row],
                stream=found.streams.get(mid),
                worth_flag=worth_flags[row],
            )
            action[row], proposed[row], reason[row] = (None, None, None) if p is None else (p.action, p.new, p.reason)
    columns |= {
        "change_statistic": stat,
        "change_alarm": alarm,
        "change_point": change_point,
        "change_held_by": held_by,
        "sequential_lower": seq_lo,
        "sequential_upper": seq_hi,
        "sequential_deprecate": seq_dep,
        "action": action,
        "proposed": proposed,
        "reason": reason,
    }
    return columns


_KEY_LIMIT = 2**63
"""Distinct keys one int64 holds: :func:`per_distinct_counts` numbers rows by one past it."""


def distinct_rows(table: CountsTable) -> tuple[np.ndarray, np.ndarray]:
    """One row of ``table`` per distinct (success, failure, n), and each row's place among them:
    ``(first, back)``, so that row ``i`` has the counts of row ``first[back[i]]``.

    Examples
    --------
    >>> t = CountsTable(np.array([3.0, 1.0, 3.0]), np.array([1.0, 0.0, 1.0]), np.array([4.0, 1.0, 4.0]))
    >>> [x.tolist() for x in distinct_rows(t)]
    [[1, 0], [1, 0, 1]]
    """
    columns = [np.asarray(c, dtype=float).reshape(-1) for c in (table.success, table.failure, table.n)]
    size = columns[0].size
    if size == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    # Each column's values numbered and the three numbers made one integer key: sorting one
    # integer column is far faster than np.unique(axis=0) on rows of floats.
    codes = [np.unique(column, return_inverse=True) for column in columns]
    if math.prod(distinct.size for distinct, _ in codes) < _KEY_LIMIT:
        key = np.zeros(size, dtype=np.int64)
        for distinct, code in codes:
            key = key * distinct.size + code.reshape(size)
        first, back = np.unique(key, return_index=True, return_inverse=True)[1:]
    else:  # too many distinct values for one int64 key: rows of floats
        first, back = np.unique(np.stack(columns, axis=1), axis=0, return_index=True, return_inverse=True)[1:]
    return first, back.reshape(size)


def per_distinct_counts(
    table: CountsTable,
    interval: Callable[[CountsTable], tuple[Any, Any]],
    rows: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """``interval`` (lower and upper end, one per memory) of every row of ``table``, computed
    once per distinct (success, failure, n).

    An interval is a function of a memory's counts alone, and a large log repeats them
    (under uniform credit with one k, every count is a multiple of 1/k), so the inverse
    Beta functions and the confidence sequence's bisection run on the distinct rows only;
    each memory gets exactly the numbers its own row would give. ``rows``: what
    :func:`distinct_rows` gave for ``table``, if the caller has it (several intervals of one
    table find its distinct rows once).

    Examples
    --------
    >>> from memworth.estimators import WilsonBound
    >>> t = CountsTable(np.array([3.0, 1.0, 3.0]), np.array([1.0, 0.0, 1.0]), np.array([4.0, 1.0, 4.0]))
    >>> lo, hi = per_distinct_counts(t, WilsonBound().interval)
    >>> bool(lo[0] == lo[2]) and [float(x) for x in lo] == [float(x) for x in WilsonBound().interval(t)[0]]
    True
    """
    columns = [np.asarray(c, dtype=float).reshape(-1) for c in (table.success, table.failure, table.n)]
    size = columns[0].size
    if size == 0:
        lo, hi = interval(table)
        return np.asarray(lo, dtype=float).reshape(0), np.asarray(hi, dtype=float).reshape(0)
    first, back = distinct_rows(table) if rows is None else rows
    lo, hi = interval(CountsTable(*(c[first] for c in columns)))
    return np.asarray(lo, dtype=float).reshape(first.size)[back], np.asarray(hi, dtype=float).reshape(first.size)[back]


def _normal_quantile(level: float) -> float:
    """z of a two-sided ``level`` interval (1.96 at 0.95): ``scipy.special.ndtri``, the
    function ``scipy.stats.norm.ppf`` calls (importing scipy.stats took 3.5 s of a 1M-row run)."""
    from scipy.special import ndtri

    return float(ndtri(0.5 + level / 2))
