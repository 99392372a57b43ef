"""The store commands of the ``memworth`` CLI, run in-process against a throwaway SQLite file."""

from __future__ import annotations

import io
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
    assert (
        run(capsys, "add", "Use list.reverse() to reverse a Python list.", "--id", "rev", *s, "--encoder", "hashing")[0]
        == 0
    )
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
    applied = json.loads(out)["applied"]
    (seq,) = [a["seq"] for a in applied if a["memory_id"] == "cz" and a["new"] == "deprecated"]
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
    # one audit entry per change: each applied by govern, and the restore
    assert kinds.count("memory") == 3 and kinds.count("outcome") == recorded and kinds.count("audit") == len(applied) + 1


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
def test_errors_are_one_line_with_the_reason(
    capsys: pytest.CaptureFixture[str], url: str, argv: list[str], needle: str
) -> None:
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


def test_add_file_stores_every_line_in_one_call(
    capsys: pytest.CaptureFixture[str], url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = [
        json.dumps({"id": "rev", "text": "Use list.reverse() to reverse a Python list.", "contexts": ["py"]}),
        "",
        json.dumps({"text": "Prague is in Czechia.", "metadata": {"src": "atlas"}, "derived_from": ["rev"]}),
    ]
    path = tmp_path / "memories.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    s = ("--store", url, "--encoder", "hashing")
    code, out, err = run(capsys, "add", "--file", str(path), *s, "--namespace", "kb", "--json")
    assert code == 0 and err == ""  # no terminal, no progress bar
    added = json.loads(out)
    assert added["added"] == 2 and added["ids"][0] == "rev"
    code, out, _ = run(capsys, "show", added["ids"][1], *s, "--namespace", "kb", "--json")
    shown = json.loads(out)
    assert (shown["text"], shown["metadata"], shown["derived_from"]) == (
        "Prague is in Czechia.",
        {"src": "atlas"},
        ["rev"],
    )
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps({"text": "from stdin"}) + "\n"))
    code, out, _ = run(capsys, "add", "--file", "-", *s, "--namespace", "kb")
    assert code == 0 and out.strip() == "added 1 memories"
    assert len(json.loads(run(capsys, "list", *s, "--namespace", "kb", "--json")[1])) == 3


@pytest.mark.parametrize(
    ("content", "extra", "needle"),
    [
        ('{"text": "ok"}\nnot json\n', [], "--file: line 2 is not JSON"),
        ("\n\n", [], "--file: holds no memories"),
        ('{"text": "ok"}\n{"id": "x"}\n', [], "items[1]"),
        ('{"text": "ok"}\n', ["--id", "a"], "drop --id"),
        ('{"text": "ok"}\n', ["some text"], "drop TEXT"),
        (b"\xff\xfe{", [], "is not UTF-8"),
    ],
)
def test_add_file_refuses_bad_input_and_writes_nothing(
    capsys: pytest.CaptureFixture[str], url: str, tmp_path: Path, content: str | bytes, extra: list[str], needle: str
) -> None:
    path = tmp_path / "bad.jsonl"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    s = ("--store", url, "--encoder", "hashing")
    code, _, err = run(capsys, "add", "--file", str(path), *extra, *s)
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1
    assert json.loads(run(capsys, "list", *s, "--json")[1]) == []


def test_add_without_text_or_file_names_the_field(capsys: pytest.CaptureFixture[str], url: str) -> None:
    code, _, err = run(capsys, "add", "--store", url, "--encoder", "hashing")
    assert code == 2 and "text" in err and "--file" in err
    code, _, err = run(capsys, "add", "--file", "/nonexistent/m.jsonl", "--store", url, "--encoder", "hashing")
    assert code == 2 and "cannot be read" in err
