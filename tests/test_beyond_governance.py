"""Issue 14's experiments: governance on two agent worlds, and the diluted workload (quick variants)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from memworth.cli import main
from memworth_experiments import diluted, governance
from memworth_experiments.common import BEYOND_EXPERIMENTS, GuardWatch, guard_note, load_config, load_world


@pytest.mark.parametrize("name", ["governance", "diluted"])
def test_quick_variant_through_the_cli(name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert name in BEYOND_EXPERIMENTS
    out = tmp_path / name
    code = main(["reproduce", name, "--quick", "--no-progress", "--out", str(out)])
    printed = capsys.readouterr().out
    assert code == 0, printed
    payload = json.loads((out / "results.json").read_text())
    assert payload["experiment"] == name and payload["settings"]["quick"] is True
    assert all(r["paper"] is None for r in payload["rows"])  # issue targets are not paper numbers
    assert (out / "figure.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with (out / "raw.csv").open() as f:
        raw = list(csv.DictReader(f))
    if name == "governance":
        assert {r["world"] for r in raw} == {"agent", "upgrade"}
        assert {r["arm"] for r in raw} == {"governed", "no_quarantine", "holdout_guard", "used_answered_only"}
        assert all(int(r["early_n"]) > 0 and int(r["after_n"]) > 0 for r in raw)
        assert "upgrade (held-out)" in printed and "agent (tuning)" in printed
        # the guard runs only where the store has a holdout share, and every arm says what it did
        assert {r["arm"] for r in raw if r["guard_running"] == "1"} == {"holdout_guard"}
        for world in ("agent", "upgrade"):
            assert f"{world}, governed: the holdout guard did not run" in printed
            assert f"{world}, holdout_guard: the holdout guard fired in " in printed
    else:
        assert "the defaults (no holdout share): the holdout guard did not run" in printed
        assert "with a 0.1 holdout share: the holdout guard fired in " in printed
        guarded = [r for r in raw if float(r["holdout"]) > 0]
        assert len(guarded) == 1 and guarded[0]["guard_running"] == "1"
        raw = [r for r in raw if float(r["holdout"]) == 0]
    if name == "diluted":
        assert len(raw) == 2 and all(0 <= int(r["broken_flagged"]) <= int(r["broken"]) == 10 for r in raw)


def test_the_agent_names_the_memory_it_answered_from() -> None:
    """The memory ``record(..., used=...)`` names in the worlds: the misleading one when it misled,
    else the first holding the answer, else none (every recalled memory shares the failure)."""
    from memworth import HashingEncoder, MemoryStore
    from memworth_experiments.demo import answered_from

    store = MemoryStore.open("memory://", encoder=HashingEncoder(), seed=0, exploration=0.0)
    world = load_world("upgrade")
    store.add_many([{"id": m, "text": world["memories"][m]} for m in ("stale", "successor", "concat_doc", "git_branch")])
    recall = store.recall("add a row to a pandas DataFrame", k=4)
    rows_new = {"answer": ["pd.concat"], "misleading": ["call df.append(row)"]}
    assert answered_from(rows_new, recall) == "stale"
    first = next(r.memory.id for r in recall if "pd.concat" in r.memory.text.lower())
    assert answered_from({"answer": ["pd.concat"]}, recall) == first
    assert answered_from({"answer": ["kubectl autoscale"]}, recall) is None
    store.close()


def test_the_tally_counts_what_governance_did_to_whom() -> None:
    world = load_world("agent")
    spec = {"affected": "geography_new", "stale": "stale"}
    families = ["python"] * 100 + ["geography_new", "python"] * 150
    ran = {
        "outcomes": np.array([True] * 100 + [True, False] * 150),
        "families": families,
        "events": [
            {"episode": 150, "memory": "stale", "action": "re-verify"},
            {"episode": 175, "memory": "paris", "action": "re-verify"},
            {"episode": 200, "memory": "paris", "action": "release"},
            {"episode": 300, "memory": "everest", "action": "suppress"},
        ],
        "guard": GuardWatch().row(),
    }
    twin = {"outcomes": np.array([True] * 100 + [False, False] * 150), "families": families, "events": []}
    row = governance.tally(ran, twin, world, spec, early_end=400)
    assert (row["early_gov_s"], row["early_base_s"], row["early_n"]) == (150, 0, 150)
    assert row["after_n"] == 300 and row["after_gov_s"] == 150 and row["after_base_s"] == 0
    assert row["stale_flagged"] == 150
    assert row["useful_flagged"] == "everest@300;paris@175" and row["useful_released"] == "paris@200"
    assert row["answering_flagged"] == ""  # neither Paris nor Everest answers a task of the agent world


def test_the_tally_says_apart_the_flagged_memories_that_answer_a_task() -> None:
    world = load_world("agent")
    answering = governance.answers_a_task(world)
    assert {"stale", "dissolution", "specialist", "control"} <= answering
    assert not {"paris", "dna", "files", "hitchhiker", "bratislava"} & answering
    events = [
        {"episode": 150, "memory": "files", "action": "re-verify"},
        {"episode": 160, "memory": "dissolution", "action": "suppress"},
        {"episode": 170, "memory": "stale", "action": "re-verify"},
    ]
    ran = {
        "outcomes": np.ones(300, dtype=bool),
        "families": ["python"] * 300,
        "events": events,
        "guard": GuardWatch().row(),
    }
    twin = {"outcomes": np.ones(300, dtype=bool), "families": ["python"] * 300, "events": []}
    row = governance.tally(ran, twin, world, {"affected": "geography_new", "stale": "stale"}, early_end=400)
    assert row["useful_flagged"] == "dissolution@160;files@150"
    assert row["answering_flagged"] == "dissolution@160"


def test_the_diluted_tally_separates_caught_false_and_low() -> None:
    w = load_config("diluted")["workload"]
    usefulness = np.array([0.9, 0.8, 0.5, 0.1] + [0.6] * 6)
    got = {
        "usefulness": usefulness,
        "broken": {"m000", "m001"},
        "change": 100,
        "first": {
            "m000": (150, "re-verify"),
            "m001": (50, "suppress"),
            "m002": (60, "suppress"),
            "m003": (70, "deprecate"),
        },
        "oracle_caught": 3,
        "oracle_false": 0,
    }
    row = diluted.tally(got, w)
    assert (row["oracle_caught"], row["oracle_false"]) == (3, 0)
    assert row["broken_flagged"] == 1  # m001 was flagged before it broke: not caught by the change
    assert (row["false_before"], row["false_after"], row["low_flagged"]) == (1, 0, 1)
    assert row["false_ids"].startswith("m002(u=0.50)@60")


def test_the_oracle_bound_weighs_each_episode_by_what_it_knows() -> None:
    # memory 0 broke (usefulness 0.8 -> 0), memory 1 did not (0.6): success probability 0.3
    now, useful, broke = np.array([0.0, 0.6]), np.array([0.8, 0.6]), np.array([True, False])
    failed = diluted._oracle_steps(np.array([0, 1]), now, useful, broke, ok=False)
    assert failed[0] == pytest.approx(np.log(0.7 / 0.3)) and failed[1] == pytest.approx(np.log(1 / 0.7))
    succeeded = diluted._oracle_steps(np.array([0, 1]), now, useful, broke, ok=True)
    assert succeeded[0] == pytest.approx(np.log(0.3 / 0.7)) and succeeded[1] < -15  # 1 broken: no success possible
    # over many episodes the broken memory's ratio grows and the other's falls
    rng = np.random.default_rng(0)
    total = sum(diluted._oracle_steps(np.array([0, 1]), now, useful, broke, bool(rng.random() < 0.3)) for _ in range(200))
    assert total[0] > 0 > total[1]


class _Proposal:
    def __init__(self, memory_id: str, action: str, reason: str) -> None:
        self.memory_id, self.action, self.reason = memory_id, action, reason


class _Reading:
    def __init__(self, fired: bool) -> None:
        self.fired = fired


class _Report:
    def __init__(self, guard: _Reading | None, proposals: list[_Proposal] = []) -> None:  # noqa: B006
        self.guard, self.proposals = guard, proposals


def test_the_guard_watch_keeps_the_first_firing_and_what_it_proposed_to_roll_back() -> None:
    w = GuardWatch()
    w.see(25, _Report(None))  # no holdout share: no reading
    assert w.row() == {"guard_running": 0, "guard_fired_at": 0, "guard_held": 0, "guard_rollbacks": ""}
    w.see(50, _Report(_Reading(False)))
    assert w.row()["guard_running"] == 1 and w.row()["guard_fired_at"] == 0
    undo = "holdout guard: governed 0.41 below holdout 0.62 (e 21.3); undoes audit entry 12 (suppress)"
    w.see(75, _Report(_Reading(True), [_Proposal("paris", "rollback", undo), _Proposal("x", "promote", "why")]))
    w.see(100, _Report(_Reading(True), [_Proposal("rome", "rollback", undo.replace("suppress", "re-verify"))]))
    assert w.row() == {
        "guard_running": 1,
        "guard_fired_at": 75,
        "guard_held": 2,
        "guard_rollbacks": "paris:suppress",
    }
    line = guard_note("agent", [{"seed": 4} | w.row(), {"seed": 5} | GuardWatch(running=True).row()])
    assert line == (
        "agent: the holdout guard fired in 1 of 2 seeds: seed 4 at episode 75 (held 2 governs; proposed rolling "
        "back paris:suppress)"
    )
