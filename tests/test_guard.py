"""The holdout guard: governance that makes the agent fail more is stopped and offers its rollback."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from mcp import Client

from memworth import HashingEncoder, MemoryStore
from memworth.cli import main
from memworth.errors import ValidationError
from memworth.governance.holdout_guard import HoldoutGuard
from memworth.mcp_server import create_server
from memworth.server.app import create_app
from memworth.server.dashboard.pages import governance_page
from memworth.server.dashboard.render import governance as render_governance
from memworth.server.dashboard.sessions import Viewer
from memworth.server.keys import create_key


def test_the_guard_is_anytime_valid_when_governance_is_as_good() -> None:
    # 200 runs of 3,000 episodes with equal success in both arms, looked at every 100
    rng = np.random.default_rng(7)
    fired = 0
    for _ in range(200):
        held = rng.random(3000) < 0.1
        success = rng.random(3000) < 0.6
        fired += any(HoldoutGuard().check(held[:t], success[:t], share=0.1).fired for t in range(100, 3001, 100))
    assert fired / 200 <= 0.05


def test_the_guard_finds_a_gap_and_where_governance_last_led() -> None:
    rng = np.random.default_rng(3)
    held = rng.random(4000) < 0.2
    # governance helps for 1,000 episodes (0.8 against 0.6), then hurts (0.3 against 0.6)
    p = np.where(held, 0.6, np.where(np.arange(4000) < 1000, 0.8, 0.3))
    reading = HoldoutGuard().check(held, rng.random(4000) < p, share=0.2)
    assert reading.fired and reading.lift < 0
    assert 900 <= reading.ahead <= 1100


def test_bad_guard_input_is_refused() -> None:
    with pytest.raises(ValidationError) as err:
        HoldoutGuard(alpha=1.5).check(np.zeros(3, dtype=bool), np.zeros(3, dtype=bool), share=0.1)
    assert err.value.field == "guard_alpha"
    with pytest.raises(ValidationError) as err:
        HoldoutGuard().check(np.zeros(3, dtype=bool), np.zeros(3, dtype=bool), share=0.0)
    assert err.value.field == "share"


def _store() -> MemoryStore:
    store = MemoryStore.open("memory://", encoder=HashingEncoder(), holdout=0.3, exploration=0.0, seed=1)
    store.add_many([{"id": "answer", "text": "the answer to the task"}, {"id": "other", "text": "another note"}])
    return store


def test_a_store_whose_governance_hurts_applies_nothing_and_proposes_the_rollback() -> None:
    store = _store()
    for i in range(40):  # a bad start: the answer is deprecated by governance
        ep = store.recall("the answer to the task", k=1, episode_id=f"a{i}").episode
        store.record(ep, success=False)
    first = store.govern(apply=True)
    assert first.guard is not None and not first.guard.fired
    assert [e.memory_id for e in first.applied if e.field == "status"] == ["answer"]
    for i in range(400):  # from then on governed episodes fail and held-out ones succeed
        ep = store.recall("the answer to the task", k=1, episode_id=f"b{i}").episode
        store.record(ep, success=ep.holdout)
    report = store.govern(apply=True)
    assert report.guard is not None and report.guard.fired and report.applied == []
    assert all("holdout guard" in why for _, why in report.skipped)
    (rollback,) = [p for p in report.proposals if p.action == "rollback"]
    assert rollback.memory_id == "answer" and rollback.new == "active"
    assert store.report("answer").proposal == rollback  # every face reads the same proposal
    entry = store.approve("answer", "rollback")
    assert entry.action == "rollback" and store.get("answer").status == "active"


def test_without_a_holdout_share_there_is_no_guard() -> None:
    store = MemoryStore.open("memory://", encoder=HashingEncoder())
    assert store.holdout_guard() is None and store.govern().guard is None


def test_every_face_says_the_guard_fired(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'guard.db'}"
    with MemoryStore.open(url, encoder=HashingEncoder(), holdout=0.3, exploration=0.0, seed=1) as store:
        store.add_many([{"id": "answer", "text": "the answer to the task"}, {"id": "other", "text": "another note"}])
        for i in range(40):
            store.record(store.recall("the answer to the task", k=1, episode_id=f"a{i}").episode, success=False)
        store.govern(apply=True)
        for i in range(400):
            ep = store.recall("the answer to the task", k=1, episode_id=f"b{i}").episode
            store.record(ep, success=ep.holdout)
    # the CLI opens the store by URL: the holdout share is kept with it
    assert main(["govern", "--store", url, "--json"]) == 0
    cli = json.loads(capsys.readouterr().out)
    assert cli["guard"]["fired"] and "rollback" in [p["action"] for p in cli["proposals"]]
    assert main(["holdout", "--store", url, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["guard"]["fired"]
    with MemoryStore.open(url, encoder=HashingEncoder()) as store:
        assert store.holdout == 0.3
        key = create_key(store, "default", "guard")
        with TestClient(create_app(store)) as client:
            govern = client.post("/v1/govern", json={"apply": True}, headers={"X-API-Key": key}).json()
            holdout = client.get("/v1/holdout", headers={"X-API-Key": key}).json()
        assert govern["guard"]["fired"] and govern["applied"] == [] and holdout["guard"]["fired"]

        async def mcp() -> dict[str, Any]:
            async with Client(create_server(store)) as client:
                r = await client.call_tool("governance_proposals", {})
                assert r.structured_content is not None
                return dict(r.structured_content)

        assert asyncio.run(mcp())["guard"]["fired"]
        page = governance_page(store, "default")
        assert page.guard is not None and page.guard.fired
        assert 'id="guard"' in render_governance(page, Viewer("default", None), "")
