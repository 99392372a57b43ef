"""The worker thread and the turn each store object runs its calls in, and the typed awaitable
twin of a sync method."""

from __future__ import annotations

import asyncio
import functools
import inspect
import threading
import weakref
from collections.abc import Callable, Coroutine, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, ClassVar, Concatenate, Generic, ParamSpec, TypeVar, overload

from memworth.errors import StoreError
from memworth.store import MemoryStore
from memworth.store.configuring import WrapsStore
from memworth.store.steps import Call, Steps

if TYPE_CHECKING:
    from memworth.sidecar import Sidecar
    from memworth.store.postgres_async import AsyncPlans

__all__ = ["Runner", "Worker", "retire", "twin", "worker_for"]

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")
C = TypeVar("C", "MemoryStore", "Sidecar")


class _Turn:
    """One call's turn on a store object: whether it has begun something that must run to its end."""

    begun = False


class Worker:
    """The one turn in which calls on one store object run, one call at a time, in the order
    made, and the one thread that makes its blocking work.

    A call runs either wholly on the thread (:meth:`call`) or as steps on the event loop
    (:meth:`drive`: the database awaited natively, blocking steps on the thread); either way
    no other call on the store object runs until it has ended.
    """

    def __init__(self) -> None:
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memworth-aio")
        self.pending = 0  # calls made and not yet answered: where a pool sends the next one
        self._locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = weakref.WeakKeyDictionary()

    async def call(self, fn: Callable[..., R], /, *args: Any, **kwargs: Any) -> R:
        """``fn(*args, **kwargs)`` on this worker's thread, awaited, in the store object's turn.

        A call the awaiting task gives up on (cancelled) before the thread took it is never
        made; one the thread has begun runs to its end (a write is whole or absent, never
        half done) and its answer is dropped.
        """

        async def work(turn: _Turn) -> R:
            future = self._submit(fn, *args, **kwargs)
            turn.begun = True
            return await asyncio.wrap_future(future)

        return await self._in_turn(work)

    async def drive(self, steps: Callable[[], Steps[R]], plans: AsyncPlans) -> R:
        """Run ``steps()`` (:mod:`memworth.store.steps`) on the event loop, in the store object's
        turn: each backend call awaited natively through ``plans`` (a method without a plan:
        on this worker's thread), each blocking step on this worker's thread, the pure work
        between them inline.

        Cancelled before a write (or a blocking step) began, the call stops there and
        nothing was written; after, it runs to its end (a write is whole, never half done)
        and its answer is dropped.
        """

        async def work(turn: _Turn) -> R:
            return await _drive(steps(), plans, self, turn)

        return await self._in_turn(work)

    def _submit(self, fn: Callable[..., R], /, *args: Any, **kwargs: Any) -> Future[R]:
        try:
            return self.executor.submit(fn, *args, **kwargs)
        except RuntimeError:  # the executor was shut down: the store was closed
            raise StoreError("the async store is closed") from None

    def _lock(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        lock = self._locks.get(loop)
        if lock is None:
            lock = self._locks[loop] = asyncio.Lock()
        return lock

    async def _in_turn(self, work: Callable[[_Turn], Coroutine[Any, Any, R]]) -> R:
        """``work`` alone on the store object: after every call made before it has ended.

        It runs as its own task, so that a cancelled caller can leave begun work to end:
        the turn passes to the next call only when it has."""
        turn = _Turn()
        lock = self._lock()

        async def alone() -> R:
            async with lock:
                return await work(turn)

        task = asyncio.ensure_future(alone())
        self.pending += 1
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            if not turn.begun:
                task.cancel()
            task.add_done_callback(_consume)
            raise
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


def _consume(task: asyncio.Future[Any]) -> None:
    """Retrieve the outcome of work whose caller gave up on it (no 'never retrieved' warning)."""
    if not task.cancelled():
        task.exception()


async def _drive(steps: Steps[R], plans: AsyncPlans, worker: Worker, turn: _Turn) -> R:
    """The async driver of :mod:`memworth.store.steps` (:func:`memworth.store.steps.run` is the sync one)."""
    try:
        step = next(steps)
        while True:
            try:
                plan = plans.plan(step.name, step.args, step.kwargs) if isinstance(step, Call) else None
                if plan is not None and plan.mode == "read":
                    answer = await plans.do(plan)
                elif plan is not None:
                    turn.begun = True
                    answer = await _whole(plans.do(plan))
                else:
                    fn = getattr(plans.backend, step.name) if isinstance(step, Call) else step.fn
                    future = worker._submit(fn, *step.args, **step.kwargs)
                    turn.begun = True
                    answer = await asyncio.wrap_future(future)
            except Exception as exc:
                step = steps.throw(exc)
            else:
                step = steps.send(answer)
    except StopIteration as stop:
        return stop.value
    finally:
        steps.close()


async def _whole(statements: Coroutine[Any, Any, T]) -> T:
    """Await ``statements`` (one write on one connection) to their end even if the caller is
    cancelled meanwhile: a transaction is never cut short by a cancellation (a read cut short
    is only given up: the pool discards a connection returned in the middle of a statement)."""
    task = asyncio.ensure_future(statements)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        task.add_done_callback(_consume)
        raise


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


_PLANS: weakref.WeakKeyDictionary[MemoryStore, AsyncPlans] = weakref.WeakKeyDictionary()
"""The async plans of each store object opened natively: every async wrapper of it (the
adapters' included) awaits its database the same way."""


def retire(store: MemoryStore) -> None:
    """Stop ``store``'s worker (after the store was closed on it); later calls raise StoreError."""
    with _LOCK:
        worker = _WORKERS.pop(store, None)
        _PLANS.pop(store, None)
    if worker is not None:
        worker.executor.shutdown(wait=False)


class Runner(WrapsStore, Generic[T]):
    """Runs calls on sync objects (stores or sidecars), each on its store's worker thread.

    With several objects (a pool over one PostgreSQL database), a call goes to the one
    with the fewest calls waiting.
    """

    NATIVE: ClassVar[dict[str, str]] = {}
    """Methods with steps (:mod:`memworth.store.steps`): with :meth:`_go_native`, the name of
    the target's method that makes a call's steps; the others run on the worker thread."""
    FOLLOWING: ClassVar[frozenset[str]] = frozenset()
    """Methods whose steps first follow the kept settings (``MemoryStore._following_steps``)."""

    def __init__(self, targets: Sequence[T], stores: Sequence[MemoryStore]) -> None:
        self._targets = list(targets)
        self._stores = list(stores)
        self._workers = [worker_for(s) for s in self._stores]
        self._closed = False
        with _LOCK:
            found = [_PLANS.get(s) for s in self._stores]
        # a store opened natively by another wrapper: native here too (its pool is that wrapper's)
        self._plans: list[AsyncPlans] | None = None if None in found else [p for p in found if p is not None]
        self._pool: Any = None

    def _go_native(self, pool: Any) -> None:
        """Await the database natively from now on, through ``pool`` (psycopg's async pool over
        the PostgreSQL database of every wrapped store, owned and closed by this object)."""
        from memworth.store.postgres import PostgresBackend
        from memworth.store.postgres_async import AsyncPlans

        backends = [s.backend for s in self._stores]
        if not all(isinstance(b, PostgresBackend) for b in backends):
            raise StoreError("native async needs PostgreSQL stores")
        self._plans = [AsyncPlans(b, pool) for b in backends if isinstance(b, PostgresBackend)]
        self._pool = pool
        with _LOCK:
            _PLANS.update(zip(self._stores, self._plans, strict=True))

    @property
    def native(self) -> bool:
        """Whether calls with steps await the database natively (PostgreSQL), not on a thread."""
        return self._plans is not None

    async def run(self, fn: Callable[Concatenate[T, P], R], /, *args: P.args, **kwargs: P.kwargs) -> R:
        """``fn(target, *args, **kwargs)`` on a worker thread, ``target`` being the wrapped sync
        object: a sequence of calls that must not interleave with any other call on it."""
        i = self._pick()
        return await self._workers[i].call(fn, self._targets[i], *args, **kwargs)

    async def method(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """``target.<name>(*args, **kwargs)``: its steps on the event loop when native and it has
        them (:attr:`NATIVE`), else the whole call on the worker thread."""
        i = self._pick()
        steps = self.NATIVE.get(name)
        if self._plans is None or steps is None:
            return await self._workers[i].call(_method_call, self._targets[i], name, args, kwargs)
        target: Any = self._targets[i]

        def make() -> Steps[Any]:
            made = getattr(target, steps)(*args, **kwargs)
            return target._following_steps(made) if name in self.FOLLOWING else made

        return await self._workers[i].drive(make, self._plans[i])

    def _pick(self) -> int:
        """The store object with the fewest calls waiting."""
        if self._closed:
            raise StoreError("the async store is closed")
        return min(range(len(self._workers)), key=lambda j: self._workers[j].pending)

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
            if self._pool is not None:
                await self._pool.close()


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
            return await obj.method(name, args, kwargs)

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
