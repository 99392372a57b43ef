"""Servers for the tests that talk over a socket: a real ``memworth serve`` in a child process,
and an app served by uvicorn on a thread of the test's own process."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Served:
    """The running server; ``out`` and ``err`` hold what it printed once it stopped."""

    proc: subprocess.Popen[str]
    out: str = ""
    err: str = ""

    def first_answer(
        self, request: str | urllib.request.Request, *, timeout: float = 60.0, wait: float = 60.0
    ) -> bytes:
        """The body of the first answer to ``request``, asked again while the server comes up
        (for up to ``wait`` seconds; the test fails if the server exits or never answers)."""
        deadline = time.monotonic() + wait
        while True:
            try:
                with urllib.request.urlopen(request, timeout=timeout) as r:
                    return bytes(r.read())
            except OSError:
                assert self.proc.poll() is None and time.monotonic() < deadline, "memworth serve did not come up"
                time.sleep(0.2)


@contextmanager
def memworth_serve(*args: str) -> Iterator[Served]:
    """Run ``memworth serve ARGS`` in a child process; stop it (SIGTERM) on leaving."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "memworth.cli", "serve", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    served = Served(proc)
    try:
        yield served
    finally:
        proc.terminate()
        served.out, served.err = proc.communicate(timeout=60)


@contextmanager
def uvicorn_thread(app: Any, *, log_level: str = "warning") -> Iterator[int]:
    """``app`` served by uvicorn on a thread, on a free port of 127.0.0.1 (yielded) once it
    listens; stopped when the block ends."""
    import uvicorn

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level=log_level))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    try:
        yield port
    finally:
        server.should_exit = True
        thread.join(timeout=10)
