"""A change's answer, rendered before the change is kept: one transaction holds both.

A route that changes something calls :func:`answered`: the change and the rendering of its
answer (validated and encoded to JSON, what FastAPI does with a returned value) run in
one transaction of the store (:meth:`memworth.MemoryStore.transaction`), committed only once
the answer is ready. A failure to answer (a bug in the route, a value that does not encode,
a memory whose report cannot be rendered) rolls the change back whole and is answered 500 by
the app; a client that goes away after the commit loses only the acknowledgement.

The long calls a worker process runs (:mod:`memworth.server.long_calls`) render their answer
there, inside their own transaction (:func:`checked`): what comes back is plain data already
shown to encode, which the route renders again, the same way, after the commit.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from fastapi.responses import Response
from pydantic import TypeAdapter

from memworth.store import MemoryStore

__all__ = ["answered", "checked", "encoded", "rendered", "with_answer"]

T = TypeVar("T")
R = TypeVar("R")

_ANSWER: TypeAdapter[dict[str, Any]] = TypeAdapter(dict[str, Any])
"""A write route's answer: its ``response_model``, as FastAPI checks and encodes it."""


def encoded(content: Any) -> bytes:
    """``content`` as a write route's JSON body: validated as the route's ``response_model``
    (a JSON object) and encoded by pydantic, NaN and infinities as null, exactly as FastAPI
    encodes a value the route returns."""
    return _ANSWER.dump_json(_ANSWER.validate_python(content))


def rendered(content: Any, status: int = 200) -> Response:
    """``content`` as a route's JSON answer, rendered now (:func:`encoded`), so that a value that
    cannot be sent fails here, while its change can still be rolled back."""
    return Response(content=encoded(content), media_type="application/json", status_code=status)


def with_answer(store: MemoryStore, change: Callable[[MemoryStore], T], answer: Callable[[T], R]) -> R:
    """``change(store)`` and ``answer(what it returned)`` in one transaction of ``store``:
    committed once the answer is built, rolled back whole if either fails. The answer."""
    with store.transaction():
        return answer(change(store))


def answered(store: MemoryStore, work: Callable[[MemoryStore], Any], status: int = 200) -> tuple[Any, Response]:
    """``work(store)`` and its rendered JSON answer in one transaction of ``store``
    (:func:`with_answer`). Returns the content and the answer."""
    return with_answer(store, work, lambda content: (content, rendered(content, status)))


def checked(store: MemoryStore, work: Callable[[MemoryStore], T]) -> T:
    """``work(store)`` in one transaction of ``store``, committed only once its answer (plain
    data) has been rendered as the route will render it; the answer."""
    with store.transaction():
        content = work(store)
        rendered(content)
        return content
