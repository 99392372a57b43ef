"""Delete, edit, status, standing and expiry on every face: HTTP, CLI, MCP, dashboard.

The rules are the library's (``tests/store/test_forgetting.py``); here each face is shown
to call them, to audit who asked, and to answer bad input with a clear error.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from mcp.server.mcpserver.exceptions import ToolError

from memworth import ErasedMemoryError, MemoryStore
from memworth.cli import main
from memworth.mcp_server import create_server
from memworth.server import create_app, create_key

SECRET = "Alice's door code is 7781."


# -- HTTP ---------------------------------------------------------------------------------


def test_http_delete_erases_and_answers_the_tombstone(client: TestClient, store: MemoryStore) -> None:
    h = {"X-API-Key": create_key(store, "team", "agent")}
    assert client.post("/v1/memories", json={"text": SECRET, "id": "door/1"}, headers=h).status_code == 201
    assert client.delete("/v1/memories/door%2F1", headers=h).status_code == 422  # the reason is required
    r = client.delete("/v1/memories/door%2F1", params={"reason": "user request", "actor": "alice"}, headers=h)
    assert r.status_code == 200, r.text
    tomb = r.json()
    assert (tomb["action"], tomb["memory_id"]) == ("erase", "door/1")
    assert tomb["settings"]["actor"] == "alice (api key agent)"  # who said so, and the key it came with
    gone = client.get("/v1/memories/door%2F1", headers=h)
    assert gone.status_code == 404 and "was erased" in gone.json()["error"]["reason"]
    assert gone.json()["error"]["type"] == "ErasedMemoryError"
    again = client.post("/v1/memories", json={"text": "x", "id": "door/1"}, headers=h)
    assert again.status_code == 409 and "erased" in again.json()["error"]["reason"]
    assert client.delete("/v1/memories/door%2F1", params={"reason": "x"}, headers=h).status_code == 404
    audit = client.get("/v1/audit", params={"memory_id": "door/1"}, headers=h).json()
    assert [e["action"] for e in audit] == ["erase"] and SECRET not in json.dumps(audit)
    other = {"X-API-Key": create_key(store, "other", "agent")}
    client.post("/v1/memories", json={"text": "theirs", "id": "t"}, headers=h)
    assert client.delete("/v1/memories/t", params={"reason": "x"}, headers=other).status_code == 404
    assert store.get("t", namespace="team").text == "theirs"  # another tenant cannot erase it


def test_http_patch_edits_sets_status_and_standing(client: TestClient, store: MemoryStore) -> None:
    h = {"Authorization": f"Bearer {create_key(store, 'team', 'agent')}"}
    client.post("/v1/memories", json={"text": "The office is on floor 3.", "id": "office"}, headers=h)
    r = client.patch(
        "/v1/memories/office",
        json={"text": "The office is on floor 5.", "reason": "moved", "new_id": "office-2", "actor": "bob"},
        headers=h,
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert (body["action"], body["new"], body["settings"]["replaced_by"]) == ("edit", "archived", "office-2")
    assert body["settings"]["actor"] == "bob (api key agent)"
    assert body["memory"]["text"] == "The office is on floor 5." and body["memory"]["derived_from"] == ["office"]
    assert body["memory"]["counts"]["retrievals"] == 0
    r = client.patch("/v1/memories/office-2", json={"status": "suppressed", "reason": "unsure"}, headers=h)
    assert r.status_code == 200 and (r.json()["field"], r.json()["new"]) == ("status", "suppressed")
    r = client.patch("/v1/memories/office-2", json={"standing": "promoted", "reason": "key"}, headers=h)
    assert r.status_code == 200 and (r.json()["field"], r.json()["new"]) == ("standing", "promoted")
    assert client.get("/v1/memories/office-2", headers=h).json()["standing"] == "promoted"
    for bad, field in (
        ({"reason": "x"}, None),  # nothing to change
        ({"status": "archived", "standing": "normal", "reason": "x"}, None),  # two changes at once
        ({"status": "gone", "reason": "x"}, "status"),
        ({"text": "y", "reason": "x", "keep_old": "no"}, "keep_old"),
        ({"status": "active", "reason": "x", "new_id": "z"}, None),
        ({"status": "active"}, "reason"),
    ):
        r = client.patch("/v1/memories/office-2", json=bad, headers=h)
        assert r.status_code == 422, (bad, r.text)
        if field is not None:
            assert r.json()["error"]["field"] == field
    archived = client.patch("/v1/memories/office", json={"text": "again", "reason": "x"}, headers=h)
    assert archived.status_code == 409
    assert client.patch("/v1/memories/nope", json={"status": "active", "reason": "x"}, headers=h).status_code == 404
    audit = client.get("/v1/audit", headers=h).json()
    assert [e["action"] for e in audit] == ["edit", "set-status", "set-standing"]
    assert audit[1]["settings"]["actor"] == "api key agent"  # no actor named: the key is


def test_http_ttl_and_expiry(store: MemoryStore) -> None:
    now = [1000.0]
    store.clock = lambda: now[0]
    client = TestClient(create_app(store))
    h = {"X-API-Key": create_key(store, "team", "agent")}
    assert client.put("/v1/ttl", json={"ttl": "60"}, headers=h).status_code == 422  # a string is not a number
    assert client.put("/v1/ttl", json={"ttl": 60}, headers=h).json() == {"ttl": 60.0}
    assert client.get("/v1/ttl", headers=h).json() == {"ttl": 60.0}
    client.post("/v1/memories", json={"text": "short-lived water note", "id": "a"}, headers=h)
    client.post("/v1/memories", json={"text": "water lives longer", "id": "b", "ttl": 600}, headers=h)
    assert client.post("/v1/memories", json={"text": "x", "ttl": True}, headers=h).status_code == 422
    assert client.get("/v1/memories/a", headers=h).json()["expires"] == 1060.0
    now[0] = 1100.0
    listed = {m["id"]: m["expired"] for m in client.get("/v1/memories", headers=h).json()}
    assert listed == {"a": True, "b": False}
    listed = client.post("/v1/expire", json={"list_only": True}, headers=h).json()["expired"]
    assert [m["id"] for m in listed] == ["a"] and listed[0]["expired"] is True
    assert client.post("/v1/expire", json={"list_only": "yes"}, headers=h).status_code == 422
    tombs = client.post("/v1/expire", json={}, headers=h).json()["erased"]
    assert [t["memory_id"] for t in tombs] == ["a"] and tombs[0]["settings"]["actor"] == "memworth-expiry"
    assert client.get("/v1/memories/a", headers=h).status_code == 404
    assert client.put("/v1/ttl", json={"ttl": None}, headers=h).json() == {"ttl": None}


def test_the_new_routes_are_in_the_openapi_document(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    assert {"delete", "patch"} <= set(paths["/v1/memories/{memory_id}"])
    assert "put" in paths["/v1/ttl"] and "post" in paths["/v1/expire"]


# -- CLI ----------------------------------------------------------------------------------


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_delete_edit_status_standing_ttl_expire(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    s = ("--store", f"sqlite:///{tmp_path / 'cli.db'}", "--encoder", "hashing")
    assert run(capsys, "add", SECRET, "--id", "door", *s)[0] == 0
    assert run(capsys, "add", "The office is on floor 3.", "--id", "office", *s)[0] == 0
    code, out, _ = run(capsys, "delete", "door", "--reason", "user request", "--actor", "alice", *s, "--json")
    assert code == 0 and json.loads(out)["action"] == "erase" and json.loads(out)["settings"]["actor"] == "alice"
    code, _, err = run(capsys, "show", "door", *s)
    assert code != 0 and "was erased" in err and "Traceback" not in err
    with pytest.raises(SystemExit) as exit_:
        run(capsys, "delete", "office", *s)
    assert exit_.value.code == 2 and "--reason" in capsys.readouterr().err  # argparse: the reason is required
    code, out, _ = run(capsys, "edit", "office", "The office is on floor 5.", "--reason", "moved", "--new-id", "o2", *s)
    assert code == 0 and "replaced by o2" in out
    code, out, _ = run(capsys, "status", "o2", "suppressed", "--reason", "unsure", *s, "--json")
    assert code == 0 and json.loads(out)["new"] == "suppressed"
    code, out, _ = run(capsys, "standing", "o2", "demoted", "--reason", "weak", *s, "--json")
    assert code == 0 and json.loads(out)["new"] == "demoted"
    code, _, err = run(capsys, "status", "o2", "nonsense", "--reason", "x", *s)
    assert code != 0 and "status: must be one of active, suppressed" in err
    assert json.loads(run(capsys, "ttl", *s, "--json")[1]) == {"namespace": "default", "ttl": None}
    assert json.loads(run(capsys, "ttl", "3600", *s, "--json")[1])["ttl"] == 3600.0
    code, _, err = run(capsys, "ttl", "soon", *s)
    assert code != 0 and "seconds" in err
    assert run(capsys, "add", "Short-lived.", "--id", "tmp", "--ttl", "0.001", *s)[0] == 0
    code, out, _ = run(capsys, "expire", "--list", *s, "--json")
    assert code == 0 and [m["id"] for m in json.loads(out)] == ["tmp"]
    code, out, _ = run(capsys, "expire", *s)
    assert code == 0 and "tmp: expired, erased" in out
    assert json.loads(run(capsys, "replay", *s, "--json")[1])["consistent"] is True


# -- MCP ----------------------------------------------------------------------------------


def _call(server: Any, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    r = asyncio.run(server.call_tool(tool, arguments))
    return dict(r.structured_content)


def test_mcp_forget_edit_and_set_status(store: MemoryStore) -> None:
    server = create_server(store, namespace="team")
    _call(server, "remember", {"text": SECRET, "id": "door"})
    _call(server, "remember", {"text": "The office is on floor 3.", "id": "office", "ttl": 3600})
    assert store.get("office", namespace="team").expires is not None
    tomb = _call(server, "forget_memory", {"id": "door", "reason": "user request", "actor": "alice"})
    assert (tomb["action"], tomb["actor"]) == ("erase", "alice")
    with pytest.raises(ErasedMemoryError):
        store.get("door", namespace="team")
    with pytest.raises(ToolError, match="ErasedMemoryError: id: memory 'door' was erased"):
        _call(server, "forget_memory", {"id": "door", "reason": "again"})
    edited = _call(server, "edit_memory", {"id": "office", "text": "The office is on floor 5.", "reason": "moved"})
    assert edited["action"] == "edit" and edited["replaced_by"].startswith("office~") and edited["actor"] == "mcp"
    new_id = edited["replaced_by"]
    changed = _call(server, "set_memory_status", {"id": new_id, "status": "deprecated", "reason": "old"})
    assert (changed["field"], changed["new"]) == ("status", "deprecated")
    changed = _call(server, "set_memory_status", {"id": new_id, "standing": "re-verify", "reason": "check"})
    assert (changed["field"], changed["new"]) == ("standing", "re-verify")
    with pytest.raises(ToolError, match="give exactly one of status and standing"):
        _call(server, "set_memory_status", {"id": new_id, "reason": "x"})
    with pytest.raises(ToolError, match="ValidationError: keep_old"):
        _call(server, "edit_memory", {"id": new_id, "text": "t", "reason": "x", "keep_old": "no"})
    tools = {t.name: t for t in asyncio.run(server.list_tools())}
    assert tools["forget_memory"].annotations.destructive_hint is True


# -- dashboard ----------------------------------------------------------------------------


def sign_in(client: TestClient, key: str) -> str:
    client.post("/dashboard/login", data={"key": key, "next": "/dashboard"}, follow_redirects=False)
    found = re.search(r'name="csrf" value="([^"]+)"', client.get("/dashboard").text)
    assert found is not None
    return found.group(1)


def test_dashboard_buttons_edit_set_and_erase(client: TestClient, store: MemoryStore) -> None:
    key = create_key(store, "team", "person")
    store.add(SECRET, id="door", namespace="team")
    store.add("The office is on floor 3.", id="office", namespace="team")
    csrf = sign_in(client, key)
    page = client.get("/dashboard/memories/office").text
    assert 'id="changes"' in page and 'action="/dashboard/edit"' in page and 'action="/dashboard/delete"' in page
    forged = client.post("/dashboard/delete", data={"memory_id": "door", "reason": "x", "confirm": "door", "csrf": "x"})
    assert forged.status_code == 403 and store.get("door", namespace="team").text == SECRET
    unconfirmed = {"memory_id": "door", "reason": "x", "confirm": "dor", "csrf": csrf}
    assert client.post("/dashboard/delete", data=unconfirmed).status_code == 422
    done = client.post(
        "/dashboard/delete",
        data={"memory_id": "door", "reason": "user request", "confirm": "door", "csrf": csrf},
        follow_redirects=False,
    )
    assert done.status_code == 303 and "notice=" in done.headers["location"]
    assert "erase" in client.get(done.headers["location"]).text
    with pytest.raises(ErasedMemoryError):
        store.get("door", namespace="team")
    erased_page = client.get("/dashboard/memories/door")
    assert erased_page.status_code == 404 and "was erased" in erased_page.text
    edit = client.post(
        "/dashboard/edit",
        data={"memory_id": "office", "text": "The office is on floor 5.", "reason": "moved", "csrf": csrf},
        follow_redirects=False,
    )
    assert edit.status_code == 303 and edit.headers["location"].startswith("/dashboard/memories/office~")
    new_id = store.audit("office", namespace="team")[-1].settings["replaced_by"]
    assert store.get(new_id, namespace="team").text == "The office is on floor 5."
    for field, value in (("status", "suppressed"), ("standing", "demoted")):
        r = client.post(
            "/dashboard/set",
            data={"memory_id": new_id, "field": field, "value": value, "reason": "by hand", "csrf": csrf},
            follow_redirects=False,
        )
        assert r.status_code == 303
    m = store.get(new_id, namespace="team")
    assert (m.status, m.standing) == ("suppressed", "demoted")
    bad = client.post(
        "/dashboard/set", data={"memory_id": new_id, "field": "text", "value": "x", "reason": "x", "csrf": csrf}
    )
    assert bad.status_code == 422
    assert [e.settings["actor"] for e in store.audit(namespace="team")] == ["dashboard (api key person)"] * 4
