"""The episodes a SQLite store object logged are kept to record their outcomes without reading
them back (issue 17); what is kept must always be what a read of the file gives."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from memworth import DuplicateError, HashingEncoder, MemoryStore, UnknownEpisodeError
from memworth.store import sqlite as sqlite_backend
from tests.store.conftest import FACTS

QUERY = "reverse a python list"


class Boom(Exception):
    """The failure a test raises inside a transaction."""


def _open(url: str) -> MemoryStore:
    return MemoryStore.open(url, encoder=HashingEncoder(), exploration=0.0)


def _read(store: MemoryStore, eid: str) -> object:
    """The episode as the file holds it (a fresh connection: nothing kept)."""
    other = _open(store.backend.url)
    try:
        return other.backend.episodes([eid])[eid]
    finally:
        other.close()


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[MemoryStore, MemoryStore]]:
    """Two store objects on one SQLite file, memories added."""
    url = f"sqlite:///{tmp_path / 'kept.db'}"
    first, second = _open(url), _open(url)
    first.add_many([{"id": k, "text": v} for k, v in FACTS.items()])
    try:
        yield first, second
    finally:
        second.close()
        first.close()


def _kept(store: MemoryStore) -> dict[str, object]:
    return dict(store.backend._episodes.kept)


def test_an_episode_is_recorded_from_what_was_kept_and_then_forgotten(pair: tuple[MemoryStore, MemoryStore]) -> None:
    first, _ = pair
    ep = first.recall(QUERY, k=3).episode
    assert _kept(first) == {ep.id: ep}
    assert first.backend.episodes([ep.id]) == {ep.id: _read(first, ep.id)}
    first.record(ep, True, used=[ep.items[0].memory_id])  # reweighs the logged episode
    assert ep.id not in _kept(first)  # its weights changed: read again from now on
    assert first.backend.episodes([ep.id])[ep.id] == _read(first, ep.id) != ep
    with pytest.raises(DuplicateError):
        first.record(ep, False)
    assert first.replay().consistent


def test_another_store_object_s_commit_forgets_what_was_kept(pair: tuple[MemoryStore, MemoryStore]) -> None:
    """An episode recalled by one store object and recorded (with ``used``, which rewrites its
    weights) by another: the first answers the episode as the file now holds it."""
    first, second = pair
    ep = first.recall(QUERY, k=3).episode
    used = ep.items[-1].memory_id
    second.record(ep.id, True, used=[used])
    logged = first.backend.episodes([ep.id])[ep.id]
    assert logged == _read(first, ep.id)
    assert [it.weight for it in logged.items] != [it.weight for it in ep.items]  # not the kept copy
    assert _kept(first) == {}
    with pytest.raises(DuplicateError):
        first.record(ep, True)
    verified = first.verify(ep, False)  # reported by the second store object: nothing credited again
    assert verified.reported is True and verified.agreed is False
    assert first.replay().consistent and second.replay().consistent


def test_an_evicted_episode_is_read_back(
    pair: tuple[MemoryStore, MemoryStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    first, _ = pair
    monkeypatch.setattr(sqlite_backend, "EPISODES_KEPT", 2)
    eps = [first.recall(q, k=2).episode for q in (QUERY, "capital of the czech republic", "boiling point of water")]
    assert list(_kept(first)) == [eps[1].id, eps[2].id]  # the oldest left first
    first.record_many([(ep, True) for ep in eps])
    assert _kept(first) == {}
    assert {o.episode_id for o in first.backend.outcome_log("default")} == {ep.id for ep in eps}
    assert first.replay().consistent


def test_an_episode_of_a_rolled_back_transaction_is_not_kept(pair: tuple[MemoryStore, MemoryStore]) -> None:
    first, _ = pair
    with pytest.raises(Boom), first.transaction():
        gone = first.recall(QUERY, k=2).episode
        raise Boom
    assert _kept(first) == {}
    with pytest.raises(UnknownEpisodeError):
        first.record(gone, True)
    assert list(first.backend.outcome_log("default")) == []


def test_an_episode_of_a_committed_transaction_is_kept(pair: tuple[MemoryStore, MemoryStore]) -> None:
    first, _ = pair
    with first.transaction():
        ep = first.recall(QUERY, k=2).episode
        assert _kept(first) == {}  # not before the commit
    assert _kept(first) == {ep.id: ep}
    first.record(ep, False)
    assert [o.episode_id for o in first.backend.outcome_log("default")] == [ep.id]
    assert first.replay().consistent


def test_a_transaction_sqlite_rolled_back_whole_writes_nothing_more_and_keeps_no_episode(tmp_path: Path) -> None:
    """A full disk makes SQLite roll the whole transaction back, not only the failed write's
    savepoint: the block's earlier episodes are in no file, so they are not kept, every later
    write of the block is refused and the block's end says so (found in review)."""
    from memworth.errors import StoreError

    store = _open(f"sqlite:///{tmp_path / 'full.db'}")
    store.add_many([{"id": f"m{i}", "text": f"fact number {i} about lists"} for i in range(10)])
    db = store.backend._db  # type: ignore[attr-defined]
    (pages,) = db.execute("PRAGMA page_count").fetchone()
    db.execute(f"PRAGMA max_page_count={pages + 3}")  # a disk about to be full
    with pytest.raises(StoreError, match="rolled the whole transaction back"), store.transaction():
        first = store.recall("lists", k=2).episode
        with pytest.raises(StoreError):
            store.add_many([{"id": f"big{i}", "text": "x " * 5000} for i in range(20)])
        db.execute("PRAGMA max_page_count=100000")
        with pytest.raises(StoreError, match="rolled the whole transaction back"):
            store.recall("facts", k=2)
    with pytest.raises(UnknownEpisodeError):
        store.record(first, True)
    assert store.replay().consistent
    later = store.recall("lists", k=2).episode  # the next block or call writes as usual
    store.record(later, True)
    assert store.replay().consistent


def test_a_kept_episode_is_what_a_read_gives_bit_for_bit(tmp_path: Path) -> None:
    """A REAL column gives -0.0 back as 0.0 and an int as a float: so does the kept episode."""
    import math

    from memworth import Sidecar

    store = _open(f"sqlite:///{tmp_path / 'bits.db'}")
    store.add_many([{"id": "x1", "text": "one"}, {"id": "x2", "text": "two"}])
    episode = Sidecar(store).retrieved(["x1", "x2"], weights=[-0.0, 1])
    kept = store.backend.episodes([episode.id])[episode.id]
    assert kept == _read(store, episode.id)
    assert [math.copysign(1.0, it.weight) for it in kept.items] == [1.0, 1.0]
    assert [type(it.weight) for it in kept.items] == [float, float]


def _item_reads(store: MemoryStore) -> list[str]:
    """The statements that read ``episode_items`` on the store object's connection, from now on."""
    seen: list[str] = []
    store.backend._db.set_trace_callback(lambda sql: seen.append(sql) if "episode_items i" in sql else None)
    return seen


def test_a_held_kept_episode_is_recorded_without_reading_its_items(pair: tuple[MemoryStore, MemoryStore]) -> None:
    """A record given the episode it holds (branch reccpu): the kept copy vouches for it, so the
    write reads nothing back; once another connection committed, the write reads its items."""
    first, second = pair
    first.record(first.recall("capital", k=2), True)  # reads and caches the provenance
    held, other = first.recall(QUERY, k=3).episode, first.recall("recursive", k=2).episode
    reads = _item_reads(first)
    first.record(held, True)
    assert reads == []
    second.record(second.recall("boils", k=1), True)  # another connection commits (no generation moves)
    first.record(other, False)
    assert len(reads) == 1 and "e.query" not in reads[0], reads  # the write's check, not a read of the episode
    assert first.replay().consistent
