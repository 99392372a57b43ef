"""PostgreSQL writers and pgvector recall, beside SQLite: ``memworth bench --only recording,recall``.

Run from the repository root (any ``memworth bench`` option works, e.g. ``--quick``):

    .venv/bin/python benchmarks/bench_postgres.py [--quick] [--repeats N]

Writes benchmarks/results/postgres.md and postgres.json unless --out / --json say otherwise.
"""

import sys

from _wrapper import run

if __name__ == "__main__":
    sys.exit(run("recording,recall", "postgres"))
