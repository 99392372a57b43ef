"""Recall shows every memory as it is now, whoever changed it (issue 17: what a backend keeps
between recalls must be forgotten when it may have changed)."""

from __future__ import annotations

import re
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from memworth import HashingEncoder, MemoryStore, UnknownMemoryError
from memworth.store import OutcomeRow
from memworth.store.backend import Increment, shareable
from tests.store.conftest import FACTS, drop, index_for, url_for

QUERY = "reverse a python list"


class Boom(Exception):
    """The failure a test raises inside a transaction."""


def _shown(store: MemoryStore, k: int = 6) -> dict[str, tuple[object, ...]]:
    """What recall shows of each memory it returns: status, standing, counts, time of last change."""
    return {
        r.memory.id: (r.memory.status, r.memory.standing, r.memory.counts, r.memory.updated)
        for r in store.recall(QUERY, k=k)
    }


def _stored(store: MemoryStore, ids: object) -> dict[str, tuple[object, ...]]:
    got = {m.id: m for m in store.list()}
    return {i: (got[i].status, got[i].standing, got[i].counts, got[i].updated) for i in ids}  # type: ignore[attr-defined]


@pytest.fixture
def pair(backend_kind: str, tmp_path: Path) -> Iterator[tuple[MemoryStore, MemoryStore]]:
    """Two store objects on one database (each with its own connection), memories added."""
    url = url_for(backend_kind, tmp_path)
    if not shareable(url):
        pytest.skip("memory:// lives in one store object")
    first = MemoryStore.open(url, encoder=HashingEncoder(), index=index_for(backend_kind), exploration=0.0)
    second = MemoryStore.open(url, encoder=HashingEncoder(), index=index_for(backend_kind), exploration=0.0)
    first.add_many([{"id": k, "text": v} for k, v in FACTS.items()])
    try:
        yield first, second
    finally:
        second.close()
        drop(first)


def test_recall_shows_what_another_store_object_changed(pair: tuple[MemoryStore, MemoryStore]) -> None:
    first, second = pair
    before = _shown(first)
    for _ in range(2):  # read twice: whatever the first store object keeps, it keeps now
        assert _shown(first) == _stored(first, _shown(first))
    second.record(second.recall(QUERY, k=3), True)
    second.set_standing("methods", "promoted", reason="a person trusts it")
    second.set_status("water", "suppressed", reason="test")
    shown = _shown(first)
    assert "water" not in shown
    assert shown == _stored(second, shown)
    assert shown["methods"][1] == "promoted"
    assert any(shown[i][2] != before[i][2] for i in shown)  # counts changed, and recall shows them


def test_recall_after_a_rolled_back_block_shows_the_counts_as_committed(store: MemoryStore) -> None:
    store.exploration = 0.0
    store.add_many([{"id": k, "text": v} for k, v in FACTS.items()])
    store.record(store.recall(QUERY, k=2), True)
    before = _shown(store)
    episode = store.recall(QUERY, k=4).episode
    with pytest.raises(Boom):
        with store.transaction():
            store.record(episode, False)
            store.set_standing("reverse", "demoted", reason="inside the block")
            inside = _shown(store)  # recall inside the block sees its own writes
            assert inside["reverse"][1] == "demoted"
            assert sum(c.failure for _, _, c, _ in inside.values()) > 0  # type: ignore[attr-defined]
            raise Boom
    after = _shown(store)
    assert after == before == _stored(store, after)


def _half_done(store: MemoryStore) -> None:
    """A write that changes a memory's counters, then fails (an unknown memory) and is rolled back."""
    episode = store.recall(QUERY, k=1).episode
    outcome = OutcomeRow(episode.id, False, "explicit", 1.0, 1.0, namespace="default")
    bad = [Increment("default", "reverse", 0.0, 1.0, 1.0), Increment("default", "no-such-memory", 0.0, 1.0, 1.0)]
    with pytest.raises(UnknownMemoryError):
        store.backend.append_outcomes([outcome], bad)


def test_a_failed_write_leaves_recall_showing_the_committed_counts(store: MemoryStore) -> None:
    store.exploration = 0.0
    store.add_many([{"id": k, "text": v} for k, v in FACTS.items()])
    store.record(store.recall(QUERY, k=3), True)
    before = _shown(store)
    _half_done(store)
    after = _shown(store)
    assert after == before == _stored(store, after)


def test_a_failed_write_inside_a_committed_block_leaves_only_the_blocks_other_writes(store: MemoryStore) -> None:
    store.exploration = 0.0
    store.add_many([{"id": k, "text": v} for k, v in FACTS.items()])
    before = _shown(store)
    episode = store.recall(QUERY, k=2).episode
    with store.transaction():
        store.record(episode, True)
        _half_done(store)  # rolled back alone: the block goes on and commits the record
    after = _shown(store)
    assert after == _stored(store, after) != before
    assert sum(c.failure for _, _, c, _ in after.values()) == 0  # type: ignore[attr-defined]
    assert sum(c.success for _, _, c, _ in after.values()) == pytest.approx(1.0)  # type: ignore[attr-defined]


def test_sqlite_recall_reads_a_candidates_row_again_only_after_a_change(tmp_path: Path) -> None:
    """The SQLite backend keeps the narrow rows it read: a recall whose candidates were all read
    before, with nothing written since, reads none; this store's own committed write keeps the
    rows it changed as written (none read again); another process's commit makes every row
    read again."""
    url = f"sqlite:///{tmp_path / 'kept.db'}"
    store = MemoryStore.open(url, encoder=HashingEncoder(), exploration=0.0)
    store.add_many([{"id": k, "text": v} for k, v in FACTS.items()])
    reads: list[set[str]] = []  # the ids each narrow read asked for

    def traced(sql: str) -> None:
        if sql.startswith("SELECT m.id, m.status"):  # the narrow read (schema 8: memories joined with counters)
            reads.append(set(re.findall(r"'([^']*)'", sql.partition(" IN ")[2])))

    store.backend._db.set_trace_callback(traced)  # type: ignore[attr-defined]
    try:
        store.recall(QUERY, k=2)
        assert reads == [set(FACTS)]
        reads.clear()
        store.recall(QUERY, k=2)
        assert reads == []  # nothing changed: nothing read
        picked = store.recall(QUERY, k=2)
        store.record(picked, True)  # this store's own write: the rows it changed are kept as written
        reads.clear()
        shown = _shown(store)
        assert reads == []
        assert shown == _stored(store, shown)
        assert sum(c.success for _, _, c, _ in shown.values()) == pytest.approx(1.0)  # type: ignore[attr-defined]
        child = textwrap.dedent(
            f"""
            from memworth import HashingEncoder, MemoryStore
            with MemoryStore.open({url!r}, encoder=HashingEncoder(), exploration=0.0) as other:
                other.record(other.recall({QUERY!r}, k=6), False)
            """
        )
        subprocess.run([sys.executable, "-c", child], check=True, timeout=120)
        reads.clear()
        shown = _shown(store)
        assert reads == [set(FACTS)]  # another process wrote: every row is read again
        assert shown == _stored(store, shown)
        assert all(c.failure > 0 for _, _, c, _ in shown.values())  # type: ignore[attr-defined]
    finally:
        store.backend._db.set_trace_callback(None)  # type: ignore[attr-defined]
        store.close()


def test_sqlite_kept_rows_follow_this_store_objects_own_counter_writes(tmp_path: Path) -> None:
    """The counters' trigger is gone (issue 17, branch sqlrec): each of the backend's three
    statements that change ``counters`` (a record, replay's rewrite of counters that differ from
    the log, a status change's time) tells the kept rows itself. After each, recall reads no
    row and shows what a full read of the file gives, bit for bit."""
    path = tmp_path / "own.db"
    store = MemoryStore.open(f"sqlite:///{path}", encoder=HashingEncoder(), exploration=0.0)
    store.add_many([{"id": k, "text": v} for k, v in FACTS.items()])
    reads: list[str] = []

    def traced(sql: str) -> None:
        if sql.startswith("SELECT m.id, m.status"):
            reads.append(sql)

    try:
        for _ in range(3):  # several outcomes per memory: the kept sums are chains of additions
            store.record_many([(store.recall(QUERY, k=4), True), (store.recall(QUERY, k=3), False)])
        with sqlite3.connect(path) as other:  # counters that differ from the log, set by another connection
            other.execute("UPDATE counters SET success = success + 0.1, n = n + 3")
        _shown(store)  # read again (another connection wrote), and kept
        store.backend._db.set_trace_callback(traced)  # type: ignore[attr-defined]
        assert not store.replay().consistent
        store.replay(apply=True)  # the backend rewrites the counters that differ
        shown = _shown(store)
        assert reads == []
        assert shown == _stored(store, shown)
        assert store.replay().consistent
        store.set_standing("methods", "promoted", reason="a person trusts it")  # sets the counters' time too
        store.record(store.recall(QUERY, k=2), True)
        shown = _shown(store)
        assert reads == []
        assert shown == _stored(store, shown)
        assert shown["methods"][1] == "promoted"
    finally:
        store.backend._db.set_trace_callback(None)  # type: ignore[attr-defined]
        store.close()
