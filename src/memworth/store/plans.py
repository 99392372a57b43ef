"""The PostgreSQL backend's database access, sans-IO: each query written once, two drivers.

A backend method is a :class:`Plan`: a generator that yields the statements to make
(:class:`Query`, :class:`Many`, :class:`Copy`) and gets their rows back, then returns the
method's answer, plus how it wants its connection (one autocommit read, one transaction,
a pipelined transaction). It never touches a connection.

* :func:`execute` runs a plan's statements on a psycopg ``Connection`` (the sync backend,
  :class:`memworth.store.postgres.PostgresBackend`, whose methods are ``self._do(plan)``);
* :func:`aexecute` runs the very same statements on a psycopg ``AsyncConnection``
  (:class:`memworth.store.postgres_async.AsyncPlans`, awaited by :mod:`memworth.aio`).

Examples
--------
>>> def plan_answer():
...     rows = yield Query("SELECT 1 + 1")
...     return rows[0][0]
>>> steps = plan_answer()
>>> next(steps)
Query(sql='SELECT 1 + 1', params=(), fetch='all')
>>> try:
...     steps.send([(2,)])
... except StopIteration as stop:
...     print(stop.value)
2
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["Copy", "Many", "Plan", "Query", "aexecute", "done", "execute"]


@dataclass(frozen=True)
class Query:
    """One statement; the answer is its rows (``fetch="all"``), its first row or None
    (``"one"``), the rows it changed (``"count"``) or None (``"none"``)."""

    sql: str
    params: Sequence[Any] = ()
    fetch: Literal["all", "one", "count", "none"] = "all"


@dataclass(frozen=True)
class Many:
    """One statement made once per parameter row (``executemany``); the answer is None."""

    sql: str
    rows: Sequence[Sequence[Any]]


@dataclass(frozen=True)
class Copy:
    """``COPY ... FROM STDIN (FORMAT BINARY)`` of ``rows`` (read once, as they are sent) with
    column ``types``; ``binary``: type oids whose values come already in PostgreSQL's binary
    form (bytes passed through)."""

    sql: str
    types: Sequence[Any]
    rows: Iterable[Sequence[Any]]
    binary: Sequence[int] = ()


Statement = Query | Many | Copy
Statements = Generator[Statement, Any, Any]


@dataclass
class Plan:
    """What one backend method does in the database.

    ``mode``: ``"read"`` (one autocommit connection: no BEGIN and COMMIT round trips),
    ``"statement"`` (a write made of one statement, atomic on its own: run as ``"read"`` is,
    so it commits by itself, in one round trip), ``"write"`` (one transaction) or
    ``"pipeline"`` (one transaction whose statements go out together). ``on_unique``: the
    plan whose answer is the error to raise when the transaction hits a unique violation (rolled back: nothing was written). ``then``:
    called with the answer once the transaction committed.

    Inside a sync :meth:`memworth.store.postgres.PostgresBackend.transaction` block every
    mode runs on the block's connection as a savepoint of it (so the block's rollback
    undoes the plan's writes, and a refused plan rolls back only its own); ``then`` runs
    when the savepoint is released, and a block that rolls back sets back what the
    backend's ``then`` noted (that the vector column exists).
    """

    steps: Statements
    mode: Literal["read", "statement", "write", "pipeline"] = "read"
    on_unique: Callable[[Exception], Plan] | None = None
    then: Callable[[Any], None] | None = field(default=None)


def done(value: Any) -> Plan:
    """A plan that makes no statement and answers ``value``."""

    def steps() -> Statements:
        return value
        yield  # a generator  # pragma: no cover

    return Plan(steps())


def execute(conn: Any, steps: Statements) -> Any:
    """Make ``steps``' statements on the sync connection ``conn``; their answer."""
    try:
        statement = next(steps)
        while True:
            statement = steps.send(_sync(conn, statement))
    except StopIteration as stop:
        return stop.value


async def aexecute(conn: Any, steps: Statements) -> Any:
    """Make ``steps``' statements on the async connection ``conn``; their answer."""
    try:
        statement = next(steps)
        while True:
            statement = steps.send(await _async(conn, statement))
    except StopIteration as stop:
        return stop.value


def _sync(conn: Any, s: Statement) -> Any:
    if isinstance(s, Query):
        cur = conn.execute(s.sql, s.params)
        return _fetched(cur, s.fetch)
    with conn.cursor() as cur:
        if isinstance(s, Many):
            cur.executemany(s.sql, s.rows)
            return None
        for oid in s.binary:
            cur.adapters.register_dumper(None, binary_dumper(oid))
        with cur.copy(s.sql) as copy:
            copy.set_types(list(s.types))
            for row in s.rows:
                copy.write_row(row)
    return None


async def _async(conn: Any, s: Statement) -> Any:
    if isinstance(s, Query):
        cur = await conn.execute(s.sql, s.params)
        if s.fetch == "all":
            return await cur.fetchall()
        if s.fetch == "one":
            return await cur.fetchone()
        return cur.rowcount if s.fetch == "count" else None
    async with conn.cursor() as cur:
        if isinstance(s, Many):
            await cur.executemany(s.sql, s.rows)
            return None
        for oid in s.binary:
            cur.adapters.register_dumper(None, binary_dumper(oid))
        async with cur.copy(s.sql) as copy:
            copy.set_types(list(s.types))
            for row in s.rows:
                await copy.write_row(row)
    return None


def _fetched(cur: Any, fetch: str) -> Any:
    if fetch == "all":
        return cur.fetchall()
    if fetch == "one":
        return cur.fetchone()
    return cur.rowcount if fetch == "count" else None


_DUMPERS: dict[int, type] = {}


def binary_dumper(oid: int) -> type:
    """A psycopg dumper for values already in the binary form of type ``oid`` (used by ``COPY``)."""
    found = _DUMPERS.get(oid)
    if found is None:
        from psycopg.adapt import Dumper
        from psycopg.pq import Format

        def dump(self: Any, obj: bytes) -> bytes:
            return obj

        found = _DUMPERS[oid] = type(
            "VectorBinaryDumper", (Dumper,), {"oid": oid, "format": Format.BINARY, "dump": dump}
        )
    return found
