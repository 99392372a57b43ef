"""record_batch is record() vectorised: same totals, context and decayed counts, any table size."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from memworth import Counts, Tracker, ValidationError


def _close(a: Counts, b: Counts) -> None:
    for x, y in ((a.success, b.success), (a.failure, b.failure), (a.n, b.n)):
        assert x == pytest.approx(y, rel=1e-9, abs=1e-12)


@st.composite
def streams(draw):  # type: ignore[no-untyped-def]
    registered = draw(st.sampled_from([0, 5, 200, 2000]))  # big tables take the sparse-update path
    k = draw(st.integers(1, 4))
    n_ep = draw(st.integers(1, 25))
    pool = st.one_of(st.integers(0, registered + 10), st.sampled_from([-3, 2**33]))
    ids = np.array(draw(st.lists(st.lists(pool, min_size=k, max_size=k, unique=True), min_size=n_ep, max_size=n_ep)))
    success = np.array(draw(st.lists(st.booleans(), min_size=n_ep, max_size=n_ep)))
    weighted = draw(st.booleans())
    weights = None
    if weighted:
        weights = np.array(
            draw(st.lists(st.lists(st.integers(1, 5), min_size=k, max_size=k), min_size=n_ep, max_size=n_ep)),
            dtype=float,
        )
    contexts = draw(st.one_of(st.none(), st.lists(st.sampled_from(["x", "y"]), min_size=n_ep, max_size=n_ep)))
    cuts = sorted(set(draw(st.lists(st.integers(1, n_ep), max_size=3))) | {n_ep})
    return registered, ids, success, weights, contexts, cuts


@given(streams(), st.sampled_from([None, 3.0, 50.0]))
def test_record_batch_in_chunks_equals_record_one_at_a_time(stream, half_life) -> None:  # type: ignore[no-untyped-def]
    registered, ids, success, weights, contexts, cuts = stream
    one, batch = Tracker(half_life=half_life), Tracker(half_life=half_life)
    for t in (one, batch):
        t.register(np.arange(registered))
    for e in range(len(ids)):
        one.record(
            [int(x) for x in ids[e]],
            bool(success[e]),
            weights=None if weights is None else list(weights[e]),
            context=None if contexts is None else contexts[e],
        )
    lo = 0
    for hi in cuts:
        batch.record_batch(
            ids[lo:hi],
            success[lo:hi],
            None if weights is None else weights[lo:hi],
            None if contexts is None else contexts[lo:hi],
        )
        lo = hi
    assert batch.episodes == one.episodes == len(ids)
    assert set(batch.ids()) == set(one.ids())
    for memory_id in set(ids.ravel().tolist()):
        _close(batch.counts(memory_id), one.counts(memory_id))
        for ctx in ("x", "y"):
            _close(batch.counts(memory_id, context=ctx), one.counts(memory_id, context=ctx))
        if half_life is not None:
            _close(batch.counts(memory_id, decayed=True), one.counts(memory_id, decayed=True))


def test_a_few_episodes_into_a_big_table() -> None:
    t = Tracker(half_life=2.0)
    t.record_batch(np.arange(4000).reshape(2000, 2), np.ones(2000, dtype=bool))
    before = {m: t.counts(m) for m in (5, 6, 7, 3999)}
    t.record_batch(np.array([[5, 6], [5, 7], [6, 5]]), np.array([True, False, True]))
    assert t.counts(5) == before[5] + Counts(1.0, 0.5, 3.0)
    assert t.counts(6) == before[6] + Counts(1.0, 0.0, 2.0)
    assert t.counts(7) == before[7] + Counts(0.0, 0.5, 1.0)
    assert t.counts(3999) == before[3999]
    # decayed: episodes 2001..2003, read at 2003, half-life 2
    d = t.counts(5, decayed=True)
    old = 0.5 * 2.0 ** (-(2003 - 3) / 2.0)  # memory 5 was in episode 3 of the first batch
    assert d.success == pytest.approx(old + 0.5 * 2**-1 + 0.5, rel=1e-12)
    assert d.failure == pytest.approx(0.5 * 2**-0.5, rel=1e-12)
    assert d.n == pytest.approx(2.0 ** (-(2003 - 3) / 2.0) + 2**-1 + 2**-0.5 + 1, rel=1e-12)
    t.record(["s"], False)
    assert t.counts(5) == before[5] + Counts(1.0, 0.5, 3.0)
    assert t.counts("s") == Counts(0.0, 1.0, 1.0)


# -- the duplicate check ------------------------------------------------------------------------


def _first_duplicate_brute(ids: np.ndarray) -> int:
    return next((i for i, row in enumerate(ids.tolist()) if len(set(row)) < len(row)), -1)


def _distinct_rows(rng: np.random.Generator, n_ep: int, k: int, wide: bool) -> np.ndarray:
    ids = np.argsort(rng.random((n_ep, k + 7)), axis=1)[:, :k].astype(np.int64)
    if wide:  # ids that differ only above bit 32: their low 32 bits collide
        ids = ids + (rng.integers(0, 3, ids.shape) << 32)
        ids[:, 0] = 5  # and one column that collides on the low bits with 5 + 2**32 ...
        ids[:, -1] = 5 + (1 << 32) if k > 1 else ids[:, -1]
    return ids


@pytest.mark.parametrize("k", range(1, 21))
@pytest.mark.parametrize("n_ep", [1, 40, 3000, 20_000])
def test_duplicate_check_agrees_with_brute_force_for_every_k(k: int, n_ep: int) -> None:
    from memworth.tracker import _first_duplicate_row

    rng = np.random.default_rng(1000 * k + n_ep)
    for wide in (False, True):
        ids = _distinct_rows(rng, n_ep, k, wide)
        if wide and k > 1:
            ids[:, 1:-1] += 1 << 33  # keep the other columns clear of 5 and 5 + 2**32
        assert _first_duplicate_row(ids) == _first_duplicate_brute(ids) == -1
        if k == 1:
            continue
        for _ in range(3):
            planted = ids.copy()
            rows = np.sort(rng.choice(n_ep, size=min(n_ep, 2), replace=False))
            for r in rows:
                i, j = rng.choice(k, size=2, replace=False)
                planted[r, j] = planted[r, i]
            want = _first_duplicate_brute(planted)
            assert want == rows[0]
            assert _first_duplicate_row(planted) == want
            for dtype in (np.int32, np.uint32, np.int16) if not wide else ():
                assert _first_duplicate_row(planted.astype(dtype)) == want


def test_low_bit_collisions_are_not_duplicates() -> None:
    t = Tracker()
    base = np.array([5, 5 + 2**32, -1, 2**32 - 1, 7, 7 - 2**32])  # three pairs equal mod 2**32
    ids = np.tile(base, (3000, 1))  # enough episodes for the column-comparison path
    t.record_batch(ids, np.ones(3000, dtype=bool))
    for memory_id in base.tolist():
        assert t.counts(memory_id) == Counts(3000 / 6, 0.0, 3000.0)
    assert len(t) == 6


@pytest.mark.parametrize("n_ep", [30, 5000])
def test_a_duplicate_is_refused_by_episode_and_nothing_changes(n_ep: int) -> None:
    rng = np.random.default_rng(n_ep)
    ids = np.argsort(rng.random((n_ep, 30)), axis=1)[:, :8]
    t = Tracker(half_life=10.0)
    t.record_batch(ids[:10], np.ones(10, dtype=bool))
    before = (len(t), t.episodes, t.ids(), t.table(), t.table(decayed=True))
    bad = ids.copy()
    bad[n_ep - 3, 6] = bad[n_ep - 3, 2]
    bad[n_ep - 1, 7] = bad[n_ep - 1, 0]
    bad += 1000  # ids the tracker has not seen: refusing must not register them
    with pytest.raises(ValidationError, match=f"episode {n_ep - 3} retrieves the same id twice") as info:
        t.record_batch(bad, np.ones(n_ep, dtype=bool))
    assert info.value.field == "ids"
    assert (len(t), t.episodes, t.ids()) == before[:3]
    for got, want in zip((t.table(), t.table(decayed=True)), before[3:], strict=True):
        np.testing.assert_array_equal(got.success, want.success)
        np.testing.assert_array_equal(got.n, want.n)


# -- the two ways of adding counts, chunking, and the row table ---------------------------------


def _reference(ids: np.ndarray, success: np.ndarray) -> dict[int, tuple[float, float, int]]:
    k = ids.shape[1]
    out: dict[int, list[float]] = {}
    for row, ok in zip(ids.tolist(), success.tolist(), strict=True):
        for m in row:
            c = out.setdefault(m, [0.0, 0.0, 0])
            c[0 if ok else 1] += 1 / k
            c[2] += 1
    return {m: (c[0], c[1], int(c[2])) for m, c in out.items()}


@pytest.mark.parametrize("registered", [0, 100_000])  # a small table: counted; a large one: scattered
def test_counting_and_scattering_give_the_same_counts(registered: int) -> None:
    rng = np.random.default_rng(7)
    ids = np.argsort(rng.random((3000, 60)), axis=1)[:, :3] * 7 + 11  # k=3: 1/3 is inexact
    success = rng.random(3000) < 0.4
    t = Tracker()
    t.register(np.arange(registered))
    for lo in range(0, 3000, 1000):
        t.record_batch(ids[lo : lo + 1000], success[lo : lo + 1000])
    want = _reference(ids, success)
    for memory_id, (s, f, n) in want.items():
        got = t.counts(memory_id)
        assert got.n == n  # retrieval counts are exact
        assert got.success == pytest.approx(s, rel=1e-12, abs=1e-12)
        assert got.failure == pytest.approx(f, rel=1e-12, abs=1e-12)
    assert len(t) == max(registered, len(want)) if registered else len(want)


@pytest.mark.parametrize("half_life", [None, 4.0])
def test_small_chunks_and_blocks_give_the_same_counts(monkeypatch: pytest.MonkeyPatch, half_life: float | None) -> None:
    import memworth.tracker as tracker_module

    rng = np.random.default_rng(3)
    ids = np.argsort(rng.random((90, 25)), axis=1)[:, :4]
    success = rng.random(90) < 0.5
    weights = rng.integers(1, 5, ids.shape).astype(float)
    contexts = ["x" if e % 3 else "y" for e in range(90)]
    whole = Tracker(half_life=half_life)
    whole.record_batch(ids, success, weights, contexts)
    whole.record_batch(ids, success)
    small = {"_CHUNK": 7, "_BLOCK": 5, "_COUNT_CHUNK": 13, "_DUP_CHUNK": 11, "_PAIRWISE_MIN_EPISODES": 1}
    for name, value in small.items():
        monkeypatch.setattr(tracker_module, name, value)
    chunked = Tracker(half_life=half_life)
    chunked.record_batch(ids, success, weights, contexts)
    chunked.record_batch(ids, success)
    bad = ids.copy()
    bad[40, 3] = bad[40, 1]
    with pytest.raises(ValidationError, match="episode 40 "):
        chunked.record_batch(bad, success)
    assert chunked.ids() == whole.ids() and chunked.episodes == whole.episodes == 180
    for memory_id in whole.ids():
        _close(chunked.counts(memory_id), whole.counts(memory_id))
        _close(chunked.counts(memory_id, context="y"), whole.counts(memory_id, context="y"))
        if half_life is not None:
            _close(chunked.counts(memory_id, decayed=True), whole.counts(memory_id, decayed=True))


@pytest.mark.parametrize("batch", [2, 40])  # few new ids into a big table (sorted); many (marked)
def test_row_table_widens_from_int32_past_the_limit(monkeypatch: pytest.MonkeyPatch, batch: int) -> None:
    import memworth._index as index_module

    def stream(t: Tracker) -> None:
        t.register(["a", "b", "c"])  # rows 0-2
        t.register(np.array([100]))  # row 3: the flat table has 101 slots
        for lo in range(0, 40, batch):
            part = np.arange(lo, lo + batch).reshape(-1, 2)
            t.record_batch(part, np.ones(len(part), dtype=bool))
        t.record(["d", 41], success=False)

    plain = Tracker()
    stream(plain)
    monkeypatch.setattr(index_module, "ROW32_LIMIT", 8)
    narrow = Tracker()
    stream(narrow)
    assert plain._index._table.dtype == np.int32  # far below the real limit
    assert narrow._index._table.dtype == np.int64  # rows 8 and up did not fit
    assert narrow.ids() == plain.ids() == ["a", "b", "c", 100, *range(40), "d", 41]
    for memory_id in plain.ids():
        assert narrow.counts(memory_id) == plain.counts(memory_id)
    rows = narrow._index.int_rows(np.array([0, 39, 41]), create=False, compact=True)
    assert rows.dtype == np.int64 and rows.tolist() == [4, 43, 45]


def test_int_rows_are_int64_unless_compact() -> None:
    t = Tracker()
    t.record_batch(np.array([[3, 1], [2, 9]]), np.array([True, False]))
    assert t._index.int_rows(np.array([9, 1]), create=False).dtype == np.int64
    compact = t._index.int_rows(np.array([9, 1]), create=False, compact=True)
    assert compact.dtype == np.int32 and compact.tolist() == [3, 0]


def test_new_ids_take_rows_in_ascending_order_on_every_lookup_path() -> None:
    t = Tracker()
    t.register(np.arange(0, 100, 2))  # rows 0-49 for the even ids; the table has 99 slots
    t.record(["s"], success=True)  # row 50
    t.record_batch(np.array([[7, 4], [1, 6]]), np.array([True, True]))  # few new: 1, 7
    assert t.ids()[50:] == ["s", 1, 7]
    many = np.arange(99).reshape(-1, 3)[::-1]  # many new (every odd id but 1 and 7), in reverse
    t.record_batch(many, np.zeros(len(many), dtype=bool))
    odd = [m for m in range(3, 99, 2) if m != 7]
    assert t.ids() == [*range(0, 100, 2), "s", 1, 7, *odd]
    assert len(t) == len(t.ids()) == 100
    t.record_batch(np.array([[98, 0]]), np.array([True]))  # every slot known: no new rows
    t.record_batch(np.array([[250, 0]]), np.array([True]))  # past the table: it grows
    assert t.ids()[-1] == 250 and len(t) == 101
    assert t.counts(0) == Counts(1.0, 1 / 3, 3.0)
    assert t.counts(98) == Counts(0.5, 1 / 3, 2.0)
    assert t.counts(4) == Counts(0.5, 1 / 3, 2.0)


def test_any_memory_layout_of_ids_counts_the_same() -> None:
    rng = np.random.default_rng(11)
    wide = np.argsort(rng.random((2000, 40)), axis=1)[:, :16]
    success = rng.random(2000) < 0.5
    layouts = [np.ascontiguousarray(wide[:, ::2]), np.asfortranarray(wide[:, ::2]), wide[:, ::2]]
    trackers = []
    for ids in layouts:
        t = Tracker()
        t.record_batch(ids, success)
        trackers.append(t)
        bad = np.array(ids)  # same layout, one duplicate
        bad[1500, 7] = bad[1500, 3]
        with pytest.raises(ValidationError, match="episode 1500 "):
            t.record_batch(np.asfortranarray(bad) if ids.flags.f_contiguous else bad, success)
    first = trackers[0]
    for t in trackers[1:]:
        assert t.ids() == first.ids()
        np.testing.assert_array_equal(t.table().n, first.table().n)
        np.testing.assert_array_equal(t.table().success, first.table().success)
