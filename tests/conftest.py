"""Shared test settings: deterministic hypothesis runs, no example database on disk, and
temporary folders in memory.

``tmp_path`` folders live on ``/dev/shm`` (a tmpfs) where there is one, unless
``PYTEST_DEBUG_TEMPROOT`` or ``TMPDIR`` says otherwise. Every SQLite store the tests open
there commits with ``synchronous=FULL`` as usual, but its ``fsync`` no longer waits for a
disk: one commit took 0.35 ms on this machine's disk when it was quiet and 5-7 ms while
other processes wrote to it, 0.01-0.04 ms on tmpfs; the durability tests commit tens of
thousands of times. What those tests prove is unchanged: they kill
processes (whose writes the OS page cache keeps either way); none simulates a power cut.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from memworth import HashingEncoder, MemoryStore

_RAM_DISK = "/dev/shm"
if (
    "PYTEST_DEBUG_TEMPROOT" not in os.environ
    and "TMPDIR" not in os.environ
    and os.path.isdir(_RAM_DISK)
    and os.access(_RAM_DISK, os.W_OK | os.X_OK)
):
    os.environ["PYTEST_DEBUG_TEMPROOT"] = _RAM_DISK  # read by pytest when tmp_path is first asked for

settings.register_profile(
    "memworth",
    derandomize=True,
    database=None,
    deadline=None,
    max_examples=100,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("memworth")


@pytest.fixture
def store() -> Iterator[MemoryStore]:
    """An in-memory store with the hashing encoder and no exploration: recall is deterministic.

    A test module that needs another store defines its own ``store`` fixture, which wins."""
    s = MemoryStore.open("memory://", encoder=HashingEncoder(), seed=0, exploration=0.0)
    yield s
    s.close()


@pytest.fixture
def client(store: MemoryStore) -> Any:
    """A FastAPI test client of the HTTP app over ``store`` (imported here: only tests that ask
    for it pay for the web stack)."""
    from fastapi.testclient import TestClient

    from memworth.server import create_app

    return TestClient(create_app(store))
