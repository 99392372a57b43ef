"""The verification loop and pins on every face: one library call each, so the same bad input
is refused naming the same field, the same act twice is the same conflict, and nothing changes."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from mcp.server.mcpserver.exceptions import ToolError

from memworth import HashingEncoder, MemoryStore
from memworth.cli import main
from memworth.mcp_server import create_server
from memworth.server import create_app, create_key

FACTS = {
    "water": "Water boils at 100 degrees Celsius at sea level.",
    "cz": "Prague is the capital of Czechoslovakia.",
}


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MemoryStore]:
    s = MemoryStore.open(f"sqlite:///{tmp_path / 'store.db'}", encoder=HashingEncoder(), exploration=0.0, seed=0)
    s.add_many([{"id": k, "text": v} for k, v in FACTS.items()])
    s.set_standing("water", "re-verify", reason="check it")
    yield s
    s.close()


Face = Callable[..., str]
"""Calls one verb on one face; returns the field its refusal names ("" when it was done)."""


def faces(store: MemoryStore, capsys: pytest.CaptureFixture[str]) -> dict[str, Callable[[str, dict[str, Any]], str]]:
    client = TestClient(create_app(store))
    headers = {"X-API-Key": create_key(store, "default", "t")}
    server = create_server(store)
    url = store.backend.url

    def python(verb: str, args: dict[str, Any]) -> str:
        args = dict(args)
        try:
            getattr(store, verb)(args.pop("id"), *([args.pop("verdict")] if verb == "resolve" else []), **args)
        except Exception as exc:
            return str(getattr(exc, "field", None) or type(exc).__name__)
        return ""

    def http(verb: str, args: dict[str, Any]) -> str:
        args = dict(args)
        r = client.post(f"/v1/memories/{args.pop('id')}/{verb}", json=args, headers=headers)
        return "" if r.status_code == 200 else str(r.json()["error"]["field"] or r.json()["error"]["type"])

    def mcp(verb: str, args: dict[str, Any]) -> str:
        tool = {"resolve": "resolve_memory", "pin": "pin_memory", "unpin": "unpin_memory"}[verb]
        try:
            asyncio.run(server.call_tool(tool, args))
        except ToolError as exc:  # "Error executing tool t: Kind: field: reason"
            kind, field = str(exc).split(": ")[1:3]
            return field if kind == "ValidationError" else kind
        return ""

    def cli(verb: str, args: dict[str, Any]) -> str:
        args = dict(args)
        argv = [verb, args.pop("id"), *([args.pop("verdict")] if verb == "resolve" else [])]
        for name, value in args.items():
            argv += [f"--{name.replace('_', '-')}", str(value)]
        code = main([*argv, "--store", url, "--encoder", "hashing"])
        err = capsys.readouterr().err
        return "" if code == 0 else err.split("error: ")[-1].split(":")[0].strip()

    return {"python": python, "http": http, "mcp": mcp, "cli": cli}


def state(store: MemoryStore) -> list[tuple[str, str, str, int]]:
    return [(m.id, m.status, m.standing, len(store.audit(m.id))) for m in store.list()]


@pytest.mark.parametrize(
    ("args", "field"),
    [
        # what a verdict does not use was dropped unsaid (the memory was confirmed, the text lost)
        ({"id": "water", "verdict": "confirmed", "reason": "fine", "text": "Water boils at 100 C."}, "text"),
        ({"id": "water", "verdict": "stale", "reason": "gone", "text": "Water boils at 100 C."}, "text"),
    ],
)
def test_a_verdict_refuses_what_it_would_not_use_on_every_face(
    store: MemoryStore, capsys: pytest.CaptureFixture[str], args: dict[str, Any], field: str
) -> None:
    before = state(store)
    for name, face in faces(store, capsys).items():
        assert face("resolve", args) == field, name
        assert state(store) == before, name


def test_a_status_or_new_id_with_the_wrong_verdict_is_refused(store: MemoryStore) -> None:
    before = state(store)
    for args, field in [
        ({"verdict": "confirmed", "status": "deprecated"}, "status"),
        ({"verdict": "edited", "text": "Water boils at 100 C.", "status": "suppressed"}, "status"),
        ({"verdict": "stale", "new_id": "water2"}, "new_id"),
    ]:
        with pytest.raises(ValueError) as err:
            store.resolve("water", reason="why", **args)
        assert getattr(err.value, "field", None) == field
    assert state(store) == before
    assert store.resolve("water", "stale", reason="gone").new == "suppressed"  # the default status
