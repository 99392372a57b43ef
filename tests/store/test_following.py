"""A store object follows each namespace's log: governing again reads only the new outcomes
and advances the detectors from where they stood (issue 13 item 4). Whatever it does,
its answers equal those of a from-scratch read of the whole log, on every backend."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from memworth import HashingEncoder, MemoryStore, Sidecar
from memworth.governance import GovernancePolicy
from memworth.signals.outcome_streams import namespace_streams

IDS = [f"m{i}" for i in range(12)]


def _feed(store: MemoryStore, namespace: str, episodes: int, rng: np.random.Generator, broken: bool) -> None:
    """Episodes of 3 random memories; m0 stops working once ``broken``; some carry a context."""
    helper = Sidecar(store)
    rate = {mid: 0.8 - 0.04 * i for i, mid in enumerate(IDS)}
    if broken:
        rate["m0"] = 0.05
    batch = []
    for t in range(episodes):
        picked = [IDS[i] for i in rng.choice(len(IDS), size=3, replace=False)]
        context = None if t % 3 else f"topic-{t % 2}"
        episode = helper.retrieved(picked, query=f"q{t}", namespace=namespace, context=context)
        ok = bool(rng.random() < np.mean([rate[m] for m in picked]))
        batch.append((episode.id, ok))
    store.record_many(batch, namespace=namespace)


def _fed_store(policy: GovernancePolicy) -> MemoryStore:
    """A memory:// store under ``policy`` fed 120 episodes, then 80 with m0 broken (:func:`_feed`)."""
    store = MemoryStore.open("memory://", encoder=HashingEncoder(), seed=0, exploration=0.0)
    store.set_policy(policy)
    store.add_many([{"id": mid, "text": f"memory {mid}"} for mid in IDS])
    _feed(store, "default", 120, np.random.default_rng(15), broken=False)
    _feed(store, "default", 80, np.random.default_rng(16), broken=True)
    return store


def _from_scratch(store: MemoryStore, namespace: str) -> dict[str, object]:
    """Streams and proposals as a store object that never read the log computes them."""
    history = store.backend.history(namespace)
    ids: dict[str, int] = {}
    sets = [[ids.setdefault(item.memory_id, len(ids)) for item in ep.items] for _, ep in history]
    scratch = namespace_streams(
        store.policy,
        list(ids),
        sets,
        np.array([o.success for o, _ in history], dtype=bool),
        np.array([o.confidence for o, _ in history]),
        [ep.context for _, ep in history],
    )
    store._followed.clear()  # forget what this object followed: the next read is a full one
    return {"streams": scratch.streams, "proposals": store.proposals(namespace=namespace)}


def _same_streams(got: dict[str, object], want: dict[str, object]) -> None:
    assert got.keys() == want.keys()
    for mid, a in got.items():
        b = want[mid]
        for name in ("success", "weight", "reference", "episode"):
            assert np.array_equal(getattr(a, name), getattr(b, name)), (mid, name)
        for name in ("explained_by", "context", "window_explained_by", "suspect", "change_alarm", "change_level"):
            assert getattr(a, name) == getattr(b, name), (mid, name)
        assert a.reading == b.reading, mid  # type: ignore[attr-defined]


def test_governing_as_the_log_grows_equals_reading_it_from_scratch(
    make_store: Callable[..., MemoryStore],
) -> None:
    store = make_store(seed=0, holdout=0.2, exploration=0.0)
    rng = np.random.default_rng(3)
    for ns in ("a", "b"):
        store.add_many([{"id": mid, "text": f"memory {mid}"} for mid in IDS], namespace=ns)
    actions = set()
    for round_ in range(6):
        for ns in ("a", "b"):
            _feed(store, ns, 70, rng, broken=round_ >= 3 and ns == "a")
        warm_streams = store.outcome_streams("a")
        warm = store.proposals(namespace="a")
        if round_ == 4:
            store.govern(apply=True, namespace="a")  # standings change between reads
            warm = store.proposals(namespace="a")
        cold = _from_scratch(store, "a")
        _same_streams(warm_streams, cold["streams"])  # type: ignore[arg-type]
        assert warm == cold["proposals"]
        actions |= {p.action for p in warm.values() if p is not None}
    assert actions  # the comparison covered proposals, not only their absence
    assert store.backend.outcome_count("a") == len(store.backend.history("a")) == 420


def test_a_policy_change_runs_the_detectors_again(make_store: Callable[..., MemoryStore]) -> None:
    store = make_store(seed=0, exploration=0.0)
    store.add_many([{"id": mid, "text": f"memory {mid}"} for mid in IDS])
    rng = np.random.default_rng(5)
    _feed(store, "default", 150, rng, broken=False)
    _feed(store, "default", 150, rng, broken=True)
    before = store.outcome_streams()
    store.configure({"governance.change_threshold": 6.0})
    after = store.outcome_streams()
    assert after["m0"].reading.threshold == 6.0 != before["m0"].reading.threshold  # type: ignore[union-attr]
    _same_streams(after, _from_scratch(store, "default")["streams"])  # type: ignore[arg-type]


def test_outcomes_from_another_client_and_a_missed_one_are_read(
    make_store: Callable[..., MemoryStore], backend_kind: str
) -> None:
    if backend_kind == "memory":
        pytest.skip("an in-memory store has one client")
    first = make_store(seed=0, exploration=0.0)
    first.add_many([{"id": mid, "text": f"memory {mid}"} for mid in IDS])
    rng = np.random.default_rng(7)
    _feed(first, "default", 100, rng, broken=False)
    first.govern()
    second = MemoryStore.open(first.backend.url, encoder=HashingEncoder(), seed=1)
    try:
        _feed(second, "default", 60, rng, broken=True)
        assert len(first._history("default")) == 160  # the other client's outcomes, read as a tail
        _same_streams(first.outcome_streams(), _from_scratch(first, "default")["streams"])  # type: ignore[arg-type]
        first.govern()
        # an outcome that committed after a later-numbered one was read (PostgreSQL's sequences
        # do not order commits): here, the follower is told it read further than it did
        _feed(second, "default", 40, rng, broken=True)
        first._followed["default"].last_seq += 10_000
        assert len(first._history("default")) == 200  # the count disagreed: the history was read again
        _same_streams(first.outcome_streams(), _from_scratch(first, "default")["streams"])  # type: ignore[arg-type]
    finally:
        second.close()


def test_outcome_count_is_the_length_of_the_history(store: MemoryStore) -> None:
    store.add_many([{"id": mid, "text": f"memory {mid}"} for mid in IDS[:4]], namespace="x")
    assert store.backend.outcome_count("x") == 0
    rng = np.random.default_rng(0)
    helper = Sidecar(store)
    for t in range(9):
        episode = helper.retrieved(IDS[:2], query=f"q{t}", namespace="x")
        if t % 3:  # an episode without an outcome is not in the history
            store.record(episode, bool(rng.random() < 0.5))
    assert store.backend.outcome_count("x") == len(store.backend.history("x")) == 6
    assert store.backend.outcome_count("other") == 0


def test_a_scan_under_one_policy_is_not_reused_under_another() -> None:
    store = MemoryStore.open("memory://", encoder=HashingEncoder(), seed=0, exploration=0.0)
    store.add_many([{"id": mid, "text": f"memory {mid}"} for mid in IDS])
    _feed(store, "default", 120, np.random.default_rng(1), broken=True)
    store.outcome_streams()
    scan = store._followed["default"].scan
    store.set_policy(GovernancePolicy(change_odds_ratio=0.2))
    store.outcome_streams()
    assert store._followed["default"].scan is not scan and store._followed["default"].scan.policy == store.policy  # type: ignore[union-attr]


def test_past_the_budget_the_least_recently_read_namespaces_are_forgotten(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from memworth.store import log_queries

    monkeypatch.setattr(log_queries, "FOLLOW_BUDGET", 150)
    store = MemoryStore.open("memory://", encoder=HashingEncoder(), seed=0, exploration=0.0)
    rng = np.random.default_rng(2)
    for ns in ("a", "b", "c"):
        store.add_many([{"id": mid, "text": f"memory {mid}"} for mid in IDS], namespace=ns)
        _feed(store, ns, 60, rng, broken=ns == "b")
    for ns in ("a", "b", "c"):
        store.outcome_streams(ns)
    assert list(store._followed) == ["b", "c"]  # 180 outcomes held: "a", read first, went
    store.outcome_streams("a")
    assert list(store._followed) == ["c", "a"]
    _feed(store, "b", 30, rng, broken=True)
    warm = store.outcome_streams("b")  # read again from the start
    assert list(store._followed) == ["a", "b"] and len(store._followed["b"]) == 90
    _same_streams(warm, _from_scratch(store, "b")["streams"])  # type: ignore[arg-type]


@pytest.mark.parametrize("window", [1, 5, 20, 1000])
def test_recent_counts_from_the_row_index_equal_a_scan_of_the_log(store: MemoryStore, window: int) -> None:
    store.add_many([{"id": mid, "text": f"memory {mid}"} for mid in IDS])
    rng = np.random.default_rng(window)
    _feed(store, "default", 80, rng, broken=True)
    helper = Sidecar(store)  # an episode with credit weights of its own
    store.record(helper.retrieved(["m1", "m2"], weights=[0.7, 0.3], query="weighted"), True)
    _feed(store, "default", 40, rng, broken=True)
    want: dict[str, list[float]] = {}
    for o, ep in reversed(store.backend.history("default")):  # newest first, item by item
        for item in ep.items:
            acc = want.setdefault(item.memory_id, [0.0, 0.0, 0.0])
            if acc[2] < window:
                acc[0 if o.success else 1] += item.weight * o.confidence
                acc[2] += 1
    got = store.recent_counts(window=window)
    assert {m: (c.success, c.failure, c.n) for m, c in got.items()} == {m: tuple(v) for m, v in want.items()}


def test_failures_apart_hold_a_flag_in_a_store_as_in_a_scan_of_its_log(tmp_path, monkeypatch) -> None:
    # A stale note (m0) that misleads one task, where a useful one (m1) is retrieved with it,
    # and is harmless on a more frequent task: m0's CUSUM stays at 0, m1's alarms. With
    # change_hold_apart the store holds m1's flag (m0 fails more often apart from it), the
    # same after the store is reopened from its checkpoint as in a scan of the whole log.
    from memworth.store import checkpoint

    monkeypatch.setattr(checkpoint, "CHECKPOINT_EVERY", 1)  # govern() saves one whenever anything is new
    monkeypatch.setattr(checkpoint, "CHECKPOINT_SHARE", 0.0)
    before = [["m0", "m1"], ["m0", "m2"], ["m1", "m3"], ["m2", "m3"]] * 40
    cycle = [(["m0", "m1"], False)] * 4 + [(["m0", "m2"], False)] + [(["m0", "m2"], True)] * 8
    cycle += [(["m1", "m3"], True)] + [(["m2", "m3"], True)] * 2
    episodes = [(s, True) for s in before] + cycle * 6
    proposed = {}
    for apart in (0, 3):
        url = f"sqlite:///{tmp_path / f'apart-{apart}.db'}"
        policy = GovernancePolicy(change_hold_apart=apart)
        for part in (episodes[:200], episodes[200:]):  # governed (and checkpointed) halfway, then reopened
            store = MemoryStore.open(url, encoder=HashingEncoder(), policy=policy)
            if not store.list():
                store.add_many([{"id": f"m{i}", "text": f"note {i}"} for i in range(4)])
            helper = Sidecar(store)
            store.record_many([(helper.retrieved(s, query="q").id, ok) for s, ok in part])
            proposed[apart] = store.proposals()["m1"]
            streams = store.outcome_streams()
            store.govern()
            store.close()
        history = [s for s, _ in episodes]
        scratch = namespace_streams(
            policy,
            ["m0", "m1", "m2", "m3"],
            [[int(m[1]) for m in s] for s in history],
            np.array([ok for _, ok in episodes]),
            np.ones(len(episodes)),
        )
        assert streams["m1"].explained_by == scratch.streams["m1"].explained_by
    assert proposed[0] is not None and proposed[0].action == "re-verify"
    assert proposed[3] is None or proposed[3].action != "re-verify"
    assert streams["m1"].explained_by == ("m0",)
