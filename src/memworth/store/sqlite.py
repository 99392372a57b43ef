"""SQLite backend: the embedded default (``sqlite:///path.db``).

Durability: WAL journal with ``synchronous=FULL`` by default, so an outcome that
``record`` acknowledged survives a killed process and a power cut. A recall's episode row
is committed without waiting for the disk: the next commit that waits (the outcome's)
syncs the WAL up to and including it, so what a power cut can lose is recalls whose
outcome was not yet acknowledged (their outcome is then refused as an unknown episode,
never counted). ``?synchronous=normal`` trades the power-cut guarantee of outcomes too for
speed (still safe against a killed process).
Writers take the write lock up front (``BEGIN IMMEDIATE``) and add to counters inside
SQL (``success = success + ?``): with several processes writing, no read-then-write race
can lose an update, and no transaction fails half way on a lock upgrade.

Another program's file is never touched: a file that is neither empty nor a memworth
store is refused after a read-only look at its schema, before the journal mode or
anything else in it is changed; so is a store with a newer schema version than this code.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import partial
from operator import attrgetter, itemgetter
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import numpy as np

from memworth.counts import Counts
from memworth.errors import (
    ChangedError,
    DuplicateError,
    StoreError,
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
    changed,
    check_given,
    credited_as,
    episodes_from_rows,
    erased_key,
    joined,
    logged_as_given,
    memories_from_rows,
    outcome_from_row,
    required,
    reused,
    reweighted_rows,
)
from memworth.store.records import AuditEntry, Episode, EpisodeItem, Memory, OutcomeRow, Verification, as_matrix

__all__ = ["SQLiteBackend"]

MIGRATIONS: dict[int, str] = {
    1: """
    CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    CREATE TABLE memories (
        namespace TEXT NOT NULL,
        id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        text TEXT NOT NULL,
        metadata TEXT NOT NULL,
        contexts TEXT NOT NULL,
        status TEXT NOT NULL,
        standing TEXT NOT NULL DEFAULT 'normal',
        created REAL NOT NULL,
        updated REAL NOT NULL,
        success REAL NOT NULL DEFAULT 0,
        failure REAL NOT NULL DEFAULT 0,
        n REAL NOT NULL DEFAULT 0,
        embedding BLOB NOT NULL,
        PRIMARY KEY (namespace, id)
    );
    CREATE INDEX memories_by_status ON memories (namespace, status, seq);
    CREATE TABLE edges (
        namespace TEXT NOT NULL, src TEXT NOT NULL, dst TEXT NOT NULL, kind TEXT NOT NULL,
        PRIMARY KEY (namespace, src, kind, dst)
    );
    CREATE TABLE episodes (
        id TEXT PRIMARY KEY, namespace TEXT NOT NULL, query TEXT NOT NULL, context TEXT, created REAL NOT NULL
    );
    CREATE TABLE episode_items (
        episode_id TEXT NOT NULL, position INTEGER NOT NULL, memory_id TEXT NOT NULL,
        weight REAL NOT NULL, propensity REAL NOT NULL,
        PRIMARY KEY (episode_id, position)
    );
    CREATE TABLE outcomes (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        episode_id TEXT NOT NULL UNIQUE,
        success INTEGER NOT NULL,
        source TEXT NOT NULL,
        confidence REAL NOT NULL,
        recorded REAL NOT NULL
    );
    CREATE TABLE audit (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        namespace TEXT NOT NULL, memory_id TEXT NOT NULL, action TEXT NOT NULL,
        field TEXT NOT NULL, old TEXT NOT NULL, new TEXT NOT NULL, reason TEXT NOT NULL,
        settings TEXT NOT NULL, at REAL NOT NULL
    );
    CREATE INDEX audit_by_memory ON audit (namespace, memory_id, seq);
    """,
    # 2: verified outcomes (source reliability), the holdout mark of an episode, and
    # indexes for the recent-outcome reads of quotas and burst alerts.
    2: """
    CREATE TABLE IF NOT EXISTS verifications (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        episode_id TEXT NOT NULL UNIQUE,
        namespace TEXT NOT NULL,
        success INTEGER NOT NULL,
        source TEXT,
        reported INTEGER,
        recorded REAL NOT NULL
    );
    ALTER TABLE episodes ADD COLUMN holdout INTEGER NOT NULL DEFAULT 0;
    CREATE INDEX IF NOT EXISTS outcomes_by_time ON outcomes (recorded);
    CREATE INDEX IF NOT EXISTS outcomes_by_source ON outcomes (source, recorded);
    """,
    # 3: each outcome keeps its episode's namespace, so that a namespace's log is one
    # indexed read (governance, stats and the dashboard never scan other tenants' logs);
    # an episode item says whether it was served as a probe of a quarantined memory; an
    # outcome keeps the credit settings it was credited under, so any client replays it exactly.
    3: """
    ALTER TABLE outcomes ADD COLUMN namespace TEXT NOT NULL DEFAULT '';
    UPDATE outcomes SET namespace = COALESCE((SELECT e.namespace FROM episodes e WHERE e.id = outcomes.episode_id), '');
    CREATE INDEX IF NOT EXISTS outcomes_by_namespace ON outcomes (namespace, seq);
    ALTER TABLE episode_items ADD COLUMN probe INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE outcomes ADD COLUMN propagation REAL;
    ALTER TABLE outcomes ADD COLUMN max_hops INTEGER;
    """,
    # 4: a memory's time to live (``expires``, seconds since the epoch; NULL: never),
    # indexed for the expiry check every recall makes; tombstones are found by action;
    # memories and audit entries are read a page at a time in insertion order.
    4: """
    ALTER TABLE memories ADD COLUMN expires REAL;
    CREATE INDEX IF NOT EXISTS memories_by_expiry ON memories (namespace, expires) WHERE expires IS NOT NULL;
    CREATE INDEX IF NOT EXISTS audit_by_action ON audit (namespace, action, memory_id);
    CREATE INDEX IF NOT EXISTS memories_by_seq ON memories (namespace, seq);
    CREATE INDEX IF NOT EXISTS audit_by_namespace ON audit (namespace, seq);
    """,
    # 5: each namespace's checkpoint (its followed history and change detectors, saved by
    # govern), so that a new process reads only the outcomes logged after it.
    5: """
    CREATE TABLE IF NOT EXISTS checkpoints (namespace TEXT PRIMARY KEY, data BLOB NOT NULL);
    """,
    # 6: each outcome keeps the settings version in force when it was credited (NULL: logged
    # before versions were kept), so the log says under which kept settings it was done.
    6: """
    ALTER TABLE outcomes ADD COLUMN settings_version INTEGER;
    """,
    # 7: nothing. The version number is shared with PostgreSQL, whose version 7 makes its
    # schema ready to shard by namespace (docs/scaling.md). A SQLite file is one node and is
    # never distributed: its keys stay as they are (an episode id unique over the file, a
    # stricter rule than PostgreSQL's per namespace) and one generation counter serves every
    # namespace (one writer at a time: there is no row to stop serialising on).
    7: "",
    # 8: a memory's worth counters (success, failure, n) and its last update move to a narrow
    # table of their own, values copied as they are. Beside the text and a 1.5 KB embedding
    # about two memories fit a 4 KB page, so an outcome crediting k memories rewrote about k
    # pages into the WAL; a counters row is a few dozen bytes. The recorded-time index goes:
    # every recent-outcome read (quotas) names its source, which outcomes_by_source serves.
    # The memories table is rebuilt without the four columns (and its indexes made again)
    # rather than altered with DROP COLUMN, which needs SQLite 3.35: every new store runs this
    # migration too, so an older SQLite (RHEL 8 ships 3.26) could not open any store.
    8: """
    CREATE TABLE IF NOT EXISTS counters (
        namespace TEXT NOT NULL,
        id TEXT NOT NULL,
        success REAL NOT NULL DEFAULT 0,
        failure REAL NOT NULL DEFAULT 0,
        n REAL NOT NULL DEFAULT 0,
        updated REAL NOT NULL,
        PRIMARY KEY (namespace, id)
    ) WITHOUT ROWID;
    INSERT INTO counters (namespace, id, success, failure, n, updated)
        SELECT namespace, id, success, failure, n, updated FROM memories;
    CREATE TABLE memories_8 (
        namespace TEXT NOT NULL,
        id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        text TEXT NOT NULL,
        metadata TEXT NOT NULL,
        contexts TEXT NOT NULL,
        status TEXT NOT NULL,
        standing TEXT NOT NULL DEFAULT 'normal',
        created REAL NOT NULL,
        embedding BLOB NOT NULL,
        expires REAL,
        PRIMARY KEY (namespace, id)
    );
    INSERT INTO memories_8 (namespace, id, seq, text, metadata, contexts, status, standing, created, embedding, expires)
        SELECT namespace, id, seq, text, metadata, contexts, status, standing, created, embedding, expires FROM memories;
    DROP TABLE memories;
    ALTER TABLE memories_8 RENAME TO memories;
    CREATE INDEX memories_by_status ON memories (namespace, status, seq);
    CREATE INDEX memories_by_expiry ON memories (namespace, expires) WHERE expires IS NOT NULL;
    CREATE INDEX memories_by_seq ON memories (namespace, seq);
    DROP INDEX IF EXISTS outcomes_by_time;
    """,
    # 9: the probe draws of quarantined memories (issue 14): in a recall where a quarantined
    # memory would be served if allowed, a random draw makes it a probe (allowed) or a control
    # (held out), logged here beside the episode, never as an item (no counter, credit or
    # replay reads this table). The probe test compares the two arms' outcomes. Flags raised
    # up to the audit entry recorded in meta ``probe_draws_from_audit`` have no draws logged
    # for them and keep the probe-only test.
    9: """
    CREATE TABLE IF NOT EXISTS probe_draws (
        episode_id TEXT NOT NULL,
        memory_id TEXT NOT NULL,
        namespace TEXT NOT NULL,
        probe INTEGER NOT NULL,
        share REAL NOT NULL,
        PRIMARY KEY (episode_id, memory_id)
    );
    CREATE INDEX IF NOT EXISTS probe_draws_by_memory ON probe_draws (namespace, memory_id);
    INSERT OR REPLACE INTO meta SELECT 'probe_draws_from_audit', CAST(COALESCE(MAX(seq), 0) AS TEXT) FROM audit;
    """,
}


def _path_of(url: str) -> tuple[str, dict[str, str]]:
    parsed = urlparse(url)
    if parsed.scheme != "sqlite" or not parsed.path or parsed.path == "/":
        raise ValidationError("url", f"expected sqlite:///relative/path.db or sqlite:////absolute/path.db, got {url!r}")
    options = {k: v[-1] for k, v in parse_qs(parsed.query).items()}
    return parsed.path[1:], options


SYNCHRONOUS = {
    "full": "PRAGMA synchronous=FULL",
    "normal": "PRAGMA synchronous=NORMAL",
    "extra": "PRAGMA synchronous=EXTRA",
}
"""The durability levels a store URL may ask for (``?synchronous=``), as the statement that sets each."""

ROWS_KEPT = 200_000
"""Candidate rows (:meth:`SQLiteBackend.candidates`) a backend keeps between recalls, over every
namespace (the first kept leave first): about 0.3 KB each."""

EPISODES_KEPT = 10_000
"""Episodes a backend keeps after logging them (:meth:`SQLiteBackend.insert_episode`), to answer
the read of the outcome that follows without reading them back (the oldest leave first): about
1 KB each with k=4 items."""

CANDIDATE_COLUMNS = ("status", "created", "success", "failure", "n", "standing", "updated")
"""The columns of the narrow read after the id; a kept row follows this connection's changes to them."""
CANDIDATE_TABLES = {"memories": ("status", "created", "standing"), "counters": ("success", "failure", "n", "updated")}
"""Which table holds each candidate column (schema 8: the counters have a table of their own)."""
CANDIDATE_READ = "m.id, " + ", ".join(
    ("c." if c in CANDIDATE_TABLES["counters"] else "m.") + c for c in CANDIDATE_COLUMNS
)
_SUCCESS, _FAILURE, _N, _UPDATED = (1 + CANDIDATE_COLUMNS.index(c) for c in CANDIDATE_TABLES["counters"])
"""Where a kept row holds each counters column (after the id)."""


def _row_updated(table: str) -> str:
    """The temporary trigger that tells the kept candidate rows about this connection's updates of
    ``table``'s candidate columns (built from the constants above, no input in it). Made for the
    ``memories`` table only: the counters change in three statements of the backend's own, which
    tell the kept rows themselves (:meth:`_KeptRows.added`, :meth:`_KeptRows.rewritten`) instead
    of SQLite calling back into Python once per counter row (400 calls per batch of 100 k=4
    outcomes, about a tenth of the record path's time)."""
    columns = CANDIDATE_TABLES[table]
    return (
        "CREATE TEMP TRIGGER IF NOT EXISTS memworth_"
        + table
        + "_updated AFTER UPDATE OF "
        + ", ".join(columns)
        + " ON main."
        + table
        + " BEGIN SELECT memworth_"
        + table
        + "_changed(NEW.namespace, NEW.id, "
        + ", ".join("NEW." + c for c in columns)
        + "); END"
    )


class SQLiteBackend:
    """Memories, log and counters in one SQLite file (WAL)."""

    def __init__(self, url: str) -> None:
        path, options = _path_of(url)
        sync = options.pop("synchronous", "full").lower()
        if sync not in SYNCHRONOUS:
            raise ValidationError("synchronous", f"must be full, normal or extra, got {sync!r}")
        if options:
            raise ValidationError("url", f"unknown option(s): {', '.join(sorted(options))}")
        if path != ":memory:" and not Path(path).parent.exists():
            raise StoreError(f"cannot open {url}: folder {Path(path).parent} does not exist")
        self.url = url
        self._sync = sync
        self._lock = threading.RLock()
        self._unit = False  # a transaction() is open: each write is a savepoint inside it
        self._unit_lost = False  # SQLite rolled the open transaction() back whole after an error
        self._truncate_wal = False  # an erasure inside it: truncate the WAL once it commits
        self._rows = _KeptRows()  # recall's narrow rows, kept between recalls (see candidates)
        self._episodes = _KeptEpisodes()  # episodes logged here and not recorded yet (see episodes)
        try:
            self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=60.0)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open {url}: {exc}{_read_only_hint(path)}") from exc
        try:
            # Read-only first: a file that is neither empty nor a memworth store this code
            # knows is refused before anything (the journal mode included) is written to it.
            _stored_version(self._db, url)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(SYNCHRONOUS[sync])
            self._db.execute("PRAGMA busy_timeout=60000")
            self._db.execute("PRAGMA secure_delete=ON")  # an erased memory's bytes are overwritten, not left free
            self._migrate()
            self._watch_rows()
        except sqlite3.Error as exc:
            self._db.close()
            raise StoreError(f"cannot open {url}: {exc}{_read_only_hint(path)}") from exc
        except BaseException:
            self._db.close()
            raise

    # -- plumbing -------------------------------------------------------------------

    def _write(self) -> _Transaction:
        return _Transaction(self._db, self._lock, self)

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """One transaction around every write this store object makes until the block ends:
        committed at a clean exit, rolled back on an exception. It begins (``BEGIN
        IMMEDIATE``, the database's write lock) at the first write inside, so work before it
        (embedding, reading) holds no lock other processes wait for; each write is a
        savepoint of it. The connection's lock is held throughout: another thread's call on
        this backend waits for the end (it never sees what is not committed). StoreError if
        one is open already."""
        with self._lock:
            if self._unit:
                raise StoreError(f"{self.url}: a transaction is open already; transactions do not nest")
            self._unit, self._unit_lost = True, False
            committed = False
            try:
                yield
            except BaseException as exc:
                if self._db.in_transaction:
                    try:
                        self._db.execute("ROLLBACK")
                    except sqlite3.Error as err:
                        raise StoreError(f"rollback failed: {err}") from exc
                raise
            else:
                if self._unit_lost:
                    if self._db.in_transaction:  # cannot be: every write after the loss is refused
                        self._db.execute("ROLLBACK")
                    raise StoreError(_LOST)
                if self._db.in_transaction:
                    try:
                        self._db.execute("COMMIT")
                    except sqlite3.Error as err:
                        if self._db.in_transaction:
                            self._db.execute("ROLLBACK")
                        raise StoreError(f"commit failed, nothing written: {err}") from err
                committed = True
            finally:
                self._rows.settle(committed)
                self._episodes.settle(committed)
                self._unit = False
                due, self._truncate_wal = self._truncate_wal, False
            if due:  # committed: an erased memory's old pages leave the WAL now
                self._checkpoint_wal()

    @contextmanager
    def snapshot(self, *, write: bool = False) -> Iterator[None]:
        """One transaction on this store object's connection, under its lock, for the block
        (:meth:`memworth.store.backend.Backend.snapshot`). Reading: a deferred ``BEGIN``; WAL
        keeps the state of the block's first read for every later one while other connections
        commit. Writing: a :meth:`transaction` begun with ``BEGIN IMMEDIATE`` at once, so no
        other connection writes between the block's first read and its commit."""
        if write:
            with self.transaction():
                try:
                    self._db.execute("BEGIN IMMEDIATE")
                except sqlite3.Error as exc:
                    raise StoreError(f"cannot start a write: {exc}") from exc
                yield
            return
        with self._lock:
            if self._unit or self._db.in_transaction:
                raise StoreError(f"{self.url}: a transaction is open already; transactions do not nest")
            try:
                self._db.execute("BEGIN")
            except sqlite3.Error as exc:
                raise StoreError(f"{self.url}: {exc}") from exc
            try:
                yield
            finally:
                if self._db.in_transaction:  # it read only: ending it keeps and loses nothing
                    self._db.execute("ROLLBACK")

    def _read(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            try:
                return self._db.execute(sql, args).fetchall()
            except sqlite3.Error as exc:
                raise StoreError(f"{self.url}: {exc}") from exc

    def _migrate(self) -> None:
        with self._write() as db:
            current = _stored_version(db, self.url)  # again under the write lock: another process may have begun
            for version in range(current + 1, SCHEMA_VERSION + 1):
                for statement in MIGRATIONS[version].split(";"):
                    if statement.strip():
                        db.execute(statement)
                db.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", (str(version),))
            if db.execute("SELECT 1 FROM meta WHERE key = 'generation'").fetchone() is None:
                db.execute("INSERT INTO meta VALUES ('generation', '0')")

    def get_meta(self, key: str) -> str | None:
        rows = self._read("SELECT value FROM meta WHERE key = ?", (key,))
        return rows[0][0] if rows else None

    def set_meta(self, key: str, value: str) -> None:
        with self._write() as db:
            db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    def set_meta_if(self, key: str, expected: str | None, value: str, also: Mapping[str, str] | None = None) -> bool:
        with self._write() as db:  # BEGIN IMMEDIATE: the read and the write hold the database's write lock
            row = db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
            if (None if row is None else row[0]) != expected:
                return False
            for k, v in [*(also or {}).items(), (key, value)]:
                db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (k, v))
            return True

    def meta_items(self, prefix: str) -> list[tuple[str, str]]:
        rows = self._read("SELECT key, value FROM meta WHERE substr(key, 1, ?) = ? ORDER BY key", (len(prefix), prefix))
        return [(str(k), str(v)) for k, v in rows]

    def generation(self, namespace: str | None = None) -> int:
        return int(self.get_meta("generation") or 0)  # one counter for every namespace (schema 7)

    # -- memories ---------------------------------------------------------------------

    def insert_memories(self, rows: Sequence[NewMemory], then: AuditEntry | None = None) -> AuditEntry | None:
        """One transaction, two ``executemany`` (memory rows, then provenance edges), and ``then``,
        a change made in the same transaction (as :meth:`change` makes it)."""
        column = None if then is None else _column(then)
        records = [
            (
                r.memory.namespace,
                r.memory.id,
                i + 1,
                r.memory.text,
                json.dumps(r.memory.metadata) if r.memory.metadata else "{}",
                json.dumps(list(r.memory.contexts)) if r.memory.contexts else "[]",
                r.memory.status,
                r.memory.created,
                np.ascontiguousarray(r.embedding, dtype=np.float32).tobytes(),
                r.memory.expires,
            )
            for i, r in enumerate(rows)
        ]
        counters = [
            (m.namespace, m.id, m.counts.success, m.counts.failure, m.counts.n, m.updated)
            for m in (r.memory for r in rows)
        ]
        edges = [(r.memory.namespace, r.memory.id, d, "derived_from") for r in rows for d in r.memory.derived_from]
        edges += [(r.memory.namespace, r.memory.id, d, "part_of") for r in rows for d in r.memory.part_of]
        with self._write() as db:
            by_namespace: dict[str, list[str]] = {}
            for r in rows:
                by_namespace.setdefault(r.memory.namespace, []).append(r.memory.id)
            for namespace, ids in by_namespace.items():
                gone = self._erased(db, namespace, ids)
                if gone:
                    mid = next(i for i in ids if i in gone)
                    raise reused(mid, namespace, gone[mid])
            top = db.execute("SELECT COALESCE(MAX(seq), 0) FROM memories").fetchone()[0]
            start = db.total_changes
            try:
                db.executemany(
                    "INSERT INTO memories (namespace, id, seq, text, metadata, contexts, status, created,"
                    " embedding, expires) VALUES (?,?,? + ?,?,?,?,?,?,?,?)",
                    ((rec[0], rec[1], top, *rec[2:]) for rec in records),
                )
            except sqlite3.IntegrityError:
                # executemany stops at the offending row; the rows before it went in (and roll back).
                m = rows[db.total_changes - start].memory
                raise DuplicateError(f"memory {m.id!r} already exists in namespace {m.namespace!r}") from None
            db.executemany(
                "INSERT INTO counters (namespace, id, success, failure, n, updated) VALUES (?,?,?,?,?,?)", counters
            )
            db.executemany("INSERT OR IGNORE INTO edges VALUES (?,?,?,?)", edges)
            _bump(db)
            return None if then is None else self._change_in(db, then, column)

    def memories(self, namespace: str, ids: Sequence[str] | None = None) -> list[Memory]:
        if ids is None:
            rows = self._read(
                "SELECT " + MEMORY_COLUMNS + " FROM " + MEMORY_FROM + " WHERE m.namespace = ? ORDER BY m.seq",
                (namespace,),
            )
        else:
            found = self._rows_of(MEMORY_COLUMNS + ", m.seq", namespace, ids)
            rows = [r[:-1] for r in sorted(found, key=lambda r: r[-1])]
        edges = self._edges_of(namespace, None if ids is None else [r[0] for r in rows]) if rows else []
        return memories_from_rows(namespace, rows, edges, json_text=True)

    def memory_page(
        self, namespace: str, *, after: int, limit: int, status: str | None = None, context: str | None = None
    ) -> list[tuple[int, Memory]]:
        sql = "SELECT " + MEMORY_COLUMNS + ", m.seq FROM " + MEMORY_FROM + " WHERE m.namespace = ? AND m.seq > ?"
        args: list[Any] = [namespace, after]
        if status is not None:
            sql += " AND m.status = ?"
            args.append(status)
        if context is not None:
            sql += " AND EXISTS (SELECT 1 FROM json_each(m.contexts) WHERE json_each.value = ?)"
            args.append(context)
        rows = self._read(sql + " ORDER BY m.seq LIMIT ?", (*args, limit))
        edges = self._edges_of(namespace, [r[0] for r in rows]) if rows else []
        found = memories_from_rows(namespace, [r[:-1] for r in rows], edges, json_text=True)
        return [(int(r[-1]), m) for r, m in zip(rows, found, strict=True)]

    def candidates(self, namespace: str, ids: Sequence[str]) -> list[tuple[Any, ...]]:
        """``(id, status, created, success, failure, n, standing, updated)`` of the given ids that exist,
        in no set order.

        The narrow read recall ranks its candidates with (no text, metadata or edges). Rows
        are kept (at most :data:`ROWS_KEPT`) and answered from memory until they may have
        changed (:class:`_KeptRows`): a row this connection's write changes takes the values
        it was written with once that write commits; every row is read again after another
        connection (another store object or process) commits anything (``PRAGMA
        data_version``). Inside a transaction nothing is kept or answered from memory.
        """
        with self._lock:
            try:
                if self._db.in_transaction:
                    return self._rows_of(CANDIDATE_READ, namespace, ids)
                (version,) = self._db.execute("PRAGMA data_version").fetchone()
                kept = self._rows.since(version)
                out, missing = [], []
                for mid in dict.fromkeys(ids):
                    row = kept.get((namespace, mid))
                    if row is None:
                        missing.append(mid)
                    else:
                        out.append(row)
                if missing:
                    found = self._rows_of(CANDIDATE_READ, namespace, missing)
                    self._rows.keep(namespace, found)
                    out += found
                return out
            except sqlite3.Error as exc:
                raise StoreError(f"{self.url}: {exc}") from exc

    def _watch_rows(self) -> None:
        """Temporary triggers (this connection's only, never stored in the file) that tell the kept
        rows when this connection changes one of their ``memories`` columns or deletes a memory
        (the counters columns: the backend's own statements tell them, see :func:`_row_updated`)."""
        rows = self._rows  # not the backend: the connection holds no cycle back to it
        width = 1 + len(CANDIDATE_COLUMNS)  # a kept row: the id, then the columns
        for table in ("memories",):  # the counters: see _row_updated
            columns = CANDIDATE_TABLES[table]
            positions = [1 + CANDIDATE_COLUMNS.index(c) for c in columns]
            # the new row from (kept row + written values) in one C call: each column from the
            # kept row, or from the values when the trigger's table holds it
            splice = itemgetter(*(width + positions.index(i) if i in positions else i for i in range(width)))
            self._db.create_function("memworth_" + table + "_changed", 2 + len(columns), partial(rows.changed, splice))
            self._db.execute(_row_updated(table))
        self._db.create_function("memworth_row_deleted", 2, rows.deleted)
        self._db.execute(
            "CREATE TEMP TRIGGER IF NOT EXISTS memworth_row_deleted AFTER DELETE ON main.memories"
            " BEGIN SELECT memworth_row_deleted(OLD.namespace, OLD.id); END"
        )

    def _rows_of(self, cols: str, namespace: str, ids: Sequence[str]) -> list[tuple[Any, ...]]:
        """Columns ``cols`` of the memories ``ids`` (distinct, those that exist), 500 ids per query."""
        found: list[tuple[Any, ...]] = []
        unique = list(dict.fromkeys(ids))
        for start in range(0, len(unique), 500):
            chunk = unique[start : start + 500]
            marks = ",".join("?" * len(chunk))
            found += self._read(
                "SELECT " + cols + " FROM " + MEMORY_FROM + f" WHERE m.namespace = ? AND m.id IN ({marks})",
                (namespace, *chunk),
            )
        return found

    def _edges_of(self, namespace: str, ids: list[str] | None) -> list[tuple[Any, ...]]:
        """Provenance edges from the given memories (all of the namespace's for None)."""
        if ids is None:
            return self._read("SELECT src, dst, kind FROM edges WHERE namespace = ?", (namespace,))
        found: list[tuple[Any, ...]] = []
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            found += self._read(
                f"SELECT src, dst, kind FROM edges WHERE namespace = ? AND src IN ({marks})", (namespace, *chunk)
            )
        return found

    def edges(self, namespace: str) -> list[tuple[str, str, str]]:
        return [tuple(r) for r in self._read("SELECT src, dst, kind FROM edges WHERE namespace = ?", (namespace,))]

    def namespaces(self) -> list[str]:
        return [r[0] for r in self._read("SELECT DISTINCT namespace FROM memories ORDER BY namespace")]

    def vectors(self, namespace: str, after: int = 0) -> tuple[list[str], list[int], np.ndarray]:
        rows = self._read(
            "SELECT id, seq, embedding FROM memories WHERE namespace = ? AND seq > ? AND length(embedding) > 0"
            " ORDER BY seq",
            (namespace, after),
        )
        if not rows:
            return [], [], np.zeros((0, 0), dtype=np.float32)
        dim = len(rows[0][2]) // 4
        return [r[0] for r in rows], [r[1] for r in rows], as_matrix([r[2] for r in rows], dim)

    def quarantined(self) -> int:
        rows = self._read("SELECT count(*) FROM memories WHERE status = 'active' AND standing = 're-verify'", ())
        return int(rows[0][0])

    def inactive(self, namespace: str) -> list[str]:
        return [
            r[0]
            for r in self._read(
                "SELECT id FROM memories WHERE namespace = ? AND status != 'active' AND length(embedding) > 0",
                (namespace,),
            )
        ]

    # -- episodes and outcomes ----------------------------------------------------------

    def insert_episode(self, episode: Episode) -> None:
        """Log a recall without waiting for the disk (``synchronous=NORMAL`` for this commit):
        the WAL is synced by the next commit that waits (an outcome's, which needs its episode
        first in the WAL), so an acknowledged outcome is never without its episode; a power cut
        may lose episodes that have no outcome yet, whose outcome is then refused as unknown."""
        with self._lock:
            relaxed = self._sync != "normal" and not self._unit  # inside a transaction(): its commit decides
            if relaxed:
                self._db.execute(SYNCHRONOUS["normal"])
            try:
                version = self._insert_episode(episode)
            finally:
                if relaxed:
                    self._db.execute(SYNCHRONOUS[self._sync])
            self._episodes.logged(episode, version, pending=self._unit)

    def _insert_episode(self, episode: Episode) -> int:
        """Write ``episode``; returns ``PRAGMA data_version`` as read inside the write (every other
        connection's commit before it counted, none after it can be)."""
        with self._write() as db:
            (version,) = db.execute("PRAGMA data_version").fetchone()
            try:
                db.execute(
                    "INSERT INTO episodes (id, namespace, query, context, created, holdout) VALUES (?,?,?,?,?,?)",
                    (
                        episode.id,
                        episode.namespace,
                        episode.query,
                        episode.context,
                        episode.created,
                        int(episode.holdout),
                    ),
                )
            except sqlite3.IntegrityError:
                raise DuplicateError(f"episode {episode.id!r} exists already") from None
            db.executemany(
                "INSERT INTO episode_items (episode_id, position, memory_id, weight, propensity, probe)"
                " VALUES (?,?,?,?,?,?)",
                [
                    (episode.id, it.position, it.memory_id, it.weight, it.propensity, int(it.probe))
                    for it in episode.items
                ],
            )
            if episode.draws:
                db.executemany(
                    "INSERT INTO probe_draws (episode_id, memory_id, namespace, probe, share) VALUES (?,?,?,?,?)",
                    [(episode.id, d.memory_id, episode.namespace, int(d.probe), d.share) for d in episode.draws],
                )
        return int(version)

    def episodes(self, ids: Sequence[str], namespace: str | None = None) -> dict[str, Episode]:
        """One read per 500 ids: each episode's row once per item (its items in position
        order; an episode that retrieved nothing once, with NULLs), as PostgreSQL reads them.
        Episode ids are unique across the file: ``namespace`` only filters.

        An episode this connection logged and no outcome has been logged for through it is
        answered from memory (:class:`_KeptEpisodes`) while no other connection has committed
        anything since (``PRAGMA data_version``, as :meth:`candidates` checks its kept rows):
        the read of the outcome that follows a recall in the same store object is then no read
        at all. Once a transaction's first write has begun it, every episode is read. Episodes
        come in id order, as a read gives them."""
        out: dict[str, Episode] = {}
        unique = list(dict.fromkeys(ids))
        cached = False
        with self._lock:
            kept = self._kept_now()
            if kept:
                missing = []
                for eid in unique:
                    ep = kept.get(eid)
                    if ep is None:
                        missing.append(eid)
                    else:
                        out[eid] = ep
                cached, unique = bool(out), missing
            for start in range(0, len(unique), 500):
                chunk = unique[start : start + 500]
                marks = ",".join("?" * len(chunk))
                out.update(
                    episodes_from_rows(
                        self._read(
                            "SELECT e.id, e.namespace, e.query, e.context, e.created, e.holdout,"
                            " i.position, i.memory_id, i.weight, i.propensity, i.probe"
                            " FROM episodes e LEFT JOIN episode_items i ON i.episode_id = e.id"
                            f" WHERE e.id IN ({marks}) ORDER BY e.id, i.position",
                            chunk,
                        )
                    )
                )
        if cached and len(out) > 1:  # in id order, as one read gives them
            out = dict(sorted(out.items()))
        return out if namespace is None else {i: e for i, e in out.items() if e.namespace == namespace}

    def _kept_now(self) -> dict[str, Episode]:
        """The kept episodes (:class:`_KeptEpisodes`) that are what a read gives now: none inside
        a transaction (once its first write has begun it, every episode is read) or once another
        connection has committed anything (``PRAGMA data_version``). Call under the lock."""
        if not self._episodes.kept or self._db.in_transaction:
            return {}
        try:
            (version,) = self._db.execute("PRAGMA data_version").fetchone()
        except sqlite3.Error as exc:
            raise StoreError(f"{self.url}: {exc}") from exc
        return self._episodes.since(version)

    def episodes_at(
        self, ids: Sequence[str], namespace: str | None = None
    ) -> tuple[dict[str, Episode], int | None]:
        with self._lock:  # one connection: nothing commits between the two reads
            return self.episodes(ids, namespace), None if namespace is None else self.generation(namespace)

    def append_outcomes(
        self,
        outcomes: Sequence[OutcomeRow],
        increments: Sequence[Increment],
        reweighted: Sequence[Episode] = (),
        *,
        given: Sequence[Episode] = (),
        generations: Mapping[str, int] | None = None,
    ) -> None:
        check_given(given, outcomes, reweighted, generations)
        with self._lock:  # a kept copy vouches for a given episode: only the others are read
            kept = self._kept_now()
            unread = [ep for ep in given if not logged_as_given(kept.get(ep.id), ep)] if kept else given
        with self._write() as db:
            if generations:
                row = db.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
                if any(g != int(row[0] if row else 0) for g in generations.values()):  # one counter (generation())
                    raise ChangedError("the namespace changed since its provenance was read; nothing recorded")
            if unread:  # an episode kept above cannot have changed since: only its outcome changes it,
                _check_logged_as_given(db, unread)  # and the unique key refuses a second one
            self._append(db, outcomes, increments, reweighted)

    def append_verifications(
        self,
        verifications: Sequence[Verification],
        outcomes: Sequence[OutcomeRow],
        increments: Sequence[Increment],
        reweighted: Sequence[Episode] = (),
    ) -> None:
        with self._write() as db:
            for v in verifications:
                try:
                    db.execute(
                        "INSERT INTO verifications (episode_id, namespace, success, source, reported, recorded)"
                        " VALUES (?,?,?,?,?,?)",
                        (
                            v.episode_id,
                            v.namespace,
                            int(v.success),
                            v.source,
                            None if v.reported is None else int(v.reported),
                            v.recorded,
                        ),
                    )
                except sqlite3.IntegrityError:
                    raise DuplicateError(f"episode {v.episode_id!r} is verified already") from None
            self._append(db, outcomes, increments, reweighted)

    def _append(
        self,
        db: sqlite3.Connection,
        outcomes: Sequence[OutcomeRow],
        increments: Sequence[Increment],
        reweighted: Sequence[Episode] = (),
    ) -> None:
        """Append outcomes and apply increments (and the ``reweighted`` episodes' weights) inside
        the caller's write transaction. Their episodes leave the kept ones (their weights may
        change here, and a second outcome is refused anyway)."""
        self._episodes.recorded(o.episode_id for o in outcomes)
        if reweighted:
            db.executemany(
                "UPDATE episode_items SET weight = ? WHERE episode_id = ? AND position = ?",
                [(w, eid, pos) for w, _namespace, eid, pos in reweighted_rows(reweighted)],
            )
        start = db.total_changes
        try:
            db.executemany(
                "INSERT INTO outcomes (episode_id, success, source, confidence, recorded, propagation, max_hops,"
                " settings_version, namespace)"
                " VALUES (?,?,?,?,?,?,?,?, COALESCE((SELECT namespace FROM episodes WHERE id = ?), ?))",
                [
                    (
                        o.episode_id,
                        int(o.success),
                        o.source,
                        o.confidence,
                        o.recorded,
                        o.propagation,
                        o.max_hops,
                        o.settings_version,
                        o.episode_id,
                        o.namespace,
                    )
                    for o in outcomes
                ],
            )
        except sqlite3.IntegrityError:
            # executemany stops at the offending row: the rows before it went in.
            dup = outcomes[db.total_changes - start].episode_id
            raise DuplicateError(f"episode {dup!r} already has an outcome") from None
        # Ordered by memory (stable: per memory the increments keep outcome order, which
        # replay reproduces exactly); one statement, executed per row.
        ordered = sorted(increments, key=attrgetter("namespace", "memory_id"))
        recorded = outcomes[-1].recorded if outcomes else 0.0
        before = db.total_changes
        added = [(i.success, i.failure, i.n, recorded, i.namespace, i.memory_id) for i in ordered]
        db.executemany(
            "UPDATE counters SET success = success + ?, failure = failure + ?, n = n + ?, updated = ?"
            " WHERE namespace = ? AND id = ?",
            added,
        )
        if db.total_changes - before != len(ordered):
            missing = next(
                i.memory_id
                for i in ordered
                if db.execute(
                    "SELECT 1 FROM counters WHERE namespace = ? AND id = ?", (i.namespace, i.memory_id)
                ).fetchone()
                is None
            )
            raise UnknownMemoryError(missing)
        self._rows.added(added)

    def outcome_log(
        self, namespace: str | None = None, *, after: int = 0, limit: int | None = None
    ) -> Iterator[OutcomeRow]:
        cols = OUTCOME_COLUMNS
        sql = f"SELECT {cols} FROM outcomes WHERE seq > ?"
        args: list[Any] = [after]
        if namespace is not None:
            sql += " AND namespace = ?"
            args.append(namespace)
        sql += " ORDER BY seq"
        if limit is not None:
            sql += " LIMIT ?"
            args.append(limit)
        for row in self._read(sql, args):
            yield outcome_from_row(row)

    def history(self, namespace: str, after: int = 0) -> list[tuple[OutcomeRow, Episode]]:
        """Two indexed reads (outcomes with their episode heads, then their items), one snapshot."""
        with self._lock:
            own = not self._db.in_transaction  # inside a transaction(): already one snapshot
            try:
                if own:
                    self._db.execute("BEGIN")
                heads = self._db.execute(
                    "SELECT o.seq, o.episode_id, o.success, o.source, o.confidence, o.recorded,"
                    " e.query, e.context, e.created, e.holdout, o.propagation, o.max_hops, o.settings_version"
                    " FROM outcomes o JOIN episodes e ON e.id = o.episode_id"
                    " WHERE o.namespace = ? AND o.seq > ? ORDER BY o.seq",
                    (namespace, after),
                ).fetchall()
                rows = self._db.execute(
                    "SELECT i.episode_id, i.position, i.memory_id, i.weight, i.propensity, i.probe"
                    " FROM outcomes o JOIN episode_items i ON i.episode_id = o.episode_id"
                    " WHERE o.namespace = ? AND o.seq > ? ORDER BY o.seq, i.position",
                    (namespace, after),
                ).fetchall()
                if own:
                    self._db.execute("COMMIT")
            except sqlite3.Error as exc:
                if own and self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise StoreError(f"{self.url}: {exc}") from exc
        return joined(namespace, heads, rows)

    def outcome_count(self, namespace: str) -> int:
        with self._lock:
            try:
                (n,) = self._db.execute("SELECT count(*) FROM outcomes WHERE namespace = ?", (namespace,)).fetchone()
            except sqlite3.Error as exc:
                raise StoreError(f"{self.url}: {exc}") from exc
        return int(n)

    def draw_outcomes(
        self, namespace: str, memory_id: str, after: int, exclude: Sequence[str] = ()
    ) -> list[DrawOutcome]:
        banned = sorted(set(exclude))
        sql = (
            "SELECT d.probe, d.share, o.success, o.confidence FROM probe_draws d"
            " JOIN outcomes o ON o.episode_id = d.episode_id"
            " WHERE d.namespace = ? AND d.memory_id = ? AND o.seq > ?"
        )
        if banned:
            marks = ",".join("?" * len(banned))
            sql += (
                " AND NOT EXISTS (SELECT 1 FROM episode_items i WHERE i.episode_id = d.episode_id"
                f" AND i.memory_id IN ({marks}))"
            )
        rows = self._read(sql + " ORDER BY o.seq", (namespace, memory_id, int(after), *banned))
        return [(bool(p), float(q), bool(ok), float(c)) for p, q, ok, c in rows]

    def outcomes_since(self, since: float, source: str | None = None, namespace: str | None = None) -> list[OutcomeRow]:
        cols = OUTCOME_COLUMNS
        sql, args = f"SELECT {cols} FROM outcomes WHERE recorded >= ?", list[object]([since])
        if source is not None:
            sql, args = sql + " AND source = ?", [*args, source]
        if namespace is not None:
            sql, args = sql + " AND namespace = ?", [*args, namespace]
        return [outcome_from_row(row) for row in self._read(sql + " ORDER BY seq", tuple(args))]

    def outcomes_of(self, episode_ids: Sequence[str], namespace: str | None = None) -> dict[str, OutcomeRow]:
        out: dict[str, OutcomeRow] = {}
        unique = list(dict.fromkeys(episode_ids))
        cols = OUTCOME_COLUMNS
        for start in range(0, len(unique), 500):
            chunk = unique[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for row in self._read(f"SELECT {cols} FROM outcomes WHERE episode_id IN ({marks})", chunk):
                o = outcome_from_row(row)
                if namespace is None or o.namespace == namespace:
                    out[o.episode_id] = o
        return out

    def verifications(self, after: int = 0) -> list[Verification]:
        rows = self._read(
            "SELECT seq, episode_id, namespace, success, source, reported, recorded FROM verifications"
            " WHERE seq > ? ORDER BY seq",
            (after,),
        )
        return [
            Verification(eid, ns, bool(ok), src, None if rep is None else bool(rep), rec, seq)
            for seq, eid, ns, ok, src, rep, rec in rows
        ]

    def write_counts(self, namespace: str, counts: dict[str, Counts]) -> None:
        with self._write() as db:
            written = sorted(counts.items())
            db.executemany(
                "UPDATE counters SET success = ?, failure = ?, n = ? WHERE namespace = ? AND id = ?",
                [(c.success, c.failure, c.n, namespace, mid) for mid, c in written],
            )
            for mid, c in written:
                self._rows.rewritten(namespace, mid, {_SUCCESS: c.success, _FAILURE: c.failure, _N: c.n})

    # -- status and audit ---------------------------------------------------------------

    def change(self, entry: AuditEntry) -> AuditEntry:
        column = _column(entry)
        with self._write() as db:
            return self._change_in(db, entry, column)

    def _change_in(self, db: sqlite3.Connection, entry: AuditEntry, column: str | None) -> AuditEntry:
        """Make one audited change inside the caller's write transaction (see :meth:`change`)."""
        if column is None:  # a note: the memory must exist, no column changes
            found = db.execute(
                "SELECT 1 FROM memories WHERE namespace = ? AND id = ?", (entry.namespace, entry.memory_id)
            ).fetchone()
            if found is None:
                raise UnknownMemoryError(entry.memory_id)
        else:
            cur = db.execute(  # what else the change requires (null: anything) in the same statement
                f"UPDATE memories SET {column} = ? WHERE namespace = ? AND id = ? AND {column} = ?"
                " AND status = COALESCE(?, status) AND standing = COALESCE(?, standing)"
                " AND NOT EXISTS (SELECT 1 FROM audit WHERE audit.namespace = memories.namespace"
                " AND audit.memory_id = memories.id AND audit.field = 'pin' AND audit.seq > ?)",
                (entry.new, entry.namespace, entry.memory_id, entry.old, *required(entry)),
            )
            if cur.rowcount != 1:
                raise changed(entry)
            db.execute(
                "UPDATE counters SET updated = ? WHERE namespace = ? AND id = ?",
                (entry.at, entry.namespace, entry.memory_id),
            )
            self._rows.rewritten(entry.namespace, entry.memory_id, {_UPDATED: entry.at})
        saved = self._audit(db, entry)
        _bump(db)
        return saved

    def erase(self, entries: Sequence[AuditEntry]) -> list[AuditEntry]:
        """Delete the rows (``secure_delete`` overwrites their bytes) and log the tombstones in
        one transaction, then checkpoint the WAL and truncate it, so the erased texts and
        vectors are in neither file. A reader holding an old snapshot can keep the WAL from
        being truncated; the next checkpoint then overwrites those pages."""
        saved: list[AuditEntry] = []
        with self._write() as db:
            for entry in entries:
                cur = db.execute(
                    "DELETE FROM memories WHERE namespace = ? AND id = ?", (entry.namespace, entry.memory_id)
                )
                if cur.rowcount != 1:
                    raise UnknownMemoryError(entry.memory_id)
                db.execute("DELETE FROM counters WHERE namespace = ? AND id = ?", (entry.namespace, entry.memory_id))
                saved.append(self._audit(db, entry))
            db.executemany(
                "INSERT INTO meta VALUES (?, '1') ON CONFLICT (key) DO UPDATE SET value = CAST(value AS INTEGER) + 1",
                [(erased_key(ns),) for ns in sorted({e.namespace for e in entries})],
            )
            _bump(db)
        if self._unit:  # not committed yet: the transaction truncates the WAL once it commits
            self._truncate_wal = True
        else:
            self._checkpoint_wal()
        return saved

    def _checkpoint_wal(self) -> None:
        with self._lock:
            try:
                self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            except sqlite3.Error as exc:  # the erasure is committed; only the WAL's old copy lingers
                raise StoreError(f"{self.url}: erased, but the WAL checkpoint failed: {exc}") from exc

    def erased(self, namespace: str, ids: Sequence[str]) -> dict[str, int]:
        with self._lock:
            try:
                return self._erased(self._db, namespace, ids)
            except sqlite3.Error as exc:
                raise StoreError(f"{self.url}: {exc}") from exc

    @staticmethod
    def _erased(db: sqlite3.Connection, namespace: str, ids: Sequence[str]) -> dict[str, int]:
        out: dict[str, int] = {}
        unique = list(dict.fromkeys(ids))
        for start in range(0, len(unique), 500):
            chunk = unique[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for mid, seq in db.execute(
                f"SELECT memory_id, MAX(seq) FROM audit WHERE namespace = ? AND action = ? AND memory_id IN ({marks})"
                " GROUP BY memory_id",
                (namespace, ERASE, *chunk),
            ):
                out[mid] = int(seq)
        return out

    def expired(self, namespace: str, now: float) -> list[str]:
        rows = self._read(
            "SELECT id FROM memories WHERE namespace = ? AND expires IS NOT NULL AND expires <= ? ORDER BY seq",
            (namespace, now),
        )
        return [r[0] for r in rows]

    def next_expiry(self, namespace: str) -> float | None:
        rows = self._read("SELECT MIN(expires) FROM memories WHERE namespace = ? AND expires IS NOT NULL", (namespace,))
        return None if not rows or rows[0][0] is None else float(rows[0][0])

    @staticmethod
    def _audit(db: sqlite3.Connection, entry: AuditEntry) -> AuditEntry:
        """Append ``entry`` inside the caller's write transaction; returns it with its seq."""
        cur = db.execute(
            "INSERT INTO audit (namespace, memory_id, action, field, old, new, reason, settings, at)"
            " VALUES (?,?,?,?,?,?,?,?,?)",
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
        )
        return AuditEntry(**{**entry.__dict__, "seq": int(cur.lastrowid or 0)})

    def audit_log(
        self, namespace: str, memory_id: str | None = None, *, after: int = 0, limit: int | None = None
    ) -> list[AuditEntry]:
        sql = "SELECT seq, memory_id, namespace, action, field, old, new, reason, settings, at FROM audit"
        sql += " WHERE namespace = ? AND seq > ?"
        args: list[Any] = [namespace, after]
        if memory_id is not None:
            sql += " AND memory_id = ?"
            args.append(memory_id)
        sql += " ORDER BY seq"
        if limit is not None:
            sql += " LIMIT ?"
            args.append(limit)
        rows = self._read(sql, args)
        return [AuditEntry(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], json.loads(r[8]), r[9]) for r in rows]

    def save_checkpoint(self, namespace: str, data: bytes) -> None:
        with self._write() as db:
            db.execute("INSERT OR REPLACE INTO checkpoints VALUES (?, ?)", (namespace, sqlite3.Binary(data)))

    def load_checkpoint(self, namespace: str) -> bytes | None:
        rows = self._read("SELECT data FROM checkpoints WHERE namespace = ?", (namespace,))
        return bytes(rows[0][0]) if rows else None

    def drop_checkpoints(self, namespace: str | None = None) -> None:
        with self._write() as db:
            if namespace is None:
                db.execute("DELETE FROM checkpoints")
            else:
                db.execute("DELETE FROM checkpoints WHERE namespace = ?", (namespace,))

    def integrity_check(self) -> str:
        """SQLite's own ``PRAGMA integrity_check`` answer ("ok" when sound)."""
        return str(self._read("PRAGMA integrity_check")[0][0])

    def close(self) -> None:
        with self._lock:
            self._db.close()


_FIRST_TABLES = set(re.findall(r"CREATE TABLE (?:IF NOT EXISTS )?(\w+)", MIGRATIONS[1]))
"""The tables every memworth store has had since schema version 1."""


def _stored_version(db: sqlite3.Connection, url: str) -> int:
    """The schema version of the memworth store in ``db``, 0 for an empty database; reads only.

    Anything else is refused with a :class:`StoreError` that names the file and why: a
    database without memworth's tables and schema version (another program's file), one
    with no tables that another program has marked as its own (``application_id`` or
    ``user_version`` set), and a memworth store newer than this code.
    """
    objects = db.execute(
        "SELECT type, name FROM sqlite_master WHERE name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name"
    ).fetchall()
    if not objects:
        marks = {
            "application_id": db.execute("PRAGMA application_id").fetchone()[0],
            "user_version": db.execute("PRAGMA user_version").fetchone()[0],
        }
        marked = ", ".join(f"{pragma} {value}" for pragma, value in marks.items() if value)
        if marked:
            raise StoreError(
                f"{url} is not a memworth store: it has no tables but {marked}, set by the program that owns it;"
                " nothing was changed"
            )
        return 0
    tables = [name for kind, name in objects if kind == "table"]
    version: str | None = None
    if _FIRST_TABLES <= set(tables):  # a meta table alone may be another program's
        try:
            row = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        except sqlite3.Error:  # a table of another program that happens to be called meta
            row = None
        version = None if row is None else str(row[0])
    if version is None or not version.isdigit():
        listed = ", ".join(tables[:8]) + (f" and {len(tables) - 8} more" if len(tables) > 8 else "")
        raise StoreError(
            f"{url} is not a memworth store: it holds tables ({listed or 'none'}) but not memworth's tables and"
            " schema version;"
            " memworth opens only an empty file or a store it made, and changed nothing"
        )
    if int(version) > SCHEMA_VERSION:
        raise StoreError(f"{url} has schema version {version}; this memworth knows up to {SCHEMA_VERSION}")
    return int(version)


def _read_only_hint(path: str) -> str:
    folder = Path(path).parent
    if path != ":memory:" and not os.access(folder, os.W_OK):
        return f" (folder {folder} is read-only; a WAL database needs to write its -wal and -shm files there)"
    return ""


def _column(entry: AuditEntry) -> str | None:
    """The column a change sets (None for a note); ValidationError for any other field."""
    column = {"status": "status", "standing": "standing"}.get(entry.field)  # never interpolate input
    if column is None and entry.field not in NOTE_FIELDS:
        raise ValidationError("field", f"must be status, standing or one of {', '.join(NOTE_FIELDS)}")
    return column


def _bump(db: sqlite3.Connection) -> None:
    db.execute("UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'generation'")


class _KeptRows:
    """Recall's narrow candidate rows (:meth:`SQLiteBackend.candidates`) a backend keeps, and how
    they stay true.

    * Another connection's commit: :meth:`since` is given ``PRAGMA data_version`` (read before
      any row) and forgets every row when it moved.
    * This connection's writes: its temporary triggers call :meth:`changed` (with the row as
      written) or :meth:`deleted` for every row a statement changes in ``memories``; the
      backend's three statements that change ``counters`` (record, replay's rewrite, a status
      change's time) call :meth:`added` or :meth:`rewritten` once they succeeded. The row is
      forgotten at once; inside a write of the backend's (:attr:`writing`), its new values wait
      in ``pending`` and become the kept row when that write commits (:meth:`settle`), and are
      forgotten when it rolls back. A savepoint rolled back inside a transaction leaves every
      pending row unsure (:meth:`unsure`): forgotten, not kept, at the commit.
    """

    def __init__(self) -> None:
        self.kept: dict[tuple[str, str], tuple[Any, ...]] = {}
        self.pending: dict[tuple[str, str], tuple[Any, ...] | None] = {}
        self.version = -1  # PRAGMA data_version the kept rows were read under
        self.writing = False  # a write of the backend's is open: changes wait for its end

    def since(self, version: int) -> dict[tuple[str, str], tuple[Any, ...]]:
        """The kept rows, none if another connection committed since they were read."""
        if version != self.version:
            self.kept.clear()
            self.version = version
        return self.kept

    def keep(self, namespace: str, rows: list[tuple[Any, ...]]) -> None:
        for row in rows:
            self.kept[(namespace, row[0])] = row
        self._trim()

    def changed(
        self, splice: Callable[[tuple[Any, ...]], tuple[Any, ...]], namespace: str, memory_id: str, *values: Any
    ) -> None:
        """Some columns of a kept row were written with ``values`` (the trigger on ``memories``;
        ``splice`` takes the row as written from the old row followed by
        ``values``): the rest of the row is the pending or kept one; with neither, the row is
        forgotten. Called once per row a statement changes: kept to a few dictionary steps."""
        key = (namespace, memory_id)
        base = self.kept.pop(key, None)
        if not self.writing:
            return
        pending = self.pending
        base = pending.get(key, base)
        pending[key] = None if base is None else splice(base + values)

    def added(self, rows: Sequence[tuple[Any, ...]]) -> None:
        """The record path's counter statement ran (once per row, in order, no trigger): each
        ``(success, failure, n, updated, namespace, id)`` added its first three to the memory's
        counters and set ``updated``. A kept or pending row takes the values the file holds
        now: SQLite's ``success + ?`` is the same double addition, in the same order, and
        ``+ 0.0`` reads a ``-0.0`` back as ``0.0``, as a REAL column does. A row neither kept
        nor pending has nothing to follow (the trigger would have left it forgotten)."""
        kept, pending = self.kept, self.pending
        if not kept and not pending:
            return
        for success, failure, n, updated, namespace, memory_id in rows:
            key = (namespace, memory_id)
            base = kept.pop(key, None)
            if not self.writing:
                continue
            base = pending.get(key, base)
            if base is not None:
                row = list(base)
                row[_SUCCESS] = row[_SUCCESS] + success + 0.0
                row[_FAILURE] = row[_FAILURE] + failure + 0.0
                row[_N] = row[_N] + n + 0.0
                row[_UPDATED] = float(updated) + 0.0
                pending[key] = tuple(row)

    def rewritten(self, namespace: str, memory_id: str, values: Mapping[int, float]) -> None:
        """A statement of the backend's set some counters columns of a memory (``values``: each
        one's position in a kept row, and the value written; no trigger tells of it)."""
        key = (namespace, memory_id)
        base = self.kept.pop(key, None)
        if not self.writing:
            return
        base = self.pending.get(key, base)
        if base is not None:
            row = list(base)
            for i, value in values.items():
                row[i] = float(value) + 0.0
            self.pending[key] = tuple(row)

    def deleted(self, namespace: str, memory_id: str) -> None:
        key = (namespace, memory_id)
        self.kept.pop(key, None)
        if self.writing:
            self.pending[key] = None

    def unsure(self) -> None:
        for key in self.pending:
            self.pending[key] = None

    def settle(self, committed: bool) -> None:
        """The backend's write ended: its changed rows are kept as written (committed) or forgotten."""
        for key, row in self.pending.items():
            if committed and row is not None:
                self.kept[key] = row
            else:
                self.kept.pop(key, None)
        self.pending.clear()
        self.writing = False
        self._trim()

    def _trim(self) -> None:
        while len(self.kept) > ROWS_KEPT:
            del self.kept[next(iter(self.kept))]


class _KeptEpisodes:
    """The episodes a backend logged (:meth:`SQLiteBackend.insert_episode`) and logged no outcome
    for since, kept (at most :data:`EPISODES_KEPT`, the oldest leave first) so that recording
    their outcome need not read them back (:meth:`SQLiteBackend.episodes`).

    An episode row never changes but for its item weights, which only an outcome's ``used``
    sets (in the outcome's transaction), and is never deleted; yet every kept episode is
    forgotten once another connection commits anything (:meth:`since`, given ``PRAGMA
    data_version``), so what is answered is always what a read would give. An episode logged
    inside a transaction waits in ``pending`` until it commits (:meth:`settle`), and is
    forgotten if it rolls back.
    """

    def __init__(self) -> None:
        self.kept: dict[str, Episode] = {}
        self.pending: dict[str, Episode] = {}
        self.version = -1  # PRAGMA data_version under which the kept episodes are what a read gives
        self.pending_version = -1  # the same, read inside the open transaction

    def since(self, version: int) -> dict[str, Episode]:
        """The kept episodes, none if another connection committed since they were kept."""
        if version != self.version:
            self.kept.clear()
            self.version = version
        return self.kept

    def logged(self, episode: Episode, version: int, *, pending: bool) -> None:
        """``episode`` was written, ``PRAGMA data_version`` reading ``version`` inside the write:
        committed, or (``pending``) inside an open transaction."""
        episode = _as_read(episode)
        if pending:
            self.pending[episode.id] = episode
            self.pending_version = version
            return
        self.since(version)
        self.kept[episode.id] = episode
        if len(self.kept) > EPISODES_KEPT:
            del self.kept[next(iter(self.kept))]

    def lost(self) -> None:
        """SQLite rolled the whole open transaction back (a full disk, an I/O error): the
        episodes logged inside it are in no file."""
        self.pending.clear()

    def recorded(self, episode_ids: Iterable[str]) -> None:
        """An outcome of these episodes is being written: forget them."""
        for eid in episode_ids:
            self.kept.pop(eid, None)
            self.pending.pop(eid, None)

    def settle(self, committed: bool) -> None:
        """The open transaction ended: its episodes are kept (committed) or forgotten."""
        pending, self.pending = self.pending, {}
        if committed:
            for episode in pending.values():
                self.logged(episode, self.pending_version, pending=False)


_LOST = (
    "an earlier write of this transaction failed and SQLite rolled the whole transaction back "
    "(a full disk or an I/O error): nothing of it is written, and nothing more is until the block ends"
)


def _check_logged_as_given(db: sqlite3.Connection, given: Sequence[Episode]) -> None:
    """UnknownEpisodeError naming one of ``given`` not logged as it is given (the first in id order)
    (:func:`memworth.store.backend.logged_as_given`), read inside the caller's write transaction:
    the items' rows only (one read per 500 episodes), compared whole with the rows
    :func:`credited_as` says a read gives (an episode that retrieved nothing: one row of NULLs)."""
    for start in range(0, len(given), 500):
        chunk = sorted(given[start : start + 500], key=attrgetter("id"))
        marks = ",".join("?" * len(chunk))
        rows = db.execute(
            "SELECT e.id, e.namespace, i.position, i.memory_id, i.weight"
            " FROM episodes e LEFT JOIN episode_items i ON i.episode_id = e.id"
            f" WHERE e.id IN ({marks}) ORDER BY e.id, i.position",
            [ep.id for ep in chunk],
        ).fetchall()
        expected = []
        for ep in chunk:
            namespace, items = credited_as(ep)
            expected += [(ep.id, namespace, *item) for item in items or ((None, None, None),)]
        if rows != expected:
            for ep in chunk:  # the first episode whose rows differ
                namespace, items = credited_as(ep)
                mine = [r[1:] for r in rows if r[0] == ep.id]
                if mine != [(namespace, *item) for item in items or ((None, None, None),)]:
                    raise UnknownEpisodeError(ep.id)
            raise UnknownEpisodeError(chunk[0].id)  # each matched: an id given twice


def _as_read(episode: Episode) -> Episode:
    """``episode`` as a read of the file gives it back: plain ``str`` and ``float`` (a REAL
    column turns an int into a float and ``-0.0`` into ``0.0``), ``bool`` flags, items in
    position order. The episode itself when it is that already (the usual case: one pass)."""
    items = episode.items
    plain = (
        type(episode.created) is float
        and episode.created != 0.0
        and type(episode.id) is str
        and type(episode.namespace) is str
        and type(episode.query) is str
        and (episode.context is None or type(episode.context) is str)
        and type(episode.holdout) is bool
        and all(
            type(it.weight) is float
            and it.weight != 0.0
            and type(it.propensity) is float
            and it.propensity != 0.0
            and type(it.memory_id) is str
            and type(it.position) is int
            and type(it.probe) is bool
            for it in items
        )
        and all(a.position < b.position for a, b in itertools.pairwise(items))
    )
    if plain:
        return episode
    return Episode(
        str(episode.id),
        str(episode.namespace),
        str(episode.query),
        None if episode.context is None else str(episode.context),
        float(episode.created) + 0.0,
        tuple(
            EpisodeItem(str(it.memory_id), float(it.weight) + 0.0, float(it.propensity) + 0.0, int(it.position), bool(it.probe))
            for it in sorted(items, key=attrgetter("position"))
        ),
        bool(episode.holdout),
    )


class _Transaction:
    """``BEGIN IMMEDIATE`` ... ``COMMIT``, or ``ROLLBACK`` on any exception; inside the
    backend's open :meth:`SQLiteBackend.transaction`, a savepoint of it instead."""

    def __init__(self, db: sqlite3.Connection, lock: threading.RLock, backend: SQLiteBackend) -> None:
        self._db = db
        self._lock = lock
        self._backend = backend
        self._savepoint = False

    def __enter__(self) -> sqlite3.Connection:
        self._lock.acquire()
        self._savepoint = self._backend._unit  # read under the lock: only its holder can have opened one
        try:
            if self._savepoint:
                if self._backend._unit_lost:
                    self._lock.release()
                    raise StoreError(_LOST)
                if not self._db.in_transaction:  # the block's first write begins its transaction
                    self._db.execute("BEGIN IMMEDIATE")
                self._db.execute("SAVEPOINT memworth_write")
            else:
                self._db.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            self._lock.release()
            raise StoreError(f"cannot start a write: {exc}") from exc
        self._backend._rows.writing = True
        return self._db

    def __exit__(self, kind: object, exc: object, tb: object) -> None:
        committed = False
        try:
            if kind is None:
                try:
                    self._db.execute("RELEASE memworth_write" if self._savepoint else "COMMIT")
                except sqlite3.Error as err:
                    self._rollback()
                    raise StoreError(f"commit failed, nothing written: {err}") from err
                committed = True
            else:
                self._rollback()
                if isinstance(exc, sqlite3.Error):
                    raise StoreError(f"nothing written: {exc}") from exc
        finally:
            if self._savepoint:  # the transaction() it is part of settles the kept rows at its end
                if not committed:
                    self._backend._rows.unsure()
                    if not self._db.in_transaction:  # SQLite rolled the whole transaction back
                        self._backend._episodes.lost()
                        self._backend._unit_lost = True
            else:
                self._backend._rows.settle(committed)
            self._lock.release()

    def _rollback(self) -> None:
        # After some errors (a full disk, say) SQLite has rolled back already.
        if self._db.in_transaction:
            try:
                if self._savepoint:  # this write only; the transaction it is part of goes on
                    self._db.execute("ROLLBACK TO memworth_write")
                    self._db.execute("RELEASE memworth_write")
                else:
                    self._db.execute("ROLLBACK")
            except sqlite3.Error as err:
                raise StoreError(f"rollback failed: {err}") from err
