"""Long calls and a clock for tests/test_server_processes.py, kept apart so that a worker
process, which imports them by name, starts without the test's imports (pytest, FastAPI)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from memworth.errors import ErasedMemoryError, MemworthError, RateLimitError, UnknownEntryError, ValidationError
from memworth.store import MemoryStore

NOW = 1_800_000_000.0


def fixed_clock() -> float:
    """The stores' clock in these tests: module-level, so a worker process gets it (by name)."""
    return NOW


def raise_error(store: MemoryStore, namespace: str, which: str) -> None:
    """A long call that fails the way ``which`` names."""
    errors: dict[str, MemworthError] = {
        "validation": ValidationError("k", "must be at least 1"),
        "rate": RateLimitError("rate limit: 3 promote/demote changes in the last 24 h"),
        "entry": UnknownEntryError(7, namespace),
        "erased": ErasedMemoryError("m1", 4),
    }
    raise errors[which]


def stall(store: MemoryStore, namespace: str, flag: str) -> None:
    """A long call that says it started (writes its process id to ``flag``), then takes a minute."""
    Path(flag).write_text(str(os.getpid()))
    time.sleep(60)


def pid(store: MemoryStore, namespace: str) -> int:
    """The process id of the process running the call."""
    return os.getpid()
