"""memworth score on Spark (a real local[2] session) equals DuckDB, the Tracker and the store.

One SparkSession is shared by the whole file (starting one takes ~10-45 s on this
machine). If Java or pyspark cannot start, the tests fail with the reason: they do not
skip, since the ``spark`` extra is part of ``dev``.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from memworth import Tracker
from memworth.cli import main
from memworth.governance import GovernancePolicy
from memworth.logs import ColumnMap, ScoreSettings, score_files
from memworth.logs.read import LogError
from memworth.logs.score import COLUMNS_OUT
from memworth.logs.state import Counting
from tests.test_logs_score import episodes

NAMESPACES = ("alpha", "beta")


@pytest.fixture(scope="session")
def spark():
    try:
        from memworth.spark import session

        s = session("local[2]", "memworth-tests")
        s.conf.set("spark.sql.shuffle.partitions", "4")  # a small log: 200 shuffle partitions would be mostly empty
        s.sparkContext.setLogLevel("ERROR")
    except Exception as exc:  # pragma: no cover - only when Spark cannot start
        pytest.fail(f"cannot start a local Spark session (needs pyspark from memworth[spark] and Java 17): {exc}")
    yield s


def namespaced_logs(
    tmp_path, *, count: int = 500, shared_ids: bool = False
) -> tuple[list[str], dict[str, dict[str, np.ndarray]]]:
    """Two Parquet files, two namespaces with contexts; memory 3 starts failing halfway.

    ``shared_ids``: both namespaces number their episodes ``e0``, ``e1``, ... (one id in two
    namespaces is two episodes, as PostgreSQL schema 7 keeps them); else ``alpha-0``, ...

    Namespace ``beta`` has outcomes of confidence 0.5 (every fifth episode); ``alpha``'s are
    all 1, so the Tracker (which has no confidence) can be fed ``alpha``'s rows.
    """
    files, eps = [], {}
    for f, ns in enumerate(NAMESPACES):
        ep = episodes(seed=10 + f, count=count, k=4, memories=30)
        eps[ns] = ep
        n, k = ep["ids"].shape
        table = {
            "episode_id": [f"e{e}" if shared_ids else f"{ns}-{e}" for e in range(n) for _ in range(k)],
            "memory_id": [f"m{m}" for row in ep["ids"] for m in row],
            "outcome": ["success" if ok else "failure" for ok in ep["success"] for _ in range(k)],
            # three episodes share each timestamp: the tie order (file, row) matters
            "timestamp": [1_700_000_000.0 + e // 3 for e in range(n) for _ in range(k)],
            "score": ep["scores"].ravel().tolist(),
            "namespace": [ns] * (n * k),
            "context": [("work" if e % 2 else "home") for e in range(n) for _ in range(k)],
            "confidence": [(0.5 if ns == "beta" and e % 5 == 0 else 1.0) for e in range(n) for _ in range(k)],
        }
        path = tmp_path / f"{ns}.parquet"
        pq.write_table(pa.table(table), str(path))
        files.append(str(path))
    return files, eps


def assert_same(got: pa.Table, want: pa.Table) -> dict[str, float]:
    """Every column equal: floats to 1e-9 relative, the rest exactly. Returns the worst relative gap per float column."""
    assert got.column_names == want.column_names == [name for name, _ in COLUMNS_OUT]
    assert got.schema == want.schema
    assert got.column("memory_id").to_pylist() == want.column("memory_id").to_pylist()
    gaps: dict[str, float] = {}
    for name, kind in COLUMNS_OUT:
        a, b = got.column(name).to_pylist(), want.column(name).to_pylist()
        if kind == "double":
            np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12, err_msg=name)
            gaps[name] = max(
                (abs(x - y) / max(abs(y), 1e-300) for x, y in zip(a, b, strict=True) if x != y), default=0.0
            )
        else:
            assert a == b, name
    return gaps


def test_spark_equals_duckdb_and_the_tracker_on_every_column(spark, tmp_path) -> None:
    from memworth.spark import read_files, score

    files, eps = namespaced_logs(tmp_path)
    settings = ScoreSettings(Counting("score", 0.05, 40.0), GovernancePolicy(deprecation="sequential"))
    df, labels = read_files(spark, files)
    got = score(df, settings, labels=labels).toArrow()
    want = score_files(files, settings).table
    gaps = assert_same(got, want)
    print("worst relative gap per column:", json.dumps(gaps))
    # The comparison means something: both namespaces, alarms, held alarms and several proposals.
    rows = got.to_pylist()
    assert {r["namespace"] for r in rows} == set(NAMESPACES)
    assert any(r["change_alarm"] for r in rows)
    assert len({r["action"] for r in rows if r["action"]}) >= 2
    # Tracker.record_batch on the same rows gives the same counts (alpha: every confidence is 1).
    for ns in ("alpha",):
        ep = eps[ns]
        tracker = Tracker(w_min=0.05, half_life=40.0)
        tracker.record_batch(ep["ids"], ep["success"], weights=ep["scores"])
        mine = {r["memory_id"]: r for r in rows if r["namespace"] == ns}
        assert set(mine) == {f"m{m}" for m in tracker.ids()}
        for m in tracker.ids():
            c, d = tracker.counts(m), tracker.counts(m, decayed=True)
            r = mine[f"m{m}"]
            np.testing.assert_allclose(
                [r["success"], r["failure"], r["n"], r["decayed_success"], r["decayed_failure"], r["decayed_n"]],
                [c.success, c.failure, c.n, d.success, d.failure, d.n],
                rtol=1e-9,
                atol=1e-12,
            )


@pytest.mark.slow
@pytest.mark.parametrize(("credit", "w_min"), [("uniform", 0.0), ("score", 0.0), ("given", 0.1)])
def test_spark_equals_duckdb_under_every_credit(spark, tmp_path, credit, w_min) -> None:
    from memworth.spark import read_files, score

    files, _ = namespaced_logs(tmp_path, count=300)
    columns = ColumnMap.parse(["weight=score"]) if credit == "given" else ColumnMap()
    settings = ScoreSettings(Counting(credit, w_min, 25.0), columns=columns)
    df, labels = read_files(spark, files)
    assert_same(score(df, settings, labels=labels).toArrow(), score_files(files, settings).table)


def test_one_episode_id_in_two_namespaces_is_two_episodes_as_in_duckdb(spark, tmp_path) -> None:
    """Issue 15: episodes are keyed by (namespace, episode_id) in Spark's checks, credit split and
    numbering as in DuckDB; score credit splits each namespace's episode over its own items."""
    from memworth.spark import read_files, score

    files, _ = namespaced_logs(tmp_path, count=120, shared_ids=True)
    settings = ScoreSettings(Counting("score", 0.0, 25.0))
    df, labels = read_files(spark, files)
    want = score_files(files, settings).table
    assert set(want.column("namespace").to_pylist()) == set(NAMESPACES)
    assert_same(score(df, settings, labels=labels).toArrow(), want)


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_text_logs_with_mapped_names_and_date_times(spark, tmp_path, fmt) -> None:
    """CSV (all text) and JSON lines with ISO date-times and the log's own column names: Spark reads them as DuckDB does."""
    from memworth.spark import read_files, score

    ep = episodes(seed=5, count=150)
    n, k = ep["ids"].shape
    rows = [
        {
            "trace": f"t{e}",
            "doc": f"m{ep['ids'][e][j]}",
            "result": ["failure", "success"][int(ep["success"][e])],
            "at": f"2026-01-01T00:{e // 60:02d}:{e % 60:02d}Z",
            "w": float(ep["scores"][e][j]),
        }
        for e in range(n)
        for j in range(k)
    ]
    path = tmp_path / f"log.{fmt}"
    if fmt == "csv":
        path.write_text(
            "trace,doc,result,at,w\n"
            + "".join(f"{r['trace']},{r['doc']},{r['result']},{r['at']},{r['w']!r}\n" for r in rows)
        )
    else:
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    columns = ColumnMap.parse(["episode_id=trace", "memory_id=doc", "outcome=result", "timestamp=at", "weight=w"])
    settings = ScoreSettings(Counting("given", 0.0, 20.0), columns=columns)
    df, labels = read_files(spark, [str(path)])
    assert_same(score(df, settings, labels=labels).toArrow(), score_files([str(path)], settings).table)


def test_a_dataframe_built_in_spark_with_mapped_names(spark) -> None:
    """score() on a DataFrame made in Spark (no files), with the log's own column names."""
    from memworth.spark import score

    rows = [(f"t{e}", f"d{(e * 7 + j) % 9}", e % 4 != 0, float(e), 1.0 + j) for e in range(120) for j in range(3)]
    df = spark.createDataFrame(rows, "trace string, doc string, ok boolean, at double, w double")
    columns = ColumnMap.parse(["episode_id=trace", "memory_id=doc", "outcome=ok", "timestamp=at", "weight=w"])
    got = score(df, ScoreSettings(Counting("given"), columns=columns)).toArrow()
    tracker = Tracker()
    for e in range(120):
        tracker.record([f"d{(e * 7 + j) % 9}" for j in range(3)], e % 4 != 0, weights=[1.0, 2.0, 3.0])
    for r in got.to_pylist():
        want = tracker.counts(r["memory_id"])
        assert math.isclose(r["success"], want.success, rel_tol=1e-9)
        assert math.isclose(r["failure"], want.failure, rel_tol=1e-9)
        assert r["n"] == want.n
    assert got.num_rows == 9


@pytest.mark.parametrize(
    ("change", "where", "column", "reason"),
    [
        (
            lambda t: t.update(outcome=["success", "maybe", *t["outcome"][2:]]),
            2,
            "outcome",
            "must be success or failure",
        ),
        (lambda t: t.update(memory_id=[t["memory_id"][0]] * 2 + t["memory_id"][2:]), 2, "memory_id", "appears twice"),
        (lambda t: t.update(outcome=["success", *t["outcome"][1:]]), 2, "outcome", "two different values"),
        (
            lambda t: t.update(confidence=[1.0] * 5 + [1.5] + [1.0] * (len(t["confidence"]) - 6)),
            6,
            "confidence",
            "(0, 1]",
        ),
    ],
)
def test_bad_input_is_refused_as_duckdb_refuses_it(spark, tmp_path, change, where, column, reason) -> None:
    from memworth.spark import read_files, score

    k = 3
    table: dict[str, list[object]] = {
        "episode_id": [f"e{e}" for e in range(40) for _ in range(k)],
        "memory_id": [f"m{(e + j) % 11}" for e in range(40) for j in range(k)],
        "outcome": ["success" if e % 3 else "failure" for e in range(40) for _ in range(k)],
        "timestamp": [float(e) for e in range(40) for _ in range(k)],
        "confidence": [1.0] * (40 * k),
    }
    change(table)
    path = tmp_path / "bad.parquet"
    pq.write_table(pa.table(table), str(path))
    with pytest.raises(LogError) as duck:
        score_files([str(path)], ScoreSettings())
    df, labels = read_files(spark, [str(path)])
    with pytest.raises(LogError) as sp:
        score(df, ScoreSettings(), labels=labels)
    assert (sp.value.file, sp.value.row, sp.value.column) == (duck.value.file, duck.value.row, duck.value.column)
    assert sp.value.row == where and column in sp.value.column and reason in str(sp.value)
    assert str(sp.value) == str(duck.value)


def test_a_missing_column_is_refused_before_scoring(spark, tmp_path) -> None:
    from memworth.spark import read_files, score

    path = tmp_path / "log.parquet"
    pq.write_table(pa.table({"episode_id": ["e1"], "memory_id": ["m1"], "timestamp": [1.0]}), str(path))
    df, labels = read_files(spark, [str(path)])
    with pytest.raises(LogError, match="column 'outcome' is missing") as sp:
        score(df, ScoreSettings(), labels=labels)
    assert sp.value.file == str(path) and sp.value.row is None


def test_cli_engine_spark_writes_what_duckdb_writes(spark, tmp_path, capsys) -> None:
    files, _ = namespaced_logs(tmp_path, count=200)
    common = ["--credit", "score", "--half-life", "30", "--no-figure", "--quiet"]
    assert main(["score", *files, "--out", str(tmp_path / "duck"), *common]) == 0
    assert main(["score", *files, "--engine", "spark", "--out", str(tmp_path / "spark"), *common]) == 0
    assert_same(pq.read_table(tmp_path / "spark" / "worth.parquet"), pq.read_table(tmp_path / "duck" / "worth.parquet"))
    assert (tmp_path / "spark" / "worth.csv").read_text().count("\n") == (
        tmp_path / "duck" / "worth.csv"
    ).read_text().count("\n")
    assert main(["score", *files, "--engine", "spark", "--state", str(tmp_path / "s.duckdb")]) == 2
    assert "--state is for --engine duckdb only" in capsys.readouterr().err
    assert not (tmp_path / "s.duckdb").exists()


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_spark_on_a_store_export_equals_the_store_and_its_replay(spark, tmp_path, backend) -> None:
    from memworth.logs.store_io import export_log
    from memworth.spark import read_files, score
    from tests.store.conftest import drop, url_for
    from tests.test_logs_store import busy_store

    store = busy_store(url_for(backend, tmp_path))
    try:
        path = tmp_path / "log.parquet"
        export_log(store.backend, path, "parquet")
        df, labels = read_files(spark, [str(path)])
        got = {
            r["memory_id"]: r for r in score(df, ScoreSettings(Counting("given")), labels=labels).toArrow().to_pylist()
        }
        memories = {m.id: m for m in store.list() if m.counts.n > 0}
        assert set(got) == set(memories)
        replayed = store.replay()
        assert replayed.consistent
        for mid, m in memories.items():
            rebuilt = replayed.rebuilt[("default", mid)]
            np.testing.assert_allclose(
                [got[mid]["success"], got[mid]["failure"], got[mid]["n"]],
                [m.counts.success, m.counts.failure, m.counts.n],
                rtol=1e-9,
            )
            np.testing.assert_allclose(
                [got[mid]["success"], got[mid]["failure"], got[mid]["n"]],
                [rebuilt.success, rebuilt.failure, rebuilt.n],
                rtol=1e-9,
            )
        proposals = {p.memory_id: (p.action, p.reason) for p in store.govern().proposals}
        assert {mid: (r["action"], r["reason"]) for mid, r in got.items() if r["action"]} == proposals
    finally:
        drop(store)


def test_spark_leaves_credit_0_items_out_of_streams_as_the_store_does(spark, tmp_path) -> None:
    """A store log with credit-0 items (memories shown, not used): Spark's CUSUM statistics,
    alarms and proposals are the store's (its window counts and streams are tested against
    the store on DuckDB, tests/test_logs_store.py), and every column is DuckDB's."""
    from memworth.logs.store_io import export_log
    from memworth.spark import read_files, score
    from tests.test_logs_store import used_store

    store = used_store(f"sqlite:///{tmp_path / 'store.db'}")
    try:
        path = tmp_path / "log.parquet"
        export_log(store.backend, path, "parquet")
        settings = ScoreSettings(Counting("given"), store.policy)
        df, labels = read_files(spark, [str(path)])
        table = score(df, settings, labels=labels).toArrow()
        assert_same(table, score_files([str(path)], settings).table)
        got = {r["memory_id"]: r for r in table.to_pylist()}
        streams = store.outcome_streams()
        assert len(streams["broken-01"]) < store.get("broken-01").counts.n  # shown and not used: no observation
        for mid, row in got.items():
            stream = streams.get(mid)
            reading = None if stream is None else stream.reading
            assert row["change_statistic"] == (0.0 if reading is None else reading.statistic), mid
        proposals = {mid: (p.action, p.reason) for mid, p in store.proposals().items() if p is not None}
        assert {mid: (r["action"], r["reason"]) for mid, r in got.items() if r["action"]} == proposals
        assert "broken-01" in proposals
    finally:
        store.close()


@pytest.mark.slow
def test_agreement_on_a_larger_log(spark, tmp_path) -> None:
    """Spark and DuckDB on a larger log (MEMWORTH_SPARK_EPISODES episodes, k=8; default 50,000 = 400,000 rows).

    Prints the worst relative gap of each float column and both engines' wall times
    (run with ``-s`` to see them); change detection is off at this size (the CUSUM is
    per-outcome Python in both engines and is covered by the smaller tests).
    """
    import os
    import time

    from memworth.spark import read_files, score

    count = int(os.environ.get("MEMWORTH_SPARK_EPISODES", "50000"))
    rng = np.random.default_rng(7)
    k, memories = 8, max(count // 10, 50)
    ids = np.argsort(rng.random((count, 64)), axis=1)[:, :k] + rng.integers(0, memories - 64, size=(count, 1))
    success = rng.random(count) < 0.7
    files = []
    for part, rows in enumerate(np.array_split(np.arange(count), 4)):
        table = {
            "episode_id": np.repeat(rows, k).astype(str),
            "memory_id": np.char.add("m", ids[rows].ravel().astype(str)),
            "outcome": np.repeat(success[rows], k),
            "timestamp": np.repeat(1_700_000_000.0 + rows // 2, k),
            "score": rng.random(rows.size * k) + 0.01,
            "namespace": np.repeat(np.where(rows % 3 == 0, "a", "b"), k),
        }
        path = tmp_path / f"part-{part}.parquet"
        pq.write_table(pa.table(table), str(path))
        files.append(str(path))
    settings = ScoreSettings(Counting("score", 0.02, 500.0), GovernancePolicy(change_detection=False))
    start = time.perf_counter()
    want = score_files(files, settings).table
    duck = time.perf_counter() - start
    start = time.perf_counter()
    df, labels = read_files(spark, files)
    got = score(df, settings, labels=labels).toArrow()
    on_spark = time.perf_counter() - start
    gaps = assert_same(got, want)
    worst = max(gaps.values())
    print(
        f"\n{count * k} rows, {got.num_rows} memories: DuckDB {duck:.1f} s, Spark local[2] {on_spark:.1f} s; "
        f"worst relative gap {worst:.2e}; classes and proposals equal"
    )
    print(json.dumps(gaps, indent=1))
    assert worst <= 1e-9


def test_an_episode_split_across_files_is_placed_by_its_first_row_as_in_duckdb(spark, tmp_path) -> None:
    """Episodes tied on time are ordered by their first row, (file, row) together: A starts at
    file 0 row 4 and goes on in file 1, B is file 0 rows 1-2, so B is placed first (the least file
    and the least row taken apart tied A with B, and the engines could order them differently)."""
    from memworth.spark import read_files, score

    f0, f1 = str(tmp_path / "f0.parquet"), str(tmp_path / "f1.parquet")
    pq.write_table(
        pa.table(
            {
                "episode_id": ["B", "B", "C", "A"],
                "memory_id": ["x", "y", "z", "a"],
                "outcome": ["success", "success", "failure", "failure"],
                "timestamp": [0.0, 0.0, 1.0, 0.0],
            }
        ),
        f0,
    )
    pq.write_table(pa.table({"episode_id": ["A"], "memory_id": ["b"], "outcome": ["failure"], "timestamp": [0.0]}), f1)
    settings = ScoreSettings(Counting(half_life=1.0))
    df, labels = read_files(spark, [f0, f1])
    got = score(df, settings, labels=labels).toArrow()
    decayed = dict(zip(got.column("memory_id").to_pylist(), got.column("decayed_n").to_pylist(), strict=True))
    assert decayed == {"a": 0.5, "b": 0.5, "x": 0.25, "y": 0.25, "z": 1.0}
    assert_same(got, score_files([f0, f1], settings).table)
