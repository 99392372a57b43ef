"""Issue 15 item 5: PostgreSQL schema 7 is ready to shard by namespace (docs/scaling.md).

Every table that grows with use carries the namespace and every unique key includes it
(Citus refuses a distributed table's unique key without its distribution column), the
generation counter is a row per namespace, and a store made under schema 6 (the old DDL,
``MIGRATIONS[1..6]``) migrates with its data, counters and replay intact.
"""

from __future__ import annotations

import uuid

import pytest

from memworth import HashingEncoder, MemoryStore
from memworth.errors import DuplicateError, ValidationError
from memworth.store.backend import SCHEMA_VERSION
from memworth.store.postgres import MIGRATIONS
from tests.store.conftest import POSTGRES, drop, with_query

psycopg = pytest.importorskip("psycopg")

SHARDED = ("memories", "counters", "edges", "episodes", "episode_items", "outcomes", "audit", "verifications", "checkpoints")
"""The tables distributed by namespace (docs/scaling.md); ``meta`` is a reference table."""


def _unique_keys(schema: str) -> dict[str, list[list[str]]]:
    """Each table's primary and unique keys, as column lists."""
    with psycopg.connect(POSTGRES) as conn:
        rows = conn.execute(
            "SELECT t.relname, array_agg(a.attname ORDER BY a.attname) FROM pg_constraint c"
            " JOIN pg_class t ON t.oid = c.conrelid JOIN pg_namespace n ON n.oid = t.relnamespace"
            " JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = ANY(c.conkey)"
            " WHERE n.nspname = %s AND c.contype IN ('p', 'u') GROUP BY t.relname, c.oid",
            (schema,),
        ).fetchall()
    keys: dict[str, list[list[str]]] = {}
    for table, columns in rows:
        keys.setdefault(table, []).append(list(columns))
    return keys


def _columns(conn: psycopg.Connection, schema: str, table: str) -> list[str]:
    rows = conn.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_schema = %s AND table_name = %s"
        " ORDER BY ordinal_position",
        (schema, table),
    ).fetchall()
    return [r[0] for r in rows]


def _old_schema(conn: psycopg.Connection, schema: str, version: int) -> None:
    """Make ``schema`` with the DDL of schema ``version`` (its migrations 1 to ``version``),
    as an older memworth made it, and leave ``conn`` working in it."""
    conn.execute(f'CREATE SCHEMA "{schema}"')
    conn.execute(f'SET search_path TO "{schema}"')
    conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    for v in range(1, version + 1):
        for statement in MIGRATIONS[v]:
            conn.execute(statement)


def _copy_as_old(conn: psycopg.Connection, source: str, old: str, tables: list[str]) -> None:
    """Copy a current store's rows (schema ``source``) into the older tables of schema ``old``
    (made by :func:`_old_schema`): the counters back into the memory's row, as versions
    before 8 kept them; the meta rows but the version (the caller writes it); the sequences
    go on where they were."""
    for table in tables:
        columns = ", ".join(c for c in _columns(conn, old, table) if c != "vec")
        rows = f'"{source}".{table}'
        if table == "memories":
            rows = f'(SELECT m.*, c.success, c.failure, c.n, c.updated FROM {rows} m JOIN "{source}".counters c'
            rows += " ON c.namespace = m.namespace AND c.id = m.id) AS m"
        conn.execute(f'INSERT INTO "{old}".{table} ({columns}) SELECT {columns} FROM {rows}')
    conn.execute(f'INSERT INTO "{old}".meta SELECT * FROM "{source}".meta WHERE key != %s', ("schema_version",))
    for table in ("memories", "outcomes", "audit", "verifications"):
        conn.execute(f"SELECT setval(pg_get_serial_sequence('{table}', 'seq'), (SELECT max(seq) FROM {table}))")


def _fresh(schemas: list[str]) -> str:
    """The URL of a new PostgreSQL schema (dropped after the test by the ``schemas`` fixture)."""
    schema = f"t_{uuid.uuid4().hex[:16]}"
    schemas.append(schema)
    return with_query(POSTGRES, schema=schema, pool_size="2")


def _fill(store: MemoryStore) -> None:
    """Two namespaces with memories, a derived one, recalls with and without outcomes, a
    verification, a status change and an erasure: a row in every table."""
    for ns in ("default", "tenant-b"):
        store.add("Water boils at 100 degrees Celsius at sea level.", id="water", namespace=ns)
        store.add("Prague is the capital of the Czech Republic.", id="prague", namespace=ns)
        store.add("Boiling water is at 100 C.", id="derived", namespace=ns, derived_from=["water"])
        store.add("A note to erase.", id="gone", namespace=ns)
        store.delete("gone", namespace=ns, reason="test")
    for i in range(6):
        store.record(store.recall("water boils", k=2, episode_id=f"a{i}"), i % 3 != 0)
        store.record(store.recall("capital city", k=2, namespace="tenant-b", episode_id=f"b{i}"), i % 2 == 0)
    store.recall("water", k=1, episode_id="open")  # logged, no outcome
    store.verify(store.recall("capital", k=1, episode_id="checked"), True)
    store.govern(namespace="default")


def test_a_new_postgres_store_keeps_the_namespace_in_every_unique_key(schemas: list[str]) -> None:
    store = MemoryStore.open(_fresh(schemas), encoder=HashingEncoder())
    try:
        keys = _unique_keys(schemas[-1])
        for table in SHARDED:
            assert keys.get(table), f"{table} has no primary key"
            for columns in keys[table]:
                assert "namespace" in columns, f"{table}'s unique key {columns} lacks the distribution column"
        assert keys["generations"] == [["namespace"]]
        assert store.backend.get_meta("generation") is None  # one answer: the rows of generations
    finally:
        store.close()


def test_namespaces_count_their_own_generations(schemas: list[str]) -> None:
    store = MemoryStore.open(_fresh(schemas), encoder=HashingEncoder())
    try:
        backend = store.backend
        assert backend.generation("default") == backend.generation() == 0
        store.add("a note", id="a")
        store.add("another note", id="b", namespace="other")
        before = backend.generation("default")
        store.add_many([{"text": "two", "id": "c"}, {"text": "three", "id": "d"}], namespace="other")
        store.set_status("b", "deprecated", reason="test", namespace="other")
        assert backend.generation("default") == before  # the other namespace's writes leave it alone
        assert backend.generation("other") == 3
        assert backend.generation() == backend.generation("default") + backend.generation("other")
        store.delete("a", reason="test")
        assert backend.generation("default") == before + 1
    finally:
        store.close()


def test_an_episode_id_is_unique_within_its_namespace(schemas: list[str]) -> None:
    store = MemoryStore.open(_fresh(schemas), encoder=HashingEncoder(), exploration=0.0)
    try:
        for ns in ("default", "tenant-b"):
            store.add("Water boils at 100 degrees Celsius.", id="water", namespace=ns)
        store.recall("water", k=1, episode_id="same")
        store.recall("water", k=1, namespace="tenant-b", episode_id="same")  # another namespace's key
        with pytest.raises(DuplicateError, match="same"):
            store.recall("water", k=1, episode_id="same")
        with pytest.raises(ValidationError, match="namespace") as named:
            store.record("same", True)  # which one? the caller must say
        assert named.value.field == "namespace"
        store.record("same", True, namespace="tenant-b")
        assert store.get("water", namespace="tenant-b").counts.n == 1
        assert store.get("water").counts.n == 0
        with pytest.raises(DuplicateError, match="same"):
            store.record("same", False, namespace="tenant-b")
        store.record("same", False, namespace="default")
        assert store.replay().consistent  # the log's episodes are read per namespace
    finally:
        store.close()


def test_a_version_6_postgres_store_migrates_to_shardable_keys(schemas: list[str]) -> None:
    """A store filled by this memworth is copied into tables made by the old DDL (schema 6,
    its generation in ``meta``); opening that copy migrates it, and it then answers as the
    original does: memories, counters, logs, histories, replay and audit."""
    source, old = (f"t_{uuid.uuid4().hex[:16]}" for _ in range(2))
    schemas += [source, old]
    original = MemoryStore.open(
        with_query(POSTGRES, schema=source, pool_size="2"), encoder=HashingEncoder(), exploration=0.0, seed=3
    )
    _fill(original)
    with psycopg.connect(POSTGRES, autocommit=True) as conn:
        _old_schema(conn, old, 6)
        assert "namespace" not in _columns(conn, old, "episode_items")
        _copy_as_old(conn, source, old, [t for t in SHARDED if t != "counters"])  # 6 keeps counters in memories
        conn.execute("INSERT INTO meta VALUES ('schema_version', '6'), ('generation', '41')")
    migrated = MemoryStore.open(with_query(POSTGRES, schema=old, pool_size="2"), encoder=HashingEncoder(), seed=3)
    try:
        a, b = original.backend, migrated.backend
        assert b.get_meta("schema_version") == str(SCHEMA_VERSION) == "9"
        for ns in ("default", "tenant-b"):
            assert b.memories(ns) == a.memories(ns)
            assert b.history(ns) == a.history(ns)
            assert b.audit_log(ns) == a.audit_log(ns)
            assert b.generation(ns) == 41  # seeded with the old counter: no cached number goes back
        assert list(b.outcome_log()) == list(a.outcome_log())
        assert b.verifications() == a.verifications()
        ids = ["a0", "b3", "open", "checked"]
        assert b.episodes(ids) == a.episodes(ids)
        assert b.episodes(["b3"], namespace="tenant-b") == a.episodes(["b3"], namespace="tenant-b")
        assert b.episodes(["b3"], namespace="default") == {}
        report = migrated.replay()
        assert report.consistent and report.outcomes == len(list(a.outcome_log())) == 13
        for table, columns in _unique_keys(old).items():
            if table != "meta":
                assert all("namespace" in c for c in columns), (table, columns)
        # It goes on working: new memories, recalls and outcomes in both namespaces.
        migrated.add("Rivers flow to the sea.", id="river", namespace="tenant-b")
        assert b.generation("tenant-b") == 42 and b.generation("default") == 41
        migrated.record(migrated.recall("rivers", k=1, namespace="tenant-b"), True)
        migrated.record(migrated.recall("water boils", k=1), False)
        assert migrated.get("river", namespace="tenant-b").counts.n == 1
        assert migrated.replay().consistent
        with pytest.raises(DuplicateError, match="a0"):
            migrated.record("a0", True)
        again = MemoryStore.open(with_query(POSTGRES, schema=old, pool_size="2"))  # nothing left to do
        assert again.backend.get_meta("schema_version") == "9"
        again.close()
    finally:
        migrated.close()
        drop(original)


def test_a_used_record_reweighs_only_its_own_namespaces_episode(schemas: list[str]) -> None:
    """``record(..., used=...)`` rewrites the episode's logged weights: on schema 7 an episode id
    names one episode per namespace, so the rewrite must not touch the other namespace's."""
    store = MemoryStore.open(_fresh(schemas), encoder=HashingEncoder(), exploration=0.0)
    try:
        for ns in ("default", "tenant-b"):
            store.add("Water boils at 100 degrees Celsius.", id="water", namespace=ns)
            store.add("Water freezes at 0 degrees Celsius.", id="ice", namespace=ns)
        mine = store.recall("water", k=2, episode_id="same")
        store.recall("water", k=2, namespace="tenant-b", episode_id="same")
        store.record(mine, True, used=["water"])
        store.record("same", False, namespace="tenant-b")  # full credit: both of its memories
        for m in ("water", "ice"):
            assert store.get(m, namespace="tenant-b").counts.failure == pytest.approx(0.5)
        weights = {
            ns: sorted(it.weight for it in store.backend.episodes(["same"], namespace=ns)["same"].items)
            for ns in ("default", "tenant-b")
        }
        assert weights == {"default": [0.0, 1.0], "tenant-b": [0.5, 0.5]}
        assert store.replay().consistent
    finally:
        store.close()


def test_a_rate_limited_record_reads_only_its_own_namespaces_outcomes(schemas: list[str]) -> None:
    """A source's limits are counted per namespace: an episode id another namespace logged too
    (schema 7) must neither refuse nor count towards this namespace's records (it refused every
    limited record once two namespaces shared an id: found in review)."""
    from memworth.signals.sources import SourceLimit

    store = MemoryStore.open(
        _fresh(schemas),
        encoder=HashingEncoder(),
        exploration=0.0,
        limits={"heuristic": SourceLimit(max_per_memory=1)},
    )
    try:
        store.add("Prague is the capital of Czechia", id="p", namespace="a")
        store.add("Prague is the capital of Czechia", id="p", namespace="b")
        store.record(store.recall("capital", k=1, namespace="a", episode_id="task-1"), True, source="heuristic")
        in_b = store.recall("capital", k=1, namespace="b", episode_id="task-1")
        store.record(in_b, True, source="heuristic")  # b's memory p has no heuristic outcome yet
        assert store.get("p", namespace="b").counts.success > 0
        with pytest.raises(Exception, match="nothing recorded"):  # and now it has one: the quota holds in b
            store.record(store.recall("capital", k=1, namespace="b", episode_id="task-2"), True, source="heuristic")
    finally:
        store.close()


def test_an_imported_log_keeps_each_outcome_in_its_episodes_namespace(schemas: list[str], tmp_path: object) -> None:
    """``memworth import`` appended outcomes without their namespace: on schema 7 an outcome in
    namespace '' escaped the (namespace, episode_id) key, so the episode took a second outcome and
    replay could not find its episode (found in review). Imported outcomes now name their
    namespace, and the backend refuses one that names none."""
    pytest.importorskip("duckdb")
    from memworth.logs import ScoreSettings
    from memworth.logs.state import Counting
    from memworth.logs.store_io import export_log, import_log
    from memworth.store.records import OutcomeRow

    src = MemoryStore.open(f"sqlite:///{tmp_path}/s.db", encoder=HashingEncoder(), exploration=0.0)
    src.add("Prague is the capital of Czechia", id="p")
    src.record(src.recall("capital", k=1, episode_id="t1"), True)
    export_log(src.backend, f"{tmp_path}/log.parquet", "parquet")
    src.close()
    pg = MemoryStore.open(_fresh(schemas), encoder=HashingEncoder())
    try:
        import_log(pg.backend, [f"{tmp_path}/log.parquet"], ScoreSettings(Counting("given")))
        assert [(o.namespace, o.episode_id) for o in pg.backend.outcome_log()] == [("default", "t1")]
        with pytest.raises(DuplicateError, match="t1"):
            pg.record("t1", True, namespace="default")
        assert pg.get("p").counts.n == 1 and pg.replay().consistent
        with pytest.raises(ValidationError, match="names no namespace") as refused:
            pg.backend.append_outcomes([OutcomeRow("t1", True, "explicit", 1.0, 0.0)], [])
        assert refused.value.field == "namespace"
    finally:
        pg.close()


def test_the_sidecar_records_an_id_two_namespaces_logged_by_naming_its_namespace(schemas: list[str]) -> None:
    """``Sidecar.record`` takes ``namespace=`` (and the adapters pass theirs): by bare id alone,
    an episode id two namespaces logged cannot be told apart on PostgreSQL."""
    from memworth import Sidecar

    sidecar = Sidecar.open(_fresh(schemas), encoder=HashingEncoder(), exploration=0.0)
    try:
        for ns in ("a", "b"):  # the same database's store logs one id in two namespaces
            sidecar.store.add("a document about water", id="doc", namespace=ns)
            sidecar.store.recall("water", k=1, namespace=ns, episode_id="same")
        with pytest.raises(ValidationError, match="namespace"):
            sidecar.record("same", True)
        sidecar.record("same", False, namespace="b")
        assert sidecar.store.get("doc", namespace="b").counts.failure == 1.0
        assert sidecar.store.get("doc", namespace="a").counts.n == 0
    finally:
        sidecar.close()
