"""EpisodeColumns.of_arrays builds what EpisodeColumns.add builds episode by episode."""

from __future__ import annotations

from array import array

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memworth.signals.outcome_streams import EpisodeColumns

IDS = [f"m{i}" for i in range(6)]

episodes = st.lists(
    st.tuples(
        st.lists(st.integers(0, 5), min_size=0, max_size=4, unique=True),
        st.booleans(),
        st.sampled_from([1.0, 0.5, 0.25]),
        st.sampled_from([None, "a", "b"]),
    ),
    max_size=30,
)


def _fields(cols: EpisodeColumns) -> tuple[object, ...]:
    return (
        cols.ids,
        cols.contexts,
        cols.won.tolist(),
        cols.confidence.tolist(),
        cols.context.tolist(),
        cols.starts.tolist(),
        cols.members.tolist(),
        [p.tolist() for p in cols.positions],
        cols.dropped,
        cols.rows,
    )


@settings(max_examples=150, deadline=None)
@given(episodes)
def test_of_arrays_equals_adding_episode_by_episode(eps: list[tuple[list[int], bool, float, str | None]]) -> None:
    one_by_one = EpisodeColumns()
    for mid in IDS:  # every memory known up front, as a resumed scan's are
        one_by_one._ids.of(mid)
        one_by_one.positions.append(array("i"))
        one_by_one.dropped.append(0)
    for members, ok, weight, context in eps:
        one_by_one.add([IDS[m] for m in members], ok, weight, context)
    starts = np.r_[0, np.cumsum([len(m) for m, *_ in eps])].astype(np.int64)
    at_once = EpisodeColumns.of_arrays(
        IDS,
        np.array([m for members, *_ in eps for m in members], dtype=np.int32),
        starts,
        np.array([ok for _, ok, *_ in eps], dtype=bool),
        np.array([w for _, _, w, _ in eps], dtype=np.float64),
        [c for *_, c in eps],
    )
    assert _fields(at_once) == _fields(one_by_one)


def test_of_arrays_refuses_parts_that_do_not_fit() -> None:
    with pytest.raises(ValueError, match="offsets"):
        EpisodeColumns.of_arrays(IDS, np.array([0, 1]), np.array([0, 1]), np.array([True, False]), np.ones(2), [None, None])
    with pytest.raises(ValueError, match="past the ids"):
        EpisodeColumns.of_arrays(IDS, np.array([9]), np.array([0, 1]), np.array([True]), np.ones(1), [None])
    with pytest.raises(ValueError, match="repeat"):
        EpisodeColumns.of_arrays(["a", "a"], np.array([], dtype=np.int32), np.array([0]), np.array([], dtype=bool), np.ones(0), [])


@pytest.mark.parametrize("chunk", [7, 4096])
def test_a_scan_steps_through_episodes_exactly_as_one_update_per_episode(
    monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    """The scan takes every retrieval's CUSUM step at once, a chunk of episodes at a time;
    its detectors end where one detector and rule update per episode (the public API) end,
    bit for bit, across chunk boundaries and scans resumed half way."""
    import memworth.signals.outcome_streams as streams
    from memworth.governance import GovernancePolicy
    from memworth.signals.change_detection import ReferenceRate

    monkeypatch.setattr(streams, "_SCAN_CHUNK", chunk)
    rng = np.random.default_rng(5)
    n = 600
    sets = [[f"m{j}" for j in rng.choice(12, size=int(rng.integers(0, 5)), replace=False)] for _ in range(n)]
    y = rng.random(n) < np.where(np.arange(n) < 300, 0.8, 0.3)
    w = rng.choice([1.0, 0.5, 0.2], size=n)
    policy = GovernancePolicy()
    scan = streams.NamespaceScan(policy)
    scan.advance(sets[:250], y[:250], w[:250])
    scan.advance(sets[250:], y[250:], w[250:])

    det, rule = policy.detector(), scan.rule
    rows: dict[str, int] = {}
    for s in sets:
        for mid in s:
            rows.setdefault(mid, len(rows))
    state, shared = det.start(len(rows)), rule.start(len(rows))
    reference = ReferenceRate(policy.change_reference_half_life)
    for t, s in enumerate(sets):
        at = np.array([rows[m] for m in s], dtype=np.int64)
        if at.size:
            steps = det.steps(state, at, bool(y[t]), weight=float(w[t]), reference=reference.rate)
            det.update(state, at, bool(y[t]), weight=float(w[t]), reference=reference.rate, time=t + 1)
            rule.update(shared, state, at, steps)
        reference.add(bool(y[t]))
    assert scan.ids == list(rows)
    for name in ("statistic", "observations", "successes", "expected", "since", "first_alarm"):
        assert np.array_equal(getattr(scan.state, name), getattr(state, name)), name
    assert scan.shared.shared == shared.shared
    assert float(state.statistic.max()) > 0 and any(shared.shared)  # the data move the detectors
