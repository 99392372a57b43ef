"""The change e-value divides by the observations its CUSUM read, each counted once.

The CUSUM's ``exp(statistic)`` is at most ``1 +`` the Shiryaev-Roberts sum, which has one
term per change point, i.e. per watched observation, whatever that observation's weight (a
confidence below 1 shrinks a term's mean, not the number of terms). An e-value that divided
by the *weighted* count was too large by up to ``1 / confidence``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from memworth import Counts
from memworth.governance import GovernancePolicy
from memworth.signals.change_detection import BernoulliCusum
from memworth.signals.outcome_streams import NamespaceScan, OutcomeStream


def _stream(n_before: int, n_after: int, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    y = np.r_[np.ones(n_before, dtype=bool), np.zeros(n_after, dtype=bool)]
    return y, np.full(y.size, confidence)


def test_a_reading_counts_each_watched_observation_once_whatever_its_weight() -> None:
    y, w = _stream(60, 20, 0.25)
    reading = BernoulliCusum(min_history=10).scan(y, w)
    assert reading.observations == pytest.approx(0.25 * 80)
    # watched once the weighted history reached 10, i.e. from the 41st observation on
    assert reading.watched == 80 - 40
    full = BernoulliCusum(min_history=10).scan(y, np.ones(y.size))
    assert full.watched == 80 - 10 and full.observations == 80


def test_the_policy_e_value_divides_by_the_unweighted_count() -> None:
    y, w = _stream(60, 20, 0.25)
    policy = GovernancePolicy()
    reading = policy.detector().scan(y, w)
    e = float(policy.change_evalues([reading.statistic], [reading.watched])[0])
    assert e == pytest.approx(math.exp(reading.statistic) / reading.watched, rel=1e-12)
    # the weighted count past the watch start (20 - 10 = 10) would have made it 4 times larger
    assert e < math.exp(reading.statistic) / (reading.observations - 10) / 3.9
    stream = OutcomeStream(y, w, None, np.arange(1, y.size + 1))
    counts = Counts(success=15.0, failure=5.0, n=80)
    proposal = policy.propose("m", counts, "active", "normal", stream=stream)
    assert proposal is not None and proposal.numbers["change_evalue"] == pytest.approx(e, rel=1e-12)


def test_a_memory_not_yet_watched_has_no_e_value_and_a_reset_restarts_the_count() -> None:
    det = BernoulliCusum(min_history=10)
    state = det.start(2)
    for ok in [True] * 9:
        det.update(state, [0, 1], ok)
    assert state.watched.tolist() == [0.0, 0.0]
    assert GovernancePolicy().change_evalues([5.0, 5.0], state.watched).tolist() == [0.0, 0.0]
    for ok in [True] * 11 + [False] * 4:
        det.update(state, [0, 1], ok)
    assert state.watched.tolist() == [14.0, 14.0]  # the 11th to the 24th observation each took a step
    state.reset([0])
    assert state.watched.tolist() == [0.0, 14.0] and state.observations[0] == 24
    det.update(state, [0], False)
    assert state.watched[0] == 1.0
    state.grow(3)
    assert state.watched.tolist() == [1.0, 14.0, 0.0]
    copy = state.copy()
    copy.watched[0] = 7.0
    assert state.watched[0] == 1.0


def test_a_namespace_scan_agrees_with_a_scan_of_each_stream() -> None:
    rng = np.random.default_rng(3)
    sets = [[f"m{j}" for j in rng.permutation(6)[:3]] for _ in range(300)]
    success = rng.random(300) < np.where(np.arange(300) < 150, 0.7, 0.3)
    confidence = rng.choice([1.0, 0.5, 0.2], size=300)
    scan = NamespaceScan(GovernancePolicy())
    scan.advance(sets, success, confidence)
    streams = scan.read().streams
    det = GovernancePolicy().detector()
    for mid, stream in streams.items():
        assert stream.reading is not None
        alone = det.scan(stream.success, stream.weight, stream.reference, stream.episode)
        assert stream.reading.watched == alone.watched, mid
        assert alone.watched < len(stream) and alone.watched > alone.observations - det.min_history


def test_a_snapshot_saved_before_the_count_is_not_resumed() -> None:
    rng = np.random.default_rng(4)
    sets = [[f"m{j}" for j in rng.permutation(5)[:2]] for _ in range(80)]
    scan = NamespaceScan(GovernancePolicy())
    scan.advance(sets, rng.random(80) < 0.6, np.full(80, 0.5))
    snap = scan.snapshot()
    back = NamespaceScan.resume(GovernancePolicy(), scan.columns, dict(snap), scan.reference_column().copy())
    np.testing.assert_array_equal(back.state.watched, scan.state.watched)
    del snap["watched"]
    with pytest.raises(ValueError, match="watched"):
        NamespaceScan.resume(GovernancePolicy(), scan.columns, snap, scan.reference_column().copy())


def test_a_score_state_saved_before_the_count_is_read_again(tmp_path) -> None:
    pytest.importorskip("duckdb")
    from memworth.logs import ScoreSettings, score_files
    from tests.test_logs_detectors import assert_same, in_state, parts

    files = parts(tmp_path)  # half the episodes have confidence 0.5
    settings = ScoreSettings()
    whole = score_files(files, settings)
    state = tmp_path / "state.duckdb"
    score_files(files[:2], settings, state=state)
    in_state(  # make it a state file of the release before: no count column, the old settings text
        state,
        "ALTER TABLE scan_memories DROP COLUMN watched",
        "UPDATE scans SET detector = replace(detector, ' counts=watched', '')",
    )
    run = score_files(files, settings, state=state)
    assert_same(run.table, whole.table)
    assert in_state(state, "SELECT count(*) FROM scan_memories WHERE watched IS NULL") == (0,)


def test_a_rule_that_holds_by_failures_apart_is_refused_where_it_cannot_read_the_episodes() -> None:
    from memworth.errors import ValidationError
    from memworth.signals.change_detection import ExplainingAway, scan_episodes

    det = BernoulliCusum()
    sets = [[0, 1]] * 40
    state, shared = scan_episodes(det, ExplainingAway(), sets, np.ones(40, dtype=bool))
    assert not ExplainingAway().flagged(shared, state, det).any()
    with pytest.raises(ValidationError, match="apart"):
        ExplainingAway(apart=3).flagged(shared, state, det)


def test_a_score_state_of_this_version_is_refused_by_a_reader_of_an_older_one(tmp_path, monkeypatch) -> None:
    pytest.importorskip("duckdb")
    from memworth.errors import ValidationError
    from memworth.logs import ScoreSettings, score_files
    from memworth.logs import state as state_module
    from tests.test_logs_detectors import parts

    files = parts(tmp_path)
    kept = tmp_path / "state.duckdb"
    score_files(files[:1], ScoreSettings(), state=kept)
    monkeypatch.setattr(state_module, "VERSION", 3)  # the release before the watched count
    with pytest.raises(ValidationError, match="newer memworth"):
        score_files(files, ScoreSettings(), state=kept)
