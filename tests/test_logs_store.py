"""The store's log in the log format: export -> score equals the store; import rebuilds its counters."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest

from memworth import HashingEncoder, MemoryStore
from memworth.cli import main
from memworth.governance import GovernancePolicy
from memworth.logs import ScoreSettings, score_files
from memworth.logs.state import Counting
from memworth.logs.store_io import export_log, import_log
from tests.store.conftest import drop, url_for

duckdb = pytest.importorskip("duckdb")

TOPICS = ["python lists", "prague history", "sql joins", "rust borrow checker", "tea brewing", "bike repair"]


def busy_store(url: str) -> MemoryStore:
    """A store with 18 memories and 480 outcomes from three sources, in two contexts; 'broken-01' stops
    working after 120 (enough later outcomes for the error-controlled tests to flag it)."""
    tick = itertools.count(1_700_000_000, 7)
    store = MemoryStore.open(url, encoder=HashingEncoder(), seed=1, clock=lambda: float(next(tick)))
    for t, topic in enumerate(TOPICS):
        for j in range(3):
            store.add(f"note {j} about {topic}", id=f"{'broken' if t == 0 and j == 1 else 'note'}-{t}{j}")
    rng = np.random.default_rng(3)
    sources = ["explicit", "implicit", "heuristic"]
    for e in range(480):
        topic = TOPICS[e % len(TOPICS)]
        recall = store.recall(f"question about {topic}", k=3, context="work" if e % 2 else "home")
        ids = {r.memory.id for r in recall}
        ok = bool(rng.random() < 0.75) and not (e > 120 and "broken-01" in ids)
        store.record(recall.episode, success=ok, source=sources[e % 3])
    return store


@pytest.fixture(params=["sqlite", "postgres"])
def store(request, tmp_path):
    s = busy_store(url_for(request.param, tmp_path))
    yield s
    drop(s)


def _same_counts(scored: dict[str, dict[str, Any]], store: MemoryStore) -> None:
    """Every memory with evidence is scored, with the store's counts (to 1e-9: SQL adds in another order)."""
    memories = {m.id: m for m in store.list() if m.counts.n > 0}
    assert set(scored) == set(memories)
    for mid, m in memories.items():
        got = scored[mid]
        np.testing.assert_allclose(
            [got["success"], got["failure"], got["n"]], [m.counts.success, m.counts.failure, m.counts.n], rtol=1e-9
        )


@pytest.mark.parametrize("fmt", ["parquet", "jsonl", "csv"])
def test_export_then_score_equals_the_stores_counts_and_proposals(store, tmp_path, fmt) -> None:
    path = tmp_path / f"log.{fmt}"
    rows = export_log(store.backend, path, fmt)
    assert rows == sum(
        len(store.backend.episodes([o.episode_id])[o.episode_id].items) for o in store.backend.outcome_log()
    )
    scored = {r["memory_id"]: r for r in score_files([str(path)], ScoreSettings(Counting("given"))).table.to_pylist()}
    _same_counts(scored, store)
    proposals = {p.memory_id: (p.action, p.reason) for p in store.govern().proposals}
    assert {mid: (r["action"], r["reason"]) for mid, r in scored.items() if r["action"]} == proposals
    assert "broken-01" in proposals


def test_import_rebuilds_counters_that_replay_confirms(store, tmp_path) -> None:
    path = tmp_path / "log.parquet"
    export_log(store.backend, path, "parquet")
    with MemoryStore.open(f"sqlite:///{tmp_path / 'copy.db'}", encoder=HashingEncoder()) as copy:
        added, episodes, _rows = import_log(copy.backend, [str(path)], ScoreSettings(Counting("given")))
        assert episodes == 480 and added == len([m for m in store.list() if m.counts.n > 0])
        report = copy.replay()
        assert report.consistent and report.outcomes == 480
        for m in store.list():
            if m.counts.n:
                c = copy.get(m.id).counts
                np.testing.assert_allclose(
                    [c.success, c.failure, c.n], [m.counts.success, m.counts.failure, m.counts.n], rtol=1e-9
                )
        again = {p.memory_id: (p.action, p.reason) for p in copy.govern().proposals}
        assert again == {p.memory_id: (p.action, p.reason) for p in store.govern().proposals}
        with pytest.raises(Exception, match="in the store already"):
            import_log(copy.backend, [str(path)], ScoreSettings(Counting("given")))


def test_cli_export_import_score(tmp_path, capsys) -> None:
    src = f"sqlite:///{tmp_path / 'store.db'}"
    busy_store(src).close()
    log = tmp_path / "log.csv"
    assert main(["export", "--format", "csv", "--out", str(log), "--store", src]) == 0
    dst = f"sqlite:///{tmp_path / 'imported.db'}"
    assert main(["import", str(log), "--credit", "given", "--store", dst, "--encoder", "hashing"]) == 0
    assert "480 episodes" in capsys.readouterr().out
    assert main(["replay", "--store", dst]) == 0
    assert main(["score", str(log), "--credit", "given", "--quiet", "--out", str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / "worth.csv").exists()


def used_store(url: str) -> MemoryStore:
    """:func:`busy_store`'s memories, 480 outcomes, window test and change detection on; two outcomes
    in three name the memories the agent used (``record(..., used=...)``: the others get credit 0).
    'broken-01' fails the episodes that use it after 120; shown and not used, it does not."""
    tick = itertools.count(1_700_000_000, 7)
    store = MemoryStore.open(url, encoder=HashingEncoder(), seed=1, clock=lambda: float(next(tick)))
    store.policy = GovernancePolicy(window_test=True)
    for t, topic in enumerate(TOPICS):
        for j in range(3):
            store.add(f"note {j} about {topic}", id=f"{'broken' if t == 0 and j == 1 else 'note'}-{t}{j}")
    rng = np.random.default_rng(4)
    for e in range(480):
        topic = TOPICS[e % len(TOPICS)]
        recall = store.recall(f"question about {topic}", k=3, context="work" if e % 2 else "home")
        ids = [r.memory.id for r in recall]
        used = None if e % 3 == 0 else [mid for mid in ids if rng.random() < 0.5] or ids[:1]
        ok = bool(rng.random() < 0.75) and not (e > 120 and "broken-01" in (ids if used is None else used))
        store.record(recall.episode, success=ok, used=used)
    return store


def test_credit_0_items_are_no_observations_in_score_as_in_the_store(tmp_path) -> None:
    """A log with credit-0 items (memories shown, not used): the window counts, outcome streams,
    CUSUM statistics and proposals of ``memworth score`` (scored in two increments, so the kept
    detectors resume) are the store's; sums and ``n`` count every retrieval."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from memworth.logs.detectors import follow
    from memworth.logs.streams import namespace_rows, recent_counts, streams_of

    store = used_store(f"sqlite:///{tmp_path / 'store.db'}")
    policy = store.policy
    path = tmp_path / "log.parquet"
    export_log(store.backend, path, "parquet")
    log = pq.read_table(str(path))
    assert 0 < pc.sum(pc.equal(log.column("weight"), 0.0)).as_py() < log.num_rows / 2  # the case under test
    middle = float(np.median(log.column("timestamp").to_numpy()))
    parts = [tmp_path / "early.parquet", tmp_path / "late.parquet"]
    pq.write_table(log.filter(pc.less_equal(log.column("timestamp"), middle)), str(parts[0]))
    pq.write_table(log.filter(pc.greater(log.column("timestamp"), middle)), str(parts[1]))
    settings = ScoreSettings(Counting("given"), policy)
    state = tmp_path / "state.duckdb"
    score_files([str(parts[0])], settings, state=state)
    run = score_files([str(p) for p in parts], settings, state=state)
    assert run.files_read == [str(parts[1])]
    scored = {r["memory_id"]: r for r in run.table.to_pylist()}
    at_once = {r["memory_id"]: r for r in score_files([str(path)], settings).table.to_pylist()}
    assert scored.keys() == at_once.keys()
    for mid, row in at_once.items():  # sums to 1e-9: SQL adds them in another order
        for name, value in row.items():
            if isinstance(value, float):
                assert scored[mid][name] == pytest.approx(value, rel=1e-9), (mid, name)
            else:
                assert scored[mid][name] == value, (mid, name)

    _same_counts(scored, store)
    window = policy.staleness.window
    mine = store.recent_counts(window=window)
    streams = store.outcome_streams()
    con = duckdb.connect(str(state))
    try:
        recent = recent_counts(con, "default", window)
        whole = streams_of(namespace_rows(con, "default"), policy, recent)
        scan, read = follow(con, "default", policy)
    finally:
        con.close()
    assert read == 480 and scan.episodes == 480
    kept = scan.read()
    assert set(recent) == set(mine)
    for mid, c in mine.items():
        np.testing.assert_allclose(
            [recent[mid].success, recent[mid].failure, recent[mid].n], [c.success, c.failure, c.n]
        )
    assert whole.streams.keys() == kept.streams.keys() == streams.keys()
    assert len(streams["broken-01"]) < store.get("broken-01").counts.n  # shown and not used: no observation
    for mid, stream in streams.items():
        for found in (whole.streams[mid], kept.streams[mid]):
            assert len(found) == len(stream)
            for field in ("success", "weight", "reference", "episode"):
                np.testing.assert_array_equal(getattr(found, field), getattr(stream, field), err_msg=f"{mid} {field}")
        assert stream.reading is not None
        assert scored[mid]["change_statistic"] == stream.reading.statistic
        assert scored[mid]["change_alarm"] == bool(stream.change_alarm)
    proposals = {mid: (p.action, p.reason) for mid, p in store.proposals().items() if p is not None}
    assert {mid: (r["action"], r["reason"]) for mid, r in scored.items() if r["action"]} == proposals
    assert "broken-01" in proposals
    store.close()
