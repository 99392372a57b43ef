"""What the async API buys and costs: how long the event loop stalls while a slow store call
runs, the hand-off cost of one awaited call, and what a pool of PostgreSQL store objects adds.

Run from the repository root (PostgreSQL at 127.0.0.1:5432, database ``test``):

    .venv/bin/python benchmarks/bench_aio.py [--outcomes 3000] [--calls 300] [--concurrent 100] [--repeats 3]

Prints a table and writes benchmarks/results/aio.json. As in ``memworth bench``, the
contenders of each ratio take turns (the order reversed every other repeat), so load from
other processes falls on both; each figure is the median over the repeats.

* loop stall: a heartbeat task sleeps 5 ms at a time while ``govern()`` reads ``--outcomes``
  outcomes for the first time on a store object; the longest gap between two ticks, with
  govern called on the loop (blocking) and awaited through :class:`memworth.aio.AsyncMemoryStore`.
* hand-off: median latency of ``get()`` on a SQLite store, called directly and awaited.
* pool: wall time of ``--concurrent`` concurrent recall + record pairs on PostgreSQL with
  1 and with 3 store objects (``workers``), each threaded (``native=False``: every call on
  the store object's worker thread) and native (the database awaited on psycopg's async
  pool, the pure work between queries on the loop), with the loop's longest stall meanwhile.
* long call: ``add_many`` of ``--bulk`` memories on PostgreSQL, threaded and native: its
  duration and the loop's longest stall meanwhile (native: the embedding in the thread, the
  ``COPY`` awaited).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from memworth import HashingEncoder, MemoryStore, Sidecar
from memworth.aio import AsyncMemoryStore
from memworth.store.postgres import PostgresBackend
from memworth_bench.common import POSTGRES_URL, spread, with_query

HERE = Path(__file__).resolve().parent


def governable(outcomes: int) -> MemoryStore:
    """A memory:// store holding ``outcomes`` outcomes over 300 memories, never governed."""
    sidecar = Sidecar.open("memory://", seed=1)
    ids = [f"m{i}" for i in range(300)]
    sidecar.register(ids)
    episodes = [sidecar.retrieved([ids[(i * 7 + j * 13) % 300] for j in range(4)]) for i in range(outcomes)]
    sidecar.store.record_many([(e, i % 3 != 0 if i % 300 < 150 else i % 5 == 0) for i, e in enumerate(episodes)])
    return sidecar.store


async def stall(call: Callable[[], Awaitable[Any]]) -> tuple[float, float]:
    """(longest gap between heartbeat ticks, duration of ``call``), in seconds."""
    gaps: list[float] = []
    done = asyncio.Event()

    async def heartbeat() -> None:
        last = time.perf_counter()
        while not done.is_set():
            await asyncio.sleep(0.005)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    ticking = asyncio.create_task(heartbeat())
    await asyncio.sleep(0.02)
    start = time.perf_counter()
    await call()
    took = time.perf_counter() - start
    done.set()
    await ticking
    return max(gaps), took


def loop_stall(outcomes: int, reverse: bool) -> dict[str, tuple[float, float]]:
    async def blocking() -> tuple[float, float]:
        store = governable(outcomes)

        async def call() -> None:
            store.govern()  # on the loop: what calling the sync store from async code does

        return await stall(call)

    async def awaited() -> tuple[float, float]:
        async with AsyncMemoryStore(governable(outcomes)) as store:
            return await stall(store.govern)

    order = [("blocking", blocking), ("awaited", awaited)]
    return {name: asyncio.run(run()) for name, run in (order[::-1] if reverse else order)}


def hand_off(folder: Path, calls: int) -> dict[str, float]:
    url = f"sqlite:///{folder / f'aio-{uuid.uuid4().hex[:8]}.db'}"
    store = MemoryStore.open(url, encoder=HashingEncoder())
    store.add("a memory to read", id="m")

    def direct() -> float:
        times = []
        for _ in range(calls):
            t = time.perf_counter()
            store.get("m")
            times.append(time.perf_counter() - t)
        return statistics.median(times)

    async def awaited() -> float:
        asynced = AsyncMemoryStore(store)
        times = []
        for _ in range(calls):
            t = time.perf_counter()
            await asynced.get("m")
            times.append(time.perf_counter() - t)
        return statistics.median(times)

    out = {"direct": direct(), "awaited": asyncio.run(awaited())}
    store.close()
    Path(url.removeprefix("sqlite:///")).unlink()
    return out


def pool(workers: int, concurrent: int, native: bool) -> tuple[float, float]:
    """(wall time of ``concurrent`` recall + record pairs, the loop's longest stall meanwhile), seconds."""

    async def run() -> tuple[float, float]:
        url = with_query(POSTGRES_URL, schema=f"bench_{uuid.uuid4().hex[:12]}", pool_size="4")
        store = await AsyncMemoryStore.open(url, encoder=HashingEncoder(), seed=0, workers=workers, native=native)
        try:
            await store.add_many([{"text": f"note {i} on subject {i % 7}", "id": f"n{i}"} for i in range(200)])

            async def one(i: int) -> None:
                recall = await store.recall(f"subject {i % 7}", k=3)
                await store.record(recall.episode, i % 4 != 0)

            async def pairs() -> None:
                await asyncio.gather(*(one(i) for i in range(concurrent)))

            gap, took = await stall(pairs)
            return took, gap
        finally:
            await store.run(_drop)
            await store.aclose()

    return asyncio.run(run())


def long_call(bulk: int, native: bool) -> tuple[float, float]:
    """(the loop's longest stall, duration) of one ``add_many`` of ``bulk`` memories on PostgreSQL, seconds."""

    async def run() -> tuple[float, float]:
        url = with_query(POSTGRES_URL, schema=f"bench_{uuid.uuid4().hex[:12]}", pool_size="4")
        store = await AsyncMemoryStore.open(url, encoder=HashingEncoder(), seed=0, native=native)
        items = [{"text": f"bulk note {i} on subject {i % 97}", "id": f"b{i}"} for i in range(bulk)]
        try:
            return await stall(lambda: store.add_many(items))
        finally:
            await store.run(_drop)
            await store.aclose()

    return asyncio.run(run())


def _name(kind: tuple[int, bool]) -> str:
    return f"{kind[0]} worker{'s' if kind[0] > 1 else ''}, {_side(kind[1])}"


def _side(native: bool) -> str:
    return "native" if native else "threaded"


def _drop(store: MemoryStore) -> None:
    assert isinstance(store.backend, PostgresBackend)
    store.backend.drop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--outcomes", type=int, default=3000)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--concurrent", type=int, default=100)
    parser.add_argument("--bulk", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", default=str(HERE / "results" / "aio.json"))
    args = parser.parse_args()
    folder = Path(args.json).parent
    folder.mkdir(parents=True, exist_ok=True)
    loop_stall(min(args.outcomes, 500), False)  # warm-up: imports and first calls, outside the timings

    raw: dict[str, list[Any]] = {"stall": [], "hand_off": [], "pool": [], "long": []}
    kinds = [(1, False), (1, True), (3, False), (3, True)]  # (workers, native)
    for r in range(args.repeats):
        raw["stall"].append(loop_stall(args.outcomes, r % 2 == 1))
        raw["hand_off"].append(hand_off(folder, args.calls))
        order = kinds if r % 2 == 0 else kinds[::-1]
        raw["pool"].append({kind: pool(kind[0], args.concurrent, kind[1]) for kind in order})
        sides = [False, True] if r % 2 == 0 else [True, False]
        raw["long"].append({native: long_call(args.bulk, native) for native in sides})

    gap = {k: spread([s[k][0] * 1000 for s in raw["stall"]]) for k in ("blocking", "awaited")}
    govern = {k: spread([s[k][1] * 1000 for s in raw["stall"]]) for k in ("blocking", "awaited")}
    results = {
        "loop_gap_ms": gap,
        "govern_ms": govern,
        "gap_ratio_blocking_over_awaited": spread([s["blocking"][0] / s["awaited"][0] for s in raw["stall"]]),
        "govern_ratio_awaited_over_blocking": spread([s["awaited"][1] / s["blocking"][1] for s in raw["stall"]]),
        "get_us": {k: spread([h[k] * 1e6 for h in raw["hand_off"]]) for k in ("direct", "awaited")},
        "get_ratio_awaited_over_direct": spread([h["awaited"] / h["direct"] for h in raw["hand_off"]]),
        "pool_s": {_name(k): spread([p[k][0] for p in raw["pool"]]) for k in kinds},
        "pool_loop_gap_ms": {_name(k): spread([p[k][1] * 1000 for p in raw["pool"]]) for k in kinds},
        "pool_speedup_3_over_1_threaded": spread([p[(1, False)][0] / p[(3, False)][0] for p in raw["pool"]]),
        "pool_speedup_3_over_1_native": spread([p[(1, True)][0] / p[(3, True)][0] for p in raw["pool"]]),
        "native_speedup_1_worker": spread([p[(1, False)][0] / p[(1, True)][0] for p in raw["pool"]]),
        "native_speedup_3_workers": spread([p[(3, False)][0] / p[(3, True)][0] for p in raw["pool"]]),
        "long_call_s": {_side(n): spread([x[n][1] for x in raw["long"]]) for n in (False, True)},
        "long_call_loop_gap_ms": {_side(n): spread([x[n][0] * 1000 for x in raw["long"]]) for n in (False, True)},
    }
    print(
        f"{args.outcomes} outcomes govern, {args.calls} get calls, {args.concurrent} concurrent recall+record,"
        f" add_many of {args.bulk}"
    )
    print(f"{'measure':<48} {'median':>10} {'min':>10} {'max':>10}")
    rows = [
        ("loop's longest stall, govern blocking (ms)", gap["blocking"]),
        ("loop's longest stall, govern awaited (ms)", gap["awaited"]),
        ("govern blocking (ms)", govern["blocking"]),
        ("govern awaited (ms)", govern["awaited"]),
        ("stall ratio blocking / awaited", results["gap_ratio_blocking_over_awaited"]),
        ("get() direct (us)", results["get_us"]["direct"]),
        ("get() awaited (us)", results["get_us"]["awaited"]),
        ("get() ratio awaited / direct", results["get_ratio_awaited_over_direct"]),
        *[(f"PostgreSQL {args.concurrent} pairs, {_name(k)} (s)", results["pool_s"][_name(k)]) for k in kinds],
        *[(f"  loop's longest stall, {_name(k)} (ms)", results["pool_loop_gap_ms"][_name(k)]) for k in kinds],
        ("speed-up threaded / native, 1 worker", results["native_speedup_1_worker"]),
        ("speed-up threaded / native, 3 workers", results["native_speedup_3_workers"]),
        ("pool speed-up 1 / 3 workers, threaded", results["pool_speedup_3_over_1_threaded"]),
        ("pool speed-up 1 / 3 workers, native", results["pool_speedup_3_over_1_native"]),
        *[(f"add_many {args.bulk}, {_side(n)} (s)", results["long_call_s"][_side(n)]) for n in (False, True)],
        *[
            (f"  loop's longest stall, {_side(n)} (ms)", results["long_call_loop_gap_ms"][_side(n)])
            for n in (False, True)
        ],
    ]
    for label, s in rows:
        print(f"{label:<48} {s['median']:>10.3f} {s['min']:>10.3f} {s['max']:>10.3f}")
    Path(args.json).write_text(json.dumps({"args": vars(args), "results": results}, indent=2, default=str))


if __name__ == "__main__":
    main()
