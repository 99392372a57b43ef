"""AsyncSidecar: every database method of :class:`memworth.Sidecar`, awaitable."""

from __future__ import annotations

from typing import Any, ClassVar

from memworth.aio._worker import Runner, Worker, retire, twin, worker_for
from memworth.errors import ValidationError
from memworth.sidecar import Sidecar

__all__ = ["AsyncSidecar"]


class AsyncSidecar(Runner[Sidecar]):
    """A :class:`memworth.Sidecar` whose methods are awaitable and never block the event loop.

    Its calls run on the worker thread of the sidecar's store, the one every async wrapper
    of that store shares (:class:`memworth.aio.AsyncMemoryStore` and the LangChain and
    LangGraph adapters included), so they never overlap. :meth:`aclose` closes the sidecar.

    Examples
    --------
    >>> import asyncio
    >>> from memworth.aio import AsyncSidecar
    >>> async def main():
    ...     async with await AsyncSidecar.open("memory://", exploration=0.0) as sidecar:
    ...         picked = await sidecar.retrieve([("doc-1", 0.8), ("doc-2", 0.7)], k=1)
    ...         await sidecar.record(picked.episode, success=True)
    ...         return (await sidecar.worth("doc-1")).counts.success
    >>> asyncio.run(main())
    1.0
    """

    NATIVE: ClassVar[dict[str, str]] = {
        "retrieve": "_retrieve_steps",
        "record": "_record_steps",
        "worth": "_worth_steps",
        "worth_many": "_worth_many_steps",
    }
    FOLLOWING: ClassVar[frozenset[str]] = frozenset(NATIVE)

    def __init__(self, sidecar: Sidecar) -> None:
        if not isinstance(sidecar, Sidecar):
            raise ValidationError("sidecar", f"must be a memworth Sidecar, got {type(sidecar).__name__}")
        super().__init__([sidecar], [sidecar.store])

    @classmethod
    async def open(
        cls,
        url: str = "sqlite:///memworth.db",
        *,
        auto_register: bool = True,
        native: bool | None = None,
        **settings: Any,
    ) -> AsyncSidecar:
        """Open the sidecar at ``url`` on its worker thread, as :meth:`memworth.Sidecar.open` does.

        ``native`` (default: on PostgreSQL): ``retrieve``, ``record``, ``worth`` and ``worth_many`` await
        the database on psycopg's async pool (:mod:`memworth.aio`), as does every async
        wrapper of this sidecar's store made later (the LangChain and LangGraph adapters given
        :attr:`sidecar`); the other methods run on the worker thread."""
        from memworth.aio.store import check_native

        go_native = check_native(native, url)
        sidecar = await Worker().open(Sidecar.open, url, auto_register=auto_register, **settings)
        try:
            opened = cls(sidecar)
            if go_native:
                from memworth.store.postgres_async import open_async_pool

                opened._go_native(await open_async_pool(url))
            return opened
        except BaseException:
            await worker_for(sidecar.store).call(sidecar.close)
            retire(sidecar.store)
            raise

    async def __aenter__(self) -> AsyncSidecar:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    @property
    def sidecar(self) -> Sidecar:
        """The sync sidecar: call its methods only through this object, which keeps them on the store's thread."""
        return self._targets[0]

    register = twin(Sidecar.register)
    filter = twin(Sidecar.filter)
    rerank = twin(Sidecar.rerank)
    retrieve = twin(Sidecar.retrieve)
    retrieved = twin(Sidecar.retrieved)
    record = twin(Sidecar.record)
    worth = twin(Sidecar.worth)
    worth_many = twin(Sidecar.worth_many)
    suggestions = twin(Sidecar.suggestions)
    govern = twin(Sidecar.govern)
    set_status = twin(Sidecar.set_status)
    restore = twin(Sidecar.restore)
    queue = twin(Sidecar.queue)
    resolve = twin(Sidecar.resolve)
    pin = twin(Sidecar.pin)
    unpin = twin(Sidecar.unpin)
    audit = twin(Sidecar.audit)
    replay = twin(Sidecar.replay)
