"""Issue 16: a live agent on real code through a real numpy/pandas upgrade.

The environments are built from PyPI wheels on first use (cached under
~/.cache/memworth/upgrade-envs); without a network that fails, and these tests fail with
pip's message rather than skip.
"""

from __future__ import annotations

import csv
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from memworth.cli import main
from memworth.errors import UnavailableError, ValidationError
from memworth_experiments import upgrade
from memworth_experiments.common import BEYOND_EXPERIMENTS, GuardWatch, load_config
from memworth_experiments.upgrade_world import ERAS, Env, OutcomeTable, Worker, build_env, load_tasks


@pytest.fixture(scope="module")
def envs() -> dict[str, Env]:
    cfg = load_config("upgrade")
    return {
        role: build_env({p: str(v) for p, v in pins.items()}, cfg["world"]["interpreter"])
        for role, pins in cfg["envs"].items()
    }


def test_the_world_is_big_enough_and_well_formed() -> None:
    tasks = load_tasks()
    recipes = [r for t in tasks for r in t.recipes]
    assert len(tasks) >= 40 and len(recipes) >= 150
    assert all(len(t.requests) >= 2 and len(t.recipes) >= 3 for t in tasks)
    assert len({r.id for r in recipes}) == len(recipes)
    assert Counter(r.era for r in recipes).keys() == set(ERAS)
    for t in tasks:  # a recipe is a whole function with the task's signature; the memory text says what it does
        assert all(r.code.startswith(f"def {t.signature}:\n") and r.text.startswith(t.title) for r in t.recipes)


def test_the_worker_runs_recipes_and_survives_hangs_and_crashes(envs: dict[str, Env]) -> None:
    test = "def check(solve, rng):\n    assert solve(2) == 4, solve(2)\n"
    with Worker(envs["after"].python, timeout=2.0) as worker:
        assert worker.versions["numpy"].startswith("2.")
        assert worker.run("def f(x):\n    print('noise')\n    return x * 2\n", "f", test, 0) == (True, "")
        assert worker.run("def f(x):\n    return x + 3\n", "f", test, 0) == (False, "AssertionError: 5")
        ok, error = worker.run("def f(x):\n    while True:\n        pass\n", "f", test, 0)
        assert not ok and error.startswith("Timeout")
        ok, error = worker.run("def f(x):\n    import os\n    os._exit(3)\n", "f", test, 0)
        assert not ok and error.startswith("WorkerCrash")
        ok, error = worker.run("def f(x):\n    raise SystemExit(1)\n", "f", test, 0)
        assert not ok and error.startswith("SystemExit")
        ok, error = worker.run("def f(x):\n    return bytearray(8 * 1024**3)\n", "f", test, 0)
        assert (ok, error) == (False, "MemoryError: ")
        assert worker.run("def f(x):\n    return x * 2\n", "f", test, 0) == (True, "")
        assert worker.restarts == 2 and worker.calls == 7


def test_ground_truth_comes_from_running_in_both_environments(envs: dict[str, Env]) -> None:
    tasks = {t.id: t for t in load_tasks()}
    outcome: dict[str, dict[str, tuple[bool, str]]] = {}
    for role, env in envs.items():
        with Worker(env.python) as worker:
            for rid in (
                "add_row/df_append",
                "add_row/concat",
                "transpose/swapaxes",
                "strip_suffix/str_replace_default",
            ):
                task = tasks[rid.split("/")[0]]
                recipe = next(r for r in task.recipes if r.id == rid)
                outcome.setdefault(rid, {})[role] = worker.run(recipe.code, task.name, task.test, 3)
    assert outcome["add_row/df_append"]["before"] == (True, "")
    assert outcome["add_row/df_append"]["after"][1].startswith(
        "AttributeError: 'DataFrame' object has no attribute 'append'"
    )
    assert outcome["add_row/concat"] == {"before": (True, ""), "after": (True, "")}
    assert outcome["transpose/swapaxes"]["after"] == (True, "")  # deprecated in pandas 2.2, not removed
    # pandas 1.5 reads '.0' as a regular expression: a bug before the upgrade that the upgrade fixes
    assert not outcome["strip_suffix/str_replace_default"]["before"][0]
    assert outcome["strip_suffix/str_replace_default"]["after"] == (True, "")


def test_a_missing_interpreter_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(UnavailableError, match=r"python9\.99"):
        build_env({"numpy": "1.26.4"}, "python9.99", root=tmp_path)
    assert not list(tmp_path.iterdir())


def _world(passes: dict[str, tuple[bool, bool]]) -> upgrade.World:
    """A world whose table says, per recipe, whether it passes before and after the upgrade."""
    tasks = load_tasks()[:1]
    outcomes: dict[str, dict[str, list[list[Any]]]] = {
        r: {"before": [[b, ""]], "after": [[a, "" if a else "AttributeError: gone"]]} for r, (b, a) in passes.items()
    }
    recipes = {r: tasks[0].recipes[0] for r in passes}
    return upgrade.World(tasks, recipes, OutcomeTable({}, 1, outcomes), {})


def test_the_flag_tally_counts_broken_false_and_bugs() -> None:
    cfg = load_config("upgrade")
    cfg["world"] |= {"upgrade_at": 100, "flag_window": 300, "min_retrievals": 10}
    world = _world(
        {
            "old_fast": (True, False),  # broken, flagged 50 episodes after the upgrade
            "old_slow": (True, False),  # broken, flagged 350 after: too late
            "old_early": (True, False),  # broken, quarantined before the upgrade (a false flag then) and still
            "old_rare": (True, False),  # broken, retrieved 3 times after: not counted
            "new": (True, True),  # passes throughout, flagged then released: a false flag
            "bug": (False, False),  # fails throughout, flagged: a bug found
        }
    )
    run = {
        "flags": [
            ("old_early", 50, "re-verify"),
            ("old_fast", 150, "re-verify"),
            ("new", 200, "re-verify"),
            ("new", 250, "release"),
            ("bug", 75, "suppress"),
            ("old_slow", 450, "suppress"),
        ],
        "retrieved_before": Counter({"bug": 12, "new": 30}),
        "retrieved_after": Counter({"old_fast": 20, "old_slow": 20, "old_early": 15, "old_rare": 3, "new": 40}),
        "ran": [],
        "guard": GuardWatch(running=True, first=300, rollbacks=["new:re-verify"], held=2).row(),
    }
    row = upgrade.flag_tally(world, cfg, run)
    assert (row["guard_running"], row["guard_fired_at"], row["guard_held"]) == (1, 300, 2)
    assert row["guard_rollbacks"] == "new:re-verify"
    assert (row["broken_eligible"], row["broken_flagged"]) == (3, 2)
    assert row["delays"] == "old_early@0;old_fast@50" and row["missed"] == "old_slow"
    assert row["false_flags"] == 2 and row["false_flagged"] == "new@200;old_early@50"
    assert (row["bugs_eligible"], row["bugs_flagged"]) == (1, 1)


def _two_tasks(*, fine_after: bool) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    """200 episodes, upgrade at 100, alternating two tasks: ("broken", "sibling") where "broken"
    runs and fails after the upgrade; ("hidden", "fine") where "fine" runs and passes before it,
    and after it runs and passes (``fine_after``) or no recipe of the task runs and it fails."""
    cfg = load_config("upgrade")
    cfg["world"] |= {"upgrade_at": 100, "flag_window": 100, "min_retrievals": 10}
    world = _world({"broken": (True, False), "sibling": (True, True), "hidden": (True, False), "fine": (True, True)})
    recalled, ran, outcomes = [], [], []
    for t in range(1, 201):
        if t % 2:
            recalled.append(("broken", "sibling"))
            ran.append("broken")
            outcomes.append(t <= 100)
        else:
            recalled.append(("hidden", "fine"))
            ran.append("fine" if fine_after or t <= 100 else "")
            outcomes.append(fine_after or t <= 100)
    after = Counter(m for t, members in enumerate(recalled, start=1) if t > 100 for m in members)
    return world, cfg, {"recalled": recalled, "ran": ran, "outcomes": outcomes, "retrieved_after": after}


def test_the_oracle_bound_sees_only_what_reached_an_outcome() -> None:
    """A broken recipe that ran (and failed) beside a working sibling, and a broken recipe that
    never ran beside a working one: on the streams a store sees (every recalled recipe shares
    the outcome) the oracle flags the broken recipe and its sibling alike; crediting only the
    recipe run, the broken one alone; the one that never ran, never."""
    world, cfg, run = _two_tasks(fine_after=True)
    seen = upgrade.oracle_bound(world, cfg, run, attributable=False)
    assert seen == {"oracle_caught": 1, "oracle_false": 1, "reached": 1}
    by_ran = upgrade.oracle_bound(world, cfg, run, attributable=True)
    assert by_ran == {"oracle_caught": 1, "oracle_false": 0, "reached": 1}
    run["outcomes"] = [True] * 200  # nothing fell: nothing to flag
    assert upgrade.oracle_bound(world, cfg, run, attributable=False) == {"oracle_caught": 0, "oracle_false": 0, "reached": 1}


def test_the_oracle_bound_of_a_used_store_charges_a_failure_no_recipe_ran_to_every_recipe_recalled() -> None:
    """Under ``used`` credit the agent names the recipe it ran; when none of the task's ran it
    names none, and the store charges the failure to every recipe recalled: the bound on what
    a used store sees counts those failures (the recipe-run bound does not; found in review)."""
    world, cfg, run = _two_tasks(fine_after=False)
    by_ran = upgrade.oracle_bound(world, cfg, run, attributable=True)
    assert by_ran == {"oracle_caught": 1, "oracle_false": 0, "reached": 1}
    used = upgrade.oracle_bound(world, cfg, run, attributable=False, used_store=True)
    assert used == {"oracle_caught": 1, "oracle_false": 1, "reached": 1}  # "fine" took the unattributed failures


def test_quick_variant_through_the_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert "upgrade" in BEYOND_EXPERIMENTS
    out = tmp_path / "upgrade"
    code = main(["reproduce", "upgrade", "--quick", "--no-progress", "--check", "--out", str(out)])
    captured = capsys.readouterr()
    printed = captured.out
    assert code == 0, captured.err or printed  # no network: pip's error, not a skip
    payload = json.loads((out / "results.json").read_text())
    settings = payload["settings"]
    assert payload["experiment"] == "upgrade" and settings["quick"] is True
    assert (
        settings["environments"]["before"]["pandas"] == "1.5.3"
        and settings["environments"]["after"]["pandas"] == "2.2.3"
    )
    broken = settings["broken_by_upgrade"]
    assert "add_row/df_append" in broken and "add_row/concat" not in broken and "transpose/swapaxes" not in broken
    assert broken["series_pairs/iteritems"].startswith("AttributeError")
    assert "broken by the upgrade: add_row/df_append: AttributeError" in printed  # the list, with each error
    assert all(r["paper"] is None for r in payload["rows"])
    names = {r["name"] for r in payload["rows"]}
    assert {"uniform: false flags per seed", "ran: post-upgrade lift over the twin", "used: false flags per seed"} <= names
    assert {"uniform: oracle bound, broken recipes flagged within 300", "ran: oracle bound, broken recipes flagged within 300"} <= names
    assert {"uniform: ablation no_standing", "ran: ablation no_standing"} <= names
    with (out / "raw.csv").open() as f:
        raw = list(csv.DictReader(f))
    summaries = [r for r in raw if r["summary"] == "1"]
    assert Counter((r["credit"], r["arm"]) for r in summaries) == {
        ("uniform", "governed"): 2,
        ("uniform", "ungoverned"): 2,
        ("ran", "governed"): 2,
        ("ran", "ungoverned"): 2,
        ("used", "governed"): 2,
        ("used", "ungoverned"): 2,
        ("uniform", "no_standing"): 1,
        ("ran", "no_standing"): 1,
    }
    for r in summaries:  # every episode is counted once, before or after the upgrade
        assert int(r["all_before_n"]) == 300 and int(r["all_after_n"]) == 400
        assert int(r["arm_after_n"]) + int(r["held_after_n"]) == 400
        # crowding by standing is counted on the recalls governance ranked; the twin promotes nothing
        assert int(r["recalls"]) == int(r["arm_before_n"]) + int(r["arm_after_n"]) >= int(r["crowded"]) >= 0
        assert r["arm"] != "ungoverned" or int(r["crowded"]) == 0
    assert "uniform: governed recalls whose top k held a promoted recipe of another task: " in printed
    assert (out / "figure.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_too_few_episodes_are_refused_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The upgrade comes after episode 300 and flags are counted for 300 more: 600 episodes cannot show it."""
    assert main(["reproduce", "upgrade", "--episodes", "600", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--episodes" in err and "600" in err and "Traceback" not in err
    assert not (tmp_path / "results.json").exists()


def test_an_unknown_credit_rule_is_refused() -> None:
    cfg = load_config("upgrade")
    cfg["world"]["ablation_credits"] = ["uniform", "everyone"]
    with pytest.raises(ValidationError, match=r"ablation_credits.*everyone"):
        upgrade.run(cfg, 2, 700, show_progress=False)
