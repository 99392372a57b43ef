"""Bulk loading (``add_many``) and the two-step candidate read of recall, on every backend."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from memworth import HashingEncoder, MemoryStore
from memworth.counts import Counts
from memworth.errors import DuplicateError, UnknownMemoryError, ValidationError
from memworth.store import postgres
from tests.store.conftest import FACTS

N = 1500  # more than postgres.REBUILD_AT: on pgvector the first load rebuilds the HNSW index


def _items(n: int, start: int = 0) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i in range(start, start + n):
        item: dict[str, Any] = {"id": f"m{i:05d}", "text": f"memory {i} about topic {i % 17} and word w{i % 101}"}
        if i % 3 == 0:
            item["metadata"] = {"row": i, "note": "naïve ☃", "nested": {"list": [1, 2.5, None, "x"]}}
        if i % 5 == 0:
            item["contexts"] = [f"ctx{i % 4}", "bulk"]
        if i % 7 == 0 and i > start:
            item["derived_from"] = [f"m{i - 1:05d}"]  # an earlier item of the same call
        out.append(item)
    return out


def test_a_bulk_load_stores_every_field_in_order(store: MemoryStore) -> None:
    store.add("an older memory", id="old")
    items = _items(N)
    items[10]["part_of"] = ["old"]  # a memory stored before the call
    returned = store.add_many(items)
    listed = store.list()
    assert [m.id for m in listed] == ["old"] + [it["id"] for it in items]
    assert listed[1:] == returned
    for item, m in zip(items, listed[1:], strict=True):
        assert (m.text, m.namespace, m.status, m.standing) == (item["text"], "default", "active", "normal")
        assert m.metadata == item.get("metadata", {})
        assert m.contexts == tuple(item.get("contexts", ()))
        assert m.derived_from == tuple(item.get("derived_from", ()))
        assert m.part_of == tuple(item.get("part_of", ()))
        assert m.counts == Counts()
    ids, seqs, matrix = store.backend.vectors("default")
    assert ids == ["old"] + [it["id"] for it in items] and seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    want = HashingEncoder().encode([it["text"] for it in items])
    np.testing.assert_array_equal(matrix[1:], want)
    assert ("m00007", "m00006", "derived_from") in store.backend.edges("default")


def test_a_bulk_load_is_searchable(store: MemoryStore) -> None:
    store.exploration = 0.0
    store.add_many(_items(N))
    store.add_many([{"id": k, "text": v} for k, v in FACTS.items()])  # a small batch after the large one
    recall = store.recall("how do I reverse a python list", k=3)
    assert recall.results[0].memory.id == "reverse"
    assert store.recall("memory 1234 about topic 10 and word w22", k=1).results[0].memory.id == "m01234"


@pytest.mark.parametrize(
    ("at", "bad", "field"),
    [
        (0, {"text": ""}, "text"),
        (7, {"text": 5}, "text"),
        (N - 1, {"text": "ok", "id": " padded"}, "id"),
        (500, {"text": "ok", "metadata": {"x": float("inf")}}, "metadata"),
        (3, {"text": "ok", "contexts": "one"}, "contexts"),
        (9, {"text": "ok", "derived_from": [""]}, "derived_from"),
    ],
)
def test_a_bad_item_names_its_position_and_field_and_nothing_is_written(
    store: MemoryStore, at: int, bad: dict[str, Any], field: str
) -> None:
    items = _items(N)
    items[at] = bad
    with pytest.raises(ValidationError) as info:
        store.add_many(items)
    assert info.value.field == field and info.value.reason.endswith(f"(items[{at}])")
    assert store.list() == [] and store.backend.vectors("default")[0] == []


def test_a_bad_item_shape_names_its_position(store: MemoryStore) -> None:
    items: list[Any] = _items(20)
    items[4] = "not a dict"
    with pytest.raises(ValidationError) as info:
        store.add_many(items)
    assert info.value.field == "items[4]"
    items[4] = {"text": "ok", "colour": "blue"}
    with pytest.raises(ValidationError) as info:
        store.add_many(items)
    assert info.value.field == "items[4]" and "colour" in info.value.reason
    assert store.list() == []


def test_a_repeated_id_names_both_positions(store: MemoryStore) -> None:
    items = _items(30)
    items[25]["id"] = items[3]["id"]
    with pytest.raises(ValidationError) as info:
        store.add_many(items)
    assert info.value.field == "id" and "items[3]" in info.value.reason and "items[25]" in info.value.reason
    assert store.list() == []


def test_a_stored_id_late_in_a_large_batch_refuses_the_whole_batch(store: MemoryStore) -> None:
    store.add("already here", id="m01400")
    with pytest.raises(DuplicateError, match="m01400"):
        store.add_many(_items(N))
    assert [m.id for m in store.list()] == ["m01400"]
    assert store.backend.vectors("default")[0] == ["m01400"]
    store.add_many(_items(N, start=2000))  # the store still loads
    assert len(store.list()) == N + 1


def test_an_unknown_provenance_link_refuses_the_whole_batch(store: MemoryStore) -> None:
    items = _items(50)
    items[40]["part_of"] = ["nowhere"]
    with pytest.raises(UnknownMemoryError):
        store.add_many(items)
    assert store.list() == []


def test_add_keeps_its_plain_errors(store: MemoryStore) -> None:
    with pytest.raises(ValidationError) as info:
        store.add("")
    assert (info.value.field, info.value.reason) == ("text", "must not be empty")


class _WholeMemoriesOnly:
    """A backend without the narrow ``candidates`` read: recall falls back to whole memories."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        if name == "candidates":
            raise AttributeError(name)
        return getattr(self._inner, name)


def test_recall_ranks_the_same_with_the_narrow_read_as_with_whole_memories(
    make_store: Callable[..., MemoryStore],
) -> None:
    store = make_store(seed=3)
    store.add_many([{"id": k, "text": v} for k, v in FACTS.items()] + _items(200))
    for i in range(40):  # evidence, so worth and exploration differ between memories
        store.record(store.recall(f"python list topic {i % 17}", k=4).episode, success=i % 3 != 0)
    store.set_status("reverse", "suppressed", reason="test")
    whole = MemoryStore(_WholeMemoriesOnly(store.backend), encoder=HashingEncoder(), seed=11, index=store.index)  # type: ignore[arg-type]
    narrow = MemoryStore(store.backend, encoder=HashingEncoder(), seed=11, index=store.index)
    for query in ("reverse a python list", "capital of the czech republic", "memory about topic 3", "word w7"):
        a, b = narrow.recall(query, k=5), whole.recall(query, k=5)
        assert a.results == b.results and a.diagnostics == b.diagnostics
        assert [(i.memory_id, i.weight, i.propensity) for i in a.episode.items] == [
            (i.memory_id, i.weight, i.propensity) for i in b.episode.items
        ]
        assert "reverse" not in {r.memory.id for r in a}


@pytest.mark.parametrize("backend_kind", ["pgvector"])
def test_pgvector_rebuilds_its_index_only_for_a_batch_that_doubles_the_table(
    make_store: Callable[..., MemoryStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(postgres, "REBUILD_AT", 20)
    store = make_store(seed=0)
    backend: Any = store.backend

    def index_oid() -> int | None:
        row = backend._run(lambda c: c.execute("SELECT to_regclass('memories_vec_hnsw')::oid").fetchone())
        return None if row[0] is None else int(row[0])

    store.add_many(_items(10))  # below REBUILD_AT: the index made with the column stays
    first = index_oid()
    assert first is not None
    store.add_many(_items(30, start=10))  # 30 >= 20 and >= the 10 stored: rebuilt
    rebuilt = index_oid()
    assert rebuilt is not None and rebuilt != first
    store.add_many(_items(25, start=40))  # 25 < the 40 stored: added row by row
    assert index_oid() == rebuilt
    items = _items(100, start=65)
    items[-1]["id"] = "m00003"  # stored already: the whole batch, index drop included, rolls back
    with pytest.raises(DuplicateError):
        store.add_many(items)
    assert index_oid() == rebuilt and len(store.list()) == 65
    store.exploration = 0.0
    recall = store.recall("memory 52 about topic 1 and word w52", k=1)
    assert recall.diagnostics["search"] == "database" and recall.results[0].memory.id == "m00052"


class _CountingEncoder(HashingEncoder):
    """HashingEncoder that remembers how many texts each encode() call got."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[int] = []

    def encode(self, texts: Any) -> np.ndarray:
        self.calls.append(len(texts))
        return super().encode(texts)


def test_a_large_bulk_load_embeds_in_chunks_and_shows_progress_when_asked(
    capsys: pytest.CaptureFixture[str],
) -> None:
    pytest.importorskip("tqdm", reason="the bar is tqdm's (experiments extra)")
    from memworth.store.store import EMBED_CHUNK

    items = _items(EMBED_CHUNK + 500)
    items[3]["text"] = "a much longer memory, " * 40  # sorted by length into the last chunk
    encoder = _CountingEncoder()
    with MemoryStore.open("memory://", encoder=encoder) as store:
        store.add_many(items[:EMBED_CHUNK])
        assert encoder.calls == [EMBED_CHUNK] and capsys.readouterr().err == ""  # one call, no bar
        encoder.calls.clear()
        store.add_many(items[EMBED_CHUNK:], namespace="quiet")
        assert capsys.readouterr().err == ""
        store.add_many(items, namespace="shown", progress=True)
        assert encoder.calls == [500, EMBED_CHUNK, 500]
        err = capsys.readouterr().err
        assert "embedding" in err and f"0/{len(items)}" in err  # tqdm draws at least its start
        ids, _, matrix = store.backend.vectors("shown")
    assert ids == [it["id"] for it in items]
    np.testing.assert_array_equal(matrix, HashingEncoder().encode([it["text"] for it in items]))


@pytest.mark.parametrize("progress", ["yes", 1, 2.5])
def test_a_bad_progress_flag_is_refused_before_anything_is_written(progress: object) -> None:
    with MemoryStore.open("memory://", encoder=HashingEncoder()) as store:
        with pytest.raises(ValidationError) as info:
            store.add_many(_items(3), progress=progress)  # type: ignore[arg-type]
        assert info.value.field == "progress"
        assert store.list() == []
