"""Governance through the store, on every backend: propose, apply, audit, restore, limits, gates."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from memworth import MemoryStore, StoreError, ValidationError
from memworth.errors import ChangedError, UnknownEntryError
from memworth.governance import GovernancePolicy


def drive(store: MemoryStore, query: str, outcomes: list[bool]) -> str:
    """Recall the single best memory for ``query`` once per outcome and record it."""
    store.exploration = 0.0
    target = ""
    for ok in outcomes:
        recall = store.recall(query, k=1)
        target = recall.results[0].memory.id
        store.record(recall.episode, ok)
    return target


def test_a_failing_memory_is_proposed_for_deprecation_then_applied_and_restored(filled: MemoryStore) -> None:
    # enough evidence for the namespace's error-controlled test (e-BH over e-values)
    target = drive(filled, "capital of czechoslovakia", [False] * 40 + [True] * 2)
    assert target == "czechoslovakia"
    report = filled.govern()
    (p,) = [p for p in report.proposals if p.memory_id == target]
    assert (p.action, p.field, p.old, p.new) == ("deprecate", "status", "active", "deprecated")
    assert p.numbers["retrievals"] == 42 and p.numbers["worth"] == pytest.approx(2 / 42)
    assert p.numbers["deprecate_evalue"] >= p.numbers["worth_level"]
    assert filled.get(target).status == "active" and report.applied == []  # proposing changes nothing
    applied = filled.govern(apply=True)
    entry = next(e for e in applied.applied if e.memory_id == target)
    assert filled.get(target).status == "deprecated"
    assert entry.settings["policy"]["low_worth"]["deprecate_below"] == 0.3 and "0.048" in entry.reason
    assert target not in {r.memory.id for r in filled.recall("capital of czechoslovakia", k=6)}
    back = filled.restore(entry.seq, reason="a historian needs it")
    assert filled.get(target).status == "active" and back.action == "restore" and str(entry.seq) in back.reason
    with pytest.raises(ChangedError) as changed:  # already undone: the memory is no longer as that entry left it
        filled.restore(entry.seq)
    assert changed.value.status == 409 and isinstance(changed.value, StoreError)
    with pytest.raises(UnknownEntryError) as unknown:
        filled.restore(99999)
    assert unknown.value.status == 404


def test_low_value_between_thresholds_is_suppressed_not_deprecated(filled: MemoryStore) -> None:
    filled.policy = GovernancePolicy(theta_low=0.6)  # worth 0.36: between deprecate_below and theta_low
    target = drive(filled, "capital of czechoslovakia", [False] * 35 + [True] * 20)
    (p,) = [p for p in filled.govern().proposals if p.memory_id == target]
    assert p.action == "suppress" and p.new == "suppressed"
    assert p.numbers["suppress_evalue"] >= p.numbers["worth_level"] > p.numbers["deprecate_evalue"]


def test_uncertain_memories_are_left_alone(filled: MemoryStore) -> None:
    drive(filled, "capital of czechoslovakia", [False] * 3)
    assert filled.govern().proposals == []


def test_a_reliable_memory_is_promoted_and_enters_the_hot_tier(filled: MemoryStore) -> None:
    target = drive(filled, "reverse a python list", [True] * 12)
    assert [m.id for m in filled.hot_tier()] == [target]
    assert not filled.may_consolidate(target) and filled.may_consolidate("water")
    (p,) = [p for p in filled.govern().proposals if p.memory_id == target]
    assert (p.action, p.field, p.new) == ("promote", "standing", "promoted")
    filled.govern(apply=True)
    assert filled.get(target).standing == "promoted"
    assert [p for p in filled.govern().proposals if p.memory_id == target] == []  # nothing left to do


def test_a_memory_that_stopped_working_is_flagged_for_re_verification(filled: MemoryStore) -> None:
    target = drive(filled, "capital of czechoslovakia", [True] * 60 + [False] * 20)
    (p,) = [p for p in filled.govern().proposals if p.memory_id == target]
    assert p.action == "re-verify" and p.numbers["recent_worth"] == 0.0 and p.numbers["worth"] == pytest.approx(0.75)


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


def test_rate_limit_caps_promote_and_demote_per_memory_per_day(make_store: Callable[..., MemoryStore]) -> None:
    clock = Clock()
    s = make_store(policy=GovernancePolicy(max_changes_per_day=1), clock=clock)
    s.add("Use list.reverse() to reverse a Python list.", id="rev")
    s.add("Water boils at 100 degrees.", id="water")
    target = drive(s, "reverse a python list", [True] * 12)
    first = s.govern(apply=True)
    assert [(e.memory_id, e.action) for e in first.applied] == [(target, "promote")]
    s.restore(first.applied[0].seq)  # back to normal: a person's restore pins it ...
    held = s.govern(apply=True)
    assert held.applied == [] and "pinned by a person" in held.skipped[0][1]
    s.unpin(target, reason="let governance decide again")  # ... unpinned, govern proposes promote again ...
    again = s.govern(apply=True)  # ... but one promote/demote per day is the limit
    assert again.applied == [] and [(p.memory_id, p.action) for p, _why in again.skipped] == [(target, "promote")]
    assert "rate limit" in again.skipped[0][1] and s.get(target).standing == "normal"
    clock.now += 86_401  # a day later the limit has passed
    assert [e.action for e in s.govern(apply=True).applied] == ["promote"]


def test_protective_actions_are_never_rate_limited(filled: MemoryStore) -> None:
    filled.policy = GovernancePolicy(max_changes_per_day=0)
    target = drive(filled, "capital of czechoslovakia", [False] * 20)
    assert [(e.memory_id, e.action) for e in filled.govern(apply=True).applied] == [(target, "deprecate")]


def test_a_re_verify_flag_is_not_overridden_by_promotion(filled: MemoryStore) -> None:
    target = drive(filled, "reverse a python list", [True] * 12)
    filled.set_standing(target, "re-verify", reason="a reviewer asked")
    assert [p for p in filled.govern().proposals if p.memory_id == target] == []


def test_manual_standing_changes_are_validated_and_audited(filled: MemoryStore) -> None:
    entry = filled.set_standing("water", "re-verify", reason="a reviewer doubts the altitude")
    assert entry.field == "standing" and filled.get("water").standing == "re-verify"
    with pytest.raises(ValidationError):
        filled.set_standing("water", "famous", reason="no such standing")
