"""A write whose answer fails is rolled back (issue 18): every HTTP write route and MCP write
tool, on every backend. The failure is injected after the store call, where the answer is
rendered (its JSON encoding raises); the client gets the one 500 shape, nothing of the write
is kept, and the same request then succeeds."""

from __future__ import annotations

import asyncio
import http.client
import json
import re
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient
from mcp.server.mcpserver.exceptions import ToolError

from memworth import MemoryStore
from memworth.mcp_server import create_server
from memworth.mcp_server.views import DecisionView, MemoryView, OutcomeView
from memworth.server import answers, create_app, create_key
from tests.serving import uvicorn_thread
from tests.store.conftest import FACTS
from tests.store.test_transaction import _state


def _unencodable(*args: object, **kwargs: object) -> Any:
    raise ValueError("injected: the answer cannot be encoded")


@pytest.fixture
def seeded(make_store: Callable[..., MemoryStore]) -> MemoryStore:
    """Memories, outcomes pending governance (czechoslovakia fails), and an audit entry to restore."""
    s = make_store(seed=0, exploration=0.0)
    s.add_many([{"id": k, "text": v} for k, v in FACTS.items()])
    for ok, query in ((True, "reverse a python list"), (False, "capital of czechoslovakia")) * 10:
        s.record(s.recall(query, k=1).episode, ok)
    s.set_status("water", "archived", reason="seed")
    return s


def _requests(store: MemoryStore) -> list[tuple[str, str, dict[str, Any] | None]]:
    """One request per write route: (method, path, JSON body)."""
    one, two, three = (store.recall(q, k=2).episode.id for q in ("python", "capital", "boils"))
    seq = store.audit("water")[-1].seq
    return [
        ("POST", "/v1/memories", {"text": "Paris is the capital of France.", "id": "paris", "metadata": {"a": 1}}),
        ("POST", "/v1/batch/memories", {"items": [{"text": "one", "id": "b1"}, {"text": "two", "id": "b2"}]}),
        ("POST", f"/v1/episodes/{one}/outcome", {"outcome": "success"}),
        ("POST", "/v1/batch/outcomes", {"outcomes": [{"episode": two, "outcome": "failure"}]}),
        ("POST", f"/v1/episodes/{three}/verify", {"outcome": "success"}),
        ("DELETE", "/v1/memories/prague?reason=asked", None),
        ("PATCH", "/v1/memories/methods", {"reason": "r", "status": "suppressed"}),
        ("PATCH", "/v1/memories/methods", {"reason": "r", "standing": "promoted"}),
        ("PATCH", "/v1/memories/reverse", {"reason": "r", "text": "Reverse a list with reversed()."}),
        ("POST", "/v1/memories/recursion/pin", {"reason": "r"}),
        ("POST", f"/v1/audit/{seq}/restore", {"reason": "r"}),
        ("PUT", "/v1/ttl", {"ttl": 60.0}),
        ("POST", "/v1/govern", {"apply": True}),
        ("PUT", "/v1/config", {"changes": {"recall.exploration": 0.2}}),
        ("POST", "/v1/sidecar/register", {"ids": ["external-1"]}),
    ]


def test_every_write_route_keeps_nothing_when_its_answer_fails(
    seeded: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    h = {"Authorization": f"Bearer {create_key(seeded, 'default', 'k', admin=True)}"}
    client = TestClient(create_app(seeded))
    for method, path, body in _requests(seeded):
        before = _state(seeded)
        with monkeypatch.context() as patch:
            patch.setattr(answers, "encoded", _unencodable)
            r = client.request(method, path, json=body, headers=h)
        assert r.status_code == 500, (path, r.text)
        assert r.json()["error"]["type"] == "InternalError"
        assert _state(seeded) == before, path
        assert seeded.replay().mismatches == []
        again = client.request(method, path, json=body, headers=h)  # nothing was kept: it succeeds now
        assert again.status_code in (200, 201), (path, again.text)
        assert _state(seeded) != before or path == "/v1/sidecar/register", path
    assert seeded.replay().mismatches == []


def test_a_failure_in_the_route_after_the_store_call_rolls_back_too(
    seeded: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not only the encoding: any error between the store call and the answer (here the memory's
    row cannot be built) undoes the write."""
    from memworth.server import app as app_module

    h = {"Authorization": f"Bearer {create_key(seeded, 'default', 'k')}"}
    client = TestClient(create_app(seeded))
    before = _state(seeded)
    monkeypatch.setattr(app_module, "_memory", _unencodable)
    r = client.post("/v1/batch/memories", json={"items": [{"text": "x", "id": "x"}]}, headers=h)
    assert r.status_code == 500 and _state(seeded) == before


def test_over_a_real_socket_the_next_request_on_the_connection_works(
    seeded: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = create_key(seeded, "default", "k")
    with uvicorn_thread(create_app(seeded), log_level="critical") as port:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

        def add() -> tuple[int, Any]:
            body = json.dumps({"text": "Paris is the capital of France.", "id": "paris"})
            headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
            connection.request("POST", "/v1/memories", body=body, headers=headers)
            response = connection.getresponse()
            return response.status, json.loads(response.read())

        with monkeypatch.context() as patch:
            patch.setattr(answers, "encoded", _unencodable)
            failed = add()
        first_socket = connection.sock
        kept = [m.id for m in seeded.list()]
        done = add()
        assert connection.sock is first_socket  # the same keep-alive connection
        connection.close()
    assert failed[0] == 500 and "paris" not in kept
    assert done[0] == 201 and done[1]["id"] == "paris"


def test_every_mcp_write_tool_keeps_nothing_when_its_answer_fails(
    seeded: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = create_server(seeded)
    episode = seeded.recall("python", k=2).episode.id
    calls: list[tuple[type[Any], str, dict[str, Any]]] = [
        (MemoryView, "remember", {"text": "Paris is the capital of France.", "id": "paris"}),
        (OutcomeView, "report_outcome", {"episode": episode, "outcome": "success"}),
        (DecisionView, "forget_memory", {"id": "prague", "reason": "asked"}),
        (DecisionView, "edit_memory", {"id": "reverse", "text": "Use reversed().", "reason": "r"}),
        (DecisionView, "set_memory_status", {"id": "methods", "reason": "r", "status": "deprecated"}),
        (DecisionView, "pin_memory", {"id": "recursion", "reason": "r"}),
    ]
    for view, tool, arguments in calls:
        before = _state(seeded)
        with monkeypatch.context() as patch:
            patch.setattr(view, "model_dump_json", _unencodable)
            with pytest.raises(ToolError, match=f"Error executing tool {tool}"):
                asyncio.run(server.call_tool(tool, arguments))
        assert _state(seeded) == before, tool
        result = asyncio.run(server.call_tool(tool, arguments))
        assert not getattr(result, "is_error", False), tool
        assert _state(seeded) != before, tool
    assert seeded.replay().mismatches == []


def test_an_answer_is_encoded_as_fastapi_encodes_a_returned_value() -> None:
    """NaN and infinities (an empty arm's lift, say) are null, as before answers were rendered
    inside the transaction; only a value that really cannot be sent fails."""
    assert answers.rendered({"lift": float("nan"), "upper": float("inf"), "ids": ("a",)}).body == (
        b'{"lift":null,"upper":null,"ids":["a"]}'
    )
    with pytest.raises(ValueError):
        answers.rendered({"memory": object()})


def test_a_dashboard_form_keeps_nothing_when_its_redirect_fails(
    seeded: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memworth.server.dashboard import routes

    client = TestClient(create_app(seeded))
    key = create_key(seeded, "default", "person")
    r = client.post("/dashboard/login", data={"key": key, "next": "/dashboard"}, follow_redirects=False)
    assert r.status_code == 303
    found = re.search(r'name="csrf" value="([^"]+)"', client.get("/dashboard").text)
    assert found is not None
    forms = [
        ("/dashboard/set", {"memory_id": "methods", "field": "status", "value": "suppressed", "reason": "r"}),
        ("/dashboard/pin", {"memory_id": "recursion", "reason": "r"}),
        ("/dashboard/delete", {"memory_id": "prague", "reason": "r", "confirm": "prague"}),
        ("/dashboard/edit", {"memory_id": "reverse", "reason": "r", "text": "Use reversed()."}),
    ]
    for path, form in forms:
        data = {**form, "csrf": found.group(1)}
        before = _state(seeded)
        with monkeypatch.context() as patch:
            patch.setattr(routes, "with_notice", _unencodable)
            failed = client.post(path, data=data, follow_redirects=False)
        assert failed.status_code == 500, path
        assert _state(seeded) == before, path
        done = client.post(path, data=data, follow_redirects=False)
        assert done.status_code == 303 and _state(seeded) != before, path
