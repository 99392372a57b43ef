"""Counts: the evidence record, its validation, and that counts from shards merge exactly."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from memworth import Counts, CountsTable, Tracker, ValidationError, evidence_of

# Dyadic fractions (multiples of 1/1024 below 2**20) add exactly in binary floating point.
dyadic = st.integers(min_value=0, max_value=2**30).map(lambda i: i / 1024)
exact_counts = st.builds(Counts, dyadic, dyadic, dyadic)


def test_defaults_are_no_evidence() -> None:
    c = Counts()
    assert (c.success, c.failure, c.n) == (0.0, 0.0, 0.0)
    assert c.evidence == 0.0


def test_add_credits_the_right_counter_and_counts_one_retrieval() -> None:
    c = Counts().add(0.25, success=True).add(0.5, success=False).add(0.125, success=True)
    assert c == Counts(success=0.375, failure=0.5, n=3.0)
    assert c.evidence == 0.875


def test_fields_are_stored_as_python_floats() -> None:
    c = Counts(np.int64(3), np.float32(0.5), 2)
    assert all(type(x) is float for x in (c.success, c.failure, c.n))


def test_scaled_multiplies_every_field() -> None:
    assert Counts(4.0, 2.0, 8.0).scaled(0.25) == Counts(1.0, 0.5, 2.0)


def test_adding_a_non_counts_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        Counts() + 1  # type: ignore[operator]


@pytest.mark.parametrize("name", ["success", "failure", "n"])
@pytest.mark.parametrize("bad", [-1.0, -1e-300, math.nan, math.inf, -math.inf, True, "1", None])
def test_invalid_field_is_refused_and_named(name: str, bad: object) -> None:
    kwargs = {"success": 0.0, "failure": 0.0, "n": 0.0, name: bad}
    with pytest.raises(ValidationError) as info:
        Counts(**kwargs)  # type: ignore[arg-type]
    assert info.value.field == name
    assert str(info.value).startswith(f"{name}: ")


def test_counts_are_frozen() -> None:
    c = Counts()
    with pytest.raises(AttributeError):
        c.success = 1.0  # type: ignore[misc]


@given(exact_counts, exact_counts)
def test_merge_is_commutative(a: Counts, b: Counts) -> None:
    assert a + b == b + a


@given(exact_counts, exact_counts, exact_counts)
def test_merge_is_associative(a: Counts, b: Counts, c: Counts) -> None:
    assert (a + b) + c == a + (b + c)


@given(exact_counts)
def test_empty_counts_is_the_identity(a: Counts) -> None:
    assert a + Counts() == a == Counts() + a


@given(st.floats(0, 1e6), st.floats(0, 1e6), st.floats(0, 1e6))
def test_merge_of_arbitrary_floats_is_commutative_and_associative_approximately(s: float, f: float, n: float) -> None:
    a, b, c = Counts(s, f, n), Counts(f, n, s), Counts(n, s, f)
    assert a + b == b + a  # float addition is commutative exactly
    left, right = (a + b) + c, a + (b + c)
    for x, y in zip((left.success, left.failure, left.n), (right.success, right.failure, right.n), strict=True):
        assert x == pytest.approx(y, rel=1e-12, abs=1e-300)


def test_evidence_of_units() -> None:
    c = Counts(2.0, 1.0, 12)
    assert evidence_of(c, "retrievals") == 12.0
    assert evidence_of(c, "weighted") == 3.0
    table = CountsTable(np.array([1.0, 2.0]), np.array([0.5, 0.0]), np.array([3.0, 4.0]))
    np.testing.assert_array_equal(evidence_of(table, "weighted"), [1.5, 2.0])
    np.testing.assert_array_equal(evidence_of(table, "retrievals"), [3.0, 4.0])
    np.testing.assert_array_equal(table.evidence, [1.5, 2.0])


@pytest.mark.parametrize("unit", ["", "Weighted", "hits", None, 1])
def test_evidence_of_refuses_unknown_unit(unit: object) -> None:
    with pytest.raises(ValidationError) as info:
        evidence_of(Counts(), unit)  # type: ignore[arg-type]
    assert info.value.field == "evidence"


# -- shards ------------------------------------------------------------------------------


def _merged(trackers: list[Tracker], memory_id: object) -> Counts:
    total = Counts()
    for t in trackers:
        if memory_id in t:
            total = total + t.counts(memory_id)
    return total


def _assert_counts_close(a: Counts, b: Counts) -> None:
    assert a.success == pytest.approx(b.success, rel=1e-12, abs=1e-12)
    assert a.failure == pytest.approx(b.failure, rel=1e-12, abs=1e-12)
    assert a.n == pytest.approx(b.n, rel=1e-12, abs=1e-12)


episode = st.tuples(
    st.lists(st.sampled_from("abcdefgh"), min_size=1, max_size=4, unique=True),
    st.booleans(),
    st.lists(st.integers(1, 8), min_size=4, max_size=4),  # scores; trimmed to k
    st.integers(0, 1),  # which shard
)


@given(st.lists(episode, min_size=1, max_size=40))
def test_shards_merge_into_the_counts_of_one_tracker(stream: list) -> None:
    whole, shards = Tracker(), [Tracker(), Tracker()]
    for ids, success, scores, shard in stream:
        scores = scores[: len(ids)]
        whole.record(ids, success, weights=scores)
        shards[shard].record(ids, success, weights=scores)
    assert sum(s.episodes for s in shards) == whole.episodes == len(stream)
    assert set(whole.ids()) == set(shards[0].ids()) | set(shards[1].ids())
    for memory_id in whole.ids():
        _assert_counts_close(_merged(shards, memory_id), whole.counts(memory_id))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_batch_shards_merge_into_the_counts_of_one_tracker(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n_ep, k, m = 3000, 4, 40
    ids = np.argsort(rng.random((n_ep, m)), axis=1)[:, :k]
    success = rng.random(n_ep) < 0.4
    weights = rng.random((n_ep, k)) + 0.01
    shard = rng.random(n_ep) < 0.5

    whole = Tracker()
    whole.record_batch(ids, success, weights)
    a, b = Tracker(), Tracker()
    a.record_batch(ids[shard], success[shard], weights[shard])
    b.record_batch(ids[~shard], success[~shard], weights[~shard])

    assert a.episodes + b.episodes == whole.episodes == n_ep
    for memory_id in whole.ids():
        _assert_counts_close(_merged([a, b], memory_id), whole.counts(memory_id))
