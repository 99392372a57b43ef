"""One answer per question: every face shows the same class, worth and proposal for a memory.

Python (:meth:`MemoryStore.report`), the CLI (``memworth worth --json``), HTTP (``/worth``),
MCP (the ``worth`` tool, in process), the sidecar and the dashboard's memory page read
one store governed under a policy with its own thresholds, kept with the store: the
faces that open the store by URL (the CLI) must find that policy there.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from mcp import Client

from memworth import HashingEncoder, MemoryStore, Sidecar
from memworth.cli import main
from memworth.governance import GovernancePolicy
from memworth.mcp_server import create_server
from memworth.server.app import create_app
from memworth.server.dashboard.pages import memory_page
from memworth.server.keys import create_key

POLICY = GovernancePolicy(theta_low=0.2, theta_high=0.45, promote_above=0.6)
"""Thresholds other than the defaults: a face that classifies with its own would disagree."""


def fill(store: MemoryStore) -> None:
    """Memories in every class and standing: high and promotable, mixed (low under the
    default thresholds), low and deprecated-worthy, uncertain, one whose success rate broke
    (only the change detectors see it), and one promoted, one demoted by hand."""
    ids = ["good", "middling", "bad", "new", "broke", "boosted", "lowered"]
    store.add_many([{"id": i, "text": f"memory {i}"} for i in ids])
    helper = Sidecar(store)
    plan = {
        "good": [True] * 18 + [False] * 2,
        "middling": [True] * 7 + [False] * 13,  # worth 0.35: mixed here, low under the defaults
        "bad": [False] * 36 + [True],  # enough for the namespace's error-controlled test
        "new": [True, False],
        "broke": [True] * 40 + [False] * 14,
        "boosted": [True] * 6 + [False] * 6,
        "lowered": [True] * 6 + [False] * 6,
    }
    step = 0
    while any(plan.values()):
        for mid, outcomes in plan.items():
            if outcomes:
                episode = helper.retrieved([mid], query=f"task {step}")
                store.record(episode, outcomes.pop(0))
                step += 1
    store.set_standing("boosted", "promoted", reason="a person vouched for it")
    store.set_standing("lowered", "demoted", reason="a person doubted it")


@pytest.fixture
def url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'truth.db'}"
    with MemoryStore.open(url, encoder=HashingEncoder(), exploration=0.0, policy=POLICY) as store:
        fill(store)
    return url


def cli_report(capsys: pytest.CaptureFixture[str], url: str, memory_id: str) -> dict[str, Any]:
    assert main(["worth", memory_id, "--store", url, "--json"]) == 0
    return dict(json.loads(capsys.readouterr().out))


async def mcp_reports(store: MemoryStore, ids: list[str]) -> dict[str, dict[str, Any]]:
    async with Client(create_server(store)) as client:
        out = {}
        for mid in ids:
            r = await client.call_tool("worth", {"id": mid})
            assert not r.is_error, r.content
            assert r.structured_content is not None
            out[mid] = r.structured_content
        return out


def essence(row: dict[str, Any]) -> tuple[Any, ...]:
    p = row["proposal"]
    return (row["class"], round(row["worth"], 12), None if p is None else (p["action"], p["reason"]))


def test_every_face_gives_the_same_class_worth_and_proposal(capsys: pytest.CaptureFixture[str], url: str) -> None:
    with MemoryStore.open(url) as store:  # no policy given: the one the store keeps
        assert store.policy == POLICY and store.policy_record() is not None
        python = {r.id: r.row() for r in store.reports()}
        ids = list(python)
        governed = {p.memory_id: (p.action, p.reason) for p in store.govern().proposals}
        key = create_key(store, "default", "truth")
        with TestClient(create_app(store)) as client:
            http = {
                mid: client.get(f"/v1/memories/{mid}/worth", headers={"X-API-Key": key}).json() for mid in ids
            }
        mcp = asyncio.run(mcp_reports(store, ids))
        sidecar = {r.id: r.row() for r in Sidecar(store).worth_many(ids)}
        pages = {mid: memory_page(store, mid, "default") for mid in ids}
    cli = {mid: cli_report(capsys, url, mid) for mid in ids}

    # the store covers what the test claims to cover
    classes = {row["class"] for row in python.values()}
    actions = {row["proposal"]["action"] for row in python.values() if row["proposal"]}
    assert {"high", "mixed", "low", "uncertain"} <= classes
    assert {"promote", "deprecate", "re-verify"} <= actions
    assert python["middling"]["class"] == "mixed"  # the policy's thresholds, not the defaults
    assert python["broke"]["proposal"]["action"] == "re-verify"  # seen by the change detector alone

    for mid in ids:
        want = essence(python[mid])
        assert essence(cli[mid]) == want, mid
        assert essence(http[mid]) == want, mid
        assert essence(mcp[mid]) == want, mid
        assert essence(sidecar[mid]) == want, mid
        page = pages[mid]
        shown = None if page.proposal is None else (page.proposal.action, page.proposal.reason)
        assert (page.klass.value_class.value, shown) == (want[0], want[2]), mid
        assert governed.get(mid) == want[2], mid  # govern() proposes exactly what the report shows
        assert http[mid] == cli[mid] == python[mid], mid  # one JSON shape, field for field


def test_the_kept_policy_is_versioned_and_replaced_by_a_new_one(url: str) -> None:
    with MemoryStore.open(url) as store:
        assert store.policy_record()["version"] == 1
        assert store.set_policy(POLICY) == 1  # the same settings: no new version
        lenient = GovernancePolicy(theta_low=0.1, theta_high=0.45, promote_above=0.6)
        assert store.set_policy(lenient) == 2
        assert [v["version"] for v in store.policy_history()] == [1, 2]
    with MemoryStore.open(url) as store:
        assert store.policy == lenient
