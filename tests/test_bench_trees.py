"""``benchmarks/bench_trees.py``: two source trees' episode loops side by side, on both clocks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "bench_trees.py"


def test_two_trees_are_timed_on_the_wall_and_cpu_clocks_with_a_profile(tmp_path: Path) -> None:
    out = tmp_path / "trees.json"
    src = str(ROOT / "src")
    cmd = [sys.executable, str(SCRIPT), "--before", src, "--after", src, "--memories", "30", "--episodes", "20"]
    cmd += ["--batch", "10", "--repeats", "2", "--modes", "batched", "--profile", "--json", str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(out.read_text())
    entry = result["modes"]["batched"]
    for clock in ("wall", "cpu"):
        times = entry[clock]["s_per_1000"]
        assert len(times["before"]["values"]) == len(times["after"]["values"]) == 2
        assert all(v > 0 for side in times.values() for v in side["values"])
        assert len(entry[clock]["speed-up"]["values"]) == 2
    shares = entry["profile"]["after"]
    assert 0 < shares["recall"] <= 1.01 and shares["loop_s"] > 0
    assert "| batched | cpu |" in done.stdout


def test_a_revision_that_is_not_one_is_refused(tmp_path: Path) -> None:
    cmd = [sys.executable, str(SCRIPT), "--before", "no-such-revision-x", "--json", str(tmp_path / "t.json")]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode != 0 and "neither a source folder nor a git revision" in done.stderr
