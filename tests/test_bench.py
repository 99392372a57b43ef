"""``memworth bench``: a smoke run writes a valid report and JSON; the report says what was not measured."""

from __future__ import annotations

import doctest
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memworth import ValidationError
from memworth.cli import main
from memworth_bench import cli, common, data, report
from memworth_bench.common import Settings


def _bench(tmp_path: Path, *args: str) -> tuple[str, dict[str, Any]]:
    out, js = tmp_path / "BENCHMARKS.md", tmp_path / "results.json"
    code = main(["bench", "--smoke", "--out", str(out), "--json", str(js), "--workdir", str(tmp_path / "w"), *args])
    assert code == 0
    return out.read_text(), json.loads(js.read_text())


def _finite_ratios(section: dict[str, Any]) -> None:
    assert section["ratios"], section["id"]
    for r in section["ratios"]:
        assert r["min"] <= r["median"] <= r["max"] and all(math.isfinite(v) and v > 0 for v in r["values"]), r


def test_smoke_run_writes_report_and_json_and_merges_runs(tmp_path: Path) -> None:
    md, doc = _bench(tmp_path, "--only", "tracker,recall", "--sizes", "1000", "--pgvector", "none")
    assert doc["mode"] == "smoke" and len(doc["runs"]) == 1
    run = doc["runs"][0]
    assert run["machine"]["cpu_model"] and run["machine"]["python"] and len(run["load_start"]) == 3
    tracker = doc["families"]["tracker"]["tasks"]["tracker@10k"]
    assert tracker["status"] == "done", tracker.get("error")
    _finite_ratios(tracker["section"])
    assert all(tracker["section"]["data"]["checks"].values())  # every contender counted the same
    recall = doc["families"]["recall"]["tasks"]["recall@1k"]
    assert recall["status"] == "done", recall.get("error")
    _finite_ratios(recall["section"])
    hits = recall["section"]["data"]["recall_at_10"]
    assert hits["exact (in process)"] == 1.0 and 0.5 < hits["HNSW (faiss, in process)"] <= 1.0
    for heading in (
        "# Benchmarks",
        "## Machine",
        "## Headline ratios",
        "load at start",
        "### record_batch at 10,000 memories",
        "### Recall at 1,000 memories",
    ):
        assert heading in md, heading
    # every task of the default plan is in the report: those not run (other families, the default recall
    # size) as not measured, and the recall size asked for besides them
    default_plan = cli.plans(Settings(smoke=True))[0]
    assert [t for t, _ in default_plan["recall"]["tasks"]] == ["recall@2k"]
    not_run = sum(len(p["tasks"]) for name, p in default_plan.items() if name != "tracker")
    assert md.count("**Not measured in this run.**") == not_run
    # a second run of another family merges into the same file and keeps the first
    md2, doc2 = _bench(tmp_path, "--only", "exp1")
    assert len(doc2["runs"]) == 2
    assert doc2["families"]["tracker"]["tasks"]["tracker@10k"] == tracker
    assert doc2["families"]["exp1"]["tasks"]["exp1"]["status"] == "done"
    assert "### Experiment 1: 3 seeds x 1,000 episodes" in md2


def test_stopped_failed_and_skipped_tasks_are_reported_as_not_measured() -> None:
    doc = report.empty("full")
    doc["families"] = {
        "tracker": {
            "tasks": {
                "tracker@100k": {"status": "running", "started": "T0"},
                "tracker@1M": {"status": "error", "error": "MemoryError: out of memory"},
            }
        },
        "recall": {"tasks": {"recall@1M": {"status": "skipped", "reason": "the run's time budget was spent"}}},
    }
    plans = {
        "tracker": {"title": "Tracker", "about": "", "tasks": [("tracker@100k", "a"), ("tracker@1M", "b")]},
        "recall": {"title": "Recall", "about": "", "tasks": [("recall@1M", "c"), ("recall@10k", "d")]},
    }
    md = report.render(doc, plans)
    assert "stopped while this was measuring (started T0)" in md
    assert "failed with MemoryError: out of memory" in md
    assert "the run's time budget was spent" in md
    assert "not selected in any run so far" in md  # recall@10k never ran
    assert md.count("**Not measured in this run.**") == 4


def test_results_from_another_mode_are_neither_merged_nor_dropped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "r.json"
    full = report.empty("full")
    full["families"] = {"tracker": {"tasks": {}}}
    report.save(full, path)
    assert report.load(path, "full") == full
    with pytest.raises(ValidationError, match="holds full results and this is a quick run") as info:
        report.load(path, "quick")
    assert info.value.field == "--json"
    # Through the CLI: refused before anything is measured or written, the full results kept.
    md = tmp_path / "b.md"
    assert main(["bench", "--quick", "--only", "tracker", "--out", str(md), "--json", str(path)]) == 2
    assert "--fresh" in capsys.readouterr().err
    assert json.loads(path.read_text()) == full and not md.exists()
    assert report.load(tmp_path / "absent.json", "quick") == report.empty("quick")
    path.write_text("{not json")
    with pytest.raises(ValidationError, match="not a results file"):
        report.load(path, "full")


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["--only", "tracker,nope"], "--only"),
        (["--repeats", "0"], "--repeats"),
        (["--sizes", "10k"], "--sizes"),
        (["--budget", "-1"], "--budget"),
    ],
)
def test_bad_options_are_refused(
    args: list[str], field: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["bench", *args, "--out", str(tmp_path / "b.md"), "--json", str(tmp_path / "r.json")]) == 2
    assert field in capsys.readouterr().err
    assert not (tmp_path / "b.md").exists()


def test_interleave_alternates_and_ratios_are_per_repeat() -> None:
    order: list[str] = []
    values = {"a": iter([2.0, 4.0, 6.0]), "b": iter([1.0, 1.0, 2.0])}

    def make(name: str) -> Any:
        return lambda: order.append(name) or next(values[name])

    got = common.interleave({"a": make("a"), "b": make("b")}, 3, warmup=False)
    assert order == ["a", "b", "b", "a", "a", "b"]
    r = common.ratios(got["a"], got["b"])
    assert r["values"] == [2.0, 4.0, 3.0] and r["median"] == 3.0 and (r["min"], r["max"]) == (2.0, 4.0)


def test_vector_encoder_looks_up_rows_and_refuses_other_texts() -> None:
    mem = data.clustered_embeddings(5, seed=1, dim=16)
    qs = data.clustered_embeddings(2, seed=2, dim=16)
    enc = data.VectorEncoder(mem, qs)
    assert np.array_equal(enc.encode(["m 4", "q 1"]), np.stack([mem[4], qs[1]]))
    for bad in ("m 5", "x 1", "m one", "q"):
        with pytest.raises(ValidationError):
            enc.encode([bad])


def test_docstring_examples_run() -> None:
    from memworth_bench import embed, http_baseline

    for module in (common, data, embed, http_baseline):
        result = doctest.testmod(module)
        assert result.attempted and not result.failed, module.__name__


def test_startup_times_each_command_in_a_fresh_process_beside_a_bare_interpreter(tmp_path: Path) -> None:
    md, doc = _bench(tmp_path, "--only", "startup")
    task = doc["families"]["startup"]["tasks"]["startup"]
    assert task["status"] == "done", task.get("error")
    section = task["section"]
    _finite_ratios(section)
    seconds = section["data"]["seconds"]
    assert set(seconds) == {
        "python -c pass",
        "python -c 'import memworth'",
        "memworth --version",
        "memworth --help",
        "memworth list (store of 100)",
    }
    assert all(len(s["values"]) == 2 and s["min"] > 0 for s in seconds.values())  # smoke: 2 runs each
    assert "memworth --version / python -c pass" in md and "| memworth list (store of 100) |" in md
