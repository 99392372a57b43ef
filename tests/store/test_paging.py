"""Lists a page at a time on every backend: memories, audit entries, outcomes."""

from __future__ import annotations

import pytest

from memworth import MemoryStore
from memworth.errors import ValidationError
from memworth.store.paging import encode_cursor


def _walk(fetch, limit: int) -> tuple[list, int]:  # type: ignore[no-untyped-def]
    items, cursor, pages = [], None, 0
    while True:
        page = fetch(limit=limit, cursor=cursor)
        assert len(page.items) <= limit
        items += page.items
        pages += 1
        cursor = page.next_cursor
        if cursor is None:
            return items, pages


def test_memory_pages_cover_the_list_once_with_filters(store: MemoryStore) -> None:
    store.add_many(
        [{"text": f"fact {i}", "id": f"m{i:02d}", "contexts": ["even" if i % 2 == 0 else "odd"]} for i in range(11)]
    )
    store.set_status("m03", "suppressed", reason="test")
    every = [m.id for m in store.list()]
    for limit in (1, 2, 5, 11, 50):
        items, pages = _walk(store.list_page, limit)
        assert [m.id for m in items] == every and pages == max(1, -(-11 // limit))
    assert [m.id for m in store.list_page(limit=3, context="odd").items] == ["m01", "m03", "m05"]
    odd, _ = _walk(lambda **kw: store.list_page(context="odd", **kw), 2)
    assert [m.id for m in odd] == [m.id for m in store.list(context="odd")]
    assert [m.id for m in store.list_page(status="suppressed").items] == ["m03"]
    assert store.list_page(limit=5, namespace="empty").items == []


def test_a_page_does_not_shift_when_memories_come_and_go(store: MemoryStore) -> None:
    store.add_many([{"text": f"fact {i}", "id": f"m{i}"} for i in range(6)])
    first = store.list_page(limit=3)
    store.delete("m1", reason="gone between two pages")
    store.add("a new one", id="late")
    second = store.list_page(limit=3, cursor=first.next_cursor)
    third = store.list_page(limit=3, cursor=second.next_cursor)
    shown = [m.id for page in (first, second, third) for m in page.items]
    assert shown == ["m0", "m1", "m2", "m3", "m4", "m5", "late"] and third.next_cursor is None


def test_audit_and_outcome_pages(store: MemoryStore) -> None:
    store.exploration = 0.0
    store.add_many([{"text": f"fact {i} about rivers", "id": f"m{i}"} for i in range(4)])
    for i in range(7):
        store.record(store.recall("rivers", k=2), i % 2 == 0)
    for mid in ("m0", "m1", "m2"):
        store.pin(mid, reason="page test")
    audit, pages = _walk(store.audit_page, 2)
    assert audit == store.audit() and pages == 2
    assert store.audit_page("m1").items == store.audit("m1")
    outcomes, pages = _walk(store.outcome_page, 3)
    assert outcomes == list(store.backend.outcome_log("default")) and len(outcomes) == 7 and pages == 3
    assert store.outcome_page(namespace="other").items == []


@pytest.mark.parametrize(
    "kwargs",
    [
        {"limit": 0},
        {"limit": 1001},
        {"limit": "2"},
        {"limit": True},
        {"cursor": "not-a-cursor"},
        {"cursor": ""},
        {"cursor": encode_cursor("audit", 3)},  # another list's cursor
        {"cursor": 7},
        {"status": "gone"},
    ],
)
def test_bad_pages_are_refused_naming_the_field(store: MemoryStore, kwargs: dict) -> None:
    with pytest.raises(ValidationError) as err:
        store.list_page(**kwargs)
    assert err.value.field == next(iter(kwargs))
