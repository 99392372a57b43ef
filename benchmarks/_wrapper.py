"""Shared by the bench_*.py scripts: run some families of ``memworth bench``, output under results/."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from memworth.cli import main

HERE = Path(__file__).resolve().parent


def run(families: str, name: str, argv: Sequence[str] | None = None) -> int:
    """``memworth bench --only FAMILIES`` writing results/NAME.md and results/NAME.json unless told otherwise."""
    args = list(sys.argv[1:] if argv is None else argv)
    if "--out" not in args:
        args += ["--out", str(HERE / "results" / f"{name}.md")]
    if "--json" not in args:
        args += ["--json", str(HERE / "results" / f"{name}.json")]
    return main(["bench", "--only", families, *args])
