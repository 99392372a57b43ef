"""``memworth demo`` end to end, shortened, on the real model and an embedded SQLite store."""

from __future__ import annotations

from pathlib import Path

import pytest

from memworth import MemoryStore
from memworth.cli import main


def test_demo_reports_governance_and_writes_its_figures(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "demo"
    assert main(["demo", "--episodes", "600", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    for heading in ("What governance did", "Staleness", "governed vs ungoverned", "lift"):
        assert heading in printed
    assert "re-verify stale" in printed  # the memory the shift made wrong is flagged
    assert "counters equal a replay of the log: governed True, ungoverned True" in printed
    # the demo's store has the default holdout share (0): it says the guard had nothing to compare with
    assert "governed store: the holdout guard did not run (no holdout share" in printed
    for name in ("worth.png", "success.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with MemoryStore.open(f"sqlite:///{out / 'governed.db'}") as store:
        assert store.get("stale").standing == "re-verify"
        assert any(e.action == "re-verify" for e in store.audit("stale"))


def test_demo_refuses_a_run_too_short_for_the_shift(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--episodes", "50", "--out", str(tmp_path)]) == 2
    assert "--episodes" in capsys.readouterr().err
