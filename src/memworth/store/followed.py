"""One namespace's outcome history as a store object follows it, held as compact columns.

A namespace may log millions of outcomes; governing it reads, of each, only a few
numbers: its sequence number, outcome, confidence, time, holdout mark, source, context,
credit settings and the memories its episode retrieved with their credit weights.
:class:`Followed` keeps exactly those, one array entry per outcome (and one per retrieved
memory), with strings (memory ids, sources, contexts) stored once each and referred to by
index: 46 bytes an outcome plus 16 a retrieved memory (its index, weight and row-index
entry), where the rows the backend returns take about 1 KB. Every reader of the history (recent counts, the change
detectors, episode statistics, burst alerts, the holdout guard and lift, the probe test)
reads these columns. :mod:`memworth.store.checkpoint` saves and loads them.
"""

from __future__ import annotations

from array import array
from collections.abc import Collection, Sequence

import numpy as np

from memworth.counts import Counts
from memworth.signals.outcome_streams import NamespaceScan
from memworth.store.records import Episode, EpisodeItem, OutcomeRow

__all__ = ["Followed"]


class _Names:
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


class Followed:
    """A namespace's outcomes as a store object last read them (oldest first), as columns.

    Per outcome: ``seq``, ``won``, ``held`` (its episode was held out of governance),
    ``confidence``, ``recorded``, ``source`` (index into :attr:`sources`), ``context``
    (index into :attr:`contexts`, -1: none) and ``credit`` (index into :attr:`credits`,
    the ``(propagation, max_hops)`` it was credited under). The memories outcome ``i``'s
    episode retrieved, in the episode's order, are ``members[starts[i]:starts[i + 1]]``
    (indices into :attr:`ids`) with their credit ``weights``. ``positions[m]`` lists the
    outcomes whose episode retrieved memory ``m`` (once per outcome), so that a memory's
    retrievals are found without a scan.

    ``last_seq`` is the last sequence number read; ``scan`` the change detectors advanced
    over the first ``scanned`` outcomes under ``scan.policy``; ``saved`` how many outcomes
    the namespace's checkpoint held when this object last wrote or loaded it.

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
        self.last_seq = 0
        self.saved = 0
        self.scan: NamespaceScan | None = None
        self.scanned = 0
        self.seq: array[int] = array("q")
        self.won: array[int] = array("b")
        self.held: array[int] = array("b")
        self.confidence: array[float] = array("d")
        self.recorded: array[float] = array("d")
        self.source: array[int] = array("i")
        self.context: array[int] = array("i")
        self.credit: array[int] = array("i")
        self.starts: array[int] = array("q", [0])
        self.members: array[int] = array("i")
        self.weights: array[float] = array("d")
        self.positions: list[array[int]] = []
        self._ids = _Names()
        self._sources = _Names()
        self._contexts = _Names()
        self._credits: list[tuple[float | None, int | None]] = []
        self._credit_index: dict[tuple[float | None, int | None], int] = {}

    def __len__(self) -> int:
        return len(self.seq)

    @property
    def ids(self) -> list[str]:
        """The memories retrieved so far, by index (first retrieved first)."""
        return self._ids.names

    @property
    def sources(self) -> list[str]:
        return self._sources.names

    @property
    def contexts(self) -> list[str]:
        return self._contexts.names

    @property
    def credits(self) -> list[tuple[float | None, int | None]]:
        return self._credits

    def extend(self, tail: Sequence[tuple[OutcomeRow, Episode]]) -> None:
        """Append outcomes read from the log (oldest first) and index their memories."""
        for o, ep in tail:
            i = len(self.seq)
            self.seq.append(int(o.seq))
            self.won.append(bool(o.success))
            self.held.append(bool(ep.holdout))
            self.confidence.append(float(o.confidence))
            self.recorded.append(float(o.recorded))
            self.source.append(self._sources.of(o.source))
            self.context.append(-1 if ep.context is None else self._contexts.of(ep.context))
            self.credit.append(self._credit_of((o.propagation, o.max_hops)))
            for item in ep.items:
                m = self._ids.of(item.memory_id)
                if m == len(self.positions):
                    self.positions.append(array("i"))
                self.members.append(m)
                self.weights.append(float(item.weight))
                at = self.positions[m]
                if not at or at[-1] != i:  # a memory listed twice in one episode: one position
                    at.append(i)
            self.starts.append(len(self.members))
            self.last_seq = int(o.seq)

    def _credit_of(self, credit: tuple[float | None, int | None]) -> int:
        at = self._credit_index.get(credit)
        if at is None:
            at = self._credit_index[credit] = len(self._credits)
            self._credits.append(credit)
        return at

    def memory_ids(self, i: int) -> list[str]:
        """The memories outcome ``i``'s episode retrieved, by id, in its order (repeats kept)."""
        ids = self._ids.names
        return [ids[m] for m in self.members[self.starts[i] : self.starts[i + 1]]]

    def context_of(self, i: int) -> str | None:
        c = self.context[i]
        return None if c < 0 else self._contexts.names[c]

    def context_labels(self, start: int = 0) -> list[str | None]:
        """Each outcome's context label from ``start`` on (None: none)."""
        table: list[str | None] = [*self._contexts.names, None]  # index -1: none
        return [table[c] for c in self.context[start:]]

    def recent(self, size: int) -> dict[str, Counts]:
        """Each memory's counts over its last ``size`` direct retrievals (newest first, item by
        item within an episode, through the row index: the cost does not grow with the log)."""
        members, weights, starts = self.members, self.weights, self.starts
        won, confidence = self.won, self.confidence
        out: dict[str, Counts] = {}
        for m, at in enumerate(self.positions):
            acc = [0.0, 0.0, 0.0]
            for i in reversed(at):
                ok, conf = won[i], confidence[i]
                for j in range(starts[i], starts[i + 1]):
                    if members[j] != m or acc[2] >= size:
                        continue
                    acc[0 if ok else 1] += weights[j] * conf
                    acc[2] += 1
                if acc[2] >= size:
                    break
            out[self._ids.names[m]] = Counts(*acc)
        return out

    def retrievals_since(
        self, memory_id: str, since: float, exclude: Collection[str] = ()
    ) -> tuple[np.ndarray, np.ndarray]:
        """Outcome and confidence of each outcome recorded at or after ``since`` whose episode
        retrieved ``memory_id`` and none of ``exclude``, in log order."""
        m = self._ids.index.get(memory_id)
        if m is None:
            return np.zeros(0, dtype=bool), np.zeros(0)
        banned = {self._ids.index[e] for e in exclude if e in self._ids.index}
        ys: list[bool] = []
        ws: list[float] = []
        for i in self.positions[m]:
            if self.recorded[i] < since:
                continue
            if banned and not banned.isdisjoint(self.members[self.starts[i] : self.starts[i + 1]]):
                continue
            ys.append(bool(self.won[i]))
            ws.append(self.confidence[i])
        return np.array(ys, dtype=bool), np.array(ws, dtype=float)

    def credited(self, start: int, namespace: str) -> list[tuple[OutcomeRow, Episode]]:
        """Outcomes ``start`` onward as the rows crediting reads (outcome, confidence, source,
        time, credit settings; the episode's memories and weights): not the log's full rows
        (no episode id, query or propensities)."""
        out = []
        sources, contexts, credits = self._sources.names, self._contexts.names, self._credits
        for i in range(start, len(self.seq)):
            propagation, hops = credits[self.credit[i]]
            ids = self.memory_ids(i)
            weights = self.weights[self.starts[i] : self.starts[i + 1]]
            items = tuple(EpisodeItem(mid, w, 1.0, pos) for pos, (mid, w) in enumerate(zip(ids, weights, strict=True)))
            c = self.context[i]
            row = OutcomeRow(
                "",
                bool(self.won[i]),
                sources[self.source[i]],
                self.confidence[i],
                self.recorded[i],
                self.seq[i],
                namespace,
                propagation,
                hops,
            )
            out.append(
                (row, Episode("", namespace, "", None if c < 0 else contexts[c], 0.0, items, bool(self.held[i])))
            )
        return out

    def scan_input(self, start: int) -> tuple[list[list[str]], np.ndarray, np.ndarray, list[str | None]]:
        """What :meth:`NamespaceScan.advance` takes for outcomes ``start`` onward."""
        n = len(self.seq)
        sets = [self.memory_ids(i) for i in range(start, n)]
        success = np.frombuffer(self.won, dtype=np.int8)[start:n].astype(bool)
        confidence = np.frombuffer(self.confidence, dtype=np.float64)[start:n].copy()
        return sets, success, confidence, self.context_labels(start)

    def distinct_members(self) -> tuple[np.ndarray, np.ndarray]:
        """Each outcome's memories as :class:`NamespaceScan` rows them: each once, first
        listing first (``rows[starts[i]:starts[i + 1]]``, indices into :attr:`ids`)."""
        n = len(self.seq)
        starts = np.frombuffer(self.starts, dtype=np.int64).copy()
        members = np.frombuffer(self.members, dtype=np.int32).copy()
        if sum(len(at) for at in self.positions) == members.size:  # no memory listed twice in an episode
            return members, starts
        owner = np.repeat(np.arange(n, dtype=np.int64), np.diff(starts))
        order = np.argsort(owner * max(len(self.ids), 1) + members, kind="stable")
        repeated = np.zeros(members.size, dtype=bool)  # a later listing of a memory in the same episode
        repeated[order[1:]] = (owner[order[1:]] == owner[order[:-1]]) & (members[order[1:]] == members[order[:-1]])
        keep = ~repeated
        counts = np.bincount(owner[keep], minlength=n)
        return members[keep], np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)

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
    ) -> Followed:
        """A followed history from its columns (as :meth:`columns` gives them); the row index
        is rebuilt. ValueError when they do not fit together."""
        f = cls()
        n = int(columns["seq"].size)
        for name, kind in _PER_OUTCOME.items():
            col = np.ascontiguousarray(columns[name], dtype=_DTYPES[kind])
            if col.shape != (n,):
                raise ValueError(f"column {name} has shape {col.shape}, expected ({n},)")
            getattr(f, name).frombytes(col.tobytes())
        starts = np.ascontiguousarray(columns["starts"], dtype=np.int64)
        members = np.ascontiguousarray(columns["members"], dtype=np.int32)
        weights = np.ascontiguousarray(columns["weights"], dtype=np.float64)
        if starts.shape != (n + 1,) or starts[0] != 0 or np.any(np.diff(starts) < 0) or starts[-1] != members.size:
            raise ValueError("the episode offsets do not fit the member column")
        if weights.shape != members.shape:
            raise ValueError("one weight per member is needed")
        seq = np.frombuffer(f.seq, dtype=np.int64)
        if n and (np.any(np.diff(seq) <= 0) or seq[0] <= 0):
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
        for name, size in (("source", len(sources)), ("context", len(contexts)), ("credit", len(credits))):
            col = np.frombuffer(getattr(f, name), dtype=np.int32)
            low = -1 if name == "context" else 0
            if n and (col.min() < low or col.max() >= size):
                raise ValueError(f"column {name} refers past its {size} names")
        if members.size and (members.min() < 0 or members.max() >= len(ids)):
            raise ValueError(f"members refer past the {len(ids)} memory ids")
        if len(set(ids)) != len(ids):
            raise ValueError("memory ids repeat")
        f.starts = array("q", starts.tobytes())
        f.members = array("i", members.tobytes())
        f.weights = array("d", weights.tobytes())
        f._ids = _Names(ids)
        f._sources = _Names(sources)
        f._contexts = _Names(contexts)
        for credit in credits:
            f._credit_of(credit)
        if len(f._credits) != len(credits):
            raise ValueError("credit settings repeat")
        owner = np.repeat(np.arange(n, dtype=np.int32), np.diff(starts))
        narrow = members.astype(np.uint16) if len(ids) <= 1 << 16 else members  # numpy radix-sorts 16 bits
        order = np.argsort(narrow, kind="stable")  # by memory, then outcome (owner ascends)
        by, outcomes = members[order], owner[order]
        first = np.ones(by.size, dtype=bool)  # one position per (memory, outcome)
        first[1:] = (by[1:] != by[:-1]) | (outcomes[1:] != outcomes[:-1])
        by, outcomes = by[first], outcomes[first]
        by_memory = np.bincount(by, minlength=len(ids))
        parts = np.split(outcomes, np.cumsum(by_memory)[:-1]) if len(ids) else []
        f.positions = [array("i", part.tobytes()) for part in parts]
        if len(ids) and not all(f.positions):
            raise ValueError("a memory id is retrieved by no outcome")
        f.last_seq = int(seq[-1]) if n else 0
        return f

    def columns(self) -> dict[str, np.ndarray]:
        """The columns as numpy arrays (views of this object's buffers: copy before changing it)."""
        out = {name: np.frombuffer(getattr(self, name), dtype=_DTYPES[kind]) for name, kind in _PER_OUTCOME.items()}
        out["starts"] = np.frombuffer(self.starts, dtype=np.int64)
        out["members"] = np.frombuffer(self.members, dtype=np.int32)
        out["weights"] = np.frombuffer(self.weights, dtype=np.float64)
        return out


_PER_OUTCOME = {
    "seq": "q",
    "won": "b",
    "held": "b",
    "confidence": "d",
    "recorded": "d",
    "source": "i",
    "context": "i",
    "credit": "i",
}
"""The per-outcome columns and their array type codes."""

_DTYPES = {"q": np.int64, "b": np.int8, "d": np.float64, "i": np.int32}
