"""The worker thread each store object runs on, and the typed awaitable twin of a sync method."""

from __future__ import annotations

import asyncio
import functools
import inspect
import threading
import weakref
from collections.abc import Callable, Coroutine, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Concatenate, Generic, ParamSpec, TypeVar, overload

from memworth.errors import StoreError
from memworth.store import MemoryStore

if TYPE_CHECKING:
    from memworth.sidecar import Sidecar

__all__ = ["Runner", "Worker", "retire", "twin", "worker_for"]

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")
C = TypeVar("C", "MemoryStore", "Sidecar")


class Worker:
    """One thread that makes every call on one store object, one call at a time."""

    def __init__(self) -> None:
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memworth-aio")
        self.pending = 0  # calls submitted and not yet answered: where a pool sends the next one

    async def call(self, fn: Callable[..., R], /, *args: Any, **kwargs: Any) -> R:
        """``fn(*args, **kwargs)`` on this worker's thread, awaited.

        A call the awaiting task gives up on (cancelled) before the thread took it is never
        made; one the thread has begun runs to its end (a write is whole or absent, never
        half done) and its answer is dropped.
        """
        try:
            future = self.executor.submit(fn, *args, **kwargs)
        except RuntimeError:  # the executor was shut down: the store was closed
            raise StoreError("the async store is closed") from None
        self.pending += 1
        try:
            return await asyncio.wrap_future(future)
        finally:
            self.pending -= 1

    async def open(self, fn: Callable[..., C], /, *args: Any, **kwargs: Any) -> C:
        """``fn(*args, **kwargs)`` (a store or sidecar ``open``) on this worker's thread: the
        object opened is bound to this worker; if the awaiting task is cancelled or the
        opening fails, nothing is left open and the thread stops."""
        future = self.executor.submit(fn, *args, **kwargs)
        try:
            opened = await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            future.add_done_callback(self._drop_opened)  # runs once the thread has finished opening
            raise
        except BaseException:
            self.executor.shutdown(wait=False)
            raise
        worker_for(opened if isinstance(opened, MemoryStore) else opened.store, self)
        return opened

    def _drop_opened(self, future: Future[Any]) -> None:
        if not future.cancelled() and future.exception() is None:
            future.result().close()
        self.executor.shutdown(wait=False)


_WORKERS: weakref.WeakKeyDictionary[MemoryStore, Worker] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def worker_for(store: MemoryStore, worker: Worker | None = None) -> Worker:
    """The one worker of ``store`` (made at first use, or ``worker`` when given and none is yet):
    every async wrapper of one store object, the adapters' included, shares it, so their
    calls never overlap."""
    with _LOCK:
        found = _WORKERS.get(store)
        if found is None:
            found = _WORKERS[store] = worker if worker is not None else Worker()
        return found


def retire(store: MemoryStore) -> None:
    """Stop ``store``'s worker (after the store was closed on it); later calls raise StoreError."""
    with _LOCK:
        worker = _WORKERS.pop(store, None)
    if worker is not None:
        worker.executor.shutdown(wait=False)


class Runner(Generic[T]):
    """Runs calls on sync objects (stores or sidecars), each on its store's worker thread.

    With several objects (a pool over one PostgreSQL database), a call goes to the one
    with the fewest calls waiting.
    """

    def __init__(self, targets: Sequence[T], stores: Sequence[MemoryStore]) -> None:
        self._targets = list(targets)
        self._stores = list(stores)
        self._workers = [worker_for(s) for s in self._stores]
        self._closed = False

    async def run(self, fn: Callable[Concatenate[T, P], R], /, *args: P.args, **kwargs: P.kwargs) -> R:
        """``fn(target, *args, **kwargs)`` on a worker thread, ``target`` being the wrapped sync
        object: a sequence of calls that must not interleave with any other call on it."""
        if self._closed:
            raise StoreError("the async store is closed")
        i = min(range(len(self._workers)), key=lambda j: self._workers[j].pending)
        return await self._workers[i].call(fn, self._targets[i], *args, **kwargs)

    async def aclose(self) -> None:
        """Close the wrapped objects (each on its thread, after the calls before it) and stop their threads."""
        if self._closed:
            return
        self._closed = True
        try:
            for worker, target in zip(self._workers, self._targets, strict=True):
                await worker.call(_close, target)
        finally:
            for store in self._stores:
                retire(store)


def _close(target: Any) -> None:
    target.close()


class twin(Generic[P, R]):  # lower case: it reads as a method made from another
    """The awaitable twin of the sync method ``method``: same parameters, same answer, same
    errors, made on the store's worker thread; its docstring is the sync method's.

    A descriptor, so that type checkers see each twin's exact signature
    (``AsyncMemoryStore.add`` takes what ``MemoryStore.add`` takes and returns an awaitable
    ``Memory``) while the method names are written once.
    """

    def __init__(self, method: Callable[Concatenate[Any, P], R]) -> None:
        self.method = method
        self.name = method.__name__
        self.__doc__ = method.__doc__

    @overload
    def __get__(self, obj: None, owner: type[Any] | None = None) -> twin[P, R]: ...

    @overload
    def __get__(self, obj: Runner[Any], owner: type[Any] | None = None) -> Callable[P, Coroutine[Any, Any, R]]: ...

    def __get__(
        self, obj: Runner[Any] | None, owner: type[Any] | None = None
    ) -> twin[P, R] | Callable[P, Coroutine[Any, Any, R]]:
        if obj is None:
            return self
        name = self.name

        async def call(*args: P.args, **kwargs: P.kwargs) -> R:
            return await obj.run(_method_call, name, args, kwargs)

        functools.update_wrapper(call, self.method)
        call.__signature__ = self.signature  # type: ignore[attr-defined]
        return call

    @functools.cached_property
    def signature(self) -> inspect.Signature:
        """The sync method's signature without ``self``: what ``help()`` and ``inspect`` show of a twin."""
        sig = inspect.signature(self.method)
        return sig.replace(parameters=list(sig.parameters.values())[1:])


def _method_call(target: Any, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    return getattr(target, name)(*args, **kwargs)
