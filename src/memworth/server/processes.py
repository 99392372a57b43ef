"""Worker processes for a server's long calls: a tenant's govern or replay off the server's GIL.

A long store call (govern, replay, the verification queue: :mod:`memworth.server.long_calls`)
is Python work that holds the GIL for up to seconds on a long log. On the server's own
store objects it stalls every other tenant's request, however many store objects there
are (``benchmarks/bench_http.py``). :class:`Processes` runs such calls in worker
processes instead, each with its own store object over the server's database URL:

* only for a database other processes can open (a SQLite file, PostgreSQL): ``memory://``
  and SQLite's ``:memory:`` live in one store object (:func:`shareable`);
* started when the first long call comes (``spawn``: a fresh interpreter, never a fork of
  the server's threads), each opening its store object at its first call and keeping it
  (it follows each namespace's log from where it last read, as the server's objects do);
* before each call a process puts the store's newest kept settings in force
  (:meth:`memworth.MemoryStore.follow_settings`), so it works under what the server's
  objects work under;
* a call's answer comes back as plain data (the route's JSON), and a memworth error as
  itself (:mod:`memworth.errors` pickles whole), so a face answers exactly what it
  answered in-process;
* a process that dies during a call (killed, out of memory) is answered with
  :class:`memworth.errors.UnavailableError` (503) and replaced by a new one; the server
  does not wait for it. A call of a process that had died while idle is run on its
  replacement.

A call waits for a free process; the server's store object of the tenant waits with it
(:meth:`memworth.server.pool.StorePool.long`), so a tenant's calls still run in order.
"""

from __future__ import annotations

import atexit
import multiprocessing
import pickle
import queue
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar

from memworth.errors import UnavailableError, ValidationError
from memworth.store import MemoryStore
from memworth.store.backend import shareable

__all__ = ["MAX_PROCESSES", "Processes", "check_processes", "default_processes", "shareable"]

T = TypeVar("T")

MAX_PROCESSES = 16
"""Most worker processes one server keeps."""


def default_processes(url: str) -> int:
    """How many worker processes a server over ``url`` gets when none is given: 1 when another
    process can open its database, else 0 (long calls run on the server's store objects)."""
    return 1 if shareable(url) else 0


def check_processes(processes: object, url: str) -> int:
    """``processes`` if a server over ``url`` can have that many worker processes, else ValidationError."""
    if isinstance(processes, bool) or not isinstance(processes, int) or not 0 <= processes <= MAX_PROCESSES:
        raise ValidationError("processes", f"must be an integer from 0 to {MAX_PROCESSES}, got {processes!r}")
    if processes and not shareable(url):
        raise ValidationError("processes", f"{url} lives in one store object: no other process can open it (use 0)")
    return processes


# -- in the worker process ------------------------------------------------------------------

_opened: dict[tuple[Any, ...], MemoryStore] = {}
"""The store object of this worker process, by what it was opened with."""


def _close_opened() -> None:
    for store in _opened.values():
        store.close()
    _opened.clear()


def _call(opening: tuple[Any, ...], fn: Callable[..., Any], namespace: str, args: tuple[Any, ...]) -> Any:
    """Run ``fn(store, namespace, *args)`` on this process's store object (opened at the first call)."""
    store = _opened.get(opening)
    if store is None:
        url, hot_tier, clock, verifier = opening
        store = MemoryStore.open(url, hot_tier=hot_tier, clock=clock, verifier=verifier)
        if not _opened:
            atexit.register(_close_opened)
        _opened[opening] = store
    store.follow_settings(now=True)  # the settings the server's objects work under, as of now
    return fn(store, namespace, *args)


def _quiet_interrupts() -> None:
    """A worker ignores Ctrl-C (sent to the whole process group): the server stops it at shutdown."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


# -- in the server ---------------------------------------------------------------------------


class _Worker:
    """One worker process (an executor of one), started at its first call and replaced when it dies."""

    def __init__(self) -> None:
        self.executor: ProcessPoolExecutor | None = None
        self.closed = False
        self._lock = threading.Lock()

    def started(self) -> ProcessPoolExecutor:
        with self._lock:
            if self.closed:  # the server shut down while this call waited: start nothing
                raise UnavailableError("the server is shutting down: its worker processes are closed")
            if self.executor is None:
                self.executor = ProcessPoolExecutor(
                    1, mp_context=multiprocessing.get_context("spawn"), initializer=_quiet_interrupts
                )
            return self.executor

    def replace(self) -> None:
        """Drop the executor whose process died; the next call starts a new one."""
        with self._lock:
            dead, self.executor = self.executor, None
        if dead is not None:
            dead.shutdown(wait=False, cancel_futures=True)

    def close(self) -> None:
        """Stop the process, after the call it runs, if any; no call starts one again."""
        with self._lock:
            self.closed = True
            done, self.executor = self.executor, None
        if done is not None:
            done.shutdown(wait=True, cancel_futures=True)


class Processes:
    """Worker processes that run long calls over one database; see the module docstring.

    Parameters
    ----------
    url
        The database URL (with its password, if any); another process must be able to open it.
    count
        How many worker processes (at least 1).
    hot_tier
        The Redis URL of the store's hot tier (None: none): a govern that applies changes
        keeps the mirror as the server's own objects would.
    clock, verifier
        The store's clock and verifier, sent to each process: they must pickle (a
        module-level function does, a lambda does not).
    """

    def __init__(
        self,
        url: str,
        count: int,
        *,
        hot_tier: str | None = None,
        clock: Callable[[], float] = time.time,
        verifier: Callable[..., object] | None = None,
    ) -> None:
        check_processes(count, url)
        if count < 1:
            raise ValidationError("processes", f"a pool of worker processes needs at least 1, got {count}")
        for name, value in (("clock", clock), ("verifier", verifier)):
            try:
                pickle.dumps(value)
            except Exception as exc:
                raise ValidationError(
                    "processes",
                    f"the store's {name} cannot be sent to another process ({type(exc).__name__}: {exc}); "
                    "give a module-level function or run long calls in-process (processes=0)",
                ) from None
        self._opening = (url, hot_tier, clock, verifier)
        self._workers = [_Worker() for _ in range(count)]
        self._free: queue.Queue[_Worker] = queue.Queue()
        for worker in self._workers:
            self._free.put(worker)
        self._closed = threading.Event()

    @property
    def count(self) -> int:
        """How many worker processes (started or not)."""
        return len(self._workers)

    def run(self, fn: Callable[..., T], namespace: str, *args: Any) -> T:
        """``fn(store, namespace, *args)`` in a free worker process (waiting for one); its answer.

        ``fn`` must be a module-level function, and ``args`` and its answer must pickle.
        A memworth error it raises is raised here as itself; a process that dies during the
        call raises :class:`memworth.errors.UnavailableError` (and is replaced).
        """
        if self._closed.is_set():
            raise UnavailableError("the server is shutting down: its worker processes are closed")
        name = getattr(fn, "__name__", "the call")
        worker = self._free.get()
        try:
            try:
                future = worker.started().submit(_call, self._opening, fn, namespace, args)
            except BrokenProcessPool:  # it died while idle: the call has not started, so a new one runs it
                worker.replace()
                future = worker.started().submit(_call, self._opening, fn, namespace, args)
            try:
                return future.result()
            except BrokenProcessPool:
                worker.replace()
                raise UnavailableError(
                    f"the worker process running {name} stopped before it answered (killed or crashed); "
                    "a new one takes the next call. Changes it committed before it stopped are kept "
                    "(each is audited): read the state, then try again"
                ) from None
        finally:
            self._free.put(worker)

    def pids(self) -> list[int]:
        """The process id of each started worker process (for tests and operators)."""
        out = []
        for worker in self._workers:
            if worker.executor is not None:
                out += [p.pid for p in list(worker.executor._processes.values()) if p.pid is not None]
        return out

    def close(self) -> None:
        """Stop every worker process (each closes its store object); later calls raise UnavailableError."""
        self._closed.set()
        for worker in self._workers:
            worker.close()
