"""``used`` through every face that records an outcome: HTTP (one outcome, a batch), MCP, the
CLI, the sidecar and the LangChain / LangGraph adapters. Each calls ``MemoryStore.record``, so
each credits only the used memories and refuses bad ``used`` the same way, naming it."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.vectorstores import InMemoryVectorStore
from langgraph.store.memory import InMemoryStore

from memworth import Counts, HashingEncoder, MemoryStore, Sidecar, ValidationError
from memworth.adapters.langchain import GovernedRetriever
from memworth.adapters.langgraph import GovernedStore
from memworth.cli import main
from memworth.mcp_server import create_server
from memworth.server import create_app, create_key

NOTES = {
    "reverse": "Use list.reverse() or slicing [::-1] to reverse a Python list.",
    "reversed": "reversed(list) returns an iterator over a Python list in reverse order.",
    "sort": "Python lists have a sort method; sorted() returns a new sorted list.",
}


@pytest.fixture
def store() -> MemoryStore:
    s = MemoryStore.open("memory://", encoder=HashingEncoder(), seed=0, exploration=0.0)
    s.add_many([{"id": k, "text": v} for k, v in NOTES.items()])
    return s


def credited(store: MemoryStore) -> dict[str, Counts]:
    return {m.id: m.counts for m in store.list()}


def test_http_one_outcome_and_a_batch_credit_only_the_used(store: MemoryStore) -> None:
    client = TestClient(create_app(store))
    h = {"Authorization": f"Bearer {create_key(store, 'default', 'agent')}"}
    rec = client.post("/v1/recall", json={"query": "reverse a python list", "k": 3}, headers=h).json()
    ids = [r["id"] for r in rec["results"]]
    bad = client.post(f"/v1/episodes/{rec['episode']}/outcome", json={"success": True, "used": ["nope"]}, headers=h)
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "used"
    empty = client.post(f"/v1/episodes/{rec['episode']}/outcome", json={"success": True, "used": []}, headers=h)
    assert empty.status_code == 422 and empty.json()["error"]["field"] == "used"
    assert all(c.n == 0 for c in credited(store).values())  # refused: nothing written
    r = client.post(f"/v1/episodes/{rec['episode']}/outcome", json={"success": True, "used": [ids[1]]}, headers=h)
    assert r.status_code == 200, r.text
    assert credited(store)[ids[1]] == Counts(1.0, 0.0, 1.0) and credited(store)[ids[0]] == Counts(0.0, 0.0, 1.0)
    a = client.post("/v1/recall", json={"query": "sort a list", "k": 2}, headers=h).json()
    b = client.post("/v1/recall", json={"query": "sort a list", "k": 2}, headers=h).json()
    body = {"outcomes": [{"episode": a["episode"], "outcome": "failure", "used": [a["results"][0]["id"]]},
                         {"episode": b["episode"], "outcome": "failure", "used": ["gone"]}]}  # fmt: skip
    refused = client.post("/v1/batch/outcomes", json=body, headers=h)
    assert refused.status_code == 422 and refused.json()["error"]["field"] == "outcomes[1].used"
    body["outcomes"][1]["used"] = None
    assert client.post("/v1/batch/outcomes", json=body, headers=h).status_code == 200
    assert store.replay().consistent


def test_mcp_report_outcome_takes_used(store: MemoryStore) -> None:
    server = create_server(store)
    recall = asyncio.run(server.call_tool("recall", {"query": "reverse a python list", "k": 3})).structured_content
    ids = [r["id"] for r in recall["results"]]
    with pytest.raises(Exception, match="used"):
        asyncio.run(server.call_tool("report_outcome", {"episode": recall["episode"], "outcome": "success", "used": [ids[0], ids[0]]}))
    out = asyncio.run(
        server.call_tool("report_outcome", {"episode": recall["episode"], "outcome": "success", "used": [ids[2]]})
    ).structured_content
    assert [m["id"] for m in out["memories"]] == [ids[2]]  # the memories credited
    assert credited(store)[ids[2]].success == 1.0 and credited(store)[ids[0]].success == 0.0


def test_cli_record_used(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    s = ("--store", f"sqlite:///{tmp_path / 'cli.db'}")
    for key, text in NOTES.items():
        assert main(["add", text, "--id", key, *s, "--encoder", "hashing"]) == 0
    capsys.readouterr()
    assert main(["recall", "reverse a python list", "-k", "2", *s, "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    ids = [r["id"] for r in got["results"]]
    assert main(["record", got["episode"], "success", "--used", "elsewhere", *s]) != 0
    assert "used" in capsys.readouterr().err
    assert main(["record", got["episode"], "success", "--used", ids[1], *s]) == 0
    capsys.readouterr()
    assert main(["show", ids[1], *s, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["success"] == 1.0
    assert main(["show", ids[0], *s, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["success"] == 0.0


def test_sidecar_and_the_adapters_report_used() -> None:
    sidecar = Sidecar.open("memory://", exploration=0.0)
    picked = sidecar.retrieve([("doc-1", 0.82), ("doc-2", 0.80), ("doc-3", 0.41)], k=2)
    with pytest.raises(ValidationError) as err:
        sidecar.record(picked.episode, success=True, used=["doc-3"])
    assert err.value.field == "used"
    sidecar.record(picked.episode, success=True, used=["doc-2"])
    assert sidecar.worth("doc-2").counts.success == 1.0 and sidecar.worth("doc-1").counts.success == 0.0

    docs = InMemoryVectorStore(DeterministicFakeEmbedding(size=32))
    docs.add_documents([Document(page_content=t, id=t) for t in ["rotate keys monthly", "keys never expire"]])
    retriever = GovernedRetriever.from_vectorstore(docs, Sidecar.open("memory://", exploration=0.0), k=2)
    found = retriever.invoke("how often do API keys rotate?")
    retriever.report(False, found[0], used=[found[1]])
    worth = {d.metadata["memworth_id"]: retriever.sidecar.worth(d.metadata["memworth_id"]).counts for d in found}
    assert worth[found[1].metadata["memworth_id"]].failure == 1.0 and worth[found[0].metadata["memworth_id"]].failure == 0.0

    inner = InMemoryStore()
    governed = GovernedStore(inner, Sidecar.open("memory://", exploration=0.0), namespace="alice")
    for key, text in NOTES.items():
        governed.put(("notes",), key, {"text": text})
    items = governed.search(("notes",), limit=2)
    governed.report(True, used=[items[0]])
    assert governed.sidecar.worth(items[0].memory_id, namespace="alice").counts.success == 1.0  # type: ignore[attr-defined]
    assert governed.sidecar.worth(items[1].memory_id, namespace="alice").counts.success == 0.0  # type: ignore[attr-defined]
