"""The storage protocol: what a backend must do. The store does everything else.

A backend persists memories, the append-only episode and outcome log, the audit log
and each namespace's checkpoint (opaque bytes the store writes and reads), and applies counter increments atomically with the outcomes that caused them. It
validates nothing about meaning (the store does); it guarantees atomicity, uniqueness
of outcome per episode, and order. The conformance suite in ``tests/store`` runs the
same tests against every backend.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from typing import Any, Protocol, runtime_checkable
from urllib.parse import urlsplit, urlunsplit

import numpy as np

from memworth.counts import Counts
from memworth.errors import ChangedError, DuplicateError, ValidationError
from memworth.store.records import AuditEntry, Episode, EpisodeItem, Memory, OutcomeRow, Verification

__all__ = [
    "DRAWS_FROM_KEY",
    "ERASE",
    "NOTE_FIELDS",
    "REQUIRES",
    "Backend",
    "DrawOutcome",
    "Increment",
    "NewMemory",
    "changed",
    "check_given",
    "credited_as",
    "episodes_from_rows",
    "erased_key",
    "joined",
    "logged_as_given",
    "outcome_from_row",
    "redact",
    "required",
    "reused",
    "reweigh",
    "reweighted_rows",
    "shareable",
]

SCHEMA_VERSION = 9
DRAWS_FROM_KEY = "probe_draws_from_audit"
"""The meta key holding the last audit seq of a store when it began logging probe draws
(schema 9; 0 for a store made since): a re-verify flag at or below it has no draws logged."""
DrawOutcome = tuple[bool, float, bool, float]
"""One outcome of a probe draw (:meth:`Backend.draw_outcomes`): whether the draw made it a
probe (else a control), the chance it had to, the outcome (success) and its confidence."""
NOTE_FIELDS = ("pin", "verification")
"""Audit entries that record a decision without changing a column (pins, verifier failures)."""
ERASE = "erase"
"""The audit action of a tombstone: the memory was erased (:meth:`Backend.erase`)."""
REQUIRES = "requires"
"""The key of an audit entry's ``settings`` naming what else its memory must hold for the
change to be made, ``{"status": ..., "standing": ..., "no_pin_after": seq}`` (any may be left
out): checked by :meth:`Backend.change` in the same statement as ``old`` (a verdict on a
quarantined memory needs it still active and under re-verify: two people resolving it at once
must not both win). ``no_pin_after``: the memory has no pin or unpin audit entry with a seq
above it (a pin is an audit entry, not a column: govern's change must not land on a memory a
person pinned after govern read the audit log)."""


@dataclass(frozen=True)
class NewMemory:
    """A memory to insert, with its embedding (float32 vector).

    An empty embedding (size 0) marks an external memory, one that lives in another
    store and is governed here by id only (:class:`memworth.Sidecar`): it has counts,
    status, episodes and audit entries like any memory, but no vector, so ``vectors``
    and ``search`` never return it.
    """

    memory: Memory
    embedding: np.ndarray


@dataclass(frozen=True)
class Increment:
    """Add to one memory's counters (applied in the order given, per memory)."""

    namespace: str
    memory_id: str
    success: float
    failure: float
    n: float


@runtime_checkable
class Backend(Protocol):
    """Persistence for a :class:`memworth.MemoryStore`."""

    url: str

    def get_meta(self, key: str) -> str | None:
        """A stored setting (schema version, encoder name)."""
        ...

    def set_meta(self, key: str, value: str) -> None:
        """Store a setting."""
        ...

    def set_meta_if(self, key: str, expected: str | None, value: str, also: Mapping[str, str] | None = None) -> bool:
        """Compare and set, in one transaction: if ``key`` holds ``expected`` now (``None``:
        it is absent), set it to ``value`` and each key of ``also`` to its value, and return
        True; else write nothing and return False. Two writers that read the same value
        cannot both succeed, on one store object or across processes."""
        ...

    def meta_items(self, prefix: str) -> list[tuple[str, str]]:
        """Every stored setting whose key starts with ``prefix`` (as typed, no wildcards), by key."""
        ...

    def insert_memories(self, rows: Sequence[NewMemory], then: AuditEntry | None = None) -> AuditEntry | None:
        """Insert all or nothing; an existing (namespace, id) raises DuplicateError, and so does
        an erased one (an id is never reused: the log still names the erased memory).

        ``then``: a change (as :meth:`change` makes it) in the same transaction, returned with
        its seq; if it cannot be made, nothing is inserted either (an edit is all or nothing)."""
        ...

    def memories(self, namespace: str, ids: Sequence[str] | None = None) -> list[Memory]:
        """Memories of ``namespace`` (all, or the given ids that exist), in insertion order."""
        ...

    def memory_page(
        self, namespace: str, *, after: int, limit: int, status: str | None = None, context: str | None = None
    ) -> list[tuple[int, Memory]]:
        """Up to ``limit`` memories of ``namespace`` inserted after number ``after`` (one
        ``status``, one ``context`` label, when given), with their insertion numbers, in
        insertion order: one indexed read, whatever the namespace holds before them."""
        ...

    def candidates(self, namespace: str, ids: Sequence[str]) -> list[tuple[Any, ...]]:
        """``(id, status, created, success, failure, n, standing, updated)`` of the given ids that exist,
        in no set order.

        The narrow read recall ranks on; it then reads only the memories it returns.
        """
        ...

    def edges(self, namespace: str) -> list[tuple[str, str, str]]:
        """Provenance edges ``(memory, source, kind)`` of a namespace; kind is derived_from or part_of."""
        ...

    def namespaces(self) -> list[str]:
        """Every namespace that holds a memory, sorted."""
        ...

    def vectors(self, namespace: str, after: int = 0) -> tuple[list[str], list[int], np.ndarray]:
        """Ids, insertion numbers and embeddings of the namespace's memories inserted after
        number ``after`` (every status, external memories excepted), in insertion order."""
        ...

    def quarantined(self) -> int:
        """How many active memories, over every namespace, stand at ``re-verify`` (the
        verification queue's length, for metrics): one count, no memory read."""
        ...

    def inactive(self, namespace: str) -> list[str]:
        """Ids of the namespace's memories whose status is not ``active`` (external memories excepted)."""
        ...

    def generation(self, namespace: str | None = None) -> int:
        """A number that changes whenever the namespace's memories are added, erased or change
        status (it may change for other namespaces' changes too: SQLite and the memory backend
        keep one counter for the whole store, PostgreSQL one per namespace); without a
        namespace, one that changes whenever any namespace's do."""
        ...

    def insert_episode(self, episode: Episode) -> None:
        """Log a recall (an episode without outcome yet), with its ``holdout`` mark; an id
        logged already raises DuplicateError."""
        ...

    def episodes(self, ids: Sequence[str], namespace: str | None = None) -> dict[str, Episode]:
        """Logged episodes by id (missing ids are absent), in ``namespace`` when given (the
        read then names its shard). PostgreSQL keeps an episode id unique within its
        namespace: without a namespace, an id logged in two raises ValidationError."""
        ...

    def episodes_at(
        self, ids: Sequence[str], namespace: str | None = None
    ) -> tuple[dict[str, Episode], int | None]:
        """:meth:`episodes` and, with a ``namespace``, its :meth:`generation`, read together: what
        recording reads first (its episodes, and whether its cached provenance is current), one
        round trip on PostgreSQL. Without a namespace the generation is ``None`` (read it per
        namespace)."""
        ...

    def append_outcomes(
        self,
        outcomes: Sequence[OutcomeRow],
        increments: Sequence[Increment],
        reweighted: Sequence[Episode] = (),
        *,
        given: Sequence[Episode] = (),
        generations: Mapping[str, int] | None = None,
    ) -> None:
        """In one transaction: append the outcomes and apply the increments.

        An episode that already has an outcome raises DuplicateError and nothing is
        written. Increments are applied in the order given. ``reweighted``: episodes of
        these outcomes whose items' credit weights the outcome set (``record(..., used=...)``):
        the logged weights become theirs, in the same transaction (:func:`reweighted_rows`).

        ``given``: the outcomes' episodes as the caller holds them (one per outcome, in order, of
        its namespace), its increments made from them without reading them back (a plain batch:
        no ``reweighted``; :func:`check_given`). The write is made
        only if each is logged in its namespace with exactly these items (:func:`logged_as_given`);
        else UnknownEpisodeError names one that is not, and nothing is written. ``generations``:
        ``{namespace: generation}`` the increments were made under (the provenance credit
        propagated along, cached at that generation): the write is made only if each namespace's
        :meth:`generation` is still that; else ChangedError, and nothing is written.
        """
        ...

    def outcome_log(
        self, namespace: str | None = None, *, after: int = 0, limit: int | None = None
    ) -> Iterator[OutcomeRow]:
        """Every outcome (of one namespace, or of all) with a sequence number above ``after``
        (at most ``limit`` of them), in the order it was committed."""
        ...

    def history(self, namespace: str, after: int = 0) -> list[tuple[OutcomeRow, Episode]]:
        """The namespace's outcomes with a log sequence number above ``after``, each with
        its episode, in commit order: one indexed read, whatever other namespaces hold."""
        ...

    def outcome_count(self, namespace: str) -> int:
        """How many outcomes the namespace holds: as many as :meth:`history` returns from 0
        (a reader that follows the log by sequence number checks with it that no outcome
        committed after a later one was read)."""
        ...

    def draw_outcomes(
        self, namespace: str, memory_id: str, after: int, exclude: Sequence[str] = ()
    ) -> list[DrawOutcome]:
        """The outcomes (log sequence number above ``after``) of the namespace's episodes that
        drew ``memory_id`` for a probe (:class:`memworth.store.records.ProbeDraw`), in commit
        order, leaving out episodes that retrieved any of ``exclude``: per outcome whether the
        draw made it a probe (else a control), the draw's chance to, the outcome and its
        confidence."""
        ...

    def outcomes_since(self, since: float, source: str | None = None, namespace: str | None = None) -> list[OutcomeRow]:
        """Outcomes recorded at or after ``since`` (of one ``source``, or all; of one
        ``namespace``, or all), in commit order."""
        ...

    def outcomes_of(self, episode_ids: Sequence[str], namespace: str | None = None) -> dict[str, OutcomeRow]:
        """The outcomes of the given episodes, by episode id (episodes without one are absent),
        in ``namespace`` when given (as :meth:`episodes`)."""
        ...

    def append_verifications(
        self,
        verifications: Sequence[Verification],
        outcomes: Sequence[OutcomeRow],
        increments: Sequence[Increment],
        reweighted: Sequence[Episode] = (),
    ) -> None:
        """In one transaction: append the verifications, and the outcomes, increments and
        ``reweighted`` episodes as :meth:`append_outcomes` does. An episode verified already, or an outcome for an
        episode that has one, raises DuplicateError and nothing is written."""
        ...

    def verifications(self, after: int = 0) -> list[Verification]:
        """Verifications with a sequence number above ``after``, in commit order."""
        ...

    def write_counts(self, namespace: str, counts: dict[str, Counts]) -> None:
        """Overwrite counters (used by replay); all or nothing."""
        ...

    def change(self, entry: AuditEntry) -> AuditEntry:
        """Set ``entry.field`` (status or standing) from ``entry.old`` to ``entry.new`` and append the
        audit entry, atomically; ChangedError if the field no longer holds ``old``, or the memory
        no longer holds what ``entry.settings[REQUIRES]`` names (:func:`required`). Returns it with its seq.

        A field of :data:`NOTE_FIELDS` (a pin, a verifier's failure) changes no column: the
        entry is appended if the memory exists (else UnknownMemoryError)."""
        ...

    def audit_log(
        self, namespace: str, memory_id: str | None = None, *, after: int = 0, limit: int | None = None
    ) -> list[AuditEntry]:
        """Audit entries with a sequence number above ``after`` (at most ``limit``), oldest first."""
        ...

    def erase(self, entries: Sequence[AuditEntry]) -> list[AuditEntry]:
        """For each entry, delete the memory ``entry.memory_id`` for good (its row: text,
        embedding, metadata, counters) and append ``entry``, its tombstone; all or nothing
        (UnknownMemoryError if one does not exist). Returns the entries with their seqs.

        Kept, so that the log replays exactly: the id in the tombstone, in the episodes that
        retrieved it and in the provenance edges (ids only). Bumps :meth:`generation` and each
        namespace's erasure counter (meta :func:`erased_key`: a vector index built before the
        erasure must be rebuilt).
        """
        ...

    def erased(self, namespace: str, ids: Sequence[str]) -> dict[str, int]:
        """Which of ``ids`` were erased: id to the seq of its tombstone (audit action ``erase``)."""
        ...

    def expired(self, namespace: str, now: float) -> list[str]:
        """Ids of the namespace's memories whose ``expires`` is at or before ``now`` (index order)."""
        ...

    def next_expiry(self, namespace: str) -> float | None:
        """The earliest ``expires`` of the namespace's memories (None: none expires)."""
        ...

    def save_checkpoint(self, namespace: str, data: bytes) -> None:
        """Keep ``data`` as the namespace's checkpoint, replacing any: the followed history and
        change detectors a new store object resumes from (:mod:`memworth.store.checkpoint`;
        opaque bytes here)."""
        ...

    def load_checkpoint(self, namespace: str) -> bytes | None:
        """The namespace's checkpoint as saved (None: there is none)."""
        ...

    def drop_checkpoints(self, namespace: str | None = None) -> None:
        """Forget the checkpoint of ``namespace`` (None: of every namespace)."""
        ...

    def transaction(self) -> AbstractContextManager[None]:
        """A unit of work: every call this thread makes on the backend until the block ends
        is one transaction, committed when the block exits cleanly and rolled back whole on
        an exception (each write's own transaction becomes part of it). Calls inside read
        what the block wrote so far; no other thread or process sees it before the commit.
        StoreError if this thread has one open already: transactions do not nest.

        :meth:`memworth.MemoryStore.transaction` opens it, with the store's own state."""
        ...

    def snapshot(self, *, write: bool = False) -> AbstractContextManager[None]:
        """A block whose reads (every call this thread makes on the backend until it ends) all
        see one state of the database, whatever other store objects and processes commit
        meanwhile: what :meth:`memworth.MemoryStore.replay` reads the outcome log and the
        counters in, so that it compares the two as they stood together.

        ``write``: the block may also write, and its writes land only if no other write changed
        what they change since the snapshot was taken (a write made from an older state would
        lose a newer one): SQLite holds the database's write lock from the start of the block
        (``BEGIN IMMEDIATE``: other writers wait), the memory backend its lock; PostgreSQL reads
        in one ``REPEATABLE READ`` transaction, where a write to a row another transaction
        changed since the snapshot fails with UnavailableError (try again) and nothing of the
        block is written. Its writes commit together when the block exits cleanly, and roll
        back together on an exception. Without ``write`` the block only reads.

        StoreError if this thread has a :meth:`transaction` (or a snapshot) open: they do not nest."""
        ...

    def close(self) -> None:
        """Release connections."""
        ...


def shareable(url: str) -> bool:
    """Whether another process (or store object) can open the database at ``url``: not
    ``memory://`` or SQLite's ``:memory:``, which live in one store object.

    Examples
    --------
    >>> shareable("sqlite:///store.db"), shareable("memory://"), shareable("sqlite:///:memory:?synchronous=normal")
    (True, False, False)
    """
    return not (url == "memory://" or url.split("?", 1)[0].endswith(":memory:"))


def erased_key(namespace: str) -> str:
    """The meta key that counts erasures in ``namespace`` (a vector index built before its last
    change still holds an erased vector and must be rebuilt)."""
    return f"erased:{namespace}"


def required(entry: AuditEntry) -> tuple[str | None, str | None, int | None]:
    """The status and the standing ``entry`` requires of its memory besides its ``old`` value,
    and the audit seq after which it must have no pin or unpin entry (None: any), from
    ``entry.settings[REQUIRES]``; ValidationError for anything else.

    Examples
    --------
    >>> from memworth.store.records import AuditEntry
    >>> e = AuditEntry(0, "m", "default", "resolve", "status", "active", "suppressed", "stale", {}, 0.0)
    >>> required(e), required(replace(e, settings={"requires": {"standing": "re-verify", "no_pin_after": 7}}))
    ((None, None, None), (None, 're-verify', 7))
    """
    want = entry.settings.get(REQUIRES) if isinstance(entry.settings, Mapping) else None
    if want is None:
        return None, None, None
    if not isinstance(want, Mapping) or not set(want) <= {"status", "standing", "no_pin_after"}:
        raise ValidationError(REQUIRES, f"must map status, standing and/or no_pin_after to a value, got {want!r}")
    after = want.get("no_pin_after")
    if after is not None and (isinstance(after, bool) or not isinstance(after, int) or after < 0):
        raise ValidationError(f"{REQUIRES}.no_pin_after", f"must be an audit seq (an integer >= 0), got {after!r}")
    return want.get("status"), want.get("standing"), after


def changed(entry: AuditEntry) -> ChangedError:
    """The error for a change whose memory no longer holds what it was made for (every backend
    says it the same way): ``old`` in its field, or what :func:`required` names."""
    held = {entry.field: entry.old}
    status, standing, after = required(entry)
    for name, value in (("status", status), ("standing", standing)):
        if value is not None:
            held.setdefault(name, value)
    was = ", ".join(f"{name} {value!r}" for name, value in held.items())
    unpinned = "" if after is None else f", unpinned since audit entry {after}"
    return ChangedError(f"memory {entry.memory_id!r} is no longer {was}{unpinned}; nothing changed")


def reused(memory_id: str, namespace: str, seq: int) -> DuplicateError:
    """The error for adding a memory under an erased id (every backend refuses it the same way)."""
    return DuplicateError(
        f"memory {memory_id!r} was erased from namespace {namespace!r} (audit entry {seq}); an erased id is never"
        " reused, since the log still names it: choose another id"
    )


def redact(url: str) -> str:
    """``url`` with its password masked, for messages and diagnostics.

    Examples
    --------
    >>> redact("postgresql://app:s3cret@db.example:5432/memworth?schema=agents")
    'postgresql://app:***@db.example:5432/memworth?schema=agents'
    >>> redact("sqlite:///memworth.db")
    'sqlite:///memworth.db'
    """
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))


MEMORY_COLUMNS = (
    "m.id, m.text, m.metadata, m.contexts, m.status, m.standing, m.created, c.updated, c.success, c.failure, c.n,"
    " m.expires"
)
"""A memory's columns as both SQL backends read them (from :data:`MEMORY_FROM`)."""
MEMORY_FROM = "memories m JOIN counters c ON c.namespace = m.namespace AND c.id = m.id"
"""Where a whole memory is read from (schema 8): its row (``m``) beside its worth counters
(``c``: success, failure, n and the last update), which live in a narrow table of their own
so that recording an outcome rewrites a few dozen bytes per memory, not the row that holds
its text and embedding."""
OUTCOME_COLUMNS = (
    "seq, episode_id, success, source, confidence, recorded, namespace, propagation, max_hops, settings_version"
)
"""The outcome log's columns in the order both SQL backends read them into an ``OutcomeRow``."""


def reweighted_rows(reweighted: Sequence[Episode]) -> list[tuple[float, str, str, int]]:
    """``(weight, namespace, episode_id, position)`` per item of episodes whose weights a ``used``
    set: the parameters of both SQL backends' ``UPDATE episode_items SET weight = ...`` (PostgreSQL's
    episode ids are unique per namespace, schema 7; SQLite's across the file)."""
    return [(it.weight, ep.namespace, ep.id, it.position) for ep in reweighted for it in ep.items]


def credited_as(episode: Episode) -> tuple[str, tuple[tuple[int, str, float], ...]]:
    """What crediting ``episode`` reads of it: its namespace and, per item in order, ``(position,
    memory id, weight)`` (:func:`memworth.store.recording.credit_increments`, the live statistics)."""
    return episode.namespace, tuple((it.position, it.memory_id, it.weight) for it in episode.items)


def logged_as_given(logged: Episode | None, given: Episode) -> bool:
    """Whether an episode credited as the caller holds it (``given``, not read back) is credited as
    its logged copy would be: logged (``logged`` is the read of its id) and the same
    :func:`credited_as`. A plain outcome's write checks it inside its
    transaction (``append_outcomes(..., given=...)``; PostgreSQL's statement asks the same in SQL,
    :data:`memworth.store.postgres._RECORD_GIVEN`): an episode's items change only with its
    outcome (``used``), so what is checked there is what a replay reads."""
    return logged is not None and credited_as(logged) == credited_as(given)


def check_given(
    given: Sequence[Episode],
    outcomes: Sequence[OutcomeRow],
    reweighted: Sequence[Episode],
    generations: Mapping[str, int] | None = None,
) -> None:
    """ValidationError unless ``given`` (``append_outcomes``) comes with a plain batch: one episode
    per outcome, in order, of the outcome's namespace, each with an item and a namespace
    (PostgreSQL checks them by their items; items of no logged episode were given the namespace
    '' by schema 7), and no ``reweighted`` ones (their weights change in the write); and
    ``generations`` only with ``given`` (PostgreSQL checks them in the statement that checks
    ``given``). Every backend asks this, so each answers a malformed write alike."""
    if generations and not given:
        raise ValidationError("generations", "are checked with the episodes given (given=...) only")
    keys = [(ep.namespace, ep.id) for ep in given]
    if given and (reweighted or keys != [(o.namespace, o.episode_id) for o in outcomes]):
        raise ValidationError("given", "must be the episodes of a plain batch's outcomes, one each, in order")
    if any(not ep.items or not ep.namespace for ep in given):
        raise ValidationError("given", "must be episodes of a namespace that retrieved something (read the others)")


def reweigh(logged: Episode, reweighted: Episode) -> Episode:
    """``logged`` with the item weights of ``reweighted`` (by position): what the SQL backends'
    update of ``episode_items`` does, for the in-memory backend."""
    weights = {it.position: it.weight for it in reweighted.items}
    items = tuple(replace(it, weight=weights.get(it.position, it.weight)) for it in logged.items)
    return replace(logged, items=items)


def outcome_from_row(row: Sequence[Any]) -> OutcomeRow:
    """An ``OutcomeRow`` from a row of :data:`OUTCOME_COLUMNS` (both SQL backends read through here)."""
    seq, eid, ok, source, conf, recorded, ns, prop, hops, version = row
    return OutcomeRow(eid, bool(ok), source, conf, recorded, int(seq), ns, prop, hops, version)


def memories_from_rows(
    namespace: str, rows: Sequence[Sequence[Any]], edges: Iterable[Sequence[str]], *, json_text: bool
) -> list[Memory]:
    """Memories from rows of :data:`MEMORY_COLUMNS` and their ``(src, dst, kind)`` edges.

    ``json_text``: metadata and contexts come as JSON text (SQLite), not decoded (PostgreSQL).
    """
    links: dict[str, dict[str, list[str]]] = {}
    for src, dst, kind in edges:
        links.setdefault(src, {}).setdefault(kind, []).append(dst)
    return [
        Memory(
            id=r[0],
            text=r[1],
            namespace=namespace,
            metadata=json.loads(r[2]) if json_text else r[2],
            contexts=tuple(json.loads(r[3]) if json_text else r[3]),
            derived_from=tuple(sorted(links.get(r[0], {}).get("derived_from", []))),
            part_of=tuple(sorted(links.get(r[0], {}).get("part_of", []))),
            status=r[4],
            standing=r[5],
            created=r[6],
            updated=r[7],
            counts=Counts(r[8], r[9], r[10]),
            expires=r[11],
        )
        for r in rows
    ]


def joined(
    namespace: str, heads: Sequence[Sequence[Any]], items: Iterable[Sequence[Any]]
) -> list[tuple[OutcomeRow, Episode]]:
    """Outcomes with their episodes, from the two reads of :meth:`Backend.history`.

    ``heads``: ``(seq, episode_id, success, source, confidence, recorded, query, context,
    created, holdout, propagation, max_hops, settings_version)`` in commit order; ``items``: ``(episode_id, position, memory_id,
    weight, propensity, probe)`` in the same order, by position within an episode.
    """
    by_episode: dict[str, list[EpisodeItem]] = {}
    for eid, pos, mid, w, p, probe in items:
        by_episode.setdefault(eid, []).append(EpisodeItem(mid, w, p, pos, bool(probe)))
    return [
        (
            OutcomeRow(eid, bool(ok), source, conf, recorded, int(seq), namespace, prop, hops, version),
            Episode(eid, namespace, query, context, created, tuple(by_episode.get(eid, ())), bool(holdout)),
        )
        for seq, eid, ok, source, conf, recorded, query, context, created, holdout, prop, hops, version in heads
    ]


def ambiguous_episode(eid: str, namespaces: Iterable[str]) -> ValidationError:
    """The error for an episode id asked for without a namespace that is logged in several
    (PostgreSQL keeps episode ids unique per namespace, schema 7)."""
    return ValidationError(
        "namespace",
        f"episode {eid!r} is logged in namespaces {', '.join(map(repr, sorted(namespaces)))}: name the namespace",
    )


def episodes_from_rows(rows: Sequence[Sequence[Any]]) -> dict[str, Episode]:
    """Episodes from rows of both SQL backends' episode read: ``e.id, namespace, query, context,
    created, holdout`` then the item's ``position, memory_id, weight, propensity, probe`` (NULLs
    for an episode that retrieved nothing), an episode's row once per item in position order.
    ValidationError (``namespace``) if one id comes with two namespaces."""
    heads: dict[str, tuple[Any, ...]] = {}
    items: dict[str, list[EpisodeItem]] = {}
    for eid, ns, query, context, created, holdout, pos, mid, w, p, probe in rows:
        head = heads.setdefault(eid, (ns, query, context, created, holdout))
        if head[0] != ns:
            raise ambiguous_episode(eid, (head[0], ns))
        found = items.setdefault(eid, [])
        if mid is not None:
            found.append(EpisodeItem(mid, w, p, pos, bool(probe)))
    return {
        eid: Episode(eid, ns, query, context, created, tuple(items[eid]), bool(holdout))
        for eid, (ns, query, context, created, holdout) in heads.items()
    }
