"""Tracker: recording episodes one at a time or in batches, and reading counts and worth back."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from memworth import (
    BetaMean,
    ContextPooled,
    Counts,
    Decayed,
    RawWorth,
    Taxonomy,
    Tracker,
    UnknownMemoryError,
    ValidationError,
    ValueClass,
    WilsonBound,
)


def _close(a: Counts, b: Counts, tol: float = 1e-12) -> None:
    assert a.success == pytest.approx(b.success, rel=tol, abs=tol)
    assert a.failure == pytest.approx(b.failure, rel=tol, abs=tol)
    assert a.n == pytest.approx(b.n, rel=tol, abs=tol)


# -- ids of every kind ------------------------------------------------------------------------


def test_record_with_string_ids_uniform_credit() -> None:
    t = Tracker()
    t.record(["paris", "python"], success=True)
    t.record(["paris"], success=False)
    assert t.counts("paris") == Counts(0.5, 1.0, 2.0)
    assert t.counts("python") == Counts(0.5, 0.0, 1.0)
    assert t.worth("paris") == pytest.approx(1 / 3)
    assert t.worth("python") == 1.0
    assert len(t) == 2
    assert t.episodes == 2
    assert "paris" in t and "rome" not in t


@pytest.mark.parametrize("success", [True, 1, "success", np.bool_(True), np.int64(1)])
def test_success_spellings(success: object) -> None:
    t = Tracker()
    t.record(["a"], success)
    assert t.counts("a") == Counts(1.0, 0.0, 1.0)


@pytest.mark.parametrize("failure", [False, 0, -1, "failure", np.bool_(False), np.int8(-1)])
def test_failure_spellings(failure: object) -> None:
    t = Tracker()
    t.record(["a"], failure)
    assert t.counts("a") == Counts(0.0, 1.0, 1.0)


def test_record_with_tuple_and_mixed_ids() -> None:
    t = Tracker()
    t.record([("doc", 1), ("doc", 2), "x", 7], success=True)
    assert len(t) == 4
    assert t.counts(("doc", 2)) == Counts(0.25, 0.0, 1.0)
    assert t.counts(7) == Counts(0.25, 0.0, 1.0)
    assert "7" not in t  # the string "7" is another memory
    with pytest.raises(UnknownMemoryError):
        t.counts(("doc", 3))


def test_record_accepts_numpy_arrays_of_ids() -> None:
    t = Tracker()
    t.record(np.array([3, 4]), success=True)
    t.record(np.array(["a", "b"]), success=False)
    assert t.counts(3) == Counts(0.5, 0.0, 1.0)
    assert t.counts("b") == Counts(0.0, 0.5, 1.0)


@pytest.mark.parametrize("memory_id", [0, 5, 1000, 2**24 - 1, 2**24, 2**40, -1, -(2**40)])
def test_int_ids_in_record_and_record_batch_are_the_same_memory(memory_id: int) -> None:
    t = Tracker()
    t.record([memory_id, "other"], success=True)
    t.record_batch(np.array([[memory_id, 17], [memory_id, 18]], dtype=np.int64), np.array([False, True]))
    t.record([np.int64(memory_id)], success=False)
    assert t.ids().count(memory_id) == 1
    assert len(t) == 4  # memory_id, "other", 17, 18
    assert t.counts(memory_id) == Counts(0.5 + 0.5, 0.5 + 1.0, 4.0)
    assert t.counts(np.int64(memory_id)) == t.counts(memory_id)


def test_large_sparse_and_negative_ids_in_record_batch() -> None:
    ids = np.array([[2**40, -3, 5], [-3, 2**62, 2**40], [7, 5, -(2**50)]], dtype=np.int64)
    success = np.array([1, 0, 1])
    t = Tracker()
    t.record_batch(ids, success)
    assert len(t) == 6
    third = 1 / 3
    assert t.counts(2**40) == Counts(third, third, 2.0)
    assert t.counts(-3) == Counts(third, third, 2.0)
    assert t.counts(2**62) == Counts(0.0, third, 1.0)
    assert t.counts(-(2**50)) == Counts(third, 0.0, 1.0)
    np.testing.assert_allclose(t.values(np.array([5, 2**40])), [1.0, 0.5])
    with pytest.raises(UnknownMemoryError):
        t.counts(2**41)
    with pytest.raises(UnknownMemoryError):
        t.values(np.array([5, 2**41]))


def test_numpy_integer_id_arrays_of_any_width() -> None:
    t = Tracker()
    t.record_batch(np.array([[1, 2]], dtype=np.uint8), np.array([True]))
    t.record_batch(np.array([[2, 3]], dtype=np.int32), np.array([False]))
    assert t.counts(2) == Counts(0.5, 0.5, 2.0)
    assert len(t) == 3


# -- weights --------------------------------------------------------------------------------


def test_weights_are_normalised() -> None:
    t = Tracker()
    t.record(["a", "b", "c"], success=True, weights=[6.0, 3.0, 1.0])
    assert t.counts("a").success == pytest.approx(0.6)
    assert t.counts("b").success == pytest.approx(0.3)
    assert t.counts("c").success == pytest.approx(0.1)
    assert sum(t.counts(x).success for x in "abc") == pytest.approx(1.0)


def test_weights_floor_w_min() -> None:
    t = Tracker(w_min=0.05)
    t.record(["a", "b", "c"], success=False, weights=[0.98, 0.01, 0.01])
    np.testing.assert_allclose([t.counts(x).failure for x in "abc"], [0.9, 0.05, 0.05])
    t.record_batch(np.array([[1, 2, 3]]), np.array([0]), weights=np.array([[0.98, 0.01, 0.01]]))
    np.testing.assert_allclose([t.counts(x).failure for x in (1, 2, 3)], [0.9, 0.05, 0.05])


def test_zero_weight_still_counts_a_retrieval() -> None:
    t = Tracker()
    t.record(["a", "b"], success=True, weights=[1.0, 0.0])
    assert t.counts("b") == Counts(0.0, 0.0, 1.0)
    assert t.worth("b") == 0.5


@pytest.mark.parametrize(("w_min", "field"), [(-0.1, "w_min"), (1.5, "w_min"), (True, "w_min")])
def test_bad_tracker_w_min(w_min: object, field: str) -> None:
    with pytest.raises(ValidationError) as info:
        Tracker(w_min=w_min)  # type: ignore[arg-type]
    assert info.value.field == field


@pytest.mark.parametrize("half_life", [0, -1.0, float("nan"), float("inf"), True, "10"])
def test_bad_half_life(half_life: object) -> None:
    with pytest.raises(ValidationError) as info:
        Tracker(half_life=half_life)  # type: ignore[arg-type]
    assert info.value.field == "half_life"


# -- record_batch == record one at a time ------------------------------------------------------


def _stream(seed: int, n_ep: int = 400, m: int = 30, k: int = 4):  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(seed)
    ids = np.argsort(rng.random((n_ep, m)), axis=1)[:, :k] * 3 - 20  # some negative ids
    success = rng.random(n_ep) < 0.45
    weights = rng.random((n_ep, k)) + 0.05
    contexts = rng.choice(np.array(["alpha", "beta", "gamma"]), n_ep)
    return ids, success, weights, contexts


@pytest.mark.parametrize("use_weights", [False, True])
@pytest.mark.parametrize("use_contexts", [False, True])
@pytest.mark.parametrize("w_min", [0.0, 0.1])
def test_record_batch_equals_record_one_at_a_time(use_weights: bool, use_contexts: bool, w_min: float) -> None:
    ids, success, weights, contexts = _stream(1)
    w = weights if use_weights else None
    c = contexts if use_contexts else None
    one, batch = Tracker(w_min=w_min), Tracker(w_min=w_min)
    for e in range(len(ids)):
        one.record(
            [int(x) for x in ids[e]],
            bool(success[e]),
            weights=None if w is None else list(w[e]),
            context=None if c is None else str(c[e]),
        )
    # in uneven chunks
    for lo, hi in ((0, 1), (1, 50), (50, 51), (51, 400)):
        batch.record_batch(ids[lo:hi], success[lo:hi], None if w is None else w[lo:hi], None if c is None else c[lo:hi])
    assert batch.episodes == one.episodes == len(ids)
    assert len(batch) == len(one)
    assert set(batch.ids()) == set(one.ids())
    for memory_id in one.ids():
        _close(batch.counts(memory_id), one.counts(memory_id))
    assert set(batch.contexts()) == set(one.contexts())
    for ctx in one.contexts():
        for memory_id in one.ids():
            _close(batch.counts(memory_id, context=ctx), one.counts(memory_id, context=ctx))


def test_record_batch_accepts_minus_one_outcomes_and_lists() -> None:
    t = Tracker()
    t.record_batch([[1, 2], [2, 3]], [1, -1])  # type: ignore[arg-type]
    assert t.counts(2) == Counts(0.5, 0.5, 2.0)


def test_record_batch_with_no_episodes_changes_nothing() -> None:
    t = Tracker()
    t.record_batch(np.zeros((0, 3), dtype=np.int64), np.zeros(0, dtype=bool))
    assert len(t) == 0 and t.episodes == 0


# -- contexts ------------------------------------------------------------------------------------


def test_context_counts_and_pooled_worth() -> None:
    t = Tracker()
    for _ in range(30):
        t.record(["m"], True, context="easy")
    for _ in range(10):
        t.record(["m"], False, context="hard")
    t.record(["m", "n"], True)  # no context
    assert t.counts("m") == Counts(30.5, 10.0, 41.0)
    assert t.counts("m", context="easy") == Counts(30.0, 0.0, 30.0)
    assert t.counts("m", context="hard") == Counts(0.0, 10.0, 10.0)
    assert t.counts("n", context="hard") == Counts()
    assert t.counts("m", context="never-seen") == Counts()
    assert set(t.contexts()) == {"easy", "hard"}

    pooled = ContextPooled(strength=10.0)
    g = 30.5 / 40.5
    assert t.worth("m", pooled, context="hard") == pytest.approx((0 + 10 * g) / (10 + 10))
    assert t.worth("m", pooled, context="easy") == pytest.approx((30 + 10 * g) / (30 + 10))
    assert t.worth("m", pooled, context="never-seen") == pytest.approx(g)
    assert t.worth("m", pooled) == pytest.approx(g)  # no context: the base on global counts
    assert t.worth("m", context="hard") == 0.0  # a plain estimator reads the context's own counts
    np.testing.assert_allclose(t.values(["m", "n"], pooled, context="hard"), [(10 * g) / 20, 1.0])


def test_context_labels_may_be_ints_or_tuples() -> None:
    t = Tracker()
    t.record(["a"], True, context=3)
    t.record(["a"], False, context=("task", 1))
    t.record_batch(np.array([[1]]), np.array([True]), contexts=[("task", 1)])
    assert t.counts("a", context=3) == Counts(1.0, 0.0, 1.0)
    assert t.counts(1, context=("task", 1)) == Counts(1.0, 0.0, 1.0)


@pytest.mark.parametrize("context", [1.5, True, [1]])
def test_bad_context_label_is_refused(context: object) -> None:
    t = Tracker()
    with pytest.raises(ValidationError) as info:
        t.record(["a"], True, context=context)  # type: ignore[arg-type]
    assert info.value.field == "context"
    assert len(t) == 0 and t.episodes == 0


# -- decay --------------------------------------------------------------------------------------


def _hand_decayed(events: list[tuple[str, float, bool]], memory_id: str, half_life: float) -> Counts:
    """sum over episodes t that retrieved the memory of w * 2^(-(T - t)/h), by outcome."""
    total = len(events)
    s = f = n = 0.0
    for t, (mid, w, ok) in enumerate(events, start=1):
        if mid != memory_id:
            continue
        factor = 2.0 ** (-(total - t) / half_life)
        n += factor
        if ok:
            s += w * factor
        else:
            f += w * factor
    return Counts(s, f, n)


def _decay_stream(seed: int, n_ep: int = 300):  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(seed)
    ids = np.stack([rng.integers(0, 6, n_ep), rng.integers(6, 12, n_ep)], axis=1)
    success = rng.random(n_ep) < np.where(np.arange(n_ep) < n_ep // 2, 0.8, 0.2)
    weights = rng.integers(1, 4, (n_ep, 2)).astype(float)
    return ids, success, weights


def _expected(ids: np.ndarray, success: np.ndarray, weights: np.ndarray, memory_id: int, h: float) -> Counts:
    norm = weights / weights.sum(axis=1, keepdims=True)
    events: list[tuple[str, float, bool]] = []
    for e in range(len(ids)):
        hit = np.flatnonzero(ids[e] == memory_id)
        events.append(("m", float(norm[e, hit[0]]), bool(success[e])) if hit.size else ("-", 0.0, False))
    return _hand_decayed(events, "m", h)


def test_decayed_counts_of_record_match_hand_computation() -> None:
    h = 25.0
    ids, success, weights = _decay_stream(3)
    t = Tracker(half_life=h)
    for e in range(len(ids)):
        t.record(list(ids[e]), bool(success[e]), weights=list(weights[e]))
    for memory_id in range(12):
        _close(t.counts(memory_id, decayed=True), _expected(ids, success, weights, memory_id, h), 1e-9)


@pytest.mark.parametrize("chunks", [(300,), (1, 99, 100, 100), (150, 150), (7, 293)])
def test_decayed_success_and_failure_after_record_batch_match_hand_computation(chunks: tuple[int, ...]) -> None:
    h = 25.0
    ids, success, weights = _decay_stream(3)
    t = Tracker(half_life=h)
    start = 0
    for size in chunks:
        t.record_batch(ids[start : start + size], success[start : start + size], weights[start : start + size])
        start += size
    for memory_id in range(12):
        got, want = t.counts(memory_id, decayed=True), _expected(ids, success, weights, memory_id, h)
        assert got.success == pytest.approx(want.success, rel=1e-9, abs=1e-12)
        assert got.failure == pytest.approx(want.failure, rel=1e-9, abs=1e-12)
        want_mw = RawWorth().value(want)
        assert t.worth(memory_id, Decayed(RawWorth(), half_life=h)) == pytest.approx(want_mw, rel=1e-9)


@pytest.mark.parametrize("chunks", [(300,), (1, 99, 100, 100), (150, 150)])
def test_decayed_retrieval_count_after_record_batch_matches_hand_computation(chunks: tuple[int, ...]) -> None:
    # Decayed counts are counts "with fractional n": n decays like hits+ and hits-, so
    # record_batch must leave the same decayed n as recording the episodes one by one.
    h = 25.0
    ids, success, weights = _decay_stream(3)
    batch, one = Tracker(half_life=h), Tracker(half_life=h)
    start = 0
    for size in chunks:
        batch.record_batch(ids[start : start + size], success[start : start + size], weights[start : start + size])
        start += size
    for e in range(len(ids)):
        one.record(list(ids[e]), bool(success[e]), weights=list(weights[e]))
    for memory_id in range(12):
        want = _expected(ids, success, weights, memory_id, h)
        assert one.counts(memory_id, decayed=True).n == pytest.approx(want.n, rel=1e-9)
        assert batch.counts(memory_id, decayed=True).n == pytest.approx(want.n, rel=1e-9)


def test_decay_docstring_example() -> None:
    t = Tracker(half_life=10)
    for _ in range(50):
        t.record(["m"], success=True)
    for _ in range(10):
        t.record(["m"], success=False)
    assert t.worth("m") == pytest.approx(50 / 60)
    expected = _hand_decayed([("m", 1.0, True)] * 50 + [("m", 1.0, False)] * 10, "m", 10)
    assert t.worth("m", Decayed(RawWorth(), half_life=10)) == pytest.approx(RawWorth().value(expected), rel=1e-12)
    assert round(t.worth("m", Decayed(RawWorth(), half_life=10)), 3) == 0.492


def test_decayed_counts_read_now_not_at_last_retrieval() -> None:
    t = Tracker(half_life=4)
    t.record(["old"], True)
    t.record_batch(np.array([[1]] * 8), np.ones(8, dtype=bool))
    assert t.counts("old", decayed=True).success == pytest.approx(2.0 ** (-8 / 4))
    assert t.counts("old") == Counts(1.0, 0.0, 1.0)  # totals never decay


def test_decayed_needs_a_matching_tracker() -> None:
    t = Tracker(half_life=10)
    t.record(["a"], True)
    with pytest.raises(ValidationError) as info:
        t.worth("a", Decayed(RawWorth(), half_life=20))
    assert info.value.field == "estimator"
    plain = Tracker()
    plain.record(["a"], True)
    with pytest.raises(ValidationError) as info:
        plain.worth("a", Decayed(RawWorth(), half_life=100))
    assert info.value.field == "estimator"
    with pytest.raises(ValidationError) as info:
        plain.counts("a", decayed=True)
    assert info.value.field == "decayed"
    with pytest.raises(ValidationError) as info:
        t.counts("a", context="x", decayed=True)
    assert info.value.field == "context"


# -- reading -----------------------------------------------------------------------------------


def test_ids_values_and_table_follow_first_seen_order() -> None:
    t = Tracker()
    t.record(["c", "a"], True)
    t.record(["b", "a"], False)
    t.record([9, "c"], True)
    assert t.ids() == ["c", "a", "b", 9]
    table = t.table()
    np.testing.assert_allclose(table.success, [1.0, 0.5, 0.0, 0.5])
    np.testing.assert_allclose(table.failure, [0.0, 0.5, 0.5, 0.0])
    np.testing.assert_allclose(table.n, [2.0, 2.0, 1.0, 1.0])
    np.testing.assert_allclose(t.values(), [1.0, 0.5, 0.0, 1.0])
    np.testing.assert_allclose(t.values(["b", 9, "a"]), [0.0, 1.0, 0.5])
    sub = t.table(["a", "c"])
    np.testing.assert_allclose(sub.success, [0.5, 1.0])
    np.testing.assert_allclose(t.values(estimator=BetaMean()), BetaMean().value(t.table()))


def test_record_batch_ids_follow_first_seen_order() -> None:
    # ids() lists ids in the order first seen; within one batch, new ids in ascending
    # order (small non-negative ids first, then the others), as documented.
    t = Tracker()
    t.record(["z", 7], success=True)
    t.record_batch(np.array([[5, 3], [2**40, -7], [1, 3]]), np.array([True, False, True]))
    t.record([4], success=False)
    assert t.ids() == ["z", 7, 1, 3, 5, -7, 2**40, 4]


def test_values_of_an_empty_tracker() -> None:
    t = Tracker()
    assert t.values().shape == (0,)
    assert t.table().n.shape == (0,)
    assert t.ids() == [] and t.contexts() == []


def test_register_gives_no_evidence_worth() -> None:
    t = Tracker()
    t.register(["a", "b"])
    t.register(np.array([4, 2**40]))
    assert len(t) == 4
    assert t.worth("b") == 0.5
    assert t.counts(2**40) == Counts()
    assert t.episodes == 0


def test_unknown_ids_raise_unknown_memory_error() -> None:
    t = Tracker()
    t.record(["a", 1], True)
    for call in (
        lambda: t.counts("b"),
        lambda: t.worth("b"),
        lambda: t.worth(2),
        lambda: t.values(["a", "zz"]),
        lambda: t.table([("a",)]),
        lambda: t.classify("zz", Taxonomy(evidence="weighted")),
    ):
        with pytest.raises(UnknownMemoryError) as info:
            call()
        assert isinstance(info.value, KeyError)


def test_classify() -> None:
    t = Tracker()
    for _ in range(10):
        t.record(["good", "noise"], True)
    for _ in range(10):
        t.record(["bad", "noise"], False)
    t.record(["new"], True)
    weighted, retrievals = Taxonomy(evidence="weighted"), Taxonomy(evidence="retrievals")
    assert t.classify("good", retrievals).value_class is ValueClass.HIGH
    assert t.classify("bad", retrievals).value_class is ValueClass.LOW
    assert t.classify("noise", retrievals).value_class is ValueClass.MIXED
    assert t.classify("new", retrievals).value_class is ValueClass.UNCERTAIN
    # k=2: ten retrievals are five weighted hits
    assert t.classify("good", weighted).value_class is ValueClass.UNCERTAIN
    # a cautious estimator can change the class
    got = t.classify("good", retrievals, estimator=WilsonBound("lower"))
    assert got.worth == pytest.approx(WilsonBound("lower").value(t.counts("good")))
    assert got.value_class is ValueClass.MIXED


@given(
    st.lists(st.tuples(st.lists(st.integers(-5, 5), min_size=1, max_size=3, unique=True), st.booleans()), max_size=30)
)
def test_counts_add_up_to_episodes(stream: list[tuple[list[int], bool]]) -> None:
    t = Tracker()
    for ids, ok in stream:
        t.record(ids, ok)
    table = t.table()
    assert t.episodes == len(stream)
    assert table.evidence.sum() == pytest.approx(len(stream))
    assert table.success.sum() == pytest.approx(sum(ok for _, ok in stream))
    assert table.n.sum() == sum(len(ids) for ids, _ in stream)


# -- merging shards ----------------------------------------------------------------------


def _shard_episodes(seed: int, n: int) -> list[tuple[list[object], bool, str | None]]:
    rng = np.random.default_rng(seed)
    pool: list[object] = [*range(40), *(f"m{i}" for i in range(20)), 10**12, ("t", 1)]
    out: list[tuple[list[object], bool, str | None]] = []
    for _ in range(n):
        picks = rng.choice(len(pool), size=int(rng.integers(1, 6)), replace=False)
        context = [None, "easy", "hard"][int(rng.integers(3))]
        out.append(([pool[i] for i in picks], bool(rng.random() < 0.6), context))
    return out


def test_merged_shards_equal_one_tracker_that_saw_every_episode() -> None:
    episodes = _shard_episodes(0, 600)
    whole, left, right = Tracker(), Tracker(), Tracker()
    for i, (ids, ok, ctx) in enumerate(episodes):
        whole.record(ids, success=ok, context=ctx)
        (left if i % 3 else right).record(ids, success=ok, context=ctx)
    right_before = right.table()
    left.merge(right)
    assert left.episodes == whole.episodes == 600
    assert sorted(map(repr, left.ids())) == sorted(map(repr, whole.ids()))
    for memory_id in whole.ids():
        for ctx in (None, "easy", "hard"):
            got, want = left.counts(memory_id, context=ctx), whole.counts(memory_id, context=ctx)
            assert (got.success, got.failure, got.n) == pytest.approx((want.success, want.failure, want.n))
    after = right.table()  # the merged-in shard is unchanged
    assert all(np.array_equal(a, b) for a, b in zip(right_before, after, strict=True))


def test_merging_integer_array_shards_matches_one_batch() -> None:
    rng = np.random.default_rng(1)
    ids = np.argsort(rng.random((2_000, 5_000)), axis=1)[:, :8]
    ids[:, 0] += 10**9  # some ids beyond the dense table
    ok = rng.random(2_000) < 0.5
    whole, a, b = Tracker(), Tracker(), Tracker()
    whole.record_batch(ids, success=ok)
    a.record_batch(ids[:700], success=ok[:700])
    b.record_batch(ids[700:], success=ok[700:])
    a.merge(b)
    probe = np.unique(ids)
    assert np.allclose(a.values(probe.tolist()), whole.values(probe.tolist()))
    assert a.episodes == 2_000 and len(a) == len(whole)


@pytest.mark.parametrize(
    ("left", "right", "field"),
    [
        (Tracker(half_life=100), Tracker(half_life=100), "half_life"),
        (Tracker(), Tracker(half_life=50), "half_life"),
        (Tracker(w_min=0.01), Tracker(), "w_min"),
    ],
)
def test_merge_refuses_shards_that_do_not_add_up(left: Tracker, right: Tracker, field: str) -> None:
    right.register(["x"])
    with pytest.raises(ValidationError) as info:
        left.merge(right)
    assert info.value.field == field
    assert len(left) == 0  # nothing merged


def test_merge_refuses_itself_and_non_trackers() -> None:
    t = Tracker()
    t.record(["a"], success=True)
    with pytest.raises(ValidationError, match="itself"):
        t.merge(t)
    with pytest.raises(ValidationError, match="must be a Tracker"):
        t.merge({"a": 1})  # type: ignore[arg-type]
    assert t.counts("a").success == 1.0
