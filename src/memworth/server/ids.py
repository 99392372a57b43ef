"""Memory ids in URL paths: one percent-encoded segment, read from the request as sent.

A memory id may hold any character: ``/``, ``%``, spaces, any Unicode. In a path it goes
as one segment, percent-encoded (:func:`id_path`: ``urllib.parse.quote(id, safe="")``,
and ``.`` / ``..`` as ``%2E`` / ``%2E%2E``, which clients would otherwise drop as dot
segments). The ASGI server decodes ``%2F`` into ``/`` before routing, which would make
``/v1/memories/a%2Fworth`` (the memory ``a/worth``) and ``/v1/memories/a/worth`` (the
worth of ``a``) the same request; :class:`RawIdPaths` hands the router the path as the
client sent it instead, under the prefixes given, and :func:`path_id` decodes the id.

So, under ``/v1/memories/``:

* an encoded id is exact: ``/v1/memories/a%2Fworth`` is the memory ``a/worth``;
* a sub-resource is a literal segment after the id: ``/v1/memories/a%2Fworth/worth`` is
  its worth;
* an unencoded ``/`` is read as part of the id, so clients that do not encode still
  reach ``/v1/memories/a/b``, except that a trailing literal ``/worth``, ``/resolve``,
  ``/pin`` or ``/unpin`` always names the sub-resource, whatever the method (the
  ``memory_id`` path convertor, :data:`MEMORY_ID`, stops before one): the memory
  ``a/pin`` needs the encoded form. So a method a sub-resource does not take is a 405
  whose ``Allow`` lists the sub-resource's methods, as the OpenAPI document says.

Examples
--------
>>> id_path("notes/2024 café")
'notes%2F2024%20caf%C3%A9'
>>> id_path(".."), id_path("a/..")
('%2E%2E', 'a%2F..')
>>> path_id("notes%2F2024%20caf%C3%A9")
'notes/2024 café'
>>> path_id("%FF")
Traceback (most recent call last):
...
memworth.errors.ValidationError: memory_id: must be UTF-8 once percent-decoded, got '%FF'
"""

from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import quote, unquote

from starlette.convertors import Convertor, register_url_convertor

from memworth.errors import ValidationError

__all__ = ["MEMORY_ID", "SUB_RESOURCES", "RawIdPaths", "id_path", "path_id"]

SUB_RESOURCES = ("worth", "resolve", "pin", "unpin")
"""The literal last segments that name a memory's sub-resource, never part of its id."""

MEMORY_ID = "memory_id"
"""The path convertor of a memory id: ``{memory_id:memory_id}`` in a route's path."""


class _MemoryIdConvertor(Convertor[str]):
    """Any text (slashes included) that does not end in ``/`` + a sub-resource's name."""

    regex = r"(?:(?!/(?:" + "|".join(SUB_RESOURCES) + r")$).)*"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor(MEMORY_ID, _MemoryIdConvertor())


def id_path(memory_id: str) -> str:
    """``memory_id`` as one path segment: percent-encoded, dot segments too."""
    if memory_id in (".", ".."):
        return "%2E" * len(memory_id)
    return quote(memory_id, safe="")


def path_id(segment: str, field: str = "memory_id") -> str:
    """The memory id a percent-encoded path segment names (:class:`ValidationError` if not UTF-8)."""
    try:
        return unquote(segment, errors="strict")
    except UnicodeDecodeError:
        raise ValidationError(field, f"must be UTF-8 once percent-decoded, got {segment!r}") from None


class RawIdPaths:
    """ASGI middleware: under ``prefixes``, route on the path as sent (still percent-encoded).

    Routes under those prefixes receive encoded path parameters and decode them with
    :func:`path_id`. Without ``raw_path`` (an ASGI server that does not give it) the decoded
    path is encoded again: ids stay readable, but ``%2F`` and ``/`` are then the same.
    """

    def __init__(self, app: Any, prefixes: tuple[str, ...]) -> None:
        self.app = app
        self.prefixes = prefixes

    async def __call__(
        self, scope: dict[str, Any], receive: Callable[[], Awaitable[dict[str, Any]]], send: Any
    ) -> None:
        if scope["type"] == "http":
            prefixes = tuple(scope.get("root_path", "") + p for p in self.prefixes)
            if scope["path"].startswith(prefixes):
                raw = scope.get("raw_path")
                # quote() keeps the client's escapes ("%" safe) and escapes any raw byte that is not ASCII
                sent = quote(raw, safe="/%") if isinstance(raw, bytes) else ""
                if not sent.startswith(prefixes):  # no raw path, or the prefix itself was encoded
                    sent = quote(scope["path"], safe="/")
                scope = {**scope, "path": sent}
        await self.app(scope, receive, send)
