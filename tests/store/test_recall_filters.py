"""Recall filters on every backend: metadata equality and ranges, contexts, status, standing,
applied before ranking, so a selective filter still finds the matching memories."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from memworth import MemoryStore
from memworth.errors import ValidationError


def _fill(store: MemoryStore, n: int = 120) -> None:
    store.add_many(
        [
            {
                "text": f"Python list tip number {i}: reverse, sort and slice lists.",
                "id": f"tip{i:03d}",
                "metadata": {
                    "i": i,
                    "team": "a" if i % 3 else "b",
                    "flag": i % 2 == 0,
                    "day": f"2026-01-{1 + i % 28:02d}",
                },
                "contexts": ["odd" if i % 2 else "even"],
            }
            for i in range(n)
        ]
    )


def _ids(store: MemoryStore, k: int = 5, **where: object) -> list[str]:
    return sorted(r.memory.id for r in store.recall("reverse a python list", k=k, where=where))


def test_metadata_equality_and_ranges_before_ranking(make_store: Callable[..., MemoryStore]) -> None:
    store = make_store(exploration=0.0, seed=0)
    _fill(store)
    ids, _, matrix = store.backend.vectors("default")
    ranked = [ids[j] for j in np.argsort(-(matrix @ store._embed(["reverse a python list"])[0]))]
    beyond = [m for m in ("tip117", "tip118", "tip119") if m not in ranked[:50]]
    assert beyond  # an unfiltered recall's 50 candidates would miss some of them ...
    assert _ids(store, metadata={"i": {"gte": 117}}) == ["tip117", "tip118", "tip119"]  # ... the filter finds them
    assert _ids(store, k=3, metadata={"i": {"gt": 10, "lte": 12}}) == ["tip011", "tip012"]
    assert _ids(store, k=2, metadata={"i": 42}) == ["tip042"]
    assert _ids(store, k=3, metadata={"i": {"in": [5, 7, 500]}}) == ["tip005", "tip007"]
    assert _ids(store, k=2, metadata={"i": 42.0}) == ["tip042"]  # numbers by value
    assert _ids(store, metadata={"i": "42"}) == []  # typed: a string is not a number
    assert _ids(store, metadata={"flag": 1}) == []  # typed: 1 is not true
    team_b = _ids(store, k=100, metadata={"team": "b", "flag": True})
    assert team_b == [f"tip{i:03d}" for i in range(120) if i % 3 == 0 and i % 2 == 0]
    days = _ids(store, k=100, metadata={"day": {"gte": "2026-01-27"}})
    assert days == [f"tip{i:03d}" for i in range(120) if 1 + i % 28 >= 27]
    assert _ids(store, metadata={"missing": 1}) == []


def test_contexts_status_and_standing(make_store: Callable[..., MemoryStore]) -> None:
    store = make_store(exploration=0.0, seed=0)
    _fill(store, 30)
    assert all(int(m[3:]) % 2 for m in _ids(store, k=10, contexts=["odd"]))
    store.set_status("tip001", "suppressed", reason="test")
    store.set_standing("tip003", "demoted", reason="test")
    store.set_standing("tip005", "promoted", reason="test")
    found = _ids(store, k=30, contexts=["odd"], standing=["normal", "promoted"])
    assert "tip001" not in found and "tip003" not in found and "tip005" in found and len(found) == 13
    assert _ids(store, k=5, status=["suppressed"]) == []  # a filter narrows, never brings back what recall hides
    assert _ids(store, k=5, standing=["promoted"]) == ["tip005"]


def test_a_holdout_recall_filters_too(make_store: Callable[..., MemoryStore]) -> None:
    store = make_store(exploration=0.0, seed=0, holdout=0.5)
    _fill(store, 80)
    store.set_status("tip078", "deprecated", reason="test")
    eid = next(f"e{i}" for i in range(100) if store.holdout_episode(f"e{i}"))
    recall = store.recall("reverse a python list", k=3, where={"metadata": {"i": {"gte": 77}}}, episode_id=eid)
    assert recall.episode.holdout and sorted(r.memory.id for r in recall) == ["tip077", "tip078", "tip079"]


@pytest.mark.parametrize(
    ("where", "field"),
    [
        ({}, "where"),
        ({"colour": "red"}, "where"),
        ({"metadata": {}}, "where.metadata"),
        ({"metadata": {"i": {"between": [1, 2]}}}, "where.metadata.i"),
        ({"metadata": {"i": {"gte": 1, "lt": "z"}}}, "where.metadata.i"),
        ({"metadata": {"i": {"gte": True}}}, "where.metadata.i.gte"),
        ({"metadata": {"i": {"gte": float("nan")}}}, "where.metadata.i.gte"),
        ({"metadata": {"i": [1, 2]}}, "where.metadata.i"),
        ({"metadata": {"i": {"in": []}}}, "where.metadata.i"),
        ({"contexts": []}, "where.contexts"),
        ({"status": ["gone"]}, "where.status"),
        ({"standing": "high"}, "where.standing"),
    ],
)
def test_bad_filters_are_refused_naming_the_part(store: MemoryStore, where: dict, field: str) -> None:
    store.add("a memory", id="m")
    with pytest.raises(ValidationError) as err:
        store.recall("memory", where=where)
    assert err.value.field == field
    assert store.outcome_page().items == [] and store.backend.episodes([]) == {}


def test_a_repeated_filter_searches_once(make_store: Callable[..., MemoryStore], backend_kind: str) -> None:
    if backend_kind in ("postgres", "pgvector"):
        pytest.skip("counts the searches of the store's own vector index")
    store = make_store(exploration=0.0, seed=0)
    _fill(store, 400)
    where = {"metadata": {"i": {"gte": 396}}}
    space = store._space("default")
    assert space.index is not None
    real, calls = space.index.search, []

    def counted(q: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
        calls.append(n)
        return real(q, n)

    space.index.search = counted  # type: ignore[method-assign]
    first = _ids(store, **where)
    searched_first = len(calls)
    calls.clear()
    assert _ids(store, **where) == first == ["tip396", "tip397", "tip398", "tip399"]
    assert searched_first >= 2 and len(calls) == 1  # the match share learned the first time sizes the search
