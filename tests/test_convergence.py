"""Memory Worth converges to p+(m) = Pr[success | m retrieved] in a stationary world."""

from __future__ import annotations

import numpy as np
import pytest

from memworth import Tracker

M, K, EPISODES, EARLY = 50, 5, 20_000, 2_000


def _simulate(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """M memories with hidden utilities; each episode retrieves K uniformly without
    replacement and succeeds with probability equal to the mean utility of the set."""
    rng = np.random.default_rng(seed)
    utility = rng.uniform(0.05, 0.95, M)
    ids = np.argsort(rng.random((EPISODES, M)), axis=1)[:, :K]
    success = rng.random(EPISODES) < utility[ids].mean(axis=1)
    return utility, ids, success


def _empirical_p_plus(ids: np.ndarray, success: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Success rate of the episodes that retrieved each memory, and how many there were."""
    hit = np.zeros((len(ids), M), dtype=bool)
    hit[np.arange(len(ids))[:, None], ids] = True
    n = hit.sum(axis=0)
    return (hit & success[:, None]).sum(axis=0) / n, n


def _theoretical_p_plus(utility: np.ndarray) -> np.ndarray:
    # E[mean utility | m in set] = (u_m + (K-1) * mean of the others) / K
    others = (utility.sum() - utility) / (M - 1)
    return (utility + (K - 1) * others) / K


@pytest.fixture(scope="module")
def run() -> dict[str, np.ndarray]:
    utility, ids, success = _simulate(seed=20240607)
    t = Tracker()
    t.record_batch(ids[:EARLY], success[:EARLY])
    early = t.values(np.arange(M))
    t.record_batch(ids[EARLY:], success[EARLY:])
    late = t.values(np.arange(M))
    assert t.episodes == EPISODES and len(t) == M
    return {
        "utility": utility,
        "ids": ids,
        "success": success,
        "early": early,
        "late": late,
        "n": t.table(np.arange(M)).n,
    }


def test_worth_is_the_success_rate_of_the_episodes_that_retrieved_each_memory(run: dict[str, np.ndarray]) -> None:
    # With uniform credit 1/k, MW(m) is exactly the empirical p+(m).
    p_hat, n = _empirical_p_plus(run["ids"], run["success"])
    np.testing.assert_array_equal(run["n"], n)
    np.testing.assert_allclose(run["late"], p_hat, rtol=0, atol=1e-12)
    p_early, _ = _empirical_p_plus(run["ids"][:EARLY], run["success"][:EARLY])
    np.testing.assert_allclose(run["early"], p_early, rtol=0, atol=1e-12)


def test_worth_is_within_a_few_standard_errors_of_p_plus(run: dict[str, np.ndarray]) -> None:
    p_plus = _theoretical_p_plus(run["utility"])
    se = np.sqrt(p_plus * (1 - p_plus) / run["n"])
    z = np.abs(run["late"] - p_plus) / se
    assert z.max() < 4.5, f"worst memory is {z.max():.2f} standard errors away"
    assert np.mean(z < 2) > 0.85  # most memories within 2 SE, as a normal approximation says


def test_error_shrinks_with_more_episodes(run: dict[str, np.ndarray]) -> None:
    p_plus = _theoretical_p_plus(run["utility"])
    err_early = np.abs(run["early"] - p_plus).max()
    err_late = np.abs(run["late"] - p_plus).max()
    assert err_late < err_early
    assert err_late < 0.6 * err_early  # ~1/sqrt(10) expected
    assert err_late < 0.05


def test_worth_ranks_memories_like_their_utility(run: dict[str, np.ndarray]) -> None:
    from scipy.stats import spearmanr

    rho = spearmanr(run["late"], run["utility"]).statistic
    assert rho > 0.95


def test_score_proportional_credit_converges_to_its_weighted_rate() -> None:
    # With non-uniform credit, MW(m) is the credit-weighted success rate of m's episodes.
    _, ids, success = _simulate(seed=7)
    ids, success = ids[:5000], success[:5000]
    rng = np.random.default_rng(8)
    scores = rng.uniform(0.1, 1.0, ids.shape)
    t = Tracker()
    t.record_batch(ids, success, weights=scores)
    w = scores / scores.sum(axis=1, keepdims=True)
    num = np.zeros(M)
    den = np.zeros(M)
    np.add.at(num, ids, w * success[:, None])
    np.add.at(den, ids, w)
    np.testing.assert_allclose(t.values(np.arange(M)), num / den, rtol=1e-10)
