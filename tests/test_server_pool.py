"""The HTTP server on a pool of store objects (issue 17): tenants' calls run at once, answers
stay what one store object gives, settings reach every object, errors keep their statuses."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from memworth import HashingEncoder, MemoryStore
from memworth.errors import ValidationError
from memworth.server.app import create_app
from memworth.server.keys import create_key
from memworth.server.pool import StorePool

TOPICS = ["python lists", "git branches", "sql joins", "http caching", "unit tests", "docker images"]


def _store(tmp_path: Path, name: str) -> MemoryStore:
    store = MemoryStore.open(f"sqlite:///{tmp_path / name}", encoder=HashingEncoder(), seed=0, exploration=0.0)
    for ns in ("a", "b"):
        store.add_many([{"id": f"m{i}", "text": f"notes about {t}"} for i, t in enumerate(TOPICS)], namespace=ns)
    return store


def _script(tenant: str) -> list[tuple[str, bool]]:
    """A tenant's recalls (query, outcome): the same on every run, different per tenant."""
    shift = 1 if tenant == "a" else 4
    return [(f"{TOPICS[(i * shift) % len(TOPICS)]} question {i}", (i + shift) % 3 != 0) for i in range(12)]


async def _tenant(client: httpx.AsyncClient, key: str, tenant: str, long_calls: bool) -> None:
    h = {"Authorization": f"Bearer {key}"}
    for i, (query, ok) in enumerate(_script(tenant)):
        r = await client.post("/v1/recall", json={"query": query, "k": 2}, headers=h)
        assert r.status_code == 200, r.text
        done = await client.post(
            f"/v1/episodes/{r.json()['episode']}/outcome", json={"outcome": "success" if ok else "failure"}, headers=h
        )
        assert done.status_code == 200, done.text
        if long_calls and i % 4 == 0:
            assert (await client.post("/v1/govern", json={"apply": False}, headers=h)).status_code == 200
            assert (await client.get("/v1/replay", headers=h)).json()["consistent"] is True


async def _run(app: Any, keys: dict[str, str], together: bool) -> None:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        if together:
            await asyncio.gather(_tenant(client, keys["a"], "a", True), _tenant(client, keys["b"], "b", False))
        else:
            await _tenant(client, keys["a"], "a", True)
            await _tenant(client, keys["b"], "b", False)


def _counters(store: MemoryStore) -> dict[str, list[tuple[str, float, float, float]]]:
    return {
        ns: [(m.id, m.counts.success, m.counts.failure, m.counts.n) for m in store.list(namespace=ns)]
        for ns in ("a", "b")
    }


def test_two_tenants_at_once_on_a_pool_get_what_they_get_one_after_the_other(tmp_path: Path) -> None:
    results = {}
    for together, workers in ((False, 1), (True, 3)):
        store = _store(tmp_path, f"run-{workers}.db")
        keys = {ns: create_key(store, ns, "agent") for ns in ("a", "b")}
        app = create_app(store, workers=workers)
        assert app.state.pool.workers == workers
        asyncio.run(_run(app, keys, together))
        app.state.pool.close()
        assert store.replay().consistent  # every counter equals the log's, bit for bit
        results[workers] = _counters(store)
        store.close()
    assert results[3] == results[1]
    assert sum(n for *_, n in results[3]["a"]) == 2 * 12  # k=2, 12 recalls: nothing lost, nothing twice


def test_a_tenant_held_on_one_object_leaves_the_others_free(tmp_path: Path) -> None:
    store = _store(tmp_path, "held.db")
    pool = StorePool(store, 2)
    held, release = threading.Event(), threading.Event()
    seen: dict[str, list[int]] = {"a": [], "b": []}

    def long_call(s: MemoryStore) -> None:  # tenant A's govern, say
        seen["a"].append(id(s))
        held.set()
        assert release.wait(30)

    first = threading.Thread(target=pool.run, args=("a", long_call))
    first.start()
    assert held.wait(30)
    seen["b"].append(id(pool.run("b", lambda s: s)))  # answers while A holds its object
    second = threading.Thread(target=pool.run, args=("a", lambda s: seen["a"].append(id(s))))
    second.start()  # A's next call queues behind its first, on the same object
    release.set()
    first.join(30)
    second.join(30)
    assert seen["a"][0] == seen["a"][1] != seen["b"][0]
    pool.close()
    assert pool.stores == [store]
    store.close()


def test_a_tenant_goes_back_to_its_object_while_key_lookups_take_another(tmp_path: Path) -> None:
    """A tenant with no call in flight returns to the object it last ran on when that is among
    the least busy, even while a key lookup (a call for no tenant) is in flight: the lookup
    takes the last free object. A tenant whose object is busy still goes to a free one."""
    store = _store(tmp_path, "affinity.db")
    pool = StorePool(store, 3)
    first = pool.run("a", id)
    during = pool.run(None, lambda lookup: (id(lookup), pool.run("a", id)))  # a request: its key, then its call
    assert during[1] == first != during[0]
    assert pool.run("a", id) == first
    busy = pool.run("b", lambda s: (id(s), pool.run("a", id)))  # B took A's object; A is not kept waiting
    assert busy[0] == first != busy[1]
    pool.close()
    store.close()


def test_a_settings_change_over_http_is_in_force_on_every_pool_object(tmp_path: Path) -> None:
    store = _store(tmp_path, "config.db")
    admin, plain = create_key(store, "a", "root", admin=True), create_key(store, "b", "agent")
    with TestClient(create_app(store, workers=3)) as client:
        pool = client.app.state.pool  # type: ignore[attr-defined]
        assert len({id(s) for s in pool.stores}) == 3
        body = {"changes": {"recall.exploration": 0.07, "governance.theta_low": 0.31}}
        done = client.put("/v1/config", json=body, headers={"X-API-Key": admin})
        assert done.status_code == 200 and done.json()["version"] == 2
        for s in pool.stores:
            assert (s.exploration, s.policy.theta_low) == (0.07, 0.31)
            assert s.config() == done.json()
        assert client.get("/v1/config", headers={"X-API-Key": plain}).json() == done.json()
        assert len(store.settings_history()) == 2  # the others adopted the kept version: no new ones
    assert pool.stores == [store]  # the app closed the objects it opened
    store.close()


def _answers(client: TestClient, keys: dict[str, str]) -> list[tuple[int, Any]]:
    a, ro = {"X-API-Key": keys["a"]}, {"X-API-Key": keys["ro"]}
    calls = [
        client.get("/v1/memories/nope", headers=a),
        client.post("/v1/memories", json={"text": ""}, headers=a),
        client.post("/v1/memories", json={"text": "dup", "id": "m1"}, headers=a),
        client.get("/v1/memories/m1"),
        client.post("/v1/memories", json={"text": "x"}, headers=ro),
        client.put("/v1/config", json={"changes": {"recall.exploration": 0.1}}, headers=a),
        client.post("/v1/episodes/nope/outcome", json={"outcome": "success"}, headers=a),
    ]
    return [(r.status_code, r.json()) for r in calls]


def test_errors_keep_their_statuses_and_bodies_on_a_pool(tmp_path: Path) -> None:
    got = {}
    for workers in (1, 3):
        store = _store(tmp_path, f"errors-{workers}.db")
        keys = {"a": create_key(store, "a", "agent"), "ro": create_key(store, "a", "viewer", read_only=True)}
        with TestClient(create_app(store, workers=workers)) as client:
            got[workers] = _answers(client, keys)
        store.close()
    assert [status for status, _ in got[3]] == [404, 422, 409, 401, 403, 403, 404]
    assert got[3] == got[1]


def test_metrics_dashboard_and_sidecar_routes_work_on_a_pool(tmp_path: Path) -> None:
    store = _store(tmp_path, "faces.db")
    key = create_key(store, "a", "agent")
    h = {"X-API-Key": key}
    with TestClient(create_app(store, workers=2)) as client:
        assert client.post("/v1/sidecar/register", json={"ids": ["ext1", "ext2"]}, headers=h).json()["registered"] == [
            "ext1",
            "ext2",
        ]
        worth = client.post("/v1/sidecar/worth", json={"ids": ["ext1"]}, headers=h)
        assert worth.status_code == 200 and worth.json()["results"][0]["id"] == "ext1"
        assert "memworth_verification_queue 0.0" in client.get("/metrics").text
        page = client.get("/dashboard", headers=h)
        assert page.status_code == 200 and "notes about python lists" in page.text
    store.close()


def test_a_pool_over_memory_is_refused_and_its_size_is_checked(tmp_path: Path) -> None:
    with MemoryStore.open("memory://", encoder=HashingEncoder()) as store:
        with pytest.raises(ValidationError) as err:
            create_app(store, workers=2)
        assert err.value.field == "workers" and "memory://" in err.value.reason
        assert create_app(store).state.pool.workers == 1
    store = _store(tmp_path, "size.db")
    for bad in (0, 33, True, "2"):
        with pytest.raises(ValidationError) as err:
            StorePool(store, bad)  # type: ignore[arg-type]
        assert err.value.field == "workers"
    store.close()


@pytest.mark.parametrize(
    ("argv", "env", "said"),
    [
        (["--workers", "0"], None, "workers: must be an integer from 1 to 32, got 0"),
        (["--workers", "2", "--store", "memory://"], None, "memory:// lives in one store object"),
        ([], "many", "workers: must be an integer, got 'many'"),
        (["--switch-interval", "0"], None, "switch_interval: must be seconds above 0 and at most 1, got 0.0"),
    ],
)
def test_memworth_serve_refuses_a_bad_pool_size_clearly(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    env: str | None,
    said: str,
) -> None:
    from memworth.cli import main

    if env is not None:
        monkeypatch.setenv("MEMWORTH_WORKERS", env)
    store = [] if "--store" in argv else ["--store", f"sqlite:///{tmp_path / 'serve.db'}"]
    assert main(["serve", *argv, *store, "--encoder", "hashing", "--port", "1"]) != 0
    err = capsys.readouterr().err
    assert said in err and "Traceback" not in err


def test_a_pool_over_postgresql_needs_the_url_when_it_holds_a_password() -> None:
    import os
    import uuid

    base = os.environ.get("MEMWORTH_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
    schema = f"pool_{uuid.uuid4().hex[:12]}"
    url = base.replace("postgres@", "postgres:trusted-anyway@", 1) + f"?schema={schema}"  # trust auth ignores it
    store = MemoryStore.open(url, encoder=HashingEncoder(), seed=0)
    try:
        assert ":***@" in store.backend.url
        with pytest.raises(ValidationError) as err:
            create_app(store, workers=2)
        assert err.value.field == "url" and "password" in err.value.reason
        with pytest.raises(ValidationError) as err:
            create_app(store, workers=2, url=base + "?schema=elsewhere")
        assert err.value.field == "url"
        key = create_key(store, "a", "agent")
        with TestClient(create_app(store, workers=2, url=url)) as client:
            assert client.app.state.pool.workers == 2  # type: ignore[attr-defined]
            added = client.post(
                "/v1/memories", json={"text": "notes about sql joins", "id": "j"}, headers={"X-API-Key": key}
            )
            assert added.status_code == 201
            got = client.post("/v1/recall", json={"query": "sql joins", "k": 1}, headers={"X-API-Key": key})
            assert got.json()["results"][0]["id"] == "j"
    finally:
        with store.backend._pool.connection() as conn:  # type: ignore[attr-defined]
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
        store.close()


def test_an_in_memory_sqlite_store_is_one_object(tmp_path: Path) -> None:
    with MemoryStore.open("sqlite:///:memory:", encoder=HashingEncoder()) as store:
        with pytest.raises(ValidationError) as err:
            create_app(store, workers=2)
        assert err.value.field == "workers" and ":memory:" in err.value.reason


def test_calls_after_close_run_on_the_first_object(tmp_path) -> None:
    """close() keeps the first store object (the app's own); a call reaching the pool after it
    (a late request, the metrics read) picked an object past the end: IndexError (found in review)."""
    from memworth import HashingEncoder, MemoryStore
    from memworth.server.pool import StorePool

    store = MemoryStore.open(f"sqlite:///{tmp_path / 'p.db'}", encoder=HashingEncoder(), seed=0, exploration=0.0)
    try:
        pool = StorePool(store, 3)
        pool.run("a", lambda s: pool.run("b", id))  # "b" remembers the second object
        pool.close()
        assert [pool.run(ns, lambda s: s is store) for ns in (None, "a", "b")] == [True, True, True]
    finally:
        store.close()
