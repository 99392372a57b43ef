"""Exact search vs HNSW (faiss) and pgvector, with recall@10: ``memworth bench --only recall``.

Run from the repository root (any ``memworth bench`` option works, e.g. ``--quick``):

    .venv/bin/python benchmarks/bench_index.py [--quick] [--repeats N]

Writes benchmarks/results/index.md and index.json unless --out / --json say otherwise.
"""

import sys

from _wrapper import run

if __name__ == "__main__":
    sys.exit(run("recall", "index"))
