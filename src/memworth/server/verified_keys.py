"""A request's key, checked without a thread of its own: keys the server verified, confirmed in the route's thread.

FastAPI runs a plain ``def`` dependency on a worker thread, apart from the route's own
thread, and the hop costs more than the key lookup (a profile of ``POST
/v1/episodes/{id}/outcome``). So the key dependency is a coroutine, and a key is looked up
in the store on a worker thread only the first time the server sees it
(:class:`VerifiedKeys`). Every later request with it is checked at once from what was read
then: missing or two keys (401), expired (401), read-only on a route that writes (403),
exactly as :func:`memworth.server.keys.authenticate` would, in the same order before the
body is read.

What can change about a key after that is its revocation, by any process (``memworth keys
revoke``). So a key served from memory is confirmed in the store before the route does
anything: :func:`confirmed` wraps each keyed route's function, which runs on the worker
thread the route runs on anyway, and reads the key's record there (one read, no other
thread). A revoked key is answered 401 and forgotten, on the first request after its
revocation. The one difference from a store read before the body: a key revoked since the
server last saw it, sent with a body that is refused, is answered 422 (the body) rather than
401; nothing is done either way.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable
from contextvars import ContextVar
from typing import Any

from fastapi.routing import APIRoute
from starlette.routing import BaseRoute

from memworth.errors import AuthError
from memworth.server.keys import KeyInfo, check_key

__all__ = ["VerifiedKeys", "confirmed", "still_valid"]

_TO_CONFIRM: ContextVar[tuple[str, str] | None] = ContextVar("memworth_key_to_confirm", default=None)
"""(hash, header) of the request's key when it came from memory: confirm it before the route runs."""


class VerifiedKeys:
    """Keys a server has read from its store, by hash (never the key itself).

    Parameters
    ----------
    limit
        Most keys kept; past it the memory is emptied and keys are read again.
    """

    def __init__(self, limit: int = 4096) -> None:
        self.limit = limit
        self._known: dict[str, KeyInfo] = {}

    def get(self, digest: str) -> KeyInfo | None:
        """The key with hash ``digest`` as last read, or None."""
        return self._known.get(digest)

    def keep(self, digest: str, info: KeyInfo) -> None:
        """Remember ``info`` (a key just read from the store) under its hash."""
        if len(self._known) >= self.limit:
            self._known.clear()
        self._known[digest] = info

    def forget(self, digest: str) -> None:
        """Drop a key (revoked, or gone from the store)."""
        self._known.pop(digest, None)

    def from_memory(self, digest: str, field: str) -> None:
        """Mark the current request's key as served from memory: :func:`confirmed` reads it again."""
        _TO_CONFIRM.set((digest, field))

    def from_store(self) -> None:
        """Mark the current request's key as read from the store just now: nothing to confirm."""
        _TO_CONFIRM.set(None)


def confirmed(
    routes: Iterable[BaseRoute],
    dependencies: set[Callable[..., Any]],
    confirm: Callable[[str, str], None],
) -> None:
    """Make each route of ``routes`` that depends on one of ``dependencies`` call
    ``confirm(hash, header)`` first, on its own thread, when its key came from memory.

    The routes' functions must be plain ``def`` (they run on a worker thread); a route wrapped
    already is left as it is, so this may run on a router's routes and again on the app's."""
    for route in routes:
        if not isinstance(route, APIRoute) or not {d.call for d in route.dependant.dependencies} & dependencies:
            continue
        call = route.dependant.call
        if call is None or getattr(call, "_memworth_confirms_key", False):
            continue
        if inspect.iscoroutinefunction(call):
            raise TypeError(f"route {route.path}: a keyed route must be a plain def, to confirm its key on its thread")

        @functools.wraps(call)
        def run(*args: Any, _call: Callable[..., Any] = call, **kwargs: Any) -> Any:
            pending = _TO_CONFIRM.get()
            if pending is not None:
                confirm(*pending)
            return _call(*args, **kwargs)

        run._memworth_confirms_key = True  # type: ignore[attr-defined]
        route.dependant.call = run
        # A router's routes are served through include_router, which builds each one again from
        # its endpoint (FastAPI 0.165): the endpoint must be the confirming function too, or
        # the sidecar's routes would serve a key revoked since the server last read it.
        route.endpoint = run


def still_valid(info: KeyInfo | None, field: str) -> KeyInfo:
    """``info`` (the key's record read again) if it may still be used: :func:`check_key`'s
    verdict (a revoked or expired key is a 401); a record gone is an unknown key."""
    if info is None:
        raise AuthError(field, "unknown API key")
    return check_key(info, field, write=False)
