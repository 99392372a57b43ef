"""The store objects a server runs its requests on: one, or a pool over one database.

A :class:`memworth.MemoryStore` object is not thread-safe, so each one is used by one
thread at a time (a lock per object). With one object every request waits for the one
before it, and a tenant's long call (``govern``, ``replay``, ``holdout`` over a long log)
holds every other tenant up. A pool of several objects over the same database URL runs
the calls of different tenants at once:

* a tenant (namespace) with calls in flight keeps the object it is on, so its calls run
  one at a time and in order on one object; a tenant with none goes to an object with
  the fewest calls in flight: the one it last ran on, when that is one of them. A call for
  no tenant (the key lookup of a request, before its tenant is known) takes the last of
  the least busy objects, leaving the first to the tenants. Tenant A's govern on one object
  never holds a lock tenant B needs while another object is free, and a tenant that is
  never kept waiting stays on one object: its connection's page cache stays warm and no
  other object has to start the tenant's live statistics (a scan of its log) or read
  back what the first one wrote. Measured under the load of ``memworth bench --only http``
  (one tenant, four connections, the key confirmed on another object per request): its
  outcomes moved between objects 215 and 262 times in about 1,400 transactions (two runs)
  before this rule, twice in about 1,100 with it.
* The objects agree on the data: each follows each namespace's log and rebuilds its
  candidate index when another object changed it. Settings are kept in the database and
  :meth:`StorePool.configure` puts a change in force on every object before it returns; a
  version another process keeps (``memworth config set``) each object follows at its next
  call, within a second (:meth:`memworth.MemoryStore.follow_settings`).
* SQLite (WAL) lets readers run beside the one writer, and a writer waits for the other
  (``busy_timeout``); PostgreSQL runs everything at once. ``memory://`` (and SQLite's
  ``:memory:``) lives in one store object: its pool has one.

What each object holds for itself: its copy of the candidate index (memory grows with
the pool size at large stores), its exploration draws (object ``i`` draws from ``seed + i``)
and what it counts between governs (``govern_every``), as for that many processes.

Long calls (govern, replay, the queue: :mod:`memworth.server.long_calls`) go through
:meth:`StorePool.long`: with ``processes`` they run in worker processes
(:mod:`memworth.server.processes`), off this process's GIL, while the tenant's store object
waits for the answer (so the tenant's calls stay in order); without, on the tenant's object.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import TypeVar

from memworth.errors import ValidationError
from memworth.server.processes import Processes, check_processes, shareable
from memworth.settings import Settings
from memworth.store import MemoryStore
from memworth.store.backend import redact

__all__ = ["DEFAULT_WORKERS", "MAX_WORKERS", "SWITCH_INTERVAL", "StorePool", "default_workers"]

T = TypeVar("T")

DEFAULT_WORKERS = 4
"""Store objects ``memworth serve`` runs requests on over a database (1 over ``memory://``):
enough that a few tenants' long calls leave the others an object, few enough that the
copies of the candidate index stay affordable."""

MAX_WORKERS = 32
"""Most store objects one server keeps."""

MAX_REMEMBERED = 4096
"""Most tenants whose last store object a pool remembers (past it, it forgets them all)."""

SWITCH_INTERVAL = 0.0005
"""The GIL switch interval (seconds, :func:`sys.setswitchinterval`) ``memworth serve`` runs
under with more than one store object. Tenant A's govern or replay is Python work that holds
the GIL; tenant B's request needs it a few times (the event loop, the key lookup, the read)
and each time may wait up to the interval (CPython's default: 5 ms). Measured side by side
(``benchmarks/bench_http.py``, BENCHMARKS.md) B's p99 under A's load was lower with 0.5 ms
in both runs (median ratio to quiet 1.95x against 3.11x, and 3.95x against 5.36x), a modest
and noisy gain; ``--switch-interval`` sets another."""


def default_workers(url: str) -> int:
    """The pool size a server over ``url`` gets when none is given."""
    return DEFAULT_WORKERS if shareable(url) else 1


def check_workers(workers: object, url: str) -> int:
    """``workers`` if a server over ``url`` can have that many store objects, else ValidationError."""
    if isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= MAX_WORKERS:
        raise ValidationError("workers", f"must be an integer from 1 to {MAX_WORKERS}, got {workers!r}")
    if workers > 1 and not shareable(url):
        raise ValidationError("workers", f"{url} lives in one store object: it takes 1 worker")
    return workers


class StorePool:
    """Store objects over one database, each used by one thread at a time; see the module docstring.

    Parameters
    ----------
    store
        The first store object (the pool does not close it).
    workers
        How many store objects in all: ``workers - 1`` more are opened over ``url`` with the
        first one's encoder, clock, verifier and hot tier, and closed by :meth:`close`.
    url
        The database URL the store was opened with (default ``store.backend.url``, which
        hides a password: a URL with one must be given).
    processes
        Worker processes for long calls (:meth:`long`), started at the first one and stopped
        by :meth:`close`; 0 (default): long calls run on the store objects. Only over a
        database another process can open; the store's clock and verifier must pickle.
    hot_tier
        The Redis URL of the store's hot tier, for the worker processes (default: the
        store's, which hides a password: a URL with one must be given).
    """

    def __init__(
        self,
        store: MemoryStore,
        workers: int = 1,
        *,
        url: str | None = None,
        processes: int = 0,
        hot_tier: str | None = None,
    ) -> None:
        if not isinstance(store, MemoryStore):
            raise ValidationError("store", f"must be a MemoryStore, got {type(store).__name__}")
        check_workers(workers, store.backend.url)
        check_processes(processes, store.backend.url)
        if url is None:
            url = store.backend.url
            if (workers > 1 or processes) and ":***@" in url:
                raise ValidationError("url", "the store's URL hides its password: give the URL it was opened with")
        elif not isinstance(url, str) or redact(url) != store.backend.url:
            raise ValidationError("url", f"must be the URL the store was opened with ({store.backend.url})")
        self.processes: Processes | None = None
        if processes:
            if hot_tier is None and store.hot is not None:
                hot_tier = store.hot.url
                if ":***@" in hot_tier:
                    raise ValidationError("hot_tier", "the hot tier's URL hides its password: give the Redis URL")
            elif hot_tier is not None and (store.hot is None or redact(hot_tier) != store.hot.url):
                raise ValidationError("hot_tier", "must be the Redis URL the store's hot tier was opened with")
            self.processes = Processes(url, processes, hot_tier=hot_tier, clock=store.clock, verifier=store.verifier)
        self.stores: list[MemoryStore] = [store]
        seed = store._seed
        try:
            for i in range(1, workers):
                extra = MemoryStore.open(
                    url,
                    encoder=store.encoder,
                    clock=store.clock,
                    verifier=store.verifier,
                    seed=None if seed is None else seed + i,
                )
                extra.hot = store.hot  # one Redis client (thread-safe) for the pool
                self.stores.append(extra)
        except BaseException:
            self.close()
            raise
        self._locks = [threading.Lock() for _ in self.stores]
        self._pending = [0] * len(self.stores)  # calls in flight (running or waiting) per object
        self._bound: dict[str, int] = {}  # namespace -> object, while it has calls in flight
        self._last: dict[str, int] = {}  # namespace -> the object its last call ran on
        self._in_flight: dict[str, int] = {}
        self._guard = threading.Lock()

    @property
    def first(self) -> MemoryStore:
        """The store object the pool was made around."""
        return self.stores[0]

    @property
    def workers(self) -> int:
        """How many store objects run calls."""
        return len(self.stores)

    def _take(self, namespace: str | None) -> int:
        with self._guard:
            i = None if namespace is None else self._bound.get(namespace)
            open_ = self._pending[: len(self.stores)]  # after close(), the first object alone
            if i is None or i >= len(open_):
                low = min(open_)
                least = [j for j, calls in enumerate(open_) if calls == low]
                if namespace is None:
                    i = least[-1]
                else:
                    last = self._last.get(namespace)
                    i = last if last in least else least[0]
                    if len(self._last) >= MAX_REMEMBERED and namespace not in self._last:
                        self._last.clear()
                    self._bound[namespace] = self._last[namespace] = i
            self._pending[i] += 1
            if namespace is not None:
                self._in_flight[namespace] = self._in_flight.get(namespace, 0) + 1
            return i

    def _give_back(self, i: int, namespace: str | None) -> None:
        with self._guard:
            self._pending[i] -= 1
            if namespace is not None:
                left = self._in_flight[namespace] - 1
                if left:
                    self._in_flight[namespace] = left
                else:
                    del self._in_flight[namespace], self._bound[namespace]

    def run(self, namespace: str | None, fn: Callable[[MemoryStore], T]) -> T:
        """``fn(store)`` on the store object for ``namespace`` (``None``: any, e.g. a key
        lookup before the tenant is known), holding that object's lock."""
        i = self._take(namespace)
        try:
            with self._locks[i]:
                return fn(self.stores[i])
        finally:
            self._give_back(i, namespace)

    def long(
        self,
        namespace: str,
        fn: Callable[..., T],
        *args: object,
        then: Callable[[MemoryStore, str], object] | None = None,
    ) -> T:
        """``fn(store, namespace, *args)``, a long call (:mod:`memworth.server.long_calls`): in a
        worker process when the pool has some, else on the tenant's store object. Either way the
        tenant's object is held until the answer is in, so the tenant's calls run in order; after
        a call in a process, ``then(object, namespace)`` catches the object up on it."""
        processes = self.processes
        if processes is None:
            return self.run(namespace, lambda store: fn(store, namespace, *args))

        def elsewhere(store: MemoryStore) -> T:
            answer = processes.run(fn, namespace, *args)
            if then is not None:
                then(store, namespace)
            return answer

        return self.run(namespace, elsewhere)

    def configure(self, changes: Settings | Mapping[str, object], *, actor: str, namespace: str | None = None) -> int:
        """:meth:`memworth.MemoryStore.configure` on one object (which keeps the new version),
        then the newest kept version in force on every other one (that version, or one another
        process kept since: never the one before it); the version written."""
        version = self.run(namespace, lambda store: store.configure(changes, actor=actor))
        self.follow_everywhere()
        return version

    def follow_everywhere(self) -> None:
        """Put the newest kept settings version in force on every store object (after one kept it)."""
        for lock, store in zip(self._locks, self.stores, strict=True):
            with lock:
                store.follow_settings(now=True)

    def close(self) -> None:
        """Stop the worker processes and close the store objects the pool opened (not the first)."""
        if self.processes is not None:
            self.processes.close()
        extras, self.stores = self.stores[1:], self.stores[:1]
        for store in extras:
            store.hot = None  # the first object's client: closed with it
            store.close()
