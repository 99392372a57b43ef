"""Cost of continuous governance's read of the log (get_meta + outcome_count), made at a store
object's first outcome in a namespace, beside the cost of recording one outcome, on SQLite.

Usage: ``PYTHONPATH=src python benchmarks/continuous_governance_read.py N`` (N outcomes in the log).
"""

from __future__ import annotations

import sys
import tempfile
import time

from memworth import HashingEncoder, MemoryStore
from memworth.store.recording import governed_key


def main(n: int, reps: int = 50) -> str:
    url = f"sqlite:///{tempfile.mkdtemp()}/b.db"
    s = MemoryStore.open(url, encoder=HashingEncoder(), exploration=0.0, seed=0)
    s.add_many([{"id": f"m{i}", "text": f"fact {i} about topic {i % 50}"} for i in range(200)])
    batch = []
    for i in range(n):
        batch.append((s.recall(f"topic {i % 50}", k=4).episode, i % 3 != 0))
        if len(batch) == 2000:
            s.record_many(batch)
            batch = []
    if batch:
        s.record_many(batch)
    s.close()
    t = MemoryStore.open(url, encoder=HashingEncoder())
    start = time.perf_counter()
    for _ in range(reps):
        t.backend.get_meta(governed_key("default"))
        t.backend.outcome_count("default")
    read = (time.perf_counter() - start) / reps
    episodes = [t.recall(f"topic {i % 50}", k=4).episode for i in range(reps)]
    start = time.perf_counter()
    for e in episodes:
        t.record(e, True)
    record = (time.perf_counter() - start) / reps
    t.close()
    return f"outcomes={n} new read {read * 1e3:.2f} ms, one record {record * 1e3:.2f} ms, ratio {read / record:.2f}"


if __name__ == "__main__":
    print(main(int(sys.argv[1])))
