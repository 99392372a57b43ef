"""Schema 8: a memory's worth counters live in a narrow ``counters`` table (issue 17).

A store filled by this memworth is copied into tables made by the schema 7 DDL (counters as
columns of ``memories``); opening the copy migrates it, and it then answers exactly as the
original does (memories with their counters bit for bit, logs, audit, replay), its
``memories`` rows no longer hold counters, the recorded-time index of the outcome log is
gone, and it goes on recording.
"""

from __future__ import annotations

import sqlite3
import threading
import time
import uuid
from pathlib import Path

import pytest

from memworth import HashingEncoder, MemoryStore
from memworth.store.backend import SCHEMA_VERSION
from memworth.store.sqlite import MIGRATIONS as SQLITE_MIGRATIONS
from tests.store.conftest import POSTGRES, with_query

TABLES = ("memories", "edges", "episodes", "episode_items", "outcomes", "audit", "verifications", "checkpoints")
"""The tables a version 7 store holds data in (besides meta and, on PostgreSQL, generations)."""
COUNTERS = ("success", "failure", "n", "updated")


def _fill(store: MemoryStore) -> None:
    """Memories in two namespaces whose counters are sums no short decimal writes exactly
    (confidence 0.3, heuristic outcomes), an erasure, a status change, a verification."""
    for ns in ("default", "tenant-b"):
        store.add("Water boils at 100 degrees Celsius at sea level.", id="water", namespace=ns)
        store.add("Prague is the capital of the Czech Republic.", id="prague", namespace=ns)
        store.add("Boiling water is at 100 C.", id="derived", namespace=ns, derived_from=["water"])
        store.add("A note to erase.", id="gone", namespace=ns)
        store.delete("gone", namespace=ns, reason="test")
    for i in range(7):
        store.record(store.recall("water boils", k=3, episode_id=f"a{i}"), i % 3 != 0, confidence=0.3)
        store.record(
            store.recall("capital city", k=2, namespace="tenant-b", episode_id=f"b{i}"), i % 2 == 0, source="heuristic"
        )
    store.verify(store.recall("capital", k=1, episode_id="checked"), True)
    store.govern(namespace="default")


def _same_answers(original: MemoryStore, migrated: MemoryStore) -> None:
    a, b = original.backend, migrated.backend
    assert b.get_meta("schema_version") == str(SCHEMA_VERSION) == "9"
    for ns in ("default", "tenant-b"):
        before, after = a.memories(ns), b.memories(ns)
        assert after == before and len(after) == 3
        assert [m.counts for m in after] == [m.counts for m in before]  # floats equal bit for bit
        assert any(m.counts.n > 0 for m in after)
        assert b.history(ns) == a.history(ns)
        assert b.audit_log(ns) == a.audit_log(ns)
    assert list(b.outcome_log()) == list(a.outcome_log())
    report = migrated.replay()
    assert report.consistent and report.outcomes == 15
    # It goes on working: new memories and outcomes land in the counters table.
    migrated.add("Rivers flow to the sea.", id="river", namespace="tenant-b")
    migrated.record(migrated.recall("rivers", k=1, namespace="tenant-b"), True)
    assert migrated.get("river", namespace="tenant-b").counts.n == 1
    assert migrated.replay().consistent


def test_a_version_7_sqlite_store_moves_its_counters_to_their_own_table(tmp_path: Path) -> None:
    source, old = tmp_path / "now.db", tmp_path / "v7.db"
    original = MemoryStore.open(f"sqlite:///{source}", encoder=HashingEncoder(), exploration=0.0, seed=3)
    _fill(original)
    db = sqlite3.connect(old, isolation_level=None)
    for version in range(1, 8):
        db.executescript(SQLITE_MIGRATIONS[version])
    assert {c[1] for c in db.execute("PRAGMA table_info(memories)")} >= set(COUNTERS)
    db.execute("ATTACH DATABASE ? AS now", (str(source),))
    for table in TABLES:
        columns = ", ".join(c[1] for c in db.execute(f"PRAGMA main.table_info({table})"))
        rows = f"now.{table}"
        if table == "memories":  # version 7 keeps the counters in the memory's row
            rows = "(SELECT m.*, c.success, c.failure, c.n, c.updated FROM now.memories m JOIN now.counters c"
            rows += " ON c.namespace = m.namespace AND c.id = m.id)"
        db.execute(f"INSERT INTO main.{table} ({columns}) SELECT {columns} FROM {rows}")
    db.execute("INSERT INTO main.meta SELECT * FROM now.meta WHERE key != 'schema_version'")
    db.execute("INSERT INTO main.meta VALUES ('schema_version', '7')")
    db.execute("DETACH DATABASE now")
    db.close()
    migrated = MemoryStore.open(f"sqlite:///{old}", encoder=HashingEncoder(), exploration=0.0, seed=3)
    try:
        _same_answers(original, migrated)
        raw = sqlite3.connect(old)
        assert not {c[1] for c in raw.execute("PRAGMA table_info(memories)")} & set(COUNTERS)
        indexes = {r[0] for r in raw.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
        assert "outcomes_by_time" not in indexes and "outcomes_by_source" in indexes
        assert raw.execute("SELECT count(*) FROM counters").fetchone()[0] == 7
        raw.close()
    finally:
        migrated.close()
        original.close()


psycopg = pytest.importorskip("psycopg")

from tests.store.test_shardable_schema import _columns, _copy_as_old, _old_schema  # noqa: E402


def test_a_version_7_postgres_store_moves_its_counters_to_their_own_table(schemas: list[str]) -> None:
    source, old = (f"t_{uuid.uuid4().hex[:16]}" for _ in range(2))
    schemas += [source, old]
    original = MemoryStore.open(
        with_query(POSTGRES, schema=source, pool_size="2"), encoder=HashingEncoder(), exploration=0.0, seed=3
    )
    _fill(original)
    with psycopg.connect(POSTGRES, autocommit=True) as conn:
        _old_schema(conn, old, 7)
        assert set(COUNTERS) <= set(_columns(conn, old, "memories"))
        _copy_as_old(conn, source, old, [*TABLES, "generations"])
        conn.execute("INSERT INTO meta VALUES ('schema_version', '7')")
    migrated = MemoryStore.open(with_query(POSTGRES, schema=old, pool_size="2"), encoder=HashingEncoder(), seed=3)
    try:
        _same_answers(original, migrated)
        with psycopg.connect(POSTGRES) as conn:
            assert not set(COUNTERS) & set(_columns(conn, old, "memories"))
            indexes = {
                r[0] for r in conn.execute("SELECT indexname FROM pg_indexes WHERE schemaname = %s", (old,)).fetchall()
            }
            assert "outcomes_by_time" not in indexes and "outcomes_by_source" in indexes
            assert conn.execute(f'SELECT count(*) FROM "{old}".counters').fetchone()[0] == 7
    finally:
        migrated.close()
        original.close()


def test_a_memory_a_version_7_writer_commits_during_the_postgres_migration_keeps_its_counters(
    schemas: list[str],
) -> None:
    """A process still running schema-7 code (a rolling upgrade) may commit a memory while
    another opens the store and migrates it. The migration must copy that memory's counters
    too: a memory with no counters row is missing from every read (they join the two)."""
    old = f"t_{uuid.uuid4().hex[:16]}"
    schemas.append(old)
    with psycopg.connect(POSTGRES, autocommit=True) as conn:
        _old_schema(conn, old, 7)
        conn.execute("INSERT INTO meta VALUES ('schema_version', '7')")
    writer = psycopg.connect(POSTGRES)  # the schema-7 process: its insert waits to commit
    writer.execute(f'SET search_path TO "{old}"')
    writer.execute(
        "INSERT INTO memories (namespace, id, text, metadata, contexts, status, created, updated, success, failure, n,"
        " embedding) VALUES ('default', 'late', 'added by the old code', '{}', '[]', 'active', 1.0, 2.0, 3.0, 1.0,"
        " 4.0, '')"
    )
    opened: list[MemoryStore] = []
    failed: list[BaseException] = []

    def migrate() -> None:
        try:
            opened.append(MemoryStore.open(with_query(POSTGRES, schema=old, pool_size="2"), encoder=HashingEncoder()))
        except BaseException as exc:  # reported below
            failed.append(exc)

    thread = threading.Thread(target=migrate)
    thread.start()
    try:
        with psycopg.connect(POSTGRES, autocommit=True) as watch:  # the migration waits for the writer's lock
            for _ in range(300):
                waiting = watch.execute(
                    "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation"
                    " JOIN pg_namespace s ON s.oid = c.relnamespace"
                    " WHERE NOT l.granted AND c.relname = 'memories' AND s.nspname = %s",
                    (old,),
                ).fetchone()[0]
                if waiting:
                    break
                time.sleep(0.05)
            assert waiting, "the migration never waited for the schema-7 writer"
        writer.commit()
    finally:
        writer.close()
        thread.join(60)
    assert not failed, failed
    (store,) = opened
    try:
        late = store.get("late")
        assert (late.counts.success, late.counts.failure, late.counts.n, late.updated) == (3.0, 1.0, 4.0, 2.0)
        assert [m.id for m in store.list()] == ["late"]
    finally:
        store.close()
