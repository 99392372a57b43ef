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

import os
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from memworth.counts import Counts, CountsTable
from memworth.errors import MemworthError, ValidationError
from memworth.estimators import BetaBound, Decayed, RawWorth, WilsonBound
from memworth.governance import GovernancePolicy
from memworth.logs.format import ColumnMap
from memworth.logs.progress import bar as progress_bar
from memworth.logs.read import read_logs
from memworth.logs.state import Counting, create_tables, ingest, new_files
from memworth.logs.streams import namespace_streams

__all__ = ["ScoreSettings", "Scored", "score_files", "score_state"]


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
    progress: bool = False,
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
        fd, work = tempfile.mkstemp(prefix=Path(state).name + ".", suffix=".tmp", dir=Path(state).resolve().parent)
        os.close(fd)
        os.unlink(work)
        if Path(state).exists():
            shutil.copyfile(state, work)
    con = _connect(work, memory_limit)
    try:
        create_tables(con, settings.counting)
        todo = new_files(con, files)
        needs = [settings.counting.column] if settings.counting.column else []
        rows = read_logs(con, todo, settings.columns, fmt=settings.fmt, needs=needs, progress=progress) if todo else 0
        added = ingest(con, todo, settings.counting) if todo else 0
        table = score_state(con, settings, progress=progress)
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


def score_state(con: Any, settings: ScoreSettings, *, progress: bool = False) -> Any:
    """One row per memory of the state tables of ``con``, as a pyarrow Table (sorted by namespace, memory)."""
    import pyarrow as pa

    policy = settings.policy
    got = con.execute("SELECT * FROM counts ORDER BY namespace, memory_id").fetchnumpy()
    namespace = np.asarray(got["namespace"], dtype=object)
    memory = np.asarray(got["memory_id"], dtype=object)
    table = CountsTable(*(np.asarray(got[c], dtype=float) for c in ("success", "failure", "n")))
    decayed = CountsTable(
        *(np.asarray(got[c], dtype=float) for c in ("decayed_success", "decayed_failure", "decayed_n"))
    )
    beta_lo, beta_hi = BetaBound(level=settings.level).interval(table)
    z = float(_normal_quantile(settings.level))
    wilson_lo, wilson_hi = WilsonBound(z=z).interval(table)
    size = memory.size
    columns: dict[str, Any] = {
        "namespace": namespace.astype(str),
        "memory_id": memory.astype(str),
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
    action: list[str | None] = [None] * size
    proposed: list[str | None] = [None] * size
    reason: list[str | None] = [None] * size
    rule = policy.sequential(policy.deprecate_below)  # the confidence sequence, over every memory at once
    seq_lo, seq_hi = (np.asarray(x, dtype=float).reshape(size) for x in rule.sequence().interval(table))
    seq_dep = np.zeros(size, dtype=bool)  # the namespace's e-BH test of low worth, as the store runs it
    bar = progress_bar(size, "proposals", progress)
    for ns in sorted(set(columns["namespace"].tolist())):
        found = namespace_streams(con, ns, policy)
        where = {mid: i for i, mid in enumerate(found.ids)}
        in_ns = np.flatnonzero(columns["namespace"] == ns).tolist()
        counted = [Counts(float(table.success[r]), float(table.failure[r]), float(table.n[r])) for r in in_ns]
        worth_flags = dict(zip(in_ns, policy.worth_flags(counted), strict=True))  # e-BH over the namespace
        for row, counts in zip(in_ns, counted, strict=True):
            mid = columns["memory_id"][row]
            seq_dep[row] = worth_flags[row].action == "deprecate"
            if found.state is not None and mid in where:
                m = where[mid]
                stat[row] = float(found.state.statistic[m])
                alarm[row] = mid in found.held
                change_point[row] = int(found.state.since[m])
                if found.held.get(mid):
                    held_by[row] = " ".join(found.held[mid])
            p = policy.propose(
                mid,
                counts,
                "active",
                "normal",
                found.recent.get(mid),
                stream=found.streams.get(mid),
                worth_flag=worth_flags[row],
            )
            if p is not None:
                action[row], proposed[row], reason[row] = p.action, p.new, p.reason
            bar.update(1)
    bar.close()
    columns |= {
        "change_statistic": stat,
        "change_alarm": alarm,
        "change_point": pa.array(change_point, mask=change_point < 0),
        "change_held_by": held_by,
        "sequential_lower": seq_lo,
        "sequential_upper": seq_hi,
        "sequential_deprecate": seq_dep,
        "action": action,
        "proposed": proposed,
        "reason": reason,
    }
    return pa.table(columns)


def _normal_quantile(level: float) -> float:
    """z of a two-sided ``level`` interval (1.96 at 0.95)."""
    from scipy.stats import norm

    return float(norm.ppf(0.5 + level / 2))
