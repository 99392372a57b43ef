"""Async memworth: :class:`AsyncMemoryStore` and :class:`AsyncSidecar`, awaitable and never blocking the event loop.

Every method of :class:`memworth.MemoryStore` that touches the database has an awaitable
twin with the same parameters, answer, errors and docstring (``await store.recall(...)``);
the same holds for :class:`memworth.Sidecar`.

How the calls run
-----------------
A store object is not thread-safe, so each one gets ONE worker thread
(``ThreadPoolExecutor(max_workers=1)``), and every async wrapper of that object (an
:class:`AsyncMemoryStore`, an :class:`AsyncSidecar`, the LangChain and LangGraph
adapters) sends its calls to that thread: calls on one store object run one at a time,
in the order they were made, and the event loop only awaits them.

* SQLite (and ``memory://``): one store object, one worker. SQLite lets one writer in at
  a time, so a second store object's writes would only wait on the file lock; reads would
  run beside them but re-read the whole index into a second copy. ``workers > 1`` is
  refused.
* PostgreSQL: ``AsyncMemoryStore.open(url, workers=N)`` opens N store objects over the
  database, each on its own thread; a call goes to the one with the fewest calls waiting,
  so N calls run at once (PostgreSQL keeps them consistent, as it does for N processes).
  :meth:`AsyncMemoryStore.configure` and ``set_policy`` change every object of the pool.
  What a store object counts for itself (``govern_every``, the alarm splitter's
  statistics) is per object, as with N processes.

Why threads and not psycopg's async pool: every query of the PostgreSQL backend would be
written a second time, async, and the CPU work around the queries (embedding, ranking,
the change detectors of govern) would still need a thread to keep the loop free. The
loop's longest stall while a call runs is the cost of handing it to a thread and back
(``benchmarks/bench_aio.py`` measures it: a 22 ms longest stall during a
govern that stalls the loop 496 ms when called on it).

Cancellation: a call whose awaiting task is cancelled before its thread took it is never
made; one the thread has begun runs to its end (a write is whole, never half done) and
its answer is dropped.

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
