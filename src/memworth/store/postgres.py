"""PostgreSQL backend (``postgresql://user@host:port/db[?schema=name]``): many processes, many hosts.

Every write is one transaction. The rules that keep concurrent writers exact:

* counters are incremented inside SQL (``success = success + %s``), so no update is lost;
* a transaction updates the counters first, in memory-id order (so two transactions
  over the same hot memories take their row locks in the same order and cannot
  deadlock), and only then appends its outcome rows: the outcome sequence numbers of two
  transactions that share a memory follow the order in which they changed it, which is
  what makes a replay of the log add the same numbers in the same order, bit for bit;
* an episode recorded twice is refused by a unique key (``ON CONFLICT DO NOTHING``
  then a count), not by a read-then-write check;
* memory inserts and status changes first lock the ``generation`` row, so memories
  become visible in the order of their insertion numbers and a reader that loads
  "everything after number n" never skips one still being committed;
* ``synchronous_commit`` stays on: an acknowledged outcome is durable.

Vector search runs inside PostgreSQL when the server has pgvector: embeddings are also
kept in a ``vector(d)`` column with an HNSW index (inner product: cosine on unit
vectors), and ``search`` returns the most similar active memories of a namespace in one
query (pgvector's iterative index scan keeps the namespace and status filter from
starving the result). The blended worth score is then computed in Python on that small
candidate set (50, or 10 x k). Without pgvector (Debian 12's PostgreSQL 15, say),
``search`` returns None and the store searches its own index, kept in step with
``vectors(after=...)``.

``?schema=name`` keeps a store in its own schema (created if missing); tests use it.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator, Sequence
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlparse, urlunparse

import numpy as np

from memworth.counts import Counts
from memworth.errors import DuplicateError, StoreError, UnknownMemoryError, ValidationError
from memworth.store.backend import SCHEMA_VERSION, Increment, NewMemory, redact
from memworth.store.records import AuditEntry, Episode, EpisodeItem, Memory, OutcomeRow, Verification, as_matrix

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
}


def _split_url(url: str) -> tuple[str, str | None, int]:
    parsed = urlparse(url)
    if parsed.scheme not in ("postgresql", "postgres"):
        raise ValidationError("url", f"expected postgresql://..., got {url!r}")
    query = dict(parse_qsl(parsed.query))
    schema = query.pop("schema", None)
    pool = query.pop("pool_size", "4")
    if schema is not None and not _SCHEMA.match(schema):
        raise ValidationError("schema", f"must be a lower-case SQL identifier, got {schema!r}")
    if not pool.isdigit() or not 1 <= int(pool) <= 64:
        raise ValidationError("pool_size", f"must be an integer from 1 to 64, got {pool!r}")
    return urlunparse(parsed._replace(query=urlencode(query))), schema, int(pool)


class PostgresBackend:
    """Memories, log and counters in PostgreSQL, through a psycopg 3 connection pool."""

    def __init__(self, url: str) -> None:
        try:
            import psycopg
            from psycopg_pool import ConnectionPool
        except ImportError:
            raise StoreError("the PostgreSQL backend needs psycopg: pip install 'memworth[postgres]'") from None
        self._psycopg = psycopg
        conninfo, self.schema, size = _split_url(url)
        self.url = redact(url)  # shown in messages and answers: never the password
        self._lock = threading.Lock()
        schema = self.schema

        def configure(conn: Any) -> None:
            if schema is not None:
                conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
                conn.execute(f'SET search_path TO "{schema}"')
            conn.commit()

        try:
            self._pool = ConnectionPool(conninfo, min_size=1, max_size=size, configure=configure, open=True, timeout=30)
            self._pool.wait(timeout=30)
            self._migrate()
        except psycopg.Error as exc:
            raise StoreError(f"cannot open {url}: {exc}") from exc
        except Exception as exc:  # the pool reports an unreachable server with its own error type
            if type(exc).__name__ == "PoolTimeout":
                raise StoreError(f"cannot reach PostgreSQL at {url}: {exc}") from exc
            raise

    # -- plumbing -------------------------------------------------------------------

    def _run(self, fn: Any) -> Any:
        """Run ``fn(conn)`` in one transaction; database errors become StoreError."""
        try:
            with self._pool.connection() as conn, conn.transaction():
                return fn(conn)
        except self._psycopg.Error as exc:
            raise StoreError(f"{self.url}: {exc}") from exc

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
            conn.execute("INSERT INTO meta VALUES ('generation', '0') ON CONFLICT (key) DO NOTHING")
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
        row = self._run(lambda c: c.execute("SELECT value FROM meta WHERE key = %s", (key,)).fetchone())
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        self._run(
            lambda c: c.execute(
                "INSERT INTO meta VALUES (%s, %s) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value", (key, value)
            )
        )

    def generation(self) -> int:
        return int(self.get_meta("generation") or 0)

    # -- memories ---------------------------------------------------------------------

    def _ensure_vector_column(self, conn: Any, dimension: int) -> None:
        conn.execute(f"ALTER TABLE memories ADD COLUMN IF NOT EXISTS vec vector({int(dimension)})")
        conn.execute("CREATE INDEX IF NOT EXISTS memories_vec_hnsw ON memories USING hnsw (vec vector_ip_ops)")

    def insert_memories(self, rows: Sequence[NewMemory]) -> None:
        def work(conn: Any) -> None:
            _bump(conn)  # first: serialises inserts, so seq order is commit order
            sizes = [int(np.asarray(r.embedding).size) for r in rows]
            if self.pgvector and any(sizes):  # external memories (size 0) have no vector
                self._ensure_vector_column(conn, max(sizes))
            with conn.cursor() as cur:
                records: list[tuple[Any, ...]] = []
                for row in rows:
                    m = row.memory
                    records.append(
                        (
                            m.namespace,
                            m.id,
                            m.text,
                            json.dumps(m.metadata),
                            json.dumps(list(m.contexts)),
                            m.status,
                            m.created,
                            m.updated,
                            np.ascontiguousarray(row.embedding, dtype=np.float32).tobytes(),
                        )
                    )
                if self.pgvector:  # the vector column too, in the same statement (NULL for external memories)
                    records = [
                        (*rec, _vector_text(r.embedding) if size else None)
                        for rec, r, size in zip(records, rows, sizes, strict=True)
                    ]
                    sql = (
                        "INSERT INTO memories (namespace, id, text, metadata, contexts, status, created, updated,"
                        " embedding, vec) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s::vector)"
                    )
                else:
                    sql = (
                        "INSERT INTO memories (namespace, id, text, metadata, contexts, status, created, updated,"
                        " embedding) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s)"
                    )
                cur.executemany(sql + " ON CONFLICT (namespace, id) DO NOTHING RETURNING id", records, returning=True)
                inserted = set()
                while True:
                    got = cur.fetchone()
                    if got is not None:
                        inserted.add(got[0])
                    if not cur.nextset():
                        break
                for row in rows:
                    if row.memory.id not in inserted:
                        m = row.memory
                        raise DuplicateError(f"memory {m.id!r} already exists in namespace {m.namespace!r}")
                edges = [
                    (r.memory.namespace, r.memory.id, d, "derived_from") for r in rows for d in r.memory.derived_from
                ]
                edges += [(r.memory.namespace, r.memory.id, d, "part_of") for r in rows for d in r.memory.part_of]
                if edges:
                    cur.executemany("INSERT INTO edges VALUES (%s,%s,%s,%s) ON CONFLICT DO NOTHING", edges)

        self._run(work)

    def memories(self, namespace: str, ids: Sequence[str] | None = None) -> list[Memory]:
        cols = "id, text, metadata, contexts, status, standing, created, updated, success, failure, n"

        def work(conn: Any) -> list[Memory]:
            if ids is None:
                rows = conn.execute(
                    f"SELECT {cols} FROM memories WHERE namespace = %s ORDER BY seq", (namespace,)
                ).fetchall()
            else:
                rows = conn.execute(
                    f"SELECT {cols} FROM memories WHERE namespace = %s AND id = ANY(%s) ORDER BY seq",
                    (namespace, list(dict.fromkeys(ids))),
                ).fetchall()
            edges: dict[str, dict[str, list[str]]] = {}
            if rows:
                for src, dst, kind in conn.execute(
                    "SELECT src, dst, kind FROM edges WHERE namespace = %s AND src = ANY(%s)",
                    (namespace, [r[0] for r in rows]),
                ):
                    edges.setdefault(src, {}).setdefault(kind, []).append(dst)
            return [
                Memory(
                    id=r[0],
                    text=r[1],
                    namespace=namespace,
                    metadata=r[2],
                    contexts=tuple(r[3]),
                    derived_from=tuple(sorted(edges.get(r[0], {}).get("derived_from", []))),
                    part_of=tuple(sorted(edges.get(r[0], {}).get("part_of", []))),
                    status=r[4],
                    standing=r[5],
                    created=r[6],
                    updated=r[7],
                    counts=Counts(r[8], r[9], r[10]),
                )
                for r in rows
            ]

        return list(self._run(work))

    def edges(self, namespace: str) -> list[tuple[str, str, str]]:
        rows = self._run(
            lambda c: c.execute("SELECT src, dst, kind FROM edges WHERE namespace = %s", (namespace,)).fetchall()
        )
        return [(r[0], r[1], r[2]) for r in rows]

    def namespaces(self) -> list[str]:
        rows = self._run(lambda c: c.execute("SELECT DISTINCT namespace FROM memories ORDER BY namespace").fetchall())
        return [r[0] for r in rows]

    def vectors(self, namespace: str, after: int = 0) -> tuple[list[str], list[int], np.ndarray]:
        rows = self._run(
            lambda c: c.execute(
                "SELECT id, seq, embedding FROM memories WHERE namespace = %s AND seq > %s"
                " AND octet_length(embedding) > 0 ORDER BY seq",
                (namespace, after),
            ).fetchall()
        )
        if not rows:
            return [], [], np.zeros((0, 0), dtype=np.float32)
        dim = len(rows[0][2]) // 4
        return [r[0] for r in rows], [int(r[1]) for r in rows], as_matrix([bytes(r[2]) for r in rows], dim)

    def search(self, namespace: str, query: np.ndarray, n: int) -> tuple[list[str], np.ndarray] | None:
        """The ``n`` most similar active memories, searched in PostgreSQL; None without pgvector."""
        if not self.pgvector:
            return None

        def work(conn: Any) -> list[tuple[Any, ...]]:
            if not self._vec_column:  # asked once it exists; it is never dropped
                self._vec_column = (
                    conn.execute(
                        "SELECT 1 FROM information_schema.columns WHERE table_name = 'memories' AND column_name = 'vec'"
                        " AND table_schema = current_schema()"
                    ).fetchone()
                    is not None
                )
                if not self._vec_column:
                    return []
            conn.execute(f"SET LOCAL hnsw.ef_search = {max(40, int(n))}")
            conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
            q = _vector_text(query)
            return conn.execute(
                "SELECT id, -(vec <#> %s::vector) FROM memories WHERE namespace = %s AND status = 'active'"
                " AND vec IS NOT NULL ORDER BY vec <#> %s::vector LIMIT %s",
                (q, namespace, q, int(n)),
            ).fetchall()

        rows = self._run(work)
        return [r[0] for r in rows], np.array([float(r[1]) for r in rows])

    def inactive(self, namespace: str) -> list[str]:
        rows = self._run(
            lambda c: c.execute(
                "SELECT id FROM memories WHERE namespace = %s AND status != 'active' AND octet_length(embedding) > 0",
                (namespace,),
            ).fetchall()
        )
        return [r[0] for r in rows]

    # -- episodes and outcomes ----------------------------------------------------------

    def insert_episode(self, episode: Episode) -> None:
        def work(conn: Any) -> None:
            inserted = conn.execute(
                "INSERT INTO episodes (id, namespace, query, context, created, holdout) VALUES (%s,%s,%s,%s,%s,%s)"
                " ON CONFLICT (id) DO NOTHING RETURNING id",
                (episode.id, episode.namespace, episode.query, episode.context, episode.created, episode.holdout),
            ).fetchone()
            if inserted is None:
                raise DuplicateError(f"episode {episode.id!r} exists already")
            if episode.items:
                with conn.cursor() as cur:
                    cur.executemany(
                        "INSERT INTO episode_items VALUES (%s,%s,%s,%s,%s)",
                        [(episode.id, it.position, it.memory_id, it.weight, it.propensity) for it in episode.items],
                    )

        self._run(work)

    def episodes(self, ids: Sequence[str]) -> dict[str, Episode]:
        def work(conn: Any) -> dict[str, Episode]:
            unique = list(dict.fromkeys(ids))
            heads = conn.execute(
                "SELECT id, namespace, query, context, created, holdout FROM episodes WHERE id = ANY(%s)", (unique,)
            ).fetchall()
            items: dict[str, list[EpisodeItem]] = {}
            for eid, pos, mid, w, p in conn.execute(
                "SELECT episode_id, position, memory_id, weight, propensity FROM episode_items"
                " WHERE episode_id = ANY(%s) ORDER BY episode_id, position",
                (unique,),
            ):
                items.setdefault(eid, []).append(EpisodeItem(mid, w, p, pos))
            return {h[0]: Episode(h[0], h[1], h[2], h[3], h[4], tuple(items.get(h[0], [])), bool(h[5])) for h in heads}

        return dict(self._run(work))

    def append_outcomes(self, outcomes: Sequence[OutcomeRow], increments: Sequence[Increment]) -> None:
        self.append_verifications((), outcomes, increments)

    def append_verifications(
        self, verifications: Sequence[Verification], outcomes: Sequence[OutcomeRow], increments: Sequence[Increment]
    ) -> None:
        ordered = sorted(increments, key=lambda i: (i.namespace, i.memory_id))
        recorded = outcomes[-1].recorded if outcomes else 0.0

        def work(conn: Any) -> None:
            with conn.cursor() as cur:
                for v in verifications:
                    cur.execute(
                        "INSERT INTO verifications (episode_id, namespace, success, source, reported, recorded)"
                        " VALUES (%s,%s,%s,%s,%s,%s) ON CONFLICT (episode_id) DO NOTHING RETURNING seq",
                        (v.episode_id, v.namespace, v.success, v.source, v.reported, v.recorded),
                    )
                    if cur.fetchone() is None:
                        raise DuplicateError(f"episode {v.episode_id!r} is verified already")
                if ordered:
                    # Counters first, in id order (lock order): see the module docstring.
                    cur.executemany(
                        "UPDATE memories SET success = success + %s, failure = failure + %s, n = n + %s, updated = %s"
                        " WHERE namespace = %s AND id = %s RETURNING id",
                        [(i.success, i.failure, i.n, recorded, i.namespace, i.memory_id) for i in ordered],
                        returning=True,
                    )
                    for inc in ordered:
                        if cur.fetchone() is None:
                            raise UnknownMemoryError(inc.memory_id)
                        cur.nextset()
                cur.executemany(
                    "INSERT INTO outcomes (episode_id, success, source, confidence, recorded) VALUES (%s,%s,%s,%s,%s)"
                    " ON CONFLICT (episode_id) DO NOTHING RETURNING episode_id",
                    [(o.episode_id, o.success, o.source, o.confidence, o.recorded) for o in outcomes],
                    returning=True,
                )
                for o in outcomes:
                    if cur.fetchone() is None:
                        raise DuplicateError(f"episode {o.episode_id!r} already has an outcome")
                    cur.nextset()

        self._run(work)

    def outcome_log(self) -> Iterator[OutcomeRow]:
        rows = self._run(
            lambda c: c.execute(
                "SELECT seq, episode_id, success, source, confidence, recorded FROM outcomes ORDER BY seq"
            ).fetchall()
        )
        for seq, eid, ok, source, conf, recorded in rows:
            yield OutcomeRow(eid, bool(ok), source, conf, recorded, int(seq))

    def outcomes_since(self, since: float, source: str | None = None) -> list[OutcomeRow]:
        cols = "seq, episode_id, success, source, confidence, recorded"
        sql = f"SELECT {cols} FROM outcomes WHERE recorded >= %s ORDER BY seq"
        args: tuple[Any, ...] = (since,)
        if source is not None:
            sql = f"SELECT {cols} FROM outcomes WHERE source = %s AND recorded >= %s ORDER BY seq"
            args = (source, since)
        rows = self._run(lambda c: c.execute(sql, args).fetchall())
        return [OutcomeRow(eid, bool(ok), src, conf, rec, int(seq)) for seq, eid, ok, src, conf, rec in rows]

    def outcomes_of(self, episode_ids: Sequence[str]) -> dict[str, OutcomeRow]:
        rows = self._run(
            lambda c: c.execute(
                "SELECT seq, episode_id, success, source, confidence, recorded FROM outcomes WHERE episode_id = ANY(%s)",
                (list(dict.fromkeys(episode_ids)),),
            ).fetchall()
        )
        return {eid: OutcomeRow(eid, bool(ok), src, conf, rec, int(seq)) for seq, eid, ok, src, conf, rec in rows}

    def verifications(self, after: int = 0) -> list[Verification]:
        rows = self._run(
            lambda c: c.execute(
                "SELECT seq, episode_id, namespace, success, source, reported, recorded FROM verifications"
                " WHERE seq > %s ORDER BY seq",
                (after,),
            ).fetchall()
        )
        return [
            Verification(eid, ns, bool(ok), src, None if rep is None else bool(rep), rec, int(seq))
            for seq, eid, ns, ok, src, rep, rec in rows
        ]

    def write_counts(self, namespace: str, counts: dict[str, Counts]) -> None:
        def work(conn: Any) -> None:
            with conn.cursor() as cur:
                cur.executemany(
                    "UPDATE memories SET success = %s, failure = %s, n = %s WHERE namespace = %s AND id = %s",
                    [(c.success, c.failure, c.n, namespace, mid) for mid, c in sorted(counts.items())],
                )

        self._run(work)

    # -- status and audit ---------------------------------------------------------------

    def change(self, entry: AuditEntry) -> AuditEntry:
        column = {"status": "status", "standing": "standing"}[entry.field]  # never interpolate input

        def work(conn: Any) -> AuditEntry:
            _bump(conn)
            cur = conn.execute(
                f"UPDATE memories SET {column} = %s, updated = %s WHERE namespace = %s AND id = %s AND {column} = %s",
                (entry.new, entry.at, entry.namespace, entry.memory_id, entry.old),
            )
            if cur.rowcount != 1:
                raise StoreError(
                    f"memory {entry.memory_id!r} is no longer {entry.field} {entry.old!r}; nothing changed"
                )
            seq = conn.execute(
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
            ).fetchone()[0]
            return AuditEntry(**{**entry.__dict__, "seq": int(seq)})

        return self._run(work)

    def audit_log(self, namespace: str, memory_id: str | None = None) -> list[AuditEntry]:
        sql = "SELECT seq, memory_id, namespace, action, field, old, new, reason, settings, at FROM audit WHERE namespace = %s"
        args: tuple[Any, ...] = (namespace,)
        if memory_id is not None:
            sql += " AND memory_id = %s"
            args = (namespace, memory_id)
        rows = self._run(lambda c: c.execute(sql + " ORDER BY seq", args).fetchall())
        return [AuditEntry(int(r[0]), r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9]) for r in rows]

    def drop(self) -> None:
        """Delete this store's schema and everything in it (only for ``?schema=`` stores)."""
        if self.schema is None:
            raise StoreError("drop() only removes a store kept in its own ?schema=")
        self._run(lambda c: c.execute(f'DROP SCHEMA "{self.schema}" CASCADE'))

    def close(self) -> None:
        self._pool.close()


def _vector_text(vector: np.ndarray) -> str:
    """pgvector's text form of a vector: '[x1,x2,...]' (float32 values, repr-exact)."""
    return "[" + ",".join(repr(float(x)) for x in np.asarray(vector, dtype=np.float32)) + "]"


def _bump(conn: Any) -> None:
    conn.execute("UPDATE meta SET value = (value::bigint + 1)::text WHERE key = 'generation'")
