"""Async memworth: :class:`AsyncMemoryStore` and :class:`AsyncSidecar`, awaitable and never blocking the event loop.

Every method of :class:`memworth.MemoryStore` that touches the database has an awaitable
twin with the same parameters, answer, errors and docstring (``await store.recall(...)``);
the same holds for :class:`memworth.Sidecar`.

How the calls run
-----------------
A store object is not thread-safe, so each one has ONE turn: every async wrapper of that
object (an :class:`AsyncMemoryStore`, an :class:`AsyncSidecar`, the LangChain and LangGraph
adapters) makes its calls in that turn, one at a time, in the order they were made. A call
runs in one of two ways:

* on the store object's worker thread (``ThreadPoolExecutor(max_workers=1)``), the whole
  sync method, while the event loop only awaits it: every call on SQLite and
  ``memory://``, every call of a threaded store (``native=False``), and on a native store
  the methods without steps (govern, replay, audit, the review queue, ...);
* natively (PostgreSQL, the default of :meth:`AsyncMemoryStore.open` there): the hot path,
  ``add``, ``add_many``, ``get``, ``list``, ``recall``, ``record``, ``record_many``,
  ``report`` and ``reports``, is written once as steps (:mod:`memworth.store.steps`):
  each database call is awaited on psycopg's async pool (the PostgreSQL backend's plans,
  :mod:`memworth.store.plans`: each query written once, made by a sync and an async
  driver), the small pure work between them (ranking, credit, the pick) runs inline on
  the loop, and the long or blocking parts run on the worker thread: embedding more than
  a few texts, an expiry purge that is due, the first scan of the log for the alarm
  splitter, a ``govern_every`` round, report's decisions (which follow the log), the
  Redis hot tier. The sync store runs the very same steps, so the answers are equal bit
  for bit.

* SQLite (and ``memory://``): one store object, one worker. SQLite lets one writer in at
  a time, so a second store object's writes would only wait on the file lock; reads would
  run beside them but re-read the whole index into a second copy. ``workers > 1`` is
  refused.
* PostgreSQL: ``AsyncMemoryStore.open(url, workers=N)`` opens N store objects over the
  database, each with its turn (and, native, one async pool of ``?pool_size=`` connections
  shared by all); a call goes to the one with the fewest calls waiting, so N calls run at
  once (PostgreSQL keeps them consistent, as it does for N processes).
  :meth:`AsyncMemoryStore.configure` and ``set_policy`` change every object of the pool.
  What a store object counts for itself (``govern_every``, the alarm splitter's
  statistics) is per object, as with N processes.

What native buys and costs (``benchmarks/bench_aio.py``): no thread hand-off for the
hot path, and the loop's only stalls are the pure steps; but calls on one store object
still take turns (its caches are not safe under interleaving), so concurrency comes from
``workers``, and on a loaded 2-core machine psycopg's async driver made 100 concurrent
recall + record pairs slower than the threaded store (README, "Async").

Cancellation: a call whose awaiting task is cancelled before it began (waiting for its
turn, or still reading) is never made, or stops before it writes; one that has begun a
write (or a step on the thread) runs to its end, keeping the store object's turn until
then (a write is whole, never half done), and its answer is dropped.

Examples
--------
>>> import asyncio
>>> from memworth import HashingEncoder
>>> from memworth.aio import AsyncMemoryStore
>>> async def main():
...     async with await AsyncMemoryStore.open("memory://", encoder=HashingEncoder(), seed=0) as store:
...         await store.add("Use list.reverse() or [::-1] to reverse a Python list.", id="reverse")
...         recall = await store.recall("how to reverse a python list", k=1)
...         await store.record(recall.episode, success=True)
...         return (await store.get("reverse")).counts
>>> asyncio.run(main())
Counts(success=1.0, failure=0.0, n=1.0)
"""

from memworth.aio.sidecar import AsyncSidecar
from memworth.aio.store import MAX_WORKERS, AsyncMemoryStore

__all__ = ["MAX_WORKERS", "AsyncMemoryStore", "AsyncSidecar"]
