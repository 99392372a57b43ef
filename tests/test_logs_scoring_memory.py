"""memworth score holds DuckDB to SCORING_MEMORY while change detection reads the kept log
(DuckDB lets go of the pages the sums cached) and gives the run's cap back afterwards."""

from __future__ import annotations

import pytest

import memworth.logs.score as score
from memworth.governance import GovernancePolicy
from memworth.logs import ScoreSettings, score_files
from tests.test_logs_detectors import parts

duckdb = pytest.importorskip("duckdb")


def _cap(con: object) -> float:
    got = score._setting_bytes(con.execute("SELECT current_setting('memory_limit')").fetchall()[0][0])  # type: ignore[attr-defined]
    assert got is not None
    return got


@pytest.mark.parametrize(
    ("limit", "detect", "lowered"), [("4GB", True, True), ("500MB", True, False), ("4GB", False, False), (None, True, True)]
)
def test_duckdb_is_capped_while_scoring_with_detectors(tmp_path, monkeypatch, limit, detect, lowered) -> None:
    seen: list[float] = []
    original = score.score_state

    def spying(con, settings, *, progress=False):  # type: ignore[no-untyped-def]
        seen.append(_cap(con))
        return original(con, settings, progress=progress)

    after: list[float] = []
    close = score._connect

    def connect(path, memory_limit=None):  # type: ignore[no-untyped-def]
        con = close(path, memory_limit)
        after.append(_cap(con))
        return con

    monkeypatch.setattr(score, "score_state", spying)
    monkeypatch.setattr(score, "_connect", connect)
    files = parts(tmp_path)
    settings = ScoreSettings(policy=GovernancePolicy(change_detection=detect))
    run = score_files(files, settings, memory_limit=limit)
    assert run.table.num_rows > 0
    if lowered:
        assert seen == [pytest.approx(score.SCORING_MEMORY, rel=0.01)] and after[0] > score.SCORING_MEMORY
    else:
        assert seen == after  # the run's own cap throughout


def test_the_runs_cap_is_given_back(tmp_path) -> None:
    con = duckdb.connect()
    con.execute("SET memory_limit = '4GB'")
    with score._scoring_memory(con, "4GB", True):
        assert _cap(con) <= score.SCORING_MEMORY
    assert _cap(con) == pytest.approx(4e9, rel=0.03)
    con.execute("RESET memory_limit")
    default = _cap(con)
    with score._scoring_memory(con, None, True):
        assert _cap(con) <= score.SCORING_MEMORY
    assert _cap(con) == default
    with score._scoring_memory(con, None, False):
        assert _cap(con) == default
