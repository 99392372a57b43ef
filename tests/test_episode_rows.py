"""NamespaceScan.advance given EpisodeRows (integer rows, stepped with numpy a batch at a time)
equals the scan given each episode's memory ids, bit for bit: CUSUM state, explaining-away
evidence (values and each memory's order), reference column, streams and alarms; read_view
gives the streams read gives."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import memworth.signals.outcome_streams as outcome_streams
from memworth.governance import GovernancePolicy
from memworth.signals.outcome_streams import EpisodeColumns, EpisodeRows, NamespaceScan


def _log(seed: int, episodes: int = 2400, memories: int = 25) -> tuple[list[list[str]], np.ndarray, np.ndarray, list[str | None]]:
    """Episodes of 0-5 memories (a memory may be listed twice); a fifth of the memories break
    after episode 800 (their episodes mostly fail), so alarms rise and co-retrieved memories
    are held by explaining away."""
    rng = np.random.default_rng(seed)
    bad = rng.random(memories) < 0.2
    sets: list[list[str]] = []
    success = np.zeros(episodes, dtype=bool)
    for e in range(episodes):
        rows = rng.integers(0, memories, size=int(rng.integers(0, 6)))
        sets.append([f"m{r}" for r in rows])
        broken = e > 800 and bool(bad[rows].any())
        success[e] = rng.random() < (0.05 if broken else 0.75)
    confidence = rng.choice([1.0, 0.5, 0.25], size=episodes)
    contexts: list[str | None] = [None if e % 3 else "a" for e in range(episodes)]
    return sets, success, confidence, contexts


def _rows(scan: NamespaceScan, sets: list[list[str]]) -> EpisodeRows:
    """``sets`` as rows of ``scan``'s memories, new ones numbered in order of first retrieval."""
    known = {mid: i for i, mid in enumerate(scan.ids)}
    fresh: list[str] = []
    for s in sets:
        for mid in s:
            if mid not in known:
                known[mid] = len(known)
                fresh.append(mid)
    members = np.array([known[mid] for s in sets for mid in s], dtype=np.int32)
    starts = np.r_[0, np.cumsum([len(s) for s in sets])].astype(np.int64)
    return EpisodeRows(scan.ids, fresh, members, starts)


def _same_streams(got: object, want: object) -> None:
    for f in dataclasses.fields(want):  # type: ignore[arg-type]
        a, b = getattr(got, f.name), getattr(want, f.name)
        assert np.array_equal(a, b) if isinstance(b, np.ndarray) else a == b, f.name


@pytest.mark.parametrize(("chunk", "batch"), [(1, 1), (7, 3), (500, 64), (2400, 1 << 16)])
def test_rows_advance_equals_ids_advance_bit_for_bit(monkeypatch, chunk: int, batch: int) -> None:
    sets, success, confidence, contexts = _log(1)
    policy = GovernancePolicy()
    by_ids = NamespaceScan(policy)
    by_ids.advance(sets, success, confidence, contexts)
    monkeypatch.setattr(outcome_streams, "_BATCH_EPISODES", batch)
    by_rows = NamespaceScan(policy)
    for start in range(0, len(sets), chunk):
        end = start + chunk
        by_rows.advance(_rows(by_rows, sets[start:end]), success[start:end], confidence[start:end], contexts[start:end])
    assert by_rows._pairs is not None  # the evidence was kept as arrays
    want, got = by_ids.snapshot(), by_rows.snapshot()
    assert want.keys() == got.keys()
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)
    np.testing.assert_array_equal(by_rows.reference_column(), by_ids.reference_column())
    assert by_rows.ids == by_ids.ids
    read_ids, read_rows = by_ids.read(), by_rows.read()
    assert read_ids.held and any(read_ids.held.values())  # alarms, some held by a co-retrieved memory
    assert read_rows.held == read_ids.held and read_rows.level == read_ids.level
    assert read_rows.streams.keys() == read_ids.streams.keys()
    for mid, stream in read_ids.streams.items():
        _same_streams(read_rows.streams[mid], stream)
    assert by_rows.shared.shared == by_ids.shared.shared  # the arrays given back as the dicts
    for m, d in enumerate(by_ids.shared.shared):
        assert list(by_rows.shared.shared[m]) == list(d)  # each memory's entries in the same order


def test_rows_then_ids_then_rows_again() -> None:
    """A scan advanced by rows, then by ids (the evidence back in dicts), then by rows again."""
    sets, success, confidence, contexts = _log(2)
    policy = GovernancePolicy()
    one = NamespaceScan(policy)
    one.advance(sets, success, confidence, contexts)
    mixed = NamespaceScan(policy)
    for start, end, rows in ((0, 900, True), (900, 1500, False), (1500, 2400, True)):
        part = sets[start:end]
        mixed.advance(_rows(mixed, part) if rows else part, success[start:end], confidence[start:end], contexts[start:end])
    a, b = one.snapshot(), mixed.snapshot()
    for name in a:
        np.testing.assert_array_equal(b[name], a[name], err_msg=name)
    assert mixed.read().held == one.read().held


def test_read_view_gives_the_streams_read_gives() -> None:
    sets, success, confidence, _contexts = _log(3)
    scan = NamespaceScan(GovernancePolicy())
    scan.advance(_rows(scan, sets), success, confidence)
    view, read = scan.read_view(), scan.read()
    assert view.ids == read.ids and view.held == read.held and view.level == read.level
    assert list(view.streams) == list(read.streams) and len(view.streams) == len(read.streams)
    assert "nobody" not in view.streams and view.streams.get("nobody") is None
    for mid, stream in read.streams.items():
        assert mid in view.streams
        _same_streams(view.streams[mid], stream)
    scan.advance(_rows(scan, sets[:5]), success[:5], confidence[:5])
    with pytest.raises(RuntimeError, match="advanced"):
        view.streams[read.ids[0]]


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.lists(st.integers(0, 5), max_size=4),  # repeats allowed: one position per episode
            st.booleans(),
            st.sampled_from([1.0, 0.5]),
            st.sampled_from([None, "a"]),
        ),
        max_size=30,
    ),
    st.integers(1, 30),
)
def test_append_rows_builds_what_add_builds(eps: list[tuple[list[int], bool, float, str | None]], chunk: int) -> None:
    ids = [f"m{i}" for i in range(6)]
    added, appended = EpisodeColumns(), EpisodeColumns()
    for rows, ok, w, c in eps:
        added.add([ids[r] for r in rows], ok, w, c)
    known: dict[int, int] = {}
    for start in range(0, len(eps), chunk):
        part = eps[start : start + chunk]
        fresh = []
        for rows, *_ in part:
            for r in rows:
                if r not in known:
                    known[r] = len(known)
                    fresh.append(ids[r])
        appended.append_rows(
            fresh,
            np.array([known[r] for rows, *_ in part for r in rows], dtype=np.int32),
            np.r_[0, np.cumsum([len(rows) for rows, *_ in part])],
            np.array([ok for _, ok, _, _ in part], dtype=bool),
            np.array([w for _, _, w, _ in part]),
            [c for *_, c in part],
        )
    settle = outcome_streams._SETTLE_EPISODES
    outcome_streams._SETTLE_EPISODES = 1 + chunk % 4  # settled a few episodes at a time
    try:
        appended.settle()
    finally:
        outcome_streams._SETTLE_EPISODES = settle
    for name in ("ids", "contexts", "won", "confidence", "context", "starts", "members", "dropped"):
        assert list(getattr(appended, name)) == list(getattr(added, name)), name
    assert [p.tolist() for p in appended.positions] == [p.tolist() for p in added.positions]


def test_append_rows_refuses_parts_that_do_not_fit() -> None:
    cols = EpisodeColumns()
    one = (np.array([True]), np.array([1.0]))
    with pytest.raises(ValueError, match="past the ids"):
        cols.append_rows(["a"], np.array([1]), np.array([0, 1]), *one)
    with pytest.raises(ValueError, match="offsets"):
        cols.append_rows(["a"], np.array([0]), np.array([0, 2]), *one)
    with pytest.raises(ValueError, match="repeat"):
        cols.append_rows(["a", "a"], np.array([0]), np.array([0, 1]), *one)
    assert len(cols) == 0 and cols.ids == []
    cols.append_rows(["a"], np.array([0]), np.array([0, 1]), *one)
    with pytest.raises(ValueError, match="repeat"):
        cols.append_rows(["a"], np.array([0]), np.array([0, 1]), *one)


def test_episode_rows_read_as_each_episodes_ids() -> None:
    rows = EpisodeRows(["a", "b"], ["c"], np.array([2, 0, 1, 2]), np.array([0, 1, 1, 4]))
    assert len(rows) == 3 and [list(s) for s in rows] == [["c"], [], ["a", "b", "c"]]
    assert rows[1:] == [[], ["a", "b", "c"]]
    scan = NamespaceScan(GovernancePolicy(), ["x"])
    scan.advance(rows, np.array([True, False, True]), np.ones(3))  # made for other ids: read by name
    assert scan.ids == ["x", "c", "a", "b"] and scan._pairs is None


def test_rows_advance_a_scan_whose_columns_keep_a_tail_as_ids_do() -> None:
    # the store's live scan keeps only a tail of episodes (columns.rows set); EpisodeRows
    # there take the per-episode path, with the result plain id lists give
    policy = GovernancePolicy(change_detection=True)
    y, w = np.array([True, False]), np.array([1.0, 1.0])
    by_rows_cols, by_ids_cols = EpisodeColumns(), EpisodeColumns()
    by_rows_cols.rows, by_ids_cols.rows = {}, {}
    by_rows = NamespaceScan(policy, columns=by_rows_cols)
    by_ids = NamespaceScan(policy, columns=by_ids_cols)
    by_rows.advance(EpisodeRows(by_rows.ids, ["a", "b"], np.array([0, 1, 1]), np.array([0, 2, 3])), y, w)
    by_ids.advance([["a", "b"], ["b"]], y, w)
    assert by_rows.episodes == by_ids.episodes == 2
    assert by_rows.ids == by_ids.ids
    assert by_rows.state.statistic.tobytes() == by_ids.state.statistic.tobytes()
