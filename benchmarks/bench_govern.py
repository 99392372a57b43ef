"""How govern() grows with the log, and whether other namespaces slow it down.

Run from the repository root:

    .venv/bin/python benchmarks/bench_govern.py [--memories 1000] [--sizes 2000 10000 50000] [--others 20]

A SQLite store; a namespace of ``--memories`` memories (registered by id, as the sidecar
does) receives episodes of 8 memories each, mostly successful, one outcome a second by the
store's clock (so the burst check's hour holds 3,600 of them), and ``govern()`` is timed when
the namespace holds each of ``--sizes`` outcomes: *warm*, by the store object that recorded
them and governed before (it follows the log: only new outcomes are read and scanned; median
of ``--repeats`` calls), and *cold*, by a store object just opened on the file (its first
govern reads the whole history). The growth columns are each time over the first. Then the isolation check of issue 13: the same
govern on a store where ``--others`` namespaces hold ``--other-outcomes`` outcomes each,
against a store holding that namespace alone, measured in turns (the order reversed every
other repeat) so that load from other processes falls on both.

Prints a table and writes benchmarks/results/govern.json.
"""

from __future__ import annotations

import argparse
import json
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np

from memworth import MemoryStore, Sidecar

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


def growth(folder: Path, memories: int, sizes: list[int], repeats: int) -> list[dict[str, Any]]:
    rng = np.random.default_rng(0)
    clock = Clock()
    url = f"sqlite:///{folder / f'grow-{uuid.uuid4().hex[:8]}.db'}"
    store = MemoryStore.open(url, seed=0, clock=clock)
    rows, held = [], 0
    try:
        for size in sizes:
            _fill(store, "main", memories, size - held, rng)
            held = size
            store.govern(namespace="main")  # the store object follows the log from here
            warm = _govern_time(store, "main", repeats)
            with MemoryStore.open(url, seed=0, clock=clock) as fresh:
                cold = _govern_time(fresh, "main", 1)
            rows.append({"outcomes": size, "govern_s": warm, "cold_s": cold})
    finally:
        store.close()
    for r in rows:
        r["growth"] = r["govern_s"] / rows[0]["govern_s"]
        r["cold_growth"] = r["cold_s"] / rows[0]["cold_s"]
    return rows


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
    ap.add_argument("--others", type=int, default=20)
    ap.add_argument("--other-outcomes", type=int, default=5000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--folder", type=Path, default=Path("/tmp"))
    args = ap.parse_args()
    grow = growth(args.folder, args.memories, sorted(args.sizes), args.repeats)
    iso = isolation(args.folder, args.memories, grow[0]["outcomes"], args.others, args.other_outcomes, args.repeats)
    print(f"govern() on a namespace of {args.memories} memories (SQLite, median of {args.repeats})")
    print(f"{'outcomes':>10} {'warm s':>10} {'growth':>8} {'cold s':>10} {'growth':>8}")
    for r in grow:
        print(
            f"{r['outcomes']:>10} {r['govern_s']:>10.3f} {r['growth']:>8.2f} {r['cold_s']:>10.3f} {r['cold_growth']:>8.2f}"
        )
    print(
        f"with {iso['other_namespaces']} other namespaces of {iso['other_outcomes_each']} outcomes each: "
        f"{iso['ratio_crowded_to_alone']:.2f}x the same govern on the namespace alone"
    )
    out = HERE / "results" / "govern.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(
        json.dumps({"growth": grow, "isolation": iso, "settings": vars(args) | {"folder": str(args.folder)}}, indent=2)
    )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
