"""Recording a Recall or Episode the caller holds, on every backend (issue 17, branch reccpu).

A plain record credits the episode as held, without reading it back; the write checks it is
logged so (``append_outcomes(..., given=...)``), with the namespace's generation the cached
provenance was read at (``generations=...``). When it is not (another copy of the episode, one
never logged, provenance added since), nothing is written and the record reads the episode and
credits what a read gives, as before: replay equals the live counters bit for bit.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
from pathlib import Path
from typing import Any

import pytest

from memworth import Counts, HashingEncoder, MemoryStore, UnknownEpisodeError, ValidationError
from memworth.aio import AsyncMemoryStore
from memworth.errors import ChangedError
from memworth.store import Episode
from memworth.store.backend import Increment
from memworth.store.records import OutcomeRow
from tests.store.conftest import FACTS, drop, url_for


def counting(store: MemoryStore, method: str, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A list that grows by one at each call the store makes of its backend's ``method``."""
    calls: list[int] = []
    real = getattr(store.backend, method)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(store.backend, method, counted)
    return calls


def counting_reads(store: MemoryStore, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A list that grows by one at each episode read the store makes for a record."""
    return counting(store, "episodes_at", monkeypatch)


def reweighted(episode: Episode, weight: float) -> Episode:
    """``episode`` with every item's weight set to ``weight``: a copy the log does not hold."""
    return dataclasses.replace(episode, items=tuple(dataclasses.replace(it, weight=weight) for it in episode.items))


def test_a_held_episode_is_credited_without_a_read(filled: MemoryStore, monkeypatch: pytest.MonkeyPatch) -> None:
    filled.exploration = 0.0
    first, second, third = (filled.recall(q, k=3) for q in ("python list", "capital", "recursive"))
    filled.record(first, True)  # the first record reads (and caches) the namespace's provenance
    reads = counting_reads(filled, monkeypatch)
    filled.record(second.episode, False)
    filled.record_many([(third, True)])
    assert reads == []
    assert filled.get(second.results[0].memory.id).counts.failure > 0
    assert filled.replay().consistent
    filled.record(filled.recall("boils", k=2).episode.id, True)  # an id: read
    assert reads == [1]


def test_a_held_copy_the_log_does_not_hold_is_credited_as_logged(
    filled: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    filled.exploration = 0.0
    filled.record(filled.recall("capital", k=2), True)
    recall = filled.recall("reverse a python list", k=3)
    logged = filled.backend.episodes([recall.episode.id])[recall.episode.id]
    before = {m.id: m.counts for m in filled.list()}
    reads = counting_reads(filled, monkeypatch)
    filled.record(reweighted(recall.episode, 0.25), True)  # the write refuses the copy; the record reads
    assert reads == [1]
    for it in logged.items:
        old = before[it.memory_id]
        assert filled.get(it.memory_id).counts.success == old.success + it.weight != old.success + 0.25
    assert filled.replay().consistent


def test_a_held_episode_never_logged_is_refused_with_nothing_written(filled: MemoryStore) -> None:
    filled.exploration = 0.0
    filled.record(filled.recall("capital", k=2), True)
    recall = filled.recall("reverse a python list", k=2)
    before = {m.id: m.counts for m in filled.list()}
    forged = dataclasses.replace(recall.episode, id="never-logged")
    with pytest.raises(UnknownEpisodeError, match="never-logged"):
        filled.record(forged, True)
    elsewhere = dataclasses.replace(recall.episode, namespace="elsewhere")
    with pytest.raises(UnknownEpisodeError):
        filled.record(elsewhere, True)
    with pytest.raises(UnknownEpisodeError, match=r"outcomes\[1\]"):
        filled.record_many([(recall, True), (forged, False)])
    assert {m.id: m.counts for m in filled.list()} == before
    assert len(list(filled.backend.outcome_log())) == 1
    filled.record(recall, False)  # the real one still records
    assert filled.replay().consistent


def test_provenance_added_after_it_was_cached_is_credited_along(filled: MemoryStore) -> None:
    """The cached provenance was read at a generation the write finds moved: the record reads
    again, and credit flows to the new memory's parent (replay, which reads the provenance as
    it is, agrees)."""
    filled.exploration = 0.0
    filled.record(filled.recall("capital", k=2), True)  # caches the provenance (no edges yet)
    filled.add("Reverse a list in place with list.reverse().", id="child", derived_from=["water"])
    recall = filled.recall("reverse a list in place", k=1)
    assert [r.memory.id for r in recall] == ["child"]
    before = filled.get("water").counts
    filled.record(recall, True)
    assert filled.get("water").counts.success == before.success + filled.propagation
    assert filled.replay().consistent


def test_the_backend_refuses_a_given_episode_or_generation_that_moved(filled: MemoryStore) -> None:
    filled.exploration = 0.0
    recall = filled.recall("reverse a python list", k=2)
    ep, ns = recall.episode, recall.episode.namespace
    row = OutcomeRow(ep.id, True, "explicit", 1.0, 1.0, 0, ns, 0.0, 0, None)
    increments = [Increment(ns, it.memory_id, it.weight, 0.0, 1.0) for it in ep.items]
    before = {m.id: m.counts for m in filled.list()}
    with pytest.raises(UnknownEpisodeError):
        filled.backend.append_outcomes([row], increments, given=[reweighted(ep, 0.125)])
    moved = filled.backend.generation(ns) + 1
    with pytest.raises(ChangedError):
        filled.backend.append_outcomes([row], increments, given=[ep], generations={ns: moved})
    assert {m.id: m.counts for m in filled.list()} == before
    assert list(filled.backend.outcome_log()) == []
    filled.backend.append_outcomes([row], increments, given=[ep], generations={ns: filled.backend.generation(ns)})
    assert [o.episode_id for o in filled.backend.outcome_log()] == [ep.id]
    assert filled.get(ep.items[0].memory_id).counts == Counts(
        before[ep.items[0].memory_id].success + ep.items[0].weight, 0.0, 1.0
    )


def test_the_async_store_credits_a_held_episode_as_the_sync_one_does(backend_kind: str, tmp_path: Path) -> None:
    """On PostgreSQL the async store writes natively (the backend's plans): the same check."""
    url = url_for(backend_kind, tmp_path)

    async def play() -> tuple[list[tuple[str, Counts]], bool]:
        store = await AsyncMemoryStore.open(url, encoder=HashingEncoder(), seed=0, exploration=0.0)
        try:
            await store.add_many([{"id": k, "text": v} for k, v in FACTS.items()])
            await store.record(await store.recall("capital", k=2), True)
            held = await store.recall("reverse a python list", k=3)
            await store.record(held, False)
            copy = await store.recall("recursive function", k=2)
            await store.record_many([(reweighted(copy.episode, 0.125), True)])  # refused by the write, then read
            with pytest.raises(UnknownEpisodeError):
                await store.record(dataclasses.replace(held.episode, id="never-logged"), True)
            counts = [(m.id, m.counts) for m in store.store.list()]
            return counts, (await store.replay()).consistent
        finally:
            await store.aclose()

    counts, consistent = asyncio.run(play())
    assert consistent and any(c.failure > 0 for _, c in counts) and any(c.success > 0 for _, c in counts)
    if backend_kind != "memory":  # what the async store wrote, read by a sync one
        sync = MemoryStore.open(url, encoder=HashingEncoder())
        try:
            assert [(m.id, m.counts) for m in sync.list()] == counts
        finally:
            drop(sync)


def test_a_held_list_of_items_changed_before_the_write_is_credited_as_logged(
    filled: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review of reccpu (branch rrec): an Episode built with a *list* of items (the dataclass is
    frozen, the list is not) is changed by another thread after the store credited it and before
    the write checked it. The credit and the check must look at one copy: the store credits
    what is logged, and replay agrees."""
    filled.exploration = 0.0
    filled.record(filled.recall("capital", k=2), True)
    recall = filled.recall("reverse a python list", k=3)
    logged = recall.episode.items
    items = [dataclasses.replace(it, weight=0.25) for it in logged]  # a copy the log does not hold
    held = dataclasses.replace(recall.episode, items=items)  # type: ignore[arg-type]
    before = {m.id: m.counts for m in filled.list()}
    write = filled.backend.append_outcomes

    def changed_meanwhile(*args: Any, **kwargs: Any) -> Any:
        items[:] = logged  # the other thread puts the logged items back before the write looks
        return write(*args, **kwargs)

    monkeypatch.setattr(filled.backend, "append_outcomes", changed_meanwhile)
    filled.record(held, True)
    for it in logged:
        assert filled.get(it.memory_id).counts.success == before[it.memory_id].success + it.weight
    assert filled.replay().consistent


@pytest.mark.parametrize("tail", ["\x00", "\ud800"])
def test_a_held_copy_with_unstorable_memory_ids_is_credited_as_logged(filled: MemoryStore, tail: str) -> None:
    """Review of reccpu (branch rrec): a copy whose memory ids no backend can store (NUL, a lone
    surrogate) is not logged so; like any other such copy it is credited as a read gives (as
    before reccpu), not refused by the database driver (PostgreSQL: StoreError, UnicodeEncodeError)."""
    filled.exploration = 0.0
    filled.record(filled.recall("capital", k=2), True)
    recall = filled.recall("reverse a python list", k=3)
    items = tuple(dataclasses.replace(it, memory_id=it.memory_id + tail) for it in recall.episode.items)
    before = {m.id: m.counts for m in filled.list()}
    filled.record(dataclasses.replace(recall.episode, items=items), True)
    for it in recall.episode.items:
        assert filled.get(it.memory_id).counts.success == before[it.memory_id].success + it.weight
    assert filled.replay().consistent


def test_an_add_between_recall_and_record_makes_no_refused_write(
    filled: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review of reccpu (branch rrec): an agent's loop recalls, adds what it learned, then records.
    The add moved the namespace's generation, so the provenance this store object cached is not
    current: crediting the held episode with it was refused by the write (a statement that locks
    the counters and writes nothing, PostgreSQL four round trips where main made three), then read
    back. The store object knows it added: it reads at once, one write."""
    filled.exploration = 0.0
    filled.record(filled.recall("capital", k=2), True)  # caches the provenance
    writes = counting(filled, "append_outcomes", monkeypatch)
    recall = filled.recall("reverse a python list", k=2)
    filled.add("Reversed lists keep their length.", id="learned", derived_from=["reverse"])
    filled.record(recall, True)
    assert writes == [1]
    held = filled.recall("boils", k=2)
    filled.record(held, False)  # nothing added since: held, no read
    assert writes == [1, 1]
    assert filled.replay().consistent


def test_provenance_another_store_object_added_is_credited_along(backend_kind: str, tmp_path: Path) -> None:
    """Review of reccpu (branch rrec): another writer (a second store object on the same file or
    database) adds a derived memory after this object cached the provenance; this object recalls
    it and records the held Recall. The write finds the generation moved (nothing written), the
    record reads again and credit flows to the new parent, as a record by id gives."""
    if backend_kind == "memory":
        pytest.skip("one memory:// store per object: there is no other writer")
    url = url_for(backend_kind, tmp_path)
    mine = MemoryStore.open(url, encoder=HashingEncoder(), seed=0, exploration=0.0)
    other = MemoryStore.open(url, encoder=HashingEncoder(), seed=1)
    try:
        mine.add_many([{"id": k, "text": v} for k, v in FACTS.items()])
        mine.record(mine.recall("capital", k=2), True)  # caches the provenance (no edges yet)
        other.add("Reverse a list in place with list.reverse().", id="child", derived_from=["water"])
        recall = mine.recall("reverse a list in place", k=1)
        assert [r.memory.id for r in recall] == ["child"]
        before = mine.get("water").counts
        mine.record(recall, True)
        assert mine.get("water").counts.success == before.success + mine.propagation
        assert mine.replay().consistent
    finally:
        other.close()
        drop(mine)


def test_every_backend_refuses_the_same_malformed_given_write(filled: MemoryStore) -> None:
    """Review of reccpu (branch rrec): ``append_outcomes``' ``given`` / ``generations`` contract
    answered differently per backend: ``generations`` without ``given`` was checked by the memory
    and SQLite backends and refused by PostgreSQL; an outcome logged in one namespace for a
    given episode of another was written by all three (PostgreSQL then logged an outcome whose
    episode is not in its namespace). One rule (``check_given``) refuses both, nothing written."""
    filled.exploration = 0.0
    ep = filled.recall("reverse a python list", k=2).episode
    ns = ep.namespace
    increments = [Increment(ns, it.memory_id, it.weight, 0.0, 1.0) for it in ep.items]
    row = OutcomeRow(ep.id, True, "explicit", 1.0, 1.0, 0, ns, 0.0, 0, None)
    before = {m.id: m.counts for m in filled.list()}
    generation = filled.backend.generation(ns)
    with pytest.raises(ValidationError, match="generations"):
        filled.backend.append_outcomes([row], increments, generations={ns: generation})
    elsewhere = dataclasses.replace(row, namespace="elsewhere")
    with pytest.raises(ValidationError, match="given"):
        filled.backend.append_outcomes([elsewhere], increments, given=[ep])
    assert {m.id: m.counts for m in filled.list()} == before
    assert list(filled.backend.outcome_log()) == []


QUERIES = ["python list", "capital", "recursive", "boils", "reverse", "czech", "methods sort", "water sea"]


def play_mix(url: str, held: bool, seed: int) -> tuple[dict[str, tuple[float, float, float]], bool]:
    """A seeded mix of recalls, records (held Recall or Episode, a copy the log does not hold,
    batches; or all by id when not ``held``), derived memories added and memories erased by a
    second store object on the same file or database (the same object on ``memory://``)."""
    rng = random.Random(seed)
    store = MemoryStore.open(url, encoder=HashingEncoder(), seed=0, exploration=0.0)
    other = store if url == "memory://" else MemoryStore.open(url, encoder=HashingEncoder(), seed=1)
    try:
        store.add_many([{"id": k, "text": v} for k, v in FACTS.items()])
        pending: list[Any] = []
        for step in range(40):
            op = rng.random()
            if op < 0.5:
                pending.append(store.recall(rng.choice(QUERIES), k=rng.randint(1, 3)))
            elif op < 0.8 and pending:
                recall, ok = pending.pop(rng.randrange(len(pending))), rng.random() < 0.5
                forge, as_episode = rng.random() < 0.2, rng.random() < 0.5
                held_one = reweighted(recall.episode, 0.5) if forge else recall.episode if as_episode else recall
                store.record(held_one if held else recall.episode.id, ok)
            elif op < 0.88 and len(pending) >= 2:
                batch = [pending.pop(), pending.pop()]
                store.record_many([(b if held else b.episode.id, rng.random() < 0.5) for b in batch])
            elif op < 0.95:
                parent = rng.choice(list(FACTS))
                other.add(f"derived fact {step} about lists and capitals", id=f"d{step}", derived_from=[parent])
            else:
                derived = [m.id for m in store.list() if m.id.startswith("d")]
                if derived:
                    other.delete(rng.choice(derived), reason="mix")
        counts = {m.id: (m.counts.success, m.counts.failure, m.counts.n) for m in store.list()}
        return counts, store.replay().consistent
    finally:
        if other is not store:
            other.close()
        drop(store)


@pytest.mark.parametrize("seed", [0, 2])
def test_held_and_by_id_records_credit_alike_bit_for_bit(backend_kind: str, tmp_path: Path, seed: int) -> None:
    """Review of reccpu (branch rrec): the same seeded work recorded with held episodes and by id
    (each on a fresh store) leaves the same counters, float for float, and replay agrees with both,
    while another writer adds provenance and erases memories in between."""
    (tmp_path / "held").mkdir()
    (tmp_path / "ids").mkdir()
    as_held = play_mix(url_for(backend_kind, tmp_path / "held"), True, seed)
    by_id = play_mix(url_for(backend_kind, tmp_path / "ids"), False, seed)
    assert as_held[1] and by_id[1]
    assert as_held[0] == by_id[0]
    assert any(c[0] > 0 for c in as_held[0].values()) and any(m.startswith("d") for m in as_held[0])


def test_a_batch_with_a_copy_of_an_unstorable_namespace_is_credited_as_logged(filled: MemoryStore) -> None:
    """Review of reccpu (branch rrec): a batch over two namespaces (so no one namespace is named)
    holding a copy whose namespace no backend keeps (NUL) is credited as a read gives, as
    before reccpu, not refused by PostgreSQL's driver (StoreError) while checking the copy.
    Without credit propagation (with it, a namespace whose provenance is not cached is read)."""
    filled.exploration, filled.propagation = 0.0, 0.0
    filled.add("Paris is the capital of France.", id="paris", namespace="geo")
    filled.record(filled.recall("capital", k=2), True)
    filled.record(filled.recall("capital of France", k=1, namespace="geo"), True)
    here, there = filled.recall("reverse a python list", k=2), filled.recall("capital", k=1, namespace="geo")
    before = {it.memory_id: filled.get(it.memory_id).counts for it in here.episode.items}
    forged = dataclasses.replace(here.episode, namespace="default\x00")
    filled.record_many([(forged, True), (there, True)])
    for it in here.episode.items:
        assert filled.get(it.memory_id).counts.success == before[it.memory_id].success + it.weight
    assert filled.replay().consistent
