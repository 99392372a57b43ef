"""Faults under the store: each gives a clear error or a documented degraded mode, and loses nothing.

* The SQLite file on a read-only file system: reads work, every write verb raises
  StoreError naming the cause, and the data is intact afterwards.
* A full disk under SQLite (a 1 MB tmpfs when the test may mount one, else a file-size
  limit, ``RLIMIT_FSIZE``, which fails writes the same way): writes raise StoreError,
  nothing half-written, and once space is back the same store goes on.
* PostgreSQL restarted (crashed: ``pg_ctl stop -m immediate``) in the middle of a run:
  calls that hit the outage raise StoreError; the same store object reconnects by itself;
  an outcome whose call failed is either logged once or not at all (a retry says which).
* Redis killed, hung (SIGSTOP) or restarted with stale data under the hot tier: recall
  falls back to the database and says so, writes go on, the mirror is repaired.
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from memworth import DuplicateError, HashingEncoder, MemoryStore, StoreError
from memworth.errors import UnavailableError
from memworth.server import create_key

from .conftest import PrivatePostgres, PrivateRedis, Tally, assert_sound, seeded_store

FACTS = {
    "reverse": "Use list.reverse() or slicing [::-1] to reverse a Python list.",
    "methods": "Python lists have methods such as append, extend, insert, pop and sort.",
    "prague": "Prague is the capital of the Czech Republic.",
    "czechoslovakia": "Prague is the capital of Czechoslovakia.",
    "water": "Water boils at 100 degrees Celsius at sea level.",
}


def state(store: MemoryStore) -> tuple[object, ...]:
    """Everything a write could change, for before/after comparisons."""
    return (
        [(m.id, m.text, m.status, m.standing, m.counts, m.metadata) for m in store.list()],
        list(store.backend.outcome_log()),
        store.audit(),
        store.backend.generation(),
    )


def _mount(*args: str) -> bool:
    if os.geteuid() != 0:
        return False
    return subprocess.run(["mount", *args], capture_output=True).returncode == 0


def _writable(folder: Path) -> bool:
    try:
        (folder / ".probe").write_text("x")
    except OSError:
        return False
    (folder / ".probe").unlink()
    return True


@contextlib.contextmanager
def read_only(folder: Path, tally: Tally) -> Iterator[None]:
    """Make ``folder`` read-only: a read-only bind mount (root ignores permission bits), else chmod."""
    if _mount("--bind", str(folder), str(folder)):
        if not _mount("-o", "remount,ro,bind", str(folder)):
            subprocess.run(["umount", "-l", str(folder)], check=True)
            pytest.fail("could not remount the bind mount read-only")
        tally.note("read-only database", "a read-only bind mount of the store's folder")
        try:
            yield
        finally:
            subprocess.run(["umount", "-l", str(folder)], check=True)
        return
    modes = {p: p.stat().st_mode for p in [folder, *folder.iterdir()]}
    for p in modes:
        p.chmod(0o555 if p.is_dir() else 0o444)
    tally.note("read-only database", "chmod a-w on the store's folder and files")
    try:
        yield
    finally:
        for p, mode in modes.items():
            p.chmod(mode)


def test_a_read_only_database_refuses_writes_clearly_and_keeps_its_data(tmp_path: Path, tally: Tally) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    url = f"sqlite:///{folder / 's.db'}"
    with seeded_store(url) as s:
        for i in range(10):
            s.record(s.recall("python list", k=3).episode, i % 2 == 0)
        before = state(s)
    # 1. Closed, then made read-only: a WAL database cannot even be opened; the error says why.
    with read_only(folder, tally):
        assert not _writable(folder), "the folder is still writable: the test would prove nothing"
        with pytest.raises(StoreError, match=r"cannot open .* is read-only"):
            MemoryStore.open(url, encoder=HashingEncoder())
        with pytest.raises(StoreError, match=r"cannot open .* is read-only"):  # nor a new one made there
            MemoryStore.open(f"sqlite:///{folder / 'other.db'}", encoder=HashingEncoder())
    tally("faults: opens refused on a read-only file system", 2)
    # 2. Made read-only while another process has it open: reads work, every write is refused.
    holder = MemoryStore.open(url, encoder=HashingEncoder())
    try:
        with read_only(folder, tally):
            assert not _writable(folder)
            with MemoryStore.open(url, encoder=HashingEncoder(), seed=0) as ro:
                assert state(ro) == before  # reads work
                assert ro.govern().proposals is not None and ro.replay().consistent
                m = ro.list()[0]
                writes = {
                    "add": lambda: ro.add("a new fact", id="new"),
                    "recall": lambda: ro.recall("python list", k=2),  # logs an episode: a write
                    "record": lambda: ro.record(before[1][0].episode_id, True),  # type: ignore[index]
                    "set_status": lambda: ro.set_status(m.id, "suppressed", reason="test"),
                    "govern": lambda: ro.set_standing(m.id, "promoted", reason="test"),
                    "create_key": lambda: create_key(ro, "team", "k"),
                    "write_counts": lambda: ro.backend.write_counts("default", {m.id: m.counts}),
                }
                for verb, call in writes.items():
                    with pytest.raises(StoreError, match="readonly") as info:
                        call()
                    assert info.type is StoreError, verb
                    tally("faults: writes refused by a read-only database")
                assert state(ro) == before
    finally:
        holder.close()
    with MemoryStore.open(url, encoder=HashingEncoder(), seed=0) as again:  # writable again: nothing lost
        assert state(again) == before
        again.record(again.recall("python list", k=3).episode, True)
        assert_sound(again, url)


@contextlib.contextmanager
def small_disk(folder: Path, tally: Tally) -> Iterator[tuple[Path, object]]:
    """``folder`` on a 1 MB tmpfs (``fill`` leaves ``spare`` bytes), or a file-size limit as the full disk.

    Yields the folder and a ``fill(spare)`` function that leaves about ``spare`` bytes of
    room; leaving the block frees the room again.
    """
    folder.mkdir()
    if _mount("-t", "tmpfs", "-o", "size=1m", "tmpfs", str(folder)):
        tally.note("disk full", "a 1 MB tmpfs mount, filled up with a filler file")
        filler = folder / "filler"

        def fill(spare: int) -> None:
            st = os.statvfs(folder)
            with open(filler, "wb") as fh:
                fh.write(b"\0" * max(0, st.f_bavail * st.f_frsize - spare))

        try:
            yield folder, fill
        finally:
            subprocess.run(["umount", "-l", str(folder)], check=True)
        return
    # No mount allowed: the kernel's file-size limit fails a write that grows a file past
    # it with EFBIG, through the same SQLite write path as ENOSPC.
    tally.note("disk full", "RLIMIT_FSIZE (tmpfs mount refused): writes growing a file past the limit fail")
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    old_handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)

    def limit(spare: int) -> None:
        largest = max(p.stat().st_size for p in folder.iterdir())
        resource.setrlimit(resource.RLIMIT_FSIZE, (largest + spare, hard))

    try:
        yield folder, limit
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, old_handler)


def test_a_full_disk_fails_writes_cleanly_and_the_store_recovers(tmp_path: Path, tally: Tally) -> None:
    with small_disk(tmp_path / "disk", tally) as (folder, fill):
        url = f"sqlite:///{folder / 's.db'}"
        s = seeded_store(url)
        try:
            acked: dict[str, bool] = {}
            for i in range(5):
                r = s.recall("python list", k=3)
                s.record(r.episode, i % 2 == 0)
                acked[r.episode.id] = i % 2 == 0
            fill(48 * 1024)  # type: ignore[operator]
            failed: list[str] = []
            errors: list[StoreError] = []
            for i in range(3000):
                before = state(s)
                try:
                    if i % 7 == 3:  # a batch of memories: all or none
                        s.add_many([{"id": f"big{i}-{j}", "text": "water kettle " * 200} for j in range(20)])
                        continue
                    r = s.recall("water boil kettle", k=3)
                except StoreError as exc:
                    errors.append(exc)
                    assert state(s) == before, "a failed write changed something"
                    if len(errors) >= 5:
                        break
                    continue
                try:
                    s.record(r.episode, i % 3 != 0)
                    acked[r.episode.id] = i % 3 != 0
                except StoreError as exc:
                    errors.append(exc)
                    failed.append(r.episode.id)
                    assert state(s) == before, "a failed record changed something"
                    if len(errors) >= 5:
                        break
            assert errors, "the disk never filled up: the test would prove nothing"
            for exc in errors:
                assert type(exc) is StoreError
                assert any(w in str(exc).lower() for w in ("full", "too large", "disk", "i/o")), str(exc)
            tally("faults: writes refused by a full disk", len(errors))
            fill(10**9)  # type: ignore[operator]  # room again
            if (folder / "filler").exists():
                (folder / "filler").unlink()
            for eid in failed:  # what failed was not written: recording it now works, once
                s.record(eid, True)
                acked[eid] = True
            r = s.recall("python list", k=3)
            s.record(r.episode, True)
            acked[r.episode.id] = True
            log = assert_sound(s, url)
            assert {o.episode_id: o.success for o in log} == acked
        finally:
            s.close()
        with MemoryStore.open(url, encoder=HashingEncoder()) as again:
            assert {o.episode_id: o.success for o in assert_sound(again, url)} == acked


def test_postgres_restarted_mid_run_loses_nothing(private_pg: PrivatePostgres, pg_url: str, tally: Tally) -> None:
    s = seeded_store(pg_url)
    acked: dict[str, bool] = {}
    unsure: dict[str, bool] = {}  # record raised: logged once, or not at all
    errors: list[Exception] = []
    restarted = threading.Event()
    failure: list[BaseException] = []

    def restart() -> None:
        try:
            private_pg.stop("immediate")  # a crash: the server recovers from its WAL on start
            time.sleep(0.3)
            private_pg.start()
        except BaseException as exc:
            failure.append(exc)
        finally:
            restarted.set()

    thread: threading.Thread | None = None
    try:
        ok_after_restart = 0
        for i in range(600):
            if len(acked) == 20 and thread is None:
                thread = threading.Thread(target=restart)
                thread.start()
            if restarted.is_set() and ok_after_restart >= 20:
                break
            success = i % 3 != 0
            try:
                r = s.recall("python list reverse", k=3)
            except StoreError as exc:
                errors.append(exc)
                continue
            try:
                s.record(r.episode, success)
                acked[r.episode.id] = success
                ok_after_restart += restarted.is_set()
            except StoreError as exc:
                errors.append(exc)
                unsure[r.episode.id] = success
        assert thread is not None
        thread.join()
        assert not failure, failure
        assert ok_after_restart >= 20, f"the store did not recover after the restart: {errors[-3:]}"
        for exc in errors:
            # an outage is UnavailableError (503); an error the server gave is a StoreError
            assert type(exc) in (StoreError, UnavailableError) and "postgresql://" in str(exc), repr(exc)
        tally("faults: PostgreSQL crash-restarts survived")
        tally("faults: calls refused during a PostgreSQL restart", len(errors))
        for eid, success in unsure.items():  # a retry tells whether the failed call had committed
            try:
                s.record(eid, success)
            except DuplicateError:
                pass
            acked[eid] = success
        log = assert_sound(s, pg_url, require_amcheck=private_pg.amcheck)
        assert {o.episode_id: o.success for o in log} == acked
    finally:
        s.close()


def fill_hot(store: MemoryStore) -> None:
    store.add_many([{"id": k, "text": v} for k, v in FACTS.items()])
    for ok, query in ((True, "reverse a python list"), (False, "capital of czechoslovakia")):
        for _ in range(12):
            store.record(store.recall(query, k=1).episode, ok)


def test_redis_down_hung_or_restarted_loses_nothing(tmp_path: Path, private_redis: PrivateRedis, tally: Tally) -> None:
    url = f"sqlite:///{tmp_path / 'hot.db'}"
    with MemoryStore.open(url, encoder=HashingEncoder(), seed=0, hot_tier=private_redis.url) as s:
        s.exploration = 0.0
        fill_hot(s)
        assert s.rebuild_hot_tier() == 1
        assert s.recall("python list", k=2, tier="hot").diagnostics["tier"] == "hot"
        outcomes = len(list(s.backend.outcome_log()))

        for fault in ("killed", "hung"):
            if fault == "killed":
                private_redis.kill()
            else:
                private_redis.pause()
            recall = s.recall("reverse a python list", k=2, tier="hot")
            assert recall.diagnostics["tier"] == "all", fault  # fell back to the database ...
            assert "unavailable" in recall.diagnostics["hot_tier"], fault  # ... and says why
            assert recall.results[0].memory.id == "reverse"
            s.record(recall.episode, True)  # outcomes still land in the database
            outcomes += 1
            assert s.govern(apply=True) is not None  # governance works; the mirror is skipped
            for verb in (s.check_hot_tier, s.rebuild_hot_tier):
                with pytest.raises(StoreError, match="unavailable"):
                    verb()
            tally(f"faults: Redis {fault}")
            if fault == "killed":
                private_redis.start()  # back, empty (no persistence): the mirror is missing
                assert s.check_hot_tier()["missing"] == ["reverse"]
            else:
                private_redis.resume()
            s.rebuild_hot_tier()
            assert s.check_hot_tier() == {"missing": [], "extra": [], "stale": []}
            assert s.recall("python list", k=2, tier="hot").diagnostics["tier"] == "hot"
        assert_sound(s, url)
        assert len(list(s.backend.outcome_log())) == outcomes


def test_a_memory_suppressed_while_redis_is_down_is_not_served_from_its_stale_mirror(
    tmp_path: Path, tally: Tally
) -> None:
    """Redis with persistence comes back holding a memory suppressed while it was down."""
    redis = PrivateRedis(tmp_path, persist=True)
    try:
        url = f"sqlite:///{tmp_path / 'stale.db'}"
        with MemoryStore.open(url, encoder=HashingEncoder(), seed=0, hot_tier=redis.url) as s:
            s.exploration = 0.0
            fill_hot(s)
            s.rebuild_hot_tier()
            redis.kill()
            s.set_status("reverse", "suppressed", reason="wrong since 3.12")  # the mirror cannot be told
            redis.start()  # back with its data: the suppressed memory is still mirrored
            assert s.check_hot_tier()["extra"] == ["reverse"]
            recall = s.recall("reverse a python list", k=2, tier="hot")
            assert "reverse" not in [r.memory.id for r in recall], "a suppressed memory was recalled"
            assert s.check_hot_tier() == {"missing": [], "extra": [], "stale": []}
            tally("faults: Redis restarted with a stale mirror")
            assert_sound(s, url)
    finally:
        redis.close()
