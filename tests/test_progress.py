"""Progress bars on long work (memworth.progress): replay, govern and import draw a bar with the
right totals when asked (on a file object here), nothing when not; the CLI verbs draw one only
when stderr is a terminal and --quiet is not given."""

from __future__ import annotations

import io
import re
import sys
from pathlib import Path

import pytest

from memworth import HashingEncoder, MemoryStore, ValidationError
from memworth.cli import main

pytest.importorskip("tqdm")


def counts(drawn: str, what: str) -> tuple[int, int]:
    """The last ``done/total`` a bar named ``what`` drew."""
    found = re.findall(rf"{what}:[^\r\n]*?(\d+)/(\d+)", drawn)
    assert found, drawn
    done, total = found[-1]
    return int(done), int(total)


def busy(url: str = "memory://") -> MemoryStore:
    """37 memories (two namespaces), 45 outcomes: 25 failures for 'cz' (a deprecate proposal)."""
    store = MemoryStore.open(url, encoder=HashingEncoder(), seed=0, exploration=0.0)
    store.add_many([{"id": f"m{i}", "text": f"note {i} about topic {i}"} for i in range(30)])
    store.add("Prague was the capital of Czechoslovakia.", id="cz")
    store.add_many([{"id": f"o{i}", "text": f"other {i}"} for i in range(6)], namespace="other")
    for _ in range(25):
        store.record(store.recall("capital of czechoslovakia", k=1).episode, success=False)
    for i in range(20):
        store.record(store.recall(f"topic {i}", k=1, namespace="other" if i % 2 else "default").episode, success=True)
    return store


def test_replay_draws_one_step_per_outcome() -> None:
    out = io.StringIO()
    with busy() as store:
        report = store.replay(progress=out)
    assert report.consistent and report.outcomes == 45
    assert counts(out.getvalue(), "outcomes replayed") == (45, 45)


def test_govern_draws_the_memories_decided_and_the_changes_applied() -> None:
    with busy() as store:
        out = io.StringIO()
        proposals = store.govern(namespace="default", progress=out).proposals
        assert counts(out.getvalue(), "memories decided") == (31, 31)  # the namespace's, not the store's
        assert "changes applied" not in out.getvalue()  # nothing is applied without apply
        out = io.StringIO()
        report = store.govern(apply=True, progress=out)
        assert counts(out.getvalue(), "changes applied") == (len(proposals), len(proposals)) and report.applied


def test_no_bar_unless_asked_and_a_bad_progress_is_refused_before_any_change(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with busy() as store:
        store.replay()
        store.govern()
        assert capsys.readouterr().err == ""
        for bad in ("yes", 1, object()):
            with pytest.raises(ValidationError, match="progress: must be True, False or a file object"):
                store.govern(apply=True, progress=bad)  # type: ignore[arg-type]
        assert store.audit() == []  # nothing was applied
        assert store.get("cz").status == "active"


def test_import_draws_the_files_and_the_episodes(tmp_path: Path) -> None:
    pytest.importorskip("duckdb")
    from memworth.logs import ScoreSettings
    from memworth.logs.state import Counting
    from memworth.logs.store_io import export_log, import_log

    with busy() as store:
        export_log(store.backend, tmp_path / "log.jsonl", "jsonl")
    out = io.StringIO()
    with MemoryStore.open("memory://", encoder=HashingEncoder()) as copy:
        _, episodes, _ = import_log(
            copy.backend, [str(tmp_path / "log.jsonl")], ScoreSettings(Counting("given")), progress=out
        )
    assert episodes == 45 and counts(out.getvalue(), "episodes imported") == (45, 45)
    assert counts(out.getvalue(), "files") == (1, 1)


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("terminal", [True, False])
def test_the_cli_draws_a_bar_on_a_terminal_unless_quiet(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, terminal: bool
) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    busy(url).close()
    for argv, what, total in ((["replay"], "outcomes replayed", 45), (["govern"], "memories decided", 31)):
        err = _Terminal() if terminal else io.StringIO()
        monkeypatch.setattr(sys, "stderr", err)
        assert main([*argv, "--store", url]) == 0
        if terminal:
            assert counts(err.getvalue(), what)[1] == total
        else:
            assert what not in err.getvalue()
        quiet = _Terminal()
        monkeypatch.setattr(sys, "stderr", quiet)
        assert main([*argv, "--store", url, "--quiet"]) == 0
        assert what not in quiet.getvalue()
