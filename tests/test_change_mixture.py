"""The mixture change detector (several alternatives in one e-detector) and the history prior:
its false alarms stay within the stated bound, it catches a moderate fall the single
alternative misses, and its state round-trips through checkpoints and ``score --state``."""

from __future__ import annotations

import numpy as np
import pytest

from memworth import HashingEncoder, MemoryStore
from memworth.errors import ValidationError
from memworth.governance import GovernancePolicy
from memworth.signals.change_detection import BernoulliCusum, CusumState, ExplainingAway, mixture_of, scan_episodes
from memworth.store import checkpoint
from tests.store.test_following import _fed_store

MIX = BernoulliCusum(odds_ratios=(0.05, 0.25, 0.5))
MIX_POLICY = GovernancePolicy(change_odds_ratios=(0.05, 0.25, 0.5), change_history_prior=5.0)


def test_the_mixture_is_an_e_detector_below_its_shiryaev_roberts_statistic() -> None:
    # The proof in the module docstring: with the pre-change rate known, exp(statistic) is at
    # most 1 + R_n, R_n = sum over change points j and alternatives k of weight_k x the likelihood ratio
    # since j, and R_n has mean n under no change. Both are checked: the first stream by stream
    # (a detector that summed unnormalised weights, or took no floor, would break it), the
    # second by simulation.
    rng = np.random.default_rng(0)
    n, streams, p = 20, 4000, 0.6
    shifts, log_w = mixture_of((0.05, 0.25, 0.5), ())
    z0 = np.log(p / (1 - p))
    up = -np.logaddexp(0.0, -(z0 + shifts)) + np.logaddexp(0.0, -z0)  # llr of a success, per alternative
    down = -np.logaddexp(0.0, z0 + shifts) + np.logaddexp(0.0, z0)  # of a failure
    y = rng.random((streams, n)) < p
    sr = np.empty(streams)
    for i, row in enumerate(y):
        e = np.exp(MIX.run(row, np.ones(n), np.full(n, p)))
        llr = np.where(row[:, None], up[None, :], down[None, :])  # n x alternatives
        since = np.cumsum(llr[::-1], axis=0)[::-1]  # log likelihood ratio of the observations from j on
        sr[i] = float(np.sum(np.exp(since + log_w[None, :])))
        assert e <= (1 + sr[i]) * (1 + 1e-9)
    assert abs(sr.mean() - n) <= 4 * sr.std() / np.sqrt(streams)


def test_false_alarms_under_no_change_stay_within_the_bound() -> None:
    # Optional stopping on the Shiryaev-Roberts statistic: P(alarm within n observations) <= (n + 1) / exp(h).
    # Here the baseline is learned from the memory's own history (as in use) after a long one.
    rng = np.random.default_rng(1)
    h, n, history, streams = 8.0, 300, 200, 300
    det = BernoulliCusum(threshold=h, min_history=history, odds_ratios=(0.05, 0.25, 0.5))
    bound = (n + 1) / np.exp(h)  # about 0.1
    p = rng.uniform(0.3, 0.8, streams)  # each memory's own rate, against a reference of 0.5
    state, rows = det.start(streams), np.arange(streams)
    for t in range(history + n):
        det.update(state, rows, rng.random(streams) < p, reference=0.5, time=t)
    assert state.observations[0] == history + n
    assert np.mean(state.first_alarm >= 0) <= bound


def test_a_moderate_fall_is_caught_by_the_mixture_and_missed_by_the_single_alternative() -> None:
    rng = np.random.default_rng(2)
    y = np.r_[rng.random(300) < 0.7, rng.random(300) < 0.4]  # odds about 3.5 times lower
    single, mixed = BernoulliCusum().scan(y), MIX.scan(y)
    assert not single.alarm
    assert mixed.alarm and mixed.first_alarm is not None and mixed.first_alarm >= 300
    assert mixed.change_point is not None and abs(mixed.change_point - 300) < 60
    # a sharp fall is still caught, a few observations later than the single 0.05 alternative
    sharp = np.r_[np.ones(60, dtype=bool), np.zeros(20, dtype=bool)]
    a, b = BernoulliCusum().scan(sharp), MIX.scan(sharp)
    assert a.first_alarm is not None and b.first_alarm is not None and 0 <= b.first_alarm - a.first_alarm <= 2


def test_a_reading_names_the_size_of_fall_its_evidence_points_to() -> None:
    # The probe test of a quarantined memory takes its fallen rate from the alarm
    # (store.decisions.flag_rates): a mixture's must be the alternative carrying the evidence,
    # not the detector's single odds_ratio.
    rng = np.random.default_rng(5)
    before = rng.random(200) < 0.8
    sharp = MIX.scan(np.concatenate([before, np.zeros(15, dtype=bool)]), reference=np.full(215, 0.5))
    moderate = MIX.scan(np.concatenate([before, rng.random(400) < 0.45]), reference=np.full(600, 0.5))
    assert sharp.alarm and sharp.odds_ratio == pytest.approx(0.05)
    assert moderate.odds_ratio is not None and moderate.odds_ratio > 0.05
    assert BernoulliCusum().scan(np.zeros(30, dtype=bool)).odds_ratio is None  # one alternative: the detector's own
    assert MIX.scan(np.ones(30, dtype=bool)).odds_ratio is None  # no evidence of a fall

    from memworth.store.decisions import flag_rates

    numbers = {"change_statistic": 13.0, "change_threshold": 12.0, "change_baseline": 0.8}
    assert flag_rates({**numbers, "change_odds_ratio": moderate.odds_ratio}, 0.6, 0.05)[1] > flag_rates(
        numbers, 0.6, 0.05
    )[1]


def test_one_alternative_given_as_a_mixture_is_the_plain_cusum_bit_for_bit() -> None:
    rng = np.random.default_rng(3)
    sets = [rng.choice(12, size=3, replace=False) for _ in range(400)]
    success = rng.random(400) < np.where(np.arange(400) < 200, 0.7, 0.3)
    ref = np.clip(rng.uniform(0.3, 0.7, 400), 0.01, 0.99)
    a, _ = scan_episodes(BernoulliCusum(), ExplainingAway(), sets, success, reference=ref)
    b, _ = scan_episodes(BernoulliCusum(odds_ratio=0.5, odds_ratios=(0.05,)), ExplainingAway(), sets, success, reference=ref)
    assert b.components is None
    for name in ("statistic", "observations", "successes", "expected", "since", "first_alarm"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))


def test_the_mixture_statistic_is_the_log_of_its_weighted_components() -> None:
    rng = np.random.default_rng(4)
    det = BernoulliCusum(odds_ratios=(0.05, 0.5), weights=(3.0, 1.0))
    sets = [rng.choice(6, size=2, replace=False) for _ in range(300)]
    success = rng.random(300) < np.where(np.arange(300) < 150, 0.8, 0.4)
    state, _ = scan_episodes(det, ExplainingAway(), sets, success)
    assert state.components is not None and state.components.shape == (6, 2)
    want = np.log(0.75 * np.exp(state.components[:, 0]) + 0.25 * np.exp(state.components[:, 1]))
    np.testing.assert_allclose(state.statistic, np.where(state.components.max(axis=1) > 0, want, 0.0), atol=1e-12)
    assert np.all(state.statistic >= state.components.max(axis=1) + np.log(0.25) - 1e-12)
    assert np.all((state.statistic > 0) == (state.since >= 0))


def test_the_history_prior_watches_a_memory_with_a_short_history() -> None:
    y = np.r_[np.ones(5, dtype=bool), np.zeros(30, dtype=bool)]
    ref = np.full(y.size, 0.6)
    late = BernoulliCusum(min_history=10).scan(y, reference=ref)
    early = BernoulliCusum(min_history=10, history_prior=5).scan(y, reference=ref)
    assert early.first_alarm is not None and (late.first_alarm is None or early.first_alarm < late.first_alarm)
    assert early.watched == y.size - 5 and late.watched == y.size - 10
    assert BernoulliCusum(min_history=10, history_prior=20).scan(y).watched == y.size  # watched from the first
    # with no history the baseline is the reference itself
    det = BernoulliCusum(history_prior=5)
    assert det.baseline(det.start(1), np.array([0]), np.array([0.3]))[0] == pytest.approx(0.3)


def test_a_state_of_other_alternatives_is_refused_and_grows_with_its_components() -> None:
    state = MIX.start(2)
    state.grow(5)
    assert state.components is not None and state.components.shape == (5, 3) and state.alternatives == 3
    MIX.update(state, [4], [False], time=1)
    copy = state.copy()
    copy.reset([4])
    assert state.components is not copy.components and copy.components is not None and not copy.components.any()
    with pytest.raises(ValidationError) as err:
        MIX.update(CusumState.empty(3), [0], [True])
    assert err.value.field == "state"
    with pytest.raises(ValidationError) as err2:
        mixture_of((0.05, 0.5), (1.0, -1.0))
    assert err2.value.field == "weights"


def _mixed_store() -> MemoryStore:
    return _fed_store(MIX_POLICY)


def test_a_checkpoint_keeps_the_mixture_state() -> None:
    store = _mixed_store()
    store.outcome_streams()
    followed = store._followed["default"]
    assert followed.scan is not None and followed.scan.state.components is not None
    data = checkpoint.encode("default", followed)
    back = checkpoint.decode("default", data, store.policy)
    assert back.scan is not None
    np.testing.assert_array_equal(back.scan.state.components, followed.scan.state.components)  # type: ignore[arg-type]
    np.testing.assert_array_equal(back.scan.state.statistic, followed.scan.state.statistic)
    assert max(s.reading.statistic for s in back.scan.read().streams.values() if s.reading) > 0
    plain = checkpoint.decode("default", data, GovernancePolicy())
    assert plain.scan is None  # the single-alternative detector runs again over the saved columns


def test_a_snapshot_without_components_is_not_resumed_by_a_mixture() -> None:
    from memworth.signals.outcome_streams import NamespaceScan

    store = _mixed_store()
    store.outcome_streams()
    scan = store._followed["default"].scan
    assert scan is not None
    snap = scan.snapshot()
    del snap["components"]
    with pytest.raises(ValueError, match="alternative"):
        NamespaceScan.resume(MIX_POLICY, scan.columns, snap, scan.reference_column().copy())


def test_score_state_keeps_the_mixture_state(tmp_path) -> None:
    pytest.importorskip("duckdb")
    from memworth.logs import ScoreSettings, score_files
    from tests.test_logs_detectors import assert_same, in_state, parts

    files = parts(tmp_path)
    settings = ScoreSettings(policy=MIX_POLICY)
    whole = score_files(files, settings)
    assert any(r["change_alarm"] for r in whole.table.to_pylist())
    state = tmp_path / "state.duckdb"
    for i in range(len(files)):
        run = score_files(files[: i + 1], settings, state=state)
    assert_same(run.table, whole.table)
    rows = in_state(state, "SELECT count(*), count(DISTINCT alternative) FROM scan_components")
    assert isinstance(rows, tuple) and rows[1] == 3 and rows[0] > 0


def test_the_mixture_settings_round_trip_through_json_and_a_kept_store(tmp_path) -> None:
    import json

    back = GovernancePolicy.from_settings(json.loads(json.dumps(MIX_POLICY.settings())))
    assert back == MIX_POLICY and back.change.odds_ratios == (0.05, 0.25, 0.5)
    url = f"sqlite:///{tmp_path / 'kept.db'}"
    with MemoryStore.open(url, encoder=HashingEncoder(), policy=MIX_POLICY):
        pass
    with MemoryStore.open(url, encoder=HashingEncoder()) as store:  # the kept policy, read back from JSON
        assert store.policy == MIX_POLICY and store.policy.detector().alternatives == 3


def test_weights_near_the_float_limit_weigh_as_their_ratio() -> None:
    """Each weight is finite, so the settings accept them; their sum overflowed to inf, every
    log weight became -inf and the mixture read 0 forever (a detector that never alarms)."""
    big = BernoulliCusum(odds_ratios=(0.05, 0.25, 0.5), weights=(1e308, 1e308, 1e308))
    y = np.r_[np.ones(60, dtype=bool), np.zeros(30, dtype=bool)]
    assert big.scan(y) == MIX.scan(y) and MIX.scan(y).alarm
    _shifts, log_w = mixture_of((0.05, 0.5), (1e308, 3e307))
    np.testing.assert_allclose(np.exp(log_w), [10 / 13, 3 / 13])


@pytest.mark.parametrize(
    "detector", [BernoulliCusum(), BernoulliCusum(history_prior=5.0, min_history=3.0), MIX], ids=["plain", "prior", "mix"]
)
def test_advance_many_over_distinct_memories_ends_where_one_advance_per_observation_does(
    detector: BernoulliCusum,
) -> None:
    """A batch that names no memory twice (a group commit's few outcomes) is advanced in one
    step: the same steps, statistics and state, bit for bit, as one :meth:`advance` per
    observation in log order, and as a batch with repeats (the loop over repeats) gives."""
    rng = np.random.default_rng(7)
    size = 40
    one, many = detector.start(size), detector.start(size)
    for t in range(1, 400):
        rows = rng.choice(size, size=int(rng.integers(1, 9)), replace=False).astype(np.int64)
        y = rng.random(rows.size) < (0.3 if t > 250 else 0.8)
        w = rng.uniform(0.2, 1.0, rows.size)
        ref = rng.uniform(0.4, 0.9, rows.size)
        time = np.full(rows.size, t, dtype=np.int64)
        want_steps = []
        want_after = []
        for i in range(rows.size):
            want_steps.append(detector.advance(one, rows[i : i + 1], bool(y[i]), float(w[i]), float(ref[i]), t)[0])
            want_after.append(one.statistic[rows[i]])
        steps, after = detector.advance_many(many, rows, y, w, ref, time)
        assert steps.tolist() == want_steps and after.tolist() == want_after
    for column in ("statistic", "since", "first_alarm", "observations", "successes", "expected", "watched"):
        np.testing.assert_array_equal(getattr(one, column), getattr(many, column), column)
    if one.components is not None:
        np.testing.assert_array_equal(one.components, many.components)
    assert np.any(one.first_alarm >= 0)  # the fall was seen: the alarm path ran too
