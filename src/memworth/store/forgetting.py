"""Forgetting and editing: erase a memory for good, replace its text, let it expire.

* :meth:`ForgettingMixin.delete` erases a memory: its row (text, embedding, metadata,
  counters) is deleted, from the database file too (SQLite ``secure_delete`` and a WAL
  checkpoint), from this process's vector index and from the Redis hot tier. What stays
  is its id: in the tombstone (an audit entry, action ``erase``: who, when, why, and the
  counters it had), in the episodes that retrieved it and in provenance edges, so the
  outcome log still replays exactly. An erased id is never reused (adding it again is a
  DuplicateError); reading it is an :class:`memworth.errors.ErasedMemoryError` (404).
* :meth:`ForgettingMixin.edit` replaces a memory's text the one way :meth:`resolve`
  ("edited") does: the new text becomes a new memory, re-embedded, derived from the old
  one, with fresh counters; the old version is archived with its counters (they measured
  the old text) and its audit entry names the replacement. ``keep_old=False`` erases the
  old version in the same call.
* Expiry: a memory added with ``ttl`` (or into a namespace given one with
  :meth:`ForgettingMixin.set_ttl`) expires ``ttl`` seconds after it was added. From then
  on recall does not return it: every recall first erases the namespace's expired
  memories (one cheap check while none is due); :meth:`ForgettingMixin.purge_expired`
  does the same on demand (the CLI's ``expire``). Until erased, an expired memory is
  listed with ``expired`` true.
"""

from __future__ import annotations

import builtins
from typing import Any

from memworth.errors import ConflictError, StoreError
from memworth.estimators import RawWorth
from memworth.store.backend import ERASE
from memworth.store.records import AuditEntry, Memory
from memworth.store.state import StoreState
from memworth.store.steps import Blocking, Call, Steps, run
from memworth.validation import check_actor, check_flag, check_name, check_reason, check_ttl

__all__ = ["EXPIRY_ACTOR", "ForgettingMixin"]

EXPIRY_ACTOR = "memworth-expiry"
"""The actor named in the tombstone of a memory erased because its time to live ran out."""

_TTL_KEY = "ttl:"


class ForgettingMixin(StoreState):
    """The forgetting part of :class:`memworth.store.MemoryStore`: delete, edit, expiry."""

    def delete(
        self, memory_id: str, *, reason: str, actor: str | None = None, namespace: str = "default"
    ) -> AuditEntry:
        """Erase a memory for good; returns its tombstone (the audit entry, action ``erase``).

        Text, embedding, metadata and counters are deleted; the id stays in the tombstone,
        in the log's episodes and in provenance edges, so :meth:`replay` stays exact and the
        audit trail says who (``actor``) erased it, when and why. Outcomes recorded later
        for episodes that retrieved it credit the other memories of the episode only.

        Examples
        --------
        >>> from memworth import MemoryStore, HashingEncoder
        >>> store = MemoryStore.open("memory://", encoder=HashingEncoder())
        >>> _ = store.add("Alice's phone number is 555-0100.", id="phone")
        >>> tomb = store.delete("phone", reason="user asked to be forgotten", actor="alice")
        >>> tomb.action, tomb.settings["actor"]
        ('erase', 'alice')
        >>> store.get("phone")
        Traceback (most recent call last):
        ...
        memworth.errors.ErasedMemoryError: memory 'phone' was erased (audit entry 1): its text, embedding and metadata are gone
        """
        reason = check_reason(reason)
        who = check_actor(actor)
        memory = self.get(memory_id, namespace=namespace)
        return self._erase([memory], reason=reason, actor=who, namespace=namespace)[0]

    def _erase(
        self, memories: builtins.list[Memory], *, reason: str, actor: str | None, namespace: str
    ) -> builtins.list[AuditEntry]:
        """Erase ``memories`` (read just before) in one backend call, then forget them here and in Redis."""
        now = self.clock()
        entries = []
        for m in memories:
            settings: dict[str, Any] = {
                "actor": actor,
                "numbers": {"worth": round(float(RawWorth().value(m.counts)), 6), "retrievals": m.counts.n},
                "counts": {"success": m.counts.success, "failure": m.counts.failure, "n": m.counts.n},
            }
            entries.append(AuditEntry(0, m.id, namespace, ERASE, "erased", m.status, "erased", reason, settings, now))
        saved = self.backend.erase(entries)
        self._spaces.pop(namespace, None)  # the vector index held their vectors: rebuilt at the next recall
        self._next_expiry.pop(namespace, None)
        self._forget_followed(namespace)
        if self.hot is not None:
            try:
                for m in memories:
                    self.hot.remove(namespace, m.id)
            except StoreError:  # Redis down: hot recall rebuilds the mirror before using it again
                self._hot_stale.add(namespace)
        return saved

    def edit(
        self,
        memory_id: str,
        text: str,
        *,
        reason: str,
        actor: str | None = None,
        new_id: str | None = None,
        keep_old: bool = True,
        namespace: str = "default",
    ) -> AuditEntry:
        """Replace a memory's text: returns the audit entry that archives the old version.

        The one edit rule (shared with :meth:`resolve`'s ``edited``): ``text`` becomes a new
        memory, re-embedded, ``new_id`` (default ``<id>~<8 hex>``), derived from the old one,
        with its metadata, contexts and expiry, and fresh counters; the old version is
        archived and keeps its counters (they measured the old text); the entry's
        ``settings["replaced_by"]`` names the new id. With ``keep_old=False`` the old version
        is then erased (:meth:`delete`). A memory archived already (replaced before) is
        refused (ConflictError): edit its replacement.

        Examples
        --------
        >>> from memworth import MemoryStore, HashingEncoder
        >>> store = MemoryStore.open("memory://", encoder=HashingEncoder())
        >>> _ = store.add("The office is on floor 3.", id="office")
        >>> entry = store.edit("office", "The office is on floor 5.", reason="moved", new_id="office-2")
        >>> store.get("office").status, store.get("office-2").text, store.get("office-2").derived_from
        ('archived', 'The office is on floor 5.', ('office',))
        """
        reason = check_reason(reason)
        who = check_actor(actor)
        check_flag(keep_old, "keep_old")
        memory = self.get(memory_id, namespace=namespace)
        if memory.status == "archived":
            raise ConflictError(f"memory {memory.id!r} is archived (replaced or retired already); edit its replacement")
        entry = self._replace(
            memory, text, new_id, reason=reason, action="edit", namespace=namespace, settings={"actor": who}
        )
        if not keep_old:
            self._erase([self.get(memory.id, namespace=namespace)], reason=f"edited: {reason}", actor=who,
                        namespace=namespace)  # fmt: skip
        return entry

    # -- expiry -----------------------------------------------------------------------

    def set_ttl(self, ttl: float | None, *, namespace: str = "default") -> None:
        """Give every memory added to ``namespace`` from now on ``ttl`` seconds to live (None: forever).

        A memory's own ``ttl`` (``add(..., ttl=...)``) wins over the namespace's; memories
        added before keep the expiry they were given.
        """
        check_name(namespace, "namespace")
        seconds = check_ttl(ttl)
        self.backend.set_meta(_TTL_KEY + namespace, "" if seconds is None else repr(seconds))

    def ttl(self, *, namespace: str = "default") -> float | None:
        """The namespace's time to live for new memories, in seconds (None: they never expire)."""
        return run(self._ttl_steps(namespace), self.backend)

    def _ttl_steps(self, namespace: str) -> Steps[float | None]:
        """:meth:`ttl` as steps (:mod:`memworth.store.steps`)."""
        check_name(namespace, "namespace")
        stored = yield Call("get_meta", (_TTL_KEY + namespace,))
        return float(stored) if stored else None

    def expired(self, *, namespace: str = "default") -> builtins.list[Memory]:
        """The namespace's memories whose time to live has run out and that wait to be erased."""
        check_name(namespace, "namespace")
        ids = self.backend.expired(namespace, self.clock())
        return self.backend.memories(namespace, ids) if ids else []

    def purge_expired(self, *, namespace: str = "default") -> builtins.list[AuditEntry]:
        """Erase every expired memory of ``namespace`` (one transaction); returns their tombstones.

        Recall does this by itself before it searches; call it to erase on a schedule.
        """
        check_name(namespace, "namespace")
        due = self.expired(namespace=namespace)
        if not due:
            return []
        return self._erase(due, reason="time to live ran out", actor=EXPIRY_ACTOR, namespace=namespace)

    def _expire_due(self, namespace: str) -> None:
        """Erase the namespace's expired memories if one is due: the check recall makes first.

        The earliest expiry is read again only after the store changed (its generation), so
        while none is due this costs one small read."""
        run(self._expire_due_steps(namespace), self.backend)

    def _expire_due_steps(self, namespace: str) -> Steps[None]:
        """:meth:`_expire_due` as steps: the purge, when one is due, is a blocking step."""
        generation = yield Call("generation", (namespace,))
        known = self._next_expiry.get(namespace)
        if known is None or known[0] != generation:
            known = self._next_expiry[namespace] = (generation, (yield Call("next_expiry", (namespace,))))
        if known[1] is not None and known[1] <= self.clock():
            yield Blocking(self.purge_expired, (), {"namespace": namespace})
