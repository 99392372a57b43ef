"""Inverse-propensity weighted worth and select's exact inclusion probabilities."""

from __future__ import annotations

import math

import numpy as np
import pytest

from memworth import RawWorth, Tracker, ValidationError
from memworth.ranking import inclusion_probabilities, select
from memworth.signals.propensity import InversePropensity, PropensityCounts, inclusion_by_rank, softmax_inclusion


@pytest.mark.parametrize(
    ("n", "k", "exploration"), [(10, 3, 0.2), (100, 8, 0.1), (5, 5, 0.5), (7, 2, 1.0), (9, 4, 0.0)]
)
def test_inclusion_by_rank_is_selects_exact_probability(n: int, k: int, exploration: float) -> None:
    order = np.random.default_rng(n).permutation(n)
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n)
    expected = inclusion_probabilities(order, np.ones(n, dtype=bool), k, exploration)
    np.testing.assert_allclose(inclusion_by_rank(n, k, exploration)[rank], expected, atol=1e-12)
    assert inclusion_by_rank(n, k, exploration).sum() == pytest.approx(k)


def test_inclusion_by_rank_matches_selects_draws() -> None:
    rng = np.random.default_rng(0)
    scores = np.linspace(1.0, 0.0, 12)
    picked = np.zeros(12)
    for _ in range(20_000):
        picked[select(scores, np.ones(12, dtype=bool), 3, 0.3, rng).picked] += 1
    np.testing.assert_allclose(picked / 20_000, inclusion_by_rank(12, 3, 0.3), atol=0.012)


def test_constant_propensity_gives_the_papers_worth() -> None:
    rng = np.random.default_rng(1)
    ids = np.argsort(rng.random((500, 20)), axis=1)[:, :4]
    y = rng.random(500) < 0.6
    tracker = Tracker()
    tracker.register(np.arange(20))
    tracker.record_batch(ids, y)
    ipw = PropensityCounts.empty(20)
    ipw.add(ids, y, np.full(ids.shape, 0.25), np.full(ids.shape, 0.2))
    np.testing.assert_allclose(RawWorth().value(ipw.table()), tracker.values(np.arange(20)), rtol=1e-12)
    np.testing.assert_array_equal(ipw.table().n, tracker.table(np.arange(20)).n)


def test_ipw_recovers_the_time_averaged_rate_where_mw_follows_the_policy() -> None:
    """Easy first half (success 0.9), hard second half (0.3); the policy retrieves the memory with
    chance 0.9, then 0.1. MW mostly sees the easy half (about 0.84); IPW weighs both halves
    equally and finds their average, 0.6."""
    rng = np.random.default_rng(2)
    t = 40_000
    easy = np.arange(t) < t // 2
    chance = np.where(easy, 0.9, 0.1)
    retrieved = rng.random(t) < chance
    y = rng.random(t) < np.where(easy, 0.9, 0.3)
    ipw = PropensityCounts.empty(1)
    idx = np.flatnonzero(retrieved)
    ipw.add(np.zeros((idx.size, 1), dtype=np.int64), y[idx], np.ones((idx.size, 1)), chance[idx][:, None])
    mw = y[idx].mean()
    assert mw > 0.8
    assert float(RawWorth().value(ipw.table())[0]) == pytest.approx(0.6, abs=0.02)


def test_clipping_caps_inverse_propensities() -> None:
    w = InversePropensity(max_weight=10).weights(np.array([0.5, 0.5, 0.5]), np.array([1.0, 0.2, 0.001]))
    np.testing.assert_allclose(w, [0.5, 2.5, 5.0])


def test_bad_input_is_refused_and_changes_nothing() -> None:
    ipw = PropensityCounts.empty(3)
    ipw.add(np.array([[0, 1]]), np.array([True]), np.full((1, 2), 0.5), np.ones((1, 2)))
    before = ipw.table()
    for args, field in (
        ((np.array([[0, 1]]), np.array([True]), np.full((1, 2), 0.5), np.array([[1.0, 0.0]])), "propensity"),
        ((np.array([[0, 3]]), np.array([True]), np.full((1, 2), 0.5), np.ones((1, 2))), "rows"),
        ((np.array([[0, 1]]), np.array([1]), np.full((1, 2), 0.5), np.ones((1, 2))), "success"),
        ((np.array([[0, 1]]), np.array([True]), np.full((1, 3), 0.5), np.ones((1, 2))), "credit"),
        ((np.array([0, 1]), np.array([True]), np.full((1, 2), 0.5), np.ones((1, 2))), "rows"),
    ):
        with pytest.raises(ValidationError) as err:
            ipw.add(*args)
        assert err.value.field == field
    after = ipw.table()
    for a, b in zip(before, after, strict=True):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(ValidationError):
        InversePropensity(max_weight=0.5).weights(np.ones(1), np.ones(1))
    with pytest.raises(ValidationError):
        inclusion_by_rank(10, 3, 1.5)


def test_softmax_inclusion_matches_the_policys_draws() -> None:
    """Greedy slots from a Plackett-Luce draw, the floor from select's rule: the logged
    chance equals how often each memory is picked."""
    rng = np.random.default_rng(3)
    n, k, eps, tau = 12, 3, 0.3, 0.1
    worth = np.linspace(0.8, 0.2, n)
    logged = softmax_inclusion(worth, tau, k, eps, rng.gumbel(size=(4000, n)))
    trials = 20_000
    keys = worth / tau + rng.gumbel(size=(trials, n))
    rank = np.argsort(np.argsort(-keys, axis=1), axis=1)
    greedy = k - rng.binomial(k, eps, size=trials)
    order = np.where(rank < greedy[:, None], -1.0, rng.random((trials, n)))
    chosen = np.argpartition(order, k - 1, axis=1)[:, :k]
    picked = np.bincount(chosen.ravel(), minlength=n) / trials
    np.testing.assert_allclose(logged, picked, atol=0.015)
    assert logged.sum() == pytest.approx(k)
    assert logged.min() >= inclusion_by_rank(n, k, eps)[-1] - 1e-12  # never below the floor
    assert logged[0] > 0.5 > 0.2 > logged[-1]  # the softmax favours high worth


def test_softmax_inclusion_without_noise_is_the_rank_policy() -> None:
    worth = np.array([[0.2, 0.9, 0.5, 0.1], [0.3, 0.3, 0.8, 0.6]])
    out = softmax_inclusion(worth, 0.05, 2, 0.25, np.zeros((2, 1, 4)))
    by_rank = inclusion_by_rank(4, 2, 0.25)
    np.testing.assert_allclose(out[0], by_rank[[2, 0, 1, 3]])
    assert out[1, 2] == by_rank[0] and out[1, 3] == by_rank[1]


def test_softmax_inclusion_refuses_bad_input() -> None:
    worth = np.full(5, 0.5)
    for args, field in (
        ((worth, 0.0, 2, 0.1, np.zeros((3, 5))), "temperature"),
        ((worth, 0.1, 2, 0.1, np.zeros((3, 4))), "noise"),
        ((worth, 0.1, 2, 0.1, np.zeros(5)), "noise"),
        ((np.array([0.5, np.nan]), 0.1, 1, 0.1, np.zeros((1, 2))), "scores"),
        ((worth, 0.1, 2, 1.5, np.zeros((3, 5))), "exploration"),
    ):
        with pytest.raises(ValidationError) as err:
            softmax_inclusion(*args)
        assert err.value.field == field


def test_logging_the_policys_chance_keeps_ipw_close_to_mw_under_a_softmax() -> None:
    """A fixed softmax over 6 memories; memory 0 sits in the greedy slot most of the time.
    Weighting by the chance given each episode's own ranking rests its estimate on the
    few episodes the draw ranked it lower (weight ~1/0.05); the policy's own chance is the
    same every episode, so the IPW worth is its MW. Both are unbiased (stationary world)."""
    rng = np.random.default_rng(5)
    n, k, eps, tau, t = 6, 1, 0.3, 0.1, 400
    worth = np.array([0.9, 0.7, 0.5, 0.5, 0.3, 0.1])
    by_rank = inclusion_by_rank(n, k, eps)
    logged = softmax_inclusion(worth, tau, k, eps, rng.gumbel(size=(20_000, n)))
    spread = {"policy": [], "ranking": []}
    for _ in range(200):
        keys = worth / tau + rng.gumbel(size=(t, n))
        rank = np.argsort(np.argsort(-keys, axis=1), axis=1)
        explore = rng.random(t) < eps
        pick = np.where(explore, rng.integers(0, n, t), np.argmin(rank, axis=1))
        y = rng.random(t) < 0.6
        mine = pick == 0
        rows = np.zeros((int(mine.sum()), 1), dtype=np.int64)
        for name, p in (("policy", np.full(t, logged[0])), ("ranking", by_rank[rank[:, 0]])):
            c = PropensityCounts.empty(1)
            c.add(rows, y[mine], np.ones((rows.shape[0], 1)), p[mine][:, None])
            spread[name].append(float(RawWorth().value(c.table())[0]))
        assert spread["policy"][-1] == pytest.approx(y[mine].mean())
    assert np.mean(spread["policy"]) == pytest.approx(0.6, abs=0.01)
    assert np.mean(spread["ranking"]) == pytest.approx(0.6, abs=0.03)
    assert np.std(spread["ranking"]) > 1.5 * np.std(spread["policy"])  # 0.051 against 0.030


def _inclusion_one_j_at_a_time(order: np.ndarray, explorable: np.ndarray, k: int, exploration: float) -> np.ndarray:
    """The reference: :func:`inclusion_probabilities` as first written, one number of exploration
    slots ``j`` at a time (the vectorised one must equal it to the bit: the log keeps propensities)."""
    n = order.size
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n)
    ex_by_rank = explorable[order]
    ex_from = np.concatenate([np.cumsum(ex_by_rank[::-1])[::-1], [0]])
    plain_before = np.concatenate([[0], np.cumsum(~ex_by_rank)])
    out = np.zeros(n)
    for j in range(k + 1) if exploration > 0 else range(1):
        pj = math.comb(k, j) * exploration**j * (1 - exploration) ** (k - j) if exploration > 0 else 1.0
        g = k - j
        p = np.zeros(n)
        p[rank < g] = 1.0
        pool = int(ex_from[g]) if g <= n else 0
        if pool and j:
            p[(rank >= g) & explorable] = min(j, pool) / pool
        shortfall = j - min(j, pool)
        if shortfall:
            plain_seen = plain_before[np.minimum(rank, n)] - plain_before[min(g, n)]
            p[(rank >= g) & ~explorable & (plain_seen < shortfall)] = 1.0
        out += pj * p
    return np.clip(out, 0.0, 1.0)


@pytest.mark.parametrize("seed", range(40))
def test_inclusion_probabilities_equal_the_one_j_at_a_time_reference_to_the_bit(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 80))
    k = int(rng.integers(0, n + 3))  # k above n too: every candidate is picked
    exploration = float(rng.choice([0.0, 1.0, rng.random(), 0.1]))
    explorable = rng.random(n) < rng.choice([0.0, 0.1, 0.5, 1.0])
    order = rng.permutation(n)
    got = inclusion_probabilities(order, explorable, k, exploration)
    want = _inclusion_one_j_at_a_time(order, explorable, k, exploration)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
