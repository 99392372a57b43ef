"""What one ``record`` costs a PostgreSQL store in round trips (issue 17).

* a plain record (one outcome, no ``used``, no verification) is two statements: the episode
  read and one write that sets the counters and appends the outcome, committed by itself (no
  BEGIN, no COMMIT: six round trips before, with BEGIN, the counters UPDATE, a two-step COPY
  and COMMIT); given the Recall or Episode the store handed out, one: the write checks the
  episode is logged as held (branch reccpu) instead of reading it first;
* that write is still refused whole: an erased memory credits the others only (the store's
  retry), an episode recorded twice writes nothing; inside ``transaction()`` it is a savepoint
  of the block, undone with it; ``used`` keeps its transaction (the reweighting is a second
  statement).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from memworth import DuplicateError, HashingEncoder, MemoryStore
from tests.store.conftest import drop, url_for


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MemoryStore]:
    url = url_for("postgres", tmp_path).replace("pool_size=2", "pool_size=1")  # one connection to watch
    s = MemoryStore.open(url, encoder=HashingEncoder(), seed=0, exploration=0.0)
    s.add_many([{"id": f"m{i}", "text": f"fact number {i} about python lists"} for i in range(6)])
    yield s
    drop(s)


def messages(store: MemoryStore, path: Path, work: object) -> list[str]:
    """The frontend messages (type and text) the store's one pooled connection sends while ``work()`` runs."""
    from psycopg import pq

    pool = store.backend._pool  # type: ignore[attr-defined]
    with open(path, "w") as out:
        with pool.connection() as conn:
            conn.pgconn.trace(out.fileno())
            conn.pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)
        try:
            work()  # type: ignore[operator]
        finally:
            with pool.connection() as conn:
                conn.pgconn.untrace()
    sent = []
    for line in path.read_text().splitlines():
        parts = line.split("\t")
        if parts[0] == "F":
            sent.append(parts[2] + (" " + parts[3] if len(parts) > 3 and parts[2] == "Query" else ""))
    return sent


def round_trips(sent: list[str]) -> int:
    """Round trips in ``sent``: each Sync (extended protocol), simple Query or CopyDone waits for the server."""
    return sum(1 for m in sent if m in ("Sync", "CopyDone") or m.startswith("Query"))


def test_a_plain_record_is_one_round_trip_held_two_by_id_and_no_transaction_block(
    store: MemoryStore, tmp_path: Path
) -> None:
    episodes = [store.recall("python lists", k=3).episode for _ in range(5)]
    store.record(episodes[0], True)  # the first record starts the live statistics (a log read)
    sent = messages(store, tmp_path / "trace.txt", lambda: store.record(episodes[1], False))
    assert round_trips(sent) == 1, sent  # the episode held: checked by the write, not read back
    assert not any("BEGIN" in m or "COMMIT" in m or "COPY" in m for m in sent), sent
    many = messages(store, tmp_path / "many.txt", lambda: store.record_many([(episodes[2], True)]))
    assert round_trips(many) == 1, many
    by_id = messages(store, tmp_path / "by_id.txt", lambda: store.record(episodes[3].id, True, namespace="default"))
    assert round_trips(by_id) == 2, by_id  # an id: the episode read (with the generation), then the write
    assert not any("BEGIN" in m or "COMMIT" in m or "COPY" in m for m in by_id), by_id
    assert store.replay().consistent


def test_the_one_statement_write_is_still_whole(store: MemoryStore) -> None:
    first, second, third = (store.recall("python lists", k=3).episode for _ in range(3))
    store.record(first, True)
    before = {m.id: m.counts for m in store.list()}
    with pytest.raises(DuplicateError, match=first.id):
        store.record(first, False)
    assert {m.id: m.counts for m in store.list()} == before
    with pytest.raises(RuntimeError), store.transaction():
        store.record(second, True)
        raise RuntimeError("roll the block back")
    assert {m.id: m.counts for m in store.list()} == before
    assert [o.episode_id for o in store.backend.outcome_log()] == [first.id]
    erased = second.items[0].memory_id
    store.delete(erased, reason="test")
    store.record(second, True)  # credits the others only
    store.record(third, True, used=[third.items[-1].memory_id])  # the reweighted path
    assert [o.episode_id for o in store.backend.outcome_log()] == [first.id, second.id, third.id]
    assert store.replay().consistent
