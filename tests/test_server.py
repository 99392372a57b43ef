"""The HTTP API, in process: tenants and keys, every verb, one error shape, size limits."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from memworth import MemoryStore
from memworth.server import create_app, create_key, revoke_key
from tests.serving import free_port, memworth_serve


@pytest.fixture
def client(store: MemoryStore) -> TestClient:
    return TestClient(create_app(store, max_body=64_000))


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def assert_error(response: object, status: int, kind: str | None = None) -> dict:
    r = response  # type: ignore[assignment]
    assert r.status_code == status, r.text  # type: ignore[attr-defined]
    body = r.json()  # type: ignore[attr-defined]
    assert body["ok"] is False and set(body["error"]) == {"type", "field", "reason", "status"}
    assert body["error"]["status"] == status
    if kind:
        assert body["error"]["type"] == kind
    return body["error"]


def test_a_session_through_the_api(client: TestClient, store: MemoryStore) -> None:
    h = auth(create_key(store, "team-a", "agent"))
    r = client.post(
        "/v1/memories", json={"text": "Use list.reverse() to reverse a Python list.", "id": "rev"}, headers=h
    )
    assert r.status_code == 201 and r.json()["worth"] == 0.5
    client.post("/v1/memories", json={"text": "Prague was the capital of Czechoslovakia.", "id": "cz"}, headers=h)
    for _ in range(20):  # enough for the error-controlled test of low worth
        rec = client.post("/v1/recall", json={"query": "capital of czechoslovakia", "k": 1}, headers=h).json()
        assert rec["results"][0]["id"] == "cz"
        assert (
            client.post(f"/v1/episodes/{rec['episode']}/outcome", json={"success": False}, headers=h).status_code == 200
        )
    worth = client.get("/v1/memories/cz/worth", headers=h).json()
    assert (
        worth["class"] == "low" and worth["counts"]["retrievals"] == 20 and worth["proposal"]["action"] == "deprecate"
    )
    proposals = client.post("/v1/govern", json={}, headers=h).json()["proposals"]
    assert [p["memory_id"] for p in proposals] == ["cz"]
    applied = client.post("/v1/govern", json={"apply": True}, headers=h).json()["applied"]
    assert client.get("/v1/memories?status=deprecated", headers=h).json()[0]["id"] == "cz"
    seq = applied[0]["seq"]
    assert client.post(f"/v1/audit/{seq}/restore", json={"reason": "needed"}, headers=h).status_code == 200
    assert [e["action"] for e in client.get("/v1/audit?memory_id=cz", headers=h).json()] == ["deprecate", "restore"]
    assert client.get("/v1/replay", headers=h).json()["consistent"] is True
    assert client.get("/health").json()["ok"] is True


def test_a_key_never_reaches_another_namespace(client: TestClient, store: MemoryStore) -> None:
    a = auth(create_key(store, "tenant-a", "a"))
    b = auth(create_key(store, "tenant-b", "b"))
    client.post("/v1/memories", json={"text": "A's secret launch code is 1234", "id": "secret"}, headers=a)
    rec_a = client.post("/v1/recall", json={"query": "launch code"}, headers=a).json()
    assert client.get("/v1/memories", headers=b).json() == []
    assert_error(client.get("/v1/memories/secret", headers=b), 404, "UnknownMemoryError")
    assert_error(client.get("/v1/memories/secret/worth", headers=b), 404)
    assert client.post("/v1/recall", json={"query": "launch code secret"}, headers=b).json()["results"] == []
    assert_error(client.post(f"/v1/episodes/{rec_a['episode']}/outcome", json={"success": True}, headers=b), 404)
    assert client.get("/v1/audit", headers=b).json() == []
    assert client.post("/v1/govern", json={"apply": True}, headers=b).json()["proposals"] == []
    assert store.get("secret", namespace="tenant-a").counts.n == 0  # b's attempts changed nothing


def test_keys_are_required_stored_hashed_and_revocable(client: TestClient, store: MemoryStore) -> None:
    key = create_key(store, "ns", "k")
    assert_error(client.get("/v1/memories"), 401, "Unauthorized")
    assert_error(client.get("/v1/memories", headers=auth("mw_not-a-key")), 401)
    assert client.get("/v1/memories", headers={"X-API-Key": key}).status_code == 200
    stored = [store.backend.get_meta(k) for k in list(getattr(store.backend, "_meta", {}))]
    assert not any(key in (v or "") for v in stored) and key not in str(getattr(store.backend, "_meta", {}))
    assert revoke_key(store, key)
    assert_error(client.get("/v1/memories", headers=auth(key)), 401)


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "field"),
    [
        ("post", "/v1/memories", {"text": ""}, 422, "text"),
        ("post", "/v1/memories", {"text": "x", "unknown": 1}, 422, "unknown"),
        ("post", "/v1/memories", {"text": "x", "metadata": {"n": "ok"}, "contexts": "not-a-list"}, 422, "contexts"),
        ("post", "/v1/recall", {"query": "q", "k": 0}, 422, "k"),
        ("post", "/v1/recall", {"query": "q", "k": "many"}, 422, "k"),
        ("post", "/v1/episodes/nope/outcome", {"success": True}, 404, None),
        ("post", "/v1/episodes/nope/outcome", {"success": "maybe"}, 422, "success"),
        ("post", "/v1/audit/99/restore", {}, 404, None),  # an unknown entry is not found, like any id
        ("get", "/v1/memories/missing", None, 404, None),
        ("get", "/v1/nowhere", None, 404, None),
    ],
)
def test_bad_requests_get_the_one_error_shape_and_write_nothing(
    client: TestClient, store: MemoryStore, method: str, path: str, body: object, status: int, field: str | None
) -> None:
    h = auth(create_key(store, "ns", "k"))
    r = getattr(client, method)(path, headers=h, **({} if body is None else {"json": body}))
    err = assert_error(r, status)
    if field is not None:
        assert err["field"] == field
    assert store.list(namespace="ns") == [] and list(store.backend.outcome_log()) == []


def test_oversized_bodies_are_refused(client: TestClient, store: MemoryStore) -> None:
    h = auth(create_key(store, "ns", "k"))
    assert_error(client.post("/v1/memories", json={"text": "x" * 70_000}, headers=h), 413, "PayloadTooLarge")
    assert store.list(namespace="ns") == []


def test_duplicate_outcome_is_a_409(client: TestClient, store: MemoryStore) -> None:
    h = auth(create_key(store, "ns", "k"))
    client.post("/v1/memories", json={"text": "a fact", "id": "f"}, headers=h)
    episode = client.post("/v1/recall", json={"query": "a fact"}, headers=h).json()["episode"]
    assert client.post(f"/v1/episodes/{episode}/outcome", json={"success": True}, headers=h).status_code == 200
    assert_error(
        client.post(f"/v1/episodes/{episode}/outcome", json={"success": True}, headers=h), 409, "DuplicateError"
    )
    assert store.get("f", namespace="ns").counts.n == 1


def test_the_openapi_document_lists_every_route(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    for path in (
        "/v1/memories",
        "/v1/recall",
        "/v1/episodes/{episode_id}/outcome",
        "/v1/govern",
        "/v1/audit",
        "/health",
    ):
        assert path in paths


def test_memworth_serve_answers_over_a_real_socket(tmp_path: object) -> None:
    import json
    import subprocess
    import sys
    import urllib.request

    url = f"sqlite:///{tmp_path}/served.db"
    exe = [sys.executable, "-m", "memworth.cli"]
    out = subprocess.run(
        [*exe, "keys", "create", "--store", url, "--encoder", "hashing", "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    key = json.loads(out.stdout)["key"]
    port = free_port()
    with memworth_serve("--store", url, "--port", str(port)) as served:
        served.first_answer(f"http://127.0.0.1:{port}/health", timeout=1)
        req = urllib.request.Request(
            f"http://127.0.0.1:{port}/v1/memories",
            data=json.dumps({"text": "served fact", "id": "s"}).encode(),
            headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(req, timeout=10) as r:
            assert r.status == 201 and json.loads(r.read())["id"] == "s"
    logged = served.out
    with MemoryStore.open(url) as store:
        assert store.get("s").text == "served fact"
    assert '"POST /v1/memories HTTP/1.1" 201' in logged  # the access log, at the default level (info)


@pytest.mark.parametrize(
    "body",
    [
        {"success": "yes"},
        {"success": 1},
        {"success": "true"},
        {"outcome": "ok"},
        {"outcome": True},
        {},
        {"outcome": "success", "success": True},
    ],
)
def test_an_outcome_is_strictly_typed_and_given_once(client: TestClient, store: MemoryStore, body: dict) -> None:
    h = auth(create_key(store, "ns", "k"))
    store.add("Water boils at 100 C.", id="w", namespace="ns")
    episode = client.post("/v1/recall", json={"query": "water", "k": 1}, headers=h).json()["episode"]
    assert_error(client.post(f"/v1/episodes/{episode}/outcome", json=body, headers=h), 422)
    assert list(store.backend.outcome_log()) == []
    r = client.post(
        f"/v1/episodes/{episode}/outcome", json={"outcome": "failure"}, headers=h
    )  # as MCP and the CLI say it
    assert r.status_code == 200 and r.json()["outcome"] == "failure"
    assert store.get("w", namespace="ns").counts.failure == 1.0


@pytest.mark.parametrize("apply", ["no", "yes", 1, 0, None])
def test_govern_apply_is_true_or_false_only(client: TestClient, store: MemoryStore, apply: object) -> None:
    # The library's govern takes True or False only (check_flag); HTTP read "no" and 0 as false, "yes" and 1 as true.
    h = auth(create_key(store, "default", "agent"))
    error = assert_error(client.post("/v1/govern", json={"apply": apply}, headers=h), 422, "ValidationError")
    assert error["field"] == "apply"
