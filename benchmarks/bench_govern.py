"""How govern() grows with the log, and whether other namespaces slow it down.

Run from the repository root:

    .venv/bin/python benchmarks/bench_govern.py [--memories 1000] [--sizes 2000 10000 50000] [--others 20]

A SQLite store; a namespace of ``--memories`` memories (registered by id, as the sidecar
does) receives episodes of 8 memories each, mostly successful, one outcome a second by the
store's clock (so the burst check's hour holds 3,600 of them), and ``govern()`` is timed when
the namespace holds each of ``--sizes`` outcomes: *warm*, by the store object that recorded
them and governed before (it follows the log: only new outcomes are read and scanned; median
of ``--repeats`` calls), and *cold*, by a store object just opened on the file: from the
namespace's checkpoint, which the warm store object's first govern at that size wrote
(*cold*), the same after ``--tail`` more outcomes were logged past the checkpoint
(*+tail*), and reading the whole history as before checkpoints existed (*full*; skipped
with ``--no-full``); a mark says when a cold govern had to load the checkpoint's body (it
governs from the head alone otherwise). Also the checkpoint's size, the time to decode its
head (*head*, what a cold govern decodes), to load its body after that (*whole*) and to
encode and save it (*write*), the outcomes the head keeps in full (*kept*), and the memory
of the followed state per outcome (tracemalloc of a decoded checkpoint made whole: columns,
row index and detectors) against the backend's rows (at the smallest size). The growth
columns are each time over the first. Then the isolation check of issue 13: the same
govern on a store where ``--others`` namespaces hold ``--other-outcomes`` outcomes each,
against a store holding that namespace alone, measured in turns (the order reversed every
other repeat) so that load from other processes falls on both.

Prints a table and writes benchmarks/results/govern.json (``--output``).
"""

from __future__ import annotations

import argparse
import gc
import json
import sqlite3
import time
import tracemalloc
import uuid
from pathlib import Path
from typing import Any

import numpy as np

from memworth import MemoryStore, Sidecar
from memworth.store import checkpoint

HERE = Path(__file__).resolve().parent


class Clock:
    """Seconds the benchmark sets: outcomes one second apart, whatever the machine's speed."""

    def __init__(self) -> None:
        self.now = 1.7e9

    def __call__(self) -> float:
        return self.now


def _fill(store: MemoryStore, namespace: str, memories: int, outcomes: int, rng: np.random.Generator) -> None:
    """``outcomes`` episodes of 8 random memories of ``namespace``, 70% successful, in batches
    (a :class:`Clock` of the store moves one second per outcome)."""
    sidecar = Sidecar(store)
    ids = [f"m{i}" for i in range(memories)]
    if not store.backend.memories(namespace, ids[:1]):
        sidecar.register(ids, namespace=namespace)
    done = 0
    while done < outcomes:
        n = min(500, outcomes - done)
        batch = []
        for _ in range(n):
            picked = [ids[i] for i in rng.choice(memories, size=8, replace=False)]
            batch.append((sidecar.retrieved(picked, namespace=namespace).id, bool(rng.random() < 0.7)))
        store.record_many(batch, namespace=namespace)
        if isinstance(store.clock, Clock):
            store.clock.now += n
        done += n


def _govern_time(store: MemoryStore, namespace: str, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        store.govern(namespace=namespace)
        times.append(time.perf_counter() - t)
    return float(np.median(times))


def _cold(url: str, clock: Clock, *, checkpoint_used: bool) -> tuple[float, bool]:
    """The first govern() of a store object just opened on ``url`` (from the namespace's
    checkpoint, or reading the whole history when ``checkpoint_used`` is false), and whether
    it governed from the checkpoint's head alone (its body never loaded)."""
    with MemoryStore.open(url, seed=0, clock=clock) as fresh:
        if not checkpoint_used:
            fresh.backend.load_checkpoint = lambda namespace: None  # type: ignore[method-assign]
        took = _govern_time(fresh, "main", 1)
        return took, not fresh._followed["main"].loads


def _state(store: MemoryStore, data: bytes) -> dict[str, Any]:
    """Load and write costs of the namespace's checkpoint, and the followed state's memory."""
    n = store.backend.outcome_count("main")
    t = time.perf_counter()
    loaded = checkpoint.decode("main", data, store.policy)
    load_s = time.perf_counter() - t
    t = time.perf_counter()
    loaded.whole()
    whole_s = time.perf_counter() - t
    window = store.policy.staleness.window
    start = store._burst_start(loaded)
    t = time.perf_counter()
    store.backend.save_checkpoint("main", checkpoint.encode("main", loaded, recent=window, tail_from=start))
    write_s = time.perf_counter() - t
    tracemalloc.start()
    head = checkpoint.decode("main", data, store.policy)
    head_bytes = tracemalloc.get_traced_memory()[0]
    head.whole()
    held_bytes = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    del head
    return {
        "checkpoint_mb": len(data) / 1e6,
        "load_s": load_s,
        "whole_s": whole_s,
        "write_s": write_s,
        "kept_outcomes": int(checkpoint.kept_outcomes(loaded, window, start).size),
        "columns_bytes_per_outcome": loaded.nbytes() / n,
        "head_bytes_per_outcome": head_bytes / n,
        "followed_bytes_per_outcome": held_bytes / n,
    }


def _rows_bytes(store: MemoryStore) -> float:
    """Memory the backend's row objects take per outcome (``history``'s tuples, as a store
    object held them before the columns), over the namespace's whole history."""
    tracemalloc.start()
    rows = store.backend.history("main")
    gc.collect()
    held = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return held / max(len(rows), 1)


def _copy(store: MemoryStore, folder: Path) -> tuple[str, float]:
    """A copy of the store's SQLite file as it stands (SQLite's backup API: WAL included), and
    its clock's time: a store object opened on it later is cold at this size."""
    path = folder / f"copy-{uuid.uuid4().hex[:8]}.db"
    src = sqlite3.connect(store.backend.url.removeprefix("sqlite:///"))
    dst = sqlite3.connect(path)
    try:
        src.backup(dst)
    finally:
        src.close()
        dst.close()
    assert isinstance(store.clock, Clock)
    return f"sqlite:///{path}", store.clock.now


def side_by_side(copies: list[tuple[str, float]], repeats: int) -> list[float]:
    """Cold govern on each copy (a store object just opened, from the checkpoint), the copies
    taking turns and the order reversed every other round, so that load falls on all: the
    median per copy."""
    times: list[list[float]] = [[] for _ in copies]
    for r in range(repeats):
        order = list(range(len(copies)))
        for i in order if r % 2 == 0 else order[::-1]:
            url, now = copies[i]
            clock = Clock()
            clock.now = now
            times[i].append(_cold(url, clock, checkpoint_used=True)[0])
    return [float(np.median(t)) for t in times]


def growth(
    folder: Path, memories: int, sizes: list[int], repeats: int, full: bool, tail: int
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    rng = np.random.default_rng(0)
    clock = Clock()
    url = f"sqlite:///{folder / f'grow-{uuid.uuid4().hex[:8]}.db'}"
    store = MemoryStore.open(url, seed=0, clock=clock)
    rows, held, rows_bytes = [], 0, 0.0
    copies: list[tuple[str, float]] = []
    try:
        for size in sizes:
            _fill(store, "main", memories, size - held, rng)
            held = size
            t = time.perf_counter()
            store.govern(namespace="main")  # follows the log from here; writes the checkpoint
            first = time.perf_counter() - t
            if not rows:  # the rows' memory, at the smallest size
                rows_bytes = _rows_bytes(store)
            data = store.backend.load_checkpoint("main")
            assert data is not None, "govern() wrote no checkpoint"
            warm = _govern_time(store, "main", repeats)
            cold, head_only = _cold(url, clock, checkpoint_used=True)
            state = _state(store, data)
            full_s = _cold(url, clock, checkpoint_used=False)[0] if full else None
            if size in (sizes[0], sizes[-1]):
                copies.append(_copy(store, folder))
            _fill(store, "main", memories, tail, rng)  # logged after the checkpoint, by no govern
            held += tail
            cold_tail, tail_head_only = _cold(url, clock, checkpoint_used=True)
            rows.append(
                {
                    "outcomes": size,
                    "govern_s": warm,
                    "cold_s": cold,
                    "cold_head_only": head_only,
                    "cold_tail_s": cold_tail,
                    "cold_tail_head_only": tail_head_only,
                    "full_read_s": full_s,
                    "first_govern_s": first,
                    **state,
                }
            )
    finally:
        store.close()
    for r in rows:
        r["growth"] = r["govern_s"] / rows[0]["govern_s"]
        r["cold_growth"] = r["cold_s"] / rows[0]["cold_s"]
        r["rows_bytes_per_outcome"] = rows_bytes
    turns = side_by_side(copies, 2 * repeats) if len(copies) == 2 else []
    pair = {
        "sizes": [sizes[0], sizes[-1]],
        "cold_s": turns,
        "growth": turns[1] / turns[0] if turns else None,
        "rounds": 2 * repeats,
    }
    return rows, pair


def isolation(
    folder: Path, memories: int, outcomes: int, others: int, other_outcomes: int, repeats: int
) -> dict[str, Any]:
    rng = np.random.default_rng(1)
    alone = MemoryStore.open(f"sqlite:///{folder / f'alone-{uuid.uuid4().hex[:8]}.db'}", seed=0)
    crowded = MemoryStore.open(f"sqlite:///{folder / f'crowd-{uuid.uuid4().hex[:8]}.db'}", seed=0)
    try:
        _fill(alone, "main", memories, outcomes, np.random.default_rng(2))
        _fill(crowded, "main", memories, outcomes, np.random.default_rng(2))
        for i in range(others):
            _fill(crowded, f"other{i}", 100, other_outcomes, rng)
        ratios = []
        for r in range(repeats):
            pair = [(alone, "alone"), (crowded, "crowded")]
            got = {name: _govern_time(s, "main", 1) for s, name in (pair if r % 2 == 0 else pair[::-1])}
            ratios.append(got["crowded"] / got["alone"])
        return {
            "outcomes": outcomes,
            "other_namespaces": others,
            "other_outcomes_each": other_outcomes,
            "ratio_crowded_to_alone": float(np.median(ratios)),
        }
    finally:
        alone.close()
        crowded.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--memories", type=int, default=1000)
    ap.add_argument("--sizes", type=int, nargs="+", default=[10000, 100000, 300000])
    ap.add_argument("--others", type=int, default=20, help="0: skip the isolation check")
    ap.add_argument("--other-outcomes", type=int, default=5000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--folder", type=Path, default=Path("/tmp"))
    ap.add_argument("--tail", type=int, default=500, help="outcomes logged after the checkpoint for 'cold+tail'")
    ap.add_argument("--no-full", action="store_true", help="skip the cold govern that reads the whole history")
    ap.add_argument("--output", default="govern.json", help="file name under benchmarks/results/")
    args = ap.parse_args()
    grow, pair = growth(args.folder, args.memories, sorted(args.sizes), args.repeats, not args.no_full, args.tail)
    iso = (
        isolation(args.folder, args.memories, grow[0]["outcomes"], args.others, args.other_outcomes, args.repeats)
        if args.others > 0
        else None
    )
    print(f"govern() on a namespace of {args.memories} memories (SQLite, warm: median of {args.repeats})")
    print(
        f"{'outcomes':>10} {'warm s':>8} {'growth':>7} {'cold s':>8} {'growth':>7} {'+tail s':>8} {'full s':>8}"
        f" {'head s':>7} {'whole s':>8} {'write s':>8} {'ckpt MB':>8} {'kept':>7} {'B/outc':>7}"
    )
    for r in grow:
        full = "-" if r["full_read_s"] is None else f"{r['full_read_s']:.2f}"
        marks = ("" if r["cold_head_only"] else "*") + ("" if r["cold_tail_head_only"] else "+")
        print(
            f"{r['outcomes']:>10} {r['govern_s']:>8.3f} {r['growth']:>7.2f} {r['cold_s']:>8.3f} {r['cold_growth']:>7.2f}"
            f" {r['cold_tail_s']:>8.3f} {full:>8} {r['load_s']:>7.3f} {r['whole_s']:>8.3f} {r['write_s']:>8.3f}"
            f" {r['checkpoint_mb']:>8.2f} {r['kept_outcomes']:>7} {r['followed_bytes_per_outcome']:>7.0f}{marks}"
        )
    print("(*: the cold govern loaded the checkpoint's body; +: the cold govern after the tail did)")
    if pair["growth"] is not None:
        print(
            f"side by side (copies of the file at {pair['sizes'][0]:,} and {pair['sizes'][1]:,} outcomes, cold govern"
            f" in turns, median of {pair['rounds']}): {pair['cold_s'][0]:.3f} s and {pair['cold_s'][1]:.3f} s,"
            f" growth {pair['growth']:.2f}x"
        )
    print(
        f"memory per outcome: {grow[0]['rows_bytes_per_outcome']:.0f} B as the backend's rows, "
        f"{grow[-1]['columns_bytes_per_outcome']:.0f} B in the columns' arrays, "
        f"{grow[-1]['followed_bytes_per_outcome']:.0f} B for the whole loaded state (columns, row index, detectors), "
        f"{grow[-1]['head_bytes_per_outcome']:.0f} B for the checkpoint's head alone"
    )
    if iso is not None:
        print(
            f"with {iso['other_namespaces']} other namespaces of {iso['other_outcomes_each']} outcomes each: "
            f"{iso['ratio_crowded_to_alone']:.2f}x the same govern on the namespace alone"
        )
    out = HERE / "results" / args.output
    out.parent.mkdir(exist_ok=True)
    out.write_text(
        json.dumps({"growth": grow, "side_by_side": pair, "isolation": iso, "settings": vars(args) | {"folder": str(args.folder)}}, indent=2)
    )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
