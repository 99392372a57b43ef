"""API keys over HTTP: how a request's key is read (one key, Bearer, WWW-Authenticate on 401),
read-only keys (403 on any change), expiry and revocation (401 saying which)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from memworth import HashingEncoder, MemoryStore
from memworth.server import create_app, create_key
from memworth.server.keys import list_keys, revoke


@pytest.fixture
def store() -> Iterator[MemoryStore]:
    s = MemoryStore.open("memory://", encoder=HashingEncoder(), seed=0, exploration=0.0)
    yield s
    s.close()


@pytest.fixture
def client(store: MemoryStore) -> TestClient:
    return TestClient(create_app(store))


def error(r: object, status: int) -> dict[str, object]:
    assert r.status_code == status, r.text  # type: ignore[attr-defined]
    body = r.json()  # type: ignore[attr-defined]
    assert body["ok"] is False and body["error"]["status"] == status
    return dict(body["error"])


def test_a_401_names_the_bearer_scheme(client: TestClient, store: MemoryStore) -> None:
    for headers in ({}, {"Authorization": "Bearer mw_unknown"}, {"X-API-Key": "nope"}):
        r = client.get("/v1/memories", headers=headers)
        error(r, 401)
        assert r.headers["www-authenticate"].startswith("Bearer")
    assert "www-authenticate" not in client.get("/health").headers


def test_another_scheme_than_bearer_is_refused_naming_the_header(client: TestClient, store: MemoryStore) -> None:
    key = create_key(store, "team", "agent")
    e = error(client.get("/v1/memories", headers={"Authorization": f"Basic {key}"}), 401)
    assert e["field"] == "Authorization" and "Bearer" in str(e["reason"])
    assert client.get("/v1/memories", headers={"Authorization": f"bearer {key}"}).status_code == 200  # RFC: any case


def test_two_different_keys_are_refused_the_same_key_twice_is_fine(client: TestClient, store: MemoryStore) -> None:
    a, b = create_key(store, "team", "a"), create_key(store, "other", "b")
    r = client.get("/v1/memories", headers={"Authorization": f"Bearer {a}", "X-API-Key": b})
    e = error(r, 401)
    assert e["field"] == "X-API-Key" and "differs" in str(e["reason"]) and r.headers["www-authenticate"]
    both = client.post(
        "/v1/memories", json={"text": "x", "id": "x"}, headers={"Authorization": f"Bearer {a}", "X-API-Key": a}
    )
    assert both.status_code == 201
    assert [m["id"] for m in client.get("/v1/memories", headers={"X-API-Key": a}).json()] == ["x"]
    assert client.get("/v1/memories", headers={"X-API-Key": b}).json() == []


def test_a_body_that_is_not_utf8_is_a_422_naming_the_body(client: TestClient, store: MemoryStore) -> None:
    key = create_key(store, "team", "a")
    r = client.post(
        "/v1/memories", content=b'{"text": "\xff"}', headers={"X-API-Key": key, "Content-Type": "application/json"}
    )
    assert error(r, 422)["field"] == "body"
    assert client.get("/v1/memories", headers={"X-API-Key": key}).json() == []
