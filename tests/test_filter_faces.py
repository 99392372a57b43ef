"""Recall filters on the faces: HTTP ``where``, MCP ``recall(where=...)``, CLI ``recall --where``."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from mcp.server.mcpserver.exceptions import ToolError

from memworth import HashingEncoder, MemoryStore
from memworth.cli import main
from memworth.mcp_server import create_server
from memworth.server import create_app, create_key

ITEMS = [
    {"text": f"Deploy note {i}: restart the billing service.", "id": f"n{i}", "metadata": {"env": env, "sev": i}}
    for i, env in enumerate(["prod", "staging", "prod", "dev", "prod"])
]


@pytest.fixture
def store() -> Iterator[MemoryStore]:
    s = MemoryStore.open("memory://", encoder=HashingEncoder(), seed=0, exploration=0.0)
    s.add_many(ITEMS, namespace="team")
    yield s
    s.close()


def test_http_recall_where(store: MemoryStore) -> None:
    client = TestClient(create_app(store))
    h = {"X-API-Key": create_key(store, "team", "agent")}
    body = {"query": "restart billing", "k": 5, "where": {"metadata": {"env": "prod", "sev": {"gte": 2}}}}
    r = client.post("/v1/recall", json=body, headers=h)
    assert r.status_code == 200, r.text
    assert sorted(x["id"] for x in r.json()["results"]) == ["n2", "n4"]
    assert r.json()["diagnostics"]["where"] == body["where"]
    bad = client.post("/v1/recall", json={**body, "where": {"metadata": {"sev": {"gte": "2", "lt": 3}}}}, headers=h)
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "where.metadata.sev"
    assert store.outcome_page(namespace="team").items == []


def test_mcp_recall_where(store: MemoryStore) -> None:
    server = create_server(store, namespace="team")
    r = asyncio.run(
        server.call_tool("recall", {"query": "restart billing", "k": 5, "where": {"metadata": {"env": "dev"}}})
    )
    assert [x["id"] for x in r.structured_content["results"]] == ["n3"]
    with pytest.raises(ToolError, match="ValidationError: where: unknown part"):
        asyncio.run(server.call_tool("recall", {"query": "restart billing", "where": {"env": "dev"}}))


def test_cli_recall_where(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    s = ("--store", f"sqlite:///{tmp_path / 'cli.db'}", "--encoder", "hashing")
    for item in ITEMS:
        main(["add", item["text"], "--id", item["id"], "--metadata", json.dumps(item["metadata"]), *s])  # type: ignore[arg-type]
    capsys.readouterr()
    assert (
        main(["recall", "restart billing", "-k", "5", "--where", '{"metadata": {"env": "staging"}}', *s, "--json"]) == 0
    )
    assert [x["id"] for x in json.loads(capsys.readouterr().out)["results"]] == ["n1"]
    assert main(["recall", "restart billing", "--where", "{nope", *s]) != 0
    assert "--where: is not JSON" in capsys.readouterr().err
