"""The Redis hot tier (real Redis at 127.0.0.1:6379) over SQLite and PostgreSQL stores."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from memworth import HashingEncoder, MemoryStore
from memworth.cli import main
from tests.store.conftest import FACTS, drop, url_for

REDIS = "redis://127.0.0.1:6379/0"
DOWN = "redis://127.0.0.1:1/0"  # nothing listens on port 1


@pytest.fixture(params=["sqlite", "postgres"])
def hot_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MemoryStore]:
    s = MemoryStore.open(url_for(request.param, tmp_path), encoder=HashingEncoder(), seed=0, hot_tier=REDIS)
    s.exploration = 0.0
    yield s
    assert s.hot is not None
    for ns in s.backend.namespaces():
        s.hot.clear(ns)
    drop(s)


def fill(store: MemoryStore, namespace: str) -> None:
    store.add_many([{"id": k, "text": v} for k, v in FACTS.items()], namespace=namespace)
    for ok, query in ((True, "reverse a python list"), (False, "capital of czechoslovakia")):
        for _ in range(12):
            recall = store.recall(query, k=1, namespace=namespace)
            store.record(recall.episode, ok)


def test_the_mirror_holds_exactly_the_hot_memories_and_survives_loss(hot_store: MemoryStore) -> None:
    ns = f"n{uuid.uuid4().hex[:10]}"
    fill(hot_store, ns)
    assert hot_store.rebuild_hot_tier(namespace=ns) == 1
    assert hot_store.hot is not None
    assert [m.id for m in hot_store.hot.load(ns)] == [m.id for m in hot_store.hot_tier(namespace=ns)] == ["reverse"]
    assert hot_store.check_hot_tier(namespace=ns) == {"missing": [], "extra": [], "stale": []}
    client = redis.Redis.from_url(REDIS)
    client.delete(f"memworth:{ns}:hot")  # Redis loses everything ...
    client.hset(f"memworth:{ns}:hot", "bogus", "{}")
    assert hot_store.check_hot_tier(namespace=ns)["missing"] == ["reverse"]
    assert hot_store.check_hot_tier(namespace=ns)["extra"] == ["bogus"]
    hot_store.rebuild_hot_tier(namespace=ns)  # ... and the database rebuilds it
    assert hot_store.check_hot_tier(namespace=ns) == {"missing": [], "extra": [], "stale": []}


def test_hot_recall_serves_from_redis_and_logs_the_episode(hot_store: MemoryStore) -> None:
    ns = f"n{uuid.uuid4().hex[:10]}"
    fill(hot_store, ns)
    hot_store.rebuild_hot_tier(namespace=ns)
    recall = hot_store.recall("python list", k=3, namespace=ns, tier="hot")
    assert recall.diagnostics["tier"] == "hot" and [r.memory.id for r in recall] == ["reverse"]
    hot_store.record(recall.episode, True)
    assert hot_store.get("reverse", namespace=ns).counts.n == 13 and hot_store.replay().consistent


def test_hot_recall_ranks_by_standing_as_recall_does(hot_store: MemoryStore) -> None:
    ns = f"n{uuid.uuid4().hex[:10]}"
    fill(hot_store, ns)
    hot_store.rebuild_hot_tier(namespace=ns)
    before = hot_store.recall("python list", k=1, namespace=ns, tier="hot").results[0].score
    hot_store.set_standing("reverse", "promoted", reason="a person vouches for it", namespace=ns)
    hot = hot_store.recall("python list", k=1, namespace=ns, tier="hot")
    everywhere = hot_store.recall("python list", k=1, namespace=ns)
    assert hot.diagnostics["tier"] == "hot" and hot.results[0].memory.standing == "promoted"
    assert hot.results[0].score == pytest.approx(everywhere.results[0].score) and hot.results[0].score > before
    assert hot_store.hot is not None and hot_store.hot.load(ns)[0].standing == "promoted"


def test_suppressing_a_memory_removes_it_from_the_mirror(hot_store: MemoryStore) -> None:
    ns = f"n{uuid.uuid4().hex[:10]}"
    fill(hot_store, ns)
    hot_store.rebuild_hot_tier(namespace=ns)
    hot_store.set_status("reverse", "suppressed", reason="test", namespace=ns)
    assert hot_store.hot is not None and hot_store.hot.load(ns) == []
    assert len(hot_store.recall("python list", k=3, namespace=ns, tier="hot")) == 0


def test_govern_apply_refreshes_the_mirror(hot_store: MemoryStore) -> None:
    ns = f"n{uuid.uuid4().hex[:10]}"
    fill(hot_store, ns)
    hot_store.govern(apply=True, namespace=ns)
    assert hot_store.check_hot_tier(namespace=ns) == {"missing": [], "extra": [], "stale": []}


def test_with_redis_down_recall_falls_back_and_says_so(tmp_path: Path) -> None:
    with MemoryStore.open(f"sqlite:///{tmp_path / 'd.db'}", encoder=HashingEncoder(), hot_tier=DOWN, seed=0) as s:
        s.exploration = 0.0  # the top result must be the most similar memory
        s.add_many([{"id": k, "text": v} for k, v in FACTS.items()])
        recall = s.recall("reverse a python list", k=2, tier="hot")
        assert recall.diagnostics["tier"] == "all" and "unavailable" in recall.diagnostics["hot_tier"]
        assert recall.results[0].memory.id == "reverse"
        s.record(recall.episode, True)  # outcomes still land in the database
        report = s.govern(apply=True)  # governance still works; the mirror is skipped
        assert report is not None and s.replay().consistent


def test_the_cli_rebuild_proves_the_mirror(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'c.db'}"
    ns = f"n{uuid.uuid4().hex[:10]}"
    with MemoryStore.open(url, encoder=HashingEncoder(), seed=0) as s:
        s.exploration = 0.0
        fill(s, ns)
    try:
        assert main(["hot", "check", "--store", url, "--namespace", ns]) == 1  # empty mirror: "missing"
        assert "missing: reverse" in capsys.readouterr().out
        assert main(["hot", "rebuild", "--store", url, "--namespace", ns]) == 0
        assert "Redis now matches" in capsys.readouterr().out
        assert main(["hot", "check", "--store", url, "--namespace", ns]) == 0
    finally:
        redis.Redis.from_url(REDIS).delete(f"memworth:{ns}:hot")


def test_a_corrupt_mirror_entry_makes_hot_recall_fall_back(hot_store: MemoryStore) -> None:
    ns = f"n{uuid.uuid4().hex[:10]}"
    fill(hot_store, ns)
    hot_store.rebuild_hot_tier(namespace=ns)
    redis.Redis.from_url(REDIS).hset(f"memworth:{ns}:hot", "reverse", "not json")
    recall = hot_store.recall("reverse a python list", k=1, namespace=ns, tier="hot")
    assert recall.diagnostics["tier"] == "all" and "corrupt" in recall.diagnostics["hot_tier"]
    assert recall.results[0].memory.id == "reverse"
    assert hot_store.check_hot_tier(namespace=ns)["stale"] == ["reverse"]
