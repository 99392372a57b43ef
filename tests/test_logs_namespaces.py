"""Issue 15 (found in review): a log keys an episode by (namespace, episode_id), as PostgreSQL
schema 7 does, so one episode id logged in two namespaces is two episodes.

The reviewer's scenario end to end on PostgreSQL (export -> score equals the store's counts
per (namespace, memory); import into a fresh store gives the same counts and a consistent
replay), the checks that must still refuse inside one (namespace, episode_id), incremental
state files, and a version 2 state file whose episode table was keyed by id alone.
"""

from __future__ import annotations

import itertools

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from memworth import HashingEncoder, MemoryStore
from memworth.errors import ValidationError
from memworth.logs import ScoreSettings, score_files
from memworth.logs.read import LogError
from memworth.logs.state import VERSION, Counting, create_tables
from memworth.logs.store_io import export_log, import_log
from tests.store.conftest import drop, url_for

pytest.importorskip("psycopg")

NAMESPACES = ("default", "tenant-b")


def shared_ids_store(url: str) -> MemoryStore:
    """Both namespaces hold 'water' and 'prague' and record episodes 'same' and 'e0'..'e7' (the same
    ids in both), with different outcomes: 18 episodes, 9 ids."""
    tick = itertools.count(1_700_000_000, 3)
    store = MemoryStore.open(url, encoder=HashingEncoder(), seed=1, clock=lambda: float(next(tick)))
    for ns in NAMESPACES:
        store.add("Water boils at 100 degrees Celsius at sea level.", id="water", namespace=ns)
        store.add("Prague is the capital of the Czech Republic.", id="prague", namespace=ns)
    for ns in NAMESPACES:
        store.recall("water boils", k=2, namespace=ns, episode_id="same")
    store.record("same", True, namespace="default")
    store.record("same", False, namespace="tenant-b")
    for i in range(8):
        for n, ns in enumerate(NAMESPACES):
            store.recall("capital city" if i % 2 else "water", k=2, namespace=ns, episode_id=f"e{i}")
            store.record(f"e{i}", i % 3 != 0 if n == 0 else i >= 6, namespace=ns)
    return store


def counts_of(store: MemoryStore) -> dict[tuple[str, str], tuple[float, float, float]]:
    return {
        (ns, m.id): (m.counts.success, m.counts.failure, m.counts.n)
        for ns in NAMESPACES
        for m in store.list(namespace=ns)
        if m.counts.n > 0
    }


@pytest.fixture
def pg_store(tmp_path):
    s = shared_ids_store(url_for("postgres", tmp_path))
    yield s
    drop(s)


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_a_postgres_export_with_one_id_in_two_namespaces_scores_as_the_store_counts(pg_store, tmp_path, fmt) -> None:
    path = tmp_path / f"log.{fmt}"
    rows = export_log(pg_store.backend, path, fmt)
    assert rows == 18 * 2  # both namespaces' 'same' and e0..e7, two items each
    want = counts_of(pg_store)
    assert want[("default", "water")] != want[("tenant-b", "water")]  # the namespaces' counts differ
    scored = score_files([str(path)], ScoreSettings(Counting("given"))).table.to_pylist()
    got = {(r["namespace"], r["memory_id"]): (r["success"], r["failure"], r["n"]) for r in scored}
    assert got.keys() == want.keys()
    for key, counts in want.items():
        np.testing.assert_allclose(got[key], counts, rtol=1e-9, err_msg=str(key))


def test_importing_it_into_a_fresh_postgres_store_gives_the_same_counts_and_replay(pg_store, tmp_path) -> None:
    path = tmp_path / "log.parquet"
    export_log(pg_store.backend, path, "parquet")
    copy = MemoryStore.open(url_for("postgres", tmp_path), encoder=HashingEncoder())
    try:
        added, episodes, rows = import_log(copy.backend, [str(path)], ScoreSettings(Counting("given")))
        assert (added, episodes, rows) == (4, 18, 36)
        report = copy.replay()
        assert report.consistent and report.outcomes == 18
        got = counts_of(copy)
        want = counts_of(pg_store)
        assert got.keys() == want.keys()
        for key, counts in want.items():
            np.testing.assert_allclose(got[key], counts, rtol=1e-9, err_msg=str(key))
        with pytest.raises(Exception, match="in the store already"):  # the same (namespace, id) again
            import_log(copy.backend, [str(path)], ScoreSettings(Counting("given")))
    finally:
        drop(copy)


def _write(path, rows: list[tuple[str, str, str, float, str]]) -> str:
    """A Parquet log of (episode_id, memory_id, outcome, timestamp, namespace) rows."""
    names = ("episode_id", "memory_id", "outcome", "timestamp", "namespace")
    pq.write_table(pa.table({n: [r[i] for r in rows] for i, n in enumerate(names)}), str(path))
    return str(path)


def test_inside_one_namespace_an_episode_still_has_one_outcome_and_each_memory_once(tmp_path) -> None:
    ok = [("same", "water", "success", 1.0, "default"), ("same", "water", "failure", 2.0, "tenant-b")]
    scored = score_files([_write(tmp_path / "ok.parquet", ok)], ScoreSettings()).table.to_pylist()
    assert [(r["namespace"], r["success"], r["failure"]) for r in scored] == [("default", 1, 0), ("tenant-b", 0, 1)]

    clash = [*ok, ("same", "prague", "success", 2.0, "tenant-b")]
    with pytest.raises(LogError, match=r"row 3: episode 'same' in namespace 'tenant-b' has two different values") as e:
        score_files([_write(tmp_path / "clash.parquet", clash)], ScoreSettings())
    assert (e.value.row, e.value.column) == (3, "outcome")

    dup = [*ok, ("same", "water", "failure", 2.0, "tenant-b")]
    with pytest.raises(LogError, match=r"row 3: memory 'water' appears twice in episode 'same' in namespace") as e:
        score_files([_write(tmp_path / "dup.parquet", dup)], ScoreSettings())
    assert e.value.column == "memory_id"


def test_a_state_file_keeps_episodes_by_namespace_and_id(tmp_path) -> None:
    state = tmp_path / "state.duckdb"
    first = _write(tmp_path / "a.parquet", [("same", "water", "success", 1.0, "default")])
    score_files([first], ScoreSettings(), state=state)
    later = _write(tmp_path / "b.parquet", [("same", "water", "failure", 2.0, "tenant-b")])
    run = score_files([first, later], ScoreSettings(), state=state)
    assert run.files_read == [later] and run.episodes_added == 1
    again = _write(tmp_path / "c.parquet", [("same", "prague", "failure", 3.0, "tenant-b")])
    with pytest.raises(LogError, match="episode 'same' in namespace 'tenant-b' was scored in an earlier run"):
        score_files([again], ScoreSettings(), state=state)


@pytest.mark.parametrize("old", ["2", None])
def test_an_older_state_file_is_rekeyed_with_its_episodes(tmp_path, old) -> None:
    """A state written before version 3 (version 2, or 1, which wrote no version) keyed episodes by
    id alone: its kept episodes move to the (namespace, episode_id) key, and a later run may add
    the same id in another namespace."""
    state = tmp_path / "state.duckdb"
    first = _write(tmp_path / "a.parquet", [("same", "water", "success", 1.0, "default")])
    score_files([first], ScoreSettings(), state=state)
    con = duckdb.connect(str(state))
    try:  # back to the older layout: the episode table keyed by id alone
        con.execute("CREATE TABLE old AS SELECT * FROM episodes")
        con.execute("DROP TABLE episodes")
        con.execute(
            "CREATE TABLE episodes (namespace VARCHAR, pos BIGINT, episode_id VARCHAR PRIMARY KEY, ts DOUBLE, "
            "success BOOLEAN, confidence DOUBLE, source VARCHAR, context VARCHAR)"
        )
        con.execute("INSERT INTO episodes SELECT * FROM old")
        con.execute("DROP TABLE old")
        if old is None:
            con.execute("DELETE FROM settings WHERE key = 'version'")
        else:
            con.execute("UPDATE settings SET value = ? WHERE key = 'version'", [old])
    finally:
        con.close()
    later = _write(tmp_path / "b.parquet", [("same", "water", "failure", 2.0, "tenant-b")])
    run = score_files([first, later], ScoreSettings(), state=state)
    assert run.episodes_added == 1
    got = {(r["namespace"], r["memory_id"]): (r["success"], r["failure"]) for r in run.table.to_pylist()}
    assert got == {("default", "water"): (1, 0), ("tenant-b", "water"): (0, 1)}
    con = duckdb.connect(str(state))
    try:
        create_tables(con, Counting())
        assert con.execute("SELECT value FROM settings WHERE key = 'version'").fetchall() == [(str(VERSION),)]
        assert con.execute("SELECT namespace, episode_id FROM episodes ORDER BY namespace").fetchall() == [
            ("default", "same"),
            ("tenant-b", "same"),
        ]
    finally:
        con.close()


def test_a_store_that_keys_episodes_by_id_alone_refuses_such_a_log_before_writing(tmp_path) -> None:
    """SQLite keeps an episode id unique across namespaces: importing one id in two namespaces
    is refused up front (nothing written), not half-way at the second episode."""
    log = _write(
        tmp_path / "log.parquet",
        [("same", "water", "success", 1.0, "default"), ("same", "water", "failure", 2.0, "tenant-b")],
    )
    with MemoryStore.open(f"sqlite:///{tmp_path / 'store.db'}", encoder=HashingEncoder()) as store:
        with pytest.raises(ValidationError, match="'same' is in namespaces 'default' and 'tenant-b' of the log"):
            import_log(store.backend, [log], ScoreSettings())
        assert [store.list(namespace=ns) for ns in NAMESPACES] == [[], []]
        assert list(store.backend.outcome_log()) == [] and store.backend.episodes(["same"]) == {}
        one = _write(tmp_path / "one.parquet", [("same", "water", "failure", 2.0, "tenant-b")])
        assert import_log(store.backend, [one], ScoreSettings())[1] == 1
        other = _write(tmp_path / "other.parquet", [("same", "water", "success", 3.0, "default")])
        with pytest.raises(ValidationError, match="episode 'same' in namespace 'tenant-b' is in the store already"):
            import_log(store.backend, [other], ScoreSettings())
