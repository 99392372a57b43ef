"""The PostgreSQL backend's batched recording path (one statement for every counter of a batch).

* a batch of 500 outcomes leaves exactly (bit for bit) the counters, log and replay that
  500 single records leave;
* the counters add each increment in the order given, starting from the stored value,
  as one UPDATE per increment would (so replay matches bit for bit);
* an episode recorded twice, inside a batch or against the log, and an unknown memory,
  refuse the whole batch: nothing is written, the error names the episode or memory;
* batches from 4 threads over the same few hot memories finish without a deadlock and
  leave counters equal to a replay of the log.
"""

from __future__ import annotations

import functools
import operator
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from memworth import Counts, DuplicateError, HashingEncoder, MemoryStore, UnknownMemoryError, ValidationError
from memworth.store import Episode
from memworth.store.backend import Increment
from memworth.store.records import OutcomeRow
from tests.store.conftest import drop, url_for

FAST = "&options=-csynchronous_commit%3Doff"
TOPICS = ["python lists", "sorting", "recursion", "capital cities", "boiling water", "databases", "networks"]


@pytest.fixture
def open_store(tmp_path: Path) -> Iterator[Callable[..., MemoryStore]]:
    """Open PostgreSQL stores (each in a fresh schema unless ``url`` is given); all dropped afterwards.

    Commits do not wait for the disk (``synchronous_commit=off``): these tests are about
    what a batch writes, not about crashes (tests/store/test_durability.py is), and the
    hundreds of recalls that make their episodes are then quick.
    """
    opened: list[MemoryStore] = []

    def make(url: str | None = None, **settings: object) -> MemoryStore:
        settings.setdefault("encoder", HashingEncoder())
        s = MemoryStore.open((url or url_for("postgres", tmp_path)) + FAST, **settings)
        opened.append(s)
        return s

    yield make
    for s in reversed(opened):
        if s.backend.schema is not None:  # type: ignore[attr-defined]
            try:
                drop(s)
            except Exception:  # dropped already through another store on the same schema
                s.close()


def fill(store: MemoryStore, size: int = 40) -> None:
    """``size`` memories over a few topics, a third derived from another (so credit propagates)."""
    rows: list[dict[str, object]] = []
    for i in range(size):
        row: dict[str, object] = {"id": f"m{i:03d}", "text": f"{TOPICS[i % len(TOPICS)]} fact number {i}"}
        if i >= 3 and i % 3 == 0:
            row["derived_from"] = [f"m{i - 3:03d}"]
        rows.append(row)
    store.add_many(rows)


def recalls(store: MemoryStore, count: int, seed: int, prefix: str) -> list[Episode]:
    rng = np.random.default_rng(seed)
    return [
        store.recall(
            f"{rng.choice(TOPICS)} {rng.choice(TOPICS)}", k=int(rng.integers(1, 6)), episode_id=f"{prefix}{i:04d}"
        ).episode
        for i in range(count)
    ]


def counters(store: MemoryStore) -> dict[str, tuple[Counts, float]]:
    return {m.id: (m.counts, m.updated) for m in store.list()}


def log_of(store: MemoryStore) -> list[tuple[str, bool, str, float]]:
    return [(o.episode_id, o.success, o.source, o.confidence) for o in store.backend.outcome_log()]


def test_a_batch_of_500_equals_500_single_records(open_store: Callable[..., MemoryStore]) -> None:
    settings = {"seed": 7, "credit": "score", "clock": lambda: 1000.0}
    batched, single = open_store(**settings), open_store(**settings)
    for s in (batched, single):
        fill(s)
    eps = recalls(batched, 500, 1, "e")
    assert [e.items for e in recalls(single, 500, 1, "e")] == [e.items for e in eps]  # the same episodes
    ok = (np.random.default_rng(2).random(500) < 0.6).tolist()
    generation = batched.backend.generation()
    batched.record_many(list(zip(eps, ok, strict=True)), source="implicit")
    for e, y in zip(eps, ok, strict=True):
        single.record(e.id, y, source="implicit")
    assert counters(batched) == counters(single)  # exact floats and the same 'updated'
    assert log_of(batched) == log_of(single) and len(log_of(batched)) == 500
    assert batched.backend.generation() == generation  # recording changes no memory's membership
    assert sum(c.n for c, _ in counters(batched).values()) == sum(len(e.items) for e in eps)
    for s in (batched, single):
        report = s.replay()
        assert report.outcomes == 500 and report.consistent


def test_counters_add_increments_one_by_one_in_the_order_given(open_store: Callable[..., MemoryStore]) -> None:
    store = open_store()
    store.add_many([{"id": "a", "text": "hot memory"}, {"id": "b", "text": "another"}])
    backend = store.backend
    steps = [0.1, 0.2, 0.3, 1e-16, 0.7, 1e16, -1e16, 0.3]  # rounding makes the order of additions show
    start = 0.1
    backend.write_counts("default", {"a": Counts(start, 0.0, 0.0)})
    episodes = [f"x{i}" for i in range(len(steps))]
    rows = [OutcomeRow(e, True, "explicit", 1.0, 5.0, namespace="default") for e in episodes]
    incs = [Increment("default", "b", 0.5, 0.0, 1.0)]
    incs += [Increment("default", "a", step, 0.0, 1.0) for step in steps]
    backend.append_outcomes(rows, incs)
    sequential = functools.reduce(operator.add, steps, start)
    assert sequential != start + sum(steps)  # the data tell the two orders apart
    got = {m.id: m for m in store.list()}
    assert got["a"].counts == Counts(sequential, 0.0, float(len(steps)))
    assert got["b"].counts == Counts(0.5, 0.0, 1.0) and got["a"].updated == got["b"].updated == 5.0
    assert [o.episode_id for o in backend.outcome_log()] == episodes  # the log keeps the order given


@pytest.mark.parametrize("position", [0, 250, 499])
def test_a_batch_with_an_episode_recorded_already_writes_nothing(
    open_store: Callable[..., MemoryStore], position: int
) -> None:
    store = open_store(seed=3)
    fill(store)
    eps = recalls(store, 500, 4, "d")
    store.record(eps[position], True)
    before, log = counters(store), log_of(store)
    with pytest.raises(DuplicateError, match=eps[position].id):
        store.record_many([(e, i % 2 == 0) for i, e in enumerate(eps)])
    assert counters(store) == before and log_of(store) == log
    store.record_many([(e, True) for i, e in enumerate(eps) if i != position])  # the rest still records
    assert len(log_of(store)) == 500 and store.replay().consistent


def test_a_duplicate_inside_a_batch_writes_nothing(open_store: Callable[..., MemoryStore]) -> None:
    store = open_store(seed=5)
    fill(store)
    eps = recalls(store, 20, 6, "i")
    before = counters(store)
    with pytest.raises(ValidationError, match="twice"):  # refused by the store before the backend
        store.record_many([(e, True) for e in eps] + [(eps[7], False)])
    rows = [OutcomeRow(e.id, True, "explicit", 1.0, 1.0, namespace="default") for e in eps]
    rows.append(OutcomeRow(eps[7].id, False, "explicit", 1.0, 1.0, namespace="default"))
    incs = [Increment("default", it.memory_id, it.weight, 0.0, 1.0) for e in eps for it in e.items]
    with pytest.raises(DuplicateError, match=eps[7].id):  # and by the backend itself
        store.backend.append_outcomes(rows, incs)
    assert counters(store) == before and log_of(store) == []


def test_an_unknown_memory_refuses_the_batch(open_store: Callable[..., MemoryStore]) -> None:
    store = open_store()
    store.add_many([{"id": "a", "text": "known"}, {"id": "z", "text": "known too"}])
    before = counters(store)
    rows = [
        OutcomeRow("u1", True, "explicit", 1.0, 1.0, namespace="default"),
        OutcomeRow("u2", False, "explicit", 1.0, 1.0, namespace="default"),
    ]
    incs = [
        Increment("default", "a", 1.0, 0.0, 1.0),
        Increment("default", "ghost", 1.0, 0.0, 1.0),
        Increment("default", "z", 0.0, 1.0, 1.0),
        Increment("other", "a", 0.0, 1.0, 1.0),  # a known id in a namespace where it does not exist
    ]
    with pytest.raises(UnknownMemoryError, match="ghost"):
        store.backend.append_outcomes(rows, incs)
    with pytest.raises(UnknownMemoryError, match="'a'"):
        store.backend.append_outcomes(rows, [incs[0], incs[3]])
    assert counters(store) == before and log_of(store) == []


def test_verifying_in_a_batch_keeps_its_rules(open_store: Callable[..., MemoryStore]) -> None:
    store = open_store(seed=9)
    fill(store, 10)
    first, second = recalls(store, 2, 8, "v")
    store.record(first, True, source="heuristic")
    before = counters(store)
    assert store.verify(first, False).agreed is False  # reported already: nothing credited again
    assert counters(store) == before
    store.verify(second, True)  # not reported: the verified outcome is its outcome
    assert [(eid, src) for eid, _, src, _ in log_of(store)] == [(first.id, "heuristic"), (second.id, "verified")]
    with pytest.raises(DuplicateError, match=second.id):
        store.verify(second, True)
    assert [v.episode_id for v in store.backend.verifications()] == [first.id, second.id]
    assert store.replay().consistent


@pytest.mark.parametrize("batch", [1, 50])
def test_concurrent_batches_on_hot_memories_do_not_deadlock(
    open_store: Callable[..., MemoryStore], tmp_path: Path, batch: int
) -> None:
    url = url_for("postgres", tmp_path).replace("pool_size=2", "pool_size=1")
    owner = open_store(url, seed=11, exploration=0.5)
    fill(owner, 8)  # 8 hot memories, up to 5 per episode: every batch touches nearly all of them
    per_writer = 200 if batch > 1 else 60
    writers = [open_store(url, seed=20 + w) for w in range(4)]
    work = [recalls(owner, per_writer, 30 + w, f"w{w}-") for w in range(4)]
    start, errors = threading.Barrier(4), []

    def run(w: int) -> None:
        try:
            rng = np.random.default_rng(w)
            eps = work[w]
            start.wait(timeout=60)
            for i in range(0, len(eps), batch):
                writers[w].record_many([(e, bool(rng.random() < 0.5)) for e in eps[i : i + batch]])
        except Exception as exc:  # a deadlock surfaces as a StoreError here
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not any(t.is_alive() for t in threads) and errors == []
    report = owner.replay()
    assert report.outcomes == 4 * per_writer and report.consistent
    assert sum(m.counts.n for m in owner.list()) == sum(len(e.items) for eps in work for e in eps)
