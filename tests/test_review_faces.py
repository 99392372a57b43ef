"""The verification loop and pins on every face: one library call each, so the same bad input
is refused naming the same field, the same act twice is the same conflict, and nothing changes."""

from __future__ import annotations

import asyncio
import json
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


Refusal = tuple[str, str] | None
"""What one face said to one call: None when it was done, else (the field its refusal names,
or "" for a refusal that names none, and its message)."""


def faces(
    store: MemoryStore, capsys: pytest.CaptureFixture[str]
) -> dict[str, Callable[[str, dict[str, Any]], Refusal]]:
    client = TestClient(create_app(store))
    headers = {"X-API-Key": create_key(store, "default", "t")}
    server = create_server(store)
    url = store.backend.url

    def python(verb: str, args: dict[str, Any]) -> Refusal:
        args = dict(args)
        try:
            getattr(store, verb)(args.pop("id"), *([args.pop("verdict")] if verb == "resolve" else []), **args)
        except Exception as exc:
            return str(getattr(exc, "field", None) or ""), str(exc)
        return None

    def http(verb: str, args: dict[str, Any]) -> Refusal:
        args = dict(args)
        r = client.post(f"/v1/memories/{args.pop('id')}/{verb}", json=args, headers=headers)
        error = r.json().get("error") if r.status_code != 200 else None
        return None if error is None else (str(error["field"] or ""), str(error["reason"]))

    def mcp(verb: str, args: dict[str, Any]) -> Refusal:
        tool = {"resolve": "resolve_memory", "pin": "pin_memory", "unpin": "unpin_memory"}[verb]
        try:
            asyncio.run(server.call_tool(tool, args))
        except ToolError as exc:  # "Error executing tool t: Kind: field: reason"
            kind, field, reason = str(exc).split(": ", 3)[1:]
            return (field if kind == "ValidationError" else ""), reason
        return None

    def cli(verb: str, args: dict[str, Any]) -> Refusal:
        args = dict(args)
        argv = [verb, args.pop("id"), *([args.pop("verdict")] if verb == "resolve" else [])]
        for name, value in args.items():
            argv += [f"--{name.replace('_', '-')}", str(value)]
        code = main([*argv, "--store", url, "--encoder", "hashing"])
        said = capsys.readouterr().err.split("error: ", 1)[-1].strip()
        field, _, reason = said.partition(": ")
        return None if code == 0 else ((field, reason) if reason and " " not in field else ("", said))

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
        said = face("resolve", args)
        assert said is not None and said[0] == field, (name, said)
        assert state(store) == before, name


def test_unpinning_what_no_pin_holds_or_pinning_twice_is_the_same_conflict_on_every_face(
    store: MemoryStore, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before, each face wrote an audit entry that changed nothing."""
    for name, face in faces(store, capsys).items():
        entries = len(store.audit("cz"))
        said = face("unpin", {"id": "cz", "reason": "never pinned"})
        assert said is not None and said[0] == "" and "is not pinned" in said[1], (name, said)
        assert face("pin", {"id": "cz", "reason": "keep it"}) is None, name
        said = face("pin", {"id": "cz", "reason": "again"})
        assert said is not None and "pinned until unpinned already" in said[1], (name, said)
        assert face("unpin", {"id": "cz", "reason": "let go"}) is None, name
        assert len(store.audit("cz")) == entries + 2, name  # the pin and the unpin, nothing for the refusals


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


def test_every_face_resolves_stale_as_deprecated_and_edited_under_a_chosen_id(
    store: MemoryStore, capsys: pytest.CaptureFixture[str]
) -> None:
    """The library's whole verdict on each face: before, MCP's resolve_memory took neither a
    status nor a new id, so an agent could only suppress, and its edits got generated ids."""
    for name, face in faces(store, capsys).items():
        old, stale = f"old-{name}", f"stale-{name}"
        store.add_many([{"id": old, "text": f"Prague ({name}) was a capital."}, {"id": stale, "text": "Gone."}])
        for mid in (old, stale):
            store.set_standing(mid, "re-verify", reason="check it")
        assert face("resolve", {"id": stale, "verdict": "stale", "reason": "gone", "status": "deprecated"}) is None
        edited = {
            "id": old,
            "verdict": "edited",
            "reason": "reworded",
            "text": f"Prague ({name}).",
            "new_id": f"new-{name}",
        }
        assert face("resolve", edited) is None, name
        assert store.get(stale).status == "deprecated", name
        assert store.get(f"new-{name}").derived_from == (old,) and store.get(old).status == "archived", name


def test_a_probe_is_marked_in_the_recall_of_every_face(store: MemoryStore, capsys: pytest.CaptureFixture[str]) -> None:
    """A quarantined memory served as a probe says so wherever recall answers: before,
    ``memworth recall`` (text and --json) left the mark out, so a person at the shell saw a
    quarantined memory as an ordinary answer."""
    store.configure({"recall.probe_share": 1.0}, actor="test")  # kept: every face opens it so
    query = {"query": "water boils degrees celsius sea level", "k": 1}
    (recalled,) = store.recall(query["query"], k=1).results
    assert recalled.memory.id == "water" and recalled.probe
    http = TestClient(create_app(store)).post(
        "/v1/recall", json=query, headers={"X-API-Key": create_key(store, "default", "t")}
    )
    mcp = asyncio.run(create_server(store).call_tool("recall", query)).structured_content
    assert main(["recall", query["query"], "-k", "1", "--json", "--store", store.backend.url]) == 0
    cli = json.loads(capsys.readouterr().out)
    assert main(["recall", query["query"], "-k", "1", "--store", store.backend.url]) == 0
    text = capsys.readouterr().out
    assert mcp is not None
    rows = {"http": http.json()["results"][0], "mcp": mcp["results"][0], "cli": cli["results"][0]}
    for name, row in rows.items():
        assert (row["id"], row.get("probe")) == ("water", True), name
        assert set(row) == set(rows["http"]), name
    assert "(probe: quarantined, treat with doubt)  water:" in text


def test_every_face_names_who_gave_a_verdict_or_pinned(store: MemoryStore, capsys: pytest.CaptureFixture[str]) -> None:
    """A verdict is a person's decision that sticks; its audit entry names who gave it, as a
    status set by hand does. Before, no face recorded anyone, and a person's verdict and the
    verifier's differed only in a reason a person could type too."""
    expected = {"python": "alice", "http": "alice (api key t)", "mcp": "alice", "cli": "alice"}
    for name, face in faces(store, capsys).items():
        mid = f"m-{name}"
        store.add(f"A fact seen through {name}.", id=mid)
        store.set_standing(mid, "re-verify", reason="check it")
        assert face("resolve", {"id": mid, "verdict": "confirmed", "reason": "fine", "actor": "alice"}) is None
        assert face("pin", {"id": mid, "reason": "keep", "actor": "alice"}) is None
        assert face("unpin", {"id": mid, "reason": "let go", "actor": "alice"}) is None
        entries = [e for e in store.audit(mid) if e.action in ("resolve", "pin", "unpin")]
        assert [e.settings.get("actor") for e in entries] == [expected[name]] * 3, name


def test_the_verifiers_verdict_names_the_verifier(tmp_path: Path) -> None:
    s = MemoryStore.open(
        f"sqlite:///{tmp_path / 'v.db'}", encoder=HashingEncoder(), verifier=lambda report: "confirmed", seed=0
    )
    s.add("Water boils at 100 degrees Celsius at sea level.", id="water")
    s.set_standing("water", "re-verify", reason="check it")
    (entry,) = s.govern(apply=True).applied
    assert entry.action == "resolve" and entry.settings["actor"] == "verifier"
    s.close()


def test_continuous_governance_counts_the_outcomes_memworth_record_reports(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each ``memworth record`` opens a store object, records one outcome and closes. Before,
    each object counted only its own outcomes towards ``govern_every``, so a store whose
    outcomes came through the CLI (or any short-lived worker) never governed itself, while
    the same outcomes through one Python store object suppressed the memory."""
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    s = MemoryStore.open(url, encoder=HashingEncoder(), exploration=0.0, govern_every=5, seed=0)
    s.add_many([{"id": k, "text": v} for k, v in FACTS.items()])
    s.add("Water boils at 100 degrees Celsius at sea level, always.", id="spare")
    for _ in range(15):
        assert main(["recall", "capital of czechoslovakia", "-k", "1", "--json", "--store", url]) == 0
        episode = json.loads(capsys.readouterr().out)["episode"]
        assert main(["record", episode, "failure", "--store", url]) == 0
        capsys.readouterr()
    assert s.get("cz").status == "suppressed"
    assert [e.action for e in s.audit("cz")] == ["suppress"]
    s.close()


def test_two_store_objects_past_the_same_threshold_govern_once(tmp_path: Path) -> None:
    """Continuous governance runs once per ``govern_every`` outcomes whichever objects logged
    them. Before, an object that had started counting went on counting its own outcomes after
    another object's round, and governed again right after it (found in review: rounds at 10
    and 11 outcomes with ``govern_every`` 5)."""
    url = f"sqlite:///{tmp_path / 'two.db'}"
    a = MemoryStore.open(url, encoder=HashingEncoder(), exploration=0.0, govern_every=5, seed=0)
    b = MemoryStore.open(url, encoder=HashingEncoder(), exploration=0.0, govern_every=5, seed=0)
    a.add_many([{"id": k, "text": v} for k, v in FACTS.items()])
    rounds: list[tuple[str, int]] = []
    for name, s in (("a", a), ("b", b)):
        govern = s._govern

        def counted(namespace: str, *args: Any, _s: MemoryStore = s, _name: str = name, _g: Any = govern) -> Any:
            rounds.append((_name, _s.backend.outcome_count(namespace)))
            return _g(namespace, *args)

        setattr(s, "_govern", counted)  # noqa: B010 (a method replaced on one object)

    def record(s: MemoryStore, n: int) -> None:
        for _ in range(n):
            s.record(s.recall("water boils at sea level", k=1), success=True)

    record(a, 1)
    record(b, 9)  # b's first record counts a's outcome too: b governs at 5 and 10
    record(a, 4)  # a counted 1, then 4 of its own: 15 in all, 5 since b's last round
    record(a, 1)
    assert rounds == [("b", 5), ("b", 10), ("a", 15)]
    a.close()
    b.close()


def test_every_face_names_who_approved_or_undid_a_change(
    store: MemoryStore, capsys: pytest.CaptureFixture[str]
) -> None:
    """An approval and a restore are a person's decisions that stick, like a verdict: their
    audit entries name who made them (before, no face recorded anyone)."""
    client = TestClient(create_app(store))
    headers = {"X-API-Key": create_key(store, "default", "t")}
    undone = []
    for name in ("python", "http", "cli"):
        entry = store.set_status("cz", "suppressed", reason=f"by hand before {name}")
        if name == "python":
            undone.append(store.restore(entry.seq, reason="undo", actor="alice"))
        elif name == "http":
            r = client.post(
                f"/v1/audit/{entry.seq}/restore", json={"reason": "undo", "actor": "alice"}, headers=headers
            )
            assert r.status_code == 200, r.text
            undone.append(store.audit("cz")[-1])
        else:
            assert main(["restore", str(entry.seq), "--actor", "alice", "--store", store.backend.url]) == 0
            capsys.readouterr()
            undone.append(store.audit("cz")[-1])
    assert [e.action for e in undone] == ["restore"] * 3
    assert [e.settings.get("actor") for e in undone] == ["alice", "alice (api key t)", "alice"]
    store.unpin("cz", reason="let governance decide")
    for _ in range(20):
        store.record(store.recall("capital of czechoslovakia", k=1), success=False)
    action = store.report("cz").proposal.action
    assert store.approve("cz", action, actor="bob").settings["actor"] == "bob"


def test_one_reason_limit_on_every_face(store: MemoryStore, capsys: pytest.CaptureFixture[str]) -> None:
    """Before, HTTP and MCP refused a reason over 2,000 characters while Python and the CLI took
    32,768: what a person could write depended on the face. Now one limit (``MAX_REASON``,
    defined once in the library) and one refusal, naming the field and the limit, everywhere."""
    from memworth.validation import MAX_REASON

    longest, over = "r" * MAX_REASON, "r" * (MAX_REASON + 1)
    for name, face in faces(store, capsys).items():
        before = state(store)
        for verb in ("pin", "unpin"):
            said = face(verb, {"id": "cz", "reason": over})
            assert said is not None and said[0] == "reason", (name, verb, said)
            assert f"is {MAX_REASON + 1} characters; the limit is {MAX_REASON}" in said[1], (name, verb, said)
        said = face("resolve", {"id": "water", "verdict": "confirmed", "reason": over})
        assert said is not None and said[0] == "reason" and f"the limit is {MAX_REASON}" in said[1], (name, said)
        assert state(store) == before, name
        assert face("pin", {"id": "cz", "reason": longest}) is None, name
        assert face("unpin", {"id": "cz", "reason": longest}) is None, name
    client = TestClient(create_app(store))
    headers = {"X-API-Key": create_key(store, "default", "t")}
    r = client.delete("/v1/memories/cz", params={"reason": over}, headers=headers)
    assert r.status_code == 422 and r.json()["error"]["field"] == "reason", r.text
    assert f"the limit is {MAX_REASON}" in r.json()["error"]["reason"]
    with pytest.raises(ValueError, match=f"the limit is {MAX_REASON}"):
        store.set_status("cz", "suppressed", reason=over)
    entry = store.set_status("cz", "suppressed", reason=longest)
    assert store.restore(entry.seq, reason=longest).reason == f"{longest} (undoes entry {entry.seq}: set-status)"


def test_a_pin_from_any_face_while_govern_runs_stops_its_change(
    store: MemoryStore, capsys: pytest.CaptureFixture[str]
) -> None:
    """A person pins a memory on some face after a govern read the audit log and before it
    writes. Before, the change was written anyway (a pin is an audit entry, and govern's
    write checked only the status and standing it had read); now every face's pin stops it."""
    store.add("Prague was the capital of Czechoslovakia, a country gone since 1993.", id="gone")
    for _ in range(25):
        store.record(store.recall("capital of czechoslovakia country gone", k=1), success=False)
    assert store.report("gone").proposal.action == "deprecate"
    change = store.backend.change
    for name, face in faces(store, capsys).items():
        pinned: list[bool] = []

        def pin_first(entry: Any, _face: Any = face, pinned: list[bool] = pinned) -> Any:
            if entry.action == "deprecate" and not pinned:
                pinned.append(True)
                assert _face("pin", {"id": "gone", "reason": "a person keeps it"}) is None
            return change(entry)

        monkey = pytest.MonkeyPatch()
        monkey.setattr(store.backend, "change", pin_first)
        try:
            report = store.govern(apply=True)
        finally:
            monkey.undo()
        assert pinned and store.get("gone").status == "active", name
        (why,) = [why for p, why in report.skipped if p.memory_id == "gone"]
        assert why.startswith("pinned by a person while govern ran"), (name, why)
        store.unpin("gone", reason="let governance decide")
