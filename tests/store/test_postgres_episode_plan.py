"""How PostgreSQL plans a record's episode read (issue 17).

psycopg prepares a statement made five times; PostgreSQL then runs it with a plan made once
for any parameters (a generic plan) when that looks no dearer than planning each call. The
read of one episode must stay a primary-key probe in that plan (with ``e.id = ANY($3)`` the
generic plan of a store whose tables were not yet analysed scanned the namespace's episodes
and filtered the id: a cost that grew with the log), and PostgreSQL must keep that plan
instead of planning the read at every record once the tables are analysed.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from memworth import Episode, HashingEncoder, MemoryStore
from memworth.store.plans import Query
from tests.store.conftest import drop, url_for


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MemoryStore]:
    url = url_for("postgres", tmp_path).replace("pool_size=2", "pool_size=1")  # one connection to look at
    s = MemoryStore.open(url, encoder=HashingEncoder(), seed=0, exploration=0.0)
    s.add_many([{"id": f"m{i}", "text": f"fact number {i} about python lists"} for i in range(8)])
    yield s
    drop(s)


def episodes(store: MemoryStore, n: int) -> list[Episode]:
    return [store.recall(f"python lists question {i}", k=3).episode for i in range(n)]


def read_sql(store: MemoryStore, episode: Episode) -> Query:
    step = next(store.backend.plan_episodes_at([episode.id], episode.namespace).steps)  # type: ignore[attr-defined]
    assert isinstance(step, Query)
    return step


def test_the_generic_plan_of_one_episode_read_probes_the_key_on_unanalysed_tables(store: MemoryStore) -> None:
    made = episodes(store, 60)  # fresh tables: no statistics yet
    query = read_sql(store, made[30])
    numbered = iter(range(1, 10))
    sql = re.sub(r"%s", lambda _: f"${next(numbered)}", query.sql)
    pool = store.backend._pool  # type: ignore[attr-defined]
    with pool.connection() as conn:
        conn.execute("SET plan_cache_mode = force_generic_plan")
        try:
            conn.execute("PREPARE one_episode AS " + sql)
            cur = psycopg.ClientCursor(conn)
            args = ", ".join(["%s"] * len(query.params))
            plan = [r[0] for r in cur.execute(f"EXPLAIN (ANALYZE, COSTS OFF) EXECUTE one_episode({args})", query.params)]
            conn.execute("DEALLOCATE one_episode")
        finally:
            conn.execute("RESET plan_cache_mode")
            conn.commit()
    text = "\n".join(plan)
    assert "Rows Removed by Filter" not in text, text  # no episode but the one asked for is read
    scan = next(i for i, line in enumerate(plan) if " on episodes e" in line)
    assert "Index" in plan[scan] and "id = $3" in plan[scan + 1], text
    # and the read answers that episode
    known, _ = store.backend.episodes_at([made[30].id], made[30].namespace)
    assert list(known) == [made[30].id] and known[made[30].id].items == made[30].items


def test_records_on_analysed_tables_reuse_one_plan_of_the_episode_read(store: MemoryStore) -> None:
    # before: PostgreSQL judged a generic plan for "any number of ids" ten times dearer than
    # one planned for the one id, and planned the read at every record
    made = episodes(store, 20)
    pool = store.backend._pool  # type: ignore[attr-defined]
    with pool.connection() as conn:  # a log of some size (other episodes), with statistics
        conn.execute(
            "INSERT INTO episodes (id, namespace, query, context, created)"
            " SELECT 'filler-' || g, 'default', 'q', NULL, 0 FROM generate_series(1, 3000) g"
        )
        conn.execute("ANALYZE")
        conn.commit()
    for ep in made:
        store.record(ep.id, True, namespace=ep.namespace)  # by id: read (a held episode is not: test_record_held.py)
    with pool.connection() as conn:
        rows = conn.execute(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement LIKE 'SELECT g.value%'"
        ).fetchall()
        conn.commit()
    assert len(rows) == 1
    generic, custom = rows[0]
    # psycopg prepares the read at its fifth call; PostgreSQL plans it five times to compare, then keeps one plan
    assert custom <= 5 and generic >= len(made) - 10, (generic, custom)
    assert store.replay().consistent


@pytest.mark.parametrize("analysed", [True, False])
def test_held_records_reuse_one_plan_of_the_checked_write(store: MemoryStore, analysed: bool) -> None:
    """A held episode is checked by the write (``_RECORD_GIVEN_ONE``: a primary-key probe of its
    items): that statement too is planned once and kept, with a log of some size, analysed or
    not (with the episode named by arrays, PostgreSQL planned it at every record)."""
    made = episodes(store, 20)
    pool = store.backend._pool  # type: ignore[attr-defined]
    with pool.connection() as conn:
        conn.execute(
            "INSERT INTO episodes (id, namespace, query, context, created)"
            " SELECT 'filler-' || g, 'default', 'q', NULL, 0 FROM generate_series(1, 3000) g"
        )
        conn.execute(
            "INSERT INTO episode_items (namespace, episode_id, position, memory_id, weight, propensity)"
            " SELECT 'default', 'filler-' || g, p, 'm0', 1.0, 1.0 FROM generate_series(1, 3000) g, generate_series(0, 3) p"
        )
        if analysed:
            conn.execute("ANALYZE")
        conn.commit()
    store.record(made[0], True)  # the provenance read and cached: the others are held
    for ep in made[1:]:
        store.record(ep, True)
    with pool.connection() as conn:
        rows = conn.execute(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement LIKE '%held AS (%'"
        ).fetchall()
        plan = "\n".join(
            r[0]
            for r in conn.execute(
                "EXPLAIN (COSTS OFF) SELECT 1 FROM episode_items i WHERE i.namespace = 'default'"
                " AND i.episode_id = 'filler-7' AND i.position = 2"
            ).fetchall()
        )
        conn.commit()
    assert len(rows) == 1 and "Index" in plan, (rows, plan)
    generic, custom = rows[0]
    assert custom <= 5 and generic >= len(made) - 11, (generic, custom)
    assert not any(conn_read.startswith("SELECT g.value") for conn_read in prepared(store))
    assert store.replay().consistent


def prepared(store: MemoryStore) -> list[str]:
    """The statements the store's one connection has prepared."""
    with store.backend._pool.connection() as conn:  # type: ignore[attr-defined]
        found = [str(r[0]) for r in conn.execute("SELECT statement FROM pg_prepared_statements").fetchall()]
        conn.commit()
    return found
