"""Lists a page at a time: memories, audit entries and outcomes, with an opaque cursor.

Each page is one indexed read (keyset pagination on the insertion or sequence number, so
a page costs the same whatever comes before it, and memories added or erased between two
pages neither repeat nor shift an item). ``next_cursor`` is None on the last page. A
cursor is opaque text: it names the list it belongs to and the last item shown, and a
cursor of another list, or text that is no cursor, is refused (ValidationError).
Every face (CLI ``list --limit --cursor``, HTTP ``?limit=&cursor=``) calls these methods.
"""

from __future__ import annotations

import base64
import binascii
import builtins
import json
from dataclasses import dataclass
from typing import Generic, TypeVar

from memworth.errors import ValidationError
from memworth.store.records import STATUSES, AuditEntry, Memory, OutcomeRow
from memworth.store.state import StoreState
from memworth.validation import check_context, check_limit, check_memory_id, check_name

__all__ = ["Page", "PagingMixin", "decode_cursor", "encode_cursor"]

T = TypeVar("T")


@dataclass(frozen=True)
class Page(Generic[T]):
    """One page of a list: its items, and the cursor of the next page (None: this is the last)."""

    items: builtins.list[T]
    next_cursor: str | None


def encode_cursor(kind: str, after: int) -> str:
    """The opaque cursor of the page after the item numbered ``after`` in the list ``kind``.

    Examples
    --------
    >>> decode_cursor("audit", encode_cursor("audit", 42))
    42
    """
    raw = json.dumps({"list": kind, "after": after}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(kind: str, cursor: object) -> int:
    """The item number a cursor of the list ``kind`` continues after; ValidationError otherwise."""
    if not isinstance(cursor, str) or not 0 < len(cursor) <= 200:
        raise ValidationError("cursor", f"must be the next_cursor of a previous page, got {cursor!r}")
    try:
        data = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (binascii.Error, ValueError):
        data = None
    if not isinstance(data, dict) or not isinstance(data.get("after"), int) or isinstance(data["after"], bool):
        raise ValidationError("cursor", f"is not a cursor memworth handed out: {cursor!r}")
    if data.get("list") != kind or data["after"] < 0:
        raise ValidationError("cursor", f"belongs to another list ({data.get('list')!r}), not to {kind!r}")
    return int(data["after"])


def _after(kind: str, cursor: str | None) -> int:
    return 0 if cursor is None else decode_cursor(kind, cursor)


class PagingMixin(StoreState):
    """The paged reads of :class:`memworth.store.MemoryStore`: memories, audit entries, outcomes."""

    def list_page(
        self,
        *,
        limit: int = 100,
        cursor: str | None = None,
        namespace: str = "default",
        status: str | None = None,
        context: str | None = None,
    ) -> Page[Memory]:
        """One page of :meth:`list`: up to ``limit`` memories in insertion order, after ``cursor``.

        Examples
        --------
        >>> from memworth import MemoryStore, HashingEncoder
        >>> store = MemoryStore.open("memory://", encoder=HashingEncoder())
        >>> _ = store.add_many([{"text": f"fact {i}", "id": f"m{i}"} for i in range(5)])
        >>> first = store.list_page(limit=2)
        >>> [m.id for m in first.items], [m.id for m in store.list_page(limit=2, cursor=first.next_cursor).items]
        (['m0', 'm1'], ['m2', 'm3'])
        """
        check_name(namespace, "namespace")
        size = check_limit(limit)
        if status is not None and (not isinstance(status, str) or status not in STATUSES):
            raise ValidationError("status", f"must be one of {', '.join(STATUSES)}, got {status!r}")
        check_context(context)
        found = self.backend.memory_page(
            namespace, after=_after("memories", cursor), limit=size + 1, status=status, context=context
        )
        more = len(found) > size
        found = found[:size]
        return Page([m for _, m in found], encode_cursor("memories", found[-1][0]) if more else None)

    def audit_page(
        self,
        memory_id: str | None = None,
        *,
        limit: int = 100,
        cursor: str | None = None,
        namespace: str = "default",
    ) -> Page[AuditEntry]:
        """One page of :meth:`audit` (a namespace's, or one memory's), oldest first."""
        check_name(namespace, "namespace")
        size = check_limit(limit)
        if memory_id is not None:
            check_memory_id(memory_id, "memory_id")
        found = self.backend.audit_log(namespace, memory_id, after=_after("audit", cursor), limit=size + 1)
        more = len(found) > size
        found = found[:size]
        return Page(found, encode_cursor("audit", found[-1].seq) if more else None)

    def outcome_page(
        self, *, limit: int = 100, cursor: str | None = None, namespace: str = "default"
    ) -> Page[OutcomeRow]:
        """One page of the namespace's outcome log, in commit order."""
        check_name(namespace, "namespace")
        size = check_limit(limit)
        found = list(self.backend.outcome_log(namespace, after=_after("outcomes", cursor), limit=size + 1))
        more = len(found) > size
        found = found[:size]
        return Page(found, encode_cursor("outcomes", found[-1].seq) if more else None)
