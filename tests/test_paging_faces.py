"""Cursor pagination on the faces: HTTP ``?limit=&cursor=`` (memories, audit, outcomes) and CLI ``list``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from memworth import MemoryStore
from memworth.cli import main
from memworth.server import create_app, create_key


def _pages(client: TestClient, path: str, key: str, h: dict[str, str], **params: object) -> list[list[object]]:
    pages, cursor = [], None
    while True:
        query = {**params, **({"cursor": cursor} if cursor else {})}
        r = client.get(path, params=query, headers=h)
        assert r.status_code == 200, r.text
        pages.append(r.json()[key])
        cursor = r.json()["next_cursor"]
        if cursor is None:
            return pages


def test_http_pages_memories_audit_and_outcomes(store: MemoryStore) -> None:
    client = TestClient(create_app(store))
    h = {"X-API-Key": create_key(store, "team", "agent")}
    store.add_many([{"text": f"fact {i} about rivers", "id": f"m{i}"} for i in range(5)], namespace="team")
    assert len(client.get("/v1/memories", headers=h).json()) == 5  # without limit: the whole list, as before
    pages = _pages(client, "/v1/memories", "memories", h, limit=2)
    assert [[m["id"] for m in p] for p in pages] == [["m0", "m1"], ["m2", "m3"], ["m4"]]  # type: ignore[index]
    for i in range(5):
        store.record(store.recall("rivers", k=1, namespace="team"), True)
        store.pin(f"m{i}", reason="paging", namespace="team")
    audit = _pages(client, "/v1/audit", "entries", h, limit=2)
    assert [len(p) for p in audit] == [2, 2, 1]
    assert [e["seq"] for p in audit for e in p] == [e.seq for e in store.audit(namespace="team")]  # type: ignore[index]
    outcomes = _pages(client, "/v1/outcomes", "outcomes", h, limit=4)
    assert [len(p) for p in outcomes] == [4, 1]
    assert all(o["outcome"] == "success" for p in outcomes for o in p)  # type: ignore[index]
    for params, field in (({"limit": 0}, "limit"), ({"limit": "two"}, "limit"), ({"cursor": "zzz"}, "cursor")):
        r = client.get("/v1/memories", params=params, headers=h)
        assert r.status_code == 422 and r.json()["error"]["field"] == field, r.text
    outcome_cursor = client.get("/v1/outcomes", params={"limit": 1}, headers=h).json()["next_cursor"]
    r = client.get("/v1/audit", params={"cursor": outcome_cursor}, headers=h)
    assert r.status_code == 422 and "another list" in r.json()["error"]["reason"]
    other = {"X-API-Key": create_key(store, "other", "agent")}
    assert client.get("/v1/outcomes", headers=other).json() == {"outcomes": [], "next_cursor": None}


def test_cli_list_pages(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    s = ("--store", f"sqlite:///{tmp_path / 'cli.db'}", "--encoder", "hashing")
    for i in range(3):
        assert main(["add", f"fact {i}", "--id", f"m{i}", *s]) == 0
    capsys.readouterr()
    assert main(["list", "--limit", "2", *s, "--json"]) == 0
    first = json.loads(capsys.readouterr().out)
    assert [m["id"] for m in first["memories"]] == ["m0", "m1"] and first["next_cursor"]
    assert main(["list", "--limit", "2", "--cursor", first["next_cursor"], *s]) == 0
    out = capsys.readouterr().out
    assert "m2" in out and "m0" not in out and "(last page)" in out
    assert main(["list", "--limit", "0", *s]) != 0
    assert "limit: must be an integer from 1 to 1000" in capsys.readouterr().err


def test_dashboard_pages_a_memorys_outcomes(store: MemoryStore) -> None:
    client = TestClient(create_app(store))
    h = {"X-API-Key": create_key(store, "team", "person")}
    store.add("Rivers flow to the sea.", id="r", namespace="team")
    for i in range(25):
        store.record(store.recall(f"rivers {i}", k=1, namespace="team"), i % 2 == 0)
    first = client.get("/dashboard/memories/r", headers=h).text
    assert "Outcomes 1-10 of 25, newest first" in first
    assert "<td>rivers 24</td>" in first and "<td>rivers 15</td>" in first and "<td>rivers 14</td>" not in first
    assert 'href="/dashboard/memories/r?outcomes=2#outcomes"' in first
    last = client.get("/dashboard/memories/r?outcomes=3", headers=h).text
    assert "Outcomes 21-25 of 25" in last and "<td>rivers 0</td>" in last and "<td>rivers 5</td>" not in last
    assert 'outcomes=2#outcomes" rel="prev"' in last and 'rel="next"' not in last
    assert client.get("/dashboard/memories/r?outcomes=0", headers=h).status_code == 422
    assert client.get("/dashboard/memories/r?outcomes=x", headers=h).status_code == 422
