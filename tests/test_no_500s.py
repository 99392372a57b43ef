"""No 500s, no silent loss: what an attack on the service found, each now refused or answered.

* Credit weights whose sum overflows are refused (before: every memory silently got 0).
* A SQLite file memworth did not make is refused before anything is written to it
  (before: memworth's tables were added to it and it was switched to WAL for good).
* Metadata nested deeper than the limit is refused (before: saved, then a 500 on every list).
* An unexpected error is answered with the one JSON error shape, and the connection stays
  usable (before: the error was re-raised after the answer, which drops a keep-alive connection).
"""

from __future__ import annotations

import asyncio
import http.client
import json
import sqlite3
import warnings
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from memworth import HashingEncoder, MemoryStore, StoreError, Tracker, ValidationError, normalise, normalise_rows
from memworth.server import create_app, create_key
from memworth.sidecar import Sidecar
from memworth.store.backend import SCHEMA_VERSION
from memworth.validation import MAX_METADATA_DEPTH, check_metadata_shape
from tests.serving import uvicorn_thread

# -- credit weights whose sum overflows ---------------------------------------------------

HUGE = [1e308, 1e308]  # each finite, their sum is not


def test_normalise_refuses_weights_whose_sum_overflows() -> None:
    with pytest.raises(ValidationError) as err:
        normalise(HUGE)
    assert err.value.field == "weights" and "largest float" in err.value.reason
    with pytest.raises(ValidationError, match=r"episode 1"):
        normalise_rows(np.array([[1.0, 2.0], HUGE]))
    # Just below the overflow the shares are still exact.
    assert normalise([8e307, 8e307]).tolist() == [0.5, 0.5]


def test_tracker_refuses_overflowing_weights_and_changes_nothing() -> None:
    t = Tracker()
    t.record(["a", "b"], success=True)
    before = t.counts("a"), t.counts("b"), t.episodes
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no RuntimeWarning either: a clear refusal instead
        with pytest.raises(ValidationError) as err:
            t.record(["a", "b"], success=True, weights=HUGE)
        assert err.value.field == "weights"
        with pytest.raises(ValidationError) as err:
            t.record_batch(np.array([[0, 1], [1, 0]]), np.array([True, False]), weights=np.array([[1.0, 1.0], HUGE]))
        assert err.value.field == "weights"
    assert (t.counts("a"), t.counts("b"), t.episodes) == before


def test_sidecar_refuses_overflowing_weights_in_python_and_over_http(store: MemoryStore) -> None:
    with pytest.raises(ValidationError, match="weights"):
        Sidecar(store).retrieved(["x", "y"], weights=HUGE)
    key = create_key(store, "default", "k")
    r = asyncio.run(_post(store, "/v1/sidecar/retrieved", {"ids": ["x", "y"], "weights": HUGE}, key))
    assert r.status_code == 422 and r.json()["error"]["field"] == "weights"
    assert store.list() == []  # nothing registered, no episode with zero credit


async def _post(store: MemoryStore, path: str, body: dict[str, Any], key: str) -> httpx.Response:
    transport = httpx.ASGITransport(app=create_app(store))
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        return await client.post(path, json=body, headers={"Authorization": f"Bearer {key}"})


# -- SQLite files memworth did not make -----------------------------------------------------


def _foreign_db(path: Path, schema: str) -> None:
    db = sqlite3.connect(path)
    db.executescript(schema)
    db.commit()
    db.close()


FOREIGN = {
    "a memories table": "CREATE TABLE memories (id INTEGER PRIMARY KEY, note TEXT); INSERT INTO memories (note) VALUES ('mine');",
    "other tables": "CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT); CREATE INDEX users_name ON users (name);"
    " INSERT INTO users (name) VALUES ('ada');",
    "a meta table of its own": "CREATE TABLE meta (k TEXT, v TEXT); INSERT INTO meta VALUES ('schema_version', '1');",
    "a meta table like ours": "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
    " INSERT INTO meta VALUES ('schema_version', '1'); CREATE TABLE memories (id TEXT);",
    "no tables, an application id": "PRAGMA application_id = 1234;",
}


@pytest.mark.parametrize("kind", sorted(FOREIGN))
def test_a_foreign_sqlite_file_is_refused_and_left_byte_identical(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "theirs.db"
    _foreign_db(path, FOREIGN[kind])
    before = path.read_bytes()
    with pytest.raises(StoreError) as err:
        MemoryStore.open(f"sqlite:///{path}", encoder=HashingEncoder())
    assert str(path) in str(err.value) and "not a memworth store" in str(err.value)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["theirs.db"]  # no -wal, -shm or -journal left
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    db.close()


def test_a_file_that_is_not_a_database_is_refused_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    path.write_text("these are my notes, not a database\n" * 200)
    before = path.read_bytes()
    with pytest.raises(StoreError, match=r"notes\.db"):
        MemoryStore.open(f"sqlite:///{path}", encoder=HashingEncoder())
    assert path.read_bytes() == before


def test_an_empty_file_becomes_a_store(tmp_path: Path) -> None:
    empty = tmp_path / "empty.db"
    empty.touch()
    with MemoryStore.open(f"sqlite:///{empty}", encoder=HashingEncoder()) as s:
        s.add("a first memory", id="m")
    with MemoryStore.open(f"sqlite:///{empty}") as s:
        assert s.get("m").text == "a first memory"
        assert s.backend.get_meta("schema_version") == str(SCHEMA_VERSION)


# -- metadata nested too deep ------------------------------------------------------------


def nested(depth: int, leaf: object = 1) -> Any:
    """``depth`` levels, objects and lists in turn (the outermost, level 1, an object); no recursion."""
    value: Any = leaf
    for level in range(depth, 0, -1):  # innermost first
        value = {"a": value} if level % 2 else [value]
    return value


def _depth(value: Any) -> int:
    level = 0
    while isinstance(value, (dict, list)):
        value = next(iter(value.values())) if isinstance(value, dict) else value[0]
        level += 1
    return level


@pytest.mark.parametrize("depth", [1, 2, MAX_METADATA_DEPTH - 1, MAX_METADATA_DEPTH])
def test_metadata_up_to_the_depth_limit_is_accepted(depth: int) -> None:
    value = nested(depth)
    assert isinstance(value, dict)
    check_metadata_shape(value, "metadata")


@pytest.mark.parametrize("depth", [MAX_METADATA_DEPTH + 1, 255, 100_000])
def test_metadata_past_the_depth_limit_is_refused_without_recursion(depth: int) -> None:
    value = nested(depth)
    with pytest.raises(ValidationError) as err:
        check_metadata_shape(value, "metadata")
    assert err.value.field == "metadata" and f"the limit is {MAX_METADATA_DEPTH}" in err.value.reason


def test_lists_count_as_levels_and_a_value_holding_itself_is_refused() -> None:
    flat_lists: Any = "x"
    for _ in range(MAX_METADATA_DEPTH):
        flat_lists = [flat_lists]
    check_metadata_shape({"k": flat_lists[0]}, "meta")  # 1 object + 31 lists
    with pytest.raises(ValidationError, match=r"^meta: .*at meta\.k\[0\]\[0\]"):
        check_metadata_shape({"k": flat_lists}, "meta")
    loop: dict[str, Any] = {}
    loop["self"] = loop
    with pytest.raises(ValidationError):
        check_metadata_shape(loop, "metadata")


def test_the_depth_helper_of_these_tests_counts_levels() -> None:
    assert [_depth(nested(d)) for d in (1, 2, 3, 33)] == [1, 2, 3, 33]


def test_deep_metadata_is_refused_by_the_store_before_anything_is_written(store: MemoryStore) -> None:
    for depth in (MAX_METADATA_DEPTH + 1, 5_000):  # 5,000 levels was a RecursionError in json.dumps
        with pytest.raises(ValidationError) as err:
            store.add("too deep", id=f"d{depth}", metadata=nested(depth))
        assert err.value.field == "metadata"
    assert store.list() == []


def test_deep_metadata_over_http_is_a_422_and_listing_keeps_working(store: MemoryStore) -> None:
    key = create_key(store, "default", "k")

    async def session() -> list[httpx.Response]:
        transport = httpx.ASGITransport(app=create_app(store))
        headers = {"Authorization": f"Bearer {key}"}
        async with httpx.AsyncClient(transport=transport, base_url="http://test", headers=headers) as client:
            return [
                await client.post("/v1/memories", json={"text": "deepest allowed", "metadata": nested(MAX_METADATA_DEPTH)}),
                await client.post("/v1/memories", json={"text": "attack", "id": "deep", "metadata": nested(255)}),
                await client.get("/v1/memories"),
            ]

    fine, deep, listing = asyncio.run(session())
    assert fine.status_code == 201 and _depth(fine.json()["metadata"]) == MAX_METADATA_DEPTH
    assert deep.status_code == 422 and deep.json()["error"]["field"] == "metadata"
    assert listing.status_code == 200 and [m["text"] for m in listing.json()] == ["deepest allowed"]


# -- an unexpected error: one JSON answer, and the connection goes on -------------------------


def _break_listing(store: MemoryStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """Inject a bug: the next listing raises an error no handler knows; later ones work."""
    real = store.list
    calls = 0

    def broken(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("injected bug")
        return real(*args, **kwargs)

    monkeypatch.setattr(store, "list", broken)


def test_an_unexpected_error_is_a_json_500_and_the_next_request_works(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    key = create_key(store, "default", "k")
    store.add("still here", id="m")
    _break_listing(store, monkeypatch)

    async def session() -> list[httpx.Response]:
        # raise_app_exceptions (the default) turns an error the app lets escape into an exception here.
        transport = httpx.ASGITransport(app=create_app(store))
        headers = {"Authorization": f"Bearer {key}"}
        async with httpx.AsyncClient(transport=transport, base_url="http://test", headers=headers) as client:
            return [await client.get("/v1/memories"), await client.get("/v1/memories")]

    failed, after = asyncio.run(session())
    assert failed.status_code == 500 and failed.json() == {
        "ok": False,
        "error": {
            "type": "InternalError",
            "field": None,
            "reason": "unexpected RuntimeError (a bug in memworth; the server's log has the details)",
            "status": 500,
        },
    }
    assert after.status_code == 200 and [m["id"] for m in after.json()] == ["m"]
    logged = [r for r in caplog.records if r.name == "memworth.server"]
    assert len(logged) == 1 and logged[0].exc_info is not None and "injected bug" in str(logged[0].exc_info[1])


def test_over_a_real_socket_the_keep_alive_connection_survives_a_500(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = create_key(store, "default", "k")
    _break_listing(store, monkeypatch)
    with uvicorn_thread(create_app(store), log_level="critical") as port:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

        def get() -> tuple[int, Any]:
            connection.request("GET", "/v1/memories", headers={"Authorization": f"Bearer {key}"})
            response = connection.getresponse()
            return response.status, json.loads(response.read())

        answers = [get()]
        first_socket = connection.sock
        answers.append(get())  # before: RemoteDisconnected, the server had closed the connection
        assert connection.sock is first_socket  # the same connection, not a new one
        connection.close()
    assert answers[0][0] == 500 and answers[0][1]["error"]["type"] == "InternalError"
    assert answers[1] == (200, [])
