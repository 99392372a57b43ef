"""Issue 13 item 2: each outcome, and each change governance makes, names the kept settings
version it was made under; every face lists outcomes in one shape (schema 6)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient

from memworth import HashingEncoder, MemoryStore
from memworth.cli import main
from memworth.server import create_app, create_key
from memworth.store.postgres import MIGRATIONS
from tests.store.conftest import POSTGRES, drop, with_query


def test_a_version_5_postgres_store_gains_a_settings_version_per_outcome() -> None:
    schema = f"t_{uuid.uuid4().hex[:16]}"
    url = with_query(POSTGRES, schema=schema, pool_size="2")
    import psycopg

    vector = np.asarray(HashingEncoder().encode(["Rivers flow to the sea."])[0], dtype=np.float32).tobytes()
    with psycopg.connect(POSTGRES, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
        conn.execute(f'SET search_path TO "{schema}"')
        conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        for version in range(1, 6):
            for statement in MIGRATIONS[version]:
                conn.execute(statement)
        conn.execute(
            "INSERT INTO meta VALUES ('schema_version', '5'), ('generation', '0'), ('encoder', 'hashing-384'),"
            " ('dimension', '384')"
        )
        conn.execute(
            "INSERT INTO memories (namespace, id, text, metadata, contexts, status, created, updated, success, n,"
            " embedding) VALUES ('default', 'r', 'Rivers flow to the sea.', '{}', '[]', 'active', 0, 0, 1, 1, %s)",
            (vector,),
        )
        conn.execute(
            "INSERT INTO episodes (id, namespace, query, context, created) VALUES ('old', 'default', 'q', NULL, 0)"
        )
        conn.execute(
            "INSERT INTO episode_items (episode_id, position, memory_id, weight, propensity) VALUES ('old', 0, 'r', 1, 1)"
        )
        conn.execute(
            "INSERT INTO outcomes (episode_id, success, source, confidence, recorded, namespace, propagation, max_hops)"
            " VALUES ('old', TRUE, 'explicit', 1.0, 1.0, 'default', 0.7, 3)"
        )
    store = MemoryStore.open(url, encoder=HashingEncoder())
    try:
        assert store.backend.get_meta("schema_version") == "9"
        (old,) = store.backend.outcome_log()
        assert (old.episode_id, old.propagation, old.max_hops, old.settings_version) == ("old", 0.7, 3, None)
        store.record(store.recall("rivers", k=1), True)
        assert store.configure({"recall.exploration": 0.0}, actor="ops") == 1
        store.record_many([(store.recall("rivers", k=1), False)])
        assert [o.settings_version for o in store.backend.outcome_log()] == [None, 0, 1]
        assert store.get("r").counts.n == 3 and store.replay().consistent
        again = MemoryStore.open(url)  # a second open finds nothing to do
        assert again.backend.get_meta("schema_version") == "9" and again.settings_version == 1
        again.close()
    finally:
        drop(store)


def test_governance_audits_the_settings_version_it_changed_under() -> None:
    """govern, approve and restore each record the kept version in force when they acted."""
    store = MemoryStore.open("memory://", encoder=HashingEncoder(), exploration=0.0)
    v1 = store.settings_version
    store.add("Prague was the capital of Czechoslovakia.", id="cz")
    for _ in range(20):
        store.record(store.recall("capital of czechoslovakia", k=1), success=False)
    (governed,) = store.govern(apply=True).applied
    assert (governed.action, governed.settings["settings_version"]) == ("deprecate", v1)
    assert store.configure({"recall.exploration": 0.01}, actor="ops") == v1 + 1
    store.add("Rivers flow uphill in spring.", id="up")
    for _ in range(20):
        store.record(store.recall("rivers flow uphill in spring", k=1), success=False)
    approved = store.approve("up", "deprecate")
    assert approved.settings["settings_version"] == v1 + 1
    assert store.configure({"recall.exploration": 0.02}, actor="ops") == v1 + 2
    restored = store.restore(governed.seq, reason="a person disagreed")
    assert (restored.action, restored.settings["settings_version"]) == ("restore", v1 + 2)
    assert [e.settings["settings_version"] for e in store.audit()] == [v1, v1 + 1, v1 + 2]


def test_every_face_lists_outcomes_in_one_shape(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'faces.db'}"
    store = MemoryStore.open(url, encoder=HashingEncoder(), exploration=0.0, seed=0)
    try:
        store.add("Rivers flow to the sea.", id="r")
        store.record(store.recall("rivers", k=1), True)
        store.configure({"credit.propagation": 0.3}, actor="ops")
        store.record(store.recall("rivers", k=1), False, source="heuristic")
        store.record(store.recall("rivers", k=1), True)
        python = [[o.row() for o in store.outcome_page(limit=2).items]]
        python.append([o.row() for o in store.outcome_page(cursor=store.outcome_page(limit=2).next_cursor).items])
        assert [[r["settings_version"] for r in page] for page in python] == [[1, 2], [2]]
        assert python[0][1] == {
            "seq": 2,
            "episode": python[0][1]["episode"],
            "outcome": "failure",
            "source": "heuristic",
            "confidence": 0.2,
            "recorded": python[0][1]["recorded"],
            "namespace": "default",
            "propagation": 0.3,
            "max_hops": 3,
            "settings_version": 2,
        }
        client = TestClient(create_app(store))
        h = {"X-API-Key": create_key(store, "default", "agent")}
        first = client.get("/v1/outcomes", params={"limit": 2}, headers=h).json()
        second = client.get("/v1/outcomes", params={"cursor": first["next_cursor"]}, headers=h).json()
        assert [first["outcomes"], second["outcomes"]] == python and second["next_cursor"] is None
        capsys.readouterr()
        assert main(["outcomes", "--store", url, "--limit", "2", "--json"]) == 0
        cli_first = json.loads(capsys.readouterr().out)
        assert cli_first == first
        assert main(["outcomes", "--store", url, "--cursor", first["next_cursor"], "--json"]) == 0
        assert json.loads(capsys.readouterr().out) == second
        assert main(["outcomes", "--store", url]) == 0
        text = capsys.readouterr().out
        assert "settings v1" in text and "settings v2" in text and "(last page)" in text
        assert main(["outcomes", "--store", url, "--limit", "0"]) != 0
        assert "limit: must be an integer from 1 to 1000" in capsys.readouterr().err
    finally:
        store.close()
