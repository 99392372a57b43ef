"""record_batch is record() vectorised: same totals, context and decayed counts, any table size."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from memworth import Counts, Tracker


def _close(a: Counts, b: Counts) -> None:
    for x, y in ((a.success, b.success), (a.failure, b.failure), (a.n, b.n)):
        assert x == pytest.approx(y, rel=1e-9, abs=1e-12)


@st.composite
def streams(draw):  # type: ignore[no-untyped-def]
    registered = draw(st.sampled_from([0, 5, 200, 2000]))  # big tables take the sparse-update path
    k = draw(st.integers(1, 4))
    n_ep = draw(st.integers(1, 25))
    pool = st.one_of(st.integers(0, registered + 10), st.sampled_from([-3, 2**33]))
    ids = np.array(draw(st.lists(st.lists(pool, min_size=k, max_size=k, unique=True), min_size=n_ep, max_size=n_ep)))
    success = np.array(draw(st.lists(st.booleans(), min_size=n_ep, max_size=n_ep)))
    weighted = draw(st.booleans())
    weights = None
    if weighted:
        weights = np.array(
            draw(st.lists(st.lists(st.integers(1, 5), min_size=k, max_size=k), min_size=n_ep, max_size=n_ep)),
            dtype=float,
        )
    contexts = draw(st.one_of(st.none(), st.lists(st.sampled_from(["x", "y"]), min_size=n_ep, max_size=n_ep)))
    cuts = sorted(set(draw(st.lists(st.integers(1, n_ep), max_size=3))) | {n_ep})
    return registered, ids, success, weights, contexts, cuts


@given(streams(), st.sampled_from([None, 3.0, 50.0]))
def test_record_batch_in_chunks_equals_record_one_at_a_time(stream, half_life) -> None:  # type: ignore[no-untyped-def]
    registered, ids, success, weights, contexts, cuts = stream
    one, batch = Tracker(half_life=half_life), Tracker(half_life=half_life)
    for t in (one, batch):
        t.register(np.arange(registered))
    for e in range(len(ids)):
        one.record(
            [int(x) for x in ids[e]],
            bool(success[e]),
            weights=None if weights is None else list(weights[e]),
            context=None if contexts is None else contexts[e],
        )
    lo = 0
    for hi in cuts:
        batch.record_batch(
            ids[lo:hi],
            success[lo:hi],
            None if weights is None else weights[lo:hi],
            None if contexts is None else contexts[lo:hi],
        )
        lo = hi
    assert batch.episodes == one.episodes == len(ids)
    assert set(batch.ids()) == set(one.ids())
    for memory_id in set(ids.ravel().tolist()):
        _close(batch.counts(memory_id), one.counts(memory_id))
        for ctx in ("x", "y"):
            _close(batch.counts(memory_id, context=ctx), one.counts(memory_id, context=ctx))
        if half_life is not None:
            _close(batch.counts(memory_id, decayed=True), one.counts(memory_id, decayed=True))


def test_a_few_episodes_into_a_big_table() -> None:
    t = Tracker(half_life=2.0)
    t.record_batch(np.arange(4000).reshape(2000, 2), np.ones(2000, dtype=bool))
    before = {m: t.counts(m) for m in (5, 6, 7, 3999)}
    t.record_batch(np.array([[5, 6], [5, 7], [6, 5]]), np.array([True, False, True]))
    assert t.counts(5) == before[5] + Counts(1.0, 0.5, 3.0)
    assert t.counts(6) == before[6] + Counts(1.0, 0.0, 2.0)
    assert t.counts(7) == before[7] + Counts(0.0, 0.5, 1.0)
    assert t.counts(3999) == before[3999]
    # decayed: episodes 2001..2003, read at 2003, half-life 2
    d = t.counts(5, decayed=True)
    old = 0.5 * 2.0 ** (-(2003 - 3) / 2.0)  # memory 5 was in episode 3 of the first batch
    assert d.success == pytest.approx(old + 0.5 * 2**-1 + 0.5, rel=1e-12)
    assert d.failure == pytest.approx(0.5 * 2**-0.5, rel=1e-12)
    assert d.n == pytest.approx(2.0 ** (-(2003 - 3) / 2.0) + 2**-1 + 2**-0.5 + 1, rel=1e-12)
    t.record(["s"], False)
    assert t.counts(5) == before[5] + Counts(1.0, 0.5, 3.0)
    assert t.counts("s") == Counts(0.0, 1.0, 1.0)
