"""memworth.aio on PostgreSQL awaits the database natively (psycopg's async pool): the same
answers as the sync store bit for bit, one call at a time per store object, and a write cut
short by cancellation is whole or absent."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from memworth import HashingEncoder, MemoryStore
from memworth.aio import AsyncMemoryStore
from memworth.errors import ValidationError
from memworth.store.postgres import PostgresBackend
from tests.store.conftest import NO_DISK_WAIT, POSTGRES, with_query
from tests.test_aio import NOW, same, script


def clock() -> float:
    return NOW


SCHEMAS: list[str] = []


def pg_url() -> str:
    schema = f"t_{uuid.uuid4().hex[:16]}"
    SCHEMAS.append(schema)
    return with_query(POSTGRES, schema=schema, pool_size="3", options=NO_DISK_WAIT)


@pytest.fixture
def opened() -> Iterator[list[MemoryStore]]:
    """Store objects a test opened: closed after it, and every schema it made dropped."""
    stores: list[MemoryStore] = []
    yield stores
    for store in stores:
        try:
            store.close()
        except Exception:  # closed by the test already
            pass
    with psycopg.connect(POSTGRES, autocommit=True) as conn:
        while SCHEMAS:
            conn.execute(f'DROP SCHEMA IF EXISTS "{SCHEMAS.pop()}" CASCADE')


def hot_path() -> list[tuple[str, tuple[Any, ...], dict[str, Any]]]:
    """Only the calls an async store makes natively, with the ids and episodes fixed."""
    texts = [f"note {i} on subject {i % 5}, with detail {i * 7 % 11}" for i in range(40)]
    calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = [
        ("add", (texts[0],), {"id": "m0", "metadata": {"kind": "first"}, "contexts": ["a"]}),
        ("add_many", ([{"text": t, "id": f"m{i}"} for i, t in enumerate(texts) if i],), {}),
        ("add", ("derived from the first note",), {"id": "d0", "derived_from": ["m0"], "ttl": 3600.0}),
        ("get", ("m3",), {}),
        ("list", (), {"context": "a"}),
    ]
    for i in range(60):
        calls.append(("recall", (f"subject {i % 5} detail {i % 11}", 3), {"episode_id": f"e{i}"}))
        if i % 6 == 5:
            batch = [(f"e{j}", j % 3 != 0) for j in range(i - 5, i + 1)]
            calls.append(("record_many", (batch,), {"source": "implicit"}))
    calls += [
        ("recall", ("subject 2", 4), {"episode_id": "w0", "where": {"status": "active"}}),
        ("record", ("w0", False), {"confidence": 0.5}),
        ("report", ("m0",), {}),
        ("reports", (["m1", "m2", "d0"],), {}),
        ("list", (), {}),
    ]
    return calls


def test_the_native_store_answers_as_the_sync_store_bit_for_bit(opened: list[MemoryStore]) -> None:
    sync = MemoryStore.open(pg_url(), encoder=HashingEncoder(), seed=3, clock=clock, propagation=0.5)
    opened.append(sync)
    url = pg_url()

    async def run_all() -> tuple[list[Any], list[Any], Any]:
        asynced = await AsyncMemoryStore.open(url, encoder=HashingEncoder(), seed=3, clock=clock, propagation=0.5)
        opened.extend(asynced._targets)
        assert asynced.native
        answers = [await getattr(asynced, name)(*args, **kwargs) for name, args, kwargs in hot_path()]
        log = list(asynced.store.backend.outcome_log())
        return answers, log, await asynced.replay()

    answers, log, replay = asyncio.run(run_all())
    for (name, args, kwargs), answer in zip(hot_path(), answers, strict=True):
        expected = getattr(sync, name)(*args, **kwargs)
        if name == "recall":  # diagnostics carry the time each stage took
            expected, answer = (expected.episode, expected.results), (answer.episode, answer.results)
        assert same(answer, expected), (name, args, answer, expected)
    # the counters (compared as floats, exactly), the outcome log and the replay
    assert [(m.id, m.counts) for m in answers[-1]] == [(m.id, m.counts) for m in sync.list()]
    assert log == list(sync.backend.outcome_log())
    assert len(log) == 61
    expected_replay = sync.replay()
    assert replay.consistent and expected_replay.consistent
    assert same(replay, expected_replay)


def test_every_twin_answers_as_the_sync_method_on_a_native_store(opened: list[MemoryStore], tmp_path: Path) -> None:
    """The whole script of tests/test_aio.py: native steps and the calls left on the thread, mixed."""
    sync = MemoryStore.open(pg_url(), encoder=HashingEncoder(), seed=3, clock=clock)
    opened.append(sync)
    url = pg_url()

    async def run_all() -> list[Any]:
        asynced = await AsyncMemoryStore.open(url, encoder=HashingEncoder(), seed=3, clock=clock)
        opened.extend(asynced._targets)
        return [await getattr(asynced, name)(*args, **kwargs) for name, args, kwargs in script()]

    answers = asyncio.run(run_all())
    for (name, args, kwargs), answer in zip(script(), answers, strict=True):
        expected = getattr(sync, name)(*args, **kwargs)
        if name == "recall":
            expected, answer = (expected.episode, expected.results), (answer.episode, answer.results)
        assert same(answer, expected), (name, args, answer, expected)


def test_native_is_chosen_on_postgresql_only(tmp_path: Path, opened: list[MemoryStore]) -> None:
    async def run() -> tuple[bool, bool, bool, Any]:
        on_pg = await AsyncMemoryStore.open(pg_url(), encoder=HashingEncoder())
        opened.extend(on_pg._targets)
        threaded = await AsyncMemoryStore.open(pg_url(), encoder=HashingEncoder(), native=False)
        opened.extend(threaded._targets)
        on_sqlite = await AsyncMemoryStore.open(f"sqlite:///{tmp_path}/s.db", encoder=HashingEncoder())
        pool = on_pg._pool
        await on_pg.aclose()
        await threaded.aclose()
        await on_sqlite.aclose()
        return on_pg.native, threaded.native, on_sqlite.native, pool

    native, threaded, sqlite, pool = asyncio.run(run())
    assert (native, threaded, sqlite) == (True, False, False)
    assert pool.closed  # aclose closed the async pool too
    for url in (f"sqlite:///{tmp_path}/x.db", "memory://"):
        with pytest.raises(ValidationError) as err:
            asyncio.run(AsyncMemoryStore.open(url, native=True))
        assert err.value.field == "native" and "PostgreSQL" in err.value.reason
    with pytest.raises(ValidationError) as err:
        asyncio.run(AsyncMemoryStore.open(pg_url(), native="yes"))  # type: ignore[arg-type]
    assert err.value.field == "native"


def _lock_row(schema: str, sql: str, args: tuple[Any, ...]) -> psycopg.Connection[Any]:
    """A connection whose open transaction holds the row lock ``sql`` takes (``rollback()`` frees it)."""
    conn = psycopg.connect(POSTGRES)
    conn.execute(f'SET search_path TO "{schema}"')
    conn.execute(sql, args)
    return conn


async def _until_waiting(blocker: psycopg.Connection[Any], statement: str) -> None:
    """Until a statement like ``statement`` waits on a lock ``blocker`` holds."""

    def waiting() -> bool:
        with psycopg.connect(POSTGRES) as conn:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid)) AND query ILIKE %s",
                (blocker.info.backend_pid, statement),
            ).fetchone()
        return row is not None and row[0] > 0

    for _ in range(1000):
        if await asyncio.to_thread(waiting):
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the write never reached the database")


def test_a_cancelled_native_write_is_whole_or_absent(opened: list[MemoryStore]) -> None:
    url = pg_url()
    schema = SCHEMAS[-1]

    async def run() -> tuple[list[BaseException | None], list[str], Any, Any, int]:
        asynced = await AsyncMemoryStore.open(url, encoder=HashingEncoder(), clock=clock, exploration=0.0)
        opened.extend(asynced._targets)
        await asynced.add("the first note", id="a")
        recall = await asynced.recall("the first note", k=1)
        # Another client holds the generation row: the insert's transaction waits inside the database.
        blocker = await asyncio.to_thread(
            _lock_row, schema, "UPDATE generations SET value = value WHERE namespace = 'default'", ()
        )
        adding = asyncio.create_task(asynced.add("a second note", id="b"))
        await _until_waiting(blocker, "UPDATE generations SET value%")
        queued = asyncio.create_task(asynced.add("never made", id="never"))  # waits for its turn
        ticks = 0
        for _ in range(20):  # the event loop is free while the write waits on the database
            await asyncio.sleep(0)
            ticks += 1
        adding.cancel()
        queued.cancel()
        after = asyncio.create_task(asynced.get("b"))  # its turn comes once the cancelled write has ended
        # The counters' row lock, now: the record's transaction waits after it began.
        counters = await asyncio.to_thread(_lock_row, schema, "SELECT 1 FROM counters WHERE id = %s FOR UPDATE", ("a",))
        recording = asyncio.create_task(asynced.record(recall.episode, True))
        await asyncio.to_thread(blocker.rollback)
        await _until_waiting(counters, "%WITH inc AS%")
        recording.cancel()
        results = await asyncio.gather(adding, queued, recording, return_exceptions=True)
        assert (await after).text == "a second note"
        await asyncio.to_thread(counters.rollback)
        blocker.close()
        counters.close()
        ids = [m.id for m in await asynced.list()]  # in the store object's turn: after the cancelled calls ended
        a = await asynced.get("a")
        replay = await asynced.replay()
        logged = len(list(asynced.store.backend.outcome_log()))
        await asynced.aclose()
        return list(results), ids, a, replay, logged

    results, ids, a, replay, logged = asyncio.run(asyncio.wait_for(run(), 120))  # a turn never passed: fails
    assert all(isinstance(r, asyncio.CancelledError) for r in results)
    assert sorted(ids) == ["a", "b"]  # begun: made whole; not begun: never made
    assert a.counts.n == 1.0 and a.counts.success == 1.0 and logged == 1  # the record: counters and log, both
    assert replay.consistent


def test_a_native_pool_shares_one_async_connection_pool(opened: list[MemoryStore]) -> None:
    async def run() -> tuple[int, set[int], int]:
        asynced = await AsyncMemoryStore.open(pg_url(), encoder=HashingEncoder(), seed=1, workers=3)
        opened.extend(asynced._targets)
        await asynced.add_many([{"text": f"item {i}", "id": f"i{i}"} for i in range(12)])

        async def one(i: int) -> None:
            recall = await asynced.recall(f"item {i % 12}", k=2)
            await asynced.record(recall.episode, i % 2 == 0)

        await asyncio.gather(*(one(i) for i in range(30)))
        pools = {id(p.pool) for p in asynced._plans or []}
        n = sum(m.counts.n for m in await asynced.list())
        replay = await asynced.replay()
        await asynced.aclose()
        return len(asynced._targets), pools, int(n) if replay.consistent else -1

    objects, pools, n = asyncio.run(run())
    assert objects == 3 and len(pools) == 1
    assert n == 60  # 30 outcomes of 2 memories each, none lost


def test_the_backend_plans_are_what_the_sync_backend_makes(opened: list[MemoryStore]) -> None:
    """The sync backend's hot-path methods are its plans made on its sync pool (one query, two drivers)."""
    store = MemoryStore.open(pg_url(), encoder=HashingEncoder())
    opened.append(store)
    backend = store.backend
    assert isinstance(backend, PostgresBackend)
    names = [
        "get_meta",
        "generation",
        "memories",
        "candidates",
        "edges",
        "vectors",
        "search",
        "inactive",
        "insert_memories",
        "insert_episode",
        "episodes",
        "append_outcomes",
        "append_verifications",
        "outcomes_of",
        "outcomes_since",
        "verifications",
        "next_expiry",
        "erased",
    ]
    for name in names:
        assert callable(getattr(backend, "plan_" + name)), name


def test_a_native_sidecar_and_the_adapters_over_it_await_natively(opened: list[MemoryStore]) -> None:
    from langchain_core.documents import Document
    from langchain_core.embeddings import DeterministicFakeEmbedding
    from langchain_core.vectorstores import InMemoryVectorStore
    from langgraph.store.memory import InMemoryStore

    from memworth import Sidecar
    from memworth.adapters.langchain import GovernedRetriever
    from memworth.adapters.langgraph import GovernedStore
    from memworth.aio import AsyncSidecar

    sync = Sidecar.open(pg_url(), exploration=0.0, seed=1, clock=clock)
    opened.append(sync.store)
    url = pg_url()
    candidates = [("d1", 0.9), ("d2", 0.8), ("d3", 0.4)]

    async def run() -> tuple[Any, ...]:
        asidecar = await AsyncSidecar.open(url, exploration=0.0, seed=1, clock=clock)
        opened.append(asidecar.sidecar.store)
        picked = await asidecar.retrieve(candidates, 2)  # natively, as the retriever's ainvoke below
        await asidecar.record(picked.episode, False)  # natively
        docs = InMemoryVectorStore(DeterministicFakeEmbedding(size=16))
        await docs.aadd_documents([Document(page_content=t, id=t) for t in ["tea", "coffee", "water"]])
        retriever = GovernedRetriever.from_vectorstore(docs, asidecar.sidecar, k=2)
        found = await retriever.ainvoke("a hot drink")
        await retriever.areport(True, found[0])
        graph = GovernedStore(InMemoryStore(), asidecar.sidecar)
        await graph.aput(("notes",), "tea", {"text": "green tea at 80 C"})
        await graph.aput(("notes",), "coffee", {"text": "espresso at 93 C"})
        items = await graph.asearch(("notes",), limit=1)  # its first page picked natively
        await graph.areport(False, items[0])
        assert graph.async_sidecar.native and len(items) == 1
        assert (await asidecar.worth(items[0].memory_id)).counts.failure == 1.0
        answer = (
            asidecar.native,
            retriever.async_sidecar.native,  # the adapter's async face shares the native plans
            picked.ids,
            await asidecar.worth_many(["d1", "d2"]),
            (await asidecar.worth(found[0].metadata["memworth_id"])).counts,
            (await asidecar.replay()).consistent,
        )
        await asidecar.aclose()
        return answer

    native, adapter_native, ids, worths, counts, consistent = asyncio.run(run())
    picked = sync.retrieve(candidates, 2)
    sync.record(picked.episode, False)
    assert native and adapter_native and consistent
    assert ids == picked.ids
    assert same(worths, sync.worth_many(["d1", "d2"]))
    assert counts.success == 0.5 and counts.n == 1.0  # the adapter's report, credited (k=2: half each)
