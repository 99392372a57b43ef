"""API keys over HTTP: how a request's key is read (one key, Bearer, WWW-Authenticate on 401),
read-only keys (403 on any change), expiry and revocation (401 saying which)."""

from __future__ import annotations

import json
import re
import time
from datetime import datetime
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from memworth import HashingEncoder, MemoryStore
from memworth.errors import ConflictError
from memworth.server import create_app, create_key
from memworth.server.keys import list_keys, revoke


def error(r: object, status: int) -> dict[str, object]:
    assert r.status_code == status, r.text  # type: ignore[attr-defined]
    body = r.json()  # type: ignore[attr-defined]
    assert body["ok"] is False and body["error"]["status"] == status
    return dict(body["error"])


def test_a_401_names_the_bearer_scheme(client: TestClient, store: MemoryStore) -> None:
    for headers in ({}, {"Authorization": "Bearer mw_unknown"}, {"X-API-Key": "nope"}):
        r = client.get("/v1/memories", headers=headers)
        error(r, 401)
        assert r.headers["www-authenticate"].startswith("Bearer")
    assert "www-authenticate" not in client.get("/health").headers


def test_another_scheme_than_bearer_carries_no_key(client: TestClient, store: MemoryStore) -> None:
    key = create_key(store, "team", "agent")
    e = error(client.get("/v1/memories", headers={"Authorization": f"Basic {key}"}), 401)
    assert e["field"] == "Authorization" and "Bearer" in str(e["reason"]) and "the Basic scheme" in str(e["reason"])
    proxied = {"Authorization": "Basic dXNlcjpwYXNz", "X-API-Key": key}  # a proxy's own sign-in, and the key
    assert client.get("/v1/memories", headers=proxied).status_code == 200
    signed = client.post("/dashboard/login", data={"key": key, "next": "/dashboard"}, follow_redirects=False)
    assert signed.status_code == 303
    assert client.get("/dashboard", headers={"Authorization": "Basic dXNlcjpwYXNz"}).status_code == 200  # the session
    assert client.get("/v1/memories", headers={"Authorization": f"bearer {key}"}).status_code == 200  # RFC: any case


def test_two_different_keys_are_refused_the_same_key_twice_is_fine(client: TestClient, store: MemoryStore) -> None:
    a, b = create_key(store, "team", "a"), create_key(store, "other", "b")
    r = client.get("/v1/memories", headers={"Authorization": f"Bearer {a}", "X-API-Key": b})
    e = error(r, 401)
    assert e["field"] == "X-API-Key" and "differs" in str(e["reason"]) and r.headers["www-authenticate"]
    both = client.post(
        "/v1/memories", json={"text": "x", "id": "x"}, headers={"Authorization": f"Bearer {a}", "X-API-Key": a}
    )
    assert both.status_code == 201
    assert [m["id"] for m in client.get("/v1/memories", headers={"X-API-Key": a}).json()] == ["x"]
    assert client.get("/v1/memories", headers={"X-API-Key": b}).json() == []


def test_a_body_that_is_not_utf8_is_a_422_naming_the_body(client: TestClient, store: MemoryStore) -> None:
    key = create_key(store, "team", "a")
    r = client.post(
        "/v1/memories", content=b'{"text": "\xff"}', headers={"X-API-Key": key, "Content-Type": "application/json"}
    )
    assert error(r, 422)["field"] == "body"
    assert client.get("/v1/memories", headers={"X-API-Key": key}).json() == []


# -- read-only keys, expiry, revocation, listing ----------------------------------------


def test_a_read_only_key_reads_and_every_change_is_a_403(client: TestClient, store: MemoryStore) -> None:
    store.add("Water boils at 100 C.", id="boil", namespace="team")
    ro = {"X-API-Key": create_key(store, "team", "viewer", read_only=True)}
    assert client.get("/v1/memories/boil", headers=ro).json()["id"] == "boil"
    assert client.post("/v1/sidecar/filter", json={"ids": ["boil"]}, headers=ro).json() == {"ids": ["boil"]}
    before = store.audit(namespace="team"), store.list(namespace="team")
    writes = [
        ("post", "/v1/memories", {"text": "new"}),
        ("post", "/v1/recall", {"query": "water"}),
        ("delete", "/v1/memories/boil?reason=x", None),
        ("patch", "/v1/memories/boil", {"status": "suppressed", "reason": "x"}),
        ("put", "/v1/ttl", {"ttl": 5.0}),
        ("post", "/v1/govern", {"apply": True}),
        ("post", "/v1/sidecar/register", {"ids": ["ext"]}),
    ]
    doc = client.get("/openapi.json").json()["paths"]
    for method, path, body in writes:
        r = client.request(method.upper(), path, json=body, headers=ro)
        e = error(r, 403)
        assert e["type"] == "Forbidden" and "read-only" in str(e["reason"]) and e["field"] == "X-API-Key"
        assert "403" in doc[path.split("?")[0].replace("/boil", "/{memory_id}")][method]["responses"]
    assert (store.audit(namespace="team"), store.list(namespace="team")) == before


def test_an_expired_key_is_a_401_saying_it_expired(client: TestClient, store: MemoryStore) -> None:
    key = create_key(store, "team", "short", expires=time.time() + 3600)
    assert client.get("/v1/memories", headers={"X-API-Key": key}).status_code == 200
    later = time.time() + 7200
    from memworth.errors import AuthError
    from memworth.server.keys import authenticate

    with pytest.raises(AuthError, match="'short' expired at"):
        authenticate(store, None, key, write=False, now=later)
    gone = create_key(store, "team", "gone", expires=time.time() + 0.05)
    time.sleep(0.1)
    e = error(client.get("/v1/memories", headers={"Authorization": f"Bearer {gone}"}), 401)
    assert "'gone' expired at" in str(e["reason"]) and e["field"] == "Authorization"
    assert [k["state"] for k in client.get("/v1/keys", headers={"X-API-Key": key}).json()] == ["active", "expired"]


def test_keys_are_listed_by_name_never_by_secret_and_revoked_once(client: TestClient, store: MemoryStore) -> None:
    a = create_key(store, "team", "agent")
    create_key(store, "team", "ci", read_only=True)
    create_key(store, "other", "agent")
    listed = client.get("/v1/keys", headers={"X-API-Key": a}).json()
    assert [(k["name"], k["namespace"], k["read_only"], k["state"]) for k in listed] == [
        ("agent", "team", False, "active"),
        ("ci", "team", True, "active"),
    ]
    assert set(listed[0]) == {"id", "name", "namespace", "created", "expires", "read_only", "admin", "revoked", "state"}
    digests = [k for k, _ in store.backend.meta_items("apikey:")]
    assert not any(d.split(":", 1)[1] in str(listed) or a in str(listed) for d in digests)
    assert revoke(store, "team", name="ci").revoked is not None
    with pytest.raises(ConflictError, match="revoked already"):
        revoke(store, "team", name="ci")
    assert [k["state"] for k in client.get("/v1/keys", headers={"X-API-Key": a}).json()] == ["active", "revoked"]
    assert [k.name for k in list_keys(store)] == ["agent", "ci", "agent"]


def test_a_name_two_live_keys_share_is_refused_and_the_id_decides(store: MemoryStore) -> None:
    from memworth.errors import ConflictError, NotFoundError, ValidationError

    create_key(store, "team", "bot")
    second = create_key(store, "team", "bot")
    create_key(store, "other", "bot")
    with pytest.raises(ValidationError, match=r"2 keys of namespace 'team' are named 'bot'.*revoke one by its id"):
        revoke(store, "team", name="bot")
    assert all(k.revoked is None for k in list_keys(store))  # nothing revoked
    target = [k for k in list_keys(store, "team")][1]
    assert revoke(store, "team", key_id=target.id).id == target.id
    assert revoke(store, "team", name="bot").name == "bot"  # one live key left of that name: no ambiguity
    with pytest.raises(ConflictError, match="were revoked already"):
        revoke(store, "team", name="bot")
    with pytest.raises(NotFoundError, match="no API key with name 'nobody'"):
        revoke(store, "team", name="nobody")
    from memworth.server.keys import key_info

    assert key_info(store, second) is not None and key_info(store, second).revoked is not None  # type: ignore[union-attr]
    assert [k.revoked is None for k in list_keys(store, "other")] == [True]


# -- the same through the CLI -------------------------------------------------------------


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    from memworth.cli import main

    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_keys_through_the_cli_create_list_revoke(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    s = ("--store", f"sqlite:///{tmp_path / 'keys.db'}", "--encoder", "hashing", "--namespace", "team")
    code, out, _ = cli(capsys, "keys", "create", "--name", "viewer", "--read-only", "--expires-in", "30d", *s, "--json")
    made = json.loads(out)
    assert code == 0 and made["key"].startswith("mw_") and made["read_only"] is True and made["state"] == "active"
    days = (datetime.fromisoformat(made["expires"]) - datetime.fromisoformat(made["created"])).total_seconds() / 86400
    assert 29.99 < days < 30.01
    code, out, _ = cli(capsys, "keys", "create", "--name", "agent", "--expires-at", "2099-01-01T00:00:00Z", *s)
    assert code == 0 and "read-write, expires 2099-01-01T00:00:00Z" in out
    agent = out.split()[0]
    code, out, _ = cli(capsys, "keys", "list", *s, "--json")
    listed = json.loads(out)
    assert [(k["name"], k["read_only"], k["state"]) for k in listed] == [
        ("viewer", True, "active"),
        ("agent", False, "active"),
    ]
    assert made["key"] not in out and agent not in out and "key" not in listed[0]
    code, out, _ = cli(capsys, "keys", "list", *s)
    assert code == 0 and "viewer" in out and "read-only" in out and "expires 2099-01-01T00:00:00Z" in out
    assert cli(capsys, "keys", "revoke", "--name", "viewer", *s)[0] == 0
    code, _, err = cli(capsys, "keys", "revoke", "--name", "viewer", *s)
    assert code == 2 and "API key 'viewer' (namespace 'team') was revoked already, at" in err
    code, _, err = cli(capsys, "keys", "revoke", "--name", "agent", *s[:-2], "--namespace", "other")
    assert code == 2 and "no API key with name 'agent' in namespace 'other'" in err
    code, out, _ = cli(capsys, "keys", "list", *s, "--json")
    assert [k["state"] for k in json.loads(out)] == ["revoked", "active"]


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (("--expires-in", "soon"), "expires_in: must be seconds or a number with a unit"),
        (("--expires-in", "0"), "expires_in: must be a positive duration"),
        (("--expires-at", "2099-01-01T00:00:00"), "expires_at: needs a time zone"),
        (("--expires-at", "2000-01-01T00:00:00Z"), "expires_at: is in the past"),
        (("--expires-in", "1d", "--expires-at", "2099-01-01T00:00:00Z"), "give expires_in or expires_at, not both"),
    ],
)
def test_a_bad_expiry_is_refused_and_no_key_is_made(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, argv: tuple[str, ...], says: str
) -> None:
    s = ("--store", f"sqlite:///{tmp_path / 'keys.db'}", "--encoder", "hashing")
    code, out, err = cli(capsys, "keys", "create", *argv, *s)
    assert code == 2 and says in err and "mw_" not in out
    assert cli(capsys, "keys", "list", *s, "--all")[1].strip() == "no keys"


def test_a_key_made_by_the_cli_is_read_only_over_http(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'keys.db'}"
    key = json.loads(cli(capsys, "keys", "create", "--read-only", "--store", url, "--encoder", "hashing", "--json")[1])[
        "key"
    ]
    with MemoryStore.open(url) as store:
        client = TestClient(create_app(store))
        assert client.get("/v1/memories", headers={"X-API-Key": key}).json() == []
        assert (
            error(client.post("/v1/memories", json={"text": "x"}, headers={"X-API-Key": key}), 403)["type"]
            == "Forbidden"
        )
        assert store.list() == []


def test_the_dashboard_shows_a_read_only_key_its_pages_and_refuses_its_changes(
    client: TestClient, store: MemoryStore
) -> None:
    store.add("Water boils at 100 C.", id="boil", namespace="team")
    key = create_key(store, "team", "viewer", read_only=True)
    signed = client.post("/dashboard/login", data={"key": key, "next": "/dashboard"}, follow_redirects=False)
    assert signed.status_code == 303
    assert 'data-id="boil"' in client.get("/dashboard").text
    csrf = re.search(r'name="csrf" value="([^"]+)"', client.get("/dashboard/memories/boil").text)
    assert csrf is not None
    form = {"csrf": csrf.group(1), "memory_id": "boil", "field": "status", "value": "suppressed", "reason": "x"}
    r = client.post("/dashboard/set", data=form)
    assert r.status_code == 403 and "read-only" in r.text
    assert store.get("boil", namespace="team").status == "active" and store.audit(namespace="team") == []
    gone = create_key(store, "team", "gone")
    revoke(store, "team", name="gone")
    refused = client.post("/dashboard/login", data={"key": gone, "next": "/dashboard"})
    assert refused.status_code == 401 and "API key &#x27;gone&#x27; was revoked at" in refused.text


def test_a_key_revoked_by_another_process_stops_working_at_once(tmp_path: Path) -> None:
    """The server checks a key it has seen before from memory (no store read on a thread of its
    own) and confirms it in the store on the route's thread: a revocation written by another
    store object over the same database (as ``memworth keys revoke`` does) holds on the very
    next request, on reads, writes and grouped outcome commits alike, and nothing is done."""
    url = f"sqlite:///{tmp_path / 'keys.db'}"
    with MemoryStore.open(url, encoder=HashingEncoder(), seed=0, exploration=0.0) as store:
        client = TestClient(create_app(store, workers=2, url=url))
        key, other = create_key(store, "team", "agent"), create_key(store, "team", "other")
        h = {"Authorization": f"Bearer {key}"}
        assert client.post("/v1/memories", json={"text": "Water boils at 100 C.", "id": "boil"}, headers=h).status_code == 201
        episode = client.post("/v1/recall", json={"query": "water boils", "k": 1}, headers=h).json()["episode"]
        assert client.get("/v1/memories/boil", headers={"X-API-Key": key}).status_code == 200  # seen: from memory now
        with MemoryStore.open(url) as elsewhere:  # another process's store object
            revoke(elsewhere, "team", name="agent")
        for method, path, body in (
            ("get", "/v1/memories/boil", None),
            ("post", "/v1/memories", {"text": "Ice melts at 0 C.", "id": "ice"}),
            ("post", f"/v1/episodes/{episode}/outcome", {"outcome": "success"}),
            ("get", "/v1/memories/boil", None),  # and it stays refused
        ):
            r = client.request(method, path, json=body, headers=h)
            assert r.status_code == 401 and "API key 'agent' was revoked at" in r.json()["error"]["reason"], r.text
            assert r.headers["WWW-Authenticate"].startswith("Bearer")
        assert [m.id for m in store.list(namespace="team")] == ["boil"]  # nothing added
        assert store.get("boil", namespace="team").counts.n == 0  # no outcome recorded
        o = {"X-API-Key": other}  # the namespace's other key is untouched
        assert client.post(f"/v1/episodes/{episode}/outcome", json={"outcome": "success"}, headers=o).status_code == 200
        assert store.get("boil", namespace="team").counts.success == 1.0


def test_a_revoked_key_stops_working_at_once_on_every_sidecar_route(tmp_path: Path) -> None:
    """The sidecar's routes come through ``include_router``, which builds each route again from
    its endpoint: a key served from memory must be confirmed there too (it was not: a revoked
    key kept working on every ``/v1/sidecar/*`` route until the server restarted)."""
    url = f"sqlite:///{tmp_path / 'keys.db'}"
    with MemoryStore.open(url, encoder=HashingEncoder(), seed=0, exploration=0.0) as store:
        client = TestClient(create_app(store, workers=2, url=url))
        h = {"X-API-Key": create_key(store, "team", "agent")}
        assert client.post("/v1/sidecar/register", json={"ids": ["a"]}, headers=h).status_code == 200
        assert client.post("/v1/sidecar/register", json={"ids": ["b"]}, headers=h).status_code == 200  # from memory
        with MemoryStore.open(url) as elsewhere:
            revoke(elsewhere, "team", name="agent")
        candidates = [{"id": "a", "score": 0.9}, {"id": "b", "score": 0.8}]
        calls = {
            "/v1/sidecar/register": {"ids": ["c"]},
            "/v1/sidecar/rerank": {"candidates": candidates},
            "/v1/sidecar/retrieve": {"candidates": candidates, "k": 1},
            "/v1/sidecar/retrieved": {"ids": ["a"]},
            "/v1/sidecar/filter": {"ids": ["a", "b"]},
            "/v1/sidecar/worth": {"ids": ["a"]},
        }
        for path, body in calls.items():
            r = client.post(path, json=body, headers=h)
            assert r.status_code == 401 and "was revoked at" in r.json()["error"]["reason"], (path, r.text)
        assert sorted(m.id for m in store.list(namespace="team")) == ["a", "b"]  # nothing registered after


def test_a_key_seen_before_is_still_checked_for_read_only_and_expiry_before_the_body() -> None:
    """Served from memory, a read-only key is refused a change (403) and a key past its expiry
    is refused (401) before the body is read, as on the first request."""
    s = MemoryStore.open("memory://", encoder=HashingEncoder(), seed=0)
    try:
        client = TestClient(create_app(s))
        reader = create_key(s, "team", "viewer", read_only=True)
        soon = create_key(s, "team", "brief", expires=time.time() + 1.0)
        for k in (reader, soon):
            assert client.get("/v1/memories", headers={"X-API-Key": k}).status_code == 200  # now from memory
        bad_body = {"text": ""}  # refused (422) were the key fine
        assert error(client.post("/v1/memories", json=bad_body, headers={"X-API-Key": reader}), 403)["field"] == "X-API-Key"
        time.sleep(1.1)
        refused = error(client.get("/v1/memories", headers={"X-API-Key": soon}), 401)
        assert "API key 'brief' expired at" in refused["reason"]
    finally:
        s.close()


def test_every_keyed_route_documents_the_two_key_headers() -> None:
    """The key dependency reads its headers from the request; the OpenAPI document still names
    them on every route that needs a key, and on no other."""
    s = MemoryStore.open("memory://", encoder=HashingEncoder())
    try:
        doc = create_app(s).openapi()
    finally:
        s.close()
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            headers = [p["name"] for p in op.get("parameters", []) if p["in"] == "header"]
            keyed = "401" in op["responses"]
            assert headers == (["authorization", "x-api-key"] if keyed else []), (method, path, headers)
