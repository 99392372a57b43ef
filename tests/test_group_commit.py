"""Group commit (memworth.server.group_commit): concurrent outcomes of a tenant share a
transaction, and each request still gets the answer it would have had alone."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from memworth import HashingEncoder, MemoryStore
from memworth.errors import DuplicateError, UnknownEpisodeError
from memworth.server.group_commit import GroupCommit
from memworth.server.pool import StorePool


@pytest.fixture
def store(tmp_path):
    s = MemoryStore.open(f"sqlite:///{tmp_path}/g.db", encoder=HashingEncoder(), exploration=0.0, seed=0)
    s.add_many([{"id": f"m{i}", "text": f"note {i} on topic {i % 5}"} for i in range(20)])
    yield s
    s.close()


def _episodes(store: MemoryStore, n: int) -> list[str]:
    return [store.recall(f"topic {i % 5}", k=3).episode.id for i in range(n)]


def _queued_then_released(
    pool: StorePool, committer: GroupCommit, calls: list[Callable[[], None]]
) -> list[BaseException | None]:
    """Run ``calls`` in threads while the tenant's store object is held, so that they all
    queue; release it once every thread waits; return each call's error (None: it returned)."""
    held, release = threading.Event(), threading.Event()

    def hold(_store: MemoryStore) -> None:
        held.set()
        release.wait(10)

    holder = threading.Thread(target=pool.run, args=("default", hold))
    holder.start()
    held.wait(10)
    errors: list[BaseException | None] = [None] * len(calls)

    def run(i: int) -> None:
        try:
            calls[i]()
        except BaseException as exc:  # kept for the assertions
            errors[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for i, t in enumerate(threads):
        t.start()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # each in the queue before the next starts: arrival order is known
            with committer._guard:
                if sum(len(q) for q in committer._queues.values()) == i + 1:
                    break
            time.sleep(0.001)
    release.set()
    holder.join(10)
    for t in threads:
        t.join(10)
    return errors


def _spy_batches(store: MemoryStore, monkeypatch) -> list[int]:
    sizes: list[int] = []
    original = store.record_many

    def record_many(outcomes, **kw):
        outcomes = list(outcomes)
        sizes.append(len(outcomes))
        return original(outcomes, **kw)

    monkeypatch.setattr(store, "record_many", record_many)
    return sizes


def test_waiting_outcomes_are_recorded_in_one_transaction_equal_to_one_at_a_time(store, tmp_path, monkeypatch):
    eps = _episodes(store, 12)
    pool = StorePool(store)
    committer = GroupCommit(pool)
    sizes = _spy_batches(store, monkeypatch)
    results = [i % 3 != 0 for i in range(12)]
    calls = [lambda e=e, ok=ok: committer.record("default", e, ok) for e, ok in zip(eps, results, strict=True)]
    errors = _queued_then_released(pool, committer, calls)
    assert errors == [None] * 12
    assert sizes == [12]  # all twelve waited behind the lock: one transaction
    assert [o.episode_id for o in store.backend.outcome_log()] == eps  # in the order they arrived

    twin = MemoryStore.open(f"sqlite:///{tmp_path}/twin.db", encoder=HashingEncoder(), exploration=0.0, seed=0)
    twin.add_many([{"id": f"m{i}", "text": f"note {i} on topic {i % 5}"} for i in range(20)])
    for e, ok in zip(_episodes(twin, 12), results, strict=True):
        twin.record(e, ok)
    assert {m.id: m.counts for m in store.list()} == {m.id: m.counts for m in twin.list()}
    assert store.replay().consistent
    twin.close()


def test_a_refused_outcome_fails_alone_and_the_rest_of_its_batch_is_kept(store, monkeypatch):
    eps = _episodes(store, 4)
    store.record(eps[1], True)  # recorded already: its request must get a 409
    pool = StorePool(store)
    committer = GroupCommit(pool)
    sizes = _spy_batches(store, monkeypatch)
    calls = [
        lambda: committer.record("default", eps[0], True),
        lambda: committer.record("default", eps[1], False),
        lambda: committer.record("default", "no-such-episode", True),
        lambda: committer.record("default", eps[2], False),
        lambda: committer.record("default", eps[2], True),  # the same episode twice: the second is refused
        lambda: committer.record("default", eps[3], True),
    ]
    errors = _queued_then_released(pool, committer, calls)
    assert sizes == [6]  # tried as one batch, refused whole, then one by one
    assert errors[0] is None and errors[3] is None and errors[5] is None
    assert isinstance(errors[1], DuplicateError)
    assert isinstance(errors[2], UnknownEpisodeError)
    assert isinstance(errors[4], DuplicateError)
    log = {o.episode_id: o.success for o in store.backend.outcome_log()}
    assert log == {eps[1]: True, eps[0]: True, eps[2]: False, eps[3]: True}
    assert store.replay().consistent


def test_a_batch_holds_one_source_and_never_crosses_continuous_governance(tmp_path, monkeypatch):
    store = MemoryStore.open(
        f"sqlite:///{tmp_path}/c.db", encoder=HashingEncoder(), exploration=0.0, seed=0, govern_every=4
    )
    store.add_many([{"id": f"m{i}", "text": f"note {i} on topic {i % 5}"} for i in range(20)])
    eps = _episodes(store, 10)
    governed_at: list[int] = []
    original_govern = store._govern

    def govern(ns, actor):
        governed_at.append(len(list(store.backend.outcome_log())))
        return original_govern(ns, actor)

    monkeypatch.setattr(store, "_govern", govern)
    sizes = _spy_batches(store, monkeypatch)
    pool = StorePool(store)
    committer = GroupCommit(pool)
    sources = ["explicit"] * 6 + ["heuristic"] * 2 + ["explicit"] * 2
    calls = [lambda e=e, s=s: committer.record("default", e, True, source=s) for e, s in zip(eps, sources, strict=True)]
    errors = _queued_then_released(pool, committer, calls)
    assert errors == [None] * 10
    assert governed_at == [4, 8]  # as one record() at a time would: after the 4th and the 8th outcome
    assert sizes == [4, 2, 2, 2]  # 4 (govern), 2 explicit, 2 heuristic, 2 explicit
    assert [o.source for o in store.backend.outcome_log()] == sources
    store.close()


def test_outcomes_of_different_tenants_do_not_wait_for_each_other(store):
    pool = StorePool(store)
    committer = GroupCommit(pool)
    a = store.recall("topic 1", k=2).episode.id
    store.add("a note of tenant b", id="b1", namespace="b")
    b = store.recall("a note", k=1, namespace="b").episode.id
    committer.record("default", a, True)
    committer.record("b", b, False)
    assert store.get("b1", namespace="b").counts.failure == 1.0
    assert committer._queues == {}  # nothing left waiting


def test_an_outcome_in_another_tenant_is_unknown_to_this_one(store):
    committer = GroupCommit(StorePool(store))
    e = store.recall("topic 1", k=2).episode.id
    with pytest.raises(UnknownEpisodeError):
        committer.record("b", e, True)
    assert list(store.backend.outcome_log()) == []


def test_an_answer_that_fails_keeps_nothing_of_its_outcome_and_the_others_stay(store, monkeypatch):
    eps = _episodes(store, 4)
    pool = StorePool(store)
    committer = GroupCommit(pool)
    sizes = _spy_batches(store, monkeypatch)

    def broken() -> str:
        raise ValueError("the answer cannot be rendered")

    calls = [
        lambda e=e, i=i: committer.record("default", e, True, answer=broken if i == 2 else lambda i=i: f"answer {i}")
        for i, e in enumerate(eps)
    ]
    answers: dict[int, object] = {}
    wrapped = [lambda c=c, i=i: answers.__setitem__(i, c()) for i, c in enumerate(calls)]
    errors = _queued_then_released(pool, committer, wrapped)
    assert sizes == [4]  # tried as one batch, rolled back whole by the failed answer, then one by one
    assert isinstance(errors[2], ValueError)
    assert answers == {0: "answer 0", 1: "answer 1", 3: "answer 3"}
    assert [o.episode_id for o in store.backend.outcome_log()] == [eps[0], eps[1], eps[3]]
    assert store.replay().consistent
