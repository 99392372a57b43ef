"""Core benchmarks for memworth: Tracker.record_batch throughput and Experiment 1 wall time.

Run from the repository root:

    .venv/bin/python benchmarks/bench_core.py [--quick] [--out PATH] [--repeats N]

Every measurement is run ``--repeats`` times after an untimed warm-up. Within each repeat
the contenders run one after another on the same data (round robin), so the ratios are
taken side by side in the same run, per repeat, and reported as median/min/max. Absolute
numbers depend on the machine; the ratios are what to compare across machines. Nothing is
asserted: the script prints and writes what it measured.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import memworth
from memworth import Tracker

HERE = Path(__file__).resolve().parent
K = 8
DATA_SEED = 20240601
MEMORY_SIZES = (100_000, 1_000_000)
BATCH = 100_000  # episodes per record_batch call in the "batched" variants


# -- the baseline: a plain dict-of-counters tracker ------------------------------------


class DictTracker:
    """The paper's reading note: per memory [success, failure], updated in a Python loop."""

    def __init__(self) -> None:
        self.stats: dict[Hashable, list[float]] = {}

    def update_episode(self, retrieved: Sequence[Hashable], success: bool) -> None:
        w = 1.0 / len(retrieved)
        for m in retrieved:
            entry = self.stats.get(m)
            if entry is None:
                entry = self.stats[m] = [0.0, 0.0]
            if success:
                entry[0] += w
            else:
                entry[1] += w


@dataclass
class MemoryStats:
    """Note 004's per-memory record, transcribed."""

    success_hits: float = 0.0
    failure_hits: float = 0.0


class Note004Tracker:
    """Note 004's ``MemoryWorthTracker`` as written there: items are {"memory_id", "weight"} dicts."""

    def __init__(self) -> None:
        self.stats: dict[str, MemoryStats] = {}

    def update_episode(self, retrieved_memories: list[dict[str, Any]], success: bool) -> None:
        for item in retrieved_memories:
            memory_id = item["memory_id"]
            weight = item.get("weight", 1.0)
            if memory_id not in self.stats:
                self.stats[memory_id] = MemoryStats()
            if success:
                self.stats[memory_id].success_hits += weight
            else:
                self.stats[memory_id].failure_hits += weight


# -- data ------------------------------------------------------------------------------


def episodes(rng: np.random.Generator, n_episodes: int, k: int, memories: int) -> tuple[np.ndarray, np.ndarray]:
    """``n_episodes`` rows of ``k`` distinct ids uniform in [0, memories), and outcomes.

    Draw with replacement, then redraw the (rare) rows holding a duplicate until none do:
    each accepted row is then uniform over k-subsets (in a uniform random order).
    """
    ids = rng.integers(0, memories, size=(n_episodes, k), dtype=np.int64)
    while True:
        ordered = np.sort(ids, axis=1)
        bad = np.flatnonzero((ordered[:, 1:] == ordered[:, :-1]).any(axis=1))
        if bad.size == 0:
            break
        ids[bad] = rng.integers(0, memories, size=(bad.size, k), dtype=np.int64)
    success = rng.random(n_episodes) < 0.5
    return ids, success


# -- contenders (each returns what it built, for the checks) ---------------------------


def feed_batched(t: Tracker, ids: np.ndarray, success: np.ndarray) -> Tracker:
    for start in range(0, len(ids), BATCH):
        t.record_batch(ids[start : start + BATCH], success[start : start + BATCH])
    return t


def feed_once(t: Tracker, ids: np.ndarray, success: np.ndarray) -> Tracker:
    t.record_batch(ids, success)
    return t


def warm(memories: int) -> Tracker:
    """A tracker that already knows every id in [0, memories), with no evidence and its count arrays sized."""
    t = Tracker()
    t.register(np.arange(memories, dtype=np.int64))
    t.table(np.arange(1))  # sizes the count arrays
    return t


def run_bincount(ids: np.ndarray, success: np.ndarray, memories: int) -> tuple[np.ndarray, ...]:
    """The bare arithmetic of record_batch: weighted success/failure sums and retrieval counts."""
    flat = ids.ravel()
    y = np.repeat(success, ids.shape[1])
    w = np.full(flat.size, 1.0 / ids.shape[1])
    s = np.bincount(flat, weights=np.where(y, w, 0.0), minlength=memories)
    f = np.bincount(flat, weights=np.where(y, 0.0, w), minlength=memories)
    n = np.bincount(flat, minlength=memories)
    return s, f, n


def run_add_at(ids: np.ndarray, success: np.ndarray, memories: int) -> tuple[np.ndarray, ...]:
    """The same sums with unbuffered np.add.at."""
    flat = ids.ravel()
    y = np.repeat(success, ids.shape[1])
    s, f, n = np.zeros(memories), np.zeros(memories), np.zeros(memories)
    w = 1.0 / ids.shape[1]
    np.add.at(s, flat[y], w)
    np.add.at(f, flat[~y], w)
    np.add.at(n, flat, 1.0)
    return s, f, n


def run_note004(items: list[list[dict[str, Any]]], outcomes: list[bool]) -> Note004Tracker:
    d = Note004Tracker()
    for retrieved, ok in zip(items, outcomes, strict=True):
        d.update_episode(retrieved, ok)
    return d


def run_dict(id_lists: list[list[int]], outcomes: list[bool]) -> DictTracker:
    d = DictTracker()
    update = d.update_episode
    for retrieved, ok in zip(id_lists, outcomes, strict=True):
        update(retrieved, ok)
    return d


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    gc.collect()
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


# -- summaries -------------------------------------------------------------------------


def spread(values: Sequence[float]) -> dict[str, Any]:
    return {
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "values": list(values),
    }


def measurement(name: str, label: str, seconds: list[float], *, memories: int | None, n_episodes: int | None,
                note: str = "") -> dict[str, Any]:
    m: dict[str, Any] = {
        "name": name,
        "label": label,
        "memories": memories,
        "episodes": n_episodes,
        "seconds": spread(seconds),
        "note": note,
    }
    if n_episodes:
        m["episodes_per_s"] = spread([n_episodes / s for s in seconds])
    return m


def machine() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        usable: int | None = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    try:
        commit = subprocess.run(["git", "-C", str(HERE), "rev-parse", "HEAD"], capture_output=True, text=True,
                                check=False).stdout.strip() or None
    except OSError:
        commit = None
    return {
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "python_implementation": platform.python_implementation(),
        "numpy": np.__version__,
        "memworth": memworth.__version__,
        "git_commit": commit,
        "cpu_model": cpu,
        "cpu_count": os.cpu_count(),
        "cpu_usable": usable,
    }


# -- benchmark 1: record_batch ---------------------------------------------------------


LABELS = {
    "rb_batched": f"record_batch, fresh tracker, {BATCH // 1000}k/call",
    "rb_one_call": "record_batch, fresh tracker, one call",
    "rb_warm": f"record_batch, warm tracker, {BATCH // 1000}k/call",
    "bincount": "np.bincount ceiling (s, f, n)",
    "add_at": "np.add.at (s, f, n)",
    "dict": "dict-of-counters tracker (lean loop)",
    "note004": "note 004's MemoryWorthTracker",
}
NOTES = {
    "rb_warm": "tracker already knows every memory id (Tracker.register, untimed), so no index growth: the "
               "steady state of a long-running tracker",
    "bincount": "one pass over all episodes: repeat outcomes, weights 1/k, three np.bincount; "
                "no validation, no id-to-row lookup",
    "add_at": "np.add.at into zeroed arrays, same sums as the bincount ceiling",
    "note004": "the reading note's tracker verbatim (dataclass per memory, items as dicts built outside the "
               "timed region), timed on the first {n_dict:,} episodes: the baseline of the 50x target",
    "dict": "a leaner hand-written loop than note 004's (lists, .get), timed on the first {n_dict:,} "
            "episodes; ids fed as Python lists converted outside the timed region; starts empty",
}
RATIOS = (
    ("rb_batched", "note004", ">= 50"),
    ("rb_one_call", "note004", ">= 50"),
    ("rb_warm", "note004", ">= 50"),
    ("rb_batched", "dict", None),
    ("rb_warm", "dict", None),
    ("rb_batched", "bincount", None),
    ("rb_one_call", "bincount", None),
    ("rb_warm", "bincount", None),
    ("add_at", "bincount", None),
)


def bench_record_batch(memories: int, n_episodes: int, n_dict: int, repeats: int,
                       rng: np.random.Generator) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, bool]]:
    ids, success = episodes(rng, n_episodes, K, memories)
    sub_lists, sub_outcomes = ids[:n_dict].tolist(), success[:n_dict].tolist()  # outside every timed region
    w = 1.0 / K
    sub_items = [[{"memory_id": m, "weight": w} for m in row] for row in sub_lists]

    # name -> (untimed setup, timed run of the setup's result)
    contenders: dict[str, tuple[Callable[[], Any], Callable[[Any], Any]]] = {
        "rb_batched": (Tracker, lambda t: feed_batched(t, ids, success)),
        "rb_one_call": (Tracker, lambda t: feed_once(t, ids, success)),
        "rb_warm": (lambda: warm(memories), lambda t: feed_batched(t, ids, success)),
        "bincount": (lambda: None, lambda _: run_bincount(ids, success, memories)),
        "add_at": (lambda: None, lambda _: run_add_at(ids, success, memories)),
        "dict": (lambda: None, lambda _: run_dict(sub_lists, sub_outcomes)),
        "note004": (lambda: None, lambda _: run_note004(sub_items, sub_outcomes)),
    }
    n_of = {name: (n_dict if name in ("dict", "note004") else n_episodes) for name in contenders}

    def one(name: str) -> tuple[float, Any]:
        setup, run = contenders[name]
        state = setup()
        gc.collect()
        start = time.perf_counter()
        out = run(state)
        return time.perf_counter() - start, out

    for name in contenders:  # warm-up: one untimed round at full size
        one(name)
    seconds: dict[str, list[float]] = {name: [] for name in contenders}
    last: dict[str, Any] = {}
    for _ in range(repeats):  # round robin: each repeat runs every contender once, in turn
        for name in contenders:
            sec, last[name] = one(name)
            seconds[name].append(sec)

    # -- checks, untimed
    checks: dict[str, bool] = {}
    sub_tracker = feed_once(Tracker(), ids[:n_dict], success[:n_dict])
    stats = last["dict"].stats
    keys = np.fromiter(stats.keys(), dtype=np.int64, count=len(stats))
    dict_counts = np.array(list(stats.values()))
    table = sub_tracker.table(keys)
    checks[f"record_batch == dict tracker: {n_dict:,} episodes, {memories:,} memories"] = bool(
        set(sub_tracker.ids()) == set(stats)
        and np.allclose(table.success, dict_counts[:, 0], rtol=1e-12, atol=1e-9)
        and np.allclose(table.failure, dict_counts[:, 1], rtol=1e-12, atol=1e-9)
    )
    s, f, n = last["bincount"]
    seen = np.flatnonzero(n > 0)
    ok = True
    for name in ("rb_batched", "rb_one_call"):
        t = last[name]
        tt = t.table(seen)
        ok &= len(t) == seen.size and np.allclose(tt.success, s[seen]) and np.allclose(tt.failure, f[seen])
        ok &= np.array_equal(tt.n, n[seen].astype(float))
    all_ids = np.arange(memories)
    tw = last["rb_warm"].table(all_ids)
    ok &= np.allclose(tw.success, s) and np.allclose(tw.failure, f) and np.array_equal(tw.n, n.astype(float))
    label = f"record_batch (fresh, one call, warm) == bincount: {n_episodes:,} episodes, {memories:,} memories"
    checks[label] = bool(ok)
    a_s, a_f, a_n = last["add_at"]
    checks[f"np.add.at == bincount: {memories:,} memories"] = bool(
        np.allclose(a_s, s) and np.allclose(a_f, f) and np.array_equal(a_n, n.astype(float))
    )
    note = last["note004"].stats
    checks[f"dict tracker == note 004 tracker: {n_dict:,} episodes"] = bool(
        set(note) == set(stats)
        and all(abs(note[m].success_hits - v[0]) < 1e-9 and abs(note[m].failure_hits - v[1]) < 1e-9
                for m, v in stats.items())
    )
    del last, sub_tracker, stats, note

    tag = f"{memories // 1000}k" if memories < 1_000_000 else f"{memories // 1_000_000}M"
    results = [
        measurement(f"{name}@{tag}", LABELS[name], seconds[name], memories=memories, n_episodes=n_of[name],
                    note=NOTES.get(name, "").format(n_dict=n_dict))
        for name in contenders
    ]
    ratios = []
    for a, b, target in RATIOS:
        per_repeat = [(n_of[a] / sa) / (n_of[b] / sb) for sa, sb in zip(seconds[a], seconds[b], strict=True)]
        ratios.append({"name": f"{a}/{b}@{tag}", "label": f"{LABELS[a]} / {LABELS[b]}", "memories": memories,
                       "unit": "ratio of episodes/s, per repeat", "target": target, **spread(per_repeat)})
    return results, ratios, checks


# -- benchmark 2: Experiment 1 ---------------------------------------------------------


def bench_exp1(seeds: int, n_episodes: int, repeats: int) -> dict[str, Any]:
    from memworth_experiments import exp1
    from memworth_experiments.common import load_config

    def run(s: int, e: int) -> Any:
        cfg = load_config("exp1")
        cfg["_tolerance"] = 0.03
        return exp1.run(cfg, s, e, show_progress=False)

    run(2, 1000)  # warm-up (imports, scipy, first allocations)
    seconds = []
    result = None
    for _ in range(repeats):
        s, result = timed(lambda: run(seeds, n_episodes))
        seconds.append(s)
    misses = sum(1 for r in result.rows if r.ok is False) if result is not None else None
    return measurement("exp1", f"Experiment 1 ({seeds} seeds x {n_episodes:,} episodes, all strategies)", seconds,
                       memories=None, n_episodes=None,
                       note=f"{misses} row(s) outside tolerance 0.03 in the last repeat (not a benchmark criterion)")


# -- output ----------------------------------------------------------------------------


def fmt_rate(x: float) -> str:
    return f"{x / 1e6:.2f}M" if x >= 1e6 else f"{x / 1e3:.1f}k"


def print_report(report: dict[str, Any]) -> None:
    m = report["machine"]
    header = (f"{m['cpu_model']} ({m['cpu_usable']}/{m['cpu_count']} cores), {m['platform']}, Python {m['python']}, "
              f"numpy {m['numpy']}, memworth {m['memworth']}; {report['settings']['mode']} run, "
              f"{report['settings']['repeats']} repeat(s), k={report['settings']['k']}")
    cols = ("benchmark", "memories", "episodes", "s median", "episodes/s median", "episodes/s min - max")
    rows = []
    for x in report["measurements"]:
        mem = "-" if x["memories"] is None else f"{x['memories']:,}"
        eps = "-" if x["episodes"] is None else f"{x['episodes']:,}"
        sec = x["seconds"]["median"]
        if "episodes_per_s" in x:
            r = x["episodes_per_s"]
            rate = (fmt_rate(r["median"]), f"{fmt_rate(r['min'])} - {fmt_rate(r['max'])}")
        else:
            lo, hi = x["seconds"]["min"], x["seconds"]["max"]
            rate = ("-", f"({lo:.2f} - {hi:.2f} s)")
        rows.append((x["label"], mem, eps, f"{sec:.3f}", *rate))
    rcols = ("ratio of episodes/s (side by side, per repeat)", "memories", "median", "min - max", "target")
    ratio_rows = [(r["label"], f"{r['memories']:,}", f"{r['median']:.2f}x", f"{r['min']:.2f} - {r['max']:.2f}",
                   r["target"] or "") for r in report["ratios"]]
    check_rows = [(k, "ok" if v else "MISMATCH") for k, v in report["checks"].items()]
    notes = list(dict.fromkeys(f"{x['label']}: {x['note']}" for x in report["measurements"] if x["note"]))

    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:
        Console = None  # type: ignore[assignment,misc]

    if Console is not None:
        console = Console()
        if not console.is_terminal:
            console = Console(width=max(console.width, 120))
        console.print(header, highlight=False)
        for title, head, body in (("Measurements", cols, rows), ("Ratios", rcols, ratio_rows)):
            t = Table(title=title)
            for i, c in enumerate(head):
                t.add_column(c, justify="left" if i == 0 or c == "target" else "right")
            for r in body:
                t.add_row(*r)
            console.print(t)
        t = Table(title="Checks (not assertions)")
        t.add_column("check")
        t.add_column("result")
        for k, v in check_rows:
            t.add_row(k, f"[green]{v}[/green]" if v == "ok" else f"[bold red]{v}[/bold red]")
        console.print(t)
        for n in notes:
            console.print(f"note: {n}", highlight=False)
        return

    print(header)
    for head, body in ((cols, rows), (rcols, ratio_rows)):
        widths = [max(len(c), *(len(r[i]) for r in body)) for i, c in enumerate(head)]
        print()
        print("  ".join(c.ljust(w) for c, w in zip(head, widths, strict=True)))
        print("  ".join("-" * w for w in widths))
        for r in body:
            cells = (v.ljust(w) if i == 0 else v.rjust(w) for i, (v, w) in enumerate(zip(r, widths, strict=True)))
            print("  ".join(cells))
    print()
    for k, v in check_rows:
        print(f"{v:<9} {k}")
    for n in notes:
        print(f"note: {n}")


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="small sizes and 1 repeat (well under 30 s)")
    p.add_argument("--out", type=Path, help="JSON output (default: benchmarks/results/core.json, "
                                            "or core_quick.json with --quick)")
    p.add_argument("--repeats", type=int, help="timed runs per measurement (default 3; 1 with --quick)")
    args = p.parse_args(argv)
    repeats = args.repeats if args.repeats is not None else (1 if args.quick else 3)
    if repeats < 1:
        p.error("--repeats must be at least 1")
    out = args.out if args.out is not None else HERE / "results" / ("core_quick.json" if args.quick else "core.json")

    n_episodes = 100_000 if args.quick else 1_000_000
    n_dict = 50_000 if args.quick else 200_000
    seeds = 4 if args.quick else 20
    settings = {
        "mode": "quick" if args.quick else "full",
        "repeats": repeats,
        "k": K,
        "episodes": n_episodes,
        "episodes_per_call_batched": BATCH,
        "dict_tracker_episodes": n_dict,
        "memory_sizes": list(MEMORY_SIZES),
        "data_seed": DATA_SEED,
        "outcomes": "Bernoulli(0.5)",
        "credit": "uniform 1/k",
        "exp1": {"seeds": seeds, "episodes": 10_000, "tolerance": 0.03},
        "gc": "enabled during timing (collected before each timed call)",
    }
    started = time.perf_counter()
    rng = np.random.default_rng(DATA_SEED)
    measurements: list[dict[str, Any]] = []
    ratios: list[dict[str, Any]] = []
    checks: dict[str, bool] = {}
    for memories in MEMORY_SIZES:
        print(f"record_batch: {n_episodes:,} episodes into {memories:,} memories ...", file=sys.stderr, flush=True)
        m, r, c = bench_record_batch(memories, n_episodes, n_dict, repeats, rng)
        measurements += m
        ratios += r
        checks |= c
        gc.collect()
    print(f"Experiment 1: {seeds} seeds x 10,000 episodes ...", file=sys.stderr, flush=True)
    measurements.append(bench_exp1(seeds, 10_000, repeats))

    report = {
        "benchmark": "bench_core",
        "timestamp": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "settings": settings,
        "measurements": measurements,
        "ratios": ratios,
        "checks": checks,
        "total_seconds": round(time.perf_counter() - started, 2),
    }
    print_report(report)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {out} (total {report['total_seconds']} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
