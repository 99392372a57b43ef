"""Durability and concurrency of the SQLite and PostgreSQL stores, with real processes.

* A writer killed with SIGKILL at random points loses no acknowledged outcome, logs no
  episode twice, and leaves counters that equal a replay of the log.
* Several processes recalling and recording into one file at once see no error and lose
  no update.
* Two processes racing to record the same episodes: exactly one wins each, the other
  gets DuplicateError.
* A batch holding one already-recorded episode writes nothing (every backend).

The child processes run ``WORKER`` (below) with ``sys.executable -c``; the parent talks to
them through argv (a JSON config), stdin (a start signal), stdout (acknowledgements) and
a JSON result file. Timeouts exist only to turn a hang into a failure.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import re
import select
import signal
import subprocess
import sys
import time
from collections import Counter, deque
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pytest

from memworth import Counts, DuplicateError, HashingEncoder, MemoryStore
from memworth.store import OutcomeRow
from tests.store.conftest import drop, url_for

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs SIGKILL and select() on pipes")

HANG = 300.0
"""Seconds after which a silent child counts as hung (a failure, never a timing check).

2,000 recalls and records per child, four children on two loaded cores, have taken over
120 s; a hang is minutes of silence, so the limit is generous."""

WORDS = (
    "python list reverse sort append insert pop dict key value set tuple string split join "
    "prague capital czech river bridge castle water boil celsius pressure altitude kettle "
    "recursion base case stack frame loop iterate generator yield lambda closure scope"
).split()

N_MEMORIES = 30

WORKER = r"""
import json, random, sys, traceback

cfg = json.loads(sys.argv[1])

from memworth import DuplicateError, HashingEncoder, MemoryStore

rng = random.Random(cfg["seed"])
words = cfg["words"]


def query():
    return " ".join(rng.choice(words) for _ in range(rng.randint(1, 4)))


def describe(exc):
    return {"type": type(exc).__name__, "message": str(exc), "traceback": traceback.format_exc()}


def open_store():
    return MemoryStore.open(cfg["url"], encoder=HashingEncoder(), seed=cfg["seed"])


if cfg["mode"] == "kill":
    # No error handling on purpose: any exception ends the child early, which the parent sees.
    store = open_store()
    print("ready", flush=True)
    while True:
        recall = store.recall(query(), k=4)
        store.record(recall.episode, success=rng.random() < 0.5)
        print(recall.episode.id, flush=True)  # the acknowledgement: record has returned

result = {"errors": [], "recorded": [], "won": [], "lost": []}
try:
    store = None
    try:
        store = open_store()
    except Exception as exc:
        result["errors"].append(describe(exc))
    print("ready", flush=True)
    sys.stdin.readline()  # wait until every child is ready, so they all run at once
    if store is not None and cfg["mode"] == "work":
        batch = cfg["batch"]
        pending = []
        for i in range(cfg["episodes"]):
            try:
                recall = store.recall(query(), k=4)
                pending.append((recall.episode.id, rng.random() < 0.5))
            except Exception as exc:
                result["errors"].append(describe(exc))
            if pending and (len(pending) == batch or i == cfg["episodes"] - 1):
                try:
                    if batch == 1:
                        store.record(pending[0][0], success=pending[0][1])
                    else:
                        store.record_many(pending)
                    result["recorded"] += [eid for eid, _ in pending]
                except Exception as exc:
                    result["errors"].append(describe(exc))
                pending = []
    elif store is not None and cfg["mode"] == "dup":
        for eid in cfg["episodes"]:
            try:
                store.record(eid, success=cfg["success"])
                result["won"].append(eid)
            except DuplicateError:
                result["lost"].append(eid)
            except Exception as exc:
                result["errors"].append(describe(exc))
    if store is not None:
        try:
            store.close()
        except Exception as exc:
            result["errors"].append(describe(exc))
except BaseException as exc:
    result["errors"].append(describe(exc))
    raise
finally:
    with open(cfg["out"], "w") as fh:
        json.dump(result, fh)
"""


# -- helpers --------------------------------------------------------------------------


def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 's.db'}"


@pytest.fixture(params=["sqlite", "postgres"])
def shared_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A store many processes can open: an SQLite file, or a fresh PostgreSQL schema."""
    if request.param == "sqlite":
        yield sqlite_url(tmp_path)
        return
    url = url_for("postgres", tmp_path)
    yield url
    with MemoryStore.open(url, encoder=HashingEncoder()) as s:
        drop(s)


def make_store(url: str) -> MemoryStore:
    """A store with ``N_MEMORIES`` memories made of ``WORDS`` (deterministic)."""
    store = MemoryStore.open(url, encoder=HashingEncoder(), seed=0)
    rng = random.Random(1234)
    store.add_many(
        [{"id": f"m{i:02d}", "text": " ".join(rng.sample(WORDS, 6)) + f" fact {i}"} for i in range(N_MEMORIES)]
    )
    return store


def snapshot(store: MemoryStore) -> dict[str, tuple[Counts, float]]:
    return {m.id: (m.counts, m.updated) for m in store.list()}


def log_of(store: MemoryStore) -> list[OutcomeRow]:
    return list(store.backend.outcome_log())


def assert_sound(store: MemoryStore, expected_outcomes: int | None = None) -> list[OutcomeRow]:
    """The log has each episode at most once, counters equal its replay, SQLite is intact."""
    log = log_of(store)
    repeated = [eid for eid, c in Counter(o.episode_id for o in log).items() if c > 1]
    assert not repeated, f"episodes logged more than once: {repeated[:5]}"
    if expected_outcomes is not None:
        assert len(log) == expected_outcomes
    report = store.replay()
    assert report.outcomes == len(log)
    assert report.consistent, f"live counters differ from the replay of the log: {report.mismatches[:5]}"
    if hasattr(store.backend, "integrity_check"):  # SQLite's own check of its file
        assert store.backend.integrity_check() == "ok"
    return log


class Lines:
    """Lines from a child's stdout, with a deadline instead of a blocking readline()."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        self._fd = proc.stdout.fileno()
        self._buf = b""
        self._lines: deque[str] = deque()
        self.eof = False

    def next(self, timeout: float = HANG) -> str | None:
        """The next line, or None at end of output."""
        deadline = time.monotonic() + timeout
        while not self._lines:
            if self.eof:
                return None
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"child wrote no line in {timeout} s (hung?)")
            ready, _, _ = select.select([self._fd], [], [], remaining)
            if not ready:
                continue
            chunk = os.read(self._fd, 65536)
            if not chunk:
                self.eof = True
                if self._buf:  # a last line cut short by the kill: never acknowledged
                    self._buf = b""
                continue
            self._buf += chunk
            *complete, self._buf = self._buf.split(b"\n")
            self._lines.extend(c.decode() for c in complete)
        return self._lines.popleft()


@contextmanager
def child(cfg: dict[str, Any], tmp_path: Path, name: str) -> Iterator[tuple[subprocess.Popen[bytes], Path]]:
    """Run ``WORKER`` with ``cfg``; stderr goes to a file (returned) so no pipe can fill up."""
    stderr_path = tmp_path / f"{name}.stderr"
    cfg = {"words": WORDS, **cfg}
    with open(stderr_path, "wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-c", WORKER, json.dumps(cfg)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=err,
            bufsize=0,
            cwd=tmp_path,
        )
    with proc:
        try:
            yield proc, stderr_path
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()


def run_together(cfgs: Sequence[dict[str, Any]], tmp_path: Path) -> list[dict[str, Any]]:
    """Start every child, wait until all have opened the store, release them at once, collect results."""
    results = []
    with ExitStack() as stack:
        procs = []
        for i, cfg in enumerate(cfgs):
            cfg = {**cfg, "out": str(tmp_path / f"child{i}.json")}
            proc, stderr_path = stack.enter_context(child(cfg, tmp_path, f"child{i}"))
            procs.append((proc, stderr_path, cfg["out"]))
        for proc, stderr_path, _ in procs:
            line = Lines(proc).next()
            assert line == "ready", f"child did not start: {line!r}\n{stderr_path.read_text()}"
        for proc, _, _ in procs:
            assert proc.stdin is not None
            proc.stdin.write(b"go\n")
            proc.stdin.close()
        for proc, stderr_path, out in procs:
            try:
                code = proc.wait(timeout=HANG)
            except subprocess.TimeoutExpired:
                pytest.fail(f"child hung\n{stderr_path.read_text()}")
            assert code == 0, f"child exited with {code}\n{stderr_path.read_text()}"
            results.append(json.loads(Path(out).read_text()))
    return results


def recall_episodes(store: MemoryStore, count: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    ids = []
    for _ in range(count):
        recall = store.recall(" ".join(rng.sample(WORDS, 3)), k=4)
        assert len(recall) > 0
        ids.append(recall.episode.id)
    return ids


# -- 1. SIGKILL ---------------------------------------------------------------------------

# Acknowledgements to wait for before the first kill, drawn once from [50, 400].
KILL_POINTS = [random.Random(seed).randint(50, 400) for seed in range(5)]
RESTARTS = 3
"""Further writers started on the recovered file and killed after 5-40 acknowledgements:
more kills land inside a transaction, and recovery is itself recovered from."""


def write_until_killed(url: str, tmp_path: Path, seed: int, acks: int, pause: float) -> list[str]:
    """Run a writer, SIGKILL it after ``acks`` acknowledgements (and ``pause``); every id it acknowledged."""
    acknowledged: list[str] = []
    with child({"mode": "kill", "url": url, "seed": seed}, tmp_path, f"writer{seed}") as (proc, stderr_path):
        lines = Lines(proc)
        assert lines.next() == "ready", stderr_path.read_text()
        while len(acknowledged) < acks:
            line = lines.next()
            assert line is not None, f"writer died before the kill\n{stderr_path.read_text()}"
            acknowledged.append(line)
        # Killing right after reading an acknowledgement would always hit the writer at the
        # same step (just after its print). A random pause of a few loop iterations makes
        # the kill land anywhere, inside a transaction or its commit included.
        time.sleep(pause)
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(timeout=HANG) == -signal.SIGKILL, stderr_path.read_text()
        # Whatever the writer printed before dying was acknowledged too.
        while (line := lines.next()) is not None:
            acknowledged.append(line)
    assert all(re.fullmatch(r"[0-9a-f]{32}", a) for a in acknowledged), acknowledged[:5]
    return acknowledged


@pytest.mark.parametrize("acks", KILL_POINTS)
def test_sigkill_loses_no_acknowledged_outcome(tmp_path: Path, shared_url: str, acks: int) -> None:
    url = shared_url
    make_store(url).close()
    rng = random.Random(acks)
    targets = [acks] + [rng.randint(5, 40) for _ in range(RESTARTS)]
    acknowledged: list[str] = []
    for life, target in enumerate(targets):
        acknowledged += write_until_killed(url, tmp_path, acks * 10 + life, target, rng.uniform(0.0, 0.02))
        assert len(set(acknowledged)) == len(acknowledged)
        with MemoryStore.open(url, encoder=HashingEncoder()) as reopened:
            log = assert_sound(reopened)
            logged = {o.episode_id for o in log}
            lost = [a for a in acknowledged if a not in logged]
            assert not lost, f"after kill {life + 1}: {len(lost)} acknowledged outcomes missing, e.g. {lost[:3]}"
            # Only an outcome in flight at a kill can be logged without acknowledgement.
            assert 0 <= len(log) - len(acknowledged) <= life + 1
    with MemoryStore.open(url, encoder=HashingEncoder()) as reopened:  # and the store still works
        reopened.record(reopened.recall("python list", k=4).episode, success=True)
        assert_sound(reopened, len(log) + 1)


# -- 2. Concurrent writers ----------------------------------------------------------------

WRITERS = 4
# Each writer's episodes: the default suite's size, and the full one (``make test-full``). The
# writers overlap from their first episodes (the test checks it), so the smaller run proves
# the same interleavings; the larger one gives a rare race more chances.
EPISODES = [500, pytest.param(2000, marks=pytest.mark.slow)]


@pytest.mark.parametrize("episodes", EPISODES)
@pytest.mark.parametrize("batch", [1, 20], ids=["record", "record_many-20"])
def test_concurrent_writers_lose_nothing(tmp_path: Path, shared_url: str, batch: int, episodes: int) -> None:
    url = shared_url
    make_store(url).close()
    cfgs = [{"mode": "work", "url": url, "seed": 100 + i, "episodes": episodes, "batch": batch} for i in range(WRITERS)]
    results = run_together(cfgs, tmp_path)

    errors = [e for r in results for e in r["errors"]]
    assert not errors, f"{len(errors)} errors in the writers; first:\n{errors[0]['traceback']}"
    recorded = [eid for r in results for eid in r["recorded"]]
    assert len(recorded) == WRITERS * episodes
    with MemoryStore.open(url, encoder=HashingEncoder()) as reopened:
        log = assert_sound(reopened, WRITERS * episodes)
        assert {o.episode_id for o in log} == set(recorded)
        # The writers really overlapped: run one after another they would switch WRITERS - 1 times.
        writer_of = {eid: i for i, r in enumerate(results) for eid in r["recorded"]}
        order = [writer_of[o.episode_id] for o in log]
        assert sum(a != b for a, b in itertools.pairwise(order)) >= WRITERS
        # Every recall retrieved something, so every outcome moved n.
        assert sum(m.counts.n for m in reopened.list()) >= WRITERS * episodes


# -- 3. Racing on the same episodes -----------------------------------------------------


def test_racing_recorders_record_each_episode_once(tmp_path: Path, shared_url: str) -> None:
    url = shared_url
    with make_store(url) as setup:
        episodes = recall_episodes(setup, 50)
    # Same order in both children, so they race on every episode; different outcomes, so
    # the log shows which one won.
    cfgs = [{"mode": "dup", "url": url, "seed": i, "episodes": episodes, "success": i == 0} for i in range(2)]
    a, b = run_together(cfgs, tmp_path)

    for r in (a, b):
        assert not r["errors"], f"unexpected error (not DuplicateError):\n{r['errors'][0]['traceback']}"
        assert sorted(r["won"] + r["lost"]) == sorted(episodes)
    assert set(a["won"]) == set(b["lost"]) and set(b["won"]) == set(a["lost"])
    with MemoryStore.open(url, encoder=HashingEncoder()) as reopened:
        log = assert_sound(reopened, len(episodes))
        assert sorted(o.episode_id for o in log) == sorted(episodes)
        winner_success = {eid: True for eid in a["won"]} | {eid: False for eid in b["won"]}
        assert {o.episode_id: o.success for o in log} == winner_success


# -- 4. Atomic batches ----------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
@pytest.mark.parametrize("position", [10, 5, 0], ids=["dup-last", "dup-middle", "dup-first"])
def test_batch_with_a_recorded_episode_writes_nothing(tmp_path: Path, kind: str, position: int) -> None:
    url = "memory://" if kind == "memory" else sqlite_url(tmp_path)
    s = make_store(url)
    try:
        episodes = recall_episodes(s, 11)
        done, fresh = episodes[-1], episodes[:-1]
        s.record(done, success=True)
        before_log, before = log_of(s), snapshot(s)

        batch: list[tuple[str, object]] = [(eid, i % 2 == 0) for i, eid in enumerate(fresh)]
        batch.insert(position, (done, False))
        with pytest.raises(DuplicateError):
            s.record_many(batch)

        assert log_of(s) == before_log
        assert snapshot(s) == before
        if kind == "sqlite":  # and nothing half-written reached the file
            s.close()
            s = MemoryStore.open(url, encoder=HashingEncoder())
            assert log_of(s) == before_log
            assert snapshot(s) == before
        # None of the ten was written, so all ten can still be recorded, once.
        s.record_many([p for p in batch if p[0] != done])
        log = assert_sound(s, 11) if kind == "sqlite" else log_of(s)
        assert [o.episode_id for o in log] == [done, *fresh]
        assert s.replay().consistent
        assert log[0].success is True
    finally:
        s.close()


@pytest.mark.parametrize(("option", "level"), [("", 2), ("?synchronous=extra", 3), ("?synchronous=normal", 1)])
def test_a_recall_does_not_wait_for_the_disk_and_an_outcome_does(tmp_path: Path, option: str, level: int) -> None:
    """Issue 17: the episode row of a recall is committed with synchronous=NORMAL (no fsync);
    the outcome's commit, at the store's level, syncs the WAL up to and including it."""
    url = f"sqlite:///{tmp_path / 'sync.db'}{option}"
    with MemoryStore.open(url, encoder=HashingEncoder(), seed=0) as store:
        store.add("a fact about durability", id="fact")
        db = store.backend._db  # type: ignore[attr-defined]
        seen: list[int] = []
        db.set_trace_callback(
            lambda sql: (
                seen.append(int(db.execute("PRAGMA synchronous").fetchone()[0]))
                if sql.startswith("INSERT INTO episodes")
                else None
            )
        )
        recall = store.recall("durability", k=1)
        db.set_trace_callback(None)
        assert seen == [1]  # NORMAL while the episode row was written
        assert int(db.execute("PRAGMA synchronous").fetchone()[0]) == level  # back for the outcome
        store.record(recall.episode, success=True)
    with MemoryStore.open(url) as store:
        assert store.get("fact").counts.n == 1
