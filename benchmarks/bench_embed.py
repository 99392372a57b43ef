"""Encoding: NumPy all-MiniLM-L6-v2 vs sentence-transformers: ``memworth bench --only embed``.

Run from the repository root (any ``memworth bench`` option works, e.g. ``--quick``):

    .venv/bin/python benchmarks/bench_embed.py [--quick] [--repeats N]

Writes benchmarks/results/embed.md and embed.json unless --out / --json say otherwise.
"""

import sys

from _wrapper import run

if __name__ == "__main__":
    sys.exit(run("embed", "embed"))
