"""In-process backend (``memory://``): the protocol in plain Python, for tests and scratch work.

Nothing survives the process. Writes are atomic because each validates everything
before changing anything, under one lock. Inside :meth:`MemoryBackend.transaction` each
change also notes how to undo it (the value a key held, a list's length), so the block's
writes are undone together on an exception: the cost of a write grows with what it
changes, not with what the store holds.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterator, Mapping, MutableMapping, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from memworth.counts import Counts
from memworth.errors import ChangedError, DuplicateError, StoreError, UnknownEpisodeError, UnknownMemoryError
from memworth.store.backend import (
    ERASE,
    NOTE_FIELDS,
    SCHEMA_VERSION,
    DrawOutcome,
    Increment,
    NewMemory,
    changed,
    check_given,
    erased_key,
    logged_as_given,
    required,
    reused,
    reweigh,
)
from memworth.store.records import AuditEntry, Episode, Memory, OutcomeRow, Verification

__all__ = ["MemoryBackend"]


class MemoryBackend:
    """Dictionaries and lists behind a lock."""

    def __init__(self, url: str = "memory://") -> None:
        self.url = url
        self._lock = threading.RLock()
        self._meta: dict[str, str] = {"schema_version": str(SCHEMA_VERSION)}
        self._memories: dict[tuple[str, str], Memory] = {}
        self._vectors: dict[tuple[str, str], np.ndarray] = {}
        self._seq: dict[tuple[str, str], int] = {}
        self._top = 0
        self._episodes: dict[str, Episode] = {}
        self._outcomes: list[OutcomeRow] = []
        self._has_outcome: set[str] = set()
        self._outcome_of: dict[str, OutcomeRow] = {}
        self._verifications: list[Verification] = []
        self._verified: set[str] = set()
        self._audit: list[AuditEntry] = []
        self._kept_edges: list[tuple[str, str, str, str]] = []  # (namespace, src, dst, kind) of erased memories
        self._generation = 0
        self._checkpoints: dict[str, bytes] = {}
        self._undo: list[Callable[[], None]] | None = None  # inside transaction(): how to undo each change

    # -- the transaction and its undo log ---------------------------------------------------

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Every write this thread makes until the block ends, kept at a clean exit and undone
        together on an exception. The lock is held throughout: another thread's call waits for
        the end (it never sees what is not kept). StoreError if one is open already."""
        with self._lock:
            if self._undo is not None:
                raise StoreError(f"{self.url}: a transaction is open already; transactions do not nest")
            self._undo = []
            try:
                yield
            except BaseException:
                for undo in reversed(self._undo):
                    undo()
                # An erased memory put back went to the end: memories are listed in insertion order.
                ordered = sorted(self._memories.items(), key=lambda item: self._seq[item[0]])
                self._memories.clear()
                self._memories.update(ordered)
                raise
            finally:
                self._undo = None

    @contextmanager
    def snapshot(self, *, write: bool = False) -> Iterator[None]:
        """The lock, held for the block (:meth:`memworth.store.backend.Backend.snapshot`): no
        other thread reads or writes until it ends. ``write``: a :meth:`transaction` (its
        writes undone together on an exception)."""
        if write:
            with self.transaction():
                yield
            return
        with self._lock:
            if self._undo is not None:
                raise StoreError(f"{self.url}: a transaction is open already; transactions do not nest")
            yield

    def _put(self, table: MutableMapping[Any, Any], key: Any, value: Any) -> None:
        """``table[key] = value``, undoable."""
        if self._undo is not None:
            self._undo.append(_restorer(table, key))
        table[key] = value

    def _drop(self, table: MutableMapping[Any, Any], key: Any) -> Any:
        """``table.pop(key)``, undoable."""
        if self._undo is not None:
            self._undo.append(_restorer(table, key))
        return table.pop(key)

    def _include(self, members: set[str], item: str) -> None:
        """``members.add(item)``, undoable."""
        if self._undo is not None and item not in members:
            self._undo.append(lambda: members.discard(item))
        members.add(item)

    def _note(self, name: str) -> None:
        """Before an attribute changes (a counter, a list that only grows): how to set it back."""
        if self._undo is not None:
            value = getattr(self, name)
            if isinstance(value, list):
                kept = len(value)
                self._undo.append(lambda: value.__delitem__(slice(kept, None)))
            else:
                self._undo.append(lambda: setattr(self, name, value))

    # -- settings ---------------------------------------------------------------------------

    def get_meta(self, key: str) -> str | None:
        with self._lock:
            return self._meta.get(key)

    def set_meta(self, key: str, value: str) -> None:
        with self._lock:
            self._put(self._meta, key, value)

    def set_meta_if(self, key: str, expected: str | None, value: str, also: Mapping[str, str] | None = None) -> bool:
        with self._lock:
            if self._meta.get(key) != expected:
                return False
            for k, v in (also or {}).items():
                self._put(self._meta, k, v)
            self._put(self._meta, key, value)
            return True

    def meta_items(self, prefix: str) -> list[tuple[str, str]]:
        with self._lock:
            return sorted((k, v) for k, v in self._meta.items() if k.startswith(prefix))

    def generation(self, namespace: str | None = None) -> int:  # one counter for every namespace
        with self._lock:
            return self._generation

    def insert_memories(self, rows: Sequence[NewMemory], then: AuditEntry | None = None) -> AuditEntry | None:
        with self._lock:
            if then is not None:  # checked before anything is written: all or nothing
                self._check_change(then)
            seen: set[tuple[str, str]] = set()
            gone = {(e.namespace, e.memory_id): e.seq for e in self._audit if e.action == ERASE}
            for row in rows:
                key = (row.memory.namespace, row.memory.id)
                if key in gone:
                    raise reused(key[1], key[0], gone[key])
                if key in self._memories or key in seen:
                    raise DuplicateError(f"memory {key[1]!r} already exists in namespace {key[0]!r}")
                seen.add(key)
            self._note("_top")
            self._note("_generation")
            for row in rows:
                key = (row.memory.namespace, row.memory.id)
                self._put(self._memories, key, row.memory)
                self._put(self._vectors, key, np.array(row.embedding, dtype=np.float32))
                self._top += 1  # never reused, even after an erasure
                self._put(self._seq, key, self._top)
            self._generation += 1
            return None if then is None else self.change(then)

    def memories(self, namespace: str, ids: Sequence[str] | None = None) -> list[Memory]:
        with self._lock:
            if ids is None:
                return [m for (ns, _), m in self._memories.items() if ns == namespace]
            wanted = set(ids)
            return [m for (ns, mid), m in self._memories.items() if ns == namespace and mid in wanted]

    def memory_page(
        self, namespace: str, *, after: int, limit: int, status: str | None = None, context: str | None = None
    ) -> list[tuple[int, Memory]]:
        with self._lock:
            found = sorted(
                (self._seq[k], m)
                for k, m in self._memories.items()
                if k[0] == namespace
                and self._seq[k] > after
                and (status is None or m.status == status)
                and (context is None or context in m.contexts)
            )
        return found[:limit]

    def candidates(
        self, namespace: str, ids: Sequence[str]
    ) -> list[tuple[str, str, float, float, float, float, str, float]]:
        """``(id, status, created, success, failure, n, standing, updated)`` of the given ids that exist,
        in no set order.

        The narrow read recall ranks its candidates with (no text, metadata or edges).
        """
        with self._lock:
            found = [self._memories.get((namespace, mid)) for mid in dict.fromkeys(ids)]
            return [
                (m.id, m.status, m.created, m.counts.success, m.counts.failure, m.counts.n, m.standing, m.updated)
                for m in found
                if m is not None
            ]

    def edges(self, namespace: str) -> list[tuple[str, str, str]]:
        with self._lock:
            out = []
            for (ns, mid), m in self._memories.items():
                if ns == namespace:
                    out += [(mid, d, "derived_from") for d in m.derived_from]
                    out += [(mid, d, "part_of") for d in m.part_of]
            return out + [(src, dst, kind) for ns, src, dst, kind in self._kept_edges if ns == namespace]

    def namespaces(self) -> list[str]:
        with self._lock:
            return sorted({ns for ns, _ in self._memories})

    def vectors(self, namespace: str, after: int = 0) -> tuple[list[str], list[int], np.ndarray]:
        with self._lock:
            keys = [k for k in self._memories if k[0] == namespace and self._seq[k] > after and self._vectors[k].size]
            if not keys:
                return [], [], np.zeros((0, 0), dtype=np.float32)
            return [k[1] for k in keys], [self._seq[k] for k in keys], np.stack([self._vectors[k] for k in keys])

    def quarantined(self) -> int:
        with self._lock:
            return sum(1 for m in self._memories.values() if m.status == "active" and m.standing == "re-verify")

    def inactive(self, namespace: str) -> list[str]:
        with self._lock:
            return [
                mid
                for (ns, mid), m in self._memories.items()
                if ns == namespace and m.status != "active" and self._vectors[(ns, mid)].size
            ]

    def insert_episode(self, episode: Episode) -> None:
        with self._lock:
            if episode.id in self._episodes:
                raise DuplicateError(f"episode {episode.id!r} exists already")
            self._put(self._episodes, episode.id, episode)

    def episodes(self, ids: Sequence[str], namespace: str | None = None) -> dict[str, Episode]:
        with self._lock:
            found = {i: self._episodes[i] for i in ids if i in self._episodes}
        return {i: e for i, e in found.items() if namespace is None or e.namespace == namespace}

    def episodes_at(
        self, ids: Sequence[str], namespace: str | None = None
    ) -> tuple[dict[str, Episode], int | None]:
        with self._lock:
            return self.episodes(ids, namespace), None if namespace is None else self._generation

    def append_outcomes(
        self,
        outcomes: Sequence[OutcomeRow],
        increments: Sequence[Increment],
        reweighted: Sequence[Episode] = (),
        *,
        given: Sequence[Episode] = (),
        generations: Mapping[str, int] | None = None,
    ) -> None:
        check_given(given, outcomes, reweighted, generations)
        with self._lock:
            if generations and any(g != self._generation for g in generations.values()):
                raise ChangedError("the namespace changed since its provenance was read; nothing recorded")
            for ep in given:
                if not logged_as_given(self._episodes.get(ep.id), ep):
                    raise UnknownEpisodeError(ep.id)
            self.append_verifications((), outcomes, increments, reweighted)

    def append_verifications(
        self,
        verifications: Sequence[Verification],
        outcomes: Sequence[OutcomeRow],
        increments: Sequence[Increment],
        reweighted: Sequence[Episode] = (),
    ) -> None:
        with self._lock:
            checked: set[str] = set()
            for v in verifications:
                if v.episode_id in self._verified or v.episode_id in checked:
                    raise DuplicateError(f"episode {v.episode_id!r} is verified already")
                checked.add(v.episode_id)
            batch: set[str] = set()
            for o in outcomes:
                if o.episode_id in self._has_outcome or o.episode_id in batch:
                    raise DuplicateError(f"episode {o.episode_id!r} already has an outcome")
                batch.add(o.episode_id)
            for inc in increments:
                if (inc.namespace, inc.memory_id) not in self._memories:
                    raise UnknownMemoryError(inc.memory_id)
            recorded = outcomes[-1].recorded if outcomes else 0.0
            for name in ("_outcomes", "_verifications"):
                self._note(name)
            for o in outcomes:
                ep = self._episodes.get(o.episode_id)
                ns = ep.namespace if ep is not None else o.namespace
                row = dataclasses.replace(o, seq=len(self._outcomes) + 1, namespace=ns)
                self._outcomes.append(row)
                self._include(self._has_outcome, o.episode_id)
                self._put(self._outcome_of, o.episode_id, row)
            for ep in reweighted:
                logged = self._episodes.get(ep.id)
                if logged is not None:
                    self._put(self._episodes, ep.id, reweigh(logged, ep))
            for v in verifications:
                self._verifications.append(dataclasses.replace(v, seq=len(self._verifications) + 1))
                self._include(self._verified, v.episode_id)
            for inc in sorted(increments, key=lambda i: (i.namespace, i.memory_id)):
                key = (inc.namespace, inc.memory_id)
                m = self._memories[key]
                c = m.counts
                counts = Counts(c.success + inc.success, c.failure + inc.failure, c.n + inc.n)
                self._put(self._memories, key, dataclasses.replace(m, counts=counts, updated=recorded))

    def outcome_log(
        self, namespace: str | None = None, *, after: int = 0, limit: int | None = None
    ) -> Iterator[OutcomeRow]:
        with self._lock:
            rows = [o for o in self._outcomes if (namespace is None or o.namespace == namespace) and o.seq > after]
        yield from rows[:limit]

    def history(self, namespace: str, after: int = 0) -> list[tuple[OutcomeRow, Episode]]:
        with self._lock:
            return [
                (o, self._episodes[o.episode_id])
                for o in self._outcomes
                if o.namespace == namespace and o.seq > after and o.episode_id in self._episodes
            ]

    def draw_outcomes(
        self, namespace: str, memory_id: str, after: int, exclude: Sequence[str] = ()
    ) -> list[DrawOutcome]:
        banned = set(exclude)
        out: list[DrawOutcome] = []
        with self._lock:
            for o in self._outcomes:
                ep = self._episodes.get(o.episode_id)
                if o.namespace != namespace or o.seq <= after or ep is None or not ep.draws:
                    continue
                if banned and any(it.memory_id in banned for it in ep.items):
                    continue
                out += [(d.probe, d.share, o.success, o.confidence) for d in ep.draws if d.memory_id == memory_id]
        return out

    def outcome_count(self, namespace: str) -> int:
        with self._lock:
            return sum(1 for o in self._outcomes if o.namespace == namespace and o.episode_id in self._episodes)

    def outcomes_since(self, since: float, source: str | None = None, namespace: str | None = None) -> list[OutcomeRow]:
        with self._lock:
            return [
                o
                for o in self._outcomes
                if o.recorded >= since
                and (source is None or o.source == source)
                and (namespace is None or o.namespace == namespace)
            ]

    def outcomes_of(self, episode_ids: Sequence[str], namespace: str | None = None) -> dict[str, OutcomeRow]:
        with self._lock:
            found = {i: self._outcome_of[i] for i in episode_ids if i in self._outcome_of}
        return {i: o for i, o in found.items() if namespace is None or o.namespace == namespace}

    def verifications(self, after: int = 0) -> list[Verification]:
        with self._lock:
            return [v for v in self._verifications if v.seq > after]

    def write_counts(self, namespace: str, counts: dict[str, Counts]) -> None:
        with self._lock:
            for mid in counts:
                if (namespace, mid) not in self._memories:
                    raise UnknownMemoryError(mid)
            for mid, c in counts.items():
                key = (namespace, mid)
                self._put(self._memories, key, dataclasses.replace(self._memories[key], counts=c))

    def _check_change(self, entry: AuditEntry) -> Memory:
        """The memory ``entry`` changes, if the change can be made (else the error :meth:`change` raises)."""
        m = self._memories.get((entry.namespace, entry.memory_id))
        if m is None:
            raise UnknownMemoryError(entry.memory_id)
        if entry.field in NOTE_FIELDS:
            return m
        status, standing, after = required(entry)
        if getattr(m, entry.field) != entry.old or status not in (None, m.status) or standing not in (None, m.standing):
            raise changed(entry)
        # Entry seq n sits at index n - 1 (appended in order, never removed): the entries after
        # ``after`` are the list's tail, read without walking the whole log.
        if after is not None and any(
            e.field == "pin" and (e.namespace, e.memory_id) == (entry.namespace, entry.memory_id)
            for e in self._audit[max(0, int(after)) :]
        ):
            raise changed(entry)
        return m

    def change(self, entry: AuditEntry) -> AuditEntry:
        with self._lock:
            key = (entry.namespace, entry.memory_id)
            m = self._check_change(entry)
            self._note("_audit")
            if entry.field in NOTE_FIELDS:
                saved = dataclasses.replace(entry, seq=len(self._audit) + 1)
                self._audit.append(saved)
                return saved
            if entry.field == "status":
                self._put(self._memories, key, dataclasses.replace(m, status=entry.new, updated=entry.at))
            else:
                self._put(self._memories, key, dataclasses.replace(m, standing=entry.new, updated=entry.at))
            saved = dataclasses.replace(entry, seq=len(self._audit) + 1)
            self._audit.append(saved)
            self._note("_generation")
            self._generation += 1
            return saved

    def erase(self, entries: Sequence[AuditEntry]) -> list[AuditEntry]:
        with self._lock:
            keys = [(e.namespace, e.memory_id) for e in entries]
            missing = [k for i, k in enumerate(keys) if k not in self._memories or k in keys[:i]]
            if missing:
                raise UnknownMemoryError(missing[0][1])
            saved = []
            for name in ("_kept_edges", "_audit", "_generation"):
                self._note(name)
            for key, entry in zip(keys, entries, strict=True):
                m = self._drop(self._memories, key)
                self._drop(self._vectors, key)
                self._drop(self._seq, key)
                self._kept_edges += [(m.namespace, m.id, d, "derived_from") for d in m.derived_from]
                self._kept_edges += [(m.namespace, m.id, d, "part_of") for d in m.part_of]
                saved.append(dataclasses.replace(entry, seq=len(self._audit) + 1))
                self._audit.append(saved[-1])
            for ns in {e.namespace for e in entries}:
                self._put(self._meta, erased_key(ns), str(int(self._meta.get(erased_key(ns), "0")) + 1))
            self._generation += 1
            return saved

    def expired(self, namespace: str, now: float) -> list[str]:
        with self._lock:
            found = [(self._seq[k], m.id) for k, m in self._memories.items() if k[0] == namespace and m.expired(now)]
        return [mid for _, mid in sorted(found)]

    def next_expiry(self, namespace: str) -> float | None:
        with self._lock:
            times = [m.expires for (ns, _), m in self._memories.items() if ns == namespace and m.expires is not None]
        return min(times) if times else None

    def erased(self, namespace: str, ids: Sequence[str]) -> dict[str, int]:
        wanted = set(ids)
        with self._lock:
            return {
                e.memory_id: e.seq
                for e in self._audit
                if e.namespace == namespace and e.action == ERASE and e.memory_id in wanted
            }

    def audit_log(
        self, namespace: str, memory_id: str | None = None, *, after: int = 0, limit: int | None = None
    ) -> list[AuditEntry]:
        with self._lock:
            found = [
                e
                for e in self._audit
                if e.namespace == namespace and (memory_id is None or e.memory_id == memory_id) and e.seq > after
            ]
        return found[:limit]

    def save_checkpoint(self, namespace: str, data: bytes) -> None:
        with self._lock:
            self._put(self._checkpoints, namespace, bytes(data))

    def load_checkpoint(self, namespace: str) -> bytes | None:
        with self._lock:
            return self._checkpoints.get(namespace)

    def drop_checkpoints(self, namespace: str | None = None) -> None:
        with self._lock:
            if namespace is None:
                self._note_all_checkpoints()
                self._checkpoints.clear()
            elif namespace in self._checkpoints:
                self._drop(self._checkpoints, namespace)

    def _note_all_checkpoints(self) -> None:
        if self._undo is not None:
            kept = dict(self._checkpoints)
            self._undo.append(lambda: self._checkpoints.update(kept))

    def close(self) -> None:
        pass


_MISSING = object()


def _restorer(table: MutableMapping[Any, Any], key: Any) -> Callable[[], None]:
    """How to give ``table[key]`` back the value it holds now (or remove it, if it holds none)."""
    old = table.get(key, _MISSING)
    if old is _MISSING:
        return lambda: table.pop(key, None)
    return lambda: table.__setitem__(key, old)
