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


@pytest.mark.parametrize("batch", [True, False])
def test_a_recorded_episode_over_a_source_limit_is_named_not_rate_limited(make_store: Any, batch: bool) -> None:
    """The limit is checked before the write: a batch (or a record) refused for the limit
    that holds an episode recorded already got RateLimitError ("retry later", HTTP 429), and a
    client retried a call that can never succeed; the recorded episode is named instead
    (found in review; without it the batch below fits the limit: 1 + 1 = 2)."""
    from memworth import HashingEncoder, SourceLimit
    from memworth.errors import RateLimitError

    s = make_store(encoder=HashingEncoder(), limits={"explicit": SourceLimit(max_outcomes=2)})
    s.add_many([{"id": "a", "text": "lists reverse"}, {"id": "b", "text": "capital city"}])
    a, b = s.recall("lists", k=1), s.recall("capital", k=1)
    s.record(b, True)
    if batch:
        with pytest.raises(DuplicateError, match=r"already has an outcome \(outcomes\[1\]\)"):
            s.record_many([(a, True), (b, False)])
    else:
        s.record(a, True)  # the limit is reached
        with pytest.raises(DuplicateError, match=r"already has an outcome$"):
            s.record(b, False)
        with pytest.raises(RateLimitError):  # a new episode is still refused for the limit
            s.record(s.recall("lists", k=1), True)
    assert len(list(s.backend.outcome_log())) == (1 if batch else 2) and s.replay().consistent
