"""``record(..., used=[...])`` on every backend: the agent says which recalled memories it used.

The used memories share the episode's credit under the store's credit rule, the others get
none (their retrieval still counts in ``n``); the logged episode keeps the shares, so replay
rebuilds the live counters bit for bit; bad ``used`` is refused with nothing written.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from memworth import Counts, DuplicateError, HashingEncoder, MemoryStore, ValidationError
from memworth.aio import AsyncMemoryStore
from tests.store.conftest import FACTS, drop, url_for


def snapshot(store: MemoryStore) -> list[tuple[str, Counts]]:
    return [(m.id, m.counts) for m in store.list()]


def logged_weights(store: MemoryStore, episode_id: str) -> list[float]:
    return [it.weight for it in store.backend.episodes([episode_id])[episode_id].items]


def test_only_the_used_memories_are_credited_and_the_log_keeps_their_shares(filled: MemoryStore) -> None:
    filled.exploration = 0.0
    recall = filled.recall("reverse a python list", k=4)
    ids = [r.memory.id for r in recall]
    filled.record(recall, success=False, used=[ids[2], recall.results[0]])  # ids or the Recalled results
    assert logged_weights(filled, recall.episode.id) == [0.5, 0.0, 0.5, 0.0]
    assert filled.get(ids[0]).counts == Counts(0.0, 0.5, 1.0) == filled.get(ids[2]).counts
    assert filled.get(ids[1]).counts == Counts(0.0, 0.0, 1.0) == filled.get(ids[3]).counts  # shown, not credited
    assert filled.replay().consistent


def test_score_credit_is_shared_among_the_used_in_proportion_to_their_weights(
    make_store: Callable[..., MemoryStore],
) -> None:
    store = make_store(seed=0, exploration=0.0, credit="score", w_min=0.1)
    store.add_many([{"id": k, "text": v} for k, v in FACTS.items()])
    recall = store.recall("capital of the czech republic", k=3)
    w = [it.weight for it in recall.episode.items]
    store.record(recall, success=True, used=[recall.results[0], recall.results[2]])
    shares = logged_weights(store, recall.episode.id)
    assert shares[1] == 0.0 and sum(shares) == pytest.approx(1.0)
    assert shares[0] / shares[2] == pytest.approx(max(w[0] / w[2], 1.0))  # proportional (the floor is not reached)
    assert store.get(recall.results[0].memory.id).counts.success == shares[0]
    assert store.replay().consistent


def test_replay_rebuilds_a_log_mixing_used_and_full_credit_exactly(make_store: Callable[..., MemoryStore]) -> None:
    store = make_store(seed=1, credit="score", propagation=0.5, max_hops=2)
    store.add_many([{"id": k, "text": v} for k, v in FACTS.items()])
    store.add("Bratislava became a capital in 1993.", id="bratislava", derived_from=["czechoslovakia"])
    rng = np.random.default_rng(5)
    queries = ["reverse a list", "capital city", "recursion base case", "water boiling", "czech capital 1993"]
    batch = []
    for i in range(8):  # record_many: (episode, success) and (episode, success, used) mixed
        recall = store.recall(str(rng.choice(queries)), k=3)
        used = None if i % 3 == 0 else [recall.results[int(rng.integers(len(recall)))].memory.id]
        batch.append((recall.episode, bool(rng.random() < 0.6), used) if i % 2 else (recall.episode, True))
    store.record_many(batch)
    for i in range(50):
        recall = store.recall(str(rng.choice(queries)), k=int(rng.integers(1, 5)))
        picks = sorted({r.memory.id for r in recall if rng.random() < 0.5}) or [recall.results[0].memory.id]
        source = str(rng.choice(["explicit", "implicit", "heuristic"]))
        store.record(recall, bool(rng.random() < 0.5), source=source, used=None if i % 4 == 0 else picks)
    report = store.replay()
    assert report.outcomes == 58 and report.consistent
    live = {m.id: m.counts for m in store.list()}
    assert all(report.rebuilt[("default", mid)] == c for mid, c in live.items() if c.n > 0)


@pytest.mark.parametrize(
    ("used", "field", "reason"),
    [
        ([], "used", "at least one"),
        (["reverse", "reverse"], "used", "twice"),
        (["no-such-memory"], "used", "was not recalled"),
        ("reverse", "used", "list"),
        ([3], "used", "memory ids"),
    ],
)
def test_bad_used_is_refused_naming_it_and_nothing_is_written(
    filled: MemoryStore, used: object, field: str, reason: str
) -> None:
    filled.exploration = 0.0
    recall = filled.recall("reverse a python list", k=3)
    weights = logged_weights(filled, recall.episode.id)
    before = snapshot(filled)
    with pytest.raises(ValidationError) as err:
        filled.record(recall, True, used=used)  # type: ignore[arg-type]
    assert err.value.field == field and reason in err.value.reason
    assert snapshot(filled) == before and list(filled.backend.outcome_log()) == []
    assert logged_weights(filled, recall.episode.id) == weights
    filled.record(recall, True)  # still recordable
    assert filled.replay().consistent


def test_a_bad_used_in_a_batch_names_its_outcome_and_nothing_is_written(filled: MemoryStore) -> None:
    first, second = filled.recall("water boiling", k=2), filled.recall("recursion", k=2)
    before = snapshot(filled)
    with pytest.raises(ValidationError) as err:
        filled.record_many([(first, True, [first.results[0]]), (second, False, ["water-is-wet"])])
    assert err.value.field == "outcomes[1].used"
    assert snapshot(filled) == before and list(filled.backend.outcome_log()) == []
    assert logged_weights(filled, first.episode.id) == [it.weight for it in first.episode.items]


def test_a_refused_batch_leaves_the_logged_weights_as_they_were(filled: MemoryStore) -> None:
    done, fresh = filled.recall("capital city", k=3), filled.recall("python list", k=3)
    filled.record(done, True)
    before = snapshot(filled)
    with pytest.raises(DuplicateError):  # found by the write itself: the weights' update is rolled back with it
        filled.backend.append_outcomes(*_one_write(filled, fresh, done))
    assert snapshot(filled) == before
    assert logged_weights(filled, fresh.episode.id) == [it.weight for it in fresh.episode.items]
    assert filled.replay().consistent


def _one_write(store: MemoryStore, fresh: object, done: object) -> tuple[list, list, list]:
    """The backend write a record_many of ``fresh`` (used: its first memory) and ``done`` (recorded
    already) makes, built as recording builds it, to reach the backend's own duplicate check."""
    from memworth.store.recording import with_used
    from memworth.store.records import OutcomeRow

    eps = [with_used(fresh.episode, [fresh.results[0].memory.id], store.credit, store.w_min), done.episode]  # type: ignore[attr-defined]
    rows = [OutcomeRow(ep.id, True, "explicit", 1.0, 1.0, 0, ep.namespace, 0.0, 0, 0) for ep in eps]
    increments = [inc for row, ep in zip(rows, eps, strict=True) for inc in store.increments_of(row, ep, {})]
    return rows, increments, [eps[0]]


def test_unused_memories_see_no_outcome_in_their_change_streams(filled: MemoryStore) -> None:
    filled.exploration = 0.0
    for _ in range(5):
        recall = filled.recall("capital of the czech republic", k=2)
        filled.record(recall, False, used=["prague"] if "prague" in {r.memory.id for r in recall} else None)
    recalled = {it.memory_id for o in filled.backend.outcome_log() for it in filled.backend.episodes([o.episode_id])[o.episode_id].items}
    streams = filled.outcome_streams()
    assert "prague" in recalled and len(recalled) > 1
    assert streams["prague"].success.size == 5
    assert all(mid not in streams for mid in recalled - {"prague"})
    assert filled.recent_counts()["prague"] == Counts(0.0, 5.0, 5.0)


def test_the_async_store_records_used_as_the_sync_one_does(backend_kind: str, tmp_path: Path) -> None:
    """On PostgreSQL the async store writes natively (psycopg's async pool, the backend's plans)."""
    url = url_for(backend_kind, tmp_path)

    async def play() -> tuple[bool, list[float], bool]:
        store = await AsyncMemoryStore.open(url, encoder=HashingEncoder(), seed=0, exploration=0.0)
        try:
            await store.add_many([{"id": k, "text": v} for k, v in FACTS.items()])
            recall = await store.recall("reverse a python list", k=3)
            with pytest.raises(ValidationError):
                await store.record(recall, True, used=["nowhere"])
            await store.record(recall, True, used=[recall.results[1].memory.id])
            second = await store.recall("capital", k=2)
            await store.record_many([(second, False, [second.results[0]])])
            weights = logged_weights(store.store, recall.episode.id)
            return store.native, weights, (await store.replay()).consistent
        finally:
            await store.aclose()

    native, weights, consistent = asyncio.run(play())
    assert native == (backend_kind in ("postgres", "pgvector"))
    assert weights == [0.0, 1.0, 0.0] and consistent
    if backend_kind in ("postgres", "pgvector"):
        drop(MemoryStore.open(url, encoder=HashingEncoder()))


def test_a_source_quota_counts_only_the_memories_an_outcome_credited(make_store: Callable[..., MemoryStore]) -> None:
    """``SourceLimit.max_per_memory`` counts outcomes crediting a memory: one a ``used`` left out
    (weight 0) was not credited, so it does not use up that memory's quota (found in review)."""
    from memworth.signals.sources import SourceLimit

    store = make_store(exploration=0.0, limits={"heuristic": SourceLimit(max_per_memory=2)})
    store.add("Prague is the capital of Czechia.", id="a")
    store.add("Prague, capital city of the Czech Republic.", id="b")
    for used in (["a"], ["b"], ["b"]):  # a is credited once, b twice: within the quota of 2
        recall = store.recall("Prague capital", k=2)
        assert {r.memory.id for r in recall} == {"a", "b"}
        store.record(recall, True, source="heuristic", used=used)
    a, b = store.get("a").counts.success, store.get("b").counts.success  # the source's confidence each
    assert a > 0 and b == pytest.approx(2 * a)
    with pytest.raises(Exception, match="nothing recorded"):  # a third for b is beyond it
        store.record(store.recall("Prague capital", k=2), True, source="heuristic", used=["b"])
