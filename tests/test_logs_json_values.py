"""JSON lines logs whose rows mix value kinds are read by value, and nested values are refused.

DuckDB types a JSON lines column whose rows mix kinds ("a" in one row, 5 in another) as
JSON; read as its JSON spelling, the id "a" became the id '"a"' (quotes included), a
different memory, silently. An object or a list where an id or an outcome belongs was
read as its printed form ("{'x': 1}").
"""

from __future__ import annotations

import json

import pytest

from memworth.cli import main
from memworth.logs import ScoreSettings, score_files
from memworth.logs.read import LogError

pytest.importorskip("duckdb")


def _log(tmp_path, rows) -> str:
    path = tmp_path / "log.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def _row(episode, memory, outcome="success", ts=1, **more):
    return {"episode_id": episode, "memory_id": memory, "outcome": outcome, "timestamp": ts, **more}


def test_ids_of_mixed_kinds_are_their_values(tmp_path) -> None:
    log = _log(tmp_path, [_row("e1", "a"), _row("e1", 5), _row(7, "a", "failure", 2)])
    table = score_files([log], ScoreSettings()).table.to_pylist()
    assert sorted((r["memory_id"], r["n"]) for r in table) == [("5", 1.0), ("a", 2.0)]


def test_outcomes_and_times_of_mixed_kinds_are_read_by_value(tmp_path) -> None:
    rows = [_row("e1", "a", True, 1), _row("e2", "a", "failure", "2026-01-01T00:00:00"), _row("e3", "a", " Success ", 3)]
    (r,) = score_files([_log(tmp_path, rows)], ScoreSettings()).table.to_pylist()
    assert (r["success"], r["failure"]) == (2.0, 1.0)


@pytest.mark.parametrize(
    ("rows", "column", "row", "reason"),
    [
        ([_row("e1", "a"), _row("e2", {"x": 1})], "memory_id", 2, "not a JSON object or list"),
        ([_row("e1", ["a", "b"])], "memory_id", 1, "must be a single value, not VARCHAR[]"),
        ([_row("e1", {"x": 1})], "memory_id", 1, "must be a single value, not STRUCT"),
        ([_row({"id": 1}, "a")], "episode_id", 1, "must be a single value"),
        ([_row("e1", "a", {"ok": 1})], "outcome", 1, "must be a single value"),
        ([_row("e1", "a", "success", [1])], "timestamp", 1, "must be a single value"),
    ],
)
def test_nested_values_are_refused_with_row_and_column(tmp_path, rows, column, row, reason) -> None:
    log = _log(tmp_path, rows)
    with pytest.raises(LogError) as refused:
        score_files([log], ScoreSettings())
    text = str(refused.value)
    assert text.startswith(f"{column}: {log}, row {row}: ") and reason in text


def test_import_keeps_the_ids_as_written(tmp_path, capsys) -> None:
    log = _log(tmp_path, [_row("e1", "a"), _row("e2", 5, "failure", 2)])
    store = f"sqlite:///{tmp_path / 's.db'}"
    assert main(["import", log, "--store", store, "--encoder", "hashing", "--quiet"]) == 0
    capsys.readouterr()
    assert main(["list", "--store", store, "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert sorted(m["id"] for m in listed) == ["5", "a"]
