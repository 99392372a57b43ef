"""Randomised controls for the probes of quarantined memories (issue 14), on every backend.

In a recall where a quarantined memory would be served if allowed, the probe draw makes it
a probe (served) or a control (held out); both are logged with the episode and never as an
item. Govern's test compares the probes' outcomes with the controls'.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from memworth import HashingEncoder, MemoryStore
from memworth.governance import GovernancePolicy
from memworth.governance.verification import ControlTest
from memworth.store.backend import DRAWS_FROM_KEY, SCHEMA_VERSION
from memworth.store.postgres import PostgresBackend
from memworth.store.recall import in_contention
from tests.store.conftest import FACTS, drop, index_for, url_for

QUERY = "capital of czechoslovakia"


def _quarantined(make_store: Callable[..., MemoryStore], **settings: object) -> MemoryStore:
    s = make_store(exploration=0.0, seed=5, probe_share=0.5, **settings)
    s.add_many([{"id": k, "text": v} for k, v in FACTS.items()])
    assert s.recall(QUERY, k=1).results[0].memory.id == "czechoslovakia"
    s.set_standing("czechoslovakia", "re-verify", reason="the country is gone")
    return s


def test_a_control_is_logged_and_never_served_counted_or_credited(make_store: Callable[..., MemoryStore]) -> None:
    s = _quarantined(make_store)
    before = s.get("czechoslovakia").counts
    probes = controls = 0
    for i in range(40):
        r = s.recall(QUERY, k=1)
        ids = [m.memory.id for m in r]
        held = r.diagnostics.get("controls", [])
        (draw,) = r.episode.draws  # it ranks first: in contention on every recall
        assert draw.memory_id == "czechoslovakia" and draw.share == 0.5
        if draw.probe:
            probes += 1
            assert ids == ["czechoslovakia"] and r.results[0].probe and held == []
        else:
            controls += 1
            assert held == ["czechoslovakia"] and "czechoslovakia" not in ids
            assert all(it.memory_id != "czechoslovakia" for it in r.episode.items)
        s.record(r.episode, success=i % 3 != 0, confidence=0.7)
    assert probes >= 5 and controls >= 5
    after = s.get("czechoslovakia").counts
    assert after.n - before.n == probes  # only the probes reached its counters
    rows = s.backend.draw_outcomes("default", "czechoslovakia", 0)
    assert len(rows) == 40 and sum(p for p, _, _, _ in rows) == probes
    assert [ok for _, _, ok, _ in rows] == [i % 3 != 0 for i in range(40)]
    assert {(q, c) for _, q, _, c in rows} == {(0.5, 0.7)}
    report = s.replay()
    assert report.consistent and report.outcomes == 40  # replay equals the live counters, bit for bit
    assert s.backend.draw_outcomes("default", "czechoslovakia", 0, exclude=["prague"]) == [
        row for row, ep in zip(rows, _episodes_in_order(s), strict=True) if "prague" not in ep
    ]


def _episodes_in_order(s: MemoryStore) -> list[set[str]]:
    """The memories each outcome's episode retrieved, in log order."""
    return [{it.memory_id for it in ep.items} for _, ep in s.backend.history("default")]


def test_probes_that_do_as_well_as_controls_release_the_memory(make_store: Callable[..., MemoryStore]) -> None:
    s = _quarantined(make_store, policy=GovernancePolicy(probe_margin=0.5))
    decided = None
    for t in range(1, 201):
        s.record(s.recall(QUERY, k=1), success=True)  # it makes no difference: both arms succeed
        if t % 10 == 0:
            found = {p.memory_id: p for p in s.govern().proposals}
            if "czechoslovakia" in found and found["czechoslovakia"].action in ("release", "suppress"):
                decided = found["czechoslovakia"]
                break
    assert decided is not None and decided.action == "release"
    assert "probes against controls" in decided.reason and decided.numbers["controls"] > 0
    s.govern(apply=True)
    assert s.get("czechoslovakia").standing == "normal"


def test_probes_that_fail_where_controls_succeed_suppress_the_memory(make_store: Callable[..., MemoryStore]) -> None:
    s = _quarantined(make_store)
    decided = None
    for t in range(1, 101):
        r = s.recall(QUERY, k=1)
        s.record(r, success="czechoslovakia" not in {m.memory.id for m in r})  # it misleads when served
        if t % 5 == 0:
            found = {p.memory_id: p for p in s.govern().proposals}
            if "czechoslovakia" in found and found["czechoslovakia"].action in ("release", "suppress"):
                decided = found["czechoslovakia"]
                break
    assert decided is not None and decided.action == "suppress" and "does harm" in decided.reason
    s.govern(apply=True)
    assert s.get("czechoslovakia").status == "suppressed"


def test_a_memory_out_of_contention_is_drawn_for_no_control(make_store: Callable[..., MemoryStore]) -> None:
    """A quarantined memory that would not be served even if allowed (below the first k) is
    neither a probe nor a control of that recall: the draws hold only memories in contention."""
    s = _quarantined(make_store)
    for _ in range(10):
        r = s.recall("reverse a python list", k=1)
        assert r.episode.draws == () and "controls" not in r.diagnostics


def test_in_contention_is_decided_by_rank_among_the_plain_candidates() -> None:
    scores = np.array([0.9, 0.5, 0.7, 0.7, 0.2])
    plain = np.array([True, False, True, False, True])
    assert in_contention(scores, ~plain, plain, k=1).tolist() == [False] * 5
    assert in_contention(scores, ~plain, plain, k=2).tolist() == [False, False, False, False, False]
    assert in_contention(scores, ~plain, plain, k=3).tolist() == [False, True, False, True, False]


def test_the_control_test_is_anytime_valid_for_a_memory_that_does_no_harm() -> None:
    """A memory that changes nothing (each recall's outcome drawn the same in both arms, rates
    varying by recall): the harm e-process crosses 1/beta on at most about beta of runs,
    looked at after every outcome."""
    rng = np.random.default_rng(0)
    test, runs, crossed = ControlTest(beta=0.1), 300, 0
    for _ in range(runs):
        probe = rng.random(300) < 0.3
        success = rng.random(300) < rng.uniform(0.1, 0.9, 300)
        share, weight = np.full(300, 0.3), np.ones(300)
        for n in range(10, 301, 10):
            if test.decide(probe[:n], share[:n], success[:n], weight[:n]).action == "suppress":
                crossed += 1
                break
    assert crossed <= 0.1 * runs


def test_the_control_test_is_anytime_valid_for_a_memory_that_harms_by_the_margin() -> None:
    """A memory that raises each recall's failure chance by exactly the margin (the release
    null at its edge, control failure chances varying by recall, some never failing): the
    no-harm e-process crosses 1/alpha on at most about alpha of runs, looked at every 10."""
    rng = np.random.default_rng(1)
    test, runs, crossed = ControlTest(alpha=0.1, margin=0.2), 300, 0
    for _ in range(runs):
        probe = rng.random(300) < 0.3
        f0 = np.where(rng.random(300) < 0.3, 0.0, rng.uniform(0.0, 0.8, 300))
        success = rng.random(300) >= np.where(probe, f0 + 0.2, f0)
        share, weight = np.full(300, 0.3), np.ones(300)
        for n in range(10, 301, 10):
            if test.decide(probe[:n], share[:n], success[:n], weight[:n]).action == "release":
                crossed += 1
                break
    assert crossed <= 0.1 * runs


def test_the_control_test_refuses_bad_input_naming_the_field() -> None:
    from memworth.errors import ValidationError

    ones = np.ones(3)
    with pytest.raises(ValidationError) as err:
        ControlTest().decide(np.ones(3, dtype=bool), np.full(3, 1.0), np.ones(3, dtype=bool), ones)
    assert err.value.field == "share"
    with pytest.raises(ValidationError) as err:
        ControlTest().decide(np.ones(3, dtype=bool), np.full(3, 0.5), np.ones(3, dtype=bool), np.full(3, 2.0))
    assert err.value.field == "weight"
    with pytest.raises(ValidationError) as err:
        ControlTest(margin=1.5).decide(np.ones(0, dtype=bool), np.ones(0), np.ones(0, dtype=bool), np.ones(0))
    assert err.value.field == "margin"


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_a_version_8_store_migrates_and_keeps_the_probe_only_test_for_its_old_flags(kind: str, tmp_path: Path) -> None:
    """Schema 9 adds the draws table and states the last audit seq before it: a flag raised
    before the migration is resolved by the probe-only test (it has no controls), a flag
    raised after it by probes against controls."""
    url = url_for(kind, tmp_path)
    settings = {"encoder": HashingEncoder(), "index": index_for(kind), "exploration": 0.0, "seed": 5}
    s = MemoryStore.open(url, probe_share=0.5, **settings)  # type: ignore[arg-type]
    s.add_many([{"id": k, "text": v} for k, v in FACTS.items()])
    s.set_standing("czechoslovakia", "re-verify", reason="before the migration")
    _downgrade_to_8(s)
    flag_seq = max(e.seq for e in s.backend.audit_log("default"))
    s.close()
    s = MemoryStore.open(url, probe_share=0.5, **settings)  # type: ignore[arg-type]
    try:
        assert s.backend.get_meta("schema_version") == str(SCHEMA_VERSION) == "9"
        assert s.backend.get_meta(DRAWS_FROM_KEY) == str(flag_seq)
        served = 0
        while served < 6:  # its probes succeed: the probe-only test releases it
            r = s.recall(QUERY, k=1)
            served += any(m.memory.id == "czechoslovakia" for m in r)
            s.record(r, success=True)
        found = {p.memory_id: p for p in s.govern().proposals}
        assert found["czechoslovakia"].action == "release" and "came back" in found["czechoslovakia"].reason
        s.govern(apply=True)
        s.set_standing("czechoslovakia", "re-verify", reason="after the migration")
        for _ in range(6):
            s.record(s.recall(QUERY, k=1), success=True)
        proposal = {p.memory_id: p for p in s.govern().proposals}.get("czechoslovakia")
        assert proposal is None or "came back" not in proposal.reason  # no longer the probe-only test
        assert len(s.backend.draw_outcomes("default", "czechoslovakia", 0)) >= 6
        assert s.replay().consistent
    finally:
        drop(s)


def _downgrade_to_8(s: MemoryStore) -> None:
    """Make the store what schema 8 left: no draws table, no draws key, version 8."""
    b = s.backend
    if isinstance(b, PostgresBackend):
        b._run(lambda c: c.execute("DROP TABLE probe_draws"))
        b._run(lambda c: c.execute("DELETE FROM meta WHERE key = %s", (DRAWS_FROM_KEY,)))
        b._run(lambda c: c.execute("UPDATE meta SET value = '8' WHERE key = 'schema_version'"))
        return
    path = b.url.split("sqlite:///", 1)[1]
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("DROP TABLE probe_draws")
    db.execute("DELETE FROM meta WHERE key = ?", (DRAWS_FROM_KEY,))
    db.execute("UPDATE meta SET value = '8' WHERE key = 'schema_version'")
    db.close()


def test_the_sidecar_logs_its_controls_too(make_store: Callable[..., MemoryStore]) -> None:
    """Sidecar.retrieve picks through the same choose: a quarantined candidate in contention is
    a probe or a control, logged with the episode, and a control is never returned."""
    from memworth import Sidecar

    s = make_store(exploration=0.0, seed=2, probe_share=0.5)
    helper = Sidecar(s)
    candidates = [("doc-a", 0.9), ("doc-b", 0.5), ("doc-c", 0.4)]
    helper.register([c for c, _ in candidates])
    s.set_standing("doc-a", "re-verify", reason="check it")
    arms = []
    for _ in range(30):
        got = helper.retrieve(candidates, k=1)
        (draw,) = got.episode.draws
        assert draw.memory_id == "doc-a"
        assert (got.ids == ["doc-a"]) == draw.probe  # served exactly when a probe
        helper.record(got.episode, success=True)
        arms.append(draw.probe)
    assert 0 < sum(arms) < 30
    assert [p for p, _, _, _ in s.backend.draw_outcomes("default", "doc-a", 0)] == arms


def test_the_async_postgres_store_logs_its_controls_through_the_same_plan() -> None:
    """The native async store awaits the PostgreSQL backend's own plans: its recalls log the
    draws as the sync store's do, and govern reads them."""
    import asyncio

    from memworth.aio import AsyncMemoryStore
    from tests.store.conftest import NO_DISK_WAIT, POSTGRES, with_query

    url = with_query(POSTGRES, schema=f"t_{uuid.uuid4().hex[:16]}", pool_size="2", options=NO_DISK_WAIT)

    async def run() -> tuple[list[bool], list[bool]]:
        s = await AsyncMemoryStore.open(url, encoder=HashingEncoder(), exploration=0.0, seed=5, probe_share=0.5)
        try:
            assert s.native
            await s.add_many([{"id": k, "text": v} for k, v in FACTS.items()])
            await s.set_standing("czechoslovakia", "re-verify", reason="check it")
            arms = []
            for _ in range(20):
                r = await s.recall(QUERY, k=1)
                (draw,) = r.episode.draws
                assert ("czechoslovakia" in [m.memory.id for m in r]) == draw.probe
                arms.append(draw.probe)
                await s.record(r.episode, success=True)
            logged = [p for p, _, _, _ in s.store.backend.draw_outcomes("default", "czechoslovakia", 0)]
            return arms, logged
        finally:
            s.store.backend.drop()
            await s.aclose()

    arms, logged = asyncio.run(run())
    assert logged == arms and 0 < sum(arms) < 20


def test_under_a_lower_bound_rule_a_quarantined_memory_whose_worth_fell_is_still_probed(
    make_store: Callable[..., MemoryStore],
) -> None:
    """LowerBoundBlend ranks an unproven memory at a Wilson bound of 0, so a floor at "the
    score of an unproven memory" gave a quarantined one nothing: it competes with its worth
    read at face value (0.5) instead, and is probed (and drawn for controls)."""
    from memworth.ranking import LowerBoundBlend

    s = make_store(exploration=0.0, seed=0, probe_share=0.5, scoring=LowerBoundBlend(similarity=0.5))
    s.add_many([{"id": k, "text": v} for k, v in FACTS.items()])
    for mid, text in FACTS.items():  # every memory proven: its lower bound well above 0
        for _ in range(8):
            s.record(s.recall(text, k=len(FACTS)).episode, success=mid != "czechoslovakia", used=[mid])
    s.set_standing("czechoslovakia", "re-verify", reason="check it")
    served = 0
    assert [r.memory.id for r in s.recall(QUERY, k=2)] == ["prague", "methods"]  # it is out, ranked below prague
    for _ in range(20):
        r = s.recall(QUERY, k=1)
        (draw,) = r.episode.draws  # in contention for the first place: unproven at face value beats prague
        served += draw.probe
        assert [m.memory.id for m in r] == (["czechoslovakia"] if draw.probe else ["prague"])
    assert 0 < served < 20


def test_a_harmless_memory_beside_another_quarantined_one_is_not_found_harmful(
    make_store: Callable[..., MemoryStore],
) -> None:
    """Two quarantined memories contend for one slot and every recall fails whatever it
    serves: neither does harm. When czechoslovakia is a control, prague (ranked next) may be
    served as a probe; dropping the episodes that retrieved another suspect would then drop
    czechoslovakia's controls more often than its probes (2 of 3 kept outcomes probes at share
    0.5), and the harm e-process would suppress a memory whose probes fail exactly as often as
    its controls. The control test reads every draw: the split stays the draw's."""
    s = _quarantined(make_store)
    s.set_standing("prague", "re-verify", reason="the second suspect")
    for _ in range(300):
        s.record(s.recall(QUERY, k=1), success=False)
    found = {p.memory_id: p for p in s.govern().proposals}
    harm = [p for p in found.values() if "probes against controls say it does harm" in p.reason]
    assert harm == [], [(p.memory_id, p.reason) for p in harm]
    rows = s.backend.draw_outcomes("default", "czechoslovakia", 0)
    assert len(rows) == 300 and 120 <= sum(p for p, _, _, _ in rows) <= 180  # the draw's split, about half
