"""CPU time of the batched episode loop and of recall's parts, in one process (issue 17).

Run from the repository root, once per source tree to compare (the tree first on the path):

    PYTHONPATH=src .venv/bin/python benchmarks/bench_recall_parts.py [--memories 1000] [--episodes 3000]

``benchmarks/bench_peers.py``'s workload on a fresh SQLite store with the HashingEncoder:
episodes of ``recall(query, k=8)``, their outcomes recorded 100 per ``record_many``. The
first third of the episodes warm the store up and are not measured; over the rest, the
process's CPU time (``time.process_time``, which another process's load moves far less
than the wall clock) of the whole loop and of each part, each wrapped where the store
calls it. Prints milliseconds per episode and each part's share of the loop.
"""

from __future__ import annotations

import argparse
import collections
import inspect
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def main() -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--memories", type=int, default=1000)
    p.add_argument("--episodes", type=int, default=3000)
    args = p.parse_args()
    if args.memories < 1 or args.episodes < 3:
        p.error("--memories must be at least 1 and --episodes at least 3")
    sys.path.insert(0, str(HERE))
    import bench_peers
    import memworth
    from memworth import HashingEncoder, MemoryStore
    from memworth.embed.vector_index import ExactIndex
    from memworth.store import recall as recall_module
    from memworth.store import store as store_module
    from memworth.store.sqlite import SQLiteBackend

    spent: collections.Counter[str] = collections.Counter()

    def timed(owner: Any, name: str, label: str) -> None:
        inner: Callable[..., Any] = getattr(owner, name)
        if inspect.isgeneratorfunction(inner):  # store steps: timed from the first step to the answer,
            # the backend calls the driver makes between them included (the sync driver makes them inline)

            def steps(*a: Any, **k: Any) -> Any:
                start = time.process_time()
                try:
                    return (yield from inner(*a, **k))
                finally:
                    spent[label] += time.process_time() - start

            setattr(owner, name, steps)
            return

        def call(*a: Any, **k: Any) -> Any:
            start = time.process_time()
            try:
                return inner(*a, **k)
            finally:
                spent[label] += time.process_time() - start

        setattr(owner, name, call)

    spec = bench_peers.workload(args.memories, args.episodes)
    pairs = list(zip(spec["queries"], spec["outcomes"], strict=True))
    warm, measured = pairs[: len(pairs) // 3], pairs[len(pairs) // 3 :]
    with tempfile.TemporaryDirectory() as folder:
        store = MemoryStore.open(f"sqlite:///{folder}/parts.db", encoder=HashingEncoder(), seed=0)
        store.add_many([{"id": f"m{i}", "text": text} for i, text in enumerate(spec["memories"])])

        def loop(episodes: list[tuple[str, bool]]) -> None:
            for start in range(0, len(episodes), 100):
                store.record_many([(store.recall(q, k=8), ok) for q, ok in episodes[start : start + 100]])

        loop(warm)
        timed(store_module.MemoryStore, "recall", "recall")
        timed(store_module.MemoryStore, "_expire_due_steps", "  expiry check")
        timed(store_module.MemoryStore, "_space_steps", "  vector index up to date (generation read)")
        timed(ExactIndex, "search", "  vector search")
        timed(store_module.MemoryStore, "_candidates_steps", "  candidate read (50 candidates)")
        timed(SQLiteBackend, "candidates", "    of which the backend's read")
        timed(recall_module._Candidates, "memories_steps", "  the picked memories")
        timed(recall_module, "worth_of", "  worth_of (the picks' worth, interval, class)")
        timed(store_module.MemoryStore, "choose", "  choose (ranking, exploration, credit)")
        timed(SQLiteBackend, "insert_episode", "  episode write")
        timed(store_module.MemoryStore, "_embed", "  query encoding")
        timed(store_module.MemoryStore, "record_many", "record_many")
        start = time.process_time()
        loop(measured)
        total = time.process_time() - start
        store.close()
    n = len(measured)
    print(f"memworth from {Path(memworth.__file__).parent}: {args.memories} memories, {n} episodes measured")
    print(f"loop: {total / n * 1000:.3f} ms CPU per episode")
    for label, seconds in spent.items():
        print(f"{label:48s} {seconds / n * 1000:.3f} ms  {seconds / total:4.0%}")


if __name__ == "__main__":
    main()
