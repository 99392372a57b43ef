"""Governance that acts: standing feeds recall, quarantine with probes, the verification loop,
human decisions that stick, continuous governance (run against every backend)."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

import pytest

from memworth import MemoryStore, ValidationError
from memworth.errors import ChangedError, ConflictError, UnknownMemoryError
from memworth.governance import GovernancePolicy
from memworth.ranking import Blend
from memworth.store.backend import REQUIRES
from memworth.store.records import AuditEntry
from memworth.store.report import MemoryReport
from tests.store.conftest import FACTS


def scores_of(store: MemoryStore, query: str) -> dict[str, float]:
    return {r.memory.id: r.score for r in store.recall(query, k=len(FACTS))}


def test_standing_moves_the_score_by_the_rules_documented_amounts(make_store: Callable[..., MemoryStore]) -> None:
    s = make_store(exploration=0.0, seed=0)
    s.add_many([{"id": k, "text": v} for k, v in FACTS.items()])
    before = scores_of(s, "reverse a python list")
    s.set_standing("reverse", "promoted", reason="vouched for")
    s.set_standing("methods", "demoted", reason="doubted")
    after = scores_of(s, "reverse a python list")
    assert after["reverse"] == pytest.approx(before["reverse"] + 0.1)
    assert after["methods"] == pytest.approx(before["methods"] - 0.1)
    assert after["water"] == pytest.approx(before["water"])


def test_promotion_lifts_a_memory_among_near_matches_not_past_a_better_match(
    make_store: Callable[..., MemoryStore],
) -> None:
    """The promoted boost is query-conditional on every backend: prague wins the near tie for
    "the capital city" but not "the capital of czechoslovakia", which czechoslovakia matches far
    better (a weight of 0.2 on similarity, so that the flat boost of before would have won it)."""
    s = make_store(exploration=0.0, seed=0, scoring=Blend(similarity=0.2))
    s.add_many([{"id": k, "text": v} for k, v in FACTS.items()])
    assert [r.memory.id for r in s.recall("what is the capital city", k=2)] == ["czechoslovakia", "prague"]
    s.set_standing("prague", "promoted", reason="vouched for")
    assert s.recall("what is the capital city", k=1).results[0].memory.id == "prague"
    far = {r.memory.id: r for r in s.recall("capital of czechoslovakia", k=2)}
    assert list(far) == ["czechoslovakia", "prague"]
    gap = 0.2 * (far["czechoslovakia"].similarity - far["prague"].similarity)
    assert gap < 0.1  # the flat boost would have put prague first
    assert far["prague"].score == pytest.approx(0.2 * far["prague"].similarity + 0.4 * 0.5)  # no boost at all


def test_a_quarantined_memory_is_served_only_as_a_logged_probe(make_store: Callable[..., MemoryStore]) -> None:
    s = make_store(exploration=0.0, seed=3, probe_share=0.25)
    s.add_many([{"id": k, "text": v} for k, v in FACTS.items()])
    assert s.recall("capital of czechoslovakia", k=1).results[0].memory.id == "czechoslovakia"
    s.set_standing("czechoslovakia", "re-verify", reason="the country is gone")
    served = probes = 0
    for _ in range(200):
        r = s.recall("capital of czechoslovakia", k=1)
        (top,) = r.results
        item = r.episode.items[0]
        assert item.probe == top.probe and item.memory_id == top.memory.id
        if top.memory.id == "czechoslovakia":
            served += 1
            probes += top.probe
            assert top.probe and item.propensity == pytest.approx(0.25)
            assert r.diagnostics["probes"] == ["czechoslovakia"]
    assert served == probes and 25 <= served <= 75  # about a quarter of 200, always as a probe
    s.probe_share = 0.0
    assert all(s.recall("capital of czechoslovakia", k=1).results[0].memory.id != "czechoslovakia" for _ in range(30))


def test_a_quarantined_memory_whose_worth_fell_below_its_rivals_is_still_probed(
    make_store: Callable[..., MemoryStore],
) -> None:
    """Its fallen worth is what the probes test: it competes for them as an unproven memory
    would. Before, czechoslovakia (worth 0 after 12 failures) ranked below prague for its own
    query and was never served as a probe, so no evidence could ever release it."""
    s = make_store(exploration=0.0, seed=0, probe_share=1.0, scoring=Blend(similarity=0.5))
    s.add_many([{"id": k, "text": v} for k, v in FACTS.items()])
    for _ in range(12):
        r = s.recall("capital of czechoslovakia", k=2)
        s.record(r.episode, success=False, used=["czechoslovakia"])
    assert s.get("czechoslovakia").counts.success == 0
    assert s.recall("capital of czechoslovakia", k=1).results[0].memory.id == "prague"  # it fell below prague
    s.set_standing("czechoslovakia", "re-verify", reason="check it")
    sims = {r.memory.id: r.similarity for r in s.recall("capital of czechoslovakia", k=2)}
    (top,) = s.recall("capital of czechoslovakia", k=1).results
    assert top.memory.id == "czechoslovakia" and top.probe  # served, as a probe
    assert top.score == pytest.approx(0.5 * sims["czechoslovakia"] + 0.4 * 0.5)  # the score of no evidence
    for _ in range(4):  # its probes succeed: the probe test releases it
        s.record(s.recall("capital of czechoslovakia", k=1), success=True)
    found = {p.memory_id: p.action for p in s.govern().proposals}
    assert found["czechoslovakia"] == "release"
    s.probe_share = 0.0  # no probes: quarantine keeps it out whatever its score
    assert all(s.recall("capital of czechoslovakia", k=1).results[0].memory.id != "czechoslovakia" for _ in range(5))


def test_the_probe_test_releases_a_recovered_memory_and_suppresses_a_broken_one(
    make_store: Callable[..., MemoryStore],
) -> None:
    s = make_store(exploration=0.0, seed=0, probe_share=1.0)
    s.add_many([{"id": k, "text": v} for k, v in FACTS.items()])
    for mid in ("water", "czechoslovakia"):
        s.set_standing(mid, "re-verify", reason="check it")
    for _ in range(6):
        s.record(s.recall("water boils at sea level", k=1), success=True)
        s.record(s.recall("capital of czechoslovakia", k=1), success=False)
    found = {p.memory_id: p for p in s.govern().proposals}
    assert found["water"].action == "release" and "came back" in found["water"].reason
    assert found["czechoslovakia"].action == "suppress" and "failures continue" in found["czechoslovakia"].reason
    applied = s.govern(apply=True).applied
    assert {(e.memory_id, e.action) for e in applied} >= {("water", "release"), ("czechoslovakia", "suppress")}
    assert s.get("water").standing == "normal" and s.get("czechoslovakia").status == "suppressed"


def test_the_probe_test_reads_only_outcomes_after_those_the_flag_was_raised_on(
    make_store: Callable[..., MemoryStore],
) -> None:
    """A clock that does not move between the record and the govern (a simulated clock, or a
    coarse one) put every outcome at the flag's time. Before, the probe test read them all as
    probes: 40 successes and 6 failures from before the flag released the memory at once
    ("46 probes"). Now the flag states the last outcome it read and the test starts after it."""
    s = make_store(exploration=0.0, seed=0, probe_share=0.0, clock=lambda: 1_700_000_000.0)
    s.add_many([{"id": k, "text": v} for k, v in FACTS.items()])
    for _ in range(40):
        s.record(s.recall("capital of czechoslovakia", k=1), success=True)
    flag = None
    for _ in range(30):
        s.record(s.recall("capital of czechoslovakia", k=1), success=False)
        flag = next((e for e in s.govern(apply=True).applied if e.action == "re-verify"), None)
        if flag is not None:
            break
    assert flag is not None and flag.memory_id == "czechoslovakia"
    read = flag.settings["numbers"]["flag_outcome_seq"]
    assert isinstance(read, int) and read >= 41  # the outcomes the alarm was raised on
    assert all(p.memory_id != "czechoslovakia" for p in s.govern().proposals)  # no probe yet: nothing to decide
    s.probe_share = 1.0
    for _ in range(3):
        r = s.recall("capital of czechoslovakia", k=1)
        assert r.results[0].probe
        s.record(r, success=False)
    (p,) = [p for p in s.govern().proposals if p.memory_id == "czechoslovakia"]
    assert p.action == "suppress" and p.numbers["probe_outcomes"] == 3


def test_a_flag_set_by_hand_or_restored_reads_only_outcomes_after_it(make_store: Callable[..., MemoryStore]) -> None:
    """A person's re-verify (CLI, HTTP, MCP: set_standing) and a restored flag are flags too: at a
    clock that stands still, the outcomes logged before them must not count as their probes.
    Before, a hand flag was released at once on "40 probes", every one from before it."""
    s = make_store(exploration=0.0, seed=0, probe_share=0.0, clock=lambda: 1_700_000_000.0)
    s.add_many([{"id": k, "text": v} for k, v in FACTS.items()])
    for i in range(40):
        s.record(s.recall("capital of czechoslovakia", k=1), success=i % 4 != 0)
    flag = s.set_standing("czechoslovakia", "re-verify", reason="a person doubts it")
    assert flag.settings["numbers"]["flag_outcome_seq"] >= 40
    assert all(p.memory_id != "czechoslovakia" for p in s.govern().proposals)  # no probe yet: nothing to decide
    released = s.set_standing("czechoslovakia", "normal", reason="checked")
    again = s.restore(released.seq, reason="not so sure")
    assert again.new == "re-verify" and again.settings["numbers"]["flag_outcome_seq"] >= 40
    s.unpin("czechoslovakia", reason="let the probes decide")
    assert all(p.memory_id != "czechoslovakia" for p in s.govern().proposals)
    s.probe_share = 1.0
    for _ in range(3):
        s.record(s.recall("capital of czechoslovakia", k=1), success=False)
    (p,) = [p for p in s.govern().proposals if p.memory_id == "czechoslovakia"]
    assert p.numbers["probe_outcomes"] == 3


def test_a_restore_sticks_until_new_evidence_and_pins_hold_until_unpinned(
    make_store: Callable[..., MemoryStore],
) -> None:
    s = make_store(exploration=0.0, seed=0, policy=GovernancePolicy(pin_evidence=5))
    s.add_many([{"id": k, "text": v} for k, v in FACTS.items()])
    for _ in range(20):  # enough for the error-controlled test of low worth
        s.record(s.recall("capital of czechoslovakia", k=1), success=False)
    (entry,) = [e for e in s.govern(apply=True).applied if e.memory_id == "czechoslovakia"]
    assert entry.action == "deprecate"
    s.restore(entry.seq, reason="false alarm")
    report = s.report("czechoslovakia")
    assert report.proposal is None and report.held is not None and report.held.action == "deprecate"
    assert report.pin is not None and report.pin.until == 20 + 5 and report.row()["pin"]["action"] == "restore"
    again = s.govern(apply=True)  # the same evidence: nothing happens to it
    assert all(e.memory_id != "czechoslovakia" for e in again.applied)
    assert [p.memory_id for p, why in again.skipped if "pinned by a person" in why] == ["czechoslovakia"]
    for _ in range(5):  # the documented amount of new evidence, after the decision
        s.record(s.recall("capital of czechoslovakia", k=1), success=False)
    assert s.report("czechoslovakia").proposal.action == "deprecate"  # the evidence says so again
    s.pin("czechoslovakia", reason="a person keeps it whatever the outcomes")
    for _ in range(10):
        s.record(s.recall("capital of czechoslovakia", k=1), success=False)
    assert s.report("czechoslovakia").pin.until is None and s.report("czechoslovakia").proposal is None
    s.unpin("czechoslovakia", reason="let governance decide")
    assert s.report("czechoslovakia").proposal.action == "deprecate"
    with pytest.raises(ValidationError):  # a pin changed nothing a restore could undo
        s.restore(s.audit("czechoslovakia")[-1].seq)


def test_resolving_the_queue(make_store: Callable[..., MemoryStore]) -> None:
    s = make_store(exploration=0.0, seed=0)
    s.add_many([{"id": k, "text": v} for k, v in FACTS.items()])
    for mid in ("water", "czechoslovakia", "prague"):
        s.set_standing(mid, "re-verify", reason="check it")
    assert [r.id for r in s.queue()] == ["prague", "czechoslovakia", "water"]
    before = s.get("water").counts
    assert s.resolve("water", "confirmed", reason="still boils").new == "normal"
    assert s.get("water").counts == before and s.report("water").pin is not None
    assert s.resolve("czechoslovakia", "stale", reason="gone", status="deprecated").new == "deprecated"
    edited = s.resolve("prague", "edited", reason="reworded", text="Prague is the Czech capital city.", new_id="p2")
    assert edited.settings["replaced_by"] == "p2" and s.get("prague").status == "archived"
    assert s.get("p2").derived_from == ("prague",) and s.get("p2").standing == "normal"
    assert s.queue() == []
    snapshot = [(m.id, m.status, m.standing) for m in s.list()]
    with pytest.raises(ConflictError):  # not awaiting verification
        s.resolve("water", "confirmed", reason="again")
    with pytest.raises(ValidationError) as bad:
        s.resolve("methods", "maybe", reason="?")
    assert bad.value.field == "verdict"
    s.set_standing("methods", "re-verify", reason="check")
    with pytest.raises(ValidationError) as missing:
        s.resolve("methods", "edited", reason="no text")
    assert missing.value.field == "text"
    with pytest.raises(UnknownMemoryError):
        s.resolve("nope", "confirmed", reason="?")
    assert [(m.id, m.status, m.standing) for m in s.list() if m.id != "methods"] == [
        x for x in snapshot if x[0] != "methods"
    ]


def test_the_verifier_resolves_and_its_failures_are_audited_without_changes(
    make_store: Callable[..., MemoryStore],
) -> None:
    answers: dict[str, object] = {"water": "confirmed", "prague": ("edited", "Prague is the Czech capital.")}

    def verifier(report: MemoryReport) -> object:
        if report.id == "methods":
            raise RuntimeError("the test run crashed")
        if report.id == "recursion":
            time.sleep(2)  # longer than the limit
        if report.id == "czechoslovakia":
            return "perhaps"
        return answers[report.id]

    s = make_store(exploration=0.0, seed=0, verifier=verifier, verifier_timeout=0.3)
    s.add_many([{"id": k, "text": v} for k, v in FACTS.items()])
    for mid in ("water", "prague", "methods", "recursion", "czechoslovakia"):
        s.set_standing(mid, "re-verify", reason="check it")
    applied = s.govern(apply=True).applied
    by = {e.memory_id: e for e in applied}
    assert by["water"].action == "resolve" and s.get("water").standing == "normal"
    assert by["prague"].action == "resolve" and s.get("prague").status == "archived"
    for mid, why in (("methods", "RuntimeError"), ("recursion", "TimeoutError"), ("czechoslovakia", "perhaps")):
        assert by[mid].action == "verifier-failed" and why in by[mid].reason
        assert (s.get(mid).status, s.get(mid).standing) == ("active", "re-verify")
    assert {e.memory_id for e in s.govern(apply=True).applied} == set()  # asked once per flag


def test_continuous_governance_applies_protective_actions_only(make_store: Callable[..., MemoryStore]) -> None:
    s = make_store(exploration=0.0, seed=0, govern_every=5)
    s.add_many([{"id": k, "text": v} for k, v in FACTS.items()])
    for _ in range(15):
        s.record(s.recall("capital of czechoslovakia", k=1), success=False)
        s.record(s.recall("water boils at sea level", k=1), success=True)
    # applied by itself, at the govern after 15 failures (e-value 133 against a rate >= 0.4, bar 80)
    assert s.get("czechoslovakia").status == "suppressed"
    assert s.get("water").standing == "normal"  # promote is only proposed
    assert any(p.memory_id == "water" and p.action == "promote" for p in s.govern().proposals)
    with pytest.raises(ValidationError):
        make_store(govern_every=0)


def test_recall_returns_nothing_when_every_candidate_is_quarantined(make_store: Callable[..., MemoryStore]) -> None:
    s = make_store(exploration=0.0, seed=0, probe_share=0.0)
    s.add("Prague was the capital of Czechoslovakia.", id="cz")
    s.set_standing("cz", "re-verify", reason="check it")
    r = s.recall("capital of czechoslovakia", k=2)
    assert r.results == () and r.episode.items == ()


def test_governance_quarantines_no_more_than_its_budget_by_itself(make_store: Callable[..., MemoryStore]) -> None:
    s = make_store(exploration=0.0, seed=0, policy=GovernancePolicy(max_quarantined=0.2, change_detection=False, window_test=True))
    s.add_many([{"id": f"m{i}", "text": f"fact number {i} about topic {i}"} for i in range(10)])
    for i in range(5):  # five memories whose recent retrievals fell: the window test flags each
        for ok in [True] * 30 + [False] * 20:
            s.record(s.recall(f"fact number {i} about topic {i}", k=1), ok)
    report = s.govern(apply=True)
    assert sorted(p.memory_id for p in report.proposals if p.action == "re-verify") == [f"m{i}" for i in range(5)]
    flagged = [e.memory_id for e in report.applied if e.action == "re-verify"]
    assert len(flagged) == 2  # 20% of 10 active memories
    held = [(p.memory_id, why) for p, why in report.skipped if p.action == "re-verify"]
    assert len(held) == 3 and all("quarantine budget: 2 of 10" in why for _, why in held)
    s.approve(held[0][0], "re-verify")  # a person is not held by the budget
    assert len(s.queue()) == 3


@pytest.mark.parametrize(("first", "second"), [("confirmed", "stale"), ("stale", "confirmed"), ("confirmed", "edited")])
def test_of_two_verdicts_given_at_once_one_wins_and_the_other_changes_nothing(
    make_store: Callable[..., MemoryStore], first: str, second: str
) -> None:
    """Two people (or a person and the verifier) resolve the same quarantined memory at once:
    the second verdict was checked against the queue before the first was written, so only
    the statement that writes it can tell. Before, a "stale" or "edited" after a "confirmed"
    was written too (it checked only its own field): the memory ended suppressed (or archived)
    with standing normal, under two contradicting pinned verdicts."""
    s = make_store(exploration=0.0, seed=0)
    s.add_many([{"id": k, "text": v} for k, v in FACTS.items()])
    s.set_standing("water", "re-verify", reason="check it")
    extra = {"text": "Water boils at 100 C at sea level.", "new_id": "water2"}
    change, insert = s.backend.change, s.backend.insert_memories
    raced: list[bool] = []

    def first_meanwhile() -> None:  # the other verdict lands between the check and the write
        if not raced:
            raced.append(True)
            s.resolve("water", first, reason="the first verdict", **(extra if first == "edited" else {}))

    def racing_change(entry: AuditEntry) -> AuditEntry:
        first_meanwhile()
        return change(entry)

    def racing_insert(rows: list[Any], then: AuditEntry | None = None) -> AuditEntry | None:
        first_meanwhile()
        return insert(rows, then=then)

    monkey = pytest.MonkeyPatch()
    monkey.setattr(s.backend, "change", racing_change)
    monkey.setattr(s.backend, "insert_memories", racing_insert)
    try:
        with pytest.raises(ConflictError, match="no longer"):
            s.resolve("water", second, reason="the second verdict", **(extra if second == "edited" else {}))
    finally:
        monkey.undo()
    expected = {"confirmed": ("active", "normal"), "stale": ("suppressed", "re-verify")}[first]
    assert (s.get("water").status, s.get("water").standing) == expected
    assert [e.reason for e in s.audit("water") if e.action == "resolve"] == [f"{first}: the first verdict"]
    assert all(m.id != "water2" for m in s.list())


def test_a_backend_makes_a_change_only_if_the_memory_holds_what_it_requires(store: MemoryStore) -> None:
    store.add("Prague is the capital of Czechoslovakia.", id="cz")
    requires = {REQUIRES: {"standing": "re-verify"}}
    entry = AuditEntry(0, "cz", "default", "resolve", "status", "active", "suppressed", "stale", requires, 0.0)
    with pytest.raises(ChangedError, match="no longer status 'active', standing 're-verify'"):
        store.backend.change(entry)
    assert store.get("cz").status == "active" and store.audit("cz") == []
    store.set_standing("cz", "re-verify", reason="check it")
    assert store.backend.change(entry).new == "suppressed" and store.get("cz").status == "suppressed"


def test_a_verifier_that_exits_or_is_interrupted_fails_audited_and_govern_goes_on(
    make_store: Callable[..., MemoryStore],
) -> None:
    """A test-run verifier may end in ``sys.exit`` (``unittest.main`` does): in the verifier's
    thread that is its failure, not a request to stop the program. Before, the SystemExit was
    raised again in the caller of govern: the govern ended half way, its report lost."""

    def verifier(report: MemoryReport) -> object:
        if report.id == "water":
            raise SystemExit(1)
        if report.id == "methods":
            raise KeyboardInterrupt
        return "confirmed"

    s = make_store(exploration=0.0, seed=0, verifier=verifier, verifier_timeout=5.0)
    s.add_many([{"id": k, "text": v} for k, v in FACTS.items()])
    for mid in ("water", "methods", "prague"):
        s.set_standing(mid, "re-verify", reason="check it")
    try:
        report = s.govern(apply=True)
    except BaseException as exc:  # a regression must fail this test, not end the test run
        pytest.fail(f"govern raised the verifier's {type(exc).__name__}")
    by = {e.memory_id: e for e in report.applied}
    assert by["water"].action == "verifier-failed" and by["water"].reason == "verifier failed: SystemExit: 1"
    assert by["methods"].action == "verifier-failed" and "KeyboardInterrupt" in by["methods"].reason
    assert by["prague"].action == "resolve" and s.get("prague").standing == "normal"
    assert [(s.get(m).status, s.get(m).standing) for m in ("water", "methods")] == [("active", "re-verify")] * 2


def test_every_verifier_timeout_a_store_takes_can_be_waited_for(make_store: Callable[..., MemoryStore]) -> None:
    """The longest time limit a store takes is one a thread can wait: the verifier answers."""
    from memworth.settings import MAX_VERIFIER_TIMEOUT

    s = make_store(exploration=0.0, seed=0, verifier=lambda report: "confirmed", verifier_timeout=MAX_VERIFIER_TIMEOUT)
    s.add("Water boils at 100 degrees Celsius at sea level.", id="water")
    s.set_standing("water", "re-verify", reason="check it")
    assert [e.action for e in s.govern(apply=True).applied] == ["resolve"]
    with pytest.raises(ValidationError) as err:
        make_store(verifier_timeout=1e10)
    assert err.value.field == "verifier_timeout"


def test_pinning_twice_or_unpinning_what_no_pin_holds_is_a_conflict(make_store: Callable[..., MemoryStore]) -> None:
    """As resolving twice is: before, each wrote an audit entry that changed nothing (an
    'unpinned' entry for a memory nobody had pinned)."""
    s = make_store(exploration=0.0, seed=0, policy=GovernancePolicy(pin_evidence=2))
    s.add_many([{"id": k, "text": v} for k, v in FACTS.items()])
    with pytest.raises(ConflictError, match="not pinned"):
        s.unpin("water", reason="never pinned")
    s.pin("water", reason="keep it")
    with pytest.raises(ConflictError, match="pinned until unpinned already"):
        s.pin("water", reason="again")
    s.unpin("water", reason="let go")
    with pytest.raises(ConflictError, match="not pinned"):
        s.unpin("water", reason="again")
    assert [e.action for e in s.audit("water")] == ["pin", "unpin"]
    s.set_status("prague", "suppressed", reason="by hand")  # a decision pins it for 2 retrievals ...
    assert s.pin("prague", reason="for good").settings["pin"] == {"until": None}  # ... a pin makes it for good
    s.set_status("methods", "suppressed", reason="by hand")
    s.set_status("methods", "active", reason="back")
    for _ in range(2):  # the decision's pin runs out after its 2 retrievals
        s.record(s.recall("python list methods append extend", k=1), success=True)
    assert s.report("methods").pin is None
    with pytest.raises(ConflictError, match="not pinned"):
        s.unpin("methods", reason="nothing holds it")


def test_a_later_decision_does_not_shorten_an_explicit_pin(make_store: Callable[..., MemoryStore]) -> None:
    """A person pinned a memory "whatever the outcomes"; someone flags it, and it is confirmed
    in review. Before, the verdict's pin (pin_evidence retrievals) replaced the explicit one,
    so governance acted on the memory again without anyone unpinning it."""
    s = make_store(exploration=0.0, seed=0, policy=GovernancePolicy(pin_evidence=3))
    s.add_many([{"id": k, "text": v} for k, v in FACTS.items()])
    explicit = s.pin("czechoslovakia", reason="keep it whatever the outcomes")
    s.set_standing("czechoslovakia", "re-verify", reason="looks stale")
    s.resolve("czechoslovakia", "confirmed", reason="still right")
    for _ in range(25):
        s.record(s.recall("capital of czechoslovakia", k=1), success=False)
    report = s.report("czechoslovakia")
    assert report.pin is not None and report.pin.seq == explicit.seq and report.pin.until is None
    assert report.proposal is None and report.held is not None
    s.unpin("czechoslovakia", reason="let governance decide")
    assert s.report("czechoslovakia").proposal is not None


@pytest.mark.parametrize("meanwhile", ["resolved", "erased"])
def test_a_memory_someone_else_settles_while_the_verifier_works_is_left_to_them(
    make_store: Callable[..., MemoryStore], meanwhile: str
) -> None:
    """The verifier takes its time; meanwhile a person resolves (or erases) the memory. Before,
    govern then audited 'verifier failed' on a memory nothing had failed on (the person's
    verdict won), or, for an erased one, raised ErasedMemoryError half way through govern."""
    stores: list[MemoryStore] = []

    def verifier(report: MemoryReport) -> object:
        if report.id == "water":
            if meanwhile == "resolved":
                stores[0].resolve("water", "stale", reason="a person was quicker")
            else:
                stores[0].delete("water", reason="asked to forget")
        return "confirmed"

    s = make_store(exploration=0.0, seed=0, verifier=verifier, verifier_timeout=5.0)
    stores.append(s)
    s.add_many([{"id": k, "text": v} for k, v in FACTS.items()])
    for mid in ("water", "prague"):
        s.set_standing(mid, "re-verify", reason="check it")
    applied = s.govern(apply=True).applied
    assert [(e.memory_id, e.action) for e in applied] == [("prague", "resolve")]
    if meanwhile == "resolved":
        assert s.get("water").status == "suppressed"
        assert [e.action for e in s.audit("water")] == ["set-standing", "resolve"]


def test_governance_does_not_overrule_a_verdict_given_after_it_read_the_memory(
    make_store: Callable[..., MemoryStore],
) -> None:
    """The probe test says suppress; before govern writes it, a person confirms the memory
    (on another face, in another process). Before, the suppress was written anyway (it
    checked only that the status was still active): the person's verdict, which is to
    stick, was overruled on stale evidence. Now a proposal is written only if the memory
    still has the status and standing it was proposed for; otherwise it is skipped."""
    s = make_store(exploration=0.0, seed=0, probe_share=1.0)
    s.add_many([{"id": k, "text": v} for k, v in FACTS.items()])
    s.set_standing("czechoslovakia", "re-verify", reason="check it")
    for _ in range(6):
        s.record(s.recall("capital of czechoslovakia", k=1), success=False)
    assert s.report("czechoslovakia").proposal.action == "suppress"
    change = s.backend.change

    def person_first(entry: AuditEntry) -> AuditEntry:
        if entry.action == "suppress":
            change(dataclasses.replace(entry, action="resolve", field="standing", old="re-verify", new="normal",
                                       reason="confirmed: a person checked it", settings={}))  # fmt: skip
        return change(entry)

    monkey = pytest.MonkeyPatch()
    monkey.setattr(s.backend, "change", person_first)
    try:
        report = s.govern(apply=True)
    finally:
        monkey.undo()
    assert (s.get("czechoslovakia").status, s.get("czechoslovakia").standing) == ("active", "normal")
    assert [p.action for p, why in report.skipped if p.memory_id == "czechoslovakia"] == ["suppress"]
    assert all(e.memory_id != "czechoslovakia" for e in report.applied)



def _pinned_before_the_deprecate(s: MemoryStore, person: MemoryStore) -> pytest.MonkeyPatch:
    """Make ``s``'s backend let ``person`` pin czechoslovakia just before it writes a deprecate
    (between the decision's read and its write); undo the returned patch afterwards."""
    change = s.backend.change

    def person_pins_first(entry: AuditEntry) -> AuditEntry:
        if entry.action == "deprecate":
            person.pin("czechoslovakia", reason="a person keeps it", actor="alice")
        return change(entry)

    monkey = pytest.MonkeyPatch()
    monkey.setattr(s.backend, "change", person_pins_first)
    return monkey


@pytest.mark.parametrize("decision", ["pin", "unpin-then-pin"])
def test_governance_does_not_act_on_a_memory_pinned_after_it_read_the_audit_log(
    make_store: Callable[..., MemoryStore], decision: str
) -> None:
    """A pin is an audit entry, not a column: before, govern read the audit log, a person
    pinned the memory (through another store object, as another face or process would), and
    govern's deprecate was written anyway, since the status and standing it checked had not
    moved. Now the backend refuses the write in the same statement (no pin entry after the
    audit entries govern read) and govern lists the proposal as skipped, saying why."""
    from memworth import HashingEncoder

    s = make_store(exploration=0.0, seed=0, policy=GovernancePolicy(pin_evidence=5))
    person = MemoryStore(s.backend, encoder=HashingEncoder(), seed=0)
    s.add_many([{"id": k, "text": v} for k, v in FACTS.items()])
    if decision == "unpin-then-pin":  # a pin read by govern, ended, then set again: the last one counts
        s.pin("czechoslovakia", reason="keep it for now")
        s.unpin("czechoslovakia", reason="let governance decide")
    for _ in range(20):
        s.record(s.recall("capital of czechoslovakia", k=1), success=False)
    assert s.report("czechoslovakia").proposal.action == "deprecate"
    monkey = _pinned_before_the_deprecate(s, person)
    try:
        report = s.govern(apply=True)
    finally:
        monkey.undo()
    assert s.get("czechoslovakia").status == "active"
    assert all(e.memory_id != "czechoslovakia" for e in report.applied)
    (why,) = [why for p, why in report.skipped if p.memory_id == "czechoslovakia"]
    pin = s.audit("czechoslovakia")[-1]
    assert pin.action == "pin" and why.startswith(f"pinned by a person while govern ran (audit entry {pin.seq}: pin)")
    assert [e.action for e in s.audit("czechoslovakia")][-1:] == ["pin"]  # nothing after the pin
    assert s.report("czechoslovakia").proposal is None  # and the pin holds from now on


def test_an_approval_does_not_overrule_a_pin_given_after_it_read(make_store: Callable[..., MemoryStore]) -> None:
    """approve read the proposal, a person pinned the memory, then approve's deprecate was
    written over the pin (it required only the status and standing it read; found in review)."""
    from memworth import HashingEncoder

    s = make_store(exploration=0.0, seed=0)
    person = MemoryStore(s.backend, encoder=HashingEncoder(), seed=0)
    s.add_many([{"id": k, "text": v} for k, v in FACTS.items()])
    for _ in range(20):
        s.record(s.recall("capital of czechoslovakia", k=1), success=False)
    monkey = _pinned_before_the_deprecate(s, person)
    try:
        with pytest.raises(ChangedError):
            s.approve("czechoslovakia", "deprecate", actor="bob")
    finally:
        monkey.undo()
    assert s.get("czechoslovakia").status == "active"
    assert [e.action for e in s.audit("czechoslovakia")][-1:] == ["pin"]


def test_continuous_governance_by_time_governs_at_the_first_outcome_after_the_interval(
    make_store: Callable[..., MemoryStore],
) -> None:
    """The issue asks for governance every N outcomes "or seconds"; before, only the count
    existed. With ``govern_every_seconds`` a store governs itself at the first outcome once
    the interval (of its clock: injected here, no sleeping) has passed since the last
    automatic round, once per interval, applying protective actions only."""
    now = [1000.0]
    s = make_store(exploration=0.0, seed=0, govern_every_seconds=60, clock=lambda: now[0])
    s.add_many([{"id": k, "text": v} for k, v in FACTS.items()])
    rounds: list[float] = []
    govern = s._govern

    def counted(namespace: str, *args: Any) -> Any:
        rounds.append(now[0])
        return govern(namespace, *args)

    setattr(s, "_govern", counted)  # noqa: B010 (a method replaced on one object)
    for _ in range(30):  # 30 failures within the first 58 s: evidence enough, but not yet time
        s.record(s.recall("capital of czechoslovakia", k=1), success=False)
        now[0] += 2.0
    assert rounds == [] and s.get("czechoslovakia").status == "active"  # the first outcome started the clock at 1000
    s.record(s.recall("water boils at sea level", k=1), success=True)  # at 1060: the interval has passed
    assert rounds == [1060.0] and s.get("czechoslovakia").status in ("suppressed", "deprecated")
    for _ in range(29):  # the next 58 s: no round, however many outcomes
        now[0] += 2.0
        s.record(s.recall("water boils at sea level", k=1), success=True)
    assert rounds == [1060.0]
    now[0] += 2.0
    s.record(s.recall("water boils at sea level", k=1), success=True)
    assert rounds == [1060.0, 1120.0]
    assert s.get("water").standing == "normal"  # promote is only proposed
    for bad in (0, -1.0, float("inf"), "60", 1e9):
        with pytest.raises(ValidationError) as err:
            make_store(govern_every_seconds=bad)
        assert err.value.field == "govern_every_seconds"
    with pytest.raises(ValidationError) as err:
        s.configure({"automation.govern_every_seconds": 0})
    assert err.value.field == "automation.govern_every_seconds"


def test_continuous_governance_by_time_takes_a_numpy_clock(make_store: Callable[..., MemoryStore]) -> None:
    """A clock returning numpy floats (a simulation's time array) wrote its repr,
    'np.float64(1000.0)', as the time mark; every later record, by any store object on the
    database, then failed reading it back, after its outcome was written (found in review)."""
    import numpy as np

    now = [np.float64(1000.0)]
    s = make_store(exploration=0.0, seed=0, govern_every_seconds=60, clock=lambda: now[0])
    s.add_many([{"id": k, "text": v} for k, v in FACTS.items()])
    for _ in range(40):
        s.record(s.recall("capital of czechoslovakia", k=1), success=False)
        now[0] += np.float64(2.0)
    assert s.get("czechoslovakia").status in ("suppressed", "deprecated")  # governed at 1060
    assert s.replay().consistent


def test_two_store_objects_past_the_same_interval_govern_once(make_store: Callable[..., MemoryStore]) -> None:
    """The time trigger claims its round with the same compare-and-set mark as the count
    trigger: of two store objects (sharing a database, each with its own view of the time
    mark) that pass the interval together, one governs; and a round by either trigger
    restarts both (a count round resets the clock, a time round the count)."""
    from memworth import HashingEncoder

    now = [0.0]
    a = make_store(exploration=0.0, seed=0, govern_every_seconds=60, govern_every=50, clock=lambda: now[0])
    b = MemoryStore(a.backend, encoder=HashingEncoder(), seed=0, clock=lambda: now[0])
    a.add_many([{"id": k, "text": v} for k, v in FACTS.items()])
    rounds: list[tuple[str, float]] = []
    for name, s in (("a", a), ("b", b)):
        govern = s._govern

        def counted(namespace: str, *args: Any, _name: str = name, _g: Any = govern) -> Any:
            rounds.append((_name, now[0]))
            return _g(namespace, *args)

        setattr(s, "_govern", counted)  # noqa: B010

    def record(s: MemoryStore) -> None:
        s.record(s.recall("water boils at sea level", k=1), success=True)

    record(a)  # starts the clock at 0
    record(b)
    now[0] = 61.0
    record(b)  # b governs: its round moves both marks
    record(a)  # a's copy of the time mark says 0, the store's says 61: a does not govern
    assert rounds == [("b", 61.0)]
    for _ in range(49):  # 50 outcomes since b's round within the interval: the count trigger runs one
        now[0] += 0.5
        record(a)
    assert rounds == [("b", 61.0), ("a", 85.5)]
    now[0] = 85.5 + 59.0
    record(b)  # 59 s after the count round: not yet
    now[0] = 85.5 + 60.0
    record(b)
    assert rounds == [("b", 61.0), ("a", 85.5), ("b", 145.5)]


def test_a_hanging_verifier_holds_one_automatic_round_once_per_flag(make_store: Callable[..., MemoryStore]) -> None:
    """The automatic round runs inside the ``record`` call that triggers it, verifier included
    (documented): a verifier that hangs holds that call for ``verifier_timeout`` per quarantined
    memory, and only once per flag, since the time-out is audited and a memory the verifier
    failed on is not asked again until it is flagged again. The record itself is kept."""
    import threading

    release = threading.Event()
    asked: list[str] = []

    def verifier(report: MemoryReport) -> object:
        asked.append(report.id)
        release.wait(30)  # hangs until the test ends
        return "confirmed"

    s = make_store(exploration=0.0, seed=0, govern_every=2, verifier=verifier, verifier_timeout=0.05)
    try:
        s.add_many([{"id": k, "text": v} for k, v in FACTS.items()])
        s.set_standing("prague", "re-verify", reason="check it")
        for _ in range(6):  # three automatic rounds
            s.record(s.recall("water boils at sea level", k=1), success=True)
        assert asked == ["prague"]  # asked in the first round only
        assert [e.action for e in s.audit("prague")] == ["set-standing", "verifier-failed"]
        assert "TimeoutError" in s.audit("prague")[-1].reason
        assert s.get("water").counts.n == 6  # every outcome was recorded
    finally:
        release.set()
