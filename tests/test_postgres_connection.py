"""Reaching PostgreSQL: the URL's pool options, and a clear StoreError when the server is away.

``?pool_timeout=`` bounds how long a call waits for a connection (default 10 s, was 30 s);
an unreachable server is a :class:`memworth.StoreError` naming the database and the
last connection failure, never psycopg_pool's bare ``PoolTimeout``. The outage test puts
a TCP relay of our own between the store and the machine's PostgreSQL and cuts it.
"""

from __future__ import annotations

import math
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from memworth import HashingEncoder, MemoryStore, StoreError, ValidationError
from memworth.errors import UnavailableError
from memworth.store.postgres import POOL_TIMEOUT, PostgresBackend, _parse_url, _split_url

POSTGRES = os.environ.get("MEMWORTH_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
GUARD = 60.0  # seconds: a hung call fails the test instead of hanging it (not a timing check)


# -- the URL ----------------------------------------------------------------------------------


def test_pool_timeout_and_connect_timeout_defaults() -> None:
    c = _parse_url("postgresql://u@h/db")
    assert c.pool_timeout == POOL_TIMEOUT == 10.0 and c.pool_size == 4
    assert "connect_timeout=10" in c.conninfo
    c = _parse_url("postgresql://u@h/db?pool_timeout=0.5&schema=s1&sslmode=disable")
    assert c.pool_timeout == 0.5 and c.schema == "s1"
    assert "connect_timeout=2" in c.conninfo  # libpq's minimum
    assert "pool_timeout" not in c.conninfo and "schema" not in c.conninfo and "sslmode=disable" in c.conninfo
    assert "connect_timeout=7" in _parse_url("postgresql://u@h/db?pool_timeout=6.2").conninfo
    c = _parse_url("postgresql://u@h/db?pool_timeout=3&connect_timeout=0")
    assert c.pool_timeout == 3 and "connect_timeout=0" in c.conninfo  # the caller's, kept
    assert _split_url("postgresql://u@h/db?pool_size=2&pool_timeout=1")[1:] == (None, 2)


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("pool_timeout=0", "pool_timeout"),
        ("pool_timeout=-1", "pool_timeout"),
        ("pool_timeout=nan", "pool_timeout"),
        ("pool_timeout=inf", "pool_timeout"),
        ("pool_timeout=3601", "pool_timeout"),
        ("pool_timeout=soon", "pool_timeout"),
        ("pool_timeout=", "pool_timeout"),
        ("connect_timeout=1.5", "connect_timeout"),
        ("connect_timeout=-2", "connect_timeout"),
        ("connect_timeout=x", "connect_timeout"),
    ],
)
def test_bad_timeouts_are_refused_before_connecting(query: str, field: str) -> None:
    with pytest.raises(ValidationError) as err:
        MemoryStore.open(f"postgresql://u:secret@127.0.0.1:1/db?{query}", encoder=HashingEncoder())
    assert err.value.field == field and "secret" not in str(err.value)


# -- a server that is not there ---------------------------------------------------------------------


def test_a_closed_port_is_a_clear_store_error_after_the_pool_timeout() -> None:
    url = "postgresql://u:secret@127.0.0.1:1/db?pool_timeout=1"
    started = time.monotonic()
    with pytest.raises(StoreError) as err:
        MemoryStore.open(url, encoder=HashingEncoder())
    waited = time.monotonic() - started
    assert type(err.value) is UnavailableError and err.value.status == 503  # not psycopg's or psycopg_pool's
    message = str(err.value)
    assert "PostgreSQL at postgresql://u:***@127.0.0.1:1/db" in message and "unreachable" in message
    assert "within 1 s" in message and "refused" in message and "secret" not in message
    assert "\n" not in message  # one line for the CLI
    # the setting is honoured: the wait ends near 1 s, far from the 10 s default (a guard, not a benchmark)
    assert waited < POOL_TIMEOUT - 2, waited


def test_the_cli_says_so_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    from memworth.cli import main

    assert main(["stats", "--store", "postgresql://u@127.0.0.1:1/db?pool_timeout=1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("memworth: error: PostgreSQL at ") and "unreachable" in err


# -- a server that goes away and comes back ---------------------------------------------------------


class Relay:
    """A TCP relay from a local port to PostgreSQL that can be cut (every connection closed,
    the port refusing) and restored on the same port."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = int(s.getsockname()[1])
        self.sockets: list[socket.socket] = []
        self.lock = threading.Lock()
        self.listener: socket.socket | None = None

    def start(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen()
        self.listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:  # the listener was closed: cut
                return
            upstream = socket.create_connection(self.target)
            with self.lock:
                self.sockets += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self) -> None:
        assert self.listener is not None
        try:
            self.listener.shutdown(socket.SHUT_RDWR)  # wakes the accept() (close() alone would not, on Linux)
        except OSError:
            pass
        self.listener.close()
        with self.lock:
            for s in self.sockets:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()
            self.sockets.clear()


@pytest.fixture
def relay() -> Iterator[Relay]:
    target = _parse_url(POSTGRES)
    host, port = target.conninfo.split("@")[-1].split("/")[0].rsplit(":", 1)
    r = Relay((host, int(port)))
    r.start()
    yield r
    r.cut()


def until(deadline: float, fn: Callable[[], Any]) -> tuple[Any, list[StoreError]]:
    """Call ``fn`` until it answers; the StoreErrors on the way (anything else fails the test)."""
    errors: list[StoreError] = []
    while True:
        try:
            return fn(), errors
        except StoreError as exc:
            errors.append(exc)
            assert time.monotonic() < deadline, f"no answer by the guard: {errors[-3:]}"
            time.sleep(0.2)


def test_an_outage_is_a_clear_store_error_and_the_store_recovers(relay: Relay) -> None:
    user = POSTGRES.split("//", 1)[1].split("@")[0]
    db = POSTGRES.rsplit("/", 1)[1].split("?")[0]
    url = f"postgresql://{user}@127.0.0.1:{relay.port}/{db}?schema=t_{uuid.uuid4().hex[:16]}&pool_size=2&pool_timeout=1"
    store = MemoryStore.open(url, encoder=HashingEncoder(), seed=0)
    try:
        store.add("Reverse a list with [::-1].", id="rev")
        relay.cut()
        seen: list[StoreError] = []
        for i in range(4):  # the first calls may meet a dead pooled connection; then the pool waits
            started = time.monotonic()
            with pytest.raises(StoreError) as err:
                store.add(f"note {i}", id=f"note-{i}")
            assert type(err.value) is UnavailableError and time.monotonic() - started < GUARD
            seen.append(err.value)
        assert all(f"127.0.0.1:{relay.port}" in str(e) for e in seen)
        last = str(seen[-1])
        assert "unreachable" in last and "within 1 s" in last and "refused" in last and "\n" not in last
        relay.start()
        until(time.monotonic() + GUARD, lambda: store.add("Back again.", id="back"))
        assert sorted(m.id for m in store.list()) == ["back", "rev"]  # nothing of the refused adds
        assert isinstance(store.backend, PostgresBackend)
    finally:
        if relay.listener is not None and relay.listener.fileno() != -1:
            until(time.monotonic() + GUARD, store.backend.drop)
        store.close()


def test_the_default_timeout_is_shorter_than_psycopg_pools() -> None:
    assert math.isclose(_parse_url("postgres://u@h/db").pool_timeout, 10.0) and POOL_TIMEOUT < 30
