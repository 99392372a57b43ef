"""The fused CUSUM step equals the formula it replaced, bit for bit.

``BernoulliCusum`` advances a memory's statistic with fewer NumPy calls than the formula
written out (one branch of the log-likelihood ratio, the three logits of the baseline in
one call, the outcome and weight kept scalars for one episode). Every number the scan,
the live statistics, replay and the experiments compute goes through it, so it must give
the same doubles: the formula is kept here as it stood, and each test compares bytes.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from memworth.signals import change_detection as cd
from memworth.signals.change_detection import BernoulliCusum, CusumState

# ---- the formula as it stood before the fused step ----


def _logit(p: np.ndarray) -> np.ndarray:
    return np.log(p) - np.log1p(-p)


def _log_sigmoid(z: np.ndarray) -> np.ndarray:
    return -np.logaddexp(0.0, -z)


def _formula_ratio(success: np.ndarray, p0: np.ndarray, shift: float | np.ndarray) -> np.ndarray:
    z0 = _logit(np.clip(p0, 1e-12, 1 - 1e-12))
    return np.asarray(
        np.where(success, _log_sigmoid(z0 + shift) - _log_sigmoid(z0), _log_sigmoid(-z0 - shift) - _log_sigmoid(-z0))
    )


def _formula_baseline(state: CusumState, r: np.ndarray, ref: np.ndarray | None, a: float, k: float) -> np.ndarray:
    n = state.observations[r]
    if k > 0:
        q = 0.5 if ref is None else ref
        own = _logit((state.successes[r] + a + k * q) / (n + 2 * a + k))
        if ref is None:
            return np.asarray(1.0 / (1.0 + np.exp(-own)))
        lift = own - _logit((state.expected[r] + a + k * q) / (n + 2 * a + k))
        return np.asarray(1.0 / (1.0 + np.exp(-(_logit(ref) + lift))))
    own = _logit((state.successes[r] + a) / (n + 2 * a))
    if ref is None:
        return np.asarray(1.0 / (1.0 + np.exp(-own)))
    lift = own - _logit((state.expected[r] + a) / (n + 2 * a))
    return np.asarray(1.0 / (1.0 + np.exp(-(_logit(ref) + lift))))


def _formula_update(
    det: BernoulliCusum, state: CusumState, r: np.ndarray, y: np.ndarray, w: np.ndarray, ref: np.ndarray | None, time: int
) -> np.ndarray:
    """One observation of each of rows ``r`` (arrays, one per row), as the formula moved and applied it."""
    _ratio, h, n0, a = det._check()
    k = float(det.history_prior)
    start = max(n0 - k, 0.0)
    watched = state.observations[r] >= start
    p0 = _formula_baseline(state, r, ref, a, k)
    shifts = np.log(np.array(det.odds_ratios, dtype=float)) if len(det.odds_ratios) > 1 else None
    parts = mixed = None
    if shifts is None:
        shift = float(np.log(det.odds_ratios[0])) if det.odds_ratios else float(np.log(det.odds_ratio))
        step = np.asarray(np.where(watched, w * _formula_ratio(y, p0, shift), 0.0))
    else:
        _shifts, log_weights = cd.mixture_of(det.odds_ratios, det.weights)
        llr = _formula_ratio(y[:, None], p0[:, None], shifts[None, :])
        assert state.components is not None
        parts = np.maximum(0.0, state.components[r] + np.where(watched, w, 0.0)[:, None] * llr)
        mixed = cd._mixed(parts, log_weights)
        step = np.asarray(mixed - state.statistic[r])
    before = state.statistic[r]
    if parts is None or mixed is None:
        after = np.maximum(0.0, before + step)
    else:
        assert state.components is not None
        state.components[r] = parts
        after = mixed
    state.statistic[r] = after
    started = (before <= 0) & (after > 0)
    state.since[r[started]] = time
    state.since[r[after <= 0]] = -1
    alarm = after >= h
    fresh = alarm & (state.first_alarm[r] < 0)
    state.first_alarm[r[fresh]] = time
    state.watched[r] += state.observations[r] >= start
    state.observations[r] += w
    state.successes[r] += w * y
    state.expected[r] += w * (0.5 if ref is None else ref)
    return step


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def _same_state(a: CusumState, b: CusumState) -> bool:
    names = ("statistic", "observations", "successes", "expected", "since", "first_alarm", "watched")
    same = all(_same(getattr(a, n), getattr(b, n)) for n in names)
    if a.components is None or b.components is None:
        return same and a.components is None and b.components is None
    return same and _same(a.components, b.components)


# ---- the pieces, over many values at once ----


def test_the_step_ratio_is_the_formulas_for_every_outcome_and_extreme_baseline() -> None:
    rng = np.random.default_rng(17)
    size = 200_000
    p0 = np.concatenate(
        [
            rng.random(size),
            rng.random(size) * 1e-9,
            1.0 - rng.random(size) * 1e-9,
            np.array([0.0, 1.0, 1e-12, 1 - 1e-12, 1e-300, 0.5, 20 / 21, 1 / 21, np.nextafter(1.0, 0.0)]),
        ]
    )
    y = rng.random(p0.size) < 0.5
    for shift in (float(np.log(0.05)), float(np.log(0.5)), float(np.log(1e-6)), float(np.log(0.999))):
        want = _formula_ratio(y, p0, shift)
        assert _same(cd._step_ratio(y, p0.copy(), shift), want)
        for outcome in (True, False):  # one outcome for all: one branch
            assert _same(cd._step_ratio(outcome, p0.copy(), shift), _formula_ratio(np.full(p0.size, outcome), p0, shift))
        # one element at a time, as one episode's handful of memories meets it
        for i in rng.choice(p0.size, 300, replace=False).tolist():
            one = cd._step_ratio(bool(y[i]), p0[i : i + 1].copy(), shift)
            assert _same(one, want[i : i + 1])


def test_the_baseline_is_the_formulas_with_and_without_a_reference_and_a_history_prior() -> None:
    rng = np.random.default_rng(3)
    size = 50_000
    state = CusumState.empty(size)
    state.observations[:] = np.floor(rng.random(size) * 300) * rng.choice([1.0, 0.5, 0.25, 0.9], size)
    state.successes[:] = state.observations * rng.random(size)
    state.expected[:] = state.observations * rng.random(size)
    state.observations[:7] = 0.0
    state.successes[:7] = 0.0
    state.expected[:7] = 0.0
    r = rng.permutation(size).astype(np.int64)
    ref = rng.uniform(1e-6, 1 - 1e-6, size)
    for a in (0.5, 1.0, 1e-3):
        for k in (0.0, 4.0, 0.3):
            for rates in (None, ref):
                want = _formula_baseline(state, r, rates, a, k)
                got = cd._baseline_of(state.observations[r], state.successes[r], state.expected[r], rates, a, k)
                assert _same(got, want)
            one = float(ref[0])  # one reference rate for every row, as one episode gives it
            want = _formula_baseline(state, r[:5], np.full(5, one), a, k)
            got = cd._baseline_of(state.observations[r[:5]], state.successes[r[:5]], state.expected[r[:5]], one, a, k)
            assert _same(got, want)


# ---- whole runs: advance, advance_many and update against the formula ----

_detectors = st.builds(
    BernoulliCusum,
    odds_ratio=st.sampled_from([0.05, 0.2, 0.5]),
    threshold=st.sampled_from([0.5, 2.0, 12.0]),
    min_history=st.sampled_from([0.0, 3.0, 10.0]),
    prior=st.sampled_from([0.5, 1.0]),
    odds_ratios=st.sampled_from([(), (0.05, 0.25, 0.5), (0.1, 0.6)]),
    history_prior=st.sampled_from([0.0, 2.0, 12.0]),
)

_episodes = st.lists(
    st.tuples(
        st.lists(st.integers(0, 5), min_size=0, max_size=6, unique=True),
        st.booleans(),
        st.sampled_from([1.0, 0.0, 0.5, 0.3, 1e-9]),
        st.one_of(st.floats(1e-6, 1 - 1e-6), st.sampled_from([0.5, 0.9, 0.05])),
    ),
    min_size=1,
    max_size=60,
)


@settings(max_examples=150, deadline=None)
@given(det=_detectors, episodes=_episodes, with_reference=st.booleans(), fail_after=st.integers(0, 60))
def test_advance_advance_many_and_update_end_where_the_formula_ends(
    det: BernoulliCusum, episodes: list[tuple[list[int], bool, float, float]], with_reference: bool, fail_after: int
) -> None:
    size = 6
    formula, one, many, updated = (det.start(size) for _ in range(4))
    ys, ws, refs, rows, times = [], [], [], [], []
    for t, (members, ok, w, ref) in enumerate(episodes, start=1):
        ok = ok and t < fail_after  # a break: every outcome fails from here on
        rate = ref if with_reference else None
        if not members:
            continue
        r = np.array(members, dtype=np.int64)
        k = r.size
        want = _formula_update(
            det, formula, r, np.full(k, ok), np.full(k, w), None if rate is None else np.full(k, rate), t
        )
        assert _same(det.advance(one, r, ok, w, rate, t), want)
        det.update(updated, r, ok, weight=w, reference=rate, time=t)
        assert _same_state(one, formula)
        assert _same_state(updated, formula)
        rows.extend(members)
        ys.extend([ok] * k)
        ws.extend([w] * k)
        refs.extend([0.5 if rate is None else rate] * k)
        times.extend([t] * k)
    if with_reference and rows:  # advance_many always has a reference rate
        det.advance_many(
            many,
            np.array(rows, dtype=np.int64),
            np.array(ys, dtype=bool),
            np.array(ws),
            np.array(refs),
            np.array(times, dtype=np.int64),
        )
        assert _same_state(many, formula)


def test_advance_with_a_numpy_float32_reference_is_advance_with_its_float() -> None:
    # the reference is spread as a Python float (float64), whatever scalar type the caller
    # passes: a float32 kept as it is would narrow ``weight * reference`` and move every
    # later statistic
    det = BernoulliCusum(min_history=0)
    narrow, wide = CusumState.empty(1), CusumState.empty(1)
    for t in range(1, 31):
        det.advance(narrow, np.array([0]), t < 20, 0.123, np.float32(0.3), t)
        det.advance(wide, np.array([0]), t < 20, 0.123, float(np.float32(0.3)), t)
    for name in ("expected", "statistic", "observations", "successes"):
        assert getattr(narrow, name).tobytes() == getattr(wide, name).tobytes(), name


def test_run_with_one_baseline_for_every_observation_spreads_it() -> None:
    # a scalar baseline broadcasts over the outcomes, as the formula did
    y = np.array([True, False, False, False, True, False])
    det = BernoulliCusum()
    assert det.run(y, 1.0, 0.8) == det.run(y, np.ones(6), 0.8) == det.run(y, np.ones(6), np.full(6, 0.8))
