"""Settings versions across store objects: written atomically, and followed by the others.

Two store objects on one database stand for two processes (a server and ``memworth config
set``). On ``memory://`` they share one backend object. A version written while another
object was writing is never lost; a version another object kept is in force here at the
next recall, recording or governance (every call with ``settings_check_interval = 0``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from memworth import GovernancePolicy, HashingEncoder, MemoryStore
from memworth.errors import SettingsConflictError
from memworth.store import configuring

from .conftest import drop, url_for

KINDS = ["memory", "sqlite", "postgres"]


@pytest.fixture(params=KINDS)
def two(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[MemoryStore, MemoryStore]]:
    """Two store objects on one database (on memory://, one backend object)."""
    first = MemoryStore.open(url_for(str(request.param), tmp_path), encoder=HashingEncoder(), seed=0)
    if request.param == "memory":
        second = MemoryStore(first.backend, encoder=HashingEncoder(), seed=1)
    else:
        second = MemoryStore.open(first.backend.url, encoder=HashingEncoder(), seed=1)
    yield first, second
    second.close()
    drop(first)


def _after_read(store: MemoryStore, monkeypatch: pytest.MonkeyPatch, then: Callable[[], object]) -> list[int]:
    """Run ``then()`` once, right after the next read of the kept settings record by
    ``store``'s backend: another process writing between that read and the write that
    follows it. Returns ``[1]`` until it has run, then ``[0]``."""
    armed = [1]
    read = store.backend.get_meta

    def get_meta(key: str) -> str | None:
        value = read(key)
        if key == configuring.SETTINGS_KEY and armed[0]:
            armed[0] = 0
            then()
        return value

    monkeypatch.setattr(store.backend, "get_meta", get_meta)
    return armed


def test_compare_and_set_on_the_meta_table(two: tuple[MemoryStore, MemoryStore]) -> None:
    a, b = (s.backend for s in two)
    assert a.set_meta_if("k", None, "one")
    assert not b.set_meta_if("k", None, "two")  # it exists now: an insert that came second loses
    assert not b.set_meta_if("k", "zero", "two", {"side": "x"})  # not what it holds: nothing written
    assert a.get_meta("k") == "one" and a.get_meta("side") is None
    assert b.set_meta_if("k", "one", "two", {"side": "x"})
    assert (a.get_meta("k"), a.get_meta("side")) == ("two", "x")
    assert not a.set_meta_if("k", "one", "three")  # a stale read cannot overwrite
    assert b.get_meta("k") == "two"


def test_a_version_written_in_between_is_not_lost(
    two: tuple[MemoryStore, MemoryStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = two
    assert first.configure({"recall.exploration": 0.2}, actor="one") == 1
    # the other object keeps version 2 between first's read of version 1 and its write
    switch = _after_read(first, monkeypatch, lambda: second.configure({"credit.propagation": 0.3}, actor="two"))
    assert first.configure({"governance.change.threshold": 9}, actor="one") == 3
    assert switch[0] == 0  # it did run in between
    history = first.settings_history()
    assert [(v["version"], v["actor"]) for v in history] == [(1, "one"), (2, "two"), (3, "one")]
    assert history[2]["changed"] == ["governance.change.threshold"]  # against version 2, which it built on
    settings = first.settings
    assert (settings.recall.exploration, settings.credit.propagation, settings.governance.change.threshold) == (
        0.2,
        0.3,
        9,
    )
    assert second.config()["settings"] == settings.to_dict()


def test_writers_that_always_come_first_make_a_clear_conflict(
    two: tuple[MemoryStore, MemoryStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = two
    shares = iter([i / 100 for i in range(1, 100)])
    read = first.backend.get_meta

    inside = [False]  # on memory:// the two objects share the backend: the other's own reads pass

    def get_meta(key: str) -> str | None:  # every read of the record is followed by another's write
        value = read(key)
        if key == configuring.SETTINGS_KEY and not inside[0]:
            inside[0] = True
            try:
                second.configure({"holdout.share": next(shares)}, actor="two")
            finally:
                inside[0] = False
        return value

    monkeypatch.setattr(first.backend, "get_meta", get_meta)
    with pytest.raises(SettingsConflictError) as err:
        first.configure({"recall.exploration": 0.05}, actor="one")
    assert err.value.status == 409 and "nothing was written" in str(err.value)
    monkeypatch.undo()
    assert first.exploration == 0.1  # not in force
    kept = first.settings_history()
    assert len(kept) == configuring.WRITE_ATTEMPTS and {v["actor"] for v in kept} == {"two"}


def test_concurrent_writers_keep_every_version(two: tuple[MemoryStore, MemoryStore]) -> None:
    first, second = two
    errors: list[BaseException] = []

    def write(store: MemoryStore, actor: str, values: list[float]) -> None:
        try:
            for v in values:
                store.configure({"recall.exploration": v}, actor=actor)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [
        threading.Thread(target=write, args=(first, "one", [0.01 * i for i in range(1, 11)])),
        threading.Thread(target=write, args=(second, "two", [0.5 + 0.01 * i for i in range(1, 11)])),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    history = first.settings_history()
    assert [v["version"] for v in history] == list(range(1, len(history) + 1))  # no gap, no repeat
    assert len(history) == 20 and sorted(v["actor"] for v in history) == ["one"] * 10 + ["two"] * 10


def test_a_version_another_object_kept_is_in_force_at_its_next_call(two: tuple[MemoryStore, MemoryStore]) -> None:
    first, second = two
    first.settings_check_interval = 0.0
    first.add_many([{"id": "old", "text": "Prague is the capital of Czechoslovakia."}])
    for _ in range(30):
        recall = first.recall("capital of czechoslovakia", k=1)
        first.record(recall.episode, success=False)
    assert any(p.action == "deprecate" for p in first.govern().proposals)
    # the other process: the paper's fixed rule, and more evidence than there is
    second.configure({"governance.low_worth.rule": "fixed", "governance.classes.min_evidence": 1000}, actor="ops")
    assert first.policy.low_worth.rule == "sequential"  # nothing asked it yet
    actions = {p.action for p in first.govern().proposals}  # governs under version 1, kept by the other
    assert "deprecate" not in actions and actions <= {"demote", "re-verify"}
    assert first.policy == second.policy and first.config()["version"] == 1
    second.configure({"recall.exploration": 0.0}, actor="ops")
    first.recall("capital", k=1)
    assert first.exploration == 0.0 and first.settings == second.settings


def test_a_store_looks_at_most_once_per_interval(
    two: tuple[MemoryStore, MemoryStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = two
    clock = [1000.0]
    monkeypatch.setattr(configuring, "_now", lambda: clock[0])
    first.settings_check_interval = 60.0
    first.add_many([{"id": "a", "text": "alpha"}])
    first.recall("alpha", k=1)  # looks now
    second.configure({"recall.exploration": 0.03}, actor="ops")
    clock[0] += 59.0
    first.recall("alpha", k=1)
    assert first.exploration == 0.1  # within the interval: not looked
    clock[0] += 2.0
    first.recall("alpha", k=1)
    assert first.exploration == 0.03


def test_the_newest_version_wins_over_a_constructor_argument(two: tuple[MemoryStore, MemoryStore]) -> None:
    first, second = two
    opened = MemoryStore(
        first.backend, encoder=HashingEncoder(), exploration=0.0, policy=GovernancePolicy(theta_low=0.2)
    )
    opened.settings_check_interval = 0.0
    assert opened.config()["version"] == 1 and opened.exploration == 0.0
    second.configure({"recall.exploration": 0.25}, actor="ops")
    opened.add_many([{"id": "a", "text": "alpha"}])
    opened.recall("alpha", k=1)
    assert opened.exploration == 0.25 and opened.policy.theta_low == 0.2  # the version's, argument or not
