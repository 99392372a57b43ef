"""What forgetting and filters cost: the expiry check every recall makes, a filtered recall,
and an erasure, on SQLite and PostgreSQL.

Run from the repository root (PostgreSQL at 127.0.0.1:5432, database ``test``):

    .venv/bin/python benchmarks/bench_forget.py [--memories 2000] [--calls 200] [--repeats 3]

Prints a table and writes benchmarks/results/forget.json. As in ``memworth bench``, the
contenders of each ratio take turns (the order reversed every other repeat, on the same
store), so load from other processes falls on both; the figure is the median of the
per-repeat ratios of median call latencies. (A standalone script rather than a family of
``memworth bench``: it measures one feature's overhead, not a headline number.)
"""

from __future__ import annotations

import argparse
import json
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from memworth import HashingEncoder, MemoryStore
from memworth.store.postgres import PostgresBackend
from memworth_bench.common import POSTGRES_URL, interleave, spread, with_query

HERE = Path(__file__).resolve().parent
QUERIES = ["restart the billing service", "reverse a python list", "capital of the czech republic", "water boils"]


def _open(kind: str, folder: Path) -> MemoryStore:
    url = f"sqlite:///{folder / f'bench-{uuid.uuid4().hex[:8]}.db'}"
    if kind == "postgres":
        url = with_query(POSTGRES_URL, schema=f"bench_{uuid.uuid4().hex[:12]}")
    return MemoryStore.open(url, encoder=HashingEncoder(), seed=0, exploration=0.0, index="exact")


def _median_call(fn: Callable[[int], object], calls: int) -> float:
    times = []
    for i in range(calls):
        t = time.perf_counter()
        fn(i)
        times.append(time.perf_counter() - t)
    return float(np.median(times))


def measure(kind: str, memories: int, calls: int, repeats: int, folder: Path) -> dict[str, Any]:
    store = _open(kind, folder)
    try:
        store.add_many(
            [
                {"text": f"note {i}: {QUERIES[i % 4]} ({i})", "id": f"m{i}", "metadata": {"i": i, "team": f"t{i % 10}"}}
                for i in range(memories)
            ]
        )
        check = store._expire_due

        def recall(i: int) -> None:
            store.recall(QUERIES[i % 4], k=4)

        def with_check() -> float:
            store._expire_due = check  # type: ignore[method-assign]
            return _median_call(recall, calls)

        def without_check() -> float:
            store._expire_due = lambda namespace: None  # type: ignore[method-assign]
            try:
                return _median_call(recall, calls)
            finally:
                store._expire_due = check  # type: ignore[method-assign]

        expiry = interleave({"with": with_check, "without": without_check}, repeats)

        def filtered(share: str) -> Callable[[], float]:
            where = {"metadata": {"team": "t3"}} if share == "10%" else {"metadata": {"i": {"lt": memories // 100}}}
            return lambda: _median_call(lambda i: store.recall(QUERIES[i % 4], k=4, where=where), calls)

        filters = interleave(
            {"none": lambda: _median_call(recall, calls), "10%": filtered("10%"), "1%": filtered("1%")}, repeats
        )
        erase_times = []
        for i in range(min(calls, 50)):
            t = time.perf_counter()
            store.delete(f"m{i}", reason="benchmark")
            erase_times.append(time.perf_counter() - t)
        assert store.replay().consistent
    finally:
        if isinstance(store.backend, PostgresBackend):
            store.backend.drop()
        store.close()
    ratio = lambda a, b: spread([x / y for x, y in zip(a, b, strict=True)])  # noqa: E731
    return {
        "backend": kind,
        "memories": memories,
        "recall_ms": {k: spread([v * 1000 for v in vs]) for k, vs in {**expiry, **filters}.items()},
        "expiry_check_ratio": ratio(expiry["with"], expiry["without"]),
        "filter_10pct_ratio": ratio(filters["10%"], filters["none"]),
        "filter_1pct_ratio": ratio(filters["1%"], filters["none"]),
        "erase_ms": spread([t * 1000 for t in erase_times]),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=2000)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", default=str(HERE / "results" / "forget.json"))
    args = parser.parse_args()
    folder = Path(args.json).parent
    folder.mkdir(parents=True, exist_ok=True)
    rows = [measure(kind, args.memories, args.calls, args.repeats, folder) for kind in ("sqlite", "postgres")]
    for f in folder.glob("bench-*.db*"):
        f.unlink()
    print(f"{args.memories} memories, {args.calls} calls x {args.repeats} repeats (median of per-repeat medians)")
    print(f"{'backend':<9} {'recall ms':>9} {'+expiry check':>14} {'filter 10%':>11} {'filter 1%':>10} {'erase ms':>9}")
    for r in rows:
        ms = r["recall_ms"]
        print(
            f"{r['backend']:<9} {ms['without']['median']:>9.2f} {r['expiry_check_ratio']['median']:>13.3f}x"
            f" {r['filter_10pct_ratio']['median']:>10.2f}x {r['filter_1pct_ratio']['median']:>9.2f}x"
            f" {r['erase_ms']['median']:>9.2f}"
        )
    Path(args.json).write_text(json.dumps({"args": vars(args), "results": rows}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
