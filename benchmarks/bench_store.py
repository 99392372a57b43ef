"""Outcomes recorded per second (SQLite, PostgreSQL) and recall latency: ``memworth bench --only recording,recall``.

Run from the repository root (any ``memworth bench`` option works, e.g. ``--quick``):

    .venv/bin/python benchmarks/bench_store.py [--quick] [--repeats N]

Writes benchmarks/results/store.md and store.json unless --out / --json say otherwise.
"""

import sys

from _wrapper import run

if __name__ == "__main__":
    sys.exit(run("recording,recall", "store"))
