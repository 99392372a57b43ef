"""Files the CLI writes (``--out``, ``--state``): refused up front with the option named, written whole or not at all.

Each of these was a traceback (or a file half written, or a run's state kept while its
tables could not be) before :mod:`memworth.outputs`.
"""

from __future__ import annotations

import os
import stat

import pytest

from memworth.cli import main
from memworth.errors import ValidationError
from memworth.outputs import file_to_write, folder_to_write, written_whole

GOOD = "episode_id,memory_id,outcome,timestamp\ne1,a,success,1\ne1,b,success,1\ne2,a,failure,2\n"


@pytest.fixture
def store(tmp_path) -> str:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    assert main(["add", "water boils at 100 C", "--id", "water", "--store", url, "--encoder", "hashing"]) == 0
    return url


@pytest.mark.parametrize("fmt", [None, "jsonl", "csv", "parquet"])
def test_export_to_a_missing_folder_is_refused_naming_out(store, tmp_path, capsys, fmt) -> None:
    if fmt == "parquet":
        pytest.importorskip("pyarrow")
    target = tmp_path / "missing" / "log.out"
    argv = ["export", "--out", str(target), "--store", store] + (["--format", fmt] if fmt else [])
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("memworth: error: out: cannot write") and "does not exist" in err
    assert "Traceback" not in err and not target.parent.exists()


@pytest.mark.parametrize("fmt", [None, "jsonl"])
def test_export_to_a_folder_is_refused(store, tmp_path, capsys, fmt) -> None:
    argv = ["export", "--out", str(tmp_path), "--store", store] + (["--format", fmt] if fmt else [])
    assert main(argv) == 2
    assert "it is a folder" in capsys.readouterr().err


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_a_failed_export_leaves_the_old_file_whole(store, tmp_path, capsys, monkeypatch, fmt) -> None:
    pytest.importorskip("pyarrow")
    target = tmp_path / f"log.{fmt}"
    target.write_text("the previous export\n")
    import pyarrow.csv as pv
    import pyarrow.parquet as pq

    def half_then_fail(table, where, *args, **kwargs) -> None:
        with open(where, "w") as fh:
            fh.write("half a file")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(pq if fmt == "parquet" else pv, "write_table" if fmt == "parquet" else "write_csv", half_then_fail)
    assert main(["export", "--format", fmt, "--out", str(target), "--store", store]) == 2
    assert "No space left on device" in capsys.readouterr().err
    assert target.read_text() == "the previous export\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["store.db", target.name])


def test_score_refuses_an_out_that_is_a_file_before_writing_its_state(tmp_path, capsys) -> None:
    pytest.importorskip("duckdb")
    log, state, out = tmp_path / "log.csv", tmp_path / "state.duckdb", tmp_path / "taken"
    log.write_text(GOOD)
    out.write_text("not a folder")
    assert main(["score", str(log), "--state", str(state), "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "out: cannot write into" in err and "it is a file" in err
    assert not state.exists() and out.read_text() == "not a folder"


def test_score_refuses_a_state_in_a_missing_folder(tmp_path, capsys) -> None:
    pytest.importorskip("duckdb")
    log = tmp_path / "log.csv"
    log.write_text(GOOD)
    assert main(["score", str(log), "--state", str(tmp_path / "no" / "state.duckdb"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("memworth: error: state: cannot write") and "Traceback" not in err


def test_score_out_is_made_and_holds_only_whole_files(tmp_path, capsys) -> None:
    pytest.importorskip("duckdb")
    log, out = tmp_path / "log.csv", tmp_path / "a" / "b"
    log.write_text(GOOD)
    assert main(["score", str(log), "--out", str(out), "--quiet", "--no-figure"]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["worth.csv", "worth.parquet"]


@pytest.mark.parametrize("command", [["replay"], ["config", "show"], ["serve"]])
def test_store_wide_commands_refuse_a_namespace(store, capsys, command) -> None:
    # Their counters, settings and server are the store's: a --namespace would be ignored.
    with pytest.raises(SystemExit) as stop:
        main([*command, "--namespace", "tenant-a", "--store", store])
    assert stop.value.code == 2
    assert "unrecognized arguments: --namespace tenant-a" in capsys.readouterr().err


def test_written_whole_keeps_the_umask_mode_and_cleans_up_on_error(tmp_path) -> None:
    target = tmp_path / "f.txt"
    with written_whole(target, "out") as part:
        part.write_text("x")
    old = os.umask(0)
    os.umask(old)
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~old
    with pytest.raises(RuntimeError), written_whole(target, "out") as part:
        part.write_text("half")
        raise RuntimeError("stopped half way")
    assert target.read_text() == "x" and [p.name for p in tmp_path.iterdir()] == ["f.txt"]


def test_checks_name_the_field(tmp_path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(ValidationError, match=r"^state: cannot write .*: it is a folder"):
        file_to_write(tmp_path, "state")
    with pytest.raises(ValidationError, match=r"^out: cannot make the folder .*file/x: .*file is a file"):
        folder_to_write(tmp_path / "file" / "x", "out")
    assert folder_to_write(tmp_path / "new" / "deeper", "out") == tmp_path / "new" / "deeper"


@pytest.mark.parametrize("argv", [["reproduce", "exp1", "--quick"], ["demo", "--episodes", "200"]])
def test_reproduce_and_demo_refuse_an_out_that_is_a_file_before_running(tmp_path, capsys, argv) -> None:
    taken = tmp_path / "taken.csv"
    taken.write_text("keep me")
    assert main([*argv, "--out", str(taken)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("memworth: error: --out: cannot write into") and "Traceback" not in err
    assert taken.read_text() == "keep me"


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda s: s.govern(apply="no"), "apply"),
        (lambda s: s.govern(apply=1), "apply"),
        (lambda s: s.replay(apply="yes"), "apply"),
        (lambda s: s.follow_settings(now=None), "now"),
        (lambda s: s.edit("water", "boils at 100 C at sea level", reason="r", keep_old="no"), "keep_old"),
    ],
)
def test_switches_take_true_or_false_only(call, field) -> None:
    # govern(apply="no") applied every proposal: a non-empty string is truthy.
    from memworth import HashingEncoder, MemoryStore

    store = MemoryStore.open("memory://", encoder=HashingEncoder(), exploration=0.0)
    store.add("water boils at 100 C", id="water")
    for _ in range(30):
        store.record(store.recall("water", k=1).episode, success=False)
    with pytest.raises(ValidationError, match=f"^{field}: must be true or false"):
        call(store)
    assert store.get("water").status == "active" and store.audit() == []


def test_a_symlink_stays_a_link_and_an_existing_file_keeps_its_mode(tmp_path) -> None:
    real, link = tmp_path / "real.jsonl", tmp_path / "link.jsonl"
    real.write_text("old")
    real.chmod(0o600)  # an export holds memory text: who may read it is the owner's choice
    link.symlink_to(real)
    with written_whole(link, "out") as part:
        part.write_text("new")
    assert link.is_symlink() and real.read_text() == "new"
    assert stat.S_IMODE(real.stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.jsonl", "real.jsonl"]


def test_a_pipe_is_written_in_place(store, tmp_path) -> None:
    import threading

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    assert main(["export", "--out", str(fifo), "--store", store]) == 0
    reader.join(timeout=60)
    assert fifo.exists() and stat.S_ISFIFO(fifo.stat().st_mode)
    assert b'"id": "water"' in got[0]
