"""Memory ids with any character over every HTTP route that names a memory.

Ids go in paths as one percent-encoded segment (``memworth.server.ids.id_path``) and are
read from the raw path, so ``/v1/memories/x%2Fworth`` (the memory ``x/worth``) and
``/v1/memories/x/worth`` (the worth of ``x``) are different requests.
"""

from __future__ import annotations

import asyncio
import html
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from memworth import HashingEncoder, MemoryStore, ValidationError
from memworth.server import create_app, create_key
from memworth.server.dashboard.markup import memory_url
from memworth.server.ids import RawIdPaths, id_path, path_id
from tests.serving import uvicorn_thread

ODD_IDS = [
    "notes/2024/q1",
    "50% off",
    "100%",
    "%2F",
    "with space",
    " café/ü 日本",
    "..",
    ".",
    "a/..",
    "../etc/passwd",
    "x/restore",
    "x/worth",
    "x",
    "a//b",
    "/leading",
    "trailing/",
    "?q=1&r",
    "#frag",
    "a+b",
    "emoji 🧠",
]
ODD_IDS = [i.strip() for i in ODD_IDS]  # the store refuses ids with edge spaces


@pytest.fixture
def h(store: MemoryStore) -> dict[str, str]:
    return {"Authorization": f"Bearer {create_key(store, 'team', 'agent')}"}


def error(response: Any, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["ok"] is False and body["error"]["status"] == status
    return dict(body["error"])


@pytest.mark.parametrize("memory_id", ODD_IDS)
def test_every_memory_route_reads_the_exact_id(
    client: TestClient, store: MemoryStore, h: dict[str, str], memory_id: str
) -> None:
    r = client.post("/v1/memories", json={"text": f"fact about {memory_id}", "id": memory_id}, headers=h)
    assert r.status_code == 201 and r.json()["id"] == memory_id
    if memory_id != "x":  # a decoy that a mis-parsed path would land on
        client.post("/v1/memories", json={"text": "the decoy", "id": "x"}, headers=h)
    path = f"/v1/memories/{id_path(memory_id)}"
    got = client.get(path, headers=h)
    assert got.status_code == 200 and got.json()["id"] == memory_id and got.json()["text"] == f"fact about {memory_id}"
    worth = client.get(f"{path}/worth", headers=h)
    assert worth.status_code == 200 and worth.json()["id"] == memory_id and worth.json()["counts"]["retrievals"] == 0
    assert memory_id in [m["id"] for m in client.get("/v1/memories", headers=h).json()]
    # another namespace sees nothing under the same path
    other = {"Authorization": f"Bearer {create_key(store, 'other', 'o')}"}
    error(client.get(path, headers=other), 404)
    error(client.get(f"{path}/worth", headers=other), 404)


@pytest.mark.parametrize("memory_id", ["x/restore", "notes/2024/q1", "..", "50% off", "café/ü 日本", "x/worth"])
def test_an_odd_id_is_governed_restored_and_audited_over_http(
    client: TestClient, store: MemoryStore, h: dict[str, str], memory_id: str
) -> None:
    assert client.post("/v1/sidecar/register", json={"ids": [memory_id, "x"]}, headers=h).json()["already"] == 0
    for _ in range(20):  # enough for the error-controlled test of low worth
        episode = client.post("/v1/sidecar/retrieved", json={"ids": [memory_id]}, headers=h).json()["episode"]
        assert client.post(f"/v1/episodes/{episode}/outcome", json={"success": False}, headers=h).status_code == 200
    path = f"/v1/memories/{id_path(memory_id)}"
    assert client.get(f"{path}/worth", headers=h).json()["proposal"]["action"] == "deprecate"
    applied = client.post("/v1/govern", json={"apply": True}, headers=h).json()["applied"]
    assert [(e["memory_id"], e["new"]) for e in applied] == [(memory_id, "deprecated")]
    assert client.get(path, headers=h).json()["status"] == "deprecated"
    assert client.get("/v1/memories/x", headers=h).json()["status"] == "active"  # the decoy is untouched
    assert client.post("/v1/sidecar/filter", json={"ids": [memory_id, "x"]}, headers=h).json()["ids"] == ["x"]
    restored = client.post(f"/v1/audit/{applied[0]['seq']}/restore", json={"reason": "needed"}, headers=h)
    assert restored.status_code == 200 and restored.json()["memory_id"] == memory_id
    assert client.get(path, headers=h).json()["status"] == "active"
    trail = client.get("/v1/audit", params={"memory_id": memory_id}, headers=h).json()
    assert [e["action"] for e in trail] == ["deprecate", "restore"]
    (sidecar,) = client.post("/v1/sidecar/worth", json={"ids": [memory_id]}, headers=h).json()["results"]
    assert sidecar["id"] == memory_id and sidecar["counts"]["retrievals"] == 20


def test_a_trailing_literal_worth_is_the_sub_resource_an_encoded_one_is_the_id(
    client: TestClient, h: dict[str, str]
) -> None:
    for memory_id in ("x", "x/worth", "x/worth/worth", "a/b"):
        client.post("/v1/memories", json={"text": f"fact {memory_id}", "id": memory_id}, headers=h)
    assert client.get("/v1/memories/x/worth", headers=h).json()["id"] == "x"  # worth of x
    assert "posterior_mean" in client.get("/v1/memories/x/worth", headers=h).json()
    assert client.get("/v1/memories/x%2Fworth", headers=h).json()["text"] == "fact x/worth"  # the memory itself
    assert client.get("/v1/memories/x%2fworth", headers=h).json()["text"] == "fact x/worth"  # lower-case escape
    assert client.get("/v1/memories/x%2Fworth/worth", headers=h).json()["id"] == "x/worth"
    assert client.get("/v1/memories/x/worth/worth", headers=h).json()["id"] == "x/worth"
    assert client.get("/v1/memories/x%2Fworth%2Fworth", headers=h).json()["text"] == "fact x/worth/worth"
    # a client that does not encode "/" still reaches an id with one
    assert client.get("/v1/memories/a/b", headers=h).json()["text"] == "fact a/b"
    assert client.get("/v1/memories/a/b/worth", headers=h).json()["id"] == "a/b"


def test_bad_path_ids_are_clean_errors(client: TestClient, h: dict[str, str]) -> None:
    assert error(client.get("/v1/memories/%FF", headers=h), 422)["field"] == "memory_id"
    assert error(client.get("/v1/memories/%C3/worth", headers=h), 422)["field"] == "memory_id"
    assert error(client.get("/v1/memories/no%2Fsuch", headers=h), 404)["type"] == "UnknownMemoryError"
    assert error(client.get("/v1/memories/" + "y" * 201, headers=h), 422)["field"] == "id"
    assert error(client.get("/v1/memories/a%2Fb", headers={}), 401)["type"] == "Unauthorized"


def test_the_openapi_document_keeps_one_path_per_memory_route(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    assert "/v1/memories/{memory_id}" in paths and "/v1/memories/{memory_id}/worth" in paths
    (param,) = paths["/v1/memories/{memory_id}"]["get"]["parameters"][:1]
    assert param["in"] == "path" and "%2F" in param["description"]


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[str, dict[str, str]]]:
    """(base URL, auth headers) of a store holding every odd id, served by uvicorn over a socket.

    Starlette's TestClient decodes a path twice (``%252F`` arrives as ``/``), so what a
    real ASGI server hands the app is checked here.
    """
    store = MemoryStore.open("memory://", encoder=HashingEncoder(), seed=0)
    for memory_id in ODD_IDS:
        store.add(f"fact about {memory_id}", id=memory_id, namespace="team")
    key = create_key(store, "team", "t")
    with uvicorn_thread(create_app(store)) as port:
        yield f"http://127.0.0.1:{port}", {"X-API-Key": key}
    store.close()


@pytest.mark.parametrize("memory_id", ODD_IDS)
def test_over_a_real_socket_api_and_dashboard_carry_the_exact_id(
    served: tuple[str, dict[str, str]], memory_id: str
) -> None:
    base, key = served
    text = f"fact about {memory_id}"
    with httpx.Client(base_url=base, headers=key, timeout=30) as http:
        assert http.get(f"/v1/memories/{id_path(memory_id)}").json()["text"] == text
        assert http.get(f"/v1/memories/{id_path(memory_id)}/worth").json()["id"] == memory_id
        listing = http.get("/dashboard").text
        link = memory_url(memory_id)  # the encoded path; for "." and "..", which browsers drop, ?id=
        assert f'href="{link}"' in listing and (memory_id in (".", "..")) == ("?id=" in link)
        for address in {link, f"/dashboard/memories/{id_path(memory_id)}"}:
            page = http.get(address)
            assert page.status_code == 200 and html.escape(text) in page.text, address


def test_id_path_and_path_id_round_trip() -> None:
    for memory_id in [*ODD_IDS, "\x00nul", "a%2Fb", "%%", "~-._"]:
        segment = id_path(memory_id)
        assert "/" not in segment and segment not in (".", "..")
        assert path_id(segment) == memory_id
    with pytest.raises(ValidationError) as err:
        path_id("%FF", "id")
    assert err.value.field == "id"


def test_the_middleware_reencodes_a_decoded_path_when_the_server_gives_no_raw_path() -> None:
    seen: dict[str, Any] = {}

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        seen.update(scope)

    wrapped = RawIdPaths(app, ("/v1/memories/",))
    for scope, want in [
        (
            {"type": "http", "path": "/v1/memories/a b/%", "raw_path": b"/v1/memories/a%20b/%25"},
            "/v1/memories/a%20b/%25",
        ),
        ({"type": "http", "path": "/v1/memories/a b/%"}, "/v1/memories/a%20b/%25"),  # no raw path
        ({"type": "http", "path": "/v1/memories/é", "raw_path": "/v1/memories/é".encode()}, "/v1/memories/%C3%A9"),
        ({"type": "http", "path": "/v1/memories/x", "raw_path": b"/v1/%6Demories/x"}, "/v1/memories/x"),
        ({"type": "http", "path": "/v1/other/a b", "raw_path": b"/v1/other/a%20b"}, "/v1/other/a b"),  # untouched
        (
            {
                "type": "http",
                "path": "/api/v1/memories/a/b",
                "root_path": "/api",
                "raw_path": b"/api/v1/memories/a%2Fb",
            },
            "/api/v1/memories/a%2Fb",
        ),
    ]:
        seen.clear()
        asyncio.run(wrapped(scope, None, None))
        assert seen["path"] == want, scope
