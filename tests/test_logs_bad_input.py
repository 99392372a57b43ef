"""Bad logs are refused with the file, row and column named, and a refused run writes nothing."""

from __future__ import annotations

import pytest

from memworth.cli import main
from memworth.logs import ScoreSettings, score_files
from memworth.logs.read import LogError
from memworth.logs.state import Counting

pytest.importorskip("duckdb")

GOOD = "episode_id,memory_id,outcome,timestamp,score\ne1,a,success,1,0.5\ne1,b,success,1,0.5\ne2,a,failure,2,1\n"

CASES = {
    "missing column": ("episode_id,memory_id,timestamp\ne1,a,1\n", None, "outcome", "is missing"),
    "wrong type": (
        "episode_id,memory_id,outcome,timestamp,score\ne1,a,success,1,0.5\ne2,a,success,x,1\n",
        2,
        "timestamp",
        "got 'x'",
    ),
    "bad score": (
        "episode_id,memory_id,outcome,timestamp,score\ne1,a,success,1,high\n",
        1,
        "score",
        "must be a number",
    ),
    "outcome": ("episode_id,memory_id,outcome,timestamp\ne1,a,success,1\ne2,a,maybe,2\n", 2, "outcome", "got 'maybe'"),
    "duplicate row": (
        "episode_id,memory_id,outcome,timestamp\ne1,a,success,1\ne1,b,success,1\ne1,a,success,1\n",
        3,
        "memory_id",
        "appears twice",
    ),
    "two outcomes": (
        "episode_id,memory_id,outcome,timestamp\ne1,a,success,1\ne1,b,failure,1\n",
        2,
        "outcome",
        "two different values",
    ),
    "context": (
        "episode_id,memory_id,outcome,timestamp,context\ne1,a,success,1,work\ne1,b,success,1,\n",
        2,
        "context",
        "two different values",
    ),
    "confidence": (
        "episode_id,memory_id,outcome,timestamp,confidence\ne1,a,success,1,1.5\n",
        1,
        "confidence",
        "(0, 1]",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_refused_with_file_row_and_column(tmp_path, case) -> None:
    text, row, column, words = CASES[case]
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(LogError) as info:
        score_files([str(path)], ScoreSettings())
    err = info.value
    assert (err.file, err.row, err.column) == (str(path), row, column)
    assert words in str(err)


def test_refused_run_writes_nothing_to_out_or_state(tmp_path, capsys) -> None:
    good, bad = tmp_path / "good.csv", tmp_path / "bad.csv"
    good.write_text(GOOD)
    bad.write_text("episode_id,memory_id,outcome,timestamp\ne9,a,success,5\ne9,b,failure,5\n")
    state, out = tmp_path / "state.duckdb", tmp_path / "out"
    assert main(["score", str(good), "--state", str(state), "--quiet"]) == 0
    before = state.read_bytes()
    assert main(["score", str(good), str(bad), "--state", str(state), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{bad}, row 2" in err and "outcome" in err
    assert state.read_bytes() == before
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.csv", "good.csv", "state.duckdb"]


def test_episode_in_the_state_is_refused(tmp_path) -> None:
    first, again = tmp_path / "a.csv", tmp_path / "b.csv"
    first.write_text(GOOD)
    again.write_text("episode_id,memory_id,outcome,timestamp\ne3,a,success,3\ne2,c,failure,3\n")
    state = tmp_path / "s.duckdb"
    score_files([str(first)], ScoreSettings(), state=state)
    with pytest.raises(LogError, match=r"b\.csv, row 2: episode 'e2' was scored in an earlier run"):
        score_files([str(again)], ScoreSettings(), state=state)


def test_credit_by_score_needs_the_column_and_a_positive_sum(tmp_path) -> None:
    path = tmp_path / "log.csv"
    path.write_text("episode_id,memory_id,outcome,timestamp\ne1,a,success,1\n")
    with pytest.raises(LogError, match="needed by --credit score"):
        score_files([str(path)], ScoreSettings(Counting("score")))
    path.write_text(
        "episode_id,memory_id,outcome,timestamp,score\ne1,a,success,1,1\ne2,a,success,2,0\ne2,b,success,2,0\n"
    )
    with pytest.raises(LogError, match=r"row 2: sum to zero") as info:
        score_files([str(path)], ScoreSettings(Counting("score")))
    assert info.value.column == "score"


def test_unknown_mapping_and_format(tmp_path) -> None:
    path = tmp_path / "log.txt"
    path.write_text(GOOD)
    assert main(["score", str(path)]) == 2
    assert main(["score", str(path), "--format", "csv", "--column", "episode=e", "--quiet"]) == 2
    assert main(["score", str(path), "--format", "csv", "--quiet"]) == 0


def test_parquet_rows_are_counted_in_the_file(tmp_path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "log.parquet"
    outcomes = ["success"] * 5000 + ["perhaps"] + ["failure"] * 10
    table = pa.table(
        {
            "episode_id": [f"e{i}" for i in range(len(outcomes))],
            "memory_id": ["m"] * len(outcomes),
            "outcome": outcomes,
            "timestamp": [float(i) for i in range(len(outcomes))],
        }
    )
    pq.write_table(table, str(path), row_group_size=1000)
    with pytest.raises(LogError) as info:
        score_files([str(path)], ScoreSettings())
    assert (info.value.row, info.value.column) == (5001, "outcome") and "'perhaps'" in str(info.value)


def _parquet(path, outcomes, start=0, **more) -> str:
    import pyarrow as pa
    import pyarrow.parquet as pq

    n = len(outcomes)
    columns = {
        "episode_id": [f"e{start + i}" for i in range(n)],
        "memory_id": [f"m{i % 3}" for i in range(n)],
        "outcome": outcomes,
        "timestamp": [float(start + i) for i in range(n)],
    }
    pq.write_table(pa.table(columns | more), str(path), row_group_size=100)
    return str(path)


def test_parquet_files_read_in_one_scan_name_the_file_of_the_bad_row(tmp_path) -> None:
    """Parquet files with the same columns are read in one scan; a bad value is still
    refused with its own file and its row in that file, the first file's before a later one's."""
    a = _parquet(tmp_path / "a.parquet", ["success"] * 300)
    b = _parquet(tmp_path / "b.parquet", ["failure"] * 250 + ["perhaps"] + ["success"] * 10, start=300)
    c = _parquet(tmp_path / "c.parquet", ["never"] + ["success"] * 5, start=600)
    with pytest.raises(LogError) as info:
        score_files([a, b, c], ScoreSettings())
    assert (info.value.file, info.value.row, info.value.column) == (b, 251, "outcome")
    assert "'perhaps'" in str(info.value)
    with pytest.raises(LogError) as info:
        score_files([a, c], ScoreSettings())
    assert (info.value.file, info.value.row) == (c, 1)


def test_parquet_files_in_one_scan_score_as_one_by_one(tmp_path) -> None:
    """The same rows give the same table whether their files share a scan (same columns) or
    not (a file with an extra column is read alone)."""
    a = _parquet(tmp_path / "a.parquet", ["success", "failure"] * 150)
    b = _parquet(tmp_path / "b.parquet", ["failure", "success", "success"] * 50, start=300)
    c = _parquet(tmp_path / "c.parquet", ["failure", "success", "success"] * 50, start=300, note=["x"] * 150)
    together = score_files([a, b], ScoreSettings()).table
    alone = score_files([a, c], ScoreSettings()).table
    assert together.to_pylist() == alone.to_pylist()
    assert score_files([a, b], ScoreSettings()).rows_read == 450


BLANKISH = ["a", " a", "a ", " ", "", "\u00a0", "\u3000 ", "\u2003x", "\t", "\n", "!", "~", "\x7f", "\x00", "é", None]


def test_an_empty_id_is_what_trim_leaves_empty() -> None:
    """The id check reads ``trim`` only for texts that do not begin with printable ASCII other
    than a space; on every kind of first character it says what ``trim(x) = ''`` says."""
    import duckdb

    from memworth.logs.read import _blank

    con = duckdb.connect()
    try:
        got = con.execute(
            f"SELECT x, {_blank('x', 'x')}, x IS NULL OR trim(x) = '' FROM (SELECT unnest(?::VARCHAR[]) AS x)",
            [BLANKISH],
        ).fetchall()
    finally:
        con.close()
    assert len(got) == len(BLANKISH)
    assert [(x, quick) for x, quick, _ in got] == [(x, full) for x, _, full in got]
    assert sum(full for _, _, full in got) == 5  # " ", "", a no-break space, an ideographic space and a null
