"""Tracker.record_batch throughput and Experiment 1 wall time: ``memworth bench --only tracker,exp1``.

Run from the repository root (any ``memworth bench`` option works, e.g. ``--quick``):

    .venv/bin/python benchmarks/bench_core.py [--quick] [--repeats N]

Writes benchmarks/results/core.md and core.json unless --out / --json say otherwise.
"""

import sys

from _wrapper import run

if __name__ == "__main__":
    sys.exit(run("tracker,exp1", "core"))
