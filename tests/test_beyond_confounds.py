"""Issue 6 items 1-2 (confound control): the experiments through the CLI, and their targets."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from memworth.cli import main
from memworth_experiments import context, hitchhiker
from memworth_experiments.common import BEYOND_EXPERIMENTS, load_config


@pytest.mark.parametrize("name", ["context", "hitchhiker"])
def test_quick_variant_through_the_cli(name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert name in BEYOND_EXPERIMENTS
    out = tmp_path / name
    code = main(["reproduce", name, "--quick", "--no-progress", "--check", "--out", str(out)])
    printed = capsys.readouterr().out
    assert code == 0, printed
    payload = json.loads((out / "results.json").read_text())
    assert payload["experiment"] == name and payload["settings"]["quick"] is True
    rows = payload["rows"]
    checked = [r for r in rows if r["ok"] is not None]
    assert len(checked) >= 4 and all(r["ok"] for r in checked), [r for r in checked if not r["ok"]]
    assert all(r["name"] in printed for r in checked)  # the table shows the paper's estimator beside ours
    assert (out / "figure.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert len((out / "raw.csv").read_text().splitlines()) > 10
    assert (out / "config.toml").read_text() == load_config(name)["_text"]


@pytest.mark.slow  # full size: `make test-full`; the quick variant above runs by default
def test_context_targets_at_full_size() -> None:
    """20 seeds x 10,000 episodes; only the last checkpoint (the targets read it)."""
    cfg = load_config("context")
    cfg["_tolerance"] = 0.0
    cfg["run"]["checkpoint_every"] = cfg["run"]["episodes"]
    result = context.run(cfg, cfg["run"]["seeds"], cfg["run"]["episodes"], show_progress=False)
    by = {r.name: r for r in result.rows}
    for world, ref in (("exp2", "global MW (paper)"), ("exp2", "hard-task-only MW (paper)")):
        row = by[f"{world}: ours, task labels vs {ref}"]
        assert row.ok and row.ours > row.paper  # beats both of the paper's estimators
    for ref in ("global MW (paper)", "hard-task-only MW (paper)"):
        for contexts in ("task labels", "learned clusters"):
            row = by[f"variant: ours, {contexts} vs {ref}"]
            assert row.ok and row.ours >= 0.83
    assert all(r.ok for r in result.rows if r.ok is not None)


@pytest.mark.slow  # full size: `make test-full`; the quick variant above runs by default
def test_exp4_hitchhiker_targets_at_full_size() -> None:
    """20 seeds x 10,000 episodes of Experiment 4 at 0% natural independence, 10% budget."""
    cfg = load_config("hitchhiker")
    seeds, episodes = cfg["run"]["seeds"], cfg["run"]["episodes"]
    raw = []
    for seed in range(seeds):
        raw += hitchhiker.run_exp4_seed(cfg, seed, episodes, ablate=True)
        raw += hitchhiker.run_exp4_seed(cfg, seed, episodes, ablate=False)
    by = {r.name: r for r in hitchhiker.rows(cfg, raw)}
    need = math.ceil(0.95 * seeds)
    above = by["exp4, ablation: anchor above hitchhiker"]
    assert above.ours >= need and above.ok
    assert by["exp4, ablation: hitchhiker flagged confounded"].ours >= need
    assert by["exp4, ablation: anchor flagged confounded"].ours == 0
    budget = by["exp4, ablation: budget used"]
    assert budget.ours <= 0.10 and budget.ok
    # without ablation nothing can tell them apart: equal raw MW, equal adjusted worth
    assert by["exp4, no ablation: anchor above hitchhiker"].ours == 0
    assert by["exp4, no ablation: anchor - hitchhiker"].ours == pytest.approx(0.0, abs=1e-9)
