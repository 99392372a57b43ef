"""The store commands of the ``memworth`` CLI, run in-process against a throwaway SQLite file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memworth.cli import build_parser, main

README = Path(__file__).resolve().parents[1] / "README.md"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'cli.db'}"


def test_a_whole_session_through_the_cli(capsys: pytest.CaptureFixture[str], url: str, tmp_path: Path) -> None:
    s = ("--store", url)
    assert run(capsys, "add", "Use list.reverse() to reverse a Python list.", "--id", "rev", *s, "--encoder", "hashing")[0] == 0
    assert run(capsys, "add", "Prague was the capital of Czechoslovakia.", "--id", "cz", "--context", "geo", *s)[0] == 0
    code, out, _ = run(capsys, "add", "A derived note.", "--derived-from", "cz", "--metadata", '{"a": 1}', *s, "--json")
    assert code == 0 and json.loads(out)["derived_from"] == ["cz"]
    # Recall explores a low-evidence memory now and then (10% of slots), so keep going
    # until the Czechoslovakia memory itself has 25 failed retrievals (enough for the
    # namespace's error-controlled test of low worth).
    recorded = 0
    while json.loads(run(capsys, "show", "cz", *s, "--json")[1])["retrievals"] < 25:
        code, out, _ = run(capsys, "recall", "capital of czechoslovakia", "-k", "1", *s, "--json")
        episode = json.loads(out)["episode"]
        assert run(capsys, "record", episode, "failure", *s)[0] == 0
        recorded += 1
        assert recorded < 100
    code, out, _ = run(capsys, "show", "cz", *s, "--json")
    shown = json.loads(out)
    assert shown["failure"] > 0 and shown["class"] == "low"
    code, out, _ = run(capsys, "govern", *s)
    assert "deprecate" in out and "cz" in out
    code, out, _ = run(capsys, "govern", "--apply", *s, "--json")
    # Other changes may be applied in the same round (a standing change, the derived note):
    # undo the one that deprecated cz.
    (seq,) = [a["seq"] for a in json.loads(out)["applied"] if a["memory_id"] == "cz" and a["new"] == "deprecated"]
    assert json.loads(run(capsys, "list", "--status", "deprecated", *s, "--json")[1])[0]["id"] == "cz"
    assert run(capsys, "restore", str(seq), *s)[0] == 0
    assert json.loads(run(capsys, "show", "cz", *s, "--json")[1])["status"] == "active"
    code, out, _ = run(capsys, "replay", *s, "--json")
    assert code == 0 and json.loads(out)["consistent"] and json.loads(out)["outcomes"] == recorded
    stats = json.loads(run(capsys, "stats", *s, "--json")[1])
    assert stats["memories"] == 3 and stats["outcomes"] == recorded and stats["successes"] == 0
    target = tmp_path / "export.jsonl"
    assert run(capsys, "export", "--out", str(target), *s)[0] == 0
    kinds = [json.loads(line)["type"] for line in target.read_text().splitlines()]
    assert kinds.count("memory") == 3 and kinds.count("outcome") == recorded and kinds.count("audit") == 2


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["record", "no-such-episode", "success"], "unknown episode"),
        (["add", ""], "text"),
        (["add", "x", "--metadata", "{not json"], "--metadata"),
        (["show", "missing"], "unknown memory"),
        (["recall", "q", "-k", "0"], "k:"),
        (["restore", "7"], "no audit entry 7"),
    ],
)
def test_errors_are_one_line_with_the_reason(capsys: pytest.CaptureFixture[str], url: str, argv: list[str], needle: str) -> None:
    code, out, err = run(capsys, *argv, "--store", url, "--encoder", "hashing")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and needle in err and "Traceback" not in err


def test_a_bad_store_url_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "list", "--store", "mysql://nowhere")
    assert code == 2 and "unsupported store URL" in err


def test_every_command_is_documented_in_the_readme() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    readme = README.read_text()
    missing = [name for name in sub.choices if f"memworth {name}" not in readme]  # type: ignore[union-attr]
    assert not missing
