"""Every store test runs against every backend: the conformance suite."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from memworth import HashingEncoder, MemoryStore

# sqlite-hnsw: the SQLite backend with candidates from the faiss HNSW index.
BACKENDS = ["memory", "sqlite", "sqlite-hnsw"]


def url_for(kind: str, tmp_path: Path) -> str:
    return "memory://" if kind == "memory" else f"sqlite:///{tmp_path / 'store.db'}"


def index_for(kind: str) -> str:
    return "hnsw" if kind.endswith("hnsw") else "exact"


@pytest.fixture(params=BACKENDS)
def backend_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def store(backend_kind: str, tmp_path: Path) -> Iterator[MemoryStore]:
    s = MemoryStore.open(url_for(backend_kind, tmp_path), encoder=HashingEncoder(), seed=0, index=index_for(backend_kind))
    yield s
    s.close()


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
