"""How PostgreSQL plans the history read (issue 17, branch pgfresh).

A store object's first record starts the live change statistics from the namespace's log
(from its checkpoint on), and govern follows the log the same way: two reads of the outcomes
after a sequence number, one with their episodes' heads, one with the episodes' items. On
tables not yet analysed (a new store; autovacuum off, or not yet run) the plain join of
outcomes and episodes was planned as a nested loop that read every episode of the namespace
for each outcome, then filtered the id: a cost in the square of the log, paid by every writer
at its first record. Each read must look each outcome's episode up by its key, whatever the
statistics, planned for the parameters or once for any (psycopg prepares a statement at its
fifth call).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from memworth import HashingEncoder, MemoryStore
from memworth.store.postgres import _HISTORY_HEADS, _HISTORY_ITEMS
from tests.store.conftest import drop, url_for

OUTCOMES = 200


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MemoryStore]:
    url = url_for("postgres", tmp_path).replace("pool_size=2", "pool_size=1")  # one connection to look at
    s = MemoryStore.open(url, encoder=HashingEncoder(), seed=0, exploration=0.0)
    s.add_many([{"id": f"m{i}", "text": f"fact number {i} about python lists"} for i in range(8)])
    made = [s.recall(f"python lists question {i}", k=3).episode for i in range(OUTCOMES + 50)]
    for i, ep in enumerate(made[:OUTCOMES]):
        s.record(ep, i % 3 != 0)
    yield s
    drop(s)


def _plan(store: MemoryStore, sql: str, generic: bool) -> list[str]:
    """``EXPLAIN ANALYZE`` of ``sql`` for the whole log of namespace ``default`` (the tables as
    the records left them: never analysed), planned for the values or once for any."""
    numbered = iter(range(1, 3))
    prepared = re.sub(r"%s", lambda _: f"${next(numbered)}", sql)
    with store.backend._pool.connection() as conn:  # type: ignore[attr-defined]
        assert conn.execute(
            "SELECT count(*) FROM pg_stat_user_tables WHERE schemaname = current_schema()"
            " AND (last_analyze IS NOT NULL OR last_autoanalyze IS NOT NULL)"
        ).fetchone() == (0,)
        conn.execute(f"SET plan_cache_mode = {'force_generic_plan' if generic else 'force_custom_plan'}")
        try:
            conn.execute("PREPARE history_read AS " + prepared)
            cur = psycopg.ClientCursor(conn)
            plan = [
                r[0] for r in cur.execute("EXPLAIN (ANALYZE, COSTS OFF) EXECUTE history_read(%s, %s)", ("default", 0))
            ]
            conn.execute("DEALLOCATE history_read")
        finally:
            conn.execute("RESET plan_cache_mode")
            conn.commit()
    return plan


def _rows_read(plan: list[str], table: str) -> int:
    """Rows the plan's scans of ``table`` returned, over all their loops."""
    total = 0
    for line in plan:
        if re.search(rf"Scan (using \S+ )?on {table}\b", line):
            m = re.search(r"rows=(\d+) loops=(\d+)", line)
            assert m is not None, line
            total += int(m.group(1)) * int(m.group(2))
    return total


@pytest.mark.parametrize("generic", [False, True], ids=["custom", "generic"])
def test_the_history_reads_probe_each_outcomes_episode_by_its_key_on_unanalysed_tables(
    store: MemoryStore, generic: bool
) -> None:
    for sql, table in ((_HISTORY_HEADS, "episodes"), (_HISTORY_ITEMS, "episode_items")):
        plan = _plan(store, sql, generic)
        text = "\n".join(plan)
        assert "Rows Removed by Join Filter" not in text, text
        assert "Rows Removed by Filter" not in text, text
        # one episode per outcome (before: every episode of the namespace, for each outcome)
        want = OUTCOMES if table == "episodes" else 3 * OUTCOMES
        assert _rows_read(plan, table) <= want, text


def test_the_history_read_answers_every_outcome_with_its_episode(store: MemoryStore) -> None:
    history = store.backend.history("default")
    assert len(history) == OUTCOMES
    assert [row.seq for row, _ in history] == sorted(row.seq for row, _ in history)
    known, _ = store.backend.episodes_at([ep.id for _, ep in history], "default")  # type: ignore[attr-defined]
    for row, ep in history:
        assert row.episode_id == ep.id
        assert ep == known[ep.id]
    after = history[OUTCOMES // 2 - 1][0].seq
    assert store.backend.history("default", after) == history[OUTCOMES // 2 :]
    assert store.replay().consistent


class _Explaining:
    """A connection that, before each history statement it runs, runs it under ``EXPLAIN
    ANALYZE`` in the same transaction (same settings, same snapshot) and keeps the plan."""

    def __init__(self, conn: object, plans: list[list[str]]) -> None:
        self._conn = conn
        self._plans = plans

    def execute(self, sql: str, params: object = None, **kw: object) -> object:
        if sql.startswith(("SELECT o.seq", "SELECT i.episode_id")):
            cur = psycopg.ClientCursor(self._conn)  # type: ignore[arg-type]
            self._plans.append([r[0] for r in cur.execute("EXPLAIN (ANALYZE, COSTS OFF) " + sql, params)])
        return self._conn.execute(sql, params, **kw)  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> object:
        return getattr(self._conn, name)


def _history_plans(store: MemoryStore, after: int, monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    backend = store.backend
    run = backend._run  # type: ignore[attr-defined]
    plans: list[list[str]] = []
    monkeypatch.setattr(backend, "_run", lambda fn: run(lambda conn: fn(_Explaining(conn, plans))))
    backend.history("default", after)
    monkeypatch.undo()
    assert len(plans) == 2, plans
    return plans


def _loops(plan: list[str], table: str) -> list[int]:
    return [
        int(m.group(1))
        for line in plan
        if re.search(rf"Scan (using \S+ )?on {table}\b", line) and (m := re.search(r"loops=(\d+)", line))
    ]


def test_the_whole_logs_read_reads_each_table_once_not_a_probe_per_outcome(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Replay, export, the dashboard and the CLI read the whole log: a probe per outcome costs
    # several times a hash join there (analysed, 100,000 outcomes: 4.1 s against 0.66 s of
    # server time), whatever the statistics the episodes must be read once.
    for plan, table in zip(_history_plans(store, 0, monkeypatch), ("episodes", "episode_items"), strict=True):
        text = "\n".join(plan)
        assert _loops(plan, table) and set(_loops(plan, table)) == {1}, text
        assert "Rows Removed by Join Filter" not in text, text
    with store.backend._pool.connection() as conn:  # type: ignore[attr-defined]
        assert conn.execute("SHOW enable_nestloop").fetchone() == ("on",)  # the pool's connection as it was


def test_a_tail_of_the_log_is_read_by_a_probe_per_outcome(store: MemoryStore, monkeypatch: pytest.MonkeyPatch) -> None:
    tail = 20
    after = store.backend.history("default")[OUTCOMES - tail - 1][0].seq
    heads, items = _history_plans(store, after, monkeypatch)
    assert _rows_read(heads, "episodes") <= tail, "\n".join(heads)
    assert _rows_read(items, "episode_items") <= 3 * tail, "\n".join(items)


def test_the_whole_logs_read_inside_a_transaction_leaves_its_settings_as_they_were(store: MemoryStore) -> None:
    backend = store.backend
    with backend.transaction():  # type: ignore[attr-defined]
        assert len(backend.history("default")) == OUTCOMES
        assert backend._held.conn.execute("SHOW enable_nestloop").fetchone() == ("on",)  # type: ignore[attr-defined]
