"""The frozen baseline (``BernoulliCusum(frozen_baseline=True)``, ``change_frozen_baseline``):
the pre-change rate is learned from the observations before the current excursion only.

It catches a fall that the excursion's own observations would otherwise hide (a memory that
fails in one context and still succeeds in another); off, every number is as before; the
store's live statistics equal a scan of its log with it on; a state saved without it loads.
"""

from __future__ import annotations

import numpy as np
import pytest

from memworth import HashingEncoder, MemoryStore, Sidecar
from memworth.errors import ValidationError
from memworth.governance import GovernancePolicy
from memworth.signals.change_detection import BernoulliCusum, CusumState
from memworth.signals.outcome_streams import NamespaceScan, namespace_streams
from memworth.store import checkpoint
from tests.store.test_following import IDS, _fed_store, _feed

FROZEN_POLICY = GovernancePolicy(change_frozen_baseline=True)


def _mixed_fall(seed: int) -> np.ndarray:
    """20 successes (a smoothed rate of 0.98), then 100 retrievals that fail in one context
    (half of them, at random) and succeed in the other: a fall from about 0.99 to 0.5."""
    rng = np.random.default_rng(seed)
    return np.r_[np.ones(20, dtype=bool), rng.random(100) < 0.5]


@pytest.mark.parametrize("seed", range(4))
def test_a_fall_in_a_mix_of_contexts_is_caught_with_a_frozen_baseline_only(seed: int) -> None:
    y = _mixed_fall(seed)
    learning = BernoulliCusum().scan(y)
    frozen = BernoulliCusum(frozen_baseline=True).scan(y)
    # Learning from every observation, the successes of the other context pull the baseline
    # down with the failures (about 0.55 after the 100), and bring the statistic back to 0.
    assert not learning.alarm and learning.baseline < 0.6
    # Frozen at the excursion's start, the baseline stays at the memory's rate before it.
    assert frozen.alarm and frozen.first_alarm is not None and frozen.first_alarm < 40
    assert frozen.change_point is not None and 20 <= frozen.change_point < frozen.first_alarm
    assert frozen.baseline > 0.95


def test_the_baseline_learns_again_once_the_statistic_is_back_at_0() -> None:
    det = BernoulliCusum(frozen_baseline=True, min_history=5)
    state = det.start(1)
    row = np.array([0])
    for t in range(20):
        det.update(state, row, [True], time=t)
    before = det.baseline(state, row)[0]
    det.update(state, row, [False], time=20)  # an excursion starts: the baseline stays
    assert state.statistic[0] > 0 and state.since[0] == 20
    assert det.baseline(state, row)[0] == before
    t = 21
    while state.statistic[0] > 0:  # successes end it
        det.update(state, row, [True], time=t)
        t += 1
    assert state.frozen is not None
    np.testing.assert_array_equal(state.frozen[0], [state.observations[0], state.successes[0], state.expected[0]])
    plain = BernoulliCusum(min_history=5)  # at 0 it reads the live counts, as the plain detector
    assert det.baseline(state, row)[0] == plain.baseline(state, row)[0] < before


def test_with_the_option_off_the_detector_and_its_state_are_as_before() -> None:
    rng = np.random.default_rng(0)
    plain, off = BernoulliCusum(), BernoulliCusum(frozen_baseline=False)
    assert repr(plain) == repr(off) and "frozen" not in repr(off)  # the logs engine names a scan by it
    a, b = plain.start(5), off.start(5)
    assert a.frozen is None and b.frozen is None
    for t in range(300):
        rows = np.sort(rng.choice(5, size=2, replace=False))
        ok = bool(rng.random() < (0.9 if t < 150 else 0.3))
        plain.advance(a, rows, ok, 1.0, 0.7, t)
        off.advance(b, rows, ok, 1.0, 0.7, t)
    for name in ("statistic", "observations", "successes", "expected", "since", "first_alarm", "watched"):
        assert getattr(a, name).tobytes() == getattr(b, name).tobytes(), name
    assert b.frozen is None


def test_a_frozen_baseline_whose_statistic_never_leaves_0_is_the_plain_detector_bit_for_bit() -> None:
    # every success: the statistic stays at 0, so the frozen counts are always the live ones
    y = np.ones(200, dtype=bool)
    ref = np.linspace(0.3, 0.8, 200)
    a = BernoulliCusum(min_history=3).scan(y, reference=ref)
    b = BernoulliCusum(min_history=3, frozen_baseline=True).scan(y, reference=ref)
    assert a == b


def test_frozen_baseline_must_be_a_bool() -> None:
    with pytest.raises(ValidationError) as err:
        BernoulliCusum(frozen_baseline="yes").start(1)  # type: ignore[arg-type]
    assert err.value.field == "frozen_baseline"
    with pytest.raises(ValidationError) as err2:
        GovernancePolicy(change_frozen_baseline=1)
    assert "frozen_baseline" in err2.value.field


def test_a_mixture_freezes_one_baseline_over_its_one_excursion() -> None:
    det = BernoulliCusum(odds_ratios=(0.05, 0.25, 0.5), frozen_baseline=True)
    y = _mixed_fall(1)
    reading = det.scan(y)
    assert reading.alarm and reading.baseline > 0.95
    assert not BernoulliCusum(odds_ratios=(0.05, 0.25, 0.5)).scan(y).alarm


def test_grow_copy_and_reset_keep_the_counts_at_the_excursions_start() -> None:
    det = BernoulliCusum(frozen_baseline=True, min_history=2)
    state = det.start(2)
    for t in range(10):
        det.update(state, [0, 1], [True, True], time=t)
    det.update(state, [0, 1], [False, False], time=10)
    assert state.frozen is not None
    held = state.frozen.copy()
    assert np.all(held[:, 0] == 10)  # the counts before the excursion's first observation
    twin = state.copy()
    assert twin.frozen is not None and twin.frozen is not state.frozen
    state.grow(3)
    np.testing.assert_array_equal(state.frozen[:2], held)
    np.testing.assert_array_equal(state.frozen[2], [0.0, 0.0, 0.0])
    state.reset([0])
    np.testing.assert_array_equal(state.frozen[0], [11.0, 10.0, state.expected[0]])
    state.reset([1], forget_history=True)
    np.testing.assert_array_equal(state.frozen[1], [0.0, 0.0, 0.0])


def _stale_and_companion_episodes() -> list[tuple[list[str], bool]]:
    # A stale note (m0) that misleads one task, where a useful one (m1) is retrieved with it,
    # and is harmless on a more frequent task (the world of the failures-apart test).
    before = [["m0", "m1"], ["m0", "m2"], ["m1", "m3"], ["m2", "m3"]] * 40
    cycle = [(["m0", "m1"], False)] * 4 + [(["m0", "m2"], False)] + [(["m0", "m2"], True)] * 8
    cycle += [(["m1", "m3"], True)] + [(["m2", "m3"], True)] * 2
    return [(s, True) for s in before] + cycle * 6


def test_the_store_and_a_scan_of_its_log_agree_with_a_frozen_baseline(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(checkpoint, "CHECKPOINT_EVERY", 1)  # govern() saves one whenever anything is new
    monkeypatch.setattr(checkpoint, "CHECKPOINT_SHARE", 0.0)
    episodes = _stale_and_companion_episodes()
    url = f"sqlite:///{tmp_path / 'frozen.db'}"
    for part in (episodes[:200], episodes[200:]):  # governed (and checkpointed) halfway, then reopened
        store = MemoryStore.open(url, encoder=HashingEncoder(), policy=FROZEN_POLICY)
        if not store.list():
            store.add_many([{"id": f"m{i}", "text": f"note {i}"} for i in range(4)])
        helper = Sidecar(store)
        store.record_many([(helper.retrieved(s, query="q").id, ok) for s, ok in part])
        streams = store.outcome_streams()
        store.govern()
        store.close()
    scratch = namespace_streams(
        FROZEN_POLICY,
        ["m0", "m1", "m2", "m3"],
        [[int(m[1]) for m in s] for s, _ in episodes],
        np.array([ok for _, ok in episodes]),
        np.ones(len(episodes)),
    )
    for mid in ("m0", "m1", "m2", "m3"):
        assert streams[mid].reading == scratch.streams[mid].reading, mid
        assert streams[mid].explained_by == scratch.streams[mid].explained_by, mid
    # the stale note's own excursion no longer teaches its baseline: its alarm stands
    stale = scratch.streams["m0"].reading
    assert stale is not None and stale.alarm
    plain = (
        namespace_streams(
            GovernancePolicy(),
            ["m0", "m1", "m2", "m3"],
            [[int(m[1]) for m in s] for s, _ in episodes],
            np.array([ok for _, ok in episodes]),
            np.ones(len(episodes)),
        )
        .streams["m0"]
        .reading
    )
    assert plain is not None and not plain.alarm


def _frozen_store() -> MemoryStore:
    return _fed_store(FROZEN_POLICY)


def test_a_checkpoint_keeps_the_counts_at_the_excursions_start() -> None:
    store = _frozen_store()
    store.outcome_streams()
    followed = store._followed["default"]
    assert followed.scan is not None and followed.scan.state.frozen is not None
    assert np.any(followed.scan.state.statistic > 0)
    data = checkpoint.encode("default", followed)
    back = checkpoint.decode("default", data, store.policy)
    assert back.scan is not None and back.scan.state.frozen is not None
    np.testing.assert_array_equal(back.scan.state.frozen, followed.scan.state.frozen)
    np.testing.assert_array_equal(back.scan.state.statistic, followed.scan.state.statistic)


def test_a_snapshot_saved_without_the_counts_loads() -> None:
    store = _frozen_store()
    store.outcome_streams()
    scan = store._followed["default"].scan
    assert scan is not None
    snap = scan.snapshot()
    del snap["frozen"]
    # a memory in an excursion whose start the snapshot does not keep: scan the log again
    with pytest.raises(ValueError, match="excursions' start"):
        NamespaceScan.resume(FROZEN_POLICY, scan.columns, snap, scan.reference_column().copy())
    # with every statistic at 0 the live counts are the excursions' start: resumed exactly
    for key in ("statistic", "since", "first_alarm"):
        snap[key] = np.zeros_like(snap[key]) if key == "statistic" else np.full_like(snap[key], -1)
    resumed = NamespaceScan.resume(FROZEN_POLICY, scan.columns, snap, scan.reference_column().copy())
    assert resumed.state.frozen is not None
    np.testing.assert_array_equal(resumed.state.frozen[:, 0], resumed.state.observations)
    # a checkpoint written by a store without the option loads under it (its scan runs again)
    plain = MemoryStore.open("memory://", encoder=HashingEncoder(), seed=0, exploration=0.0)
    plain.add_many([{"id": mid, "text": f"memory {mid}"} for mid in IDS])
    _feed(plain, "default", 120, np.random.default_rng(15), broken=True)
    plain.outcome_streams()
    data = checkpoint.encode("default", plain._followed["default"])
    back = checkpoint.decode("default", data, FROZEN_POLICY)
    assert back.scan is None and back.last_seq == plain._followed["default"].last_seq


def test_a_state_made_without_the_counts_takes_its_live_ones() -> None:
    det = BernoulliCusum(frozen_baseline=True)
    state = CusumState.empty(2)  # as a caller made before the option
    det.update(state, [0, 1], [True, False], time=0)
    assert state.frozen is not None and state.frozen.shape == (2, 3)


def test_score_state_keeps_the_counts_and_advances_over_new_episodes_only(tmp_path, monkeypatch) -> None:
    pytest.importorskip("duckdb")
    from memworth.logs import ScoreSettings, score_files
    from tests.test_logs_detectors import advanced_episodes, assert_same, in_state, parts

    files = parts(tmp_path)
    settings = ScoreSettings(policy=FROZEN_POLICY)
    whole = score_files(files, settings)
    assert any(r["change_statistic"] > 0 for r in whole.table.to_pylist())
    state = tmp_path / "state.duckdb"
    calls = advanced_episodes(monkeypatch)
    sizes = [200, 150, 120, 130]
    for i in range(len(files)):
        calls.clear()
        run = score_files(files[: i + 1], settings, state=state)
        assert calls == [sizes[i]]  # resumed with its counts, not read again from the first episode
        assert_same(run.table, score_files(files[: i + 1], settings).table)
    assert_same(run.table, whole.table)
    rows = in_state(state, "SELECT count(*) FROM scan_frozen")
    assert isinstance(rows, tuple) and rows[0] > 0
