"""Replay reads the outcome log and the live counters as one snapshot.

Another store object (another process's connection) records an outcome between replay's
read of the log and its read of the counters, injected by wrapping the replaying backend's
read of the counters. A replay that read them in two snapshots reports a mismatch that is
not there, and ``replay(apply=True)`` "fixes" the writer's counter from the older log,
losing its outcome. The memory backend is one process behind one lock: no other store
object's write can land between two reads of one thread, so it is not in this test.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from memworth import HashingEncoder, MemoryStore
from memworth.counts import Counts
from memworth.errors import StoreError, UnavailableError
from memworth.store.sqlite import SQLiteBackend
from tests.store.conftest import FACTS, drop, url_for

KINDS = ["sqlite", "postgres"]


@pytest.fixture(params=KINDS)
def pair(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[MemoryStore, MemoryStore]]:
    """Two store objects on one database: the replaying one, filled, and a writer."""
    url = url_for(str(request.param), tmp_path)
    replaying = MemoryStore.open(url, encoder=HashingEncoder(), seed=0, exploration=0.0)
    replaying.add_many([{"id": k, "text": v} for k, v in FACTS.items()])
    writer = MemoryStore.open(url, encoder=HashingEncoder(), seed=0, exploration=0.0)
    yield replaying, writer
    writer.close()
    drop(replaying)


def _between_reads(store: MemoryStore, write: Callable[[], None], at: int = 1) -> None:
    """Make ``write`` run once, just before ``store``'s backend reads the counters for the
    ``at``-th time (a replay reads them once per pass of its one namespace)."""
    read = store.backend.memories
    calls: list[bool] = []

    def memories(*args: Any, **kwargs: Any) -> Any:
        calls.append(True)
        if len(calls) == at:
            write()
        return read(*args, **kwargs)

    store.backend.memories = memories  # type: ignore[method-assign]


def _busy_at_once(store: MemoryStore) -> None:
    """A SQLite writer gives up at once when the database is locked (instead of after 60 s)."""
    if isinstance(store.backend, SQLiteBackend):
        store.backend._db.execute("PRAGMA busy_timeout=0")


def _history(store: MemoryStore, n: int) -> None:
    for i in range(n):
        store.record(store.recall("reverse a python list", k=2).episode, i % 3 != 0)


def test_replay_reads_log_and_counters_in_one_snapshot(pair: tuple[MemoryStore, MemoryStore]) -> None:
    replaying, writer = pair
    _history(replaying, 5)
    episode = writer.recall("reverse a python list", k=2).episode
    _between_reads(replaying, lambda: writer.record(episode, False))
    report = replaying.replay()
    assert report.outcomes == 5 and report.consistent, report.mismatches
    after = replaying.replay()  # the writer's outcome committed: the next replay has it
    assert after.outcomes == 6 and after.consistent


def test_replay_apply_loses_no_concurrent_outcome(pair: tuple[MemoryStore, MemoryStore]) -> None:
    replaying, writer = pair
    _history(replaying, 4)
    episode = writer.recall("reverse a python list", k=2).episode
    target = episode.items[0].memory_id
    replaying.backend.write_counts("default", {target: Counts(5.0, 5.0, 10.0)})  # a counter to repair
    sqlite = isinstance(writer.backend, SQLiteBackend)
    _busy_at_once(writer)
    refused: list[StoreError] = []

    def record() -> None:
        try:
            writer.record(episode, False)
        except StoreError as exc:
            refused.append(exc)

    _between_reads(replaying, record, at=2)  # in the pass that fixes
    if sqlite:  # the replay holds the write lock from its first read: the writer is held off
        assert replaying.replay(apply=True).applied
        assert len(refused) == 1
        writer.record(episode, False)  # it tries again, after the repair
    else:  # PostgreSQL: the writer's commit changed a counter the repair would overwrite
        with pytest.raises(UnavailableError):
            replaying.replay(apply=True)
        assert not refused
        assert replaying.get(target).counts == Counts(5.0, 5.0 + episode.items[0].weight, 11.0)  # nothing written
        assert replaying.replay(apply=True).applied  # tried again: repaired from the newer log
    report = replaying.replay()
    assert report.outcomes == 5 and report.consistent, report.mismatches
    assert report.rebuilt[("default", target)] == replaying.get(target).counts


def test_replay_apply_with_nothing_to_fix_holds_no_writer_off(pair: tuple[MemoryStore, MemoryStore]) -> None:
    replaying, writer = pair
    _history(replaying, 4)
    episode = writer.recall("reverse a python list", k=2).episode
    _busy_at_once(writer)
    _between_reads(replaying, lambda: writer.record(episode, True))  # refused if the replay held the write lock
    report = replaying.replay(apply=True)
    assert report.consistent and not report.applied and report.outcomes == 4
    assert replaying.replay().outcomes == 5 and replaying.replay().consistent


@pytest.mark.parametrize("kind", ["memory", "sqlite", "postgres"])
def test_replay_inside_a_transaction_reads_and_fixes_in_it(kind: str, tmp_path: Path) -> None:
    """Replay called inside the store object's open transaction works as it did before the
    snapshot: it reads in that transaction, and its fixes commit or roll back with it."""
    store = MemoryStore.open(url_for(kind, tmp_path), encoder=HashingEncoder(), seed=0, exploration=0.0)
    try:
        store.add_many([{"id": k, "text": v} for k, v in FACTS.items()])
        _history(store, 4)
        target = store.recall("reverse a python list", k=2).episode.items[0].memory_id
        right = store.get(target).counts
        with store.transaction():
            assert store.replay().consistent
        store.backend.write_counts("default", {target: Counts(5.0, 5.0, 10.0)})
        with pytest.raises(RuntimeError), store.transaction():
            assert store.replay(apply=True).applied
            raise RuntimeError("the answer could not be rendered")
        assert store.get(target).counts == Counts(5.0, 5.0, 10.0)  # rolled back with the block
        with store.transaction():
            assert store.replay(apply=True).applied
        assert store.get(target).counts == right and store.replay().consistent
    finally:
        drop(store)
