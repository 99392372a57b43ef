"""The `memworth` command: version, plugin commands, and one-line errors with exit code 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

import memworth
import memworth.cli
from memworth.cli import build_parser, main

SCRIPT = Path(sys.executable).with_name("memworth")


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=60)


def test_version_via_script() -> None:
    assert SCRIPT.exists()
    out = _run(str(SCRIPT), "--version")
    assert out.returncode == 0
    assert out.stdout.strip() == f"memworth {memworth.__version__}"


def test_version_via_main(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.strip() == f"memworth {memworth.__version__}"


def test_no_command_prints_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 0
    out = capsys.readouterr().out
    assert "usage: memworth" in out
    assert "reproduce" in out  # found through the memworth.commands entry point


def test_unknown_experiment_is_a_one_line_error_without_traceback() -> None:
    out = _run(sys.executable, "-m", "memworth.cli", "reproduce", "exp9")
    assert out.returncode != 0
    assert "Traceback" not in out.stderr
    errors = [line for line in out.stderr.splitlines() if "error" in line]
    assert len(errors) == 1
    assert errors[0] == out.stderr.strip().splitlines()[-1]
    assert "exp9" in errors[0]
    assert out.stdout == ""


def test_too_few_seeds_exits_2_naming_seeds(tmp_path: Path) -> None:
    target = tmp_path / "out"
    out = _run(str(SCRIPT), "reproduce", "exp4", "--seeds", "1", "--quick", "--out", str(target))
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("memworth: error: --seeds")
    assert not target.exists()  # refused before anything ran or was written


def test_too_few_seeds_via_main(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["reproduce", "exp4", "--seeds", "1", "--quick", "--out", str(tmp_path / "o"), "--no-progress"])
    assert code == 2
    captured = capsys.readouterr()
    assert captured.err.count("\n") == 1
    assert "--seeds" in captured.err
    assert "must be at least 2" in captured.err


class _FakeEntryPoint:
    def __init__(self, name: str, load: object) -> None:
        self.name = name
        self._load = load

    def load(self) -> object:
        return self._load()  # type: ignore[operator]


def _fake_entry_points(*eps: _FakeEntryPoint):  # type: ignore[no-untyped-def]
    def entry_points(group: str) -> list[_FakeEntryPoint]:
        assert group == "memworth.commands"
        return list(eps)

    return entry_points


def test_plugin_with_missing_dependency_is_a_one_line_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken() -> None:
        raise ImportError("No module named 'fancy'")

    monkeypatch.setattr(memworth.cli, "entry_points", _fake_entry_points(_FakeEntryPoint("fancy", broken)))
    assert main(["fancy"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("memworth: error: 'fancy' needs optional dependencies")
    assert "pip install" in err


def test_memworth_errors_from_a_command_become_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def handler(args: object) -> int:
        raise memworth.ValidationError("--thing", "is wrong")

    def register(commands: object) -> None:
        sub = commands.add_parser("boom")  # type: ignore[attr-defined]
        sub.set_defaults(handler=handler)

    monkeypatch.setattr(memworth.cli, "entry_points", _fake_entry_points(_FakeEntryPoint("boom", lambda: register)))
    assert main(["boom"]) == 2
    assert capsys.readouterr().err == "memworth: error: --thing: is wrong\n"


def test_handler_return_value_is_the_exit_code(monkeypatch: pytest.MonkeyPatch) -> None:
    def register(commands: object) -> None:
        sub = commands.add_parser("three")  # type: ignore[attr-defined]
        sub.set_defaults(handler=lambda args: 3)
        sub = commands.add_parser("none")  # type: ignore[attr-defined]
        sub.set_defaults(handler=lambda args: None)

    monkeypatch.setattr(memworth.cli, "entry_points", _fake_entry_points(_FakeEntryPoint("x", lambda: register)))
    assert main(["three"]) == 3
    assert main(["none"]) == 0


def test_other_exceptions_are_not_swallowed(monkeypatch: pytest.MonkeyPatch) -> None:
    def register(commands: object) -> None:
        sub = commands.add_parser("bug")  # type: ignore[attr-defined]
        sub.set_defaults(handler=lambda args: 1 / 0)

    monkeypatch.setattr(memworth.cli, "entry_points", _fake_entry_points(_FakeEntryPoint("x", lambda: register)))
    with pytest.raises(ZeroDivisionError):
        main(["bug"])


def test_parser_lists_the_reproduce_command() -> None:
    parser = build_parser()
    ns = parser.parse_args(["reproduce", "exp1", "--seeds", "3", "--quick"])
    assert ns.command == "reproduce"
    assert ns.seeds == 3 and ns.quick is True
    assert callable(SimpleNamespace(f=ns.handler).f)
