"""A batch with an episode recorded already (issue 17, branch sqlrec): the write refuses it, and
only then is the log read to name the item; a batch that records reads no outcome first."""

from __future__ import annotations

from typing import Any

import pytest

from memworth import DuplicateError, MemoryStore


def _count_outcome_reads(store: MemoryStore) -> list[Any]:
    calls: list[Any] = []
    real = store.backend.outcomes_of

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(args)
        return real(*args, **kwargs)

    store.backend.outcomes_of = counted  # type: ignore[method-assign]
    return calls


def test_a_batch_reads_no_outcome_before_writing(filled: MemoryStore) -> None:
    eps = [filled.recall(q, k=2).episode for q in ("reverse a list", "capital city", "water boils")]
    reads = _count_outcome_reads(filled)
    filled.record_many([(e, True) for e in eps])
    assert reads == []
    assert [o.episode_id for o in filled.backend.outcome_log()] == [e.id for e in eps]


def test_a_recorded_episode_is_named_by_its_position_and_nothing_is_written(filled: MemoryStore) -> None:
    a, b, c = (filled.recall(q, k=2).episode for q in ("reverse a list", "capital city", "water boils"))
    filled.record(b, True)
    counts = {m.id: m.counts for m in filled.list()}
    reads = _count_outcome_reads(filled)
    with pytest.raises(DuplicateError, match=r"already has an outcome \(outcomes\[1\]\)"):
        filled.record_many([(a, True), (b, False), (c, True)])
    assert len(reads) == 1  # after the write refused the batch
    assert [o.episode_id for o in filled.backend.outcome_log()] == [b.id]
    assert {m.id: m.counts for m in filled.list()} == counts
    filled.record_many([(a, True), (c, False)])  # the others still record
    assert filled.replay().consistent
