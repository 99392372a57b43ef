"""Vector search inside PostgreSQL: with pgvector (bundled server) and without (the machine's)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from memworth import HashingEncoder, MemoryStore
from tests.store.conftest import FACTS, drop, url_for


@pytest.mark.parametrize("backend_kind", ["pgvector"])
def test_recall_searches_inside_postgres_with_pgvector(make_store: Callable[..., MemoryStore]) -> None:
    store = make_store(index="auto", seed=0)
    store.exploration = 0.0
    assert store.backend.pgvector  # type: ignore[attr-defined]
    store.add_many([{"id": k, "text": v} for k, v in FACTS.items()])
    recall = store.recall("how do I reverse a python list", k=2)
    assert recall.diagnostics["search"] == "database" and recall.results[0].memory.id == "reverse"
    store.set_status("reverse", "suppressed", reason="test")  # filtered inside the SQL query
    assert "reverse" not in {r.memory.id for r in store.recall("reverse a python list", k=6)}
    ids, sims = store.backend.search("default", HashingEncoder().encode(["python list methods"])[0], 3)  # type: ignore[attr-defined]
    assert len(ids) == 3 and np.all(np.diff(sims) <= 1e-6)


def test_without_pgvector_the_store_searches_its_own_index(tmp_path: Path) -> None:
    s = MemoryStore.open(url_for("postgres", tmp_path), encoder=HashingEncoder(), seed=0)
    try:
        s.exploration = 0.0
        s.add_many([{"id": k, "text": v} for k, v in FACTS.items()])
        if s.backend.pgvector:  # type: ignore[attr-defined]
            pytest.fail("the machine's PostgreSQL has pgvector: this test needs one without")
        assert s.backend.search("default", np.zeros(384, dtype=np.float32), 5) is None  # type: ignore[attr-defined]
        recall = s.recall("reverse a python list", k=1)
        assert "search" not in recall.diagnostics and recall.results[0].memory.id == "reverse"
    finally:
        drop(s)
