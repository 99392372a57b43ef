"""What following other processes' settings versions costs a recall.

Run from the repository root (PostgreSQL at 127.0.0.1:5432, database ``test``):

    .venv/bin/python benchmarks/bench_settings.py [--recalls 300] [--repeats 3]

Prints a table and writes benchmarks/results/settings.json. A store object looks for a
newer kept settings version at the start of recall, recording and governance, at most once
per ``settings_check_interval`` (default 1 s): one read of the kept record's meta row. The
contenders, on one store object of each backend (SQLite file, PostgreSQL), are the
median recall latency (HashingEncoder, 500 memories, k = 5) with the look on every call
(interval 0: the worst case), at the default interval, and never (interval infinite: the
cost of recall alone). They take turns within a repeat (the order reversed every other
repeat), so load from other processes falls on all of them; each figure is the median over
the repeats, and the ratios are to "never".
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from memworth import HashingEncoder, MemoryStore
from memworth.store.postgres import PostgresBackend
from memworth_bench.common import POSTGRES_URL, spread, with_query

HERE = Path(__file__).resolve().parent
CONTENDERS = {"every call": 0.0, "default (1 s)": 1.0, "never": math.inf}


def median_recall(store: MemoryStore, interval: float, recalls: int) -> float:
    """Median seconds of one recall with the store looking for new versions every ``interval`` s."""
    store.settings_check_interval = interval
    times = []
    for i in range(recalls):
        t = time.perf_counter()
        store.recall(f"subject {i % 11}", k=5)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def median_look(store: MemoryStore, looks: int) -> float:
    """Median seconds of one look for a newer kept version (nothing new: one meta read)."""
    times = []
    for _ in range(looks):
        t = time.perf_counter()
        store.follow_settings(now=True)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recalls", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="memworth-bench-settings-"))
    urls = {
        "sqlite": f"sqlite:///{folder / 'settings.db'}",
        "postgres": with_query(POSTGRES_URL, schema=f"bench_{uuid.uuid4().hex[:12]}", pool_size="2"),
    }
    results: dict[str, dict[str, object]] = {}
    for backend, url in urls.items():
        store = MemoryStore.open(url, encoder=HashingEncoder(), seed=0)
        try:
            store.add_many([{"text": f"note {i} on subject {i % 11}", "id": f"n{i}"} for i in range(500)])
            store.configure({"recall.exploration": 0.05}, actor="bench")  # a kept version to look at
            median_recall(store, math.inf, 50)  # warm the index
            runs: dict[str, list[float]] = {name: [] for name in CONTENDERS}
            for r in range(args.repeats):
                order = list(CONTENDERS.items())
                for name, interval in order[::-1] if r % 2 else order:
                    runs[name].append(median_recall(store, interval, args.recalls))
            results[backend] = {name: spread(values) for name, values in runs.items()}
            results[backend]["one look"] = spread([median_look(store, args.recalls) for _ in range(args.repeats)])
        finally:
            if isinstance(store.backend, PostgresBackend):
                store.backend.drop()
            store.close()
    print(f"{'backend':<10} {'contender':<15} {'p50':>12} {'ratio to never':>15}")
    for backend, rows in results.items():
        never = rows["never"]["median"]  # type: ignore[index]
        for name, s in rows.items():
            median = s["median"]  # type: ignore[index]
            what = "(the look alone)" if name == "one look" else f"{median / never:>14.2f}x"
            print(f"{backend:<10} {name:<15} {median * 1e3:>9.3f} ms {what:>15}")
    out = HERE / "results" / "settings.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"recalls": args.recalls, "repeats": args.repeats, "results": results}, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
