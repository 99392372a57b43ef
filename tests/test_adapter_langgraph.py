"""The LangGraph adapter: a governed InMemoryStore, searched semantically and by filter."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from langgraph.store.base import GetOp, ListNamespacesOp, PutOp, SearchItem, SearchOp
from langgraph.store.memory import InMemoryStore

from memworth import HashingEncoder, Sidecar, ValidationError
from memworth.adapters.langgraph import GovernedItem, GovernedStore, item_id

pytestmark = pytest.mark.anyio

NOTES = {
    "reverse": "Use list.reverse() or slicing [::-1] to reverse a Python list.",
    "reversed": "reversed(list) returns an iterator over a Python list in reverse order.",
    "sort": "Python lists have a sort method; sorted() returns a new sorted list.",
    "prague": "Prague is the capital of the Czech Republic.",
    "water": "Water boils at 100 degrees Celsius at sea level.",
}
NS = ("memories", "alice")
ENCODER = HashingEncoder(256)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def embed(texts: list[str]) -> list[list[float]]:
    return [list(map(float, v)) for v in ENCODER.encode(texts)]


@pytest.fixture
def store() -> GovernedStore:
    inner = InMemoryStore(index={"dims": 256, "embed": embed, "fields": ["text"]})
    governed = GovernedStore(inner, Sidecar.open("memory://", exploration=0.0), namespace="alice")
    for key, text in NOTES.items():
        governed.put(NS, key, {"text": text})
    return governed


def test_a_semantic_search_is_governed_and_logged(store: GovernedStore) -> None:
    found = store.search(NS, query="how to reverse a python list", limit=2)
    assert [i.key for i in found] == ["reverse", "reversed"]
    assert all(isinstance(i, GovernedItem) and isinstance(i, SearchItem) for i in found)
    first = found[0]
    assert isinstance(first, GovernedItem)
    assert first.memory_id == item_id(NS, "reverse") == '["memories","alice","reverse"]'
    assert first.worth == 0.5 and first.value_class == "uncertain" and first.score is not None
    assert first.rank_score == pytest.approx(0.6 * first.score + 0.4 * 0.5)
    assert first.value == {"text": NOTES["reverse"]}  # the stored value is untouched
    assert first.dict()["memworth"]["episode"] == store.last_episode.id  # type: ignore[union-attr]
    episode = store.sidecar.store.backend.episodes([first.episode_id])[first.episode_id]
    assert [i.memory_id for i in episode.items] == [item_id(NS, "reverse"), item_id(NS, "reversed")]
    assert episode.query == "how to reverse a python list" and episode.namespace == "alice"
    store.report(True, first)
    assert store.sidecar.worth(first.memory_id, namespace="alice").counts.success == 0.5


def test_outcomes_reorder_a_listing_and_governance_hides_an_item(store: GovernedStore) -> None:
    assert [i.key for i in store.search(NS, limit=3)] == ["reverse", "reversed", "sort"]  # no query: store order
    assert [i.key for i in store.search(NS, limit=1)] == ["reverse"]
    store.report(False)
    assert [i.key for i in store.search(NS, limit=5)] == ["reversed", "sort", "prague", "water", "reverse"]
    for _ in range(10):
        store.sidecar.record(store.sidecar.retrieved([item_id(NS, "water")], namespace="alice"), True)
    assert store.search(NS, limit=1)[0].key == "reversed"  # 4 candidates asked for: water is not among them
    assert store.search(NS, limit=2)[0].key == "water"  # 8 asked for: the proven one comes first
    for _ in range(30):  # enough for the namespace's error-controlled test of low worth
        store.sidecar.record(store.sidecar.retrieved([item_id(NS, "prague")], namespace="alice"), False)
    report = store.sidecar.govern(apply=True, namespace="alice")
    deprecated = [e for e in report.applied if e.memory_id == item_id(NS, "prague")]
    assert [e.new for e in deprecated] == ["deprecated"]
    assert "prague" not in [i.key for i in store.search(NS, query="capital of the czech republic", limit=5)]
    item = store.get(NS, "prague")  # a get by key is not a retrieval: still there
    assert item is not None and item.value["text"] == NOTES["prague"]
    assert {(e.memory_id, e.action) for e in report.applied} >= {(item_id(NS, "water"), "promote")}
    store.sidecar.restore(deprecated[0].seq, namespace="alice")
    found = [i.key for i in store.search(NS, query="capital of the czech republic", limit=5)]
    assert "prague" in found  # restored: served again
    assert found[0] == "prague"  # water is promoted, but its boost lifts it only among the query's near matches
    (hit,) = store.search(NS, query="at what temperature does water boil", limit=1)
    assert isinstance(hit, GovernedItem) and hit.key == "water"  # the best match: the full boost
    assert hit.rank_score == pytest.approx(0.6 * hit.score + 0.4 * hit.worth + 0.1)


def test_pages_after_the_first_are_cut_from_the_ranking(store: GovernedStore) -> None:
    whole = [i.key for i in store.search(NS, query="python list", limit=5)]
    page = store.search(NS, query="python list", limit=2, offset=2)
    assert [i.key for i in page] == whole[2:4]
    episode = store.sidecar.store.backend.episodes([page[0].episode_id])[page[0].episode_id]  # type: ignore[attr-defined]
    assert [i.memory_id for i in episode.items] == [item_id(NS, k) for k in whole[2:4]]
    assert [i.propensity for i in episode.items] == [1.0, 1.0]
    assert len(store.search(NS, limit=500)) == 5


def test_batches_pass_everything_but_searches_through(store: GovernedStore) -> None:
    results = store.batch(
        [
            GetOp(NS, "water"),
            SearchOp(NS, None, 1, 0, "boiling water"),
            PutOp(NS, "tea", {"text": "Green tea brews at 80 degrees."}),
            ListNamespacesOp(match_conditions=None, max_depth=None, limit=10, offset=0),
        ]
    )
    assert results[0] is not None and results[0].key == "water"  # type: ignore[union-attr]
    assert [i.key for i in results[1]] == ["water"]  # type: ignore[union-attr]
    assert results[2] is None and results[3] == [NS]
    assert store.get(NS, "tea") is not None
    store.delete(NS, "tea")
    assert store.get(NS, "tea") is None
    assert store.sidecar.store.list(namespace="alice")[0].id == item_id(NS, "water")


async def test_async_search_and_report(store: GovernedStore) -> None:
    found = await store.asearch(NS, query="how to reverse a python list", limit=1)
    assert [i.key for i in found] == ["reverse"]
    await store.areport(False)
    assert store.sidecar.worth(item_id(NS, "reverse"), namespace="alice").worth == 0.0
    assert (await store.aget(NS, "reverse")) is not None


async def test_concurrent_async_searches_run_one_at_a_time_on_the_store_worker(store: GovernedStore) -> None:
    threads: set[str] = set()
    busy = {"now": 0, "most": 0}
    retrieve = store.sidecar.retrieve

    def watched(*args: Any, **kwargs: Any) -> Any:
        threads.add(threading.current_thread().name)
        busy["now"] += 1
        busy["most"] = max(busy["most"], busy["now"])
        try:
            time.sleep(0.001)  # lets another thread in, were there one
            return retrieve(*args, **kwargs)
        finally:
            busy["now"] -= 1

    store.sidecar.retrieve = watched  # type: ignore[method-assign]
    found = await asyncio.gather(*(store.asearch(NS, query=f"reverse a python list {i}", limit=2) for i in range(20)))
    await asyncio.gather(*(store.areport(i % 2 == 0, items[0]) for i, items in enumerate(found)))
    assert busy["most"] == 1 and len(threads) == 1 and threads.pop().startswith("memworth-aio")
    assert len({items[0].episode_id for items in found}) == 20  # type: ignore[attr-defined]
    assert store.sidecar.replay().consistent
    assert sum(m.counts.n for m in store.sidecar.store.list(namespace="alice")) == pytest.approx(40.0)  # 2 items x 20


def test_long_ids_are_hashed_and_bad_settings_refused() -> None:
    long_id = item_id(NS, "k" * 300)
    assert long_id.startswith("sha256:") and len(long_id) == 71
    assert item_id(("a.b",), "c") != item_id(("a",), "b.c")
    sidecar = Sidecar.open("memory://")
    with pytest.raises(ValidationError):
        GovernedStore(object(), sidecar)  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        GovernedStore(InMemoryStore(), object())  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        GovernedStore(InMemoryStore(), sidecar, fetch_factor=0)
    with pytest.raises(ValidationError):
        GovernedStore(InMemoryStore(), sidecar, namespace="not a name")
    with pytest.raises(ValidationError):
        GovernedStore(InMemoryStore(), sidecar).report(True)  # no search yet


def test_quarantine_and_pins_act_here_as_in_the_store(store: GovernedStore) -> None:
    sidecar = store.sidecar
    # a memory flagged for re-verification is not served as an answer ...
    store.search(NS, query="capital of the czech republic", limit=5)  # registers the items
    sidecar.store.set_standing(item_id(NS, "prague"), "re-verify", reason="check it", namespace="alice")
    sidecar.store.probe_share = 0.0
    for _ in range(5):
        assert "prague" not in [i.key for i in store.search(NS, query="capital of the czech republic", limit=5)]
        assert "prague" not in [i.key for i in store.search(NS, limit=5)]
    # ... except as a probe, marked in the episode log
    sidecar.store.probe_share = 1.0
    found = store.search(NS, query="capital of the czech republic", limit=1)
    assert [i.key for i in found] == ["prague"]
    episode = sidecar.store.backend.episodes([found[0].episode_id])[found[0].episode_id]  # type: ignore[attr-defined]
    assert episode.items[0].probe
    # a person's verdict sticks: it is pinned and served normally again
    sidecar.store.resolve(item_id(NS, "prague"), "confirmed", reason="still the capital", namespace="alice")
    sidecar.store.probe_share = 0.0
    assert "prague" in [i.key for i in store.search(NS, query="capital of the czech republic", limit=5)]
    assert sidecar.worth(item_id(NS, "prague"), namespace="alice").pin is not None
