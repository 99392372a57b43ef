"""Change detection on outcome streams: the Bernoulli CUSUM against hand-computed steps and simulations."""

from __future__ import annotations

import math

import numpy as np
import pytest

from memworth import ValidationError
from memworth.counts import Counts
from memworth.signals.change_detection import (
    BernoulliCusum,
    CusumState,
    ExplainingAway,
    OutcomeStream,
    SharedEvidence,
    reference_rates,
    scan_episodes,
)


def _sigmoid(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-z))


def _oracle(y: list[bool], ref: list[float] | None, odds_ratio: float, min_history: float, prior: float) -> list[float]:
    """The statistic after each observation, computed step by step with math (no numpy)."""
    s = n = e = stat = 0.0
    out = []
    for i, ok in enumerate(y):
        own = math.log((s + prior) / (n + 2 * prior)) - math.log1p(-(s + prior) / (n + 2 * prior))
        if ref is None:
            z0 = own
        else:
            ref_rate = (e + prior) / (n + 2 * prior)
            z0 = math.log(ref[i] / (1 - ref[i])) + own - math.log(ref_rate / (1 - ref_rate))
        p0, p1 = _sigmoid(z0), _sigmoid(z0 + math.log(odds_ratio))
        llr = math.log(p1 / p0) if ok else math.log((1 - p1) / (1 - p0))
        if n >= min_history:
            stat = max(0.0, stat + llr)
        out.append(stat)
        s += ok
        n += 1
        e += 0.5 if ref is None else ref[i]
    return out


@pytest.mark.parametrize("with_reference", [False, True])
def test_statistic_matches_a_step_by_step_oracle(with_reference: bool) -> None:
    rng = np.random.default_rng(3)
    y = (rng.random(120) < np.where(np.arange(120) < 70, 0.85, 0.2)).tolist()
    ref = rng.uniform(0.3, 0.9, 120).tolist() if with_reference else None
    det = BernoulliCusum(odds_ratio=0.1, threshold=1e9, min_history=5, prior=0.5)
    state = det.start(1)
    got = []
    for i, ok in enumerate(y):
        det.update(state, [0], ok, reference=None if ref is None else ref[i], time=i)
        got.append(float(state.statistic[0]))
    np.testing.assert_allclose(got, _oracle(y, ref, 0.1, 5, 0.5), rtol=1e-10, atol=1e-12)


def test_a_known_change_is_detected_soon_with_its_change_point() -> None:
    rng = np.random.default_rng(0)
    y = np.concatenate([rng.random(200) < 0.9, rng.random(100) < 0.05])
    r = BernoulliCusum().scan(y)
    assert r.alarm and r.first_alarm is not None
    assert 200 <= r.first_alarm <= 215  # a handful of failures after the break
    assert r.change_point is not None and 195 <= r.change_point <= 205
    assert r.statistic >= r.threshold == 12.0


def test_a_stationary_stream_raises_no_alarm() -> None:
    """20 memories at fixed rates, 3,000 retrievals each (seeded): no alarm."""
    rng = np.random.default_rng(1)
    rates = rng.uniform(0.2, 0.95, 20)
    det = BernoulliCusum()
    state = det.start(20)
    for t in range(3000):
        det.update(state, np.arange(20), rng.random(20) < rates, time=t)
    assert not (state.first_alarm >= 0).any()
    assert state.statistic.max() < det.threshold


@pytest.mark.parametrize(("threshold", "low", "high"), [(12.0, 0, 5), (6.0, 60, 10_000)])
def test_false_alarms_are_as_rare_as_the_threshold_says(threshold: float, low: int, high: int) -> None:
    """400,000 stationary observations (200 memories x 2,000): about exp(h) observations per false
    alarm, so a handful at h = 12 (exp(12) = 163,000) and hundreds at h = 6 (exp(6) = 403)."""
    rng = np.random.default_rng(0)
    rates = rng.uniform(0.2, 0.95, 200)
    det = BernoulliCusum(threshold=threshold)
    state = det.start(200)
    alarms = 0
    for t in range(2000):
        hit = det.update(state, np.arange(200), rng.random(200) < rates, time=t)
        alarms += int(hit.sum())
        state.reset(np.flatnonzero(hit))  # count every alarm, as a person clearing each flag would
    assert low <= alarms <= high


def test_vectorised_update_equals_one_scan_per_memory() -> None:
    rng = np.random.default_rng(2)
    episodes, n = 400, 12
    sets = [rng.choice(n, size=4, replace=False) for _ in range(episodes)]
    y = rng.random(episodes) < 0.7
    y[250:] &= rng.random(episodes - 250) < 0.2
    ref = reference_rates(y, half_life=30)
    det = BernoulliCusum(threshold=6)
    state = det.start(n)
    for t, rows in enumerate(sets):
        det.update(state, rows, bool(y[t]), reference=float(ref[t]), time=t)
    for m in range(n):
        mine = [t for t, rows in enumerate(sets) if m in rows]
        r = det.scan(y[mine], reference=ref[mine], times=np.array(mine))
        assert r.statistic == pytest.approx(state.statistic[m], rel=1e-12, abs=1e-12)
        assert (r.first_alarm if r.first_alarm is not None else -1) == state.first_alarm[m]
        assert (r.change_point if r.change_point is not None else -1) == state.since[m]


def test_a_shift_every_memory_shares_is_not_a_break_against_the_reference() -> None:
    """When all episodes get harder, a memory that merely shares them keeps its lift: no alarm
    measured against the reference rate, an alarm without it."""
    rng = np.random.default_rng(4)
    p = np.concatenate([np.full(300, 0.9), np.full(300, 0.35)])
    y = rng.random(600) < p
    everyone = rng.random(600) < p  # the other episodes, same difficulty
    ref = reference_rates(everyone, half_life=20)
    assert not BernoulliCusum().scan(y, reference=ref).alarm
    assert BernoulliCusum().scan(y).alarm


def test_weights_temper_the_evidence() -> None:
    det = BernoulliCusum(min_history=0)
    full, half, none = det.start(1), det.start(1), det.start(1)
    for state, w in ((full, 1.0), (half, 0.5), (none, 0.0)):
        for ok in (True, True, False):
            det.update(state, [0], ok, weight=w)
    assert none.statistic[0] == 0.0
    assert 0 < half.statistic[0] < full.statistic[0]


def test_reset_restarts_the_statistic_and_optionally_the_baseline() -> None:
    det = BernoulliCusum(threshold=5)
    state = det.start(2)
    for ok in [True] * 30 + [False] * 8:
        det.update(state, [0, 1], ok)
    assert (state.first_alarm >= 0).all() and (state.statistic >= 5).all()
    state.reset([0])
    assert state.statistic[0] == 0 and state.first_alarm[0] == -1 and state.since[0] == -1
    assert state.observations[0] == 38  # the baseline is kept: the memory still has its history
    state.reset([1], forget_history=True)
    assert state.observations[1] == 0 and state.successes[1] == 0
    assert state.statistic[0] == 0 and not det.update(state, [0], False)[0]  # one failure is not an alarm


def test_reference_rates_match_an_explicit_weighted_mean() -> None:
    rng = np.random.default_rng(5)
    y = rng.random(50) < 0.6
    got = reference_rates(y, half_life=7.0, prior=0.5)
    keep = 0.5 ** (1 / 7.0)
    for t in range(50):
        w = keep ** np.arange(t - 1, -1, -1)
        expected = (0.5 * keep**t + (w * y[:t]).sum()) / (keep**t + w.sum())
        assert got[t] == pytest.approx(expected, rel=1e-12)


def test_outcome_stream_has_a_length() -> None:
    s = OutcomeStream(np.array([True, False, True]), np.ones(3), None, np.arange(1, 4))
    assert len(s) == 3
    assert BernoulliCusum().scan(s.success, s.weight, s.reference, s.episode).observations == 3


@pytest.mark.parametrize(
    ("settings", "field"),
    [
        ({"odds_ratio": 1.0}, "odds_ratio"),
        ({"odds_ratio": 0.0}, "odds_ratio"),
        ({"threshold": 0}, "threshold"),
        ({"min_history": -1}, "min_history"),
        ({"prior": 0}, "prior"),
        ({"threshold": True}, "threshold"),
    ],
)
def test_bad_settings_are_refused(settings: dict[str, object], field: str) -> None:
    with pytest.raises(ValidationError) as err:
        BernoulliCusum(**settings).start(1)  # type: ignore[arg-type]
    assert err.value.field == field


def test_bad_updates_are_refused_and_change_nothing() -> None:
    det = BernoulliCusum(min_history=0)
    state = det.start(3)
    det.update(state, [0], True)
    before = [a.copy() for a in (state.statistic, state.observations, state.successes)]
    for kwargs, field in (
        ({"rows": [0, 0], "success": True}, "rows"),
        ({"rows": [5], "success": True}, "rows"),
        ({"rows": [1], "success": 1}, "success"),
        ({"rows": [1], "success": True, "weight": 1.5}, "weight"),
        ({"rows": [1], "success": True, "reference": 1.0}, "reference"),
    ):
        with pytest.raises(ValidationError) as err:
            det.update(state, **kwargs)  # type: ignore[arg-type]
        assert err.value.field == field
    for a, b in zip(before, (state.statistic, state.observations, state.successes), strict=True):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(ValidationError):
        CusumState.empty(-1)
    with pytest.raises(ValidationError):
        det.scan(np.array([1, 0]))
    with pytest.raises(ValidationError):
        reference_rates(np.array([True]), half_life=0)


def _confounded(seed: int, together: float = 0.7) -> tuple[list[list[int]], np.ndarray]:
    """Memory 0 breaks at episode 300; memory 1 comes with it in ``together`` of its
    episodes and otherwise works; memories 2-5 never change."""
    rng = np.random.default_rng(seed)
    sets, y = [], []
    for t in range(1, 601):
        u = rng.random()
        if u < 0.35:
            rows = [0, 1] if rng.random() < together else [0]
            rows = rows + rng.choice(np.arange(2, 6), 4 - len(rows), replace=False).tolist()
            ok = rng.random() < (0.9 if t <= 300 else 0.0)
        elif u < 0.5:
            rows = [1, *rng.choice(np.arange(2, 6), 3, replace=False).tolist()]
            ok = rng.random() < 0.9
        else:
            rows = rng.choice(np.arange(2, 6), 4, replace=False).tolist()
            ok = rng.random() < 0.8
        sets.append(rows)
        y.append(ok)
    return sets, np.array(y)


def test_steps_are_what_update_adds_before_the_floor() -> None:
    det = BernoulliCusum(min_history=2)
    state = det.start(3)
    rng = np.random.default_rng(5)
    for t in range(60):
        rows = np.array([0, 1, 2])
        ok = rng.random(3) < (0.9 if t < 30 else 0.1)
        before = state.statistic.copy()
        steps = det.steps(state, rows, ok)
        assert (state.statistic == before).all()  # steps change nothing
        det.update(state, rows, ok, time=t)
        np.testing.assert_allclose(state.statistic, np.maximum(0.0, before + steps))


def test_shared_evidence_splits_each_statistic_by_co_retrieved_memory() -> None:
    sets, y = _confounded(1)
    det, rule = BernoulliCusum(), ExplainingAway()
    state, shared = scan_episodes(det, rule, sets, y)
    for m in range(6):
        if state.statistic[m] <= 0:
            assert shared.shared[m] == {}  # no excursion, nothing to split
    # by hand for memory 1: its steps since it last left 0, in the episodes that also retrieved memory 0
    state2, total, with0 = det.start(6), 0.0, 0.0
    for t, rows in enumerate(sets):
        r = np.asarray(rows)
        steps = det.steps(state2, r, bool(y[t]))
        det.update(state2, r, bool(y[t]), time=t + 1)
        if 1 in rows:
            i = rows.index(1)
            if state2.statistic[1] <= 0:
                total = with0 = 0.0
            elif steps[i] != 0.0:
                total += steps[i]
                with0 += steps[i] if 0 in rows else 0.0
    assert total == pytest.approx(state.statistic[1])
    assert with0 == pytest.approx(shared.shared[1].get(0, 0.0))


@pytest.mark.parametrize("seed", range(6))
def test_the_broken_memory_is_flagged_and_its_companion_is_not(seed: int) -> None:
    sets, y = _confounded(seed, together=0.8)
    det, rule = BernoulliCusum(), ExplainingAway()
    state, shared = det.start(6), rule.start(6)
    ever = np.zeros(6, dtype=bool)
    for t, rows in enumerate(sets):
        steps = det.steps(state, rows, bool(y[t]))
        det.update(state, rows, bool(y[t]), time=t + 1)
        rule.update(shared, state, rows, steps)
        ever |= rule.flagged(shared, state, det)
    assert state.first_alarm[1] > 300  # its own CUSUM breaks too: it fails with memory 0
    assert ever.tolist() == [True] + [False] * 5
    if state.statistic[1] >= det.threshold:
        assert rule.holding(shared, state, det, 1) == [0]
    assert rule.holding(shared, state, det, 0) == []


def test_memories_never_seen_apart_are_both_flagged() -> None:
    sets, y = _confounded(2, together=1.0)
    det, rule = BernoulliCusum(), ExplainingAway()
    sets = [[0, 1, *r[2:]] if 0 in r else [x for x in r if x != 1] + ([2] if 2 not in r else [3]) for r in sets]
    sets = [list(dict.fromkeys(r)) for r in sets]
    state, shared = scan_episodes(det, rule, sets, y)
    assert rule.flagged(shared, state, det)[:2].tolist() == [True, True]


def test_a_near_tie_holds_a_fresh_alarm_until_hold() -> None:
    sets, y = _confounded(0)
    det = BernoulliCusum()
    plain, held = ExplainingAway(), ExplainingAway(tie=1e6, hold=1e6)
    state, shared = scan_episodes(det, plain, sets, y)
    assert plain.flagged(shared, state, det)[0]
    assert not held.flagged(shared, state, det)[0]  # memory 1 is within the (huge) tie of explaining it
    assert held.holding(shared, state, det, 0) == [1]
    assert ExplainingAway(tie=1e6, hold=0.0).flagged(shared, state, det)[0]  # hold 0: never held


def _diluted_stale() -> tuple[list[str], list[list[int]], np.ndarray]:
    """A stale note (0) that misleads one task, where a useful helper (1) is retrieved with
    it, and is harmless on a more frequent task: its successes there keep its own CUSUM at
    0 while the helper's, which fails wherever it meets the stale note, alarms."""
    ids = ["stale", "helper", "a", "b"]
    before = [[0, 1], [0, 2], [1, 3], [2, 3]] * 40
    cycle = [([0, 1], False)] * 4 + [([0, 2], False)] + [([0, 2], True)] * 8 + [([1, 3], True)] + [([2, 3], True)] * 2
    sets = before + [s for s, _ in cycle * 6]
    y = np.array([True] * len(before) + [ok for _, ok in cycle * 6])
    return ids, sets, y


def test_failures_apart_hold_a_flag_whose_companion_has_no_statistic_left() -> None:
    from memworth.governance import GovernancePolicy
    from memworth.signals.outcome_streams import namespace_streams

    ids, sets, y = _diluted_stale()
    plain = namespace_streams(GovernancePolicy(), ids, sets, y, np.ones(y.size))
    assert plain.state is not None and plain.state.statistic[0] == 0.0  # the stale note explains no one
    assert plain.held == {"helper": ()}  # so the default flags the helper
    policy = GovernancePolicy(change_hold_apart=3)
    held = namespace_streams(policy, ids, sets, y, np.ones(y.size))
    assert held.held == {"helper": ("stale",)}
    counts = Counts(150.0, 30.0, 180)
    flagged = GovernancePolicy().propose("helper", counts, "active", "normal", stream=plain.streams["helper"])
    assert flagged is not None and flagged.action == "re-verify"
    kept = policy.propose("helper", counts, "active", "normal", stream=held.streams["helper"])
    assert kept is not None and kept.action != "re-verify"
    assert kept.numbers["change_explained_by"] == ["stale"]


def test_failing_apart_needs_enough_retrievals_apart_and_a_higher_failure_rate() -> None:
    helper = [(False, {"helper", "stale"})] * 6 + [(True, {"helper"})] * 3
    stale = [(False, {"helper", "stale"})] * 6 + [(False, {"stale"})] * 2 + [(True, {"stale"})]
    assert ExplainingAway(apart=3).failing_apart("helper", helper, {"stale": stale}) == ["stale"]
    assert ExplainingAway().failing_apart("helper", helper, {"stale": stale}) == []  # off by default
    assert ExplainingAway(apart=4).failing_apart("helper", helper, {"stale": stale}) == []  # 3 apart < 4
    fine = [(False, {"helper", "stale"})] * 6 + [(True, {"stale"})] * 3  # the stale note works apart: no
    assert ExplainingAway(apart=3).failing_apart("helper", helper, {"stale": fine}) == []
    rare = [(False, {"helper"})] * 7 + [(False, {"helper", "stale"})] * 2  # with under half its failures: no
    assert ExplainingAway(apart=3).failing_apart("helper", rare, {"stale": stale}) == []


def test_explaining_away_refuses_bad_input() -> None:
    det, rule = BernoulliCusum(), ExplainingAway()
    for bad in (-1, 2.0, True):
        with pytest.raises(ValidationError, match="apart"):
            ExplainingAway(apart=bad).start(2)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="suspect"):
        ExplainingAway(suspect=-1.0).start(2)
    with pytest.raises(ValidationError, match="tie"):
        ExplainingAway(tie=float("nan")).start(2)
    with pytest.raises(ValidationError, match="size"):
        SharedEvidence.empty(-1)
    with pytest.raises(ValidationError, match="shared"):
        rule.update(rule.start(3), det.start(2), [0], np.zeros(1))
    with pytest.raises(ValidationError, match="steps"):
        rule.update(rule.start(2), det.start(2), [0, 1], np.zeros(3))
    with pytest.raises(ValidationError, match="sets"):
        scan_episodes(det, rule, [[0]], np.array([True, False]))
    with pytest.raises(ValidationError, match="size"):
        scan_episodes(det, rule, [[0, 3]], np.array([True]), size=2)
    with pytest.raises(ValidationError, match="memory"):
        rule.explained_by(rule.start(2), det.start(2), 5)


def test_context_check_holds_failures_in_a_context_the_memory_always_failed() -> None:
    from memworth.signals.change_detection import ContextCheck

    det, check = BernoulliCusum(), ContextCheck()
    times = np.arange(1, 81)
    before = ["own", "own", "own", "hard"] * 15  # 60 retrievals: 45 successes, 15 failures in "hard"
    success = np.array([c == "own" for c in before] + [False] * 20)
    # The plain CUSUM alarms: the memory went from 75% to 0% success.
    assert det.scan(success).alarm
    assert check.holds(det, times, before + ["hard"] * 20, success, since=61)
    # The same failures in a context it never saw, or in one where it used to succeed: a break.
    assert not check.holds(det, times, before + ["new"] * 20, success, since=61)
    assert not check.holds(det, times, before + ["own"] * 20, success, since=61)
    # An excursion of successes where it used to succeed adds nothing.
    fine = np.array([c == "own" for c in before] + [True] * 20)
    assert check.statistic(det, times, before + ["own"] * 20, fine, since=61) == 0.0


def test_context_check_weights_outcomes_and_survives_extreme_settings() -> None:
    from memworth.signals.change_detection import ContextCheck

    times = np.arange(1, 61)
    before = ["own"] * 40
    success = np.array([True] * 40 + [False] * 20)
    check = ContextCheck()
    full = check.statistic(BernoulliCusum(), times, before + ["new"] * 20, success, since=41)
    light = np.r_[np.ones(40), np.full(20, 0.2)]
    faint = check.statistic(BernoulliCusum(), times, before + ["new"] * 20, success, since=41, weight=light)
    assert full >= 12 > faint > 0  # confidence-0.2 failures count a fifth
    extreme = BernoulliCusum(odds_ratio=1e-300)
    assert np.isfinite(check.statistic(extreme, times, before + ["new"] * 20, success, since=41))
    assert check.expected(times, before + ["new"] * 20, success, since=41) == pytest.approx(40.5 / 41)  # a new context: the overall rate (Jeffreys)
    assert np.isnan(check.expected(times, before + ["new"] * 20, success, since=100))


def test_context_check_refuses_bad_input() -> None:
    from memworth.signals.change_detection import ContextCheck

    det = BernoulliCusum()
    ok = np.array([True, False])
    with pytest.raises(ValidationError, match="strength"):
        ContextCheck(strength=0.0).statistic(det, np.arange(2), ["a", "b"], ok, since=1)
    with pytest.raises(ValidationError, match="contexts"):
        ContextCheck().statistic(det, np.arange(2), ["a"], ok, since=1)
    with pytest.raises(ValidationError, match="times"):
        ContextCheck().statistic(det, np.arange(3), ["a", "b"], ok, since=1)
    with pytest.raises(ValidationError, match="success"):
        ContextCheck().statistic(det, np.arange(2), ["a", "b"], np.array([1, 0]), since=1)
    with pytest.raises(ValidationError, match="since"):
        ContextCheck().statistic(det, np.arange(2), ["a", "b"], ok, since=1.5)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="contexts"):
        ContextCheck().statistic(det, np.arange(2), None, ok, since=1)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="contexts"):
        ContextCheck().statistic(det, np.arange(2), [["a"], "b"], ok, since=1)
    with pytest.raises(ValidationError, match="weight"):
        ContextCheck().statistic(det, np.arange(2), ["a", "b"], ok, since=1, weight=np.array([1.0, 2.0]))


def test_cusum_state_grows_with_empty_rows_and_refuses_to_shrink() -> None:

    det = BernoulliCusum()
    state = det.start(2)
    det.update(state, [0, 1], [True, False], time=1)
    before = state.observations.copy()
    state.grow(5)
    assert len(state) == 5 and state.observations[:2].tolist() == before.tolist()
    assert state.observations[2:].tolist() == [0.0, 0.0, 0.0] and state.since[2:].tolist() == [-1, -1, -1]
    det.update(state, [4], True, time=2)  # the new rows work like any other
    assert state.observations[4] == 1.0
    with pytest.raises(ValidationError, match="size"):
        state.grow(3)
