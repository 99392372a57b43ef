"""PostgreSQL backend (``postgresql://user@host:port/db[?schema=name]``): many processes, many hosts.

Every write is one transaction. The rules that keep concurrent writers exact:

* counters are incremented inside SQL, from the value read under the row's lock, so no
  update is lost; a batch of outcomes changes all its counters in one statement, which
  adds each memory's increments one by one in the order given (the very additions one
  UPDATE per increment would make);
* a transaction updates the counters first, in memory-id order (so two transactions
  over the same hot memories take their row locks in the same order and cannot
  deadlock), and only then appends its outcome rows (same statement): the outcome sequence numbers
  of two transactions that share a memory follow the order in which they changed it,
  which is what makes a replay of the log add the same numbers in the same order, bit
  for bit;
* an episode recorded twice is refused by a unique key (the batch is rolled back and
  the error names the episode), not by a read-then-write check;
* memory inserts and status changes first lock their namespace's row of ``generations``,
  so a namespace's memories become visible in the order of their insertion numbers and a
  reader that loads "everything after number n" of a namespace never skips one still
  being committed (namespaces do not wait for each other);
* ``synchronous_commit`` stays on: an acknowledged outcome is durable.

Vector search runs inside PostgreSQL when the server has pgvector: embeddings are also
kept in a ``vector(d)`` column with an HNSW index (inner product: cosine on unit
vectors), and ``search`` returns the most similar active memories of a namespace in one
query (pgvector's iterative index scan keeps the namespace and status filter from
starving the result). The blended worth score is then computed in Python on that small
candidate set (50, or 10 x k). Without pgvector (Debian 12's PostgreSQL 15, say),
``search`` returns None and the store searches its own index, kept in step with
``vectors(after=...)``.

URL options (the others go to libpq as they are):

* ``?schema=name`` keeps a store in its own schema (created if missing); tests use it;
* ``?pool_size=n`` (1 to 64, default 4): connections the process keeps;
* ``?pool_timeout=s`` (seconds, > 0, default 10): how long a call waits for a connection
  before a :class:`memworth.StoreError` that says the database is unreachable (or every
  pooled connection busy); opening the store waits as long for its first connection;
* ``?connect_timeout=s`` (libpq's, whole seconds): how long one connection attempt may
  take; default: ``pool_timeout`` rounded up (at least 2, libpq's minimum), so an
  attempt against a host that drops packets ends instead of hanging a pool worker.
"""

from __future__ import annotations

import json
import logging
import math
import re
import struct
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlparse, urlunparse

import numpy as np

from memworth.counts import Counts
from memworth.errors import (
    ChangedError,
    DuplicateError,
    StoreError,
    UnavailableError,
    UnknownEpisodeError,
    UnknownMemoryError,
    ValidationError,
)
from memworth.store.backend import (
    ERASE,
    MEMORY_COLUMNS,
    MEMORY_FROM,
    NOTE_FIELDS,
    OUTCOME_COLUMNS,
    SCHEMA_VERSION,
    DrawOutcome,
    Increment,
    NewMemory,
    ambiguous_episode,
    changed,
    check_given,
    episodes_from_rows,
    erased_key,
    joined,
    logged_as_given,
    memories_from_rows,
    outcome_from_row,
    redact,
    required,
    reused,
    reweighted_rows,
)
from memworth.store.plans import Copy, Many, Plan, Query, Statements, done, execute
from memworth.store.records import AuditEntry, Episode, Memory, OutcomeRow, Verification, as_matrix

__all__ = ["PostgresBackend"]

_SCHEMA = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")

MIGRATIONS: dict[int, list[str]] = {
    1: [
        """CREATE TABLE memories (
            namespace TEXT NOT NULL,
            id TEXT NOT NULL,
            seq BIGSERIAL NOT NULL UNIQUE,
            text TEXT NOT NULL,
            metadata JSONB NOT NULL,
            contexts JSONB NOT NULL,
            status TEXT NOT NULL,
            standing TEXT NOT NULL DEFAULT 'normal',
            created DOUBLE PRECISION NOT NULL,
            updated DOUBLE PRECISION NOT NULL,
            success DOUBLE PRECISION NOT NULL DEFAULT 0,
            failure DOUBLE PRECISION NOT NULL DEFAULT 0,
            n DOUBLE PRECISION NOT NULL DEFAULT 0,
            embedding BYTEA NOT NULL,
            PRIMARY KEY (namespace, id)
        )""",
        "CREATE INDEX memories_by_seq ON memories (namespace, seq)",
        """CREATE TABLE edges (
            namespace TEXT NOT NULL, src TEXT NOT NULL, dst TEXT NOT NULL, kind TEXT NOT NULL,
            PRIMARY KEY (namespace, src, kind, dst)
        )""",
        """CREATE TABLE episodes (
            id TEXT PRIMARY KEY, namespace TEXT NOT NULL, query TEXT NOT NULL, context TEXT,
            created DOUBLE PRECISION NOT NULL
        )""",
        """CREATE TABLE episode_items (
            episode_id TEXT NOT NULL, position INTEGER NOT NULL, memory_id TEXT NOT NULL,
            weight DOUBLE PRECISION NOT NULL, propensity DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (episode_id, position)
        )""",
        """CREATE TABLE outcomes (
            seq BIGSERIAL PRIMARY KEY,
            episode_id TEXT NOT NULL UNIQUE,
            success BOOLEAN NOT NULL,
            source TEXT NOT NULL,
            confidence DOUBLE PRECISION NOT NULL,
            recorded DOUBLE PRECISION NOT NULL
        )""",
        """CREATE TABLE audit (
            seq BIGSERIAL PRIMARY KEY,
            namespace TEXT NOT NULL, memory_id TEXT NOT NULL, action TEXT NOT NULL,
            field TEXT NOT NULL, old TEXT NOT NULL, new TEXT NOT NULL, reason TEXT NOT NULL,
            settings JSONB NOT NULL, at DOUBLE PRECISION NOT NULL
        )""",
        "CREATE INDEX audit_by_memory ON audit (namespace, memory_id, seq)",
    ],
    # 2: verified outcomes (source reliability), the holdout mark of an episode, and
    # indexes for the recent-outcome reads of quotas and burst alerts.
    2: [
        """CREATE TABLE IF NOT EXISTS verifications (
            seq BIGSERIAL PRIMARY KEY,
            episode_id TEXT NOT NULL UNIQUE,
            namespace TEXT NOT NULL,
            success BOOLEAN NOT NULL,
            source TEXT,
            reported BOOLEAN,
            recorded DOUBLE PRECISION NOT NULL
        )""",
        "ALTER TABLE episodes ADD COLUMN IF NOT EXISTS holdout BOOLEAN NOT NULL DEFAULT FALSE",
        "CREATE INDEX IF NOT EXISTS outcomes_by_time ON outcomes (recorded)",
        "CREATE INDEX IF NOT EXISTS outcomes_by_source ON outcomes (source, recorded)",
    ],
    # 3: each outcome keeps its episode's namespace, so that a namespace's log is one
    # indexed read (governance, stats and the dashboard never scan other tenants' logs);
    # an episode item says whether it was served as a probe of a quarantined memory; an
    # outcome keeps the credit settings it was credited under, so any client replays it exactly.
    3: [
        "ALTER TABLE outcomes ADD COLUMN IF NOT EXISTS namespace TEXT NOT NULL DEFAULT ''",
        "UPDATE outcomes o SET namespace = e.namespace FROM episodes e WHERE e.id = o.episode_id AND o.namespace = ''",
        "CREATE INDEX IF NOT EXISTS outcomes_by_namespace ON outcomes (namespace, seq)",
        "ALTER TABLE episode_items ADD COLUMN IF NOT EXISTS probe BOOLEAN NOT NULL DEFAULT FALSE",
        "ALTER TABLE outcomes ADD COLUMN IF NOT EXISTS propagation DOUBLE PRECISION",
        "ALTER TABLE outcomes ADD COLUMN IF NOT EXISTS max_hops INTEGER",
    ],
    # 4: a memory's time to live (``expires``, seconds since the epoch; NULL: never),
    # indexed for the expiry check every recall makes; tombstones are found by action;
    # audit entries are read a page at a time (memories_by_seq serves memory pages).
    4: [
        "ALTER TABLE memories ADD COLUMN IF NOT EXISTS expires DOUBLE PRECISION",
        "CREATE INDEX IF NOT EXISTS memories_by_expiry ON memories (namespace, expires) WHERE expires IS NOT NULL",
        "CREATE INDEX IF NOT EXISTS audit_by_action ON audit (namespace, action, memory_id)",
        "CREATE INDEX IF NOT EXISTS audit_by_namespace ON audit (namespace, seq)",
    ],
    # 5: each namespace's checkpoint (its followed history and change detectors, saved by
    # govern), so that a new process reads only the outcomes logged after it.
    5: [
        "CREATE TABLE IF NOT EXISTS checkpoints (namespace TEXT PRIMARY KEY, data BYTEA NOT NULL)",
    ],
    # 6: each outcome keeps the settings version in force when it was credited (NULL: logged
    # before versions were kept), so the log says under which kept settings it was done.
    6: [
        "ALTER TABLE outcomes ADD COLUMN IF NOT EXISTS settings_version INTEGER",
    ],
    # 7: ready to shard by namespace (docs/scaling.md, Citus). Every table that grows with use
    # carries the namespace and every unique key includes it (a distributed table's unique keys
    # must contain its distribution column), so an episode id is unique within its namespace;
    # episode items carry their episode's namespace (co-located with it); the generation counter
    # is a row per namespace (``generations``, seeded with the old global value, so no cached
    # number goes back), so namespaces stop serialising their inserts on one row.
    7: [
        "ALTER TABLE episode_items ADD COLUMN IF NOT EXISTS namespace TEXT",
        "UPDATE episode_items i SET namespace = e.namespace FROM episodes e WHERE e.id = i.episode_id"
        " AND i.namespace IS NULL",
        "UPDATE episode_items SET namespace = '' WHERE namespace IS NULL",  # items of no logged episode
        "ALTER TABLE episode_items ALTER COLUMN namespace SET NOT NULL",
        "ALTER TABLE episode_items DROP CONSTRAINT IF EXISTS episode_items_pkey",
        "ALTER TABLE episode_items ADD PRIMARY KEY (namespace, episode_id, position)",
        "ALTER TABLE episodes DROP CONSTRAINT IF EXISTS episodes_pkey",
        "ALTER TABLE episodes ADD PRIMARY KEY (namespace, id)",
        # an outcome appended without its namespace (memworth import before schema 7 wrote '') takes
        # its episode's, while episode ids are still unique across namespaces
        "UPDATE outcomes o SET namespace = e.namespace FROM episodes e WHERE e.id = o.episode_id"
        " AND o.namespace = ''",
        "ALTER TABLE outcomes ALTER COLUMN namespace DROP DEFAULT",
        "ALTER TABLE outcomes DROP CONSTRAINT IF EXISTS outcomes_pkey",
        "ALTER TABLE outcomes DROP CONSTRAINT IF EXISTS outcomes_episode_id_key",
        "ALTER TABLE outcomes ADD PRIMARY KEY (namespace, seq)",
        "ALTER TABLE outcomes ADD CONSTRAINT outcomes_namespace_episode_id_key UNIQUE (namespace, episode_id)",
        "DROP INDEX IF EXISTS outcomes_by_namespace",  # the primary key is that index now
        "ALTER TABLE verifications DROP CONSTRAINT IF EXISTS verifications_pkey",
        "ALTER TABLE verifications DROP CONSTRAINT IF EXISTS verifications_episode_id_key",
        "ALTER TABLE verifications ADD PRIMARY KEY (namespace, seq)",
        "ALTER TABLE verifications ADD CONSTRAINT verifications_namespace_episode_id_key UNIQUE (namespace, episode_id)",
        "ALTER TABLE audit DROP CONSTRAINT IF EXISTS audit_pkey",
        "ALTER TABLE audit ADD PRIMARY KEY (namespace, seq)",
        "DROP INDEX IF EXISTS audit_by_namespace",  # the primary key is that index now
        "ALTER TABLE memories DROP CONSTRAINT IF EXISTS memories_seq_key",
        "DROP INDEX IF EXISTS memories_by_seq",
        "ALTER TABLE memories ADD CONSTRAINT memories_namespace_seq_key UNIQUE (namespace, seq)",
        "CREATE TABLE IF NOT EXISTS generations (namespace TEXT PRIMARY KEY, value BIGINT NOT NULL)",
        "INSERT INTO generations SELECT n.namespace, COALESCE((SELECT value::bigint FROM meta WHERE key = 'generation'), 0)"
        " FROM (SELECT DISTINCT namespace FROM memories UNION SELECT DISTINCT namespace FROM audit) n"
        " ON CONFLICT (namespace) DO NOTHING",
        "DELETE FROM meta WHERE key = 'generation'",
    ],
    # 8: a memory's worth counters (success, failure, n) and its last update move to a narrow
    # table of their own (keyed like memories, so it shards by namespace too), values copied as
    # they are. Beside the text and a 1.5 KB embedding, every outcome wrote each credited
    # memory's whole row to the WAL (about 5.5 KB per 4-memory outcome against 1.4 KB for a
    # narrow table). The recorded-time index goes: every recent-outcome read (quotas) names
    # its source, which outcomes_by_source serves. The lock comes first: under READ COMMITTED
    # the copy reads one snapshot, and a memory or increment a writer still running schema 7
    # (a rolling upgrade) commits after it would be left out (a memory without counters, which
    # every read's join drops); held to the commit, it makes such writers wait and then fail.
    8: [
        "LOCK TABLE memories IN ACCESS EXCLUSIVE MODE",
        """CREATE TABLE IF NOT EXISTS counters (
            namespace TEXT NOT NULL,
            id TEXT NOT NULL,
            success DOUBLE PRECISION NOT NULL DEFAULT 0,
            failure DOUBLE PRECISION NOT NULL DEFAULT 0,
            n DOUBLE PRECISION NOT NULL DEFAULT 0,
            updated DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (namespace, id)
        )""",
        "INSERT INTO counters (namespace, id, success, failure, n, updated)"
        " SELECT namespace, id, success, failure, n, updated FROM memories",
        "ALTER TABLE memories DROP COLUMN success, DROP COLUMN failure, DROP COLUMN n, DROP COLUMN updated",
        "DROP INDEX IF EXISTS outcomes_by_time",
    ],
    # 9: the probe draws of quarantined memories (issue 14): in a recall where a quarantined
    # memory would be served if allowed, a random draw makes it a probe (allowed) or a control
    # (held out), logged here beside the episode (keyed by namespace, so it shards with it),
    # never as an item (no counter, credit or replay reads this table). Flags raised up to the
    # audit entry recorded in meta ``probe_draws_from_audit`` have no draws logged for them and
    # keep the probe-only test.
    9: [
        """CREATE TABLE IF NOT EXISTS probe_draws (
            namespace TEXT NOT NULL,
            episode_id TEXT NOT NULL,
            memory_id TEXT NOT NULL,
            probe BOOLEAN NOT NULL,
            share DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (namespace, episode_id, memory_id)
        )""",
        "CREATE INDEX IF NOT EXISTS probe_draws_by_memory ON probe_draws (namespace, memory_id)",
        "INSERT INTO meta SELECT 'probe_draws_from_audit', COALESCE(MAX(seq), 0)::text FROM audit"
        " ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
    ],
}


POOL_TIMEOUT = 10.0
"""Seconds a call waits for a connection by default (``?pool_timeout=``)."""

MAX_POOL_TIMEOUT = 3600.0


@dataclass(frozen=True)
class _Connection:
    """What a ``postgresql://`` URL says: libpq's conninfo and the store's own options."""

    conninfo: str
    schema: str | None
    pool_size: int
    pool_timeout: float


_SNAPSHOT_READ = "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY"
_SNAPSHOT_WRITE = "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ"
"""How :meth:`PostgresBackend.snapshot` begins its transaction, reading or writing."""


def _parse_url(url: str) -> _Connection:
    parsed = urlparse(url)
    if parsed.scheme not in ("postgresql", "postgres"):
        raise ValidationError("url", f"expected postgresql://..., got {url!r}")
    query = dict(parse_qsl(parsed.query))
    schema = query.pop("schema", None)
    pool = query.pop("pool_size", "4")
    wait = query.pop("pool_timeout", None)
    if wait is None and "pool_timeout" in dict(parse_qsl(parsed.query, keep_blank_values=True)):
        wait = ""  # given empty: refused below, not taken for the default
    if schema is not None and not _SCHEMA.match(schema):
        raise ValidationError("schema", f"must be a lower-case SQL identifier, got {schema!r}")
    if not pool.isdigit() or not 1 <= int(pool) <= 64:
        raise ValidationError("pool_size", f"must be an integer from 1 to 64, got {pool!r}")
    timeout = POOL_TIMEOUT
    if wait is not None:
        try:
            timeout = float(wait)
        except ValueError:
            timeout = math.nan
        if not 0 < timeout <= MAX_POOL_TIMEOUT:  # NaN fails too
            raise ValidationError(
                "pool_timeout", f"must be a number of seconds > 0 and <= {MAX_POOL_TIMEOUT:g}, got {wait!r}"
            )
    connect = query.setdefault("connect_timeout", str(max(2, math.ceil(timeout))))
    if not connect.isdigit():
        raise ValidationError("connect_timeout", f"must be a whole number of seconds (0: no limit), got {connect!r}")
    return _Connection(urlunparse(parsed._replace(query=urlencode(query))), schema, int(pool), timeout)


def _split_url(url: str) -> tuple[str, str | None, int]:
    """(libpq conninfo, schema, pool size) of a ``postgresql://`` URL."""
    c = _parse_url(url)
    return c.conninfo, c.schema, c.pool_size


def _open_pool(c: _Connection, where: str, configure: Callable[[Any], None]) -> Any:
    """A psycopg pool of ``c`` whose waits for a connection end, after ``c.pool_timeout``
    seconds, in a :class:`StoreError` saying why (not psycopg_pool's bare ``PoolTimeout``)."""
    import psycopg
    from psycopg_pool import ConnectionPool, PoolTimeout

    _array_dumpers()

    # The pool logs every failed attempt; with no logging set up Python would print each
    # one on stderr. The StoreError carries the last one; an application's handlers still
    # get the records (they propagate).
    pool_log = logging.getLogger("psycopg.pool")
    if not any(isinstance(h, logging.NullHandler) for h in pool_log.handlers):
        pool_log.addHandler(logging.NullHandler())
    failures: list[Exception] = []  # the last failed connection attempt, while the server stays away

    class Connection(psycopg.Connection[Any]):
        @classmethod
        def connect(cls, *args: Any, **kwargs: Any) -> Any:
            try:
                conn = super().connect(*args, **kwargs)
            except Exception as exc:
                failures[:] = [exc]
                raise
            failures.clear()
            return conn

    class Pool(ConnectionPool[Any]):
        def unreachable(self) -> UnavailableError:
            if failures or not self.get_stats().get("pool_size"):
                last = f": {' '.join(str(failures[0]).split())}" if failures else ""
                why = f"no connection within {c.pool_timeout:g} s (?pool_timeout=){last}"
                return UnavailableError(f"PostgreSQL at {where} is unreachable: {why}")
            return UnavailableError(
                f"no free connection to PostgreSQL at {where} within {c.pool_timeout:g} s: all "
                f"{c.pool_size} pooled connections are busy (?pool_size=, ?pool_timeout=)"
            )

        def getconn(self, timeout: float | None = None) -> Any:
            try:
                return super().getconn(timeout)
            except PoolTimeout as exc:
                raise self.unreachable() from exc

        def wait(self, timeout: float = POOL_TIMEOUT) -> None:
            try:
                super().wait(timeout)
            except PoolTimeout as exc:
                raise self.unreachable() from exc

    return Pool(
        c.conninfo,
        min_size=1,
        max_size=c.pool_size,
        configure=configure,
        connection_class=Connection,
        open=True,
        timeout=c.pool_timeout,
    )


_EPISODES = (
    "SELECT e.id, e.namespace, e.query, e.context, e.created, e.holdout,"
    " i.position, i.memory_id, i.weight, i.propensity, i.probe"
    " FROM episodes e LEFT JOIN episode_items i ON i.namespace = e.namespace AND i.episode_id = e.id"
)
"""The episode read's join (schema 7: items joined on namespace and id); a WHERE follows."""
_EPISODES_ORDER = " ORDER BY e.id, e.namespace, i.position"


_HISTORY_HEADS = (
    "SELECT o.seq, o.episode_id, o.success, o.source, o.confidence, o.recorded,"
    " e.query, e.context, e.created, e.holdout, o.propagation, o.max_hops, o.settings_version"
    " FROM outcomes o CROSS JOIN LATERAL (SELECT e.query, e.context, e.created, e.holdout FROM episodes e"
    " WHERE e.namespace = o.namespace AND e.id = o.episode_id LIMIT 1) e"
    " WHERE o.namespace = %s AND o.seq > %s ORDER BY o.seq"
)
"""The history read's outcomes after a sequence number, each with its episode's head.

Each outcome's episode is found by its key in a ``LATERAL`` subquery that PostgreSQL cannot
merge into the join (its ``LIMIT 1``; the key is unique, so it leaves nothing out). On tables
not yet analysed (a new store; autovacuum off, or not yet run) the plain join was planned as a
nested loop that read *every* episode of the namespace for each outcome and filtered the id
(``EXPLAIN ANALYZE``, 600 outcomes: 180,075 rows removed by the join filter, 83 ms of server
time). A store object's first record reads the log from the namespace's checkpoint on (the
live change statistics' start), so every writer process paid it, in the square of the log.
The probe per outcome costs what the items read's probe costs: linear in the outcomes read
whatever the statistics (analysed, a hash join read 3,000 outcomes in 6-7 ms, the probes in 17)."""

_HISTORY_ITEMS = (
    "SELECT i.episode_id, i.position, i.memory_id, i.weight, i.propensity, i.probe"
    " FROM outcomes o CROSS JOIN LATERAL (SELECT i.episode_id, i.position, i.memory_id, i.weight, i.propensity,"
    " i.probe FROM episode_items i WHERE i.namespace = o.namespace AND i.episode_id = o.episode_id OFFSET 0) i"
    " WHERE o.namespace = %s AND o.seq > %s ORDER BY o.seq, i.position"
)
"""The history read's episode items of the outcomes after a sequence number, in log order: each
outcome's items found by their key (``OFFSET 0`` keeps the subquery from being flattened). The
plain join, unanalysed, read every item of the namespace into a hash for a tail of the log
(100,000 outcomes, 4 items each, the last 1,000 read: 400,000 items read for 4,000, 357 ms)."""

_HISTORY_HEADS_ALL = (
    "SELECT o.seq, o.episode_id, o.success, o.source, o.confidence, o.recorded,"
    " e.query, e.context, e.created, e.holdout, o.propagation, o.max_hops, o.settings_version"
    " FROM outcomes o JOIN episodes e ON e.namespace = o.namespace AND e.id = o.episode_id"
    " WHERE o.namespace = %s AND o.seq > %s ORDER BY o.seq"
)
"""The whole log's read of outcomes with their episodes' heads: a plain join, run with nested
loops off (:data:`_NO_NESTED_LOOPS`), so the episodes are read once (a hash or merge join) and
never once per outcome: linear in the namespace whatever its statistics. For a whole log the
probes per outcome cost 4 to 6 times the hash join (analysed, 100,000 outcomes: 4.1 s against
0.66 s of server time)."""

_HISTORY_ITEMS_ALL = (
    "SELECT i.episode_id, i.position, i.memory_id, i.weight, i.propensity, i.probe"
    " FROM outcomes o JOIN episode_items i ON i.namespace = o.namespace AND i.episode_id = o.episode_id"
    " WHERE o.namespace = %s AND o.seq > %s ORDER BY o.seq, i.position"
)
"""The whole log's read of episode items, in log order: as :data:`_HISTORY_HEADS_ALL`."""

_NO_NESTED_LOOPS = "SELECT current_setting('enable_nestloop'), set_config('enable_nestloop', 'off', true)"
"""Turns nested loops off to the end of the transaction (and says what the setting was)."""


def _ids_filter(unique: Sequence[str]) -> tuple[str, Any]:
    """How an episode read of one namespace names its ids: ``= %s`` with the id when there is one
    (a record's read), else ``= ANY(%s)`` with the list.

    psycopg prepares a statement made five times, and PostgreSQL then plans it once for any
    parameters (a generic plan) when that looks no dearer than planning each call. With
    ``e.id = ANY($3)`` the generic plan cannot know how many ids come; on tables not yet
    analysed (a new store, a bulk load) it chose a bitmap scan of the whole namespace that
    filtered the ids (0.34 ms at 3,000 episodes, growing with the log; 0.05 ms planned for
    the given id), and once analysed the call was planned each time (0.16-0.22 ms of server
    CPU, the read itself 0.04 ms). ``e.id = $3`` makes the generic plan the primary-key probe
    whatever the statistics, and PostgreSQL keeps it (planning 0.005 ms)."""
    if len(unique) == 1:
        return "= %s", unique[0]
    return "= ANY(%s)", list(unique)


class PostgresBackend:
    """Memories, log and counters in PostgreSQL, through a psycopg 3 connection pool."""

    _vec_column: bool
    """Whether the ``vec`` column is known to exist (set when the store opens and when made)."""

    def __init__(self, url: str) -> None:
        try:
            import psycopg
            import psycopg_pool  # noqa: F401  (used by _open_pool; missing -> the message below)
        except ImportError:
            raise StoreError("the PostgreSQL backend needs psycopg: pip install 'memworth[postgres]'") from None
        self._psycopg = psycopg
        connection = _parse_url(url)
        self.schema = connection.schema
        self.url = redact(url)  # shown in messages and answers: never the password
        self._lock = threading.Lock()
        self._held = threading.local()  # .conn: the connection of this thread's open transaction()
        schema = self.schema

        def configure(conn: Any) -> None:
            if schema is not None:
                conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
                conn.execute(f'SET search_path TO "{schema}"')
            conn.commit()

        self._pool = _open_pool(connection, self.url, configure)
        try:
            self._pool.wait(timeout=connection.pool_timeout)  # StoreError if unreachable
            self._migrate()
        except BaseException as exc:
            self._pool.close()  # stop its workers: they would retry for minutes
            if isinstance(exc, psycopg.Error):
                raise StoreError(f"cannot open {self.url}: {exc}") from exc
            raise

    # -- plumbing -------------------------------------------------------------------

    def _failure(self, exc: Exception) -> StoreError:
        """The error for a database error: UnavailableError when the server or the
        connection is down (psycopg's OperationalError), else StoreError."""
        if isinstance(exc, self._psycopg.errors.SerializationFailure):  # a snapshot's write lost a race
            return UnavailableError(
                f"{self.url}: another writer changed what this transaction writes since its snapshot;"
                f" nothing written, try again ({exc})"
            )
        kind = UnavailableError if isinstance(exc, self._psycopg.OperationalError) else StoreError
        return kind(f"{self.url}: {exc}")

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """One transaction around every call this thread makes on the backend until the block
        ends: committed at a clean exit, rolled back on an exception. The thread keeps one
        pooled connection for it, and each write inside is a savepoint of it; other threads
        (and processes) see none of it before the commit. StoreError if this thread has one
        open already."""
        with self._hold(None):
            yield

    @contextmanager
    def snapshot(self, *, write: bool = False) -> Iterator[None]:
        """A :meth:`transaction` at ``REPEATABLE READ`` (:meth:`memworth.store.backend.Backend.snapshot`):
        every statement of the block sees the snapshot of its first; reading, ``READ ONLY``;
        writing, an ``UPDATE`` of a row another transaction changed since the snapshot fails
        (a serialization failure: UnavailableError) and the block is rolled back whole."""
        with self._hold(_SNAPSHOT_WRITE if write else _SNAPSHOT_READ):
            yield

    @contextmanager
    def _hold(self, isolation: str | None) -> Iterator[None]:
        """This thread keeps one pooled connection for the block, in one transaction begun with
        the statement ``isolation`` (a ``SET TRANSACTION``; None: the server's default, read committed)."""
        if getattr(self._held, "conn", None) is not None:
            raise StoreError(f"{self.url}: a transaction is open already; transactions do not nest")
        had_column = self._vec_column
        try:
            with self._pool.connection() as conn, conn.transaction():
                if isolation is not None:
                    conn.execute(isolation)
                self._held.conn = conn
                try:
                    yield
                finally:
                    self._held.conn = None
        except BaseException as exc:
            self._vec_column = had_column  # a vector column the block added was rolled back with it
            if isinstance(exc, self._psycopg.Error):  # the commit itself failed: nothing was written
                raise self._failure(exc) from exc
            raise

    @contextmanager
    def _connection(self) -> Iterator[Any]:
        """This thread's transaction's connection, else one from the pool for the call."""
        held = getattr(self._held, "conn", None)
        if held is not None:
            yield held
        else:
            with self._pool.connection() as conn:
                yield conn

    def _run(self, fn: Any) -> Any:
        """Run ``fn(conn)`` in one transaction; database errors become StoreError."""
        try:
            with self._connection() as conn, conn.transaction():
                return fn(conn)
        except self._psycopg.Error as exc:
            raise self._failure(exc) from exc

    def _do(self, plan: Plan) -> Any:
        """Make ``plan``'s statements (:mod:`memworth.store.plans`) as its mode says; its answer.
        :class:`memworth.store.postgres_async.AsyncPlans` makes the same ones, awaited.

        The connection is the one :meth:`_connection` gives: inside this thread's
        :meth:`transaction` that transaction's, each plan a savepoint of it (a read too: it
        sees what the block wrote so far, and a failed statement leaves the block usable),
        so a rollback of the block undoes every write made through a plan; else one from the
        pool for the plan, a read (and a write of one statement) in autocommit."""
        inside = getattr(self._held, "conn", None) is not None
        try:
            with self._connection() as conn:
                if plan.mode in ("read", "statement") and not inside:
                    conn.autocommit = True
                    try:
                        answer = execute(conn, plan.steps)
                    finally:
                        conn.autocommit = False
                elif plan.mode == "pipeline":
                    with conn.pipeline(), conn.transaction():
                        answer = execute(conn, plan.steps)
                else:
                    with conn.transaction():
                        answer = execute(conn, plan.steps)
        except self._psycopg.errors.UniqueViolation as exc:  # rolled back (to the savepoint): nothing written
            if plan.on_unique is None:
                raise self._failure(exc) from exc
            raise self._do(plan.on_unique(exc)) from None
        except self._psycopg.Error as exc:
            raise self._failure(exc) from exc
        if plan.then is not None:
            plan.then(answer)
        return answer

    def _migrate(self) -> None:
        def work(conn: Any) -> None:
            conn.execute("SELECT pg_advisory_xact_lock(727274)")  # one migrator at a time
            conn.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            current = int(row[0]) if row else 0
            if current > SCHEMA_VERSION:
                raise StoreError(f"{self.url} has schema version {current}; this memworth knows up to {SCHEMA_VERSION}")
            for version in range(current + 1, SCHEMA_VERSION + 1):
                for statement in MIGRATIONS[version]:
                    conn.execute(statement)
                conn.execute(
                    "INSERT INTO meta VALUES ('schema_version', %s) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
                    (str(version),),
                )
            try:
                with conn.transaction():  # a savepoint: a server without pgvector just says no
                    conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
                self.pgvector = True
            except self._psycopg.Error:
                self.pgvector = False

        self.pgvector = False
        self._vec_column = False
        self._run(work)

    def get_meta(self, key: str) -> str | None:
        return self._do(self.plan_get_meta(key))

    def plan_get_meta(self, key: str) -> Plan:
        def steps() -> Statements:
            row = yield Query("SELECT value FROM meta WHERE key = %s", (key,), "one")
            return None if row is None else str(row[0])

        return Plan(steps())

    def set_meta(self, key: str, value: str) -> None:
        self._run(
            lambda c: c.execute(
                "INSERT INTO meta VALUES (%s, %s) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value", (key, value)
            )
        )

    def set_meta_if(self, key: str, expected: str | None, value: str, also: Mapping[str, str] | None = None) -> bool:
        def work(c: Any) -> bool:
            # The UPDATE's WHERE is evaluated again on the row a concurrent writer committed (READ
            # COMMITTED re-checks it after the row lock), and INSERT ... DO NOTHING loses to a
            # concurrent insert: of two writers that read the same value, one changes a row.
            if expected is None:
                done = c.execute("INSERT INTO meta VALUES (%s, %s) ON CONFLICT (key) DO NOTHING", (key, value))
            else:
                done = c.execute("UPDATE meta SET value = %s WHERE key = %s AND value = %s", (value, key, expected))
            if done.rowcount != 1:
                return False
            for k, v in (also or {}).items():
                c.execute(
                    "INSERT INTO meta VALUES (%s, %s) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value", (k, v)
                )
            return True

        return bool(self._run(work))

    def meta_items(self, prefix: str) -> list[tuple[str, str]]:
        rows = self._run(
            lambda c: c.execute(
                'SELECT key, value FROM meta WHERE left(key, %s) = %s ORDER BY key COLLATE "C"', (len(prefix), prefix)
            ).fetchall()
        )
        return [(str(k), str(v)) for k, v in rows]

    def generation(self, namespace: str | None = None) -> int:
        """The namespace's row of ``generations`` (0 before its first change); without a
        namespace the sum over every namespace (a read of every shard: for health checks)."""
        return self._do(self.plan_generation(namespace))

    def plan_generation(self, namespace: str | None = None) -> Plan:
        if namespace is None:
            return _one_read("SELECT COALESCE(SUM(value), 0) FROM generations", (), lambda rows: int(rows[0][0]))
        return _one_read(
            "SELECT value FROM generations WHERE namespace = %s",
            (namespace,),
            lambda rows: int(rows[0][0]) if rows else 0,
        )

    def _read(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """One read statement in autocommit: one round trip instead of BEGIN, the query and COMMIT.

        (Under READ COMMITTED each statement sees its own snapshot even inside a
        transaction, so a lone read loses nothing by running outside one.)
        """
        try:
            held = getattr(self._held, "conn", None)
            if held is not None:  # inside a transaction(): read what it wrote so far
                with held.transaction():  # a savepoint: a failed read leaves the transaction usable
                    return list(held.execute(sql, args).fetchall())
            with self._pool.connection() as conn:
                conn.autocommit = True
                try:
                    return list(conn.execute(sql, args).fetchall())
                finally:
                    conn.autocommit = False
        except self._psycopg.Error as exc:
            raise self._failure(exc) from exc

    # -- memories ---------------------------------------------------------------------

    def _ensure_vector_column(self, dimension: int) -> Statements:
        if self._vec_column:  # never dropped once made; ALTER TABLE would lock out every reader
            return
        yield Query(f"ALTER TABLE memories ADD COLUMN IF NOT EXISTS vec vector({int(dimension)})", fetch="none")
        yield Query(_CREATE_HNSW, fetch="none")

    def insert_memories(self, rows: Sequence[NewMemory], then: AuditEntry | None = None) -> AuditEntry | None:
        """One transaction: a duplicate check, one binary ``COPY`` of the rows, the edges (and
        ``then``, a change made in the same transaction, as :meth:`change` makes it).

        A batch of at least :data:`REBUILD_AT` vectors that also at least doubles the
        vectors in the table drops the HNSW index and builds it again after the ``COPY``,
        in the same transaction (building a graph at once is many times faster than
        growing it row by row); readers wait for the commit.
        """
        if not rows:
            return None if then is None else self.change(then)
        return self._do(self.plan_insert_memories(rows, then))

    def plan_insert_memories(self, rows: Sequence[NewMemory], then: AuditEntry | None = None) -> Plan:
        if not rows:
            if then is None:
                return done(None)
            column = _column(then)
            return Plan(_change_steps(then, column), "write")
        _no_repeated_ids(rows)
        sizes = [int(np.asarray(r.embedding).size) for r in rows]
        column = None if then is None else _column(then)
        with_vectors = self.pgvector and any(sizes)  # external memories (size 0) have no vector
        fresh_column = with_vectors and not self._vec_column

        def steps() -> Statements:
            # First: serialises the namespace's inserts, so its seq order is commit order and the check below holds.
            yield from _bump_steps(r.memory.namespace for r in rows)
            yield from _refuse_existing(rows)
            rebuild = False
            if with_vectors:
                yield from self._ensure_vector_column(max(sizes))
                batch = sum(1 for size in sizes if size)
                if batch >= REBUILD_AT:
                    have = (yield Query("SELECT count(*) FROM memories WHERE vec IS NOT NULL", fetch="one"))[0]
                    rebuild = batch >= int(have)
                if rebuild:
                    yield from _raise_build_memory(int(have) + batch, max(sizes))
                    yield Query("DROP INDEX IF EXISTS memories_vec_hnsw", fetch="none")
            columns = "namespace, id, text, metadata, contexts, status, created, embedding, expires"
            types: list[Any] = ["text", "text", "text", _JSONB, _JSONB, "text", "float8", "bytea", "float8"]
            binary = [_JSONB]
            if with_vectors:
                oid = int(
                    (yield Query("SELECT 'vector'::regtype::oid", fetch="one"))[0]
                )  # as the search path resolves it
                binary.append(oid)
                columns += ", vec"
                types.append(oid)

            def records() -> Iterator[tuple[Any, ...]]:  # made one at a time, as COPY sends them
                for row, size in zip(rows, sizes, strict=True):
                    m = row.memory
                    emb = np.ascontiguousarray(row.embedding, dtype=np.float32)
                    record: tuple[Any, ...] = (
                        m.namespace,
                        m.id,
                        m.text,
                        _jsonb(m.metadata) if m.metadata else b"\x01{}",
                        _jsonb(list(m.contexts)) if m.contexts else b"\x01[]",
                        m.status,
                        float(m.created),
                        emb.tobytes(),
                        None if m.expires is None else float(m.expires),
                    )
                    if with_vectors:
                        record += (_vector_binary(emb) if size else None,)
                    yield record

            yield Copy(f"COPY memories ({columns}) FROM STDIN (FORMAT BINARY)", types, records(), binary)
            yield Copy(
                "COPY counters (namespace, id, success, failure, n, updated) FROM STDIN (FORMAT BINARY)",
                ["text", "text", "float8", "float8", "float8", "float8"],
                (
                    (m.namespace, m.id, float(m.counts.success), float(m.counts.failure), float(m.counts.n),
                     float(m.updated))
                    for m in (r.memory for r in rows)
                ),
                [],
            )
            edges = [(r.memory.namespace, r.memory.id, d, "derived_from") for r in rows for d in r.memory.derived_from]
            edges += [(r.memory.namespace, r.memory.id, d, "part_of") for r in rows for d in r.memory.part_of]
            if edges:
                yield Many("INSERT INTO edges VALUES (%s,%s,%s,%s) ON CONFLICT DO NOTHING", edges)
            if rebuild:
                yield Query(_CREATE_HNSW, fetch="none")
            if then is None:
                return None
            saved = yield from _change_steps(then, column)
            return saved

        def committed(_: Any) -> None:
            if fresh_column:
                self._vec_column = True

        return Plan(steps(), "write", on_unique=_duplicate_memory, then=committed)

    def memories(self, namespace: str, ids: Sequence[str] | None = None) -> list[Memory]:
        return self._do(self.plan_memories(namespace, ids))

    def plan_memories(self, namespace: str, ids: Sequence[str] | None = None) -> Plan:
        read = "SELECT " + MEMORY_COLUMNS + " FROM " + MEMORY_FROM + " WHERE m.namespace = %s"

        def steps() -> Statements:
            if ids is None:
                rows = yield Query(read + " ORDER BY m.seq", (namespace,))
            else:
                rows = yield Query(read + " AND m.id = ANY(%s) ORDER BY m.seq", (namespace, list(dict.fromkeys(ids))))
            edges = yield from _edges_of(namespace, rows)
            return memories_from_rows(namespace, rows, edges, json_text=False)

        return Plan(steps())

    def memory_page(
        self, namespace: str, *, after: int, limit: int, status: str | None = None, context: str | None = None
    ) -> list[tuple[int, Memory]]:
        sql = "SELECT " + MEMORY_COLUMNS + ", m.seq FROM " + MEMORY_FROM + " WHERE m.namespace = %s AND m.seq > %s"
        args: list[Any] = [namespace, after]
        if status is not None:
            sql += " AND m.status = %s"
            args.append(status)
        if context is not None:
            sql += " AND m.contexts ? %s"
            args.append(context)
        rows = self._read(sql + " ORDER BY m.seq LIMIT %s", (*args, limit))
        edges = self._do(Plan(_edges_of(namespace, rows)))
        found = memories_from_rows(namespace, [r[:-1] for r in rows], edges, json_text=False)
        return [(int(r[-1]), m) for r, m in zip(rows, found, strict=True)]

    def candidates(self, namespace: str, ids: Sequence[str]) -> list[tuple[Any, ...]]:
        """``(id, status, created, success, failure, n, standing, updated)`` of the given ids that exist,
        in no set order.

        The narrow read recall ranks its candidates with (no text, metadata or edges).
        """
        return self._do(self.plan_candidates(namespace, ids))

    def plan_candidates(self, namespace: str, ids: Sequence[str]) -> Plan:
        return _one_read(
            "SELECT m.id, m.status, m.created, c.success, c.failure, c.n, m.standing, c.updated FROM " + MEMORY_FROM
            + " WHERE m.namespace = %s AND m.id = ANY(%s)",
            (namespace, list(dict.fromkeys(ids))),
        )

    def edges(self, namespace: str) -> list[tuple[str, str, str]]:
        return self._do(self.plan_edges(namespace))

    def plan_edges(self, namespace: str) -> Plan:
        def steps() -> Statements:
            rows = yield Query("SELECT src, dst, kind FROM edges WHERE namespace = %s", (namespace,))
            return [(r[0], r[1], r[2]) for r in rows]

        return Plan(steps())

    def namespaces(self) -> list[str]:
        rows = self._run(lambda c: c.execute("SELECT DISTINCT namespace FROM memories ORDER BY namespace").fetchall())
        return [r[0] for r in rows]

    def vectors(self, namespace: str, after: int = 0) -> tuple[list[str], list[int], np.ndarray]:
        return self._do(self.plan_vectors(namespace, after))

    def plan_vectors(self, namespace: str, after: int = 0) -> Plan:
        def steps() -> Statements:
            rows = yield Query(
                "SELECT id, seq, embedding FROM memories WHERE namespace = %s AND seq > %s"
                " AND octet_length(embedding) > 0 ORDER BY seq",
                (namespace, after),
            )
            if not rows:
                return [], [], np.zeros((0, 0), dtype=np.float32)
            dim = len(rows[0][2]) // 4
            return [r[0] for r in rows], [int(r[1]) for r in rows], as_matrix([bytes(r[2]) for r in rows], dim)

        return Plan(steps())

    def search(self, namespace: str, query: np.ndarray, n: int) -> tuple[list[str], np.ndarray] | None:
        """The ``n`` most similar active memories, searched in PostgreSQL; None without pgvector."""
        return self._do(self.plan_search(namespace, query, n))

    def plan_search(self, namespace: str, query: np.ndarray, n: int) -> Plan:
        """:meth:`search`'s statements, in a pipeline: BEGIN, the settings and the query go out
        together, then COMMIT."""
        if not self.pgvector:
            return done(None)

        def steps() -> Statements:
            if not self._vec_column:  # asked once it exists; it is never dropped
                found = yield Query(
                    "SELECT 1 FROM information_schema.columns WHERE table_name = 'memories' AND column_name = 'vec'"
                    " AND table_schema = current_schema()",
                    fetch="one",
                )
                self._vec_column = found is not None
                if not self._vec_column:
                    return [], np.array([])
            q = _vector_text(query)
            yield Query(
                "SELECT set_config('hnsw.ef_search', %s, true), set_config('hnsw.iterative_scan', 'relaxed_order', true)",
                (str(min(1000, max(40, int(n)))),),  # pgvector's limit; the iterative scan goes on past it
                "none",
            )
            rows = yield Query(
                "SELECT id, -(vec <#> %s::vector) FROM memories WHERE namespace = %s AND status = 'active'"
                " AND vec IS NOT NULL ORDER BY vec <#> %s::vector LIMIT %s",
                (q, namespace, q, int(n)),
            )
            return [r[0] for r in rows], np.array([float(r[1]) for r in rows])

        return Plan(steps(), "pipeline")

    def quarantined(self) -> int:
        rows = self._read("SELECT count(*) FROM memories WHERE status = 'active' AND standing = 're-verify'", ())
        return int(rows[0][0])

    def inactive(self, namespace: str) -> list[str]:
        return self._do(self.plan_inactive(namespace))

    def plan_inactive(self, namespace: str) -> Plan:
        return _one_read(
            "SELECT id FROM memories WHERE namespace = %s AND status != 'active' AND octet_length(embedding) > 0",
            (namespace,),
            lambda rows: [r[0] for r in rows],
        )

    # -- episodes and outcomes ----------------------------------------------------------

    def insert_episode(self, episode: Episode) -> None:
        self._do(self.plan_insert_episode(episode))

    def plan_insert_episode(self, episode: Episode) -> Plan:
        def steps() -> Statements:
            inserted = yield Query(
                "INSERT INTO episodes (id, namespace, query, context, created, holdout) VALUES (%s,%s,%s,%s,%s,%s)"
                " ON CONFLICT (namespace, id) DO NOTHING RETURNING id",
                (episode.id, episode.namespace, episode.query, episode.context, episode.created, episode.holdout),
                "one",
            )
            if inserted is None:
                raise DuplicateError(f"episode {episode.id!r} exists already")
            if episode.items:
                yield Many(
                    "INSERT INTO episode_items (namespace, episode_id, position, memory_id, weight, propensity, probe)"
                    " VALUES (%s,%s,%s,%s,%s,%s,%s)",
                    [
                        (episode.namespace, episode.id, it.position, it.memory_id, it.weight, it.propensity, it.probe)
                        for it in episode.items
                    ],
                )
            if episode.draws:
                yield Many(
                    "INSERT INTO probe_draws (namespace, episode_id, memory_id, probe, share) VALUES (%s,%s,%s,%s,%s)",
                    [(episode.namespace, episode.id, d.memory_id, d.probe, d.share) for d in episode.draws],
                )

        return Plan(steps(), "write")

    def episodes(self, ids: Sequence[str], namespace: str | None = None) -> dict[str, Episode]:
        return self._do(self.plan_episodes(ids, namespace))

    def plan_episodes(self, ids: Sequence[str], namespace: str | None = None) -> Plan:
        # One statement (one round trip, in autocommit): each episode's row once per item, its
        # items in position order; an episode that retrieved nothing comes once, with NULLs.
        # With a namespace the read names it (one shard); without, an id logged in two
        # namespaces is refused (:func:`memworth.store.backend.episodes_from_rows`).
        unique = list(dict.fromkeys(ids))
        if namespace is None:
            return _one_read(_EPISODES + " WHERE e.id = ANY(%s)" + _EPISODES_ORDER, (unique,), episodes_from_rows)
        ids_are, named = _ids_filter(unique)
        return _one_read(
            _EPISODES + " WHERE e.namespace = %s AND e.id " + ids_are + _EPISODES_ORDER,
            (namespace, named),
            episodes_from_rows,
        )

    def episodes_at(
        self, ids: Sequence[str], namespace: str | None = None
    ) -> tuple[dict[str, Episode], int | None]:
        return self._do(self.plan_episodes_at(ids, namespace))

    def plan_episodes_at(self, ids: Sequence[str], namespace: str | None = None) -> Plan:
        # plan_episodes' join beside the namespace's generation row, in one statement (one
        # round trip, one shard): the generation comes on every row, and on one row of NULLs
        # when no episode matched. Without a namespace there is no one generation to read.
        unique = list(dict.fromkeys(ids))
        if namespace is None:
            return _one_read(
                _EPISODES + " WHERE e.id = ANY(%s)" + _EPISODES_ORDER,
                (unique,),
                lambda rows: (episodes_from_rows(rows), None),
            )

        def consume(rows: list[Any]) -> tuple[dict[str, Episode], int]:
            generation = int(rows[0][0]) if rows and rows[0][0] is not None else 0
            return episodes_from_rows([row[1:] for row in rows if row[1] is not None]), generation

        ids_are, named = _ids_filter(unique)
        return _one_read(
            "SELECT g.value, x.* FROM (SELECT (SELECT value FROM generations WHERE namespace = %s) AS value) g"
            " LEFT JOIN (" + _EPISODES + " WHERE e.namespace = %s AND e.id " + ids_are + ") x ON true"
            " ORDER BY x.id, x.position",
            (namespace, namespace, named),
            consume,
        )

    def append_outcomes(
        self,
        outcomes: Sequence[OutcomeRow],
        increments: Sequence[Increment],
        reweighted: Sequence[Episode] = (),
        *,
        given: Sequence[Episode] = (),
        generations: Mapping[str, int] | None = None,
    ) -> None:
        self._do(self.plan_append_outcomes(outcomes, increments, reweighted, given=given, generations=generations))

    def append_verifications(
        self,
        verifications: Sequence[Verification],
        outcomes: Sequence[OutcomeRow],
        increments: Sequence[Increment],
        reweighted: Sequence[Episode] = (),
    ) -> None:
        """One transaction, three statements whatever the batch size (see the module docstring);
        a plain batch (outcomes only: no verification, no ``used`` reweighting, the recording
        hot path) makes steps 2 and 3 as one statement, committed by itself (:data:`_RECORD`).

        1. the verifications (usually none or one), refused if the episode has one already;
        2. every counter of the batch in one statement (:data:`_COUNTERS`): the rows are
           locked in (namespace, id) order, then each gets its increments added one by
           one in the order given, starting from its current value, exactly as
           per-increment updates would (so a replay adds the same numbers in the same
           order and matches bit for bit);
        3. the outcome rows, appended in the order given, in the same statement as step 2
           (:data:`_RECORD`, as a plain record): the unique key on ``episode_id`` refuses an
           episode recorded already.
        """
        self._do(self.plan_append_verifications(verifications, outcomes, increments, reweighted))

    def plan_append_outcomes(
        self,
        outcomes: Sequence[OutcomeRow],
        increments: Sequence[Increment],
        reweighted: Sequence[Episode] = (),
        *,
        given: Sequence[Episode] = (),
        generations: Mapping[str, int] | None = None,
    ) -> Plan:
        """:meth:`append_outcomes`' plan; ``given`` (a plain record's episodes as the caller holds
        them) and ``generations`` are checked in the one statement that writes (:data:`_RECORD_GIVEN`)."""
        check_given(given, outcomes, reweighted, generations)
        return self._plan_append((), outcomes, increments, reweighted, given, generations or {})

    def plan_append_verifications(
        self,
        verifications: Sequence[Verification],
        outcomes: Sequence[OutcomeRow],
        increments: Sequence[Increment],
        reweighted: Sequence[Episode] = (),
    ) -> Plan:
        return self._plan_append(verifications, outcomes, increments, reweighted, (), {})

    def _plan_append(
        self,
        verifications: Sequence[Verification],
        outcomes: Sequence[OutcomeRow],
        increments: Sequence[Increment],
        reweighted: Sequence[Episode],
        given: Sequence[Episode],
        generations: Mapping[str, int],
    ) -> Plan:
        _no_repeats([(v.namespace, v.episode_id) for v in verifications], "is verified twice in one batch")
        _no_repeats([(o.namespace, o.episode_id) for o in outcomes], "has two outcomes in one batch")
        unnamed = next((o.episode_id for o in outcomes if not o.namespace), None)
        if unnamed is not None:  # the unique key is (namespace, episode_id): '' would escape it
            raise ValidationError("namespace", f"the outcome of episode {unnamed!r} names no namespace")
        recorded = outcomes[-1].recorded if outcomes else 0.0
        keys = [(o.namespace, o.episode_id) for o in outcomes]
        if outcomes and not verifications and not reweighted:  # a plain record: one statement
            return Plan(
                _record_outcomes(outcomes, increments, recorded, given, generations),
                "statement",
                on_unique=lambda exc: self._duplicate_outcome(keys, exc),
            )

        def steps() -> Statements:
            if verifications:
                yield from _insert_verifications(verifications)
            if reweighted:  # a record's ``used``: the logged weights become the credit given
                yield Many(
                    "UPDATE episode_items SET weight = %s WHERE namespace = %s AND episode_id = %s AND position = %s",
                    reweighted_rows(reweighted),
                )
            if outcomes:  # the counters and the outcome rows as a plain record writes them (one statement)
                yield from _record_outcomes(outcomes, increments, recorded)
            elif increments:
                yield from _add_to_counters(increments, recorded)

        return Plan(steps(), "write", on_unique=lambda exc: self._duplicate_outcome(keys, exc))

    def _duplicate_outcome(self, keys: Sequence[tuple[str, str]], exc: Exception) -> Plan:
        """The plan whose answer is the error for a refused outcome batch: it names the first
        episode (of ``keys``, (namespace, episode id) pairs) that had an outcome."""
        by_namespace: dict[str, list[str]] = {}
        for namespace, eid in keys:
            by_namespace.setdefault(namespace, []).append(eid)
        logged = [self.plan_outcomes_of(ids, namespace) for namespace, ids in by_namespace.items()]

        def steps() -> Statements:
            found: set[tuple[str, str]] = set()
            for plan in logged:
                found |= {(o.namespace, o.episode_id) for o in (yield from plan.steps).values()}
            for namespace, eid in keys:
                if (namespace, eid) in found:
                    return DuplicateError(f"episode {eid!r} already has an outcome")
            detail = getattr(getattr(exc, "diag", None), "message_detail", None) or str(exc)
            return DuplicateError(f"an episode of the batch already has an outcome ({detail})")

        return Plan(steps())

    def outcome_log(
        self, namespace: str | None = None, *, after: int = 0, limit: int | None = None
    ) -> Iterator[OutcomeRow]:
        cols = OUTCOME_COLUMNS
        sql = f"SELECT {cols} FROM outcomes WHERE seq > %s"
        args: list[Any] = [after]
        if namespace is not None:
            sql += " AND namespace = %s"
            args.append(namespace)
        sql += " ORDER BY seq"
        if limit is not None:
            sql += " LIMIT %s"
            args.append(limit)
        for row in self._run(lambda c: c.execute(sql, args).fetchall()):
            yield outcome_from_row(row)

    def history(self, namespace: str, after: int = 0) -> list[tuple[OutcomeRow, Episode]]:
        """Two indexed reads in one repeatable-read transaction (one snapshot). Inside a
        :meth:`transaction` (read committed, its isolation set by its first statement) the
        items are read after the outcomes: a later snapshot holds every item of every outcome
        the first read, and the items of outcomes it did not are left out.
        A part of the log (``after`` at or past the namespace's first outcome: the live
        statistics' tail) is read by :data:`_HISTORY_HEADS` and :data:`_HISTORY_ITEMS`, a probe
        per outcome; the whole log (replay, export, the dashboard, the CLI) by
        :data:`_HISTORY_HEADS_ALL` and :data:`_HISTORY_ITEMS_ALL`, each table read once."""

        def work(conn: Any) -> list[tuple[OutcomeRow, Episode]]:
            if getattr(self._held, "conn", None) is None:
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            first = conn.execute("SELECT min(seq) FROM outcomes WHERE namespace = %s", (namespace,)).fetchone()[0]
            if first is None or after >= first:  # nothing logged, or a part of the log: a probe per outcome
                heads = conn.execute(_HISTORY_HEADS, (namespace, after)).fetchall()
                items = conn.execute(_HISTORY_ITEMS, (namespace, after)).fetchall()
                return joined(namespace, heads, items)
            (was, _) = conn.execute(_NO_NESTED_LOOPS).fetchone()
            heads = conn.execute(_HISTORY_HEADS_ALL, (namespace, after)).fetchall()
            items = conn.execute(_HISTORY_ITEMS_ALL, (namespace, after)).fetchall()
            conn.execute("SELECT set_config('enable_nestloop', %s, true)", (was,))  # a held transaction goes on
            return joined(namespace, heads, items)

        return list(self._run(work))

    def outcome_count(self, namespace: str) -> int:
        def work(conn: Any) -> int:
            (n,) = conn.execute("SELECT count(*) FROM outcomes WHERE namespace = %s", (namespace,)).fetchone()
            return int(n)

        return int(self._run(work))

    def draw_outcomes(
        self, namespace: str, memory_id: str, after: int, exclude: Sequence[str] = ()
    ) -> list[DrawOutcome]:
        return self._do(self.plan_draw_outcomes(namespace, memory_id, after, exclude))

    def plan_draw_outcomes(self, namespace: str, memory_id: str, after: int, exclude: Sequence[str] = ()) -> Plan:
        sql = (
            "SELECT d.probe, d.share, o.success, o.confidence FROM probe_draws d"
            " JOIN outcomes o ON o.namespace = d.namespace AND o.episode_id = d.episode_id"
            " WHERE d.namespace = %s AND d.memory_id = %s AND o.seq > %s"
            " AND NOT EXISTS (SELECT 1 FROM episode_items i WHERE i.namespace = d.namespace"
            " AND i.episode_id = d.episode_id AND i.memory_id = ANY(%s))"
            " ORDER BY o.seq"
        )
        return _one_read(
            sql,
            (namespace, memory_id, int(after), sorted(set(exclude))),
            lambda rows: [(bool(p), float(q), bool(ok), float(c)) for p, q, ok, c in rows],
        )

    def outcomes_since(self, since: float, source: str | None = None, namespace: str | None = None) -> list[OutcomeRow]:
        return self._do(self.plan_outcomes_since(since, source, namespace))

    def plan_outcomes_since(self, since: float, source: str | None = None, namespace: str | None = None) -> Plan:
        cols = OUTCOME_COLUMNS
        sql, args = f"SELECT {cols} FROM outcomes WHERE recorded >= %s", list[object]([since])
        if source is not None:
            sql, args = sql + " AND source = %s", [*args, source]
        if namespace is not None:
            sql, args = sql + " AND namespace = %s", [*args, namespace]
        sql += " ORDER BY seq"
        return _one_read(sql, tuple(args), lambda rows: [outcome_from_row(row) for row in rows])

    def outcomes_of(self, episode_ids: Sequence[str], namespace: str | None = None) -> dict[str, OutcomeRow]:
        return self._do(self.plan_outcomes_of(episode_ids, namespace))

    def plan_outcomes_of(self, episode_ids: Sequence[str], namespace: str | None = None) -> Plan:
        cols = OUTCOME_COLUMNS
        sql = f"SELECT {cols} FROM outcomes"
        unique = list(dict.fromkeys(episode_ids))
        args: tuple[Any, ...]
        if namespace is None:
            sql, args = sql + " WHERE episode_id = ANY(%s)", (unique,)
        else:  # names the distribution column: one shard
            sql, args = sql + " WHERE namespace = %s AND episode_id = ANY(%s)", (namespace, unique)
        return _one_read(sql, args, lambda rows: _by_episode([outcome_from_row(row) for row in rows]))

    def verifications(self, after: int = 0) -> list[Verification]:
        return self._do(self.plan_verifications(after))

    def plan_verifications(self, after: int = 0) -> Plan:
        return _one_read(
            "SELECT seq, episode_id, namespace, success, source, reported, recorded FROM verifications"
            " WHERE seq > %s ORDER BY seq",
            (after,),
            lambda rows: [
                Verification(eid, ns, bool(ok), src, None if rep is None else bool(rep), rec, int(seq))
                for seq, eid, ns, ok, src, rep, rec in rows
            ],
        )

    def write_counts(self, namespace: str, counts: dict[str, Counts]) -> None:
        def work(conn: Any) -> None:
            with conn.cursor() as cur:
                cur.executemany(
                    "UPDATE counters SET success = %s, failure = %s, n = %s WHERE namespace = %s AND id = %s",
                    [(c.success, c.failure, c.n, namespace, mid) for mid, c in sorted(counts.items())],
                )

        self._run(work)

    # -- status and audit ---------------------------------------------------------------

    def change(self, entry: AuditEntry) -> AuditEntry:
        column = _column(entry)
        return self._run(lambda conn: _change_in(conn, entry, column))

    def erase(self, entries: Sequence[AuditEntry]) -> list[AuditEntry]:
        """Delete the rows (their vector column and HNSW entries with them) and log the tombstones
        in one transaction. Dead row versions stay in the table's pages until VACUUM reclaims them."""

        def work(conn: Any) -> list[AuditEntry]:
            saved = []
            for entry in entries:
                cur = conn.execute(
                    "DELETE FROM memories WHERE namespace = %s AND id = %s", (entry.namespace, entry.memory_id)
                )
                if cur.rowcount != 1:
                    raise UnknownMemoryError(entry.memory_id)
                conn.execute("DELETE FROM counters WHERE namespace = %s AND id = %s", (entry.namespace, entry.memory_id))
                saved.append(_audit(conn, entry))
            for ns in sorted({e.namespace for e in entries}):
                conn.execute(
                    "INSERT INTO meta VALUES (%s, '1') ON CONFLICT (key) DO UPDATE SET value = (meta.value::bigint + 1)::text",
                    (erased_key(ns),),
                )
            _bump(conn, (e.namespace for e in entries))
            return saved

        return self._run(work)

    def expired(self, namespace: str, now: float) -> list[str]:
        rows = self._read(
            "SELECT id FROM memories WHERE namespace = %s AND expires IS NOT NULL AND expires <= %s ORDER BY seq",
            (namespace, now),
        )
        return [r[0] for r in rows]

    def next_expiry(self, namespace: str) -> float | None:
        return self._do(self.plan_next_expiry(namespace))

    def plan_next_expiry(self, namespace: str) -> Plan:
        return _one_read(
            "SELECT MIN(expires) FROM memories WHERE namespace = %s AND expires IS NOT NULL",
            (namespace,),
            lambda rows: None if not rows or rows[0][0] is None else float(rows[0][0]),
        )

    def erased(self, namespace: str, ids: Sequence[str]) -> dict[str, int]:
        return self._do(self.plan_erased(namespace, ids))

    def plan_erased(self, namespace: str, ids: Sequence[str]) -> Plan:
        return _one_read(
            "SELECT memory_id, MAX(seq) FROM audit WHERE namespace = %s AND memory_id = ANY(%s) AND action = %s"
            " GROUP BY memory_id",
            (namespace, list(dict.fromkeys(ids)), ERASE),
            lambda rows: {mid: int(seq) for mid, seq in rows},
        )

    def audit_log(
        self, namespace: str, memory_id: str | None = None, *, after: int = 0, limit: int | None = None
    ) -> list[AuditEntry]:
        sql = "SELECT seq, memory_id, namespace, action, field, old, new, reason, settings, at FROM audit WHERE namespace = %s"
        args: tuple[Any, ...] = (namespace,)
        if memory_id is not None:
            sql += " AND memory_id = %s"
            args = (namespace, memory_id)
        sql += " AND seq > %s ORDER BY seq"
        args = (*args, after)
        if limit is not None:
            sql += " LIMIT %s"
            args = (*args, limit)
        rows = self._run(lambda c: c.execute(sql, args).fetchall())
        return [AuditEntry(int(r[0]), r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9]) for r in rows]

    def save_checkpoint(self, namespace: str, data: bytes) -> None:
        self._run(
            lambda c: c.execute(
                "INSERT INTO checkpoints VALUES (%s, %s) ON CONFLICT (namespace) DO UPDATE SET data = EXCLUDED.data",
                (namespace, bytes(data)),
            )
        )

    def load_checkpoint(self, namespace: str) -> bytes | None:
        rows = self._read("SELECT data FROM checkpoints WHERE namespace = %s", (namespace,))
        return bytes(rows[0][0]) if rows else None

    def drop_checkpoints(self, namespace: str | None = None) -> None:
        if namespace is None:
            self._run(lambda c: c.execute("DELETE FROM checkpoints"))
        else:
            self._run(lambda c: c.execute("DELETE FROM checkpoints WHERE namespace = %s", (namespace,)))

    def drop(self) -> None:
        """Delete this store's schema and everything in it (only for ``?schema=`` stores)."""
        if self.schema is None:
            raise StoreError("drop() only removes a store kept in its own ?schema=")
        self._run(lambda c: c.execute(f'DROP SCHEMA "{self.schema}" CASCADE'))

    def close(self) -> None:
        self._pool.close()


_CREATE_HNSW = "CREATE INDEX IF NOT EXISTS memories_vec_hnsw ON memories USING hnsw (vec vector_ip_ops)"
_JSONB = 3802  # the oid of jsonb, fixed in every PostgreSQL
REBUILD_AT = 1000
"""Fewest vectors in one insert for which PostgreSQL rebuilds the HNSW index (when the
batch also at least doubles the vectors stored) instead of adding to it row by row."""
_BUILD_MEMORY_CAP = 1 << 30
"""Most ``maintenance_work_mem`` (bytes) an index rebuild asks for, for its transaction only."""


def _no_repeated_ids(rows: Sequence[NewMemory]) -> None:
    seen: set[tuple[str, str]] = set()
    for r in rows:
        key = (r.memory.namespace, r.memory.id)
        if key in seen:
            raise DuplicateError(f"memory {key[1]!r} appears twice in one insert into namespace {key[0]!r}")
        seen.add(key)


def _duplicate_memory(exc: Exception) -> Plan:
    """A concurrent writer outside this store's rules inserted a memory of the batch."""
    detail = getattr(getattr(exc, "diag", None), "message_detail", None) or str(exc)
    return done(DuplicateError(f"a memory of the batch already exists ({detail})"))


def _refuse_existing(rows: Sequence[NewMemory]) -> Statements:
    """DuplicateError naming the first row whose (namespace, id) is stored already: one query per namespace."""
    by_namespace: dict[str, list[str]] = {}
    for r in rows:
        by_namespace.setdefault(r.memory.namespace, []).append(r.memory.id)
    stored: set[tuple[str, str]] = set()
    for namespace, ids in by_namespace.items():
        found = yield Query("SELECT id FROM memories WHERE namespace = %s AND id = ANY(%s)", (namespace, ids))
        stored |= {(namespace, f[0]) for f in found}
        gone = yield Query(
            "SELECT memory_id, MAX(seq) FROM audit WHERE namespace = %s AND action = %s AND memory_id = ANY(%s)"
            " GROUP BY memory_id",
            (namespace, ERASE, ids),
        )
        if gone:
            seqs = {g[0]: int(g[1]) for g in gone}
            mid = next(i for i in ids if i in seqs)
            raise reused(mid, namespace, seqs[mid])
    for r in rows:
        if (r.memory.namespace, r.memory.id) in stored:
            raise DuplicateError(f"memory {r.memory.id!r} already exists in namespace {r.memory.namespace!r}")


def _raise_build_memory(vectors: int, dimension: int) -> Statements:
    """Let the HNSW build keep its graph in memory (pgvector slows down badly once it spills).

    About ``dimension x 4`` bytes of vector and 512 bytes of graph per row, capped at
    :data:`_BUILD_MEMORY_CAP`; never below the server's own setting. ``SET LOCAL``: this
    transaction only.
    """
    want = min(_BUILD_MEMORY_CAP, vectors * (4 * dimension + 512)) // 1024
    have = int(
        (yield Query("SELECT setting::bigint FROM pg_settings WHERE name = 'maintenance_work_mem'", fetch="one"))[0]
    )
    if want > have:
        yield Query("SELECT set_config('maintenance_work_mem', %s, true)", (f"{int(want)}kB",), "none")  # = SET LOCAL


def _vector_binary(vector: np.ndarray) -> bytes:
    """pgvector's binary form: dimension and a zero (uint16 each), then big-endian float32s."""
    return struct.pack(">HH", vector.size, 0) + vector.astype(">f4").tobytes()


def _jsonb(value: object) -> bytes:
    """PostgreSQL's binary form of a jsonb value: version 1, then the JSON text."""
    return b"\x01" + json.dumps(value).encode()


def _vector_text(vector: np.ndarray) -> str:
    """pgvector's text form of a vector: '[x1,x2,...]' (float32 values, repr-exact)."""
    return "[" + ",".join(map(repr, np.asarray(vector, dtype=np.float32).ravel().tolist())) + "]"


# One statement for every counter a batch of outcomes changes. ``inc`` is the batch's
# increments in the order given (``ord``). ``locked`` locks the counter rows in (namespace, id)
# order, so two batches over the same hot memories cannot deadlock; under READ COMMITTED
# a locking read returns each row's newest committed version. It locks them one memory at a
# time (a LATERAL lookup, so a nested loop over the sorted distinct keys: one primary-key probe
# each); written as ``IN (SELECT ... FROM inc)``, the planner, which cannot know how few keys
# ``inc`` holds, scanned the whole table (a seq scan of 1,000 rows per outcome, 0.2 ms, in
# memworth bench's store). ``total`` adds, per memory,
# the current value and then the increments in the order given: ``sum(x ORDER BY ord)``
# over float8 is float8pl applied left to right from the first value, the very additions
# one UPDATE per increment would make. A memory that does not exist has no locked row and
# so matches no row to update: it is missing from RETURNING.
_LOCKED_TOTALS = """
WITH inc AS (
    SELECT * FROM unnest(%b::text[], %b::text[], %b::float8[], %b::float8[], %b::float8[])
        WITH ORDINALITY AS t(namespace, id, success, failure, n, ord)
), locked AS (
    SELECT m.namespace, m.id, m.success, m.failure, m.n
    FROM (SELECT DISTINCT namespace, id FROM inc ORDER BY namespace, id) AS k,
        LATERAL (
            SELECT c.namespace, c.id, c.success, c.failure, c.n FROM counters c
            WHERE c.namespace = k.namespace AND c.id = k.id FOR NO KEY UPDATE
        ) AS m
), total AS (
    SELECT namespace, id, sum(success ORDER BY ord) AS success, sum(failure ORDER BY ord) AS failure,
        sum(n ORDER BY ord) AS n
    FROM (
        SELECT namespace, id, success, failure, n, 0::bigint AS ord FROM locked
        UNION ALL SELECT namespace, id, success, failure, n, ord FROM inc
    ) AS x
    GROUP BY namespace, id
)"""
_COUNTERS = (
    _LOCKED_TOTALS
    + """
UPDATE counters m SET success = t.success, failure = t.failure, n = t.n, updated = %s
FROM total t WHERE m.namespace = t.namespace AND m.id = t.id
RETURNING m.namespace, m.id
"""
)


# One statement for a plain batch of outcomes (no verification, no ``used`` reweighting): the
# counters as :data:`_COUNTERS` sets them, then the outcome rows, made alone in autocommit (one
# round trip: no BEGIN, COMMIT). Statements in WITH run concurrently in no set order, so the
# order is forced: ``logged``'s one-time filter reads ``missing`` (so ``locked``: every lock is
# taken) and ``counted`` (initplans, each run to its end before the first outcome row is made),
# so every counter row is locked and set before an outcome takes its sequence number, as when
# the two were statements of one transaction: two records that share a memory take their
# sequence numbers in the order they changed it, which is what makes a replay add the same
# numbers in the same order (tests/store/test_postgres_batch.py fails without it). A memory
# missing from ``counters`` (erased) makes both write nothing and is returned: the caller
# refuses the batch, with nothing written. An episode with an outcome already fails the statement on the unique
# key (nothing written). ``counted`` sets the totals through the primary key (ON CONFLICT ...
# DO UPDATE; every row exists, locked above, so none is inserted): an UPDATE joined to
# ``total`` was planned as a seq scan of the table, as ``locked`` was. Under READ COMMITTED
# the conflict path updates the row's newest version, which ``locked`` holds.
_WRITE_RECORD = """, missing AS (
    SELECT namespace, id FROM inc EXCEPT SELECT namespace, id FROM locked
), counted AS (
    INSERT INTO counters AS m (namespace, id, success, failure, n, updated)
    SELECT namespace, id, success, failure, n, %s FROM total WHERE NOT EXISTS (SELECT FROM missing){also}
    ON CONFLICT (namespace, id) DO UPDATE
    SET success = excluded.success, failure = excluded.failure, n = excluded.n, updated = excluded.updated
    RETURNING m.id
), logged AS (
    INSERT INTO outcomes (episode_id, success, source, confidence, recorded, namespace, propagation, max_hops,
        settings_version)
    SELECT episode_id, success, source, confidence, recorded, namespace, propagation, max_hops, settings_version
    FROM unnest(%b::text[], %b::bool[], %b::text[], %b::float8[], %b::float8[], %b::text[], %b::float8[],
        %b::int4[], %b::int4[])
        WITH ORDINALITY AS o(episode_id, success, source, confidence, recorded, namespace, propagation, max_hops,
            settings_version, ord)
    WHERE (SELECT count(*) FROM counted) >= 0 AND NOT EXISTS (SELECT FROM missing){also}
    ORDER BY ord
    RETURNING 1
)
"""
_RECORD = _LOCKED_TOTALS + _WRITE_RECORD.format(also="") + "SELECT namespace, id FROM missing\n"

_RECORD_GIVEN = (
    _LOCKED_TOTALS
    + """, held AS (
    SELECT array_agg(g.id ORDER BY g.ord, i.position) AS ids,
        array_agg(i.position ORDER BY g.ord, i.position) AS positions,
        array_agg(i.memory_id ORDER BY g.ord, i.position) AS memories,
        array_agg(i.weight ORDER BY g.ord, i.position) AS weights
    FROM unnest(%b::text[], %b::text[]) WITH ORDINALITY AS g(namespace, id, ord)
    JOIN episode_items i ON i.namespace = g.namespace AND i.episode_id = g.id
), unlike AS (
    SELECT 'generation' AS what WHERE (
        SELECT COALESCE(array_agg(COALESCE(v.value, 0)::int8 ORDER BY g.ord), '{}')
        FROM unnest(%b::text[]) WITH ORDINALITY AS g(namespace, ord)
        LEFT JOIN generations v ON v.namespace = g.namespace
    ) <> %b::int8[]
    UNION ALL
    SELECT 'episode' FROM held
    WHERE (ids, positions, memories, weights) IS DISTINCT FROM (%b::text[], %b::int4[], %b::text[], %b::float8[])
)"""
    + _WRITE_RECORD.format(also=" AND NOT EXISTS (SELECT FROM unlike)")
    + "SELECT what, NULL FROM unlike UNION ALL SELECT namespace, id FROM missing\n"
)
""":data:`_RECORD` for outcomes whose episodes the caller credited as it holds them, not read
back (``given``, each with at least one item and a namespace): ``held`` reads their items as
logged (probed by primary key; an episode's items are written with its row, in one
transaction, and neither is ever deleted), in the order given and by position, and
``unlike`` says whether those differ from the items given (as many, and each one's episode,
position, memory and weight), or a namespace's generation moved from the one given (the
provenance credit propagated along was read at it); either makes both inserts write nothing.
Whole arrays are compared, not a probe per given row, so the generic plan PostgreSQL keeps for
the prepared statement is as cheap as one planned for the values (probes per row cost the
generic plan's 100 estimated rows each, and every call was planned anew). Answered: what is
unlike (``generation``, ``episode``; no id), then the missing memories."""


_RECORD_GIVEN_ONE = (
    _LOCKED_TOTALS
    + """, held AS (
    SELECT array_agg(i.position ORDER BY i.position) AS positions,
        array_agg(i.memory_id ORDER BY i.position) AS memories,
        array_agg(i.weight ORDER BY i.position) AS weights
    FROM episode_items i WHERE i.namespace = %s AND i.episode_id = %s
), unlike AS (
    SELECT 'generation' AS what FROM (SELECT %s::int8 AS value) g
    WHERE g.value IS NOT NULL AND g.value <> COALESCE((SELECT value FROM generations WHERE namespace = %s), 0)
    UNION ALL
    SELECT 'episode' FROM held
    WHERE (positions, memories, weights) IS DISTINCT FROM (%b::int4[], %b::text[], %b::float8[])
)"""
    + _WRITE_RECORD.format(also=" AND NOT EXISTS (SELECT FROM unlike)")
    + "SELECT what, NULL FROM unlike UNION ALL SELECT namespace, id FROM missing\n"
)
""":data:`_RECORD_GIVEN` for one episode (a record), named by value, not by arrays: the generic
plan then probes the one episode's items as a plan made for the values would, and PostgreSQL
keeps it (with arrays it estimates 100 episodes, and after some thousands of records on
unanalysed tables it planned the statement anew at every record: 0.4 ms of server CPU each).
The generation is checked when one is given (not NULL)."""


class _Texts(list[str]):
    """A ``text[]`` parameter with no NULL, sent in PostgreSQL's binary array format by one
    dumper call (:func:`_array_dumpers`): psycopg's own list dumper looks for the element type
    and dumps element by element, a third of a record's client CPU for its eleven arrays."""


class _Float8s(list[float]):
    """A ``float8[]`` parameter with no NULL, as :class:`_Texts` (IEEE doubles, as psycopg sends them)."""


class _Bools(list[bool]):
    """A ``bool[]`` parameter with no NULL, as :class:`_Texts`."""


class _MaybeFloat8s(list[float | None]):
    """A ``float8[]`` parameter that may hold NULLs (None), as :class:`_Texts`: an outcome's
    propagation (None: logged before schema 3)."""


class _MaybeInt4s(list[int | None]):
    """An ``int4[]`` parameter that may hold NULLs (None), as :class:`_Texts`: an outcome's
    ``max_hops`` and settings version. Only for values from -2**31 to 2**31 - 1
    (:func:`_maybe_int4s` passes other lists to psycopg, whose error the server gives)."""


_ARRAY_HEADER = struct.Struct(">iiIii")  # dimensions (1), has NULLs (0), element oid, length, lower bound (1)
_EMPTY_ARRAY = struct.Struct(">iiI")  # no dimension, no NULL, element oid
_NULL = struct.pack(">i", -1)  # an element's length -1: NULL
_FLOAT8 = struct.Struct(">id")  # an element's length (8) and value
_INT4 = struct.Struct(">ii")  # an element's length (4) and value
_INT4_MIN, _INT4_MAX = -(2**31), 2**31 - 1
_DUMPERS_REGISTERED: list[bool] = []


def _array_dumpers() -> None:
    """Register, once per process, the binary dumpers of :class:`_Texts`, :class:`_Float8s`,
    :class:`_Bools`, :class:`_MaybeFloat8s` and :class:`_MaybeInt4s` on psycopg's global
    adapters (every connection made after copies them)."""
    if _DUMPERS_REGISTERED:
        return
    import psycopg
    from psycopg.adapt import Dumper
    from psycopg.pq import Format

    types = psycopg.postgres.types

    def binary(name: str, element: Callable[[Any, Any], bytes]) -> type[Any]:
        elem_oid = types[name].oid

        class ArrayDumper(Dumper):
            format = Format.BINARY
            oid = types[name].array_oid

            def __init__(self, cls: type, context: Any = None) -> None:
                super().__init__(cls, context)
                conn = self.connection
                enc = conn.info.encoding if conn is not None else "utf-8"
                self.encoding = "utf-8" if enc == "ascii" else enc  # SQL_ASCII takes UTF-8 bytes, as psycopg sends them

            def dump(self, obj: Any) -> bytes:
                if not obj:
                    return _EMPTY_ARRAY.pack(0, 0, elem_oid)
                return _ARRAY_HEADER.pack(1, None in obj, elem_oid, len(obj), 1) + element(self, obj)

        return ArrayDumper

    def texts(dumper: Any, obj: list[str]) -> bytes:
        encoded = [v.encode(dumper.encoding) for v in obj]
        return b"".join(struct.pack(">i", len(b)) + b for b in encoded)

    def float8s(_dumper: Any, obj: list[float]) -> bytes:
        return struct.pack(">" + "id" * len(obj), *[x for v in obj for x in (8, v)])

    def bools(_dumper: Any, obj: list[bool]) -> bytes:
        return struct.pack(">" + "i?" * len(obj), *[x for v in obj for x in (1, v)])

    def maybe_float8s(_dumper: Any, obj: list[float | None]) -> bytes:
        return b"".join(_NULL if v is None else _FLOAT8.pack(8, v) for v in obj)

    def maybe_int4s(_dumper: Any, obj: list[int | None]) -> bytes:
        return b"".join(_NULL if v is None else _INT4.pack(4, v) for v in obj)

    for cls, name, element in (
        (_Texts, "text", texts),
        (_Float8s, "float8", float8s),
        (_Bools, "bool", bools),
        (_MaybeFloat8s, "float8", maybe_float8s),
        (_MaybeInt4s, "int4", maybe_int4s),
    ):
        psycopg.adapters.register_dumper(cls, binary(name, element))
    _DUMPERS_REGISTERED.append(True)


def _increment_arrays(increments: Sequence[Increment]) -> tuple[list[str], list[str], list[float], list[float], list[float]]:
    """The increments as the five arrays ``inc`` unnests (namespace, id, success, failure, n), in the order given."""
    return (
        _Texts([i.namespace for i in increments]),
        _Texts([i.memory_id for i in increments]),
        _Float8s([float(i.success) for i in increments]),
        _Float8s([float(i.failure) for i in increments]),
        _Float8s([float(i.n) for i in increments]),
    )


def _maybe_int4s(values: list[int | None]) -> list[int | None]:
    """``values`` as a :class:`_MaybeInt4s` when each is a Python int that fits an int4 (or None),
    else as they are (psycopg dumps them as before)."""
    if all(v is None or (isinstance(v, int) and not isinstance(v, bool) and _INT4_MIN <= v <= _INT4_MAX) for v in values):
        return _MaybeInt4s(values)
    return values  # a bool (an int to Python) is refused by the server as before, not stored as 0/1


def _maybe_float8s(values: list[float | None]) -> list[float | None]:
    """``values`` as a :class:`_MaybeFloat8s` of floats when each is a real number (or None), else
    as they are: a bool is not turned into 1.0 (psycopg and the server refuse it, as before)."""
    if all(v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)) for v in values):
        return _MaybeFloat8s([None if v is None else float(v) for v in values])
    return values


def _record_outcomes(
    outcomes: Sequence[OutcomeRow],
    increments: Sequence[Increment],
    recorded: float,
    given: Sequence[Episode] = (),
    generations: Mapping[str, int] | None = None,
) -> Statements:
    """Apply ``increments`` and append ``outcomes`` in one statement (:data:`_RECORD`);
    UnknownMemoryError (first in id order) if a memory is missing, with nothing written. With
    ``given`` (:data:`_RECORD_GIVEN`), first ChangedError if a namespace's generation is not the
    one ``generations`` says, then UnknownEpisodeError if an episode is not logged as given."""
    one = len(given) == 1 and len(generations or {}) <= 1
    missing = yield Query(
        (_RECORD_GIVEN_ONE if one else _RECORD_GIVEN) if given else _RECORD,
        (
            *_increment_arrays(increments),
            *((_given_one(given[0], generations or {}) if one else _given_arrays(given, generations or {})) if given else ()),
            recorded,
            _Texts([o.episode_id for o in outcomes]),
            _Bools([bool(o.success) for o in outcomes]),
            _Texts([o.source for o in outcomes]),
            _Float8s([float(o.confidence) for o in outcomes]),
            _Float8s([float(o.recorded) for o in outcomes]),
            _Texts([o.namespace for o in outcomes]),
            _maybe_float8s([o.propagation for o in outcomes]),
            _maybe_int4s([o.max_hops for o in outcomes]),
            _maybe_int4s([o.settings_version for o in outcomes]),
        ),
    )
    unlike = {what for what, mid in missing if mid is None}
    if "generation" in unlike:
        raise ChangedError("the namespace changed since its provenance was read; nothing recorded")
    if unlike:  # which episode: read them (a rare path: a copy the log does not hold, or none logged)
        logged: dict[tuple[str, str], Episode] = {}
        for namespace in dict.fromkeys(ep.namespace for ep in given):
            ids = [ep.id for ep in given if ep.namespace == namespace]
            rows = yield Query(_EPISODES + " WHERE e.namespace = %s AND e.id = ANY(%s)" + _EPISODES_ORDER, (namespace, ids))
            logged.update({(namespace, eid): ep for eid, ep in episodes_from_rows(rows).items()})
        unknown = (ep.id for ep in given if not logged_as_given(logged.get((ep.namespace, ep.id)), ep))
        raise UnknownEpisodeError(next(unknown, given[0].id))  # none: changed since the write looked
    if missing:
        raise UnknownMemoryError(min(missing)[1])  # in Python's order, as _add_to_counters names it


def _given_one(episode: Episode, generations: Mapping[str, int]) -> tuple[Any, ...]:
    """The parameters :data:`_RECORD_GIVEN_ONE` takes: the episode's namespace and id; the
    generation checked (None: none) and its namespace; its items' positions, memory ids and weights."""
    namespace, generation = next(iter(generations.items()), (episode.namespace, None))
    return (
        episode.namespace,
        episode.id,
        None if generation is None else int(generation),
        namespace,
        _MaybeInt4s([it.position for it in episode.items]),
        _Texts([it.memory_id for it in episode.items]),
        _Float8s([float(it.weight) for it in episode.items]),
    )


def _given_arrays(given: Sequence[Episode], generations: Mapping[str, int]) -> tuple[list[Any], ...]:
    """The arrays :data:`_RECORD_GIVEN` takes: the episodes' namespaces and ids; the namespaces
    whose generation is checked and those generations; per item, in order, its episode id,
    position, memory id and weight."""
    items = [(ep.id, it) for ep in given for it in ep.items]
    return (
        _Texts([ep.namespace for ep in given]),
        _Texts([ep.id for ep in given]),
        _Texts(list(generations)),
        [int(g) for g in generations.values()],
        _Texts([eid for eid, _ in items]),
        _MaybeInt4s([it.position for _, it in items]),
        _Texts([it.memory_id for _, it in items]),
        _Float8s([float(it.weight) for _, it in items]),
    )


def _add_to_counters(increments: Sequence[Increment], recorded: float) -> Statements:
    """Apply ``increments`` in one statement; UnknownMemoryError (first in id order) if a memory is missing."""
    rows = yield Query(_COUNTERS, (*_increment_arrays(increments), recorded))
    found = {(ns, mid) for ns, mid in rows}
    for ns, mid in sorted({(i.namespace, i.memory_id) for i in increments}):
        if (ns, mid) not in found:
            raise UnknownMemoryError(mid)


def _insert_verifications(verifications: Sequence[Verification]) -> Statements:
    """Append verifications (in the order given); DuplicateError naming an episode verified already."""
    rows = yield Query(
        "INSERT INTO verifications (episode_id, namespace, success, source, reported, recorded)"
        " SELECT episode_id, namespace, success, source, reported, recorded"
        " FROM unnest(%s::text[], %s::text[], %s::bool[], %s::text[], %s::bool[], %s::float8[])"
        " WITH ORDINALITY AS t(episode_id, namespace, success, source, reported, recorded, ord) ORDER BY ord"
        " ON CONFLICT (namespace, episode_id) DO NOTHING RETURNING episode_id",
        (
            [v.episode_id for v in verifications],
            [v.namespace for v in verifications],
            [v.success for v in verifications],
            [v.source for v in verifications],
            [v.reported for v in verifications],
            [v.recorded for v in verifications],
        ),
    )
    written = {r[0] for r in rows}
    for v in verifications:
        if v.episode_id not in written:
            raise DuplicateError(f"episode {v.episode_id!r} is verified already")


def _one_read(sql: str, params: Sequence[Any], consume: Callable[[list[Any]], Any] = list) -> Plan:
    """The plan of one read statement whose rows ``consume`` turns into the answer."""

    def steps() -> Statements:
        return consume((yield Query(sql, params)))

    return Plan(steps())


def _edges_of(namespace: str, rows: Sequence[Sequence[Any]]) -> Statements:
    """The provenance edges of the memories ``rows`` hold (their id first), one query."""
    if not rows:
        return []
    edges = yield Query(
        "SELECT src, dst, kind FROM edges WHERE namespace = %s AND src = ANY(%s)", (namespace, [r[0] for r in rows])
    )
    return edges


def _by_episode(outcomes: Sequence[OutcomeRow]) -> dict[str, OutcomeRow]:
    """Outcomes by episode id; ValidationError if one id has outcomes in two namespaces."""
    found: dict[str, OutcomeRow] = {}
    for o in outcomes:
        other = found.setdefault(o.episode_id, o)
        if other.namespace != o.namespace:
            raise ambiguous_episode(o.episode_id, (other.namespace, o.namespace))
    return found


def _no_repeats(keys: Sequence[tuple[str, str]], what: str) -> None:
    """DuplicateError naming the first (namespace, episode id) that appears twice in ``keys``: the
    unique key since schema 7, so one id in two namespaces is two episodes."""
    seen: set[tuple[str, str]] = set()
    for ns, eid in keys:
        if (ns, eid) in seen:
            raise DuplicateError(f"episode {eid!r} of namespace {ns!r} {what}")
        seen.add((ns, eid))


def _column(entry: AuditEntry) -> str | None:
    """The column a change sets (None for a note); ValidationError for any other field."""
    column = {"status": "status", "standing": "standing"}.get(entry.field)  # never interpolate input
    if column is None and entry.field not in NOTE_FIELDS:
        raise ValidationError("field", f"must be status, standing or one of {', '.join(NOTE_FIELDS)}")
    return column


def _change_in(conn: Any, entry: AuditEntry, column: str | None) -> AuditEntry:
    """Make one audited change inside the caller's transaction (see :meth:`PostgresBackend.change`)."""
    return execute(conn, _change_steps(entry, column))


def _change_steps(entry: AuditEntry, column: str | None) -> Statements:
    """:func:`_change_in`'s statements."""
    # Every audited change of a namespace, notes (pins) included, first takes its generation
    # row: entries then commit in the order of their seqs, so a change that requires no pin
    # after the seq its decision read cannot miss a pin given a lower seq and committed later.
    yield from _bump_steps([entry.namespace])
    if column is None:  # a note: the memory must exist, no column changes
        found = yield Query(
            "SELECT 1 FROM memories WHERE namespace = %s AND id = %s", (entry.namespace, entry.memory_id), "one"
        )
        if found is None:
            raise UnknownMemoryError(entry.memory_id)
        saved = yield from _audit_steps(entry)
        return saved
    count = yield Query(  # what else the change requires (null: anything) in the same statement
        f"UPDATE memories SET {column} = %s WHERE namespace = %s AND id = %s AND {column} = %s"
        " AND status = COALESCE(%s, status) AND standing = COALESCE(%s, standing)"
        " AND NOT EXISTS (SELECT 1 FROM audit WHERE audit.namespace = memories.namespace"
        " AND audit.memory_id = memories.id AND audit.field = 'pin' AND audit.seq > %s)",
        (entry.new, entry.namespace, entry.memory_id, entry.old, *required(entry)),
        "count",
    )
    if count != 1:
        raise changed(entry)
    yield Query(
        "UPDATE counters SET updated = %s WHERE namespace = %s AND id = %s",
        (entry.at, entry.namespace, entry.memory_id),
        "none",
    )
    saved = yield from _audit_steps(entry)
    return saved


def _audit(conn: Any, entry: AuditEntry) -> AuditEntry:
    """Append ``entry`` inside the caller's transaction; returns it with its seq."""
    return execute(conn, _audit_steps(entry))


def _audit_steps(entry: AuditEntry) -> Statements:
    """:func:`_audit`'s statement."""
    row = yield Query(
        "INSERT INTO audit (namespace, memory_id, action, field, old, new, reason, settings, at)"
        " VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s) RETURNING seq",
        (
            entry.namespace,
            entry.memory_id,
            entry.action,
            entry.field,
            entry.old,
            entry.new,
            entry.reason,
            json.dumps(entry.settings, sort_keys=True),
            entry.at,
        ),
        "one",
    )
    return AuditEntry(**{**entry.__dict__, "seq": int(row[0])})


def _bump(conn: Any, namespaces: Iterable[str]) -> None:
    execute(conn, _bump_steps(namespaces))


def _bump_steps(namespaces: Iterable[str]) -> Statements:
    """Add one to the generation row of each namespace, in name order: two transactions over
    the same namespaces lock their rows in the same order. A plain UPDATE (as cheap as schema
    6's of the one meta row; an upsert reads three times the buffers); a namespace's first
    change makes its row, and of two first changes at once the second waits for the first
    and adds to its row (ON CONFLICT)."""
    for namespace in sorted(set(namespaces)):
        changed = yield Query("UPDATE generations SET value = value + 1 WHERE namespace = %s", (namespace,), "count")
        if changed == 0:
            yield Query(
                "INSERT INTO generations VALUES (%s, 1)"
                " ON CONFLICT (namespace) DO UPDATE SET value = generations.value + 1",
                (namespace,),
                fetch="none",
            )
