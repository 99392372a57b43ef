"""Long calls in worker processes (issue 17): the HTTP routes answer the same in-process and
through the processes, errors come back as themselves, a killed process is replaced, the
server's store objects see what a process applied, and ``memory://`` stays in-process."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import signal
import threading
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from memworth import HashingEncoder, MemoryStore, Sidecar
from memworth.errors import MemworthError, UnavailableError, ValidationError
from memworth.server import long_calls
from memworth.server.app import create_app
from memworth.server.keys import create_key
from memworth.server.processes import Processes, default_processes
from memworth.store.configuring import SETTINGS_KEY
from process_calls import NOW, fixed_clock, pid, raise_error, stall
from tests.serving import free_port, memworth_serve
from tests.store.conftest import NO_DISK_WAIT, POSTGRES, drop, with_query


def _build(path: Path | str) -> str:
    """A store (a SQLite file, or a URL) whose tenant ``a`` has memories governance acts on; its key."""
    rng = np.random.default_rng(3)
    url = path if isinstance(path, str) else f"sqlite:///{path}"
    with MemoryStore.open(url, encoder=HashingEncoder(), seed=0, clock=fixed_clock) as store:
        sidecar = Sidecar(store)
        ids = [f"m{i}" for i in range(12)]
        sidecar.register(ids, namespace="a")
        good = {"m0", "m1", "m2", "m3"}
        batch = []
        for _ in range(300):
            picked = [ids[i] for i in rng.choice(12, size=2, replace=False)]
            p = 0.95 if good & set(picked) else 0.15
            batch.append((sidecar.retrieved(picked, namespace="a").id, bool(rng.random() < p)))
        store.record_many(batch, namespace="a")
        return create_key(store, "a", "agent")


def _apps(tmp_path: Path) -> tuple[dict[int, TestClient], dict[int, MemoryStore], str]:
    """Two servers over copies of one store: long calls in-process (0) and in a worker process (1)."""
    key = _build(tmp_path / "one.db")
    clients, stores = {}, {}
    for processes in (0, 1):
        copy = tmp_path / f"p{processes}.db"
        shutil.copy(tmp_path / "one.db", copy)
        store = MemoryStore.open(f"sqlite:///{copy}", encoder=HashingEncoder(), seed=0, clock=fixed_clock)
        store.settings_check_interval = 0  # both see a version written a moment ago, as a process does
        stores[processes] = store
        clients[processes] = TestClient(create_app(store, processes=processes))
    return clients, stores, key


def _close(clients: dict[int, TestClient], stores: dict[int, MemoryStore]) -> None:
    for n, client in clients.items():
        client.app.state.pool.close()  # type: ignore[attr-defined]
        stores[n].close()


def test_the_long_routes_and_their_errors_answer_the_same_in_a_worker_process(tmp_path: Path) -> None:
    clients, stores, key = _apps(tmp_path)
    h = {"X-API-Key": key}
    try:
        assert clients[0].app.state.pool.processes is None  # type: ignore[attr-defined]
        assert clients[1].app.state.pool.processes.count == 1  # type: ignore[attr-defined]
        script: list[tuple[str, str, dict[str, Any] | None]] = [
            ("post", "/v1/govern", {"apply": False}),
            ("get", "/v1/queue", None),
            ("get", "/v1/replay", None),
            ("get", "/v1/memories", None),
            ("post", "/v1/govern", {"apply": True}),  # applied in the worker process
            ("get", "/v1/memories", None),  # read on the server's store object
            ("get", "/v1/queue", None),
            ("post", "/v1/govern", {"apply": False}),
            ("get", "/v1/replay", None),
            ("get", "/v1/audit", None),
            ("get", "/dashboard/governance", None),
            ("get", "/metrics", None),
        ]
        answers: dict[int, list[tuple[int, Any]]] = {0: [], 1: []}
        for n, client in clients.items():
            for method, path, body in script:
                r = getattr(client, method)(path, headers=h, **({} if body is None else {"json": body}))
                if path == "/metrics":  # the applied actions are counted either way
                    counted = [
                        line for line in r.text.splitlines() if line.startswith("memworth_governance_actions_total")
                    ]
                    answers[n].append((r.status_code, counted))
                elif path.startswith("/dashboard"):
                    answers[n].append((r.status_code, r.text))
                else:
                    answers[n].append((r.status_code, r.json()))
        assert answers[1] == answers[0]
        before, applied, after = answers[0][3][1], answers[0][4][1], answers[0][5][1]
        assert applied["applied"], "the store was built for governance to act on"

        def kept(rows: list[dict[str, Any]]) -> dict[str, tuple[str, str]]:
            return {m["id"]: (m["status"], m["standing"]) for m in rows}

        assert kept(after) != kept(before)  # the process's changes, read on the server's object
        assert answers[0][7][1]["applied"] == [] and answers[0][8][1]["consistent"] is True
        assert any(counted for _, counted in answers[0][-1:])
        # the server's own object sees the process's changes: no proposal is made twice
        again = stores[1].govern(namespace="a")
        assert [p.__dict__ for p in again.proposals] == answers[1][7][1]["proposals"]
        # an error: the same status and body (a settings version a newer memworth wrote)
        for store in stores.values():
            record = {"version": 99, "settings": {"recall": {"warp": 1}}, "at": NOW, "actor": "x", "changed": []}
            store.backend.set_meta(SETTINGS_KEY, json.dumps(record))
        got = {n: client.post("/v1/govern", json={"apply": True}, headers=h) for n, client in clients.items()}
        assert got[1].status_code == got[0].status_code == 409
        assert got[1].json() == got[0].json()
        assert got[0].json()["error"]["type"] == "SettingsError" and "version 99" in got[0].json()["error"]["reason"]
    finally:
        _close(clients, stores)


def test_on_postgresql_govern_applied_in_a_worker_process_is_what_the_server_objects_then_read() -> None:
    url = with_query(POSTGRES, schema=f"t_{uuid.uuid4().hex[:16]}", pool_size="2", options=NO_DISK_WAIT)
    key = _build(url)
    store = MemoryStore.open(url, encoder=HashingEncoder(), seed=0, clock=fixed_clock)
    app = create_app(store, workers=2, url=url, processes=1)
    client = TestClient(app)
    h = {"X-API-Key": key}
    try:
        dry = client.post("/v1/govern", json={"apply": False}, headers=h).json()
        assert dry == long_calls.govern(store, "a", False)  # the same report, computed here
        assert client.get("/v1/queue", headers=h).json() == long_calls.queue(store, "a")
        applied = client.post("/v1/govern", json={"apply": True}, headers=h).json()["applied"]
        assert applied, "the store was built for governance to act on"
        for s in app.state.pool.stores:  # each server object reads the changes the process made
            for e in applied:
                assert getattr(s.get(e["memory_id"], namespace="a"), e["field"]) == e["new"]
        after = client.post("/v1/govern", json={"apply": False}, headers=h).json()
        assert after == long_calls.govern(store, "a", False) and after["applied"] == []
        assert not {p["memory_id"] for p in after["proposals"]} & {e["memory_id"] for e in applied}
        assert client.get("/v1/replay", headers=h).json() == {"consistent": True, "mismatches": []}
    finally:
        app.state.pool.close()
        drop(store)


def test_errors_come_back_whole_and_a_process_that_died_idle_is_replaced(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'p.db'}"
    MemoryStore.open(url, encoder=HashingEncoder()).close()
    processes = Processes(url, 1)
    try:
        for which in ("validation", "rate", "entry", "erased"):
            with pytest.raises(MemworthError) as err:
                processes.run(raise_error, "a", which)
            here = pickle.loads(pickle.dumps(err.value))  # what the same error is, raised here
            assert type(err.value) is type(here) and err.value.__dict__ == here.__dict__
            assert str(err.value) == str(here) and err.value.status == here.status
        first = processes.run(pid, "a")
        assert processes.pids() == [first] and first != os.getpid()
        # killed while idle: the next call runs on a new process
        os.kill(first, signal.SIGKILL)
        time.sleep(0.2)
        second = processes.run(pid, "a")
        assert second != first
    finally:
        processes.close()
    with pytest.raises(UnavailableError):
        processes.run(pid, "a")


def test_a_killed_worker_process_is_a_503_and_the_next_govern_works(tmp_path: Path) -> None:
    store = MemoryStore.open(f"sqlite:///{tmp_path / 'k.db'}", encoder=HashingEncoder(), seed=0)
    key = create_key(store, "a", "agent")
    store.add("a note", id="n1", namespace="a")
    app = create_app(store, processes=1)
    pool = app.state.pool
    flag = tmp_path / "started"
    app.get("/test/stall")(lambda: pool.long("a", stall, str(flag)))  # a long call that takes a minute
    client = TestClient(app)
    try:
        got: list[Any] = []
        caller = threading.Thread(target=lambda: got.append(client.get("/test/stall")))
        caller.start()
        deadline = time.monotonic() + 30
        while not flag.exists():
            assert time.monotonic() < deadline, "the stalling call never started"
            time.sleep(0.05)
        killed = int(flag.read_text())
        os.kill(killed, signal.SIGKILL)
        caller.join(30)
        assert not caller.is_alive(), "the request still waits for a dead process"
        assert got[0].status_code == 503
        assert got[0].json()["error"]["type"] == "UnavailableError"
        assert "stopped before it answered" in got[0].json()["error"]["reason"]
        r = client.post("/v1/govern", json={"apply": False}, headers={"X-API-Key": key})
        assert r.status_code == 200 and r.json()["proposals"] == []
        assert killed not in pool.processes.pids()  # a new process answered
    finally:
        pool.close()
        store.close()


def test_memory_stores_run_long_calls_in_process() -> None:
    for url in ("memory://", "sqlite:///:memory:"):
        assert default_processes(url) == 0
        with MemoryStore.open(url, encoder=HashingEncoder()) as store:
            app = create_app(store)
            assert app.state.pool.processes is None
            with pytest.raises(ValidationError) as err:
                create_app(store, processes=1)
            assert err.value.field == "processes" and "no other process can open it" in err.value.reason
    assert default_processes("sqlite:///x.db") == 1 and default_processes("postgresql://u@h/db") == 1


def test_a_clock_a_process_cannot_have_is_refused_naming_it(tmp_path: Path) -> None:
    with MemoryStore.open(f"sqlite:///{tmp_path / 'c.db'}", encoder=HashingEncoder(), clock=lambda: NOW) as store:
        with pytest.raises(ValidationError) as err:
            create_app(store, processes=1)
        assert err.value.field == "processes" and "clock" in err.value.reason
        for bad in (-1, 17, True, 1.5):
            with pytest.raises(ValidationError) as err:
                create_app(store, processes=bad)  # type: ignore[arg-type]
            assert err.value.field == "processes"


def _children(pid: int) -> set[int]:
    """Process ids whose parent is ``pid`` (Linux /proc)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.add(int(entry.name))
    return found


@pytest.mark.slow  # a real server and its worker process: 6 s under load
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads the process tree from /proc")
def test_memworth_serve_runs_govern_in_its_worker_process_and_stops_it(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'served.db'}"
    with MemoryStore.open(url, encoder=HashingEncoder()) as store:
        key = create_key(store, "ns", "k")
        store.add("a note", id="n1", namespace="ns")
    port = free_port()
    config = tmp_path / "serve.toml"
    config.write_text(f"store = '{url}'\n[server]\nport = {port}\nlog_level = 'warning'\nprocesses = 1\n")
    with memworth_serve("--config", str(config)) as server:
        req = urllib.request.Request(
            f"http://127.0.0.1:{port}/v1/govern", data=b'{"apply": true}', method="POST",
            headers={"X-API-Key": key, "Content-Type": "application/json"},
        )  # fmt: skip
        governed = json.loads(server.first_answer(req))
        workers = _children(server.proc.pid)
        assert workers, "govern ran in no worker process"
    assert governed["applied"] == [] and "proposals" in governed
    assert "1 worker process for long calls" in server.out
    assert "Traceback" not in server.err
    deadline = time.monotonic() + 10
    while any(Path(f"/proc/{p}").exists() for p in workers):  # stopped with the server
        assert time.monotonic() < deadline, "a worker process outlived the server"
        time.sleep(0.1)


def test_memworth_serve_takes_processes_from_the_flag_the_file_and_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from memworth.cli import main

    config = tmp_path / "serve.toml"
    config.write_text("[server]\nprocesses = 2\n")
    # memory:// lives in one store object: any worker process is refused before the server starts
    for argv, env in (
        (["--processes", "1"], None),
        (["--config", str(config)], None),
        ([], "3"),
        (["--processes", "-1"], None),
    ):
        if env is None:
            monkeypatch.delenv("MEMWORTH_PROCESSES", raising=False)
        else:
            monkeypatch.setenv("MEMWORTH_PROCESSES", env)
        code = main(["serve", "--store", "memory://", "--encoder", "hashing", *argv])
        err = capsys.readouterr().err
        assert code != 0 and "processes" in err, (argv, env, err)
    monkeypatch.setenv("MEMWORTH_PROCESSES", "many")
    assert main(["serve", "--store", "memory://", "--encoder", "hashing"]) != 0
    assert "processes: must be an integer, got 'many'" in capsys.readouterr().err


def test_after_a_govern_in_a_worker_process_the_tenants_store_object_rescans_its_live_alarms(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'live.db'}"
    key = _build(tmp_path / "live.db")
    other = MemoryStore.open(url, clock=fixed_clock)  # another process's store object, say
    store = MemoryStore.open(url, encoder=HashingEncoder(), seed=0, clock=fixed_clock)
    app = create_app(store, processes=1)
    client = TestClient(app)
    h = {"X-API-Key": key}
    try:
        first = Sidecar(other).retrieved(["m0", "m1"], namespace="a").id
        assert client.post(f"/v1/episodes/{first}/outcome", json={"outcome": "success"}, headers=h).status_code == 200
        logged = store._live["a"].logged  # this object's live change statistics, as it recorded the outcome
        for _ in range(5):  # outcomes it does not record: they count from its next scan
            other.record(Sidecar(other).retrieved(["m2", "m3"], namespace="a").id, True, namespace="a")
        assert store._live["a"].logged == logged
        assert client.post("/v1/govern", json={"apply": False}, headers=h).status_code == 200
        assert store._live["a"].logged == logged + 5  # scanned again, as its own govern would have
    finally:
        app.state.pool.close()
        store.close()
        other.close()


def test_a_govern_applied_in_a_worker_process_keeps_the_hot_tier_mirror(tmp_path: Path) -> None:
    ns = f"n{uuid.uuid4().hex[:10]}"
    url = f"sqlite:///{tmp_path / 'hot.db'}"
    store = MemoryStore.open(url, encoder=HashingEncoder(), seed=0, hot_tier="redis://127.0.0.1:6379/0")
    store.exploration = 0.0
    store.add_many(
        [{"id": "reverse", "text": "Use list.reverse() to reverse a Python list."}, {"id": "cz", "text": "Prague."}],
        namespace=ns,
    )
    for _ in range(12):
        store.record(store.recall("reverse a python list", k=1, namespace=ns).episode, True)
    key = create_key(store, ns, "agent")
    app = create_app(store, processes=1)
    try:
        assert store.check_hot_tier(namespace=ns)["missing"] == ["reverse"]  # never mirrored yet
        r = TestClient(app).post("/v1/govern", json={"apply": True}, headers={"X-API-Key": key})
        assert r.status_code == 200
        assert store.check_hot_tier(namespace=ns) == {"missing": [], "extra": [], "stale": []}
    finally:
        app.state.pool.close()
        assert store.hot is not None
        store.hot.clear(ns)
        store.close()
