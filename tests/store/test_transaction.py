"""MemoryStore.transaction(): the writes of a block commit together or roll back whole, on every backend."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from memworth import HashingEncoder, MemoryStore
from memworth.errors import TransactionError
from memworth.signals.coretrieval import AlarmSplitter
from memworth.store.backend import shareable
from memworth.store.followed import Followed
from tests.store.conftest import FACTS, drop, index_for, url_for


class Boom(Exception):
    """The failure to answer a test injects after the writes."""


def _state(store: MemoryStore, ns: str = "default") -> dict[str, Any]:
    """Everything a rolled-back block must leave as it was, read through the store's public API."""
    return {
        "memories": [(m.id, m.text, m.status, m.standing, m.counts, m.metadata, m.expires) for m in store.list(namespace=ns)],
        "audit": [(e.seq, e.memory_id, e.action, e.field, e.old, e.new) for e in store.audit(None, namespace=ns)],
        "outcomes": [(o.seq, o.episode_id, o.success) for o in store.backend.outcome_log(ns)],
        "config": store.config(),
        "settings_version": store.settings_version,
        "history": store.settings_history(),
        "ttl": store.ttl(namespace=ns),
        "recent": store.recent_counts(ns),
        "generation": store.backend.generation(),
    }


def _ranked(store: MemoryStore, query: str, ns: str = "default") -> list[str]:
    """The ids recall ranks for ``query`` (exploration off: the candidate index decides)."""
    return [r.memory.id for r in store.recall(query, k=3, namespace=ns)]


@pytest.fixture
def busy(make_store: Any) -> MemoryStore:
    """A store with memories, outcomes, an AlarmSplitter (the default planner) and change detection."""
    s = make_store(seed=0, exploration=0.0)
    s.add_many([{"id": k, "text": v} for k, v in FACTS.items()])
    for ok, query in ((True, "reverse a python list"), (False, "capital of czechoslovakia")) * 6:
        s.record(s.recall(query, k=2).episode, ok)
    s.govern(apply=True)
    return s


def test_a_failed_block_leaves_no_trace_of_any_write(busy: MemoryStore) -> None:
    before = _state(busy)
    ranked = _ranked(busy, "python list methods")
    episode = busy.recall("capital city", k=2).episode  # committed before the block
    with pytest.raises(Boom):
        with busy.transaction():
            busy.add("Paris is the capital of France.", id="paris", metadata={"a": 1})
            busy.add_many([{"id": "x1", "text": "python list reverse slicing"}, {"id": "x2", "text": "lists"}])
            busy.record(episode, True)
            busy.record_many([(busy.recall("python list", k=2).episode, False)])
            busy.set_status("water", "suppressed", reason="test")
            busy.set_standing("methods", "promoted", reason="test")
            busy.pin("recursion", reason="test")
            busy.delete("prague", reason="test")
            busy.edit("reverse", "Reverse a list with reversed().", reason="test")
            busy.configure({"recall.exploration": 0.3}, actor="test")
            busy.set_ttl(60.0)
            busy.govern(apply=True)
            assert busy.get("paris").id == "paris"  # read inside: the block sees its own writes
            assert _ranked(busy, "python list reverse slicing")[0] == "x1"
            raise Boom
    assert _state(busy) == before
    assert busy.exploration == 0.0
    assert busy.replay().mismatches == []
    assert _ranked(busy, "python list methods") == ranked  # the candidate index holds what it held
    assert "x1" not in _ranked(busy, "python list reverse slicing")
    assert busy.get("prague").text == FACTS["prague"]  # the erased memory is back, text and vector
    assert "prague" in _ranked(busy, "capital of the czech republic prague")
    busy.record(episode, False)  # the episode's outcome was never kept: it takes one now
    busy.add("Paris is the capital of France.", id="paris")  # an id the block used is free
    assert busy.replay().mismatches == []
    assert list(busy.backend.outcome_log())[-1].settings_version == before["settings_version"]  # not the rolled-back one


def test_a_clean_block_commits_every_write(store: MemoryStore) -> None:
    with store.transaction():
        store.add_many([{"id": k, "text": v} for k, v in FACTS.items()])
        store.record(store.recall("python list", k=2).episode, True)
        store.set_status("water", "archived", reason="test")
    assert len(store.list()) == len(FACTS)
    assert store.get("water").status == "archived"
    assert sum(m.counts.n for m in store.list()) > 0
    assert store.replay().mismatches == []


def test_an_error_the_block_catches_rolls_back_only_its_write(store: MemoryStore) -> None:
    """A refused write inside a block (a duplicate id) undoes itself; the block's other writes go on."""
    store.add("kept", id="a")
    with store.transaction():
        store.add("new", id="b")
        with pytest.raises(Exception, match="already exists"):
            store.add_many([{"id": "c", "text": "c"}, {"id": "a", "text": "again"}])
    assert [m.id for m in store.list()] == ["a", "b"]


def test_transactions_do_not_nest(store: MemoryStore) -> None:
    with store.transaction():
        store.add("outer", id="a")
        with pytest.raises(TransactionError, match="do not nest"):
            with store.transaction():
                store.add("inner", id="b")  # never runs
        store.add("outer again", id="c")
    assert [m.id for m in store.list()] == ["a", "c"]
    with store.transaction():  # the refusal left nothing open
        store.add("later", id="d")
    assert len(store.list()) == 3


def test_a_second_thread_cannot_open_one_on_the_same_store_object(store: MemoryStore) -> None:
    refused: list[BaseException] = []
    opened = threading.Event()
    done = threading.Event()

    def other() -> None:
        opened.wait()
        try:
            with store.transaction():
                pass
        except TransactionError as exc:
            refused.append(exc)
        finally:
            done.set()

    thread = threading.Thread(target=other)
    thread.start()
    with store.transaction():
        store.add("mine", id="a")
        opened.set()
        assert done.wait(30)
    thread.join()
    assert len(refused) == 1 and [m.id for m in store.list()] == ["a"]


def test_other_store_objects_see_nothing_before_the_commit(backend_kind: str, tmp_path: Path) -> None:
    url = url_for(backend_kind, tmp_path)
    if not shareable(url):
        pytest.skip("memory:// lives in one store object")
    first = MemoryStore.open(url, encoder=HashingEncoder(), index=index_for(backend_kind))
    second = MemoryStore.open(url, encoder=HashingEncoder(), index=index_for(backend_kind))
    try:
        # The first memory of a pgvector store adds the vector column (ALTER TABLE): readers wait
        # for that transaction's end, so it is made outside the block.
        first.add("before", id="0")
        with first.transaction():
            first.add("not yet", id="a")
            assert [m.id for m in second.list()] == ["0"]
        assert [m.id for m in second.list()] == ["0", "a"]
    finally:
        second.close()
        drop(first)


def test_a_rolled_back_record_leaves_the_change_statistics_and_splitter_as_they_were(busy: MemoryStore) -> None:
    assert isinstance(busy.ablation, AlarmSplitter)
    keys = [("default", k) for k in FACTS]
    streams = {k: (s.success.tolist(), s.weight.tolist()) for k, s in busy.outcome_streams().items()}
    statistics = busy.ablation.watched(keys)
    episodes = [busy.recall("capital of czechoslovakia", k=2).episode for _ in range(4)]
    with pytest.raises(Boom):
        with busy.transaction():
            for ep in episodes:
                busy.record(ep, False)
            raise Boom
    assert busy.ablation.watched(keys) == statistics
    assert {k: (s.success.tolist(), s.weight.tolist()) for k, s in busy.outcome_streams().items()} == streams
    for ep in episodes:  # the same outcomes, kept this time, move the statistics as they would have
        busy.record(ep, False)
    assert busy.ablation.watched(keys) != statistics


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def hot_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MemoryStore]:
    s = MemoryStore.open(
        url_for(request.param, tmp_path), encoder=HashingEncoder(), seed=0, exploration=0.0, hot_tier=REDIS
    )
    yield s
    assert s.hot is not None
    for ns in s.backend.namespaces():
        s.hot.clear(ns)
    drop(s)


REDIS = "redis://127.0.0.1:6379/0"


def test_the_hot_tier_is_written_only_after_the_commit(hot_store: MemoryStore) -> None:
    ns = f"n{uuid.uuid4().hex[:10]}"
    hot_store.add_many([{"id": k, "text": v} for k, v in FACTS.items()], namespace=ns)
    for _ in range(12):
        hot_store.record(hot_store.recall("reverse a python list", k=1, namespace=ns).episode, True)
    hot_store.rebuild_hot_tier(namespace=ns)
    client = redis.Redis.from_url(REDIS)
    mirror = client.hgetall(f"memworth:{ns}:hot")
    assert list(mirror) == [b"reverse"]
    with pytest.raises(Boom):
        with hot_store.transaction():
            hot_store.set_status("reverse", "suppressed", reason="test", namespace=ns)
            hot_store.govern(apply=True, namespace=ns)  # rebuilds the mirror, after the commit only
            assert client.hgetall(f"memworth:{ns}:hot") == mirror  # nothing reached Redis yet
            raise Boom
    assert client.hgetall(f"memworth:{ns}:hot") == mirror
    assert hot_store.check_hot_tier(namespace=ns) == {"missing": [], "extra": [], "stale": []}
    with hot_store.transaction():
        hot_store.set_status("reverse", "suppressed", reason="test", namespace=ns)
        assert client.hgetall(f"memworth:{ns}:hot") == mirror
    assert client.hgetall(f"memworth:{ns}:hot") == {}  # committed: the memory left the mirror


def test_state_derived_inside_a_failed_block_is_not_reused_after_it(busy: MemoryStore) -> None:
    """The database's numbers (generation, insertion and log sequence numbers) go back with a
    rollback and are used again by the next writes: a candidate index or followed history built
    inside the block must not pass for one built on them."""
    episode = busy.recall("capital city", k=2).episode
    later = busy.recall("python list", k=2).episode
    with pytest.raises(Boom):
        with busy.transaction():
            busy.add("zebra stripes pattern", id="zebra")
            assert _ranked(busy, "zebra stripes pattern")[0] == "zebra"  # the index now holds it
            busy.record(episode, True)
            busy.recent_counts()  # the followed history now holds its outcome
            raise Boom
    busy.add("giraffe long neck", id="giraffe")  # the same numbers as the rolled-back writes
    busy.record(later, False)
    assert _ranked(busy, "giraffe long neck")[0] == "giraffe"
    assert "zebra" not in _ranked(busy, "zebra stripes pattern")
    fresh = Followed()
    fresh.extend(busy.backend.history("default"))
    assert busy.recent_counts() == fresh.recent(busy.policy.staleness.window)
