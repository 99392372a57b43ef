"""``benchmarks/bench_peers.py``: memworth's driver runs and reports its shape; a peer that cannot be installed is not measured."""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_peers.py"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_peers", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_workload_is_the_same_for_every_contender_and_queries_share_words_with_memories(bench: ModuleType) -> None:
    a, b = bench.workload(50, 20, seed=3), bench.workload(50, 20, seed=3)
    assert a == b and a != bench.workload(50, 20, seed=4)
    assert len(a["memories"]) == 50 and len(a["queries"]) == len(a["outcomes"]) == 20 and a["k"] == 8
    words = {w for text in a["memories"] for w in text.split()}
    assert all(len(set(q.split()) & words) >= 3 for q in a["queries"])
    assert json.loads(json.dumps(a)) == a  # handed to the drivers as a JSON file


@pytest.mark.parametrize("mode", ["1/txn", "batched", "1/txn normal"])
def test_memworth_driver_records_every_episode_and_reports_its_timing(
    bench: ModuleType, tmp_path: Path, mode: str
) -> None:
    spec = {**bench.workload(30, 12, seed=1), "db": str(tmp_path / "m.db")}
    out = bench.drive_memworth(spec, mode, batch=5)
    assert out["contender"] == "memworth" and out["version"]
    assert out["episodes"] == 12 and out["memories"] == 30
    assert out["recorded"] == 12  # every outcome reached the log, batched or not
    assert out["retrieved_mean"] == 8.0  # 8-memory episodes
    assert out["episode_s"] > 0 and out["setup_s"] > 0
    assert ("5 per record_many" in out["mode"]) == (mode == "batched")
    json.dumps(out)


def test_memworth_driver_refuses_an_unknown_mode(bench: ModuleType, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="mode must be one of"):
        bench.drive_memworth({**bench.workload(5, 2), "db": str(tmp_path / "m.db")}, "3/txn")


def test_a_peer_whose_venv_cannot_be_made_is_not_measured(bench: ModuleType, tmp_path: Path) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    python, why = bench.peer_env("veramem==0.1.0", blocked / "envs")
    assert python is None and why.startswith(f"cannot make {blocked / 'envs' / 'veramem-0.1.0'}: ")
    python, why = bench.peer_env("veramem", tmp_path / "envs")
    assert python is None and "name==version" in why
    assert not (tmp_path / "envs").exists()


@pytest.mark.slow  # pip's start-up alone takes seconds on a loaded machine
def test_a_peer_version_pip_cannot_install_is_not_measured_and_not_kept(bench: ModuleType, tmp_path: Path) -> None:
    # a version that does not exist: pip refuses it whether or not the index is reachable
    python, why = bench.peer_env("veramem==0.0.0.dev999", tmp_path / "envs")
    assert python is None and why.startswith("installing veramem==0.0.0.dev999 failed: ")
    assert not (tmp_path / "envs" / "veramem-0.0.0.dev999").exists()  # retried next run, not half kept


def _out(seconds: float, contender: str = "memworth") -> dict[str, Any]:
    return {
        "contender": contender,
        "version": "1",
        "mode": "m",
        "episodes": 1000,
        "memories": 10,
        "episode_s": seconds,
        "setup_s": 0.1,
        "retrieved_mean": 8.0,
    }


def test_summary_takes_ratios_per_repeat_and_reports_peers_not_measured(bench: ModuleType) -> None:
    runs = {
        "veramem 0.1.0": [_out(4.0, "veramem"), _out(9.0, "veramem")],
        "memworth 1/txn": [_out(1.0), _out(3.0)],
        "memworth batched": [_out(0.5), {"error": "driver failed: boom"}],
        "memworth 1/txn normal": [{"error": "took over 5 s"}, {"error": "took over 5 s"}],
    }
    result = bench.summarise(runs, {"runtime-memory 4.0.1": "installing runtime-memory==4.0.1 failed: no network"})
    rows, ratios = result["rows"], result["ratios"]
    assert rows["veramem 0.1.0"]["s_per_1000"]["median"] == 6.5
    assert rows["memworth batched"]["status"] == "1 of 2 repeats failed"
    assert rows["memworth 1/txn normal"]["status"] == "not measured: took over 5 s"
    assert rows["runtime-memory 4.0.1"]["status"].startswith("not measured: installing")
    by = {(r["peer"], r["memworth"]): r for r in ratios}
    one = by[("veramem 0.1.0", "1/txn")]
    assert one["ratio"]["values"] == [4.0, 3.0] and one["target"] == 2.0 and one["met"] is True
    assert by[("veramem 0.1.0", "batched")]["ratio"]["values"] == [8.0]
    assert by[("veramem 0.1.0", "batched")]["met"] is False  # 8x < the 10x target
    assert by[("veramem 0.1.0", "1/txn normal")]["status"] == "not measured: took over 5 s"
    assert all(
        by[("runtime-memory 4.0.1", m)]["status"].startswith("not measured: installing") for m in bench.MEMWORTH_MODES
    )
    args = argparse.Namespace(memories=10, episodes=1000, repeats=2)
    table = bench.render(result, args, ((0.1, 0.2, 0.3), (0.4, 0.5, 0.6)))
    assert "| runtime-memory 4.0.1 | | not measured: installing runtime-memory==4.0.1 failed: no network | |" in table
    assert "| veramem 0.1.0 | 1/txn | 3.5 (3.0-4.0)x | >= 2x | yes |" in table
    assert "| veramem 0.1.0 | batched | 8.0 (8.0-8.0)x | >= 10x | no |" in table


@pytest.mark.slow
def test_a_whole_run_with_a_peer_that_cannot_be_installed_writes_the_json(tmp_path: Path) -> None:
    out = tmp_path / "peers.json"
    cmd = [sys.executable, str(SCRIPT), "--memories", "20", "--episodes", "10", "--repeats", "2", "--batch", "4"]
    cmd += ["--peers", "veramem==0.0.0.dev999", "--envs", str(tmp_path / "envs"), "--out", str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    doc = json.loads(out.read_text())
    assert doc["rows"]["veramem 0.0.0.dev999"]["status"].startswith("not measured: installing")
    for mode in ("1/txn", "batched", "1/txn normal"):
        row = doc["rows"][f"memworth {mode}"]
        assert row["status"] == "measured" and len(row["s_per_1000"]["values"]) == 2
    assert "not measured" in done.stdout and len(doc["load_start"]) == 3
