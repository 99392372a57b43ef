"""What each dashboard page shows, read from the store: rows, filters, proposals, history (no HTML, no HTTP).

Each ``*_page`` function reads one namespace of a store and returns the numbers its page
prints; :mod:`memworth.server.dashboard.render` writes them as HTML. A route runs one of
them on a store object of the app's pool, under its lock.
"""

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from memworth.counts import Counts, CountsTable
from memworth.errors import UnknownMemoryError, ValidationError
from memworth.governance import Proposal
from memworth.governance.holdout_guard import GuardReading
from memworth.policy import Classification, ValueClass
from memworth.server.dashboard.history import Point, trajectory
from memworth.settings import by_setting
from memworth.store import Memory, MemoryStore
from memworth.store.decisions import Pin, flags
from memworth.store.records import STATUSES, AuditEntry
from memworth.store.report import MemoryReport, worth_of

__all__ = [
    "CLASS_RANK",
    "COLUMNS",
    "LATEST_OUTCOMES",
    "PAGE_SIZE",
    "RECENT_CHANGES",
    "GovernancePage",
    "MemoriesPage",
    "MemoryPage",
    "Row",
    "SettingsPage",
    "governance_page",
    "memories_page",
    "memory_page",
    "notice_entry",
    "query_problem",
    "rows",
    "settings_page",
    "sort_key",
    "undoable",
]

PAGE_SIZE = 100  # memories per page of the table
RECENT_CHANGES = 50  # audit entries on the governance page
LATEST_OUTCOMES = 10  # outcomes per page under a memory's plot
COLUMNS = {  # sort key -> header
    "id": "id",
    "text": "text",
    "worth": "worth",
    "interval": "interval (95%)",
    "retrievals": "retrievals",
    "evidence": "hits+ / hits-",
    "class": "class",
    "status": "status",
    "standing": "standing",
    "contexts": "contexts",
}
CLASS_RANK = {
    c.value: rank for rank, c in enumerate((ValueClass.HIGH, ValueClass.MIXED, ValueClass.UNCERTAIN, ValueClass.LOW))
}


@dataclass(frozen=True)
class Row:
    """One memory of the table, with its worth, Wilson interval and value class."""

    memory: Memory
    worth: float
    lower: float
    upper: float
    value_class: str


def rows(store: MemoryStore, memories: list[Memory]) -> list[Row]:
    """The table rows of ``memories``, classified by the store's taxonomy."""
    if not memories:
        return []
    table = CountsTable(
        np.array([m.counts.success for m in memories]),
        np.array([m.counts.failure for m in memories]),
        np.array([m.counts.n for m in memories]),
    )
    w = worth_of(store.policy, table)
    return [
        Row(m, float(w.worth[i]), float(w.lower[i]), float(w.upper[i]), w.value_class[i])
        for i, m in enumerate(memories)
    ]


def sort_key(column: str) -> Callable[[Row], Any]:
    """The key that sorts rows by ``column`` (one of :data:`COLUMNS`); classes sort high to low."""
    keys: dict[str, Callable[[Row], Any]] = {
        "id": lambda r: r.memory.id,
        "text": lambda r: r.memory.text.casefold(),
        "worth": lambda r: r.worth,
        "interval": lambda r: (r.lower, r.upper),
        "retrievals": lambda r: r.memory.counts.n,
        "evidence": lambda r: r.memory.counts.evidence,
        "class": lambda r: CLASS_RANK[r.value_class],
        "status": lambda r: STATUSES.index(r.memory.status) if r.memory.status in STATUSES else len(STATUSES),
        "standing": lambda r: r.memory.standing,
        "contexts": lambda r: ",".join(r.memory.contexts),
    }
    return keys[column]


def query_problem(status: str | None, value_class: str | None, sort: str, order: str, page: str) -> str | None:
    """Why the memories table cannot be shown with these settings, or None when it can.

    Examples
    --------
    >>> query_problem(None, "low", "worth", "desc", "2") is None
    True
    >>> query_problem(None, None, "worth", "desc", "0")
    "page must be a positive integer, got '0'"
    """
    if status is not None and status not in STATUSES:
        return f"status must be one of {', '.join(STATUSES)}, got {status!r}"
    if value_class is not None and value_class not in CLASS_RANK:
        return f"class must be one of {', '.join(CLASS_RANK)}, got {value_class!r}"
    if sort not in COLUMNS or order not in ("asc", "desc"):
        return f"sort must be one of {', '.join(COLUMNS)}, order asc or desc"
    if not page.isdigit() or int(page) < 1:
        return f"page must be a positive integer, got {page!r}"
    return None


def undoable(entries: Iterable[AuditEntry], memories: Mapping[str, Memory]) -> frozenset[int]:
    """The audit entries (given newest first) that are still the last word on their field.

    Undoing one of those restores the field; an older entry, or one whose memory has moved
    on since, has nothing left to undo, and neither has a note that changed no field (a pin).
    """
    latest: set[int] = set()
    seen: set[tuple[str, str]] = set()
    for e in entries:
        if e.field not in ("status", "standing"):  # a pin or a verifier's note: nothing a restore undoes
            continue
        if (e.memory_id, e.field) not in seen:
            seen.add((e.memory_id, e.field))
            m = memories.get(e.memory_id)
            if m is not None and getattr(m, e.field) == e.new:
                latest.add(e.seq)
    return frozenset(latest)


def notice_entry(store: MemoryStore, namespace: str, seq: str) -> AuditEntry | None:
    """The audit entry ``seq`` (digits, from a redirect after a change) of ``namespace``, if there is one."""
    if not seq.isdigit():
        return None
    return next((e for e in store.audit(namespace=namespace) if e.seq == int(seq)), None)


# -- the memories table -------------------------------------------------------------------


@dataclass(frozen=True)
class MemoriesPage:
    """One page of the memories table: its rows, and where it sits among the matches."""

    rows: list[Row]
    total: int  # memories that match the filters
    page: int
    first: int  # position of the first row among the matches
    filters: dict[str, str | None]  # status, context, class (None: all)
    contexts: list[str]  # every context label of the namespace
    sort: str
    order: str


def memories_page(
    store: MemoryStore,
    namespace: str,
    *,
    status: str | None = None,
    context: str | None = None,
    value_class: str | None = None,
    sort: str = "worth",
    order: str = "desc",
    page: int = 1,
) -> MemoriesPage:
    """The memories of ``namespace`` that match the filters, sorted, page ``page`` of them.

    Ties keep id order. The settings are those :func:`query_problem` accepts.
    """
    everything = store.list(namespace=namespace)
    shown = [
        r
        for r in rows(store, everything)
        if (status is None or r.memory.status == status)
        and (context is None or context in r.memory.contexts)
        and (value_class is None or r.value_class == value_class)
    ]
    shown.sort(key=lambda r: r.memory.id)
    shown.sort(key=sort_key(sort), reverse=order == "desc")
    first = (page - 1) * PAGE_SIZE
    return MemoriesPage(
        rows=shown[first : first + PAGE_SIZE],
        total=len(shown),
        page=page,
        first=first,
        filters={"status": status, "context": context, "class": value_class},
        contexts=sorted({c for m in everything for c in m.contexts}),
        sort=sort,
        order=order,
    )


# -- governance ---------------------------------------------------------------------------


@dataclass(frozen=True)
class GovernancePage:
    """What governance proposes now, and the latest audited changes (newest first)."""

    proposals: list[Proposal]
    memories: dict[str, Memory]
    changes: list[AuditEntry]
    undoable: frozenset[int]
    queue: list[MemoryReport] = field(default_factory=list)
    """Memories quarantined for re-verification, awaiting a verdict."""
    flags: dict[str, AuditEntry] = field(default_factory=dict)
    """The entry that flagged each of them (why it is in the queue)."""
    guard: GuardReading | None = None
    """The holdout guard (None: no holdout share)."""


def governance_page(store: MemoryStore, namespace: str) -> GovernancePage:
    """Governance of ``namespace``: its proposals (nothing applied), the verification queue with
    why each memory is in it, and its :data:`RECENT_CHANGES` changes."""
    report = store.govern(apply=False, namespace=namespace)
    by_id = {m.id: m for m in store.list(namespace=namespace)}
    audit = store.audit(namespace=namespace)
    changes = audit[::-1][:RECENT_CHANGES]
    queue = store.queue(namespace=namespace)
    return GovernancePage(report.proposals, by_id, changes, undoable(changes, by_id), queue, flags(audit), report.guard)


# -- one memory ---------------------------------------------------------------------------


@dataclass(frozen=True)
class MemoryPage:
    """One memory: its class, interval and tier, its worth over time, its proposal and audit trail."""

    memory: Memory
    klass: Classification
    lower: float
    upper: float
    hot: bool
    theta_low: float
    theta_high: float
    points: list[Point]
    proposal: Proposal | None
    changes: list[AuditEntry]  # newest first
    undoable: frozenset[int]
    pin: Pin | None = None
    """A person's decision that holds governance back (None: not pinned)."""
    held: Proposal | None = None
    """The proposal that pin holds back."""

    @property
    def rebuilt(self) -> Counts:
        """The counts the outcome log rebuilds (the last point's)."""
        return self.points[-1].counts if self.points else Counts()

    @property
    def consistent(self) -> bool:
        """Whether the outcome log rebuilds the live counts."""
        r, c = self.rebuilt, self.memory.counts
        return bool(np.allclose([r.success, r.failure, r.n], [c.success, c.failure, c.n]))


def memory_page(store: MemoryStore, memory_id: str, namespace: str) -> MemoryPage:
    """Everything the page of ``memory_id`` shows (:class:`UnknownMemoryError` for an id that is not there)."""
    try:
        m = store.get(memory_id, namespace=namespace)
    except ValidationError:  # an id that is not even valid is not found either
        raise UnknownMemoryError(memory_id) from None
    points = trajectory(store, m.id, namespace)
    report = store.report(m.id, namespace=namespace)  # the same report and proposal every face shows
    changes = store.audit(m.id, namespace=namespace)[::-1]
    return MemoryPage(
        memory=report.memory,
        klass=store.taxonomy.classify(report.memory.counts),
        lower=report.lower,
        upper=report.upper,
        hot=report.hot,
        theta_low=store.taxonomy.theta_low,
        theta_high=store.taxonomy.theta_high,
        points=points,
        proposal=report.proposal,
        changes=changes,
        pin=report.pin,
        held=report.held,
        undoable=undoable(changes, {m.id: m}),
    )


@dataclass(frozen=True)
class SettingsPage:
    """The store's settings in force, by part, and every version it kept.

    ``parts``: ``(part, [(setting, value), ...])`` in the settings JSON's order, a
    governance part's settings named ``part.setting`` (``change.threshold``), values as
    :meth:`memworth.MemoryStore.config` gives them; ``history``: the kept versions, newest
    first (:meth:`memworth.MemoryStore.settings_history`).
    """

    version: int
    parts: list[tuple[str, list[tuple[str, object]]]]
    history: list[dict[str, Any]]


def settings_page(store: MemoryStore) -> SettingsPage:
    """What the settings page shows: the settings in force (a version another process kept
    included) and the history of versions. The settings are the store's, not a namespace's."""
    config = store.config()
    parts: dict[str, list[tuple[str, object]]] = {}
    for part, name, value in by_setting(config["settings"]):
        parts.setdefault(part, []).append((name, value))
    return SettingsPage(int(config["version"]), list(parts.items()), list(reversed(store.settings_history())))
