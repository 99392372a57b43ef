"""SQLite specifics: schema versioning, reopening, URL options."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from memworth import HashingEncoder, MemoryStore, StoreError, ValidationError
from memworth.store.backend import SCHEMA_VERSION


def test_reopening_is_idempotent_and_keeps_everything(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    with MemoryStore.open(url, encoder=HashingEncoder()) as s:
        s.add("kept across reopening", id="k")
        s.record(s.recall("kept", k=1).episode, True)
    for _ in range(2):
        with MemoryStore.open(url) as s:
            assert s.get("k").counts.n == 1 and s.replay().consistent
            assert s.backend.get_meta("schema_version") == str(SCHEMA_VERSION)


def test_a_newer_schema_is_refused_not_damaged(tmp_path: Path) -> None:
    path = tmp_path / "future.db"
    with MemoryStore.open(f"sqlite:///{path}", encoder=HashingEncoder()) as s:
        s.add("written by us", id="a")
    db = sqlite3.connect(path)
    db.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION + 1),))
    db.commit()
    db.close()
    with pytest.raises(StoreError, match="schema version"):
        MemoryStore.open(f"sqlite:///{path}")
    db = sqlite3.connect(path)
    assert db.execute("SELECT id FROM memories").fetchall() == [("a",)]


@pytest.mark.parametrize(
    ("url", "error"),
    [
        ("sqlite://", ValidationError),
        ("sqlite:///x.db?journal=off", ValidationError),
        ("sqlite:///x.db?synchronous=off", ValidationError),
        ("sqlite:////no/such/folder/x.db", StoreError),
    ],
)
def test_bad_urls_are_refused(url: str, error: type, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(error):
        MemoryStore.open(url, encoder=HashingEncoder())


def test_normal_synchronous_is_an_option(tmp_path: Path) -> None:
    with MemoryStore.open(f"sqlite:///{tmp_path / 'n.db'}?synchronous=normal", encoder=HashingEncoder()) as s:
        assert s.backend._db.execute("PRAGMA synchronous").fetchone()[0] == 1  # type: ignore[attr-defined]
