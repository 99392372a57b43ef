"""``benchmarks/bench_recall_parts.py``: CPU per episode of the batched loop and of recall's parts."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "bench_recall_parts.py"


def test_every_part_is_timed_and_within_the_loop() -> None:
    """Each part is wrapped where the store calls it now (store steps included): a part renamed
    away makes the script fail, and a part that is never called would print no line."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    cmd = [sys.executable, str(SCRIPT), "--memories", "40", "--episodes", "30"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    loop = float(next(ln for ln in lines if ln.startswith("loop:")).split()[1])
    parts = {ln[:48].strip(): float(ln[48:].split()[0]) for ln in lines[2:]}
    for part in ("recall", "candidate read (50 candidates)", "of which the backend's read", "choose (ranking, exploration, credit)",
                 "vector search", "episode write", "the picked memories", "record_many"):  # fmt: skip
        assert 0 < parts[part] <= loop, (part, parts)
    assert parts["of which the backend's read"] <= parts["candidate read (50 candidates)"] <= parts["recall"]
