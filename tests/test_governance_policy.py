"""``GovernancePolicy`` checks its own settings when it is made, and every face says so cleanly.

The faces: Python (the constructor and ``dataclasses.replace``), the CLI (``memworth govern
--replay`` flags: one line, exit 2, the flag named), the HTTP API (no policy settings are
taken: a setting in ``POST /v1/govern`` is a 422 naming it, and nothing is applied) and
MCP (``governance_proposals`` takes no settings: one given is a tool error naming it).
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from mcp.server.mcpserver.exceptions import ToolError

from memworth import Counts, HashingEncoder, MemoryStore, ValidationError
from memworth.cli import main
from memworth.governance import GovernancePolicy
from memworth.governance.parts import (
    FLAT_NAMES,
    PARTS,
    ChangeSettings,
    ClassSettings,
    GuardSettings,
    LowWorthSettings,
)
from memworth.governance.replay import ReplaySettings
from memworth.mcp_server import create_server
from memworth.server import create_app, create_key

BAD: list[tuple[dict[str, Any], str, str]] = [
    ({"theta_high": -0.1}, "theta_high", "[0, 1]"),
    ({"theta_low": 1.5}, "theta_low", "[0, 1]"),
    ({"theta_low": 0.7}, "theta_low", "<= theta_high"),
    ({"theta_high": 0.3, "theta_low": 0.4}, "theta_low", "<= theta_high"),
    ({"theta_high": math.nan}, "theta_high", "finite"),
    ({"theta_low": "0.4"}, "theta_low", "must be a number, got str"),
    ({"theta_low": True}, "theta_low", "must be a number, got bool"),
    ({"min_evidence": -1}, "min_evidence", ">= 0"),
    ({"min_evidence": -0.5}, "min_evidence", ">= 0"),
    ({"min_evidence": math.inf}, "min_evidence", "finite"),
    ({"min_evidence": None}, "min_evidence", "must be a number, got NoneType"),
    ({"min_evidence": False}, "min_evidence", "got bool"),
    ({"deprecate_below": 2}, "deprecate_below", "[0, 1]"),
    ({"promote_above": math.nan}, "promote_above", "finite"),
    ({"demote_below": 0.8}, "demote_below", "<= promote_above"),
    ({"min_confidence": -0.01}, "min_confidence", "[0, 1]"),
    ({"staleness_window": 0}, "staleness_window", ">= 1"),
    ({"staleness_window": 20.0}, "staleness_window", "must be an integer, got float"),
    ({"staleness_window": True}, "staleness_window", "got bool"),
    ({"staleness_drop": 1.2}, "staleness_drop", "[0, 1]"),
    ({"max_changes_per_day": -1}, "max_changes_per_day", ">= 0"),
    ({"max_changes_per_day": "3"}, "max_changes_per_day", "got str"),
    ({"hot_worth": -math.inf}, "hot_worth", "finite"),
    ({"change_detection": "yes"}, "change_detection", "True or False"),
    ({"change_detection": 1}, "change_detection", "True or False"),
    ({"change_odds_ratio": 0.0}, "change_odds_ratio", "(0, 1)"),
    ({"change_odds_ratio": 1.0}, "change_odds_ratio", "(0, 1)"),
    ({"change_threshold": 0}, "change_threshold", "> 0"),
    ({"change_threshold": math.inf}, "change_threshold", "finite"),
    ({"change_min_history": -1}, "change_min_history", ">= 0"),
    ({"change_reference_half_life": 0.0}, "change_reference_half_life", "> 0"),
    ({"change_reference_half_life": -5}, "change_reference_half_life", "> 0"),
    ({"change_reference_half_life": math.nan}, "change_reference_half_life", "finite"),
    ({"change_context_strength": 0.0}, "change_context_strength", "> 0"),
    ({"change_context_strength": math.inf}, "change_context_strength", "finite"),
    ({"change_context_strength": "0.25"}, "change_context_strength", "number"),
    ({"deprecation": "bayes"}, "deprecation", "'fixed' or 'sequential'"),
    ({"deprecation": None}, "deprecation", "'fixed' or 'sequential'"),
    ({"deprecation_alpha": 0.0}, "deprecation_alpha", "(0, 1)"),
    ({"deprecation_alpha": 1}, "deprecation_alpha", "(0, 1)"),
    ({"pin_evidence": -1}, "pin_evidence", ">= 0"),
    ({"pin_evidence": float("inf")}, "pin_evidence", "finite"),
    ({"probe_alpha": 0.5}, "probe_alpha", "(0, 0.5)"),
    ({"probe_alpha": True}, "probe_alpha", "number"),
    ({"probe_beta": 0.0}, "probe_beta", "(0, 0.5)"),
    ({"probe_margin": 0.0}, "probe_margin", "(0, 1)"),
    ({"probe_margin": 1}, "probe_margin", "(0, 1)"),
    ({"max_quarantined": 1.5}, "max_quarantined", "[0, 1]"),
    ({"change_alpha": 1.0}, "change_alpha", "(0, 1)"),
    ({"change_alpha": "0.05"}, "change_alpha", "number"),
    ({"change_odds_ratios": (0.05, 1.0)}, "change_odds_ratios", "below 1"),
    ({"change_odds_ratios": (0.5, 0.5)}, "change_odds_ratios", "distinct"),
    ({"change_odds_ratios": 0.5}, "change_odds_ratios", "sequence"),
    ({"change_odds_ratios": (0.05, 0.5), "change_weights": (1.0,)}, "change_weights", "one per odds ratio"),
    ({"change_odds_ratios": (0.05, 0.5), "change_weights": (1.0, 0.0)}, "change_weights", "> 0"),
    ({"change_history_prior": -1}, "change_history_prior", ">= 0"),
    ({"change_hold_apart": -1}, "change_hold_apart", ">= 0"),
    ({"change_hold_apart": 2.5}, "change_hold_apart", "integer"),
    ({"change_frozen_baseline": 1}, "change_frozen_baseline", "True or False"),
    ({"window_test": 1}, "window_test", "True or False"),
    ({"guard_alpha": 0.0}, "guard_alpha", "(0, 1)"),
    ({"deprecation_evidence": "hits"}, "deprecation_evidence", "'retrievals' or 'weighted'"),
    ({"deprecation_evidence": 1}, "deprecation_evidence", "'retrievals' or 'weighted'"),
]


@pytest.mark.parametrize(("settings", "field", "reason"), BAD)
def test_a_bad_setting_is_refused_when_the_policy_is_made(settings: dict[str, Any], field: str, reason: str) -> None:
    with pytest.raises(ValidationError) as err:
        GovernancePolicy(**settings)
    assert err.value.field == field and reason in err.value.reason
    with pytest.raises(ValidationError) as err:  # replace() makes a new policy: the same checks
        dataclasses.replace(GovernancePolicy(), **settings)
    assert err.value.field == field


def test_every_setting_is_covered_by_a_refusal() -> None:
    # every setting, by its flat name (the compatibility table covers every part's every setting)
    assert set(FLAT_NAMES) == {field for _, field, _ in BAD}
    assert set(FLAT_NAMES.values()) == {(p, f.name) for p, kind in PARTS.items() for f in dataclasses.fields(kind)}


@pytest.mark.parametrize(("settings", "field", "reason"), BAD)
def test_a_bad_setting_is_refused_by_its_part_naming_the_dotted_setting(
    settings: dict[str, Any], field: str, reason: str
) -> None:
    # the same refusals, given as parts (as the store keeps them): named part.setting
    nested: dict[str, dict[str, Any]] = {}
    for flat, value in settings.items():
        part, name = FLAT_NAMES[flat]
        nested.setdefault(part, {})[name] = value
    with pytest.raises(ValidationError) as err:
        GovernancePolicy.from_settings(nested)
    part, name = FLAT_NAMES[field]
    assert err.value.field == f"{part}.{name}" and reason in err.value.reason


def test_the_flat_names_are_a_compatibility_layer_over_the_parts() -> None:
    policy = GovernancePolicy(theta_low=0.2, change_threshold=9, deprecation="fixed", guard_alpha=0.1)
    assert (policy.classes.theta_low, policy.change.threshold, policy.low_worth.rule) == (0.2, 9, "fixed")
    assert (policy.theta_low, policy.change_threshold, policy.deprecation, policy.guard_alpha) == (0.2, 9, "fixed", 0.1)
    built = GovernancePolicy(
        classes=ClassSettings(theta_low=0.2),
        change=ChangeSettings(threshold=9),
        low_worth=LowWorthSettings(rule="fixed"),
        holdout_guard=GuardSettings(alpha=0.1),
    )
    # equal and hashed alike whichever way it was made (the store compares policies to decide a rescan)
    assert built == policy and hash(built) == hash(policy) and len({built, policy}) == 1
    assert built != GovernancePolicy(theta_low=0.2) and dataclasses.replace(built, theta_low=0.25) != built
    # replace() by a flat name changes only that setting of its part
    moved = dataclasses.replace(policy, change_threshold=10)
    assert moved.change == dataclasses.replace(policy.change, threshold=10) and moved.classes == policy.classes
    # every flat name reads its part's setting
    assert policy.flat_settings() == {f: getattr(getattr(policy, p), n) for f, (p, n) in FLAT_NAMES.items()}
    assert all(getattr(policy, f) == v for f, v in policy.flat_settings().items())
    with pytest.raises(dataclasses.FrozenInstanceError):
        policy.theta_low = 0.3  # type: ignore[misc]
    with pytest.raises(ValidationError) as err:
        GovernancePolicy(theta_lo=0.2)
    assert err.value.field == "theta_lo"
    with pytest.raises(ValidationError) as err:
        GovernancePolicy(change=ClassSettings())  # type: ignore[arg-type]
    assert err.value.field == "change" and "ChangeSettings" in err.value.reason


def test_kept_settings_load_in_the_flat_and_the_nested_shape() -> None:
    policy = GovernancePolicy(theta_low=0.3, change_threshold=8.0, probe_beta=0.1)
    nested = policy.settings()
    assert set(nested) == set(PARTS) and nested["change"]["threshold"] == 8.0
    assert GovernancePolicy.from_settings(nested) == policy
    assert GovernancePolicy.from_settings(policy.flat_settings()) == policy  # a store kept before the parts
    assert GovernancePolicy(**nested) == policy == GovernancePolicy(**policy.flat_settings())
    with pytest.raises(ValidationError) as err:
        GovernancePolicy(change={"threshold": -1.0})
    assert err.value.field == "change.threshold"


def test_good_settings_are_kept_as_given() -> None:
    policy = GovernancePolicy(
        theta_high=1,
        theta_low=0,
        min_evidence=np.int64(0),
        deprecate_below=np.float64(0.2),
        promote_above=0.5,
        demote_below=0.5,
        staleness_window=np.int64(1),
        max_changes_per_day=0,
        change_detection=np.bool_(False),
        change_odds_ratio=0.5,
        change_threshold=1e-9,
        change_min_history=0,
        change_reference_half_life=1e12,
        change_context_strength=1e-6,
        deprecation="sequential",
        deprecation_alpha=0.5,
        deprecation_evidence="retrievals",
    )
    assert policy.theta_high == 1 and policy.min_evidence == 0 and policy.deprecation == "sequential"
    assert policy.propose("m", Counts(0.0, 30.0, 30.0), "active", "normal") is not None


def test_the_defaults_are_valid_and_govern() -> None:
    p = GovernancePolicy().propose("old", Counts(success=1.0, failure=29.0, n=30), "active", "normal")
    assert p is not None and p.action == "deprecate"
    # the same worth on less evidence is not enough for the error-controlled test: demoted only
    p = GovernancePolicy().propose("old", Counts(success=1.0, failure=4.0, n=20), "active", "normal")
    assert p is not None and p.action == "demote"


def test_a_store_refuses_an_invalid_min_evidence_before_the_policy() -> None:
    with pytest.raises(ValidationError) as err:
        MemoryStore.open("memory://", encoder=HashingEncoder(), min_evidence=-1)
    assert err.value.field == "min_evidence"


def test_replay_settings_hold_only_valid_policies() -> None:
    with pytest.raises(ValidationError) as err:
        ReplaySettings("lenient", dataclasses.replace(GovernancePolicy(), theta_low=-0.3))
    assert err.value.field == "theta_low"


# -- the faces ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("flags", "needle"),
    [
        (["--theta-low", "0.9"], "--theta-low: must be <= theta_high"),
        (["--min-evidence", "-3"], "--min-evidence: must be a finite number >= 0"),
        (["--theta-high", "nan"], "--theta-high: must be a finite number"),
        (["--demote-below", "0.95"], "--demote-below: must be <= promote_above"),
    ],
)
def test_cli_replay_flags_are_one_line_exit_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, flags: list[str], needle: str
) -> None:
    url = f"sqlite:///{tmp_path / 'g.db'}"
    code = main(["govern", "--replay", *flags, "--store", url, "--encoder", "hashing"])
    out = capsys.readouterr()
    assert code == 2 and out.out == ""
    assert out.err.count("\n") == 1 and needle in out.err and "Traceback" not in out.err


def test_http_takes_no_policy_settings_and_says_which(tmp_path: Path) -> None:
    with MemoryStore.open("memory://", encoder=HashingEncoder(), seed=0) as store:
        client = TestClient(create_app(store))
        h = {"Authorization": f"Bearer {create_key(store, 'team', 'agent')}"}
        client.post("/v1/memories", json={"text": "Prague was the capital of Czechoslovakia.", "id": "cz"}, headers=h)
        r = client.post("/v1/govern", json={"apply": True, "theta_low": 0.9}, headers=h)
        assert r.status_code == 422
        error = r.json()["error"]
        assert error["type"] == "ValidationError" and error["field"] == "theta_low" and error["reason"]
        assert store.audit(namespace="team") == []  # nothing applied


def test_mcp_takes_no_policy_settings_and_says_which() -> None:
    with MemoryStore.open("memory://", encoder=HashingEncoder(), seed=0) as store:
        server = create_server(store)
        with pytest.raises(ToolError) as err:
            asyncio.run(server.call_tool("governance_proposals", {"min_evidence": -1}))
        assert "ValidationError: min_evidence: not an argument of governance_proposals" in str(err.value)
        ok = asyncio.run(server.call_tool("governance_proposals", {}))
        assert ok.structured_content == {"namespace": "default", "proposals": [], "applied": False, "guard": None}


def test_failures_a_flagged_memory_explains_hold_suppress_and_deprecate() -> None:
    """Issue 14 item 6: a worth-based protective action passes through explaining away too."""
    import numpy as np

    from memworth.signals.change_detection import OutcomeStream

    y = np.zeros(40, dtype=bool)
    alone = OutcomeStream(y, np.ones(40), None, np.arange(1, 41))
    beside = OutcomeStream(y, np.ones(40), None, np.arange(1, 41), window_explained_by=("stale",))
    counts = Counts(0.0, 40.0, 40.0)
    assert GovernancePolicy().propose("m", counts, "active", "normal", stream=alone).action == "deprecate"
    held = GovernancePolicy().propose("m", counts, "active", "normal", stream=beside)
    assert held is not None and held.action == "demote" and held.numbers["worth_explained_by"] == ["stale"]
    fixed = GovernancePolicy(deprecation="fixed").propose("m", counts, "active", "normal", stream=beside)
    assert fixed is not None and fixed.action == "demote"


def test_numpy_scalars_given_for_settings_are_kept_as_the_python_numbers_they_equal() -> None:
    import json

    from memworth.store import checkpoint

    plain = GovernancePolicy(change_hold_apart=3, staleness_window=7, window_test=True, change_threshold=11.5)
    policy = GovernancePolicy(
        change_hold_apart=np.int64(3),
        staleness_window=np.int64(7),
        window_test=np.bool_(True),
        change_threshold=np.float32(11.5),
    )
    assert policy == plain
    assert type(policy.change.hold_apart) is int and type(policy.staleness.window_test) is bool
    assert GovernancePolicy.from_settings(json.loads(json.dumps(policy.settings()))) == policy
    assert checkpoint.fingerprint(policy) == checkpoint.fingerprint(plain)
