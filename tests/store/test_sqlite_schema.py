"""SQLite specifics: schema versioning, reopening, URL options."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest

from memworth import HashingEncoder, MemoryStore, StoreError, ValidationError
from memworth.store.backend import SCHEMA_VERSION
from memworth.store.sqlite import MIGRATIONS


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


def test_a_version_5_store_gains_a_settings_version_per_outcome(tmp_path: Path) -> None:
    """Schema 6: an outcome logged under schema 5 keeps its credit and reads with no settings
    version (logged before versions were kept); new ones name the version in force."""
    path = tmp_path / "v5.db"
    db = sqlite3.connect(path)
    for version in range(1, 6):
        db.executescript(MIGRATIONS[version])
    vector = np.asarray(HashingEncoder().encode(["Rivers flow to the sea."])[0], dtype=np.float32).tobytes()
    db.executescript(
        "INSERT INTO meta VALUES ('schema_version', '5'), ('generation', '0'), ('encoder', 'hashing-384'),"
        " ('dimension', '384');"
        "INSERT INTO episodes (id, namespace, query, context, created) VALUES ('old', 'default', 'rivers', NULL, 0);"
        "INSERT INTO episode_items (episode_id, position, memory_id, weight, propensity) VALUES ('old', 0, 'r', 1, 1);"
        "INSERT INTO outcomes (episode_id, success, source, confidence, recorded, namespace, propagation, max_hops)"
        " VALUES ('old', 1, 'explicit', 1.0, 1.0, 'default', 0.7, 3);"
    )
    db.execute(
        "INSERT INTO memories (namespace, id, seq, text, metadata, contexts, status, created, updated, success, n,"
        " embedding) VALUES ('default', 'r', 1, 'Rivers flow to the sea.', '{}', '[]', 'active', 0, 0, 1, 1, ?)",
        (vector,),
    )
    db.commit()
    db.close()
    url = f"sqlite:///{path}"
    with MemoryStore.open(url, encoder=HashingEncoder()) as store:
        assert store.backend.get_meta("schema_version") == str(SCHEMA_VERSION) == "9"
        (old,) = store.backend.outcome_log()
        assert (old.episode_id, old.propagation, old.max_hops, old.settings_version) == ("old", 0.7, 3, None)
        assert store.settings_version == 0  # never set: the defaults
        store.record(store.recall("rivers", k=1), True)
        assert store.configure({"recall.exploration": 0.0}, actor="ops") == 1
        store.record(store.recall("rivers", k=1), False)
        assert [o.settings_version for o in store.backend.outcome_log()] == [None, 0, 1]
        assert store.get("r").counts.n == 3 and store.replay().consistent
    with MemoryStore.open(url) as store:  # a second open finds nothing to do
        assert store.backend.get_meta("schema_version") == "9" and store.settings_version == 1
        assert [o.settings_version for o in store.backend.outcome_log()] == [None, 0, 1]
