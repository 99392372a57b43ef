"""One namespace's outcome history as a store object follows it, held as compact columns.

A namespace may log millions of outcomes; governing it reads, of each, only a few
numbers: its sequence number, outcome, confidence, time, holdout mark, source, context,
credit settings and the memories its episode retrieved with their credit weights (those
with credit: a memory the agent said it did not use, ``record(..., used=...)``, has weight 0
and is left out, as it is of the live change statistics).
:class:`Followed` keeps exactly those, one array entry per outcome (and one per retrieved
memory), with strings (memory ids, sources, contexts) stored once each and referred to by
index: 46 bytes an outcome plus 16 a retrieved memory (its index, weight and row-index
entry), where the rows the backend returns take about 1 KB. Every reader of the history (recent counts, the change
detectors, episode statistics, burst alerts, the holdout guard and lift, the probe test)
reads these columns; the change detectors (:class:`memworth.signals.outcome_streams.NamespaceScan`) read
the same columns, not a copy. :mod:`memworth.store.checkpoint` saves and loads them.

A history loaded from a checkpoint holds, at first, every outcome's outcome, holdout mark
and time, and the rest only for the outcomes governing reads (each memory's last
retrievals and the last burst window's outcomes): a reader that needs more calls
:meth:`Followed.whole`, which loads the rest (each method here does so when it must).
"""

from __future__ import annotations

import bisect
from array import array
from collections.abc import Callable, Collection, Sequence

import numpy as np

from memworth.counts import Counts
from memworth.signals.outcome_streams import EpisodeColumns, Names, NamespaceScan
from memworth.store.records import Episode, EpisodeItem, OutcomeRow

__all__ = ["Followed"]

Body = Callable[[], "tuple[Followed, np.ndarray | None]"]
"""Loads a checkpoint's every outcome: the history up to it, and the detectors' reference column."""


class Followed(EpisodeColumns):
    """A namespace's outcomes as a store object last read them (oldest first), as columns.

    Per outcome, of every outcome: ``won``, ``held`` (its episode was held out of
    governance) and ``recorded``; of every kept outcome, by row (see
    :class:`memworth.signals.outcome_streams.EpisodeColumns`; every outcome is kept unless the history
    was loaded in part from a checkpoint): ``seq``, ``confidence``, ``source`` (index
    into :attr:`sources`), ``context`` (index into :attr:`contexts`, -1: none) and
    ``credit`` (index into :attr:`credits`, the ``(propagation, max_hops)`` it was
    credited under), and the memories its episode retrieved, in the episode's order,
    ``members[starts[r]:starts[r + 1]]`` (indices into :attr:`ids`) with their credit
    ``weights``. ``positions[m]`` lists the kept outcomes whose episode retrieved memory
    ``m`` (once per outcome), so that a memory's retrievals are found without a scan.

    ``last_seq`` is the last sequence number read; ``scan`` the change detectors, over
    these columns, advanced over the first ``scanned`` outcomes under ``scan.policy``;
    ``saved`` how many outcomes the namespace's checkpoint held when this object last
    wrote or loaded it.

    Examples
    --------
    >>> row = OutcomeRow("e1", True, "agent", 0.9, 10.0, seq=4, namespace="ns")
    >>> ep = Episode("e1", "ns", "q", "billing", 9.0, (EpisodeItem("a", 0.5, 1.0, 0), EpisodeItem("b", 0.5, 1.0, 1)))
    >>> f = Followed()
    >>> f.extend([(row, ep)])
    >>> len(f), f.last_seq, f.memory_ids(0), f.recent(20)["a"]
    (1, 4, ['a', 'b'], Counts(success=0.45, failure=0.0, n=1.0))
    """

    def __init__(self) -> None:
        super().__init__()
        self.last_seq = 0
        self.saved = 0
        self.scan: NamespaceScan | None = None
        self.scanned = 0
        self.held: array[int] = array("b")
        self.recorded: array[float] = array("d")
        self.seq: array[int] = array("q")
        self.source: array[int] = array("i")
        self.credit: array[int] = array("i")
        self.weights: array[float] = array("d")
        self._sources = Names()
        self._credits: list[tuple[float | None, int | None]] = []
        self._credit_index: dict[tuple[float | None, int | None], int] = {}
        self._body: Body | None = None
        self._body_rows = 0
        self.loads = 0
        """How many times outcomes not kept were loaded (:meth:`whole`)."""

    @property
    def sources(self) -> list[str]:
        return self._sources.names

    @property
    def credits(self) -> list[tuple[float | None, int | None]]:
        return self._credits

    @property
    def partial(self) -> bool:
        """Whether outcomes of a checkpoint are still to load (:meth:`whole`)."""
        return self._body is not None

    def extend(self, tail: Sequence[tuple[OutcomeRow, Episode]]) -> None:
        """Append outcomes read from the log (oldest first) and index their memories."""
        for o, ep in tail:
            self.seq.append(int(o.seq))
            self.held.append(bool(ep.holdout))
            self.recorded.append(float(o.recorded))
            self.source.append(self._sources.of(o.source))
            self.credit.append(self._credit_of((o.propagation, o.max_hops)))
            credited = [item for item in ep.items if item.weight > 0]  # a memory not used (weight 0) saw no outcome
            self.add([item.memory_id for item in credited], bool(o.success), float(o.confidence), ep.context)
            self.weights.extend(float(item.weight) for item in credited)
            self.last_seq = int(o.seq)

    def _credit_of(self, credit: tuple[float | None, int | None]) -> int:
        at = self._credit_index.get(credit)
        if at is None:
            at = self._credit_index[credit] = len(self._credits)
            self._credits.append(credit)
        return at

    def whole(self) -> None:
        """Load the checkpoint's outcomes not kept so far: afterwards every outcome is kept
        (the change detectors' reference column included)."""
        if self._body is None:
            return
        body, reference = self._body()
        self._body = None
        self.loads += 1
        k, n0 = self._body_rows, len(body)
        for name in ("seq", "confidence", "source", "context", "credit"):
            getattr(body, name).extend(getattr(self, name)[k:])
        first = self.starts[k]
        base = body.starts[-1]
        body.members.extend(self.members[first:])
        body.weights.extend(self.weights[first:])
        body.starts.extend(array("q", (s - first + base for s in self.starts[k + 1 :])))
        for m, at in enumerate(self.positions):
            after = at[bisect.bisect_left(at, n0) :]
            if m < len(body.positions):
                body.positions[m].extend(after)
            else:
                body.positions.append(after)
        for name in ("seq", "confidence", "source", "context", "credit", "members", "weights", "starts", "positions"):
            setattr(self, name, getattr(body, name))
        self.dropped = [0] * len(self.positions)
        self.rows, self.tail_from = None, 0
        if self.scan is not None:
            if reference is None:
                raise ValueError("the checkpoint's detectors came without their reference column")
            self.scan.rebase(reference, k)

    def memory_ids(self, i: int) -> list[str]:
        """The memories outcome ``i``'s episode retrieved, by id, in its order (repeats kept)."""
        r, ids = self.row(i), self._ids.names
        return [ids[m] for m in self.members[self.starts[r] : self.starts[r + 1]]]

    def context_of(self, i: int) -> str | None:
        c = self.context[self.row(i)]
        return None if c < 0 else self._contexts.names[c]

    def recent(self, size: int) -> dict[str, Counts]:
        """Each memory's counts over its last ``size`` direct retrievals (newest first, item by
        item within an episode, through the row index: the cost does not grow with the log)."""
        if self.rows is not None and any(d and len(at) < size for at, d in zip(self.positions, self.dropped, strict=True)):
            self.whole()  # a memory's last retrievals reach outcomes not kept
        members, weights, starts, rows = self.members, self.weights, self.starts, self.rows
        won, confidence = self.won, self.confidence
        out: dict[str, Counts] = {}
        for m, at in enumerate(self.positions):
            acc = [0.0, 0.0, 0.0]
            for i in reversed(at):
                r = i if rows is None else rows[i]
                ok, conf = won[i], confidence[r]
                for j in range(starts[r], starts[r + 1]):
                    if members[j] != m or acc[2] >= size:
                        continue
                    acc[0 if ok else 1] += weights[j] * conf
                    acc[2] += 1
                if acc[2] >= size:
                    break
            out[self._ids.names[m]] = Counts(*acc)
        return out

    def retrievals_since(
        self, memory_id: str, since: float, exclude: Collection[str] = (), after_seq: int | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Outcome and confidence of each outcome recorded at or after ``since`` whose episode
        retrieved ``memory_id`` and none of ``exclude``, in log order; with ``after_seq``, only
        those whose sequence number is above it (outcomes a decision read are left out, even
        when recorded at the very time of the decision)."""
        m = self._ids.index.get(memory_id)
        if m is None:
            return np.zeros(0, dtype=bool), np.zeros(0)
        if self.dropped[m]:  # its outcomes not kept are all before its kept ones
            at = self.positions[m]
            before = np.frombuffer(self.recorded, dtype=np.float64)[: at[0] if at else len(self)]
            if np.any(before >= since):
                self.whole()
        banned = {self._ids.index[e] for e in exclude if e in self._ids.index}
        ys: list[bool] = []
        ws: list[float] = []
        rows = self.rows
        for i in self.positions[m]:
            if self.recorded[i] < since:
                continue
            r = i if rows is None else rows[i]
            if after_seq is not None and self.seq[r] <= after_seq:
                continue
            if banned and not banned.isdisjoint(self.members[self.starts[r] : self.starts[r + 1]]):
                continue
            ys.append(bool(self.won[i]))
            ws.append(self.confidence[r])
        return np.array(ys, dtype=bool), np.array(ws, dtype=float)

    def credited(self, start: int, namespace: str) -> list[tuple[OutcomeRow, Episode]]:
        """Outcomes ``start`` onward as the rows crediting reads (outcome, confidence, source,
        time, credit settings; the episode's memories and weights): not the log's full rows
        (no episode id, query or propensities)."""
        if start < self.tail_from:
            self.whole()
        out = []
        sources, contexts, credits = self._sources.names, self._contexts.names, self._credits
        for i in range(start, len(self)):
            r = self.row(i)
            propagation, hops = credits[self.credit[r]]
            ids = self.memory_ids(i)
            weights = self.weights[self.starts[r] : self.starts[r + 1]]
            items = tuple(EpisodeItem(mid, w, 1.0, pos) for pos, (mid, w) in enumerate(zip(ids, weights, strict=True)))
            c = self.context[r]
            row = OutcomeRow(
                "",
                bool(self.won[i]),
                sources[self.source[r]],
                self.confidence[r],
                self.recorded[i],
                self.seq[r],
                namespace,
                propagation,
                hops,
            )
            out.append(
                (row, Episode("", namespace, "", None if c < 0 else contexts[c], 0.0, items, bool(self.held[i])))
            )
        return out

    def nbytes(self) -> int:
        """Bytes the columns and the row index hold (the arrays' buffers; strings not counted)."""
        columns = (
            self.seq,
            self.won,
            self.held,
            self.confidence,
            self.recorded,
            self.source,
            self.context,
            self.credit,
            self.starts,
            self.members,
            self.weights,
        )
        return sum(a.itemsize * len(a) for a in columns) + sum(a.itemsize * len(a) for a in self.positions)

    @classmethod
    def from_columns(
        cls,
        columns: dict[str, np.ndarray],
        ids: Sequence[str],
        sources: Sequence[str],
        contexts: Sequence[str],
        credits: Sequence[tuple[float | None, int | None]],
        kept: np.ndarray | None = None,
        retrievals: np.ndarray | None = None,
    ) -> Followed:
        """A followed history from its columns (as :meth:`columns` gives them); the row index
        is rebuilt. ``kept``: the outcomes the columns other than ``won``, ``held`` and
        ``recorded`` hold (ascending; None: every outcome), with ``retrievals`` the number
        of outcomes that retrieved each memory in all. ValueError when they do not fit together."""
        f = cls()
        n = int(columns["won"].size)
        for name, kind in _PER_OUTCOME.items():
            col = np.ascontiguousarray(columns[name], dtype=_DTYPES[kind])
            if col.shape != (n,):
                raise ValueError(f"column {name} has shape {col.shape}, expected ({n},)")
            getattr(f, name).frombytes(col.tobytes())
        rows = np.arange(n, dtype=np.int64) if kept is None else np.ascontiguousarray(kept, dtype=np.int64)
        size = int(rows.size)
        if rows.ndim != 1 or (size and (rows[0] < 0 or rows[-1] >= n or np.any(np.diff(rows) <= 0))):
            raise ValueError("the kept outcomes must be distinct outcomes, ascending")
        for name, kind in _PER_ROW.items():
            col = np.ascontiguousarray(columns[name], dtype=_DTYPES[kind])
            if col.shape != (size,):
                raise ValueError(f"column {name} has shape {col.shape}, expected ({size},)")
            getattr(f, name).frombytes(col.tobytes())
        starts = np.ascontiguousarray(columns["starts"], dtype=np.int64)
        members = np.ascontiguousarray(columns["members"], dtype=np.int32)
        weights = np.ascontiguousarray(columns["weights"], dtype=np.float64)
        if starts.shape != (size + 1,) or starts[0] != 0 or np.any(np.diff(starts) < 0) or starts[-1] != members.size:
            raise ValueError("the episode offsets do not fit the member column")
        if weights.shape != members.shape:
            raise ValueError("one weight per member is needed")
        seq = np.frombuffer(f.seq, dtype=np.int64)
        if size and (np.any(np.diff(seq) <= 0) or seq[0] <= 0):
            raise ValueError("sequence numbers must increase")
        for name in ("won", "held"):
            flags = np.frombuffer(getattr(f, name), dtype=np.int8)
            if np.any((flags != 0) & (flags != 1)):
                raise ValueError(f"column {name} holds values other than 0 and 1")
        confidence = np.frombuffer(f.confidence, dtype=np.float64)
        if not np.all((confidence >= 0) & (confidence <= 1)) or not np.all(np.isfinite(np.frombuffer(f.recorded))):
            raise ValueError("confidence must be within [0, 1] and times finite")
        if not np.all(np.isfinite(weights)):
            raise ValueError("weights must be finite")
        for name, limit in (("source", len(sources)), ("context", len(contexts)), ("credit", len(credits))):
            col = np.frombuffer(getattr(f, name), dtype=np.int32)
            low = -1 if name == "context" else 0
            if size and (col.min() < low or col.max() >= limit):
                raise ValueError(f"column {name} refers past its {limit} names")
        if members.size and (members.min() < 0 or members.max() >= len(ids)):
            raise ValueError(f"members refer past the {len(ids)} memory ids")
        if len(set(ids)) != len(ids):
            raise ValueError("memory ids repeat")
        f.starts = array("q", starts.tobytes())
        f.members = array("i", members.tobytes())
        f.weights = array("d", weights.tobytes())
        f._ids = Names(ids)
        f._sources = Names(sources)
        f._contexts = Names(contexts)
        for credit in credits:
            f._credit_of(credit)
        if len(f._credits) != len(credits):
            raise ValueError("credit settings repeat")
        owner = np.repeat(rows.astype(np.int32), np.diff(starts))
        narrow = members.astype(np.uint16) if len(ids) <= 1 << 16 else members  # numpy radix-sorts 16 bits
        order = np.argsort(narrow, kind="stable")  # by memory, then outcome (owner ascends)
        by, outcomes = members[order], owner[order]
        first = np.ones(by.size, dtype=bool)  # one position per (memory, outcome)
        first[1:] = (by[1:] != by[:-1]) | (outcomes[1:] != outcomes[:-1])
        by, outcomes = by[first], outcomes[first]
        by_memory = np.bincount(by, minlength=len(ids))
        parts = np.split(outcomes, np.cumsum(by_memory)[:-1]) if len(ids) else []
        f.positions = [array("i", part.tobytes()) for part in parts]
        if kept is None:
            f.dropped = [0] * len(ids)
            if len(ids) and not all(f.positions):
                raise ValueError("a memory id is retrieved by no outcome")
        else:
            total = np.ascontiguousarray(retrievals, dtype=np.int64)
            if total.shape != (len(ids),) or np.any(total < by_memory) or np.any(total == 0):
                raise ValueError("the retrievals of each memory do not fit the kept outcomes")
            f.dropped = (total - by_memory).tolist()
            if size < n:
                f.rows = dict(zip(rows.tolist(), range(size), strict=True))
            tail = np.flatnonzero(rows != np.arange(n - size, n)) if size else np.zeros(0, dtype=np.int64)
            f.tail_from = n - size + (int(tail[-1]) + 1 if tail.size else 0)
        f.last_seq = int(seq[-1]) if size else 0
        return f

    def columns(self) -> dict[str, np.ndarray]:
        """Every outcome's columns as numpy arrays (views of this object's buffers: copy
        before changing it); the outcomes not kept are loaded first."""
        self.whole()
        out = {name: np.frombuffer(getattr(self, name), dtype=_DTYPES[kind]) for name, kind in _PER_OUTCOME.items()}
        out |= {name: np.frombuffer(getattr(self, name), dtype=_DTYPES[kind]) for name, kind in _PER_ROW.items()}
        out["starts"] = np.frombuffer(self.starts, dtype=np.int64)
        out["members"] = np.frombuffer(self.members, dtype=np.int32)
        out["weights"] = np.frombuffer(self.weights, dtype=np.float64)
        return out


_PER_OUTCOME = {"won": "b", "held": "b", "recorded": "d"}
"""The columns every outcome has (however much is kept), and their array type codes."""

_PER_ROW = {"seq": "q", "confidence": "d", "source": "i", "context": "i", "credit": "i"}
"""The per-outcome columns held for the kept outcomes, and their array type codes."""

_DTYPES = {"q": np.int64, "b": np.int8, "d": np.float64, "i": np.int32}
