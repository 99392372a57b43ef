"""Forgetting on every backend: delete (erase for good), edit, expiry, status and standing by hand.

The erasure tests look where the text and the vector could linger: the SQLite file and
its WAL (raw bytes), PostgreSQL's tables, the store's vector index (in this process and
in another that opened the store before the erasure) and the Redis hot tier.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import redis

from memworth import HashingEncoder, MemoryStore
from memworth.errors import (
    ConflictError,
    DuplicateError,
    ErasedMemoryError,
    UnknownMemoryError,
    ValidationError,
)
from memworth.store.backend import SCHEMA_VERSION
from memworth.store.postgres import MIGRATIONS as PG_MIGRATIONS
from memworth.store.postgres import PostgresBackend
from memworth.store.records import AuditEntry
from memworth.store.sqlite import MIGRATIONS as SQLITE_MIGRATIONS
from tests.store.conftest import FACTS, POSTGRES, drop, url_for, with_query

SECRET = "Zebra-7781 is Alice's door code at Quellenweg 12."
META = {"owner": "alice-private-7781"}


def _recall_and_record(store: MemoryStore, query: str, ok: bool, namespace: str = "default", k: int = 2) -> None:
    store.record(store.recall(query, k=k, namespace=namespace).episode, ok)


def test_delete_erases_leaves_a_tombstone_and_keeps_replay_exact(filled: MemoryStore) -> None:
    store = filled
    store.exploration = 0.0
    for i in range(6):
        _recall_and_record(store, "reverse a python list", i % 2 == 0)
    pending = store.recall("reverse a python list", k=2)  # retrieved before the erasure, recorded after
    assert "reverse" in [r.memory.id for r in pending]
    before = store.get("reverse").counts
    tomb = store.delete("reverse", reason="asked to forget", actor="alice")
    assert (tomb.action, tomb.memory_id, tomb.reason, tomb.settings["actor"]) == (
        "erase",
        "reverse",
        "asked to forget",
        "alice",
    )
    assert tomb.settings["counts"] == {"success": before.success, "failure": before.failure, "n": before.n}
    assert tomb.seq > 0 and store.audit("reverse")[-1] == tomb
    with pytest.raises(ErasedMemoryError, match="was erased") as err:
        store.get("reverse")
    assert err.value.status == 404 and isinstance(err.value, UnknownMemoryError)
    assert "reverse" not in [m.id for m in store.list()]
    store.record(pending.episode, True)  # credits the other memory of the episode only
    for _ in range(4):
        recall = store.recall("reverse a python list", k=3)
        assert "reverse" not in [r.memory.id for r in recall]
        store.record(recall.episode, True)
    report = store.replay()
    assert report.consistent, report.mismatches
    with pytest.raises(DuplicateError, match="erased"):
        store.add("new text", id="reverse")
    with pytest.raises(DuplicateError, match="erased"):
        store.add_many([{"text": "fine", "id": "fresh"}, {"text": "again", "id": "reverse"}])
    assert "fresh" not in [m.id for m in store.list()]  # all or nothing
    with pytest.raises(ErasedMemoryError):
        store.delete("reverse", reason="twice")
    with pytest.raises(ValidationError, match="an erasure cannot be undone"):
        store.restore(tomb.seq)
    with pytest.raises(UnknownMemoryError, match="unknown memory id"):
        store.delete("never-there", reason="x")


def test_delete_refuses_bad_input_and_changes_nothing(filled: MemoryStore) -> None:
    with pytest.raises(ValidationError, match="reason"):
        filled.delete("water", reason="  ")
    with pytest.raises(ValidationError, match="actor"):
        filled.delete("water", reason="x", actor=" padded ")
    assert filled.get("water").text == FACTS["water"]


def test_erasing_along_provenance_keeps_credit_and_replay_exact(store: MemoryStore) -> None:
    store.exploration = 0.0
    store.add("Python lists have methods such as append and sort.", id="parent")
    store.add("Use list.reverse() to reverse a Python list.", id="child", derived_from=["parent"])
    store.add("Use sorted() to sort any Python iterable.", id="other", derived_from=["parent"])
    for i in range(5):
        _recall_and_record(store, "reverse a python list", i != 2, k=1)
    store.delete("child", reason="wrong")
    for _ in range(3):
        _recall_and_record(store, "sort a python iterable", True, k=1)
    store.delete("parent", reason="obsolete")
    assert store.get("other").derived_from == ("parent",)  # the id of an erased memory stays in provenance
    for _ in range(3):
        _recall_and_record(store, "sort a python iterable", False, k=1)  # its parent's share goes nowhere
    assert store.replay().consistent


def test_edit_replaces_the_text_the_one_way_resolve_does(filled: MemoryStore) -> None:
    store = filled
    store.exploration = 0.0
    for _ in range(3):
        _recall_and_record(store, "capital of the czech republic", True, k=1)
    old_counts = store.get("prague").counts
    assert old_counts.n > 0
    entry = store.edit("prague", "Prague is the Czech capital, on the Vltava.", reason="precise", actor="bob",
                       new_id="prague-2")  # fmt: skip
    assert (entry.action, entry.field, entry.old, entry.new) == ("edit", "status", "active", "archived")
    assert entry.settings["replaced_by"] == "prague-2" and entry.settings["actor"] == "bob"
    old, new = store.get("prague"), store.get("prague-2")
    assert old.status == "archived" and old.counts == old_counts  # counters stay with the version they measured
    assert new.counts.n == 0 and new.derived_from == ("prague",) and new.status == "active"
    assert new.text == "Prague is the Czech capital, on the Vltava."
    assert [r.memory.id for r in store.recall("capital of the czech republic vltava", k=1)] == ["prague-2"]
    with pytest.raises(ConflictError, match="archived"):
        store.edit("prague", "again", reason="x")
    entry = store.edit("prague-2", "Prague: the Czech capital.", reason="shorter", new_id="prague-3", keep_old=False)
    with pytest.raises(ErasedMemoryError):
        store.get("prague-2")
    assert store.get("prague-3").derived_from == ("prague-2",)
    with pytest.raises(ValidationError, match="text"):
        store.edit("water", "", reason="x")
    assert store.get("water").status == "active"
    assert store.replay().consistent


def test_status_and_standing_by_hand_are_audited_with_the_actor(filled: MemoryStore) -> None:
    e = filled.set_status("water", "suppressed", reason="misleading", actor="carol")
    assert (e.action, e.old, e.new, e.settings["actor"]) == ("set-status", "active", "suppressed", "carol")
    e = filled.set_standing("water", "promoted", reason="key fact")
    assert (e.action, e.new, e.settings.get("actor")) == ("set-standing", "promoted", None)
    assert [a.action for a in filled.audit("water")] == ["set-status", "set-standing"]


def test_expiry_hides_lists_and_erases(make_store: Callable[..., MemoryStore]) -> None:
    now = [1000.0]
    store = make_store(clock=lambda: now[0], exploration=0.0)
    store.add("Water boils at 100 degrees Celsius at sea level.", id="water", ttl=60)
    store.add("Water freezes at 0 degrees Celsius.", id="ice")
    store.set_ttl(30, namespace="scratch")
    assert store.ttl(namespace="scratch") == 30 and store.ttl() is None
    store.add("Temporary note about water.", id="tmp", namespace="scratch")
    store.add("Kept longer.", id="long", namespace="scratch", ttl=600)
    assert store.get("water").expires == 1060 and store.get("ice").expires is None
    assert store.get("tmp", namespace="scratch").expires == 1030
    assert [r.memory.id for r in store.recall("water boils", k=1)] == ["water"]
    now[0] = 1060.0
    assert [m.id for m in store.expired()] == ["water"] and store.get("water").expired(now[0])
    recall = store.recall("water boils", k=2)  # erases the expired one before it searches
    assert [r.memory.id for r in recall] == ["ice"]
    with pytest.raises(ErasedMemoryError):
        store.get("water")
    assert store.audit("water")[-1].settings["actor"] == "memworth-expiry"
    tombs = store.purge_expired(namespace="scratch")
    assert [t.memory_id for t in tombs] == ["tmp"] and store.purge_expired(namespace="scratch") == []
    assert [m.id for m in store.list(namespace="scratch")] == ["long"]
    assert store.replay().consistent
    for bad in ("30", True, 0, -1, float("inf"), float("nan")):
        with pytest.raises(ValidationError, match="ttl"):
            store.add("x", ttl=bad)
        with pytest.raises(ValidationError, match="ttl"):
            store.set_ttl(bad)
    store.set_ttl(None, namespace="scratch")
    assert store.ttl(namespace="scratch") is None


def test_an_edit_keeps_the_expiry(make_store: Callable[..., MemoryStore]) -> None:
    now = [0.0]
    store = make_store(clock=lambda: now[0])
    store.add("Meeting room B is free today.", id="room", ttl=100)
    now[0] = 50.0
    store.edit("room", "Meeting room C is free today.", reason="changed", new_id="room-2")
    assert store.get("room-2").expires == 100


# -- where erased bytes could linger ----------------------------------------------------------


def _vector(text: str) -> bytes:
    return np.asarray(HashingEncoder().encode([text])[0], dtype=np.float32).tobytes()


def _raw(path: Path) -> bytes:
    return b"".join(p.read_bytes() for p in (path, Path(f"{path}-wal")) if p.exists())


def test_sqlite_file_and_wal_no_longer_hold_the_erased_bytes(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    store = MemoryStore.open(f"sqlite:///{path}", encoder=HashingEncoder(), exploration=0.0)
    store.add_many([{"id": k, "text": v} for k, v in FACTS.items()])
    store.add(SECRET, id="door", metadata=META)
    _recall_and_record(store, "door code", True)
    assert store.backend._read("PRAGMA secure_delete") == [(1,)]  # set by memworth, whatever the build's default
    reader = MemoryStore.open(f"sqlite:///{path}", encoder=HashingEncoder())  # another client, open throughout
    assert reader.get("door").text == SECRET
    needles = [SECRET.encode(), META["owner"].encode(), _vector(SECRET)]
    assert all(n in _raw(path) for n in needles)  # the test can see them while they are there
    store.delete("door", reason="erasure request")
    with sqlite3.connect(path) as db:  # a checkpoint of whatever the erase left in the WAL
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    raw = _raw(path)
    assert [n in raw for n in needles] == [False, False, False]
    assert b"door" in raw  # the id stays, in the tombstone and the log
    with pytest.raises(ErasedMemoryError):
        reader.get("door")
    reader.close()
    store.close()


@pytest.mark.parametrize("kind", ["postgres", "pgvector"])
def test_postgres_tables_no_longer_hold_the_erased_memory(kind: str, tmp_path: Path) -> None:
    store = MemoryStore.open(url_for(kind, tmp_path), encoder=HashingEncoder(), exploration=0.0)
    try:
        store.add_many([{"id": k, "text": v} for k, v in FACTS.items()])
        store.add(SECRET, id="door", metadata=META)
        _recall_and_record(store, "door code", True)
        backend = store.backend
        assert isinstance(backend, PostgresBackend)
        tables = [r[0] for r in backend._read("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")]

        def holding(needle: str) -> list[str]:
            return [
                t for t in tables if backend._read(f'SELECT count(*) FROM "{t}" t WHERE t::text LIKE %s', (f"%{needle}%",))[0][0]
            ]  # fmt: skip

        assert holding("Zebra-7781") == ["memories"] and holding("alice-private") == ["memories"]
        store.delete("door", reason="erasure request")
        assert holding("Zebra-7781") == [] and holding("alice-private") == []
        assert backend._read("SELECT count(*) FROM memories WHERE id = 'door'")[0][0] == 0
        if kind == "pgvector":  # the database search finds nothing where the vector was
            found = store.recall(SECRET, k=3)
            assert found.diagnostics.get("search") == "database" and "door" not in [r.memory.id for r in found]
    finally:
        drop(store)


@pytest.mark.parametrize("index", ["exact", "hnsw"])
def test_the_vector_index_drops_the_erased_vector_in_every_process(index: str, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    one = MemoryStore.open(url, encoder=HashingEncoder(), index=index, exploration=0.0)
    two = MemoryStore.open(url, encoder=HashingEncoder(), index=index, exploration=0.0)
    one.add_many([{"id": k, "text": v} for k, v in FACTS.items()])
    one.add(SECRET, id="door")
    q = np.frombuffer(_vector(SECRET), dtype=np.float32)
    for s in (one, two):  # both build their index with the vector in it
        assert s.recall(SECRET, k=1).results[0].memory.id == "door"
        assert float(s._space("default").index.search(q, 1)[1][0]) == pytest.approx(1.0, abs=1e-5)  # type: ignore[union-attr]
    one.delete("door", reason="erasure request")
    for s in (one, two):
        assert "door" not in [r.memory.id for r in s.recall(SECRET, k=3)]
        space = s._space("default")
        assert "door" not in space.ids and len(space.index) == len(space.ids) == len(FACTS)  # type: ignore[arg-type]
        assert float(space.index.search(q, 1)[1][0]) < 0.99  # type: ignore[union-attr]
    one.close()
    two.close()


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_the_redis_hot_tier_drops_the_erased_memory(kind: str, tmp_path: Path) -> None:
    ns = f"n{uuid.uuid4().hex[:10]}"
    store = MemoryStore.open(url_for(kind, tmp_path), encoder=HashingEncoder(), hot_tier="redis://127.0.0.1:6379/0")
    store.exploration = 0.0
    try:
        store.add(SECRET, id="door", namespace=ns)
        store.add(FACTS["water"], id="water", namespace=ns)
        for _ in range(12):
            _recall_and_record(store, "door code", True, namespace=ns, k=1)
        assert store.rebuild_hot_tier(namespace=ns) >= 1
        client = redis.Redis.from_url("redis://127.0.0.1:6379/0")
        key = f"memworth:{ns}:hot"
        assert b"door" in client.hkeys(key)
        store.delete("door", reason="erasure request", namespace=ns)
        assert b"door" not in client.hkeys(key)
        assert not any(b"Zebra-7781" in v for v in client.hvals(key))
        assert "door" not in [r.memory.id for r in store.recall("door code", k=2, namespace=ns, tier="hot")]
        assert store.check_hot_tier(namespace=ns) == {"missing": [], "extra": [], "stale": []}
    finally:
        assert store.hot is not None
        store.hot.clear(ns)
        drop(store)


# -- schema 4 ------------------------------------------------------------------------------


def test_a_version_3_sqlite_store_gains_expiry(tmp_path: Path) -> None:
    path = tmp_path / "v3.db"
    db = sqlite3.connect(path)
    for version in (1, 2, 3):
        db.executescript(SQLITE_MIGRATIONS[version])
    db.execute("INSERT INTO meta VALUES ('schema_version', '3')")
    db.execute(
        "INSERT INTO memories (namespace, id, seq, text, metadata, contexts, status, created, updated, embedding)"
        " VALUES ('default', 'old', 1, 'an old memory', '{}', '[]', 'active', 0, 0, ?)",
        (_vector("an old memory"),),
    )
    db.execute("INSERT INTO meta VALUES ('encoder', 'hashing-384'), ('dimension', '384')")
    db.commit()
    db.close()
    with MemoryStore.open(f"sqlite:///{path}", encoder=HashingEncoder()) as store:
        assert store.backend.get_meta("schema_version") == str(SCHEMA_VERSION) == "9"
        assert store.get("old").expires is None and store.get("old").text == "an old memory"
        store.delete("old", reason="migrated stores erase too")
        assert store.list() == []


def test_a_version_3_postgres_store_gains_expiry() -> None:
    schema = f"t_{uuid.uuid4().hex[:16]}"
    url = with_query(POSTGRES, schema=schema, pool_size="2")
    import psycopg

    with psycopg.connect(POSTGRES, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
        conn.execute(f'SET search_path TO "{schema}"')
        conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        for version in (1, 2, 3):
            for statement in PG_MIGRATIONS[version]:
                conn.execute(statement)
        conn.execute("INSERT INTO meta VALUES ('schema_version', '3'), ('generation', '0')")
        conn.execute(
            "INSERT INTO memories (namespace, id, text, metadata, contexts, status, created, updated, embedding)"
            " VALUES ('default', 'old', 'an old memory', '{}', '[]', 'active', 0, 0, %s)",
            (_vector("an old memory"),),
        )
    store = MemoryStore.open(url, encoder=HashingEncoder())
    try:
        assert store.backend.get_meta("schema_version") == str(SCHEMA_VERSION) == "9"
        assert store.get("old").expires is None
        store.add("a new one", id="new", ttl=5)
        assert store.get("new").expires is not None
    finally:
        drop(store)


def test_an_erasure_rebuilds_only_its_own_namespaces_index(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    one = MemoryStore.open(url, encoder=HashingEncoder(), exploration=0.0)
    two = MemoryStore.open(url, encoder=HashingEncoder(), exploration=0.0)
    for ns in ("a", "b"):
        one.add_many([{"id": k, "text": v} for k, v in FACTS.items()], namespace=ns)
        two.recall("python list", namespace=ns)
    spaces = {ns: two._spaces[ns] for ns in ("a", "b")}
    one.delete("water", reason="erasure request", namespace="a")
    two.recall("python list", namespace="a")
    two.recall("python list", namespace="b")
    assert two._spaces["a"] is not spaces["a"] and "water" not in two._spaces["a"].ids  # rebuilt without it
    assert two._spaces["b"] is spaces["b"]  # another namespace's index is kept
    one.close()
    two.close()


def test_an_edit_that_cannot_be_made_writes_nothing(filled: MemoryStore) -> None:
    # The store checks the memory before it writes; the backend checks again in the write's
    # own transaction, for a change another client makes in between: then nothing is written.
    row = filled._prepare_one("Water boils at 100 C.", id="water-2", namespace="default", expires=None)
    archive = AuditEntry(0, "water", "default", "edit", "status", "active", "archived", "x", {}, 0.0)
    filled.set_status("water", "suppressed", reason="changed meanwhile")
    before = filled.audit()
    with pytest.raises(ConflictError, match="no longer status 'active'"):
        filled.backend.insert_memories([row], then=archive)
    with pytest.raises(UnknownMemoryError, match="unknown memory id"):
        filled.get("water-2")  # the new version went with the refused change
    assert filled.audit() == before and filled.get("water").status == "suppressed"
    entry = filled.edit("water", "Water boils at 100 C.", reason="now", new_id="water-2")  # the id is still free
    assert filled.get("water-2").derived_from == ("water",) and entry.old == "suppressed"
