"""Verified outcomes, learned source reliability, quotas, burst alerts, holdout and policy
replay, through MemoryStore, against every backend."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from memworth import Counts, DuplicateError, HashingEncoder, MemoryStore, ValidationError
from memworth.errors import RateLimitError
from memworth.governance import GovernancePolicy
from memworth.governance.replay import ReplaySettings
from memworth.signals.sources import BurstDetector, Reliability, SourceLimit
from memworth.store.sqlite import MIGRATIONS
from tests.store.conftest import FACTS


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


def filled(make_store: Callable[..., MemoryStore], **settings: object) -> MemoryStore:
    store = make_store(seed=0, exploration=0.0, **settings)
    store.add_many([{"id": k, "text": v} for k, v in FACTS.items()])
    return store


def log_size(store: MemoryStore) -> int:
    return len(list(store.backend.outcome_log()))


def test_verify_records_an_unreported_episode_and_checks_a_reported_one(
    make_store: Callable[..., MemoryStore],
) -> None:
    store = filled(make_store)
    first = store.recall("reverse a python list", k=1).episode
    v = store.verify(first, True)
    assert v.source is None and v.agreed is None
    assert store.get(first.items[0].memory_id).counts == Counts(1.0, 0.0, 1.0)
    (row,) = store.backend.outcome_log()
    assert (row.source, row.confidence) == ("verified", 1.0)

    second = store.recall("capital of the czech republic", k=1).episode
    store.record(second, True, source="heuristic")
    before = store.get(second.items[0].memory_id).counts
    v = store.verify(second, False)
    assert (v.source, v.reported, v.agreed) == ("heuristic", True, False)
    assert store.get(second.items[0].memory_id).counts == before  # no second credit
    assert log_size(store) == 2
    with pytest.raises(DuplicateError):
        store.verify(second, True)
    with pytest.raises(DuplicateError):
        store.record(first, True, source="verified")
    assert [x.episode_id for x in store.backend.verifications()] == [first.id, second.id]
    assert store.source_reliability()["heuristic"].agreement.disagree == 1.0
    assert store.replay().consistent


def test_learned_reliability_weights_a_source_that_disagrees_with_verified_outcomes_down(
    make_store: Callable[..., MemoryStore],
) -> None:
    store = filled(make_store, reliability=Reliability(prior_strength=2))
    for _ in range(6):
        ep = store.recall("water boils", k=1).episode
        store.record(ep, True, source="heuristic")
        store.verify(ep, False)  # the heuristic said success; it failed
    report = store.source_reliability()["heuristic"]
    assert report.agreement.disagree == 6 and report.learned == 0.0 and report.in_use == 0.0
    before = store.get("water").counts
    store.record(store.recall("water boils", k=1).episode, True, source="heuristic")
    after = store.get("water").counts
    assert (after.success, after.n) == (before.success, before.n + 1)  # logged, no weight
    # A confidence given by the caller cannot raise the learned one.
    store.record(store.recall("water boils", k=1).episode, True, source="heuristic", confidence=1.0)
    assert store.get("water").counts.success == before.success
    # The explicit source, never contradicted, keeps its weight; verified is the reference.
    assert store.source_reliability()["explicit"].in_use == 1.0
    assert store.source_reliability()["verified"].in_use == 1.0
    assert store.replay().consistent


def test_reliability_is_kept_per_namespace(make_store: Callable[..., MemoryStore]) -> None:
    store = filled(make_store, reliability=Reliability(prior_strength=1))
    store.add("Water boils at 100 C.", id="water", namespace="other")
    for _ in range(3):
        ep = store.recall("water boils", k=1, namespace="other").episode
        store.record(ep, True, source="heuristic")
        store.verify(ep, False)
    assert store.source_reliability(namespace="other")["heuristic"].learned == 0.0
    assert store.source_reliability()["heuristic"].learned == pytest.approx(0.2)


def test_a_quota_refuses_outcomes_beyond_it_and_writes_nothing(make_store: Callable[..., MemoryStore]) -> None:
    clock = Clock()
    store = filled(make_store, clock=clock, limits={"heuristic": SourceLimit(max_per_memory=3, window=3600)})
    for _ in range(3):
        store.record(store.recall("water boils", k=1).episode, True, source="heuristic")
    before, size = store.get("water").counts, log_size(store)
    extra = store.recall("water boils", k=1).episode
    with pytest.raises(RateLimitError) as info:  # 429 on every face, not a bad request
        store.record(extra, True, source="heuristic")
    assert info.value.status == 429 and "quota" in str(info.value) and "'water'" in str(info.value)
    assert store.get("water").counts == before and log_size(store) == size
    store.record(extra, True, source="explicit")  # other sources are not limited
    clock.now += 3601  # the window slides past the first three
    store.record(store.recall("water boils", k=1).episode, True, source="heuristic")
    assert log_size(store) == size + 2


def test_a_rate_limit_refuses_a_whole_batch(make_store: Callable[..., MemoryStore]) -> None:
    store = filled(make_store, clock=Clock(), limits={"implicit": SourceLimit(max_outcomes=2)})
    eps = [store.recall(q, k=1).episode for q in ("water", "prague", "recursion")]
    with pytest.raises(RateLimitError, match="rate limit"):
        store.record_many([(e, True) for e in eps], source="implicit")
    assert log_size(store) == 0
    with pytest.raises(ValidationError):
        make_store(limits={"nosuch": SourceLimit()})


def test_a_burst_of_outcomes_shows_in_govern_with_its_numbers(make_store: Callable[..., MemoryStore]) -> None:
    clock = Clock()
    store = filled(make_store, clock=clock, sources={"agent-b": 0.5}, burst=BurstDetector(window=3600))
    for i in range(60):  # a long honest history: worth 0.25
        store.record(store.recall("water boils", k=1).episode, i % 4 == 0)
        clock.now += 600
    assert store.govern().alerts == [] and store.burst_alerts() == []
    clock.now += 3600
    for _ in range(30):  # then 30 successes from one source within ten minutes
        store.record(store.recall("water boils", k=1).episode, True, source="agent-b")
        clock.now += 20
    (alert,) = store.govern().alerts
    assert alert.memory_id == "water" and alert.worth_before == pytest.approx(0.25)
    assert alert.change > alert.allowed[1] > 0 and alert.retrievals == 30
    assert alert.sources == {"agent-b": 1.0} and "agent-b" in alert.reason
    assert store.burst_alerts() == [alert]
    clock.now += 3601  # the burst leaves the window
    assert store.burst_alerts() == []
    assert make_store(burst=None).govern().alerts == []


def test_holdout_recalls_ignore_governance_and_are_logged(make_store: Callable[..., MemoryStore]) -> None:
    store = filled(make_store, holdout=0.5)
    store.set_status("reverse", "suppressed", reason="test")
    held, governed = [], []
    for i in range(40):
        r = store.recall("reverse a python list", k=1, episode_id=f"task-{i}")
        (held if r.episode.holdout else governed).append(r)
        store.record(r.episode, r.episode.holdout)
    assert 10 < len(held) < 30
    assert all(r.results[0].memory.id == "reverse" and r.results[0].propensity == 1.0 for r in held)
    assert all(r.diagnostics["holdout"] for r in held)
    assert all(r.results[0].memory.id != "reverse" for r in governed)
    logged = store.backend.episodes([f"task-{i}" for i in range(40)])
    assert sorted(e.id for e in logged.values() if e.holdout) == sorted(r.episode.id for r in held)
    report = store.holdout_report()
    assert (report.holdout_n, report.holdout_successes) == (len(held), len(held))
    assert (report.governed_n, report.governed_successes, report.lift) == (len(governed), 0, -1.0)
    assert report.upper < 0
    assert store.replay().consistent


def test_episode_ids_from_the_caller(make_store: Callable[..., MemoryStore]) -> None:
    store = filled(make_store)
    ep = store.recall("water", k=1, episode_id="agent-7:task-1").episode
    assert ep.id == "agent-7:task-1" and not ep.holdout
    with pytest.raises(DuplicateError):
        store.recall("water", k=1, episode_id="agent-7:task-1")
    with pytest.raises(ValidationError) as info:
        store.recall("water", k=1, episode_id=" padded ")
    assert info.value.field == "episode_id"


def test_policy_replay_over_the_stores_log(make_store: Callable[..., MemoryStore]) -> None:
    store = filled(make_store)
    fixed = GovernancePolicy(deprecation="fixed")  # the paper's rule acts within these 40 outcomes
    store.policy = fixed
    for i in range(40):
        store.record(store.recall("water boils", k=1).episode, i % 8 < 3)  # worth 0.375
    report = store.replay_policy(
        ReplaySettings("lenient", GovernancePolicy(deprecation="fixed", theta_low=0.3), every=10),
        ReplaySettings("cautious", fixed, estimator="wilson-upper", every=10),
        every=10,
    )
    assert report.outcomes == 40 and report.baseline.status["water"] == "suppressed"
    assert [d.memory_id for d in report.differences["lenient"]] == ["water"]
    assert report.runs["cautious"].status["water"] == "active"
    rows = {r["settings"]: r for r in report.table()}
    assert rows["current"]["suppress"] == 1 and rows["lenient"]["suppress"] == 0
    with pytest.raises(ValidationError):
        store.replay_policy(ReplaySettings("current"))  # the baseline's name


def test_a_version_1_sqlite_store_is_migrated(tmp_path: Path) -> None:
    path = tmp_path / "v1.db"
    db = sqlite3.connect(path)
    db.executescript(MIGRATIONS[1] + "; INSERT INTO meta VALUES ('schema_version', '1');")
    db.execute("INSERT INTO episodes VALUES ('old', 'default', 'q', NULL, 0.0)")
    db.execute("INSERT INTO episodes VALUES ('other', 'b', 'q', NULL, 0.0)")
    db.execute("INSERT INTO outcomes (episode_id, success, source, confidence, recorded) VALUES ('old', 1, 'explicit', 1.0, 1.0)")
    db.execute("INSERT INTO outcomes (episode_id, success, source, confidence, recorded) VALUES ('other', 0, 'explicit', 1.0, 2.0)")
    db.commit()
    db.close()
    for _ in range(2):  # a second open finds nothing to do
        with MemoryStore.open(f"sqlite:///{path}", encoder=HashingEncoder(), holdout=0.5) as store:
            assert store.backend.get_meta("schema_version") == "9"
            # version 3: each outcome learnt its episode's namespace, and a namespace's log reads alone
            assert [(o.episode_id, o.namespace) for o in store.backend.outcome_log()] == [("old", "default"), ("other", "b")]
            assert [o.episode_id for o in store.backend.outcome_log("b")] == ["other"]
            assert [(o.episode_id, ep.namespace) for o, ep in store.backend.history("default")] == [("old", "default")]
            assert store.backend.episodes(["old"])["old"].holdout is False
            assert store.backend.verifications() == []
