"""Encoding: all-MiniLM-L6-v2 on onnxruntime and NumPy vs sentence-transformers: ``memworth bench --only embed``.

Run from the repository root (any ``memworth bench`` option works, e.g. ``--quick``):

    .venv/bin/python benchmarks/bench_embed.py [--quick] [--repeats N]

Writes benchmarks/results/embed.md and embed.json unless --out / --json say otherwise.

    .venv/bin/python benchmarks/bench_embed.py --add-many 100000

times only ``MemoryStore.add_many`` of that many short memories on a SQLite file with the
default encoder (a progress bar on a terminal), prints the table and writes
benchmarks/results/embed_add_many.json.
"""

import argparse
import json
import sys
import tempfile
from pathlib import Path

from _wrapper import HERE, run
from memworth_bench.common import Settings
from memworth_bench.embed import measure_add_many


def add_many(n: int) -> int:
    with tempfile.TemporaryDirectory() as folder:
        result = measure_add_many(Settings(workdir=Path(folder)), n)
    if "not_measured" in result:
        print(f"not measured: {result['not_measured']}", file=sys.stderr)
        return 1
    print(f"## {result['title']}\n")
    print("| " + " | ".join(result["columns"]) + " |")
    print("|" + "---|" * len(result["columns"]))
    for row in result["rows"]:
        print("| " + " | ".join(row) + " |")
    for note in result["notes"]:
        print(f"\n{note}")
    out = HERE / "results" / "embed_add_many.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--add-many", type=int)
    args, rest = parser.parse_known_args()
    if args.add_many is not None:
        if args.add_many < 1:
            parser.error(f"--add-many must be a positive number of memories, got {args.add_many}")
        sys.exit(add_many(args.add_many))
    sys.exit(run("embed", "embed", rest))
