"""What a slow verifier costs the ``record`` call that triggers continuous governance
(``govern_every``), and what the documented way around it costs: the recording store object
without a verifier, a worker store object with it calling ``govern(apply=True)``.

For each case: a SQLite store (HashingEncoder, 20 memories, ``quarantined`` of them flagged
re-verify), ``govern_every=10``, 40 outcomes recorded one by one; the verifier sleeps
``sleep`` s per memory, ``verifier_timeout`` is ``timeout`` s. Printed: the slowest and the
median ``record`` call, side by side in one run, and the load average.

Usage: ``PYTHONPATH=src python benchmarks/verifier_in_record.py [--json out.json]``
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time

from memworth import HashingEncoder, MemoryStore

SLEEP, TIMEOUT, QUARANTINED = 0.3, 0.2, 3


def run(case: str) -> dict[str, float | str]:
    url = f"sqlite:///{tempfile.mkdtemp()}/v.db"

    def verifier(report: object) -> object:
        time.sleep(SLEEP)
        return "confirmed"

    with_verifier = case == "verifier on the recording store"
    s = MemoryStore.open(
        url,
        encoder=HashingEncoder(),
        exploration=0.0,
        seed=0,
        govern_every=10,
        verifier=verifier if with_verifier else None,
        verifier_timeout=TIMEOUT,
    )
    s.add_many([{"id": f"m{i}", "text": f"fact {i} about topic {i}"} for i in range(20)])
    for i in range(QUARANTINED):
        s.set_standing(f"m{i}", "re-verify", reason="check it")
    took = []
    for i in range(40):
        episode = s.recall(f"fact {10 + i % 10} about topic {10 + i % 10}", k=1).episode
        start = time.perf_counter()
        s.record(episode, True)
        took.append(time.perf_counter() - start)
    worker = 0.0
    if case == "verifier on a worker's govern":
        w = MemoryStore.open(url, encoder=HashingEncoder(), verifier=verifier, verifier_timeout=TIMEOUT)
        start = time.perf_counter()
        w.govern(apply=True)
        worker = time.perf_counter() - start
        w.close()
    s.close()
    return {
        "case": case,
        "slowest_record_ms": max(took) * 1e3,
        "median_record_ms": statistics.median(took) * 1e3,
        "worker_govern_ms": worker * 1e3,
    }


def main() -> None:
    cases = ["no verifier", "verifier on the recording store", "verifier on a worker's govern"]
    run(cases[0])  # warm-up (imports, first statements), not shown
    rows = [run(c) for c in cases]
    load = os.getloadavg()
    print(f"verifier sleeps {SLEEP} s, verifier_timeout {TIMEOUT} s, {QUARANTINED} quarantined, govern_every 10")
    print("| case | slowest record | median record | worker's govern |")
    print("|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['case']} | {r['slowest_record_ms']:.1f} ms | {r['median_record_ms']:.1f} ms "
            f"| {r['worker_govern_ms']:.1f} ms |"
        )
    print(f"load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    if "--json" in sys.argv:
        out = sys.argv[sys.argv.index("--json") + 1]
        with open(out, "w") as f:
            json.dump({"rows": rows, "load": load, "sleep": SLEEP, "timeout": TIMEOUT}, f, indent=1)


if __name__ == "__main__":
    main()
