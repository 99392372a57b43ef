"""The PostgreSQL backend's plans, awaited on psycopg's async connection pool.

:class:`memworth.store.postgres.PostgresBackend` writes each method's database access
once, as a plan (:mod:`memworth.store.plans`); its own methods make a plan's statements
on its sync pool. :class:`AsyncPlans` makes the very same statements on a psycopg
``AsyncConnectionPool``, awaited: the async store (:mod:`memworth.aio`) awaits the
database this way and never blocks its event loop on a query.

The pool is opened by :func:`open_async_pool` on the running event loop, with the URL's
``?pool_size=`` and ``?pool_timeout=``; a wait for a connection past the timeout is an
:class:`memworth.errors.UnavailableError`, as with the sync backend.
"""

from __future__ import annotations

import logging
from typing import Any

from memworth.errors import StoreError, UnavailableError
from memworth.store.plans import Plan, aexecute
from memworth.store.postgres import PostgresBackend, _array_dumpers, _parse_url

__all__ = ["AsyncPlans", "open_async_pool"]


async def open_async_pool(url: str) -> Any:
    """A psycopg ``AsyncConnectionPool`` over the database of ``url`` (its ``?schema=`` set on
    every connection), open, with its first connection made; UnavailableError if none comes
    within ``?pool_timeout=`` seconds."""
    try:
        from psycopg_pool import AsyncConnectionPool, PoolTimeout
    except ImportError:
        raise StoreError("the async PostgreSQL store needs psycopg-pool: pip install 'memworth[postgres]'") from None
    _array_dumpers()
    c = _parse_url(url)
    schema = c.schema
    pool_log = logging.getLogger("psycopg.pool")
    if not any(isinstance(h, logging.NullHandler) for h in pool_log.handlers):
        pool_log.addHandler(logging.NullHandler())

    async def configure(conn: Any) -> None:
        if schema is not None:
            await conn.execute(f'SET search_path TO "{schema}"')  # created by the sync backend first
        await conn.commit()
        # Autocommit: a read is one round trip with no flag to flip; a write's conn.transaction()
        # says BEGIN and COMMIT itself.
        await conn.set_autocommit(True)

    pool = AsyncConnectionPool(
        c.conninfo, min_size=1, max_size=c.pool_size, configure=configure, open=False, timeout=c.pool_timeout
    )
    try:
        await pool.open(wait=True, timeout=c.pool_timeout)
    except PoolTimeout:
        await pool.close()
        raise UnavailableError(f"PostgreSQL is unreachable: no connection within {c.pool_timeout:g} s") from None
    except BaseException:
        await pool.close()
        raise
    return pool


class AsyncPlans:
    """Awaits the plans of one :class:`PostgresBackend` (which keeps what the plans read and
    write of its state) on a shared async pool.

    Parameters
    ----------
    backend
        The sync backend whose ``plan_<method>`` methods say what each method does.
    pool
        An open psycopg ``AsyncConnectionPool`` over the same database (:func:`open_async_pool`).
    """

    def __init__(self, backend: PostgresBackend, pool: Any) -> None:
        import psycopg
        from psycopg_pool import PoolTimeout

        self.backend = backend
        self.pool = pool
        self._psycopg = psycopg
        self._timeout = PoolTimeout

    def plan(self, name: str, args: tuple[Any, ...], kwargs: Any) -> Plan | None:
        """The plan of ``backend.<name>(*args, **kwargs)``; None for a method without one."""
        make = getattr(self.backend, "plan_" + name, None)
        return None if make is None else make(*args, **kwargs)

    async def do(self, plan: Plan) -> Any:
        """Make ``plan``'s statements on a pooled async connection, as its mode says; its answer.
        Errors are the sync backend's: StoreError, UnavailableError, the plan's own."""
        try:
            async with self.pool.connection() as conn:
                if plan.mode in ("read", "statement"):  # the pool's connections are in autocommit
                    answer = await aexecute(conn, plan.steps)
                elif plan.mode == "pipeline":
                    async with conn.pipeline(), conn.transaction():
                        answer = await aexecute(conn, plan.steps)
                else:
                    async with conn.transaction():
                        answer = await aexecute(conn, plan.steps)
        except self._timeout as exc:
            raise UnavailableError(
                f"no connection to PostgreSQL at {self.backend.url} within the pool's timeout: the server is"
                " unreachable or every pooled connection is busy (?pool_size=, ?pool_timeout=)"
            ) from exc
        except self._psycopg.errors.UniqueViolation as exc:  # rolled back: nothing was written
            if plan.on_unique is None:
                raise self.backend._failure(exc) from exc
            raise (await self.do(plan.on_unique(exc))) from None
        except self._psycopg.Error as exc:
            raise self.backend._failure(exc) from exc
        if plan.then is not None:
            plan.then(answer)
        return answer
