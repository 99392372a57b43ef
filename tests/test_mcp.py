"""``memworth mcp`` end to end, driven by the official SDK's own client over stdio and streamable HTTP.

Each test launches the real command in a subprocess against a throwaway SQLite file, talks
to it only through MCP, and afterwards opens the file with :class:`MemoryStore` to check
what the calls wrote, and that the refused calls wrote nothing.
"""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp_types import TextResourceContents

from memworth import MemoryStore
from memworth.mcp_server import memory_uri

TOOLS = {
    "remember",
    "recall",
    "report_outcome",
    "worth",
    "governance_proposals",
    "verification_queue",
    "resolve_memory",
    "pin_memory",
    "unpin_memory",
    "forget_memory",
    "edit_memory",
    "set_memory_status",
}
GUARD = 180  # seconds: a hung server fails the test instead of hanging CI (not a timing check)


def mcp_args(url: str, *extra: str) -> list[str]:
    return ["-m", "memworth.cli", "mcp", "--store", url, "--encoder", "hashing", *extra]


async def ok(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    r = await client.call_tool(tool, arguments)
    assert not r.is_error, r.content
    assert r.structured_content is not None
    return r.structured_content


async def refused(client: Client, tool: str, arguments: dict[str, Any]) -> str:
    r = await client.call_tool(tool, arguments)
    assert r.is_error, r.structured_content
    text = r.content[0].text
    assert text.startswith(f"Error executing tool {tool}: ") and "Traceback" not in text
    return str(text)


async def stdio_session(url: str, errlog: Any) -> dict[str, Any]:
    """Everything the stdio test does through MCP; returns what it saw, for the database checks."""
    params = StdioServerParameters(command=sys.executable, args=mcp_args(url))
    seen: dict[str, Any] = {"outcomes": []}
    async with Client(stdio_client(params, errlog=errlog), read_timeout_seconds=GUARD) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert set(tools) == TOOLS
        for t in tools.values():
            assert t.input_schema["type"] == "object" and t.description and t.output_schema
        assert tools["remember"].input_schema["required"] == ["text"]
        assert set(tools["report_outcome"].input_schema["required"]) == {"episode", "outcome"}
        assert tools["report_outcome"].input_schema["properties"]["outcome"]["enum"] == ["success", "failure"]

        m = await ok(
            client,
            "remember",
            {
                "text": "Use list.reverse() to reverse a Python list in place.",
                "id": "reverse",
                "contexts": ["python"],
                "metadata": {"source": "docs"},
            },
        )
        assert (m["worth"], m["class"], m["counts"]["retrievals"]) == (0.5, "uncertain", 0)
        assert (m["contexts"], m["metadata"]) == (["python"], {"source": "docs"})
        await ok(client, "remember", {"text": "Prague is the capital of the Czech Republic.", "id": "prague"})
        m = await ok(
            client,
            "remember",
            {
                "text": "Slicing a Python list with [::-1] returns a reversed copy.",
                "id": "slice",
                "derived_from": ["reverse"],
            },
        )
        assert m["derived_from"] == ["reverse"]

        # Three memories, k=3: all three come back whatever the exploration draws.
        r = await ok(client, "recall", {"query": "how do I reverse a python list", "k": 3})
        assert sorted(x["id"] for x in r["results"]) == ["prague", "reverse", "slice"]
        for x in r["results"]:
            assert {"similarity", "worth", "lower", "upper", "class", "score", "propensity"} <= set(x)
            assert x["worth"] == 0.5 and x["lower"] == 0.0 and x["upper"] == 1.0
        first = r["episode"]
        out = await ok(client, "report_outcome", {"episode": first, "outcome": "success"})
        assert out["confidence"] == 1.0 and sorted(c["id"] for c in out["memories"]) == ["prague", "reverse", "slice"]
        seen["outcomes"].append(first)

        w = await ok(client, "worth", {"id": "prague"})
        assert w["worth"] == 1.0 > 0.5 and w["evidence"] == 1 and w["counts"]["retrievals"] == 1
        assert w["counts"]["success"] == pytest.approx(1 / 3) and w["interval"]["lower"] > 0.0
        assert (w["status"], w["standing"], w["class"]) == ("active", "normal", "uncertain")
        # "slice" was derived from "reverse": the success also flowed to "reverse" (x 0.7), adding no retrieval.
        w = await ok(client, "worth", {"id": "reverse"})
        assert w["counts"]["success"] == pytest.approx(1 / 3 + 0.7 / 3) and w["counts"]["retrievals"] == 1

        # Failures for the Prague memory until it has enough evidence to govern (recall explores a
        # low-evidence memory now and then, so count its own retrievals rather than the loop).
        while (await ok(client, "worth", {"id": "prague"}))["counts"]["retrievals"] < 25:
            r = await ok(client, "recall", {"query": "capital of the czech republic", "k": 1})
            picked = r["results"][0]["id"]
            w_before = (await ok(client, "worth", {"id": picked}))["worth"]
            await ok(client, "report_outcome", {"episode": r["episode"], "outcome": "failure", "source": "explicit"})
            seen["outcomes"].append(r["episode"])
            w_after = (await ok(client, "worth", {"id": picked}))["worth"]
            assert w_after < w_before  # a failure moves worth down
            assert len(seen["outcomes"]) < 60
        w = await ok(client, "worth", {"id": "prague"})
        assert w["worth"] < 0.3 and w["class"] == "low" and w["proposal"]["action"] == "deprecate"
        seen["prague"] = w["counts"]

        g = await ok(client, "governance_proposals", {})
        assert g["applied"] is False
        p = next(p for p in g["proposals"] if p["memory_id"] == "prague")
        assert (p["action"], p["field"], p["old"], p["new"]) == ("deprecate", "status", "active", "deprecated")
        assert p["numbers"]["retrievals"] == 25 and p["numbers"]["worth"] < 0.3 and "worth" in p["reason"]
        assert (await ok(client, "worth", {"id": "prague"}))["status"] == "active"  # proposed, not applied

        res = await client.read_resource("memworth://memories/slice")
        as_json = json.loads(res.contents[0].text)
        assert as_json["id"] == "slice" and as_json["derived_from"] == ["reverse"] and "class" in as_json

        # Refused calls: a tool error naming the field and the reason, nothing written.
        text = await refused(client, "report_outcome", {"episode": first, "outcome": "failure"})
        assert "DuplicateError: episode: " in text and "already has an outcome" in text
        text = await refused(client, "report_outcome", {"episode": "no-such-episode", "outcome": "success"})
        assert "UnknownEpisodeError: episode: unknown episode id: 'no-such-episode'" in text
        fresh = (await ok(client, "recall", {"query": "reverse a list", "k": 2}))["episode"]
        seen["unrecorded"] = fresh
        text = await refused(client, "report_outcome", {"episode": fresh, "outcome": "maybe"})
        assert "ValidationError: outcome: " in text and "'success' or 'failure'" in text
        text = await refused(client, "report_outcome", {"episode": fresh, "outcome": "success", "source": "rumour"})
        assert "ValidationError: source: unknown source 'rumour'" in text
        text = await refused(client, "report_outcome", {"episode": fresh, "outcome": "success", "confidence": 1.5})
        assert "ValidationError: confidence: " in text
        assert "ValidationError: text: " in await refused(client, "remember", {"text": "", "id": "empty"})
        assert "ValidationError: text: must not be empty" in await refused(
            client, "remember", {"text": "   ", "id": "blank"}
        )
        assert "ValidationError: text: Field required" in await refused(client, "remember", {"id": "no-text"})
        text = await refused(client, "remember", {"text": "An orphan.", "id": "orphan", "derived_from": ["ghost"]})
        assert "UnknownMemoryError: derived_from: unknown memory id: 'ghost'" in text
        assert "DuplicateError: id: " in await refused(client, "remember", {"text": "Again.", "id": "reverse"})
        assert "ValidationError: metadata: " in await refused(
            client, "remember", {"text": "x", "metadata": {"blob": "x" * 70_000}}
        )
        assert "ValidationError: k: " in await refused(client, "recall", {"query": "python", "k": 0})
        assert "ValidationError: k: " in await refused(client, "recall", {"query": "python", "k": "3"})
        assert "UnknownMemoryError: id: unknown memory id: 'ghost'" in await refused(client, "worth", {"id": "ghost"})
        assert "ValidationError: id: " in await refused(client, "worth", {"id": " padded "})
    return seen


def test_stdio_end_to_end(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'm.db'}"
    with (tmp_path / "server.log").open("w") as errlog:
        seen = asyncio.run(asyncio.wait_for(stdio_session(url, errlog), GUARD))
    with MemoryStore.open(url) as store:
        memories = {m.id: m for m in store.list()}
        assert sorted(memories) == ["prague", "reverse", "slice"]  # nothing from the refused remembers
        assert memories["reverse"].contexts == ("python",) and memories["slice"].derived_from == ("reverse",)
        log = list(store.backend.outcome_log())
        assert [o.episode_id for o in log] == seen["outcomes"]  # one each; none for the refused reports
        assert [o.success for o in log] == [True] + [False] * (len(log) - 1)
        assert seen["unrecorded"] not in {o.episode_id for o in log}
        c = memories["prague"].counts
        assert (c.success, c.failure, c.n) == (
            seen["prague"]["success"],
            seen["prague"]["failure"],
            seen["prague"]["retrievals"],
        )
        assert store.audit() == []  # governance was proposed, never applied
        assert store.replay().consistent
    assert "Traceback" not in (tmp_path / "server.log").read_text()


# Ids a URI must encode: "/", "%" (also before hex digits), spaces, Unicode, "?" and "#", and
# ids the SDK's path checks would take for file paths ("..", "../x", "/x", "C:x", "\\x").
ODD_IDS = ["notes/2024", "a/b/c", "50%", "x%41", "with space", "café ☕ 日本", "?q#f"]
ODD_IDS += ["..", ".", "../up", "/abs", "C:x", "\\x"]


async def resource_session(url: str, errlog: Any) -> None:
    params = StdioServerParameters(command=sys.executable, args=mcp_args(url))
    async with Client(stdio_client(params, errlog=errlog), read_timeout_seconds=GUARD) as client:
        (template,) = (await client.list_resource_templates()).resource_templates
        assert template.uri_template == "memworth://memories/{memory_id}" and "%2F" in (template.description or "")

        async def read(uri: str) -> dict[str, Any]:
            (content,) = (await client.read_resource(uri)).contents
            assert isinstance(content, TextResourceContents) and content.mime_type == "application/json"
            return dict(json.loads(content.text))

        for i, memory_id in enumerate(ODD_IDS):
            await ok(client, "remember", {"text": f"Odd id number {i}.", "id": memory_id})
        await ok(client, "remember", {"text": "The parent of a/b/c.", "id": "a"})
        for i, memory_id in enumerate(ODD_IDS):
            got = await read(memory_uri(memory_id))
            assert (got["id"], got["text"]) == (memory_id, f"Odd id number {i}."), memory_uri(memory_id)
        assert memory_uri("notes/2024") == "memworth://memories/notes%2F2024"
        assert memory_uri("50%") == "memworth://memories/50%25"
        # Clients that do not encode still reach the memory: a memory has no sub-resources.
        assert (await read("memworth://memories/a/b/c"))["id"] == "a/b/c"
        assert (await read("memworth://memories/café ☕ 日本"))["id"] == "café ☕ 日本"
        assert (await read("memworth://memories/a"))["text"] == "The parent of a/b/c."
        # Decoded once: "%2541" is the id "x%41", never "xA".
        assert (await read("memworth://memories/x%2541"))["id"] == "x%41"
        for uri, message in (
            ("memworth://memories/a%2Fb", "unknown memory id: 'a/b'"),
            ("memworth://memories/%FF", "ValidationError: memory_id: must be UTF-8 once percent-decoded"),
            ("memworth://memories/%20padded", "ValidationError: id: "),
        ):
            with pytest.raises(MCPError, match=message):
                await read(uri)


def test_the_memory_resource_reads_any_id(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'r.db'}"
    with (tmp_path / "server.log").open("w") as errlog:
        asyncio.run(asyncio.wait_for(resource_session(url, errlog), GUARD))
    assert "Traceback" not in (tmp_path / "server.log").read_text()
    with MemoryStore.open(url) as store:
        assert sorted(m.id for m in store.list()) == sorted([*ODD_IDS, "a"])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_port(proc: subprocess.Popen[bytes], port: int, log: Path) -> None:
    deadline = time.monotonic() + GUARD
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"memworth mcp exited early:\n{log.read_text()}"
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise AssertionError(f"memworth mcp never listened on {port}:\n{log.read_text()}")


async def http_session(endpoint: str) -> str:
    async with Client(endpoint, read_timeout_seconds=GUARD) as client:
        assert {t.name for t in (await client.list_tools()).tools} == TOOLS
        await ok(client, "remember", {"text": "Run pytest with -x to stop at the first failure.", "id": "pytest-x"})
        await ok(client, "remember", {"text": "Paris is the capital of France.", "id": "paris"})
        r = await ok(client, "recall", {"query": "stop pytest at the first failure", "k": 2})
        assert sorted(x["id"] for x in r["results"]) == ["paris", "pytest-x"]
        await ok(client, "report_outcome", {"episode": r["episode"], "outcome": "failure", "source": "implicit"})
        w = await ok(client, "worth", {"id": "pytest-x"})
        assert w["worth"] == 0.0 < 0.5 and w["counts"]["failure"] == pytest.approx(0.5 * 0.5)
        assert w["counts"]["retrievals"] == 1
        assert "UnknownEpisodeError: episode: " in await refused(
            client, "report_outcome", {"episode": "nope", "outcome": "success"}
        )
        # Concurrent calls: the SDK runs tools on worker threads; the server's lock keeps the store whole.
        notes = [{"text": f"Note {i}: pytest fixtures can be scoped per module.", "id": f"note-{i}"} for i in range(8)]
        await asyncio.gather(*(ok(client, "remember", note) for note in notes))
        return str(r["episode"])


def test_streamable_http_round_trip(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'h.db'}"
    port = free_port()
    log = tmp_path / "server.log"
    with log.open("w") as errlog:
        cmd = [sys.executable, *mcp_args(url, "--transport", "streamable-http", "--port", str(port))]
        with subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=errlog) as proc:
            try:
                wait_for_port(proc, port, log)
                episode = asyncio.run(asyncio.wait_for(http_session(f"http://127.0.0.1:{port}/mcp"), GUARD))
            finally:
                proc.terminate()
                code = proc.wait(timeout=60)
    assert code == 0, log.read_text()  # SIGTERM: a graceful shutdown that closed the store
    assert "Traceback" not in log.read_text()
    with MemoryStore.open(url) as store:
        assert sorted(m.id for m in store.list()) == sorted(["paris", "pytest-x"] + [f"note-{i}" for i in range(8)])
        assert [(o.episode_id, o.success, o.source) for o in store.backend.outcome_log()] == [
            (episode, False, "implicit")
        ]
