"""Context-adjusted worth: EpisodeStats, StratifiedWorth, RegressionWorth, QueryClusters."""

from __future__ import annotations

import numpy as np
import pytest

import memworth.signals.context_adjusted as adjusted_module
from memworth import Counts, RawWorth, ValidationError
from memworth.signals.context_adjusted import EpisodeStats, RegressionWorth, StratifiedWorth
from memworth.signals.query_clusters import QueryClusters


def random_episodes(seed: int, episodes: int = 600, memories: int = 12, k: int = 3, contexts: int = 3):
    rng = np.random.default_rng(seed)
    ids = np.argsort(rng.random((episodes, memories)), axis=1)[:, :k]
    success = rng.random(episodes) < 0.4 + 0.05 * (ids < 4).sum(axis=1)
    labels = rng.integers(contexts, size=episodes)
    return ids, success, labels


def oracle_fit(ids, success, labels, ridge, order, context_order):
    """Dense least squares with the ridge on the memory effects only (numpy, no shortcuts)."""
    x = np.zeros((ids.shape[0], len(order)))
    pos = {m: i for i, m in enumerate(order)}
    for e, row in enumerate(ids):
        for m in row:
            x[e, pos[int(m)]] = 1.0
    z = np.zeros((ids.shape[0], len(context_order)))
    cpos = {c: i for i, c in enumerate(context_order)}
    for e, c in enumerate(labels):
        z[e, cpos[c]] = 1.0
    design = np.hstack([x, z])
    penalty = np.diag(np.r_[np.full(x.shape[1], ridge), np.zeros(z.shape[1])])
    theta = np.linalg.solve(design.T @ design + penalty, design.T @ success.astype(float))
    return theta[: x.shape[1]], theta[x.shape[1] :]


# -- EpisodeStats ------------------------------------------------------------------------


def test_stats_one_at_a_time_equal_one_batch() -> None:
    ids, success, labels = random_episodes(0)
    batch, single = EpisodeStats(), EpisodeStats()
    batch.update_batch(ids, success, labels)
    for row, ok, c in zip(ids.tolist(), success.tolist(), labels.tolist(), strict=True):
        single.update(row, ok, context=c)
    # A batch numbers its new ids in ascending order, single updates in order seen.
    assert sorted(batch.ids()) == sorted(single.ids()) and set(batch.contexts()) == set(single.contexts())
    order = [single.ids().index(m) for m in batch.ids()]
    for c in batch.contexts():
        assert batch.base_rate(c) == single.base_rate(c)
        np.testing.assert_array_equal(batch.table(c).n, single.table(c).n[order])
        np.testing.assert_array_equal(batch.table(c).success, single.table(c).success[order])
    pairs = list(batch.pairs.pairs())
    assert len(pairs) == len(list(single.pairs.pairs()))
    assert all(single.pairs.together(p.first, p.second) == p.together for p in pairs)
    np.testing.assert_allclose(RegressionWorth().values(single, batch.ids()), RegressionWorth().values(batch))


def test_stats_count_what_happened() -> None:
    stats = EpisodeStats()
    stats.update(["a", "b"], True, context="easy")
    stats.update(["a", "c"], False, context="hard")
    stats.update(["a"], "success")
    assert stats.ids() == ["a", "b", "c"]
    assert stats.contexts() == ["easy", "hard", None]
    assert stats.episodes == 3 and stats.overall == pytest.approx(2 / 3)
    assert stats.base_rate("hard") == 0.0 and stats.base_rate(None) == 1.0
    totals = stats.totals()
    assert totals.n.tolist() == [3.0, 1.0, 1.0] and totals.success.tolist() == [2.0, 1.0, 0.0]
    assert stats.pairs.together("a", "b") == 1 and stats.pairs.together("b", "c") == 0


def test_stats_merge_like_one_statistic() -> None:
    ids, success, labels = random_episodes(1)
    whole, left, right = EpisodeStats(), EpisodeStats(), EpisodeStats()
    whole.update_batch(ids, success, labels)
    left.update_batch(ids[:250], success[:250], labels[:250])
    right.update_batch(ids[250:], success[250:], labels[250:])
    merged = left + right
    assert sorted(merged.ids()) == sorted(whole.ids())
    np.testing.assert_allclose(
        RegressionWorth().values(merged, whole.ids()), RegressionWorth().values(whole), atol=1e-12
    )
    for c in whole.contexts():
        assert merged.base_rate(c) == whole.base_rate(c)


@pytest.mark.parametrize(
    ("ids", "success", "context", "field"),
    [
        (["a", "a"], True, None, "ids"),
        ([], True, None, "ids"),
        ("ab", True, None, "ids"),
        (["a"], 0.5, None, "success"),
        (["a"], True, 1.5, "context"),
        ([None], True, None, "ids"),
    ],
)
def test_stats_refuse_bad_episodes_and_change_nothing(ids, success, context, field) -> None:
    stats = EpisodeStats()
    stats.update(["x"], True)
    with pytest.raises(ValidationError) as err:
        stats.update(ids, success, context=context)
    assert err.value.field == field
    assert stats.ids() == ["x"] and stats.episodes == 1


def test_stats_batch_refuses_bad_input_and_changes_nothing() -> None:
    stats = EpisodeStats()
    with pytest.raises(ValidationError, match="contexts"):
        stats.update_batch(np.array([[0, 1], [1, 2]]), np.array([True, False]), ["a"])
    with pytest.raises(ValidationError, match="twice"):
        stats.update_batch(np.array([[0, 0]]), np.array([True]))
    with pytest.raises(ValidationError, match="integers"):
        stats.update_batch(np.array([[0.5, 1.0]]), np.array([True]))
    assert stats.ids() == [] and stats.episodes == 0 and stats.overall == 0.5


def test_stats_unknown_context_is_refused() -> None:
    stats = EpisodeStats()
    stats.update(["a"], True, context="easy")
    with pytest.raises(ValidationError, match="no episodes"):
        stats.base_rate("hard")
    assert stats.table("hard").n.tolist() == [0.0]


# -- StratifiedWorth ---------------------------------------------------------------------


def test_stratified_hand_computed() -> None:
    # Easy base rate 0.8, hard 0.3, overall 0.55. A memory with 10 easy retrievals (7
    # successes) and 10 hard ones (5 successes): excess (7 - 8) + (5 - 3) = 1 over 20 + 5.
    est = StratifiedWorth(strength=5)
    per_context = {"easy": Counts(7.0, 3.0, 10), "hard": Counts(5.0, 5.0, 10)}
    assert est.value(per_context, {"easy": 0.8, "hard": 0.3}, 0.55) == pytest.approx(0.55 + 1 / 25)


def test_stratified_without_evidence_is_the_overall_rate() -> None:
    est = StratifiedWorth(strength=10)
    assert est.value({}, {}, 0.42) == pytest.approx(0.42)
    assert est.value({"hard": Counts()}, {"hard": 0.3}, 0.42) == pytest.approx(0.42)


def test_stratified_one_context_without_shrinkage_is_raw_mw() -> None:
    counts = Counts(success=6.0, failure=4.0, n=10)
    for rate in (0.1, 0.5, 0.9):
        got = StratifiedWorth(strength=0).value({"only": counts}, {"only": rate}, rate)
        assert got == pytest.approx(RawWorth().value(counts))


def test_stratified_shrinks_toward_the_overall_rate_as_strength_grows() -> None:
    counts = {"hard": Counts(8.0, 2.0, 10)}
    values = [StratifiedWorth(strength=s).value(counts, {"hard": 0.3}, 0.5) for s in (0, 10, 100, 1e9)]
    assert values[0] > values[1] > values[2] > values[3] and values[3] == pytest.approx(0.5)


def test_stratified_reads_stats_like_the_formula_and_clips() -> None:
    stats = EpisodeStats()
    for _ in range(10):
        stats.update(["specialist"], True, context="hard")
        stats.update(["filler"], False, context="hard")
        stats.update(["generalist"], True, context="easy")
    values = StratifiedWorth(strength=0).values(stats)
    # specialist: overall 2/3 + (10 - 0.5 x 10) / 10 = 1.17, clipped to 1
    assert values.tolist() == pytest.approx([1.0, 2 / 3 - 0.5, 2 / 3])
    assert StratifiedWorth().values(stats, ["generalist"]).tolist() == pytest.approx([2 / 3])


def test_stratified_ranks_the_specialist_above_the_generalist() -> None:
    # Hard tasks succeed 30% of the time, easy ones 80%; the specialist does better than
    # its context, the generalist worse than its own, though its raw MW is higher.
    est = StratifiedWorth(strength=0)
    rates, overall = {"easy": 0.8, "hard": 0.3}, 0.55
    specialist = est.value({"hard": Counts(4.0, 6.0, 10)}, rates, overall)
    generalist = est.value({"easy": Counts(7.0, 3.0, 10)}, rates, overall)
    assert RawWorth().value(Counts(4.0, 6.0, 10)) < RawWorth().value(Counts(7.0, 3.0, 10))
    assert specialist > generalist


def test_stratified_refuses_bad_settings() -> None:
    with pytest.raises(ValidationError, match="strength"):
        StratifiedWorth(strength=-1).value({}, {}, 0.5)
    with pytest.raises(ValidationError, match="rates"):
        StratifiedWorth().value({"hard": Counts()}, {}, 0.5)


# -- RegressionWorth ---------------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_regression_matches_dense_least_squares(seed: int) -> None:
    ids, success, labels = random_episodes(seed)
    stats = EpisodeStats()
    stats.update_batch(ids, success, labels)
    beta, alpha = RegressionWorth(ridge=2.0).effects(stats)
    want_beta, want_alpha = oracle_fit(ids, success, labels, 2.0, stats.ids(), stats.contexts())
    np.testing.assert_allclose(beta, want_beta, atol=1e-10)
    np.testing.assert_allclose(alpha, want_alpha, atol=1e-10)


def test_regression_sparse_path_equals_dense_path(monkeypatch: pytest.MonkeyPatch) -> None:
    ids, success, labels = random_episodes(3)
    stats = EpisodeStats()
    stats.update_batch(ids, success, labels)
    dense = RegressionWorth().values(stats)
    monkeypatch.setattr(adjusted_module, "DENSE_LIMIT", 0)
    np.testing.assert_allclose(RegressionWorth().values(stats), dense, atol=1e-10)


def test_regression_with_one_memory_per_episode_is_raw_mw_as_ridge_vanishes() -> None:
    rng = np.random.default_rng(4)
    ids = rng.integers(5, size=(400, 1))
    success = rng.random(400) < 0.2 + 0.15 * ids[:, 0]
    stats = EpisodeStats()
    stats.update_batch(ids, success)
    raw = RawWorth().value(stats.totals())
    np.testing.assert_allclose(RegressionWorth(ridge=1e-9).values(stats), raw, atol=1e-6)


def test_regression_cannot_split_a_pair_never_seen_apart_until_one_is_dropped() -> None:
    stats = EpisodeStats()
    for t in range(60):
        stats.update(["anchor", "hitchhiker", f"x{t % 6}"], t % 3 != 0)
    worth = RegressionWorth().worth(stats)
    assert worth["anchor"] == pytest.approx(worth["hitchhiker"], abs=1e-12)
    for t in range(6):  # drop each member in turn: the anchor's absence fails
        stats.update(["hitchhiker", f"x{t}"], False)
        stats.update(["anchor", f"x{t}"], True)
    worth = RegressionWorth().worth(stats)
    assert worth["anchor"] > worth["hitchhiker"] + 0.2


def test_regression_without_evidence_and_empty() -> None:
    assert RegressionWorth().values(EpisodeStats()).size == 0
    stats = EpisodeStats()
    stats.update(["a", "b"], True)
    stats.update(["a", "b"], False)
    assert RegressionWorth().values(stats).tolist() == pytest.approx([0.5, 0.5])
    with pytest.raises(ValidationError, match="ridge"):
        RegressionWorth(ridge=0).values(stats)
    with pytest.raises(ValidationError, match="ridge"):
        RegressionWorth(ridge=-1.0).values(stats)


def test_regression_removes_the_task_difficulty_confound() -> None:
    # Experiment 2 in miniature: easy tasks (base 0.8) retrieve generalists, hard tasks
    # (base 0.3) generalists or the specialist; success rises with the memory's utility.
    rng = np.random.default_rng(5)
    stats = EpisodeStats()
    utility = {"spec": 0.9, "gen_good": 0.6, "gen_bad": 0.1}
    for _ in range(4000):
        hard = rng.random() < 0.5
        pool = ["spec", "gen_good", "gen_bad"] if hard else ["gen_good", "gen_bad"]
        m = pool[rng.integers(len(pool))]
        p = (0.3 if hard else 0.8) + 0.3 * (utility[m] - 0.5)
        stats.update([m], bool(rng.random() < p), context="hard" if hard else "easy")
    raw = dict(zip(stats.ids(), RawWorth().value(stats.totals()).tolist(), strict=True))
    ours = RegressionWorth().worth(stats)
    assert raw["spec"] < raw["gen_bad"]  # the paper's MW points the wrong way
    assert ours["spec"] > ours["gen_good"] > ours["gen_bad"]
    stratified = dict(zip(stats.ids(), StratifiedWorth().values(stats).tolist(), strict=True))
    assert stratified["spec"] > stratified["gen_good"] > stratified["gen_bad"]


# -- QueryClusters -----------------------------------------------------------------------


def test_clusters_recover_well_separated_topics() -> None:
    rng = np.random.default_rng(6)
    centres = np.eye(8)[:4]
    topic = rng.integers(4, size=300)
    vectors = centres[topic] + rng.normal(0, 0.1, size=(300, 8))
    labels = QueryClusters(threshold=0.6).assign_many(vectors)
    assert len(set(labels.tolist())) == 4
    for c in set(labels.tolist()):  # every cluster holds one topic
        assert len(set(topic[labels == c].tolist())) == 1


def test_clusters_one_at_a_time_equal_many() -> None:
    rng = np.random.default_rng(7)
    vectors = rng.normal(size=(50, 5))
    one, many = QueryClusters(0.3), QueryClusters(0.3)
    singles = [one.assign(v) for v in vectors]
    assert singles == many.assign_many(vectors).tolist()
    np.testing.assert_allclose(one.centroids, many.centroids)
    assert one.sizes.sum() == 50


def test_clusters_threshold_and_cap() -> None:
    vectors = np.eye(4)
    assert QueryClusters(threshold=0.5).assign_many(vectors).tolist() == [0, 1, 2, 3]
    assert QueryClusters(threshold=-1.0).assign_many(vectors).tolist() == [0, 0, 0, 0]
    capped = QueryClusters(threshold=0.5, max_clusters=2)
    assert capped.assign_many(vectors).tolist()[:2] == [0, 1] and len(capped) == 2


def test_clusters_grow_past_their_first_capacity() -> None:
    clusters = QueryClusters(threshold=0.5)
    assert clusters.assign_many(np.eye(40)).tolist() == list(range(40))
    assert clusters.assign(np.eye(40)[17] + 0.01) == 17 and clusters.sizes[17] == 2
    np.testing.assert_allclose(np.linalg.norm(clusters.centroids, axis=1), 1.0)


@pytest.mark.parametrize(
    "vector",
    [np.zeros(3), np.array([np.nan, 1.0, 0.0]), np.array([1.0, 0.0]), np.array(1.0), "abc"],
)
def test_clusters_refuse_bad_vectors_and_keep_their_state(vector) -> None:
    clusters = QueryClusters()
    clusters.assign(np.array([1.0, 0.0, 0.0]))
    with pytest.raises(ValidationError):
        clusters.assign(vector)
    assert len(clusters) == 1 and clusters.sizes.tolist() == [1]


@pytest.mark.parametrize(("threshold", "cap"), [(1.5, 4), (True, 4), (0.5, 0), (0.5, 2.0)])
def test_clusters_refuse_bad_settings(threshold, cap) -> None:
    with pytest.raises(ValidationError):
        QueryClusters(threshold, cap)
