"""A namespace's outcome streams and the change alarms that stand in it: one function for
the store and for ``memworth score``.

Governance reads, for every memory of a namespace, its outcome stream (one observation
per retrieval, in log order, weighted by the outcome's confidence, against the success
rate of all the namespace's episodes before it) and which tests stand against it. This
module computes both from the namespace's episodes alone, so that the store
(:meth:`memworth.MemoryStore.outcome_streams`, from its backend) and ``memworth score``
(from a retrieval log in DuckDB) decide alike:

* every memory's CUSUM, run over the episodes at once
  (:func:`memworth.signals.change_detection.scan_episodes`), gives an e-value; the alarms that stand are
  those the e-BH procedure rejects across the namespace at ``policy.change_alpha``
  (:meth:`memworth.governance.GovernancePolicy.change_flags`), so a hundred memories
  watched at once do not raise a hundred memories' worth of false alarms;
* an alarm whose failures a co-retrieved memory explains better is held
  (:class:`memworth.signals.change_detection.ExplainingAway`), at the bar e-BH set for that memory;
* the window test, when the policy runs it, and its own explaining away
  (:func:`memworth.signals.window_test.hold`).
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import itertools
import math
from array import array
from collections.abc import Callable, Collection, Hashable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

import numpy as np

from memworth.errors import ValidationError
from memworth.governance import GovernancePolicy
from memworth.signals.change_detection import (
    BernoulliCusum,
    CusumReading,
    CusumState,
    ExplainingAway,
    OutcomeStream,
    ReferenceRate,
    SharedEvidence,
)
from memworth.signals.window_test import failing_with
from memworth.signals.window_test import hold as window_hold

__all__ = ["EpisodeColumns", "EpisodeRows", "NamespaceScan", "NamespaceStreams", "namespace_streams"]

_SCAN_CHUNK = 4096
"""Most episodes :meth:`NamespaceScan.catch_up` steps through at once (bounds the arrays
it builds when a cold scan reads millions of outcomes)."""

_SETTLE_EPISODES = 1 << 19
"""Episodes :meth:`EpisodeColumns.settle` sorts at a time."""

_BATCH_EPISODES = 1 << 16
"""Most episodes :meth:`NamespaceScan.advance_rows` steps at once (its arrays: a few dozen
bytes per item of them)."""


@dataclass(frozen=True)
class NamespaceStreams:
    """Every memory's stream in one namespace, and where its detectors stand.

    ``ids`` name the rows of ``state`` (the CUSUM state after the last episode; ``None``
    when there were no episodes); ``held`` maps each memory whose change alarm stands
    after e-BH to the co-retrieved memories that hold it (empty: the alarm is a flag);
    ``level`` is the e-value e-BH asked of an alarm (``inf``: no memory is watched).
    """

    ids: list[str]
    streams: dict[str, OutcomeStream]
    state: CusumState | None
    held: dict[str, tuple[str, ...]]
    level: float


@dataclass(frozen=True)
class StreamsView:
    """:class:`NamespaceStreams` whose ``streams`` mapping makes each stream when it is looked
    up (:meth:`NamespaceScan.read_view`)."""

    ids: list[str]
    streams: Mapping[str, OutcomeStream]
    state: CusumState | None
    held: dict[str, tuple[str, ...]]
    level: float


class _StreamMap(Mapping[str, OutcomeStream]):
    """Each memory's stream, made by ``make`` (its row) when looked up; ``has[row]``: it has one."""

    def __init__(
        self, ids: Sequence[str], index: dict[str, int], has: np.ndarray, make: Callable[[int], OutcomeStream]
    ) -> None:
        self._ids, self._index, self._has, self._make = ids, index, has, make
        self._rows = np.flatnonzero(has)

    def _row(self, mid: object) -> int | None:
        m = self._index.get(mid) if isinstance(mid, str) else None
        return m if m is not None and m < self._has.size and self._has[m] else None

    def __getitem__(self, mid: str) -> OutcomeStream:
        m = self._row(mid)
        if m is None:
            raise KeyError(mid)
        return self._make(m)

    def __contains__(self, mid: object) -> bool:
        return self._row(mid) is not None

    def __iter__(self) -> Iterator[str]:
        return (self._ids[m] for m in self._rows.tolist())

    def __len__(self) -> int:
        return int(self._rows.size)


class Names:
    """Strings stored once each, referred to by their index (first seen first)."""

    def __init__(self, names: Sequence[str] = ()) -> None:
        self.names: list[str] = list(names)
        self.index: dict[str, int] = {name: i for i, name in enumerate(self.names)}

    def of(self, name: str) -> int:
        at = self.index.get(name)
        if at is None:
            at = self.index[name] = len(self.names)
            self.names.append(name)
        return at


class EpisodeColumns:
    """A namespace's episodes (oldest first) as the columns its change detectors read.

    Every episode has its outcome in ``won``. Its other columns are held for the *kept*
    episodes, one row each: ``confidence``, ``context`` (index into :attr:`contexts`,
    -1: none) and the memories it retrieved, ``members[starts[r]:starts[r + 1]]``
    (indices into :attr:`ids`, in the episode's order). ``positions[m]`` lists the kept
    episodes (from 0, ascending, once each) that retrieved memory ``m`` and ``dropped[m]``
    how many earlier ones are not kept. Every episode is kept (``rows`` is None, the row
    of episode ``i`` is ``i``) unless a saved history was loaded in part
    (:mod:`memworth.store.checkpoint`): then ``rows`` maps each kept episode to its row,
    every episode from ``tail_from`` on is kept, and :meth:`whole` loads the rest.
    """

    _pending: int | None = None
    """The first row whose memories are not in :attr:`positions` yet (:meth:`append_rows` leaves
    them to :meth:`settle`, once for many chunks); ``None``: every row is in."""

    def __init__(self) -> None:
        self.won: array[int] = array("b")
        self.confidence: array[float] = array("d")
        self.context: array[int] = array("i")
        self.starts: array[int] = array("q", [0])
        self.members: array[int] = array("i")
        self.positions: list[array[int]] = []
        self.dropped: list[int] = []
        self.rows: dict[int, int] | None = None
        self.tail_from = 0
        self._ids = Names()
        self._contexts = Names()

    def __len__(self) -> int:
        return len(self.won)

    @property
    def ids(self) -> list[str]:
        """The memories retrieved so far, by index (first retrieved first)."""
        return self._ids.names

    @property
    def contexts(self) -> list[str]:
        """The context labels seen so far, by index."""
        return self._contexts.names

    def row(self, i: int) -> int:
        """The row of episode ``i`` (loading every episode when it is not kept)."""
        if self.rows is None:
            return i
        r = self.rows.get(i)
        if r is None:
            self.whole()
            return i
        return r

    def whole(self) -> None:
        """Hold every episode (episodes not kept are loaded; here every episode is)."""

    def add(self, memory_ids: Sequence[str], success: bool, confidence: float, context: str | None) -> None:
        """Append one episode (kept): the memories it retrieved, in order, repeats kept."""
        if self._pending is not None:
            self.settle()
        i = len(self.won)
        if self.rows is not None:
            self.rows[i] = len(self.starts) - 1
        self.won.append(bool(success))
        self.confidence.append(float(confidence))
        self.context.append(-1 if context is None else self._contexts.of(context))
        members, positions = self.members, self.positions
        for mid in memory_ids:
            m = self._ids.of(mid)
            if m == len(positions):
                positions.append(array("i"))
                self.dropped.append(0)
            members.append(m)
            at = positions[m]
            if not at or at[-1] != i:  # a memory listed twice in one episode: one position
                at.append(i)
        self.starts.append(len(members))

    @classmethod
    def of_arrays(
        cls,
        ids: Sequence[str],
        members: np.ndarray,
        starts: np.ndarray,
        success: np.ndarray,
        confidence: np.ndarray,
        contexts: Sequence[str | None],
    ) -> EpisodeColumns:
        """Every episode at once (each kept): episode ``p`` retrieved ``members[starts[p]:
        starts[p + 1]]`` (rows of ``ids``, each once, in order), with its outcome, confidence
        and context. What :meth:`add` would build episode by episode, built from arrays.
        ValueError when the parts do not fit together."""
        cols = cls()
        cols.append_rows(ids, members, starts, success, confidence, contexts)
        cols.settle()
        return cols

    def append_rows(
        self,
        ids: Sequence[str],
        members: np.ndarray,
        starts: np.ndarray,
        success: np.ndarray,
        confidence: np.ndarray,
        contexts: Sequence[str | None] | None = None,
    ) -> None:
        """Append episodes (each kept) from arrays: :meth:`add` for each, without a Python
        string per item. ``ids`` are memories new to the columns (they get the next rows);
        episode ``p`` retrieved ``members[starts[p]:starts[p + 1]]`` (rows, known ones or
        new ones, in order; repeats kept, as :meth:`add` keeps them). Which episodes retrieved each memory
        (:attr:`positions`) is filled in by :meth:`settle`, which :meth:`add` and the scan's
        readers call. ValueError when the parts do not fit together (nothing is appended)."""
        rows = np.ascontiguousarray(members, dtype=np.int32)
        offsets = np.ascontiguousarray(starts, dtype=np.int64)
        won = np.ascontiguousarray(success, dtype=bool)
        weight = np.ascontiguousarray(confidence, dtype=np.float64)
        episodes = won.size
        if self.rows is not None:
            raise ValueError("append_rows appends to columns that keep every episode")
        size = len(self._ids.names) + len(ids)
        if len(set(ids)) != len(ids) or any(mid in self._ids.index for mid in ids):
            raise ValueError("ids repeat")
        if offsets.shape != (episodes + 1,) or offsets[0] != 0 or offsets[-1] != rows.size or np.any(np.diff(offsets) < 0):
            raise ValueError("episode offsets do not fit the members")
        if rows.size and (rows.min() < 0 or rows.max() >= size):
            raise ValueError("members refer past the ids")
        if weight.shape != (episodes,) or (contexts is not None and len(contexts) != episodes):
            raise ValueError("need one confidence and one context per episode")
        if self._pending is None:
            self._pending = len(self.won)
        for mid in ids:
            self._ids.of(mid)
        self.dropped.extend([0] * len(ids))
        base = len(self.members)
        self.won.frombytes(won.astype(np.int8).tobytes())
        self.confidence.frombytes(weight.tobytes())
        if contexts is None or all(c is None for c in contexts):
            self.context.frombytes(np.full(episodes, -1, dtype=np.int32).tobytes())
        else:
            self.context.extend(-1 if c is None else self._contexts.of(c) for c in contexts)
        self.starts.frombytes((offsets[1:] + base).tobytes())
        self.members.frombytes(rows.tobytes())

    def settle(self) -> None:
        """Put the episodes :meth:`append_rows` appended into :attr:`positions` (all of them at once).

        Two passes over the pending items, :data:`_SETTLE_EPISODES` episodes at a time: each
        memory's count, then each item's episode into its memory's slot (a stable sort per
        piece), so the temporary arrays are one int32 per item plus a piece's worth."""
        first = self._pending
        if first is None:
            return
        self._pending = None
        size = len(self._ids.names)
        self.positions.extend(array("i") for _ in range(size - len(self.positions)))
        starts = np.frombuffer(self.starts, dtype=np.int64)[first:]
        members = np.frombuffer(self.members, dtype=np.int32)
        total = int(starts[-1] - starts[0])
        if not total:
            return
        pieces = [(a, min(a + _SETTLE_EPISODES, starts.size - 1)) for a in range(0, starts.size - 1, _SETTLE_EPISODES)]
        counts = np.zeros(size, dtype=np.int64)
        for a, b in pieces:
            counts += np.bincount(members[starts[a] : starts[b]], minlength=size)
        offsets = np.zeros(size + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        slots = np.empty(total, dtype=np.int32)  # each memory's episodes, ascending
        cursor = offsets[:-1].copy()
        for a, b in pieces:
            rows = members[starts[a] : starts[b]]
            episode_of = np.repeat(np.arange(first + a, first + b, dtype=np.int32), np.diff(starts[a : b + 1]))
            order = np.argsort(rows, kind="stable")  # by memory, then episode
            ranked = rows[order]
            group = np.flatnonzero(np.r_[True, ranked[1:] != ranked[:-1]])
            rank = np.arange(ranked.size) - np.repeat(group, np.diff(np.r_[group, ranked.size]))
            slots[cursor[ranked] + rank] = episode_of[order]
            cursor += np.bincount(rows, minlength=size)
            del rows, episode_of, order, ranked, group, rank
        again = slots[1:] == slots[:-1]  # a memory listed twice in one episode: one position
        inner = offsets[1:-1]
        again[inner[(inner > 0) & (inner < total)] - 1] = False  # a memory's first slot repeats nothing
        if again.any():
            once = np.r_[True, ~again]
            counts = np.bincount(np.repeat(np.arange(size), counts)[once], minlength=size)
            slots = slots[once]
            np.cumsum(counts, out=offsets[1:])
        del again
        positions, data = self.positions, slots.view(np.uint8).data  # the bytes, not copied
        bounds = (4 * offsets).tolist()
        for m in np.flatnonzero(counts).tolist():
            positions[m].frombytes(data[bounds[m] : bounds[m + 1]])

    def retrieved(self, i: int) -> frozenset[str]:
        """The memories episode ``i`` (from 0) retrieved, by id."""
        r, ids = self.row(i), self._ids.names
        return frozenset(ids[m] for m in self.members[self.starts[r] : self.starts[r + 1]])


class EpisodeRows(Sequence[Sequence[str]]):
    """Episodes as integer rows of a scan's memories, for :meth:`NamespaceScan.advance`: the
    memories the scan knows (``known``, its ids when these were made) and ``fresh`` ones
    after them; episode ``p`` retrieved rows ``members[starts[p]:starts[p + 1]]``.

    A sequence of each episode's memory ids, as :meth:`NamespaceScan.advance` takes them; a
    scan that knows exactly ``known`` reads the arrays instead
    (:meth:`NamespaceScan.advance_rows`), without a Python string per item.

    Examples
    --------
    >>> rows = EpisodeRows(["a"], ["b"], np.array([0, 1, 1]), np.array([0, 2, 3]))
    >>> len(rows), list(rows[0]), list(rows[1])
    (2, ['a', 'b'], ['b'])
    """

    def __init__(self, known: Sequence[str], fresh: Sequence[str], members: np.ndarray, starts: np.ndarray) -> None:
        self.known, self.base, self.fresh = known, len(known), list(fresh)
        self.members = np.asarray(members)
        self.starts = np.asarray(starts, dtype=np.int64)

    def __len__(self) -> int:
        return max(self.starts.size - 1, 0)

    def _name(self, row: int) -> str:
        return self.known[row] if row < self.base else self.fresh[row - self.base]

    def __getitem__(self, p: Any) -> Any:
        if isinstance(p, slice):
            return [self[i] for i in range(*p.indices(len(self)))]
        i = range(len(self))[p]
        a, b = int(self.starts[i]), int(self.starts[i + 1])
        return [self._name(r) for r in self.members[a:b].tolist()]


class _Pairs:
    """The explaining-away evidence (:class:`~memworth.signals.change_detection.SharedEvidence`)
    as arrays, for a scan that steps many episodes at once (:meth:`NamespaceScan.advance_rows`).

    One entry per (memory ``m``, co-retrieved memory ``j``) with evidence, sorted by the key
    ``m << 32 | j``: its value (``shared[m][j]``) and ``seq``, which orders a memory's entries
    as its dict orders them (first added first). :meth:`record` is
    :meth:`ExplainingAway.record` over many episodes, bit for bit: each entry's value is the
    same additions in the same order.
    """

    def __init__(self, key: np.ndarray, value: np.ndarray, seq: np.ndarray) -> None:
        self.key, self.value, self.seq = key, value, seq
        self.next = int(seq.max()) + 1 if seq.size else 0

    @classmethod
    def of(cls, shared: SharedEvidence) -> _Pairs:
        """The arrays of ``shared`` (its dicts)."""
        sizes = [len(d) for d in shared.shared]
        owner = np.repeat(np.arange(len(sizes), dtype=np.int64), sizes)
        other = np.fromiter((j for d in shared.shared for j in d), dtype=np.int64, count=owner.size)
        value = np.fromiter((v for d in shared.shared for v in d.values()), dtype=np.float64, count=owner.size)
        key = owner << 32 | other
        order = np.argsort(key, kind="stable")
        return cls(key[order], value[order], np.arange(owner.size, dtype=np.int64)[order])

    def arrays(self, size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(starts, keys, values)``: each of the ``size`` memories' entries in its dict's order."""
        owner = self.key >> 32
        order = np.lexsort((self.seq, owner))
        starts = np.zeros(size + 1, dtype=np.int64)
        np.cumsum(np.bincount(owner, minlength=size), out=starts[1:])
        return starts, (self.key[order] & 0xFFFFFFFF), self.value[order]

    def dicts(self, size: int, rows: Collection[int] | None = None) -> list[dict[int, float]]:
        """The dicts of :class:`SharedEvidence` (``rows``: only theirs; the others empty, one shared dict)."""
        starts, keys, values = self.arrays(size)
        bounds = starts.tolist()
        if rows is None:
            k, v = keys.tolist(), values.tolist()
            return [dict(zip(k[a:b], v[a:b], strict=True)) for a, b in itertools.pairwise(bounds)]
        empty: dict[int, float] = {}
        out = [empty] * size
        for m in rows:
            a, b = bounds[m], bounds[m + 1]
            out[m] = dict(zip(keys[a:b].tolist(), values[a:b].tolist(), strict=True))
        return out

    def record(self, size: int, members: np.ndarray, starts: np.ndarray, steps: np.ndarray, after: np.ndarray) -> None:
        """:meth:`ExplainingAway.record` for each episode in turn: episode ``e`` retrieved
        ``members[starts[e]:starts[e + 1]]`` (each once), whose CUSUMs took ``steps`` and
        stood at ``after`` (:meth:`BernoulliCusum.advance_many`); ``size``: the memories."""
        n = members.size
        if not n:
            return
        counts = np.diff(starts)
        episode = np.repeat(np.arange(counts.size, dtype=np.int64), counts)
        at = np.arange(n, dtype=np.int64)
        cleared = after <= 0  # the memory's evidence starts again after this
        last = np.full(size, -1, dtype=np.int64)
        np.maximum.at(last, members[cleared], at[cleared])
        gone = last >= 0
        if gone.any() and self.key.size:  # a memory cleared in these episodes: its earlier entries go
            kept = ~gone[self.key >> 32]
            self.key, self.value, self.seq = self.key[kept], self.value[kept], self.seq[kept]
        src = np.flatnonzero(~cleared & (steps != 0.0) & (at > last[members]))
        if not src.size:
            return
        k = counts[episode[src]]
        total = int(k.sum())
        owner = np.repeat(members[src], k)
        step = np.repeat(steps[src], k)
        place = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(k) - k, k) + np.repeat(starts[episode[src]], k)
        other = members[place]
        mine = other != owner
        key = owner[mine] << 32 | other[mine]
        step = step[mine]
        pairs, first, back = np.unique(key, return_index=True, return_inverse=True)
        where = np.searchsorted(self.key, pairs)
        found = where < self.key.size
        found[found] = self.key[where[found]] == pairs[found]
        total_value = np.zeros(pairs.size)
        total_value[found] = self.value[where[found]]
        np.add.at(total_value, back.reshape(-1), step)  # in order: the dict's additions, one by one
        self.value[where[found]] = total_value[found]
        fresh = ~found
        if fresh.any():
            at_fresh = where[fresh]
            self.key = np.insert(self.key, at_fresh, pairs[fresh])
            self.value = np.insert(self.value, at_fresh, total_value[fresh])
            self.seq = np.insert(self.seq, at_fresh, self.next + first[fresh])
        self.next += key.size


class NamespaceScan:
    """A namespace's change detectors, advanced episode by episode; :meth:`read` gives the
    streams and alarms :func:`namespace_streams` gives for the same episodes.

    The scan reads its episodes from ``columns`` (:class:`EpisodeColumns`; its own when
    none are given, which :meth:`advance` fills). The store keeps one per namespace over
    the namespace's followed history (the same columns, not a copy) and advances it with
    the outcomes logged since it last read, so governing again costs the new outcomes, not
    the whole log again. Its own column is the reference rate before each kept episode.
    ``lock`` is held while a stream's arrays are gathered (:meth:`read` gives them lazily).

    Examples
    --------
    >>> import numpy as np
    >>> scan = NamespaceScan(GovernancePolicy())
    >>> scan.advance([["stale", "fine"]] * 40, np.ones(40, dtype=bool), np.ones(40))
    >>> scan.advance([["stale"], ["fine"]] * 12, np.array([False, True] * 12), np.ones(24))
    >>> scan.read().held, scan.episodes
    ({'stale': ()}, 64)
    """

    def __init__(
        self,
        policy: GovernancePolicy,
        ids: Sequence[str] = (),
        *,
        columns: EpisodeColumns | None = None,
        lock: AbstractContextManager[Any] | None = None,
    ) -> None:
        self.policy = policy
        self.detector, self.rule = policy.detector(), ExplainingAway(apart=policy.change.hold_apart)
        self.columns = EpisodeColumns() if columns is None else columns
        self.lock: AbstractContextManager[Any] = nullcontext() if lock is None else lock
        self.state = self.detector.start(0)
        self._shared = self.rule.start(0)
        self._pairs: _Pairs | None = None  # the shared evidence as arrays (advance_rows), else in _shared
        self.reference = ReferenceRate(policy.change_reference_half_life)
        self.episodes = 0
        self._ref = array("d")  # the reference rate before each kept episode, by row
        for mid in dict.fromkeys(ids):
            self.columns._ids.of(mid)
            self.columns.positions.append(array("i"))
            self.columns.dropped.append(0)
        self._grow()

    @property
    def ids(self) -> list[str]:
        """The memories, by row (in order of first retrieval, after any given up front)."""
        return self.columns.ids

    @property
    def shared(self) -> SharedEvidence:
        """The explaining-away evidence (as dicts: a scan that kept it as arrays turns it back)."""
        if self._pairs is not None:
            self._shared = SharedEvidence(self._pairs.dicts(len(self.state)))
            self._pairs = None
        return self._shared

    @shared.setter
    def shared(self, value: SharedEvidence) -> None:
        self._shared, self._pairs = value, None

    def _grow(self) -> None:
        """Give a row of the state to every memory the columns know."""
        size = len(self.columns.ids)
        if size > len(self.state):
            self.state.grow(size)
            if self._pairs is None:
                self._shared.shared.extend({} for _ in range(size - len(self._shared.shared)))

    def advance(
        self,
        sets: Sequence[Sequence[str]],
        success: np.ndarray,
        confidence: np.ndarray,
        contexts: Sequence[str | None] | None = None,
    ) -> None:
        """Add episodes, oldest first: the memories each retrieved (by id; one given twice
        counts once), its outcome, its confidence and its context label (or ``None``).

        ``sets`` may be :class:`EpisodeRows` made with this scan's ids: then the episodes
        are read as arrays (:meth:`advance_rows`), with the same result (episode by episode
        when the columns keep only a tail, which the array path does not do)."""
        if isinstance(sets, EpisodeRows) and self.columns.rows is None and sets.base == len(self.ids) and (
            sets.known is self.ids or list(sets.known) == self.ids
        ):
            self.advance_rows(sets.fresh, sets.members, sets.starts, success, confidence, contexts)
            return
        y = np.asarray(success, dtype=bool)
        w = np.asarray(confidence, dtype=float)
        if y.ndim != 1 or len(sets) != y.size or w.shape != y.shape:
            raise ValidationError("sets", f"need one set, outcome and confidence per episode ({len(sets)} sets)")
        if not np.all(np.isfinite(w)) or np.any(w < 0) or np.any(w > 1):
            raise ValidationError("confidence", "must be within [0, 1]")
        if contexts is not None and len(contexts) != y.size:
            raise ValidationError("contexts", f"need one per episode ({y.size}), got {len(contexts)}")
        for t, s in enumerate(sets):
            members = list(dict.fromkeys(str(m) for m in s))
            self.columns.add(members, bool(y[t]), float(w[t]), None if contexts is None else contexts[t])
        self.catch_up()

    def advance_rows(
        self,
        ids: Sequence[str],
        members: np.ndarray,
        starts: np.ndarray,
        success: np.ndarray,
        confidence: np.ndarray,
        contexts: Sequence[str | None] | None = None,
    ) -> None:
        """:meth:`advance` from arrays, many episodes at a time: ``ids`` are the memories new
        to the scan (the next rows), episode ``p`` retrieved the rows
        ``members[starts[p]:starts[p + 1]]`` (a row given twice counts once), with its
        outcome, confidence and context label. The same detectors, statistics and evidence
        as :meth:`advance` over the same episodes, bit for bit, with numpy steps per batch of
        episodes instead of Python per item; the explaining-away evidence is kept as arrays
        from then on (:attr:`shared` gives it as dicts)."""
        y = np.asarray(success, dtype=bool)
        w = np.asarray(confidence, dtype=float)
        if y.ndim != 1 or w.shape != y.shape:
            raise ValidationError("success", "need one outcome and one confidence per episode")
        if not np.all(np.isfinite(w)) or np.any(w < 0) or np.any(w > 1):
            raise ValidationError("confidence", "must be within [0, 1]")
        if contexts is not None and len(contexts) != y.size:
            raise ValidationError("contexts", f"need one per episode ({y.size}), got {len(contexts)}")
        if self.columns.rows is not None:
            raise ValidationError("columns", "advance_rows needs columns that keep every episode")
        self.catch_up()
        try:
            self.columns.append_rows(ids, members, starts, y, w, contexts)
        except ValueError as exc:
            raise ValidationError("members", str(exc)) from None
        if self._pairs is None:
            self._pairs = _Pairs.of(self._shared)
            self._shared = self.rule.start(0)
        self.catch_up()

    def catch_up(self) -> None:
        """Advance the detectors over the episodes of the columns not scanned yet.

        A chunk of episodes at a time: their reference rates in order (each before its
        episode), then every retrieval's CUSUM step at once
        (:meth:`~memworth.signals.change_detection.BernoulliCusum.advance_many`, bit for bit
        what one step per episode does), then the shared evidence episode by episode."""
        cols = self.columns
        if self.episodes >= len(cols):
            return
        self._grow()
        if self._pairs is not None and cols.rows is None:
            while self.episodes < len(cols):
                self._catch_up_batch(self.episodes, min(self.episodes + _BATCH_EPISODES, len(cols)))
            return
        detector, rule, state, shared, reference = self.detector, self.rule, self.state, self.shared, self.reference
        while self.episodes < len(cols):
            begin, end = self.episodes, min(self.episodes + _SCAN_CHUNK, len(cols))
            for t in range(begin, end):
                r = cols.row(t)
                if r != len(self._ref) + t - begin:
                    raise ValueError(f"episode {t} is row {r}, the scan's reference column has {len(self._ref)}")
            won, confidence, members, starts = cols.won, cols.confidence, cols.members, cols.starts
            sets: list[tuple[int, ...]] = []
            rates = array("d")
            at: list[int] = []
            ys: list[bool] = []
            ws: list[float] = []
            refs: list[float] = []
            times: list[int] = []
            for t in range(begin, end):
                r = len(self._ref) + t - begin
                ok, wt, rt = bool(won[t]), confidence[r], reference.rate
                rows = tuple(dict.fromkeys(members[starts[r] : starts[r + 1]]))
                sets.append(rows)
                rates.append(rt)
                k = len(rows)
                at.extend(rows)
                ys.extend([ok] * k)
                ws.extend([wt] * k)
                refs.extend([rt] * k)
                times.extend([t + 1] * k)
                reference.add(ok)
            steps, after = detector.advance_many(
                state,
                np.array(at, dtype=np.int64),
                np.array(ys, dtype=bool),
                np.array(ws, dtype=np.float64),
                np.array(refs, dtype=np.float64),
                np.array(times, dtype=np.int64),
            )
            step_list, after_list = steps.tolist(), after.tolist()
            i = 0
            for rows in sets:
                k = len(rows)
                if k:
                    rule.record(shared, list(rows), step_list[i : i + k], after_list[i : i + k])
                i += k
            self._ref.extend(rates)
            self.episodes = end

    def _catch_up_batch(self, begin: int, end: int) -> None:
        """:meth:`catch_up` over episodes ``begin`` to ``end`` (each kept, row ``t`` for episode
        ``t``) with numpy: every observation's CUSUM step at once
        (:meth:`~memworth.signals.change_detection.BernoulliCusum.advance_many`), then the shared
        evidence of them all (:meth:`_Pairs.record`). Only the reference rate goes episode by
        episode (each rate is the one before it, aged)."""
        cols, pairs = self.columns, self._pairs
        assert pairs is not None  # catch_up checked it
        if len(self._ref) != begin:
            raise ValueError(f"episode {begin} is row {begin}, the scan's reference column has {len(self._ref)}")
        size = len(cols.ids)
        offsets = np.frombuffer(cols.starts, dtype=np.int64)[begin : end + 1]
        members = np.frombuffer(cols.members, dtype=np.int32)[offsets[0] : offsets[-1]].astype(np.int64)
        counts = np.diff(offsets)
        episode = np.repeat(np.arange(end - begin, dtype=np.int64), counts)
        if members.size > 1:  # a memory listed twice in one episode counts once, at its first place
            order = np.argsort(episode * size + members, kind="stable")
            ranked = (episode * size + members)[order]
            again = np.zeros(members.size, dtype=bool)
            again[order[1:]] = ranked[1:] == ranked[:-1]
            if again.any():
                members, episode = members[~again], episode[~again]
                counts = np.bincount(episode, minlength=end - begin)
        won = np.frombuffer(cols.won, dtype=np.int8)[begin:end].astype(bool)
        weight = np.frombuffer(cols.confidence, dtype=np.float64)[begin:end]
        reference, rates = self.reference, []
        for ok in won.tolist():
            rates.append(reference.rate)
            reference.add(ok)
        rate = np.array(rates, dtype=np.float64)
        steps, after = self.detector.advance_many(
            self.state, members, won[episode], weight[episode], rate[episode], episode + (begin + 1)
        )
        starts = np.zeros(counts.size + 1, dtype=np.int64)
        np.cumsum(counts, out=starts[1:])
        pairs.record(size, members, starts, steps, after)
        self._ref.frombytes(rate.tobytes())
        self.episodes = end

    def snapshot(self) -> dict[str, np.ndarray]:
        """The detectors' learned state as arrays (copies): the CUSUM state, the shared
        evidence (each memory's entries in order) and the reference rate. With the episodes
        and :meth:`reference_column`, :meth:`resume` rebuilds this scan."""
        state = self.state
        if self._pairs is not None:
            starts, keys, values = self._pairs.arrays(len(state))
            evidence = {"shared_starts": starts, "shared_keys": keys, "shared_values": values}
        else:
            shared = self._shared.shared
            evidence = {
                "shared_starts": np.cumsum([0] + [len(d) for d in shared], dtype=np.int64),
                "shared_keys": np.array([j for d in shared for j in d], dtype=np.int64),
                "shared_values": np.array([v for d in shared for v in d.values()], dtype=np.float64),
            }
        return {
            "statistic": state.statistic.copy(),
            "observations": state.observations.copy(),
            "successes": state.successes.copy(),
            "expected": state.expected.copy(),
            "since": state.since.copy(),
            "first_alarm": state.first_alarm.copy(),
            "watched": state.watched.copy(),
            **evidence,
            "reference_state": np.array(self.reference.state(), dtype=np.float64),
        } | ({} if state.components is None else {"components": state.components.copy()}) | (
            {} if state.frozen is None else {"frozen": state.frozen.copy()}
        )

    def reference_column(self) -> np.ndarray:
        """The reference rate before each kept episode, by row (a view: copy before advancing)."""
        return np.frombuffer(self._ref, dtype=np.float64)

    def rebase(self, reference: np.ndarray, kept: int) -> None:
        """After :meth:`EpisodeColumns.whole` made the first ``kept`` rows every episode up to a
        saved point: ``reference`` is the column over those episodes."""
        tail = self._ref[kept:]
        self._ref = array("d", np.ascontiguousarray(reference, dtype=np.float64).tobytes())
        self._ref.extend(tail)

    @classmethod
    def resume(
        cls,
        policy: GovernancePolicy,
        columns: EpisodeColumns,
        snapshot: dict[str, np.ndarray],
        reference: np.ndarray,
        lock: AbstractContextManager[Any] | None = None,
    ) -> NamespaceScan:
        """The scan :meth:`snapshot` was taken of, over ``columns`` (the episodes it had
        scanned, every one) with ``reference`` its :meth:`reference_column`. ValueError when
        the parts do not fit together (then scan the episodes again instead)."""
        scan = cls(policy, columns=columns, lock=lock)
        size, kept = len(columns.ids), len(columns.starts) - 1
        parts = snapshot.get("components")
        missing = [k for k in _STATE if k not in snapshot]
        if missing:  # saved before the state kept them
            raise ValueError(f"the CUSUM state lacks {', '.join(missing)}")
        state = CusumState(*(np.array(snapshot[k]) for k in _STATE))
        state.components = None if parts is None else np.array(parts, dtype=np.float64)
        state.frozen = _frozen_counts(scan.detector, state, snapshot.get("frozen"))
        if any(getattr(state, k).shape != (size,) for k in _STATE):
            raise ValueError("the CUSUM state does not have one row per memory")
        if not scan.detector.fits(state) or (state.components is not None and state.components.shape[0] != size):
            # a state saved by a detector with other alternatives (or before mixtures were kept)
            raise ValueError(f"the CUSUM state keeps {state.alternatives} alternative(s), the detector mixes {scan.detector.alternatives}")
        state.since, state.first_alarm = state.since.astype(np.int64), state.first_alarm.astype(np.int64)
        keys, values = np.asarray(snapshot["shared_keys"]), np.asarray(snapshot["shared_values"])
        bounds = np.asarray(snapshot["shared_starts"])
        if bounds.shape != (size + 1,) or bounds[0] != 0 or bounds[-1] != keys.size or keys.shape != values.shape:
            raise ValueError("the shared evidence does not fit the memories")
        if keys.size and (keys.min() < 0 or keys.max() >= size):
            raise ValueError("the shared evidence refers past the memories")
        ref = np.ascontiguousarray(reference, dtype=np.float64)
        if ref.shape != (kept,):
            raise ValueError("need one reference rate per kept episode")
        scan.state = state
        scan.shared.shared = [
            dict(zip(keys[a:b].tolist(), values[a:b].tolist(), strict=True))
            for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True)
        ]
        scan.reference.restore(*np.asarray(snapshot["reference_state"], dtype=np.float64).tolist())
        scan.episodes = len(columns)
        scan._ref = array("d", ref.tobytes())
        return scan

    def read(self) -> NamespaceStreams:
        """Every memory's stream so far, and the change alarms that stand now.

        A stream's arrays (success, weight, reference, episode) are gathered when first
        read, from the columns as they stood here: governance reads only each stream's
        length, tail and CUSUM reading, so a namespace of millions of outcomes is not
        copied memory by memory (nor, from a checkpoint, loaded) to govern it. With context
        labels (the context check reads every retrieval) or the window test they are built
        at once."""
        with self.lock:
            self.catch_up()
            found = self._read()
            assert isinstance(found, NamespaceStreams)
            return found

    def read_view(self) -> StreamsView:
        """:meth:`read`, with each memory's stream made when it is looked up (not kept): for
        a reader that goes through a namespace's memories once (``memworth score``), so a
        million memories' streams are never all held at once. The same streams and alarms,
        as long as the scan is not advanced meanwhile (a stream looked up after that is
        refused: read again)."""
        with self.lock:
            self.catch_up()
            found = self._read(view=True)
            if isinstance(found, NamespaceStreams):  # the window test or context labels: built at once
                return StreamsView(found.ids, found.streams, found.state, found.held, found.level)
            return found

    def _read(self, view: bool = False) -> NamespaceStreams | StreamsView:
        policy, detector, rule, state = self.policy, self.detector, self.rule, self.state
        cols = self.columns
        cols.settle()
        ids, size = cols.ids, len(cols.ids)
        if not self.episodes:
            return NamespaceStreams(list(ids), {}, None, {}, math.inf)
        window = policy.staleness_window
        labelled = bool(cols.contexts)
        eager = labelled or policy.window_test
        if cols.rows is not None and (
            eager or any(len(at) < min(window, len(at) + d) for at, d in zip(cols.positions, cols.dropped, strict=True))
        ):
            cols.whole()  # a memory's last retrievals (or every retrieval) are not all kept
        positions, dropped = cols.positions, cols.dropped
        y = np.frombuffer(cols.won, dtype=np.int8).astype(bool)
        alarm, level = policy.change_flags(state.statistic, state.watched)
        shared = self._evidence(np.flatnonzero(alarm).tolist())
        held: dict[str, tuple[str, ...]] = {}
        for m in np.flatnonzero(alarm).tolist():
            bar = dataclasses.replace(detector, threshold=policy.change_bar(level, float(state.watched[m])))
            held[ids[m]] = tuple(ids[j] for j in rule.holding(shared, state, bar, m))
            if not held[ids[m]] and rule.apart and state.since[m] >= 1:  # failures apart since its change point
                held[ids[m]] = self._failing_apart(m, int(state.since[m]) - 1)
        flagged = {mid for mid, by in held.items() if not by}
        rising = {ids[m] for m in np.flatnonzero(state.statistic >= detector.threshold / 2).tolist()}
        fired: set[str] = set()
        explained: dict[str, tuple[str, ...]] = {}
        if policy.window_test:
            retrievals = {
                ids[m]: [(bool(y[p]), cols.retrieved(p)) for p in positions[m]] for m in range(size) if positions[m]
            }
            fired, explained = window_hold(
                retrievals, flagged | rising, window=window, drop=policy.staleness_drop, theta_low=policy.theta_low
            )
        suspects = fired | set(held)
        if eager:
            w = np.frombuffer(cols.confidence, dtype=np.float64).copy()
            reference = np.frombuffer(self._ref, dtype=np.float64).copy()
            labels: list[str | None] = [*cols.contexts, None]  # index -1: none
            context = np.frombuffer(cols.context, dtype=np.int32)
        streamed = [m for m in range(size) if len(positions[m]) + dropped[m]]
        last = np.array([self._ref[cols.row(positions[m][-1])] for m in streamed], dtype=np.float64)
        # every stream's pre-change rate at once (elementwise: what one call per memory gives)
        baseline = np.full(size, np.nan)
        baseline[streamed] = detector.baseline(state, np.array(streamed, dtype=np.int64), last)

        read_at = self.episodes

        def stream(m: int) -> OutcomeStream:
            if self.episodes != read_at:
                raise RuntimeError("the scan advanced after read_view: read it again")
            at, count = positions[m], len(positions[m]) + dropped[m]
            mid = ids[m]
            # no memory flagged: no failure of this one came with a flagged one (failing_with gives ())
            near = failing_with(mid, [cols.retrieved(p) for p in at[-window:] if not y[p]], flagged) if flagged else ()
            common: dict[str, Any] = {
                "explained_by": held.get(mid, ()),
                "window_explained_by": tuple(sorted(set(near) | set(explained.get(mid, ())))),
                "suspect": mid in suspects,
                "change_alarm": mid in held,
                "change_level": level,
                "reading": _reading(detector, state, m, float(baseline[m])),
            }
            if eager:
                pos = np.array(at, dtype=np.int64)
                return OutcomeStream(
                    y[pos],
                    w[pos],
                    reference[pos],
                    pos + 1,
                    context=tuple(labels[c] for c in context[pos].tolist()) if labelled else None,
                    **common,
                )
            return _LazyStream(count, functools.partial(self._arrays, m, count), common)

        if view and not eager:
            return StreamsView(list(ids), _StreamMap(ids, cols._ids.index, np.isfinite(baseline), stream), state, held, level)
        streams = {ids[m]: stream(m) for m in streamed}
        return NamespaceStreams(list(ids), streams, state, held, level)

    def _evidence(self, rows: list[int]) -> SharedEvidence:
        """The shared evidence :meth:`ExplainingAway.holding` reads for ``rows``: theirs and
        that of the memories retrieved with them (all of it, when the scan keeps dicts)."""
        if self._pairs is None:
            return self._shared
        if not rows:
            return SharedEvidence([])
        starts, keys, _values = self._pairs.arrays(len(self.state))
        near = set(rows)
        for m in rows:
            near.update(keys[starts[m] : starts[m + 1]].tolist())
        return SharedEvidence(self._pairs.dicts(len(self.state), near))

    def _failing_apart(self, m: int, start: int) -> tuple[str, ...]:
        """:meth:`ExplainingAway.failing_apart` for memory ``m`` over the episodes from ``start``
        (from 0): its retrievals since then and those of the memories that came with its failures."""
        cols = self.columns
        cols.settle()
        if cols.rows is not None and start < cols.tail_from:
            cols.whole()  # the excursion reaches into episodes not kept
        ids, won = cols.ids, cols.won

        def since(row: int) -> list[tuple[bool, frozenset[str]]]:
            at = cols.positions[row]
            return [(bool(won[p]), cols.retrieved(p)) for p in at[bisect.bisect_left(at, start) :]]

        own = since(m)
        near = {j for ok, seen in own if not ok for j in seen} - {ids[m]}
        others: dict[Hashable, Sequence[tuple[bool, Collection[Hashable]]]] = {
            j: since(cols._ids.index[j]) for j in sorted(near)
        }
        return tuple(str(j) for j in self.rule.failing_apart(ids[m], own, others))

    def _arrays(self, m: int, count: int) -> dict[str, np.ndarray]:
        """The arrays of memory ``m``'s stream over its first ``count`` retrievals."""
        with self.lock:
            self.columns.whole()
            cols = self.columns
            cols.settle()
            pos = np.frombuffer(cols.positions[m], dtype=np.int32)[:count].astype(np.int64)
            return {
                "success": np.frombuffer(cols.won, dtype=np.int8)[pos].astype(bool),
                "weight": np.frombuffer(cols.confidence, dtype=np.float64)[pos],
                "reference": np.frombuffer(self._ref, dtype=np.float64)[pos],
                "episode": pos + 1,
            }


class _LazyStream(OutcomeStream):
    """An :class:`OutcomeStream` whose arrays are gathered when first read (``load`` gives
    them); the rest is given. It pickles, copies and compares as the stream it stands for."""

    def __init__(self, size: int, load: Callable[[], dict[str, np.ndarray]], given: dict[str, Any]) -> None:
        object.__setattr__(self, "_size", size)
        object.__setattr__(self, "_load", load)
        for name, value in {"context": None, **given}.items():
            object.__setattr__(self, name, value)

    def __getattr__(self, name: str) -> Any:
        if name not in _LAZY:
            raise AttributeError(name)
        arrays = self.__dict__["_load"]()
        for key, value in arrays.items():
            object.__setattr__(self, key, value)
        return arrays[name]

    def __len__(self) -> int:
        return int(self.__dict__["_size"])

    def __reduce__(self) -> tuple[Any, ...]:
        return (OutcomeStream, tuple(getattr(self, f.name) for f in dataclasses.fields(OutcomeStream)))


_LAZY = frozenset({"success", "weight", "reference", "episode"})
"""The fields of a :class:`_LazyStream` gathered when first read."""


def namespace_streams(
    policy: GovernancePolicy,
    ids: Sequence[str],
    sets: Sequence[Sequence[int]],
    success: np.ndarray,
    confidence: np.ndarray,
    contexts: Sequence[str | None] | None = None,
) -> NamespaceStreams:
    """The streams of a namespace's memories from its episodes, oldest first (a
    :class:`NamespaceScan` of them all at once).

    Parameters
    ----------
    policy
        The governance policy (detector, e-BH level, window test).
    ids
        The memories, by row: ``sets`` name them by position in ``ids``.
    sets
        Each episode's retrieved rows (a row given twice counts once).
    success, confidence
        Each episode's outcome and its confidence.
    contexts
        Each episode's context label (or ``None``), or ``None`` when no episode has one.

    Examples
    --------
    A memory that worked 40 times, then failed 12 times, beside one that kept working:

    >>> import numpy as np
    >>> sets = [[0, 1]] * 40 + [[0], [1]] * 12
    >>> ok = np.array([True] * 40 + [False, True] * 12)
    >>> found = namespace_streams(GovernancePolicy(), ["stale", "fine"], sets, ok, np.ones(ok.size))
    >>> found.held
    {'stale': ()}
    >>> len(found.streams["stale"]), found.streams["stale"].change_alarm, found.streams["fine"].change_alarm
    (52, True, False)
    """
    names = list(ids)
    if len(set(names)) != len(names):
        raise ValidationError("ids", "must name each memory once")
    scan = NamespaceScan(policy, names)
    try:
        named = [[names[int(r)] for r in s] for s in sets]
    except (IndexError, TypeError, ValueError):
        raise ValidationError("sets", f"rows must index the {len(names)} ids") from None
    if any(int(r) < 0 for s in sets for r in s):
        raise ValidationError("sets", "rows must be >= 0")
    scan.advance(named, success, confidence, contexts)
    return scan.read()


def _frozen_counts(detector: BernoulliCusum, state: CusumState, saved: np.ndarray | None) -> np.ndarray | None:
    """The counts at each excursion's start a resumed scan keeps: the saved ones, or for a
    snapshot saved without them (before the option, or with it off) the live counts when
    every memory's statistic is 0 (exact then). ValueError when a memory is in an excursion
    whose start is unknown, or the saved counts do not fit (then scan the episodes again)."""
    if not detector.frozen_baseline:
        return None
    if saved is None:
        if np.any(state.statistic > 0):
            raise ValueError("the CUSUM state lacks the counts at its excursions' start")
        return state.live_counts(np.arange(len(state)))
    held = np.array(saved, dtype=np.float64)
    if held.shape != (len(state), 3):
        raise ValueError("the counts at the excursions' start do not have one row per memory")
    return held


_STATE = ("statistic", "observations", "successes", "expected", "since", "first_alarm", "watched")
"""The arrays of a :class:`memworth.signals.change_detection.CusumState`, in its constructor's order."""


def _reading(detector: BernoulliCusum, state: CusumState, row: int, baseline: float) -> CusumReading:
    """Row ``row`` of a namespace scan as :meth:`BernoulliCusum.scan` of that memory's stream
    reads it (``baseline``: :meth:`BernoulliCusum.baseline` of the row at its last reference rate)."""
    stat = float(state.statistic[row])
    return CusumReading(
        statistic=stat,
        threshold=detector.threshold,
        alarm=stat >= detector.threshold,
        first_alarm=int(state.first_alarm[row]) if state.first_alarm[row] >= 0 else None,
        change_point=int(state.since[row]) if state.since[row] >= 0 else None,
        baseline=float(baseline),
        observations=float(state.observations[row]),
        watched=float(state.watched[row]),
        odds_ratio=detector.leading_odds_ratio(state, row),
    )
