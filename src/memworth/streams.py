"""A namespace's outcome streams and the change alarms that stand in it: one function for
the store and for ``memworth score``.

Governance reads, for every memory of a namespace, its outcome stream (one observation
per retrieval, in log order, weighted by the outcome's confidence, against the success
rate of all the namespace's episodes before it) and which tests stand against it. This
module computes both from the namespace's episodes alone, so that the store
(:meth:`memworth.MemoryStore.outcome_streams`, from its backend) and ``memworth score``
(from a retrieval log in DuckDB) decide alike:

* every memory's CUSUM, run over the episodes at once
  (:func:`memworth.change.scan_episodes`), gives an e-value; the alarms that stand are
  those the e-BH procedure rejects across the namespace at ``policy.change_alpha``
  (:meth:`memworth.governance.GovernancePolicy.change_flags`), so a hundred memories
  watched at once do not raise a hundred memories' worth of false alarms;
* an alarm whose failures a co-retrieved memory explains better is held
  (:class:`memworth.change.ExplainingAway`), at the bar e-BH set for that memory;
* the window test, when the policy runs it, and its own explaining away
  (:func:`memworth.window.hold`).
"""

from __future__ import annotations

import dataclasses
import math
from array import array
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from memworth.change import (
    BernoulliCusum,
    CusumReading,
    CusumState,
    ExplainingAway,
    OutcomeStream,
    ReferenceRate,
)
from memworth.errors import ValidationError
from memworth.governance import GovernancePolicy
from memworth.window import failing_with
from memworth.window import hold as window_hold

__all__ = ["NamespaceScan", "NamespaceStreams", "namespace_streams"]


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


class NamespaceScan:
    """A namespace's change detectors, advanced episode by episode; :meth:`read` gives the
    streams and alarms :func:`namespace_streams` gives for the same episodes.

    The store keeps one per namespace and advances it with the outcomes logged since it
    last read, so governing again costs the new outcomes, not the whole log again.
    ``ids`` names the rows (memories in order of first retrieval, after any given up front).

    Examples
    --------
    >>> import numpy as np
    >>> scan = NamespaceScan(GovernancePolicy())
    >>> scan.advance([["stale", "fine"]] * 40, np.ones(40, dtype=bool), np.ones(40))
    >>> scan.advance([["stale"], ["fine"]] * 12, np.array([False, True] * 12), np.ones(24))
    >>> scan.read().held, scan.episodes
    ({'stale': ()}, 64)
    """

    def __init__(self, policy: GovernancePolicy, ids: Sequence[str] = ()) -> None:
        self.policy = policy
        self.detector, self.rule = policy.detector(), ExplainingAway()
        self.ids: list[str] = []
        self._row: dict[str, int] = {}
        self.state = self.detector.start(0)
        self.shared = self.rule.start(0)
        self.reference = ReferenceRate(policy.change_reference_half_life)
        self.episodes = 0
        # compact columns, one entry per episode (a namespace may hold millions)
        self._y = array("b")
        self._w = array("d")
        self._ref = array("d")
        self._contexts: list[str | None] = []
        self._members: list[tuple[int, ...]] = []  # each episode's memories, by row
        self._at: list[array[int]] = []  # each memory's episodes (positions from 1)
        self._known(ids)

    def _known(self, ids: Sequence[str]) -> None:
        """Give rows to the memories of ``ids`` not seen before (in order)."""
        fresh = [mid for mid in dict.fromkeys(ids) if mid not in self._row]
        if not fresh:
            return
        for mid in fresh:
            self._row[mid] = len(self.ids)
            self.ids.append(mid)
            self._at.append(array("q"))
        self.state.grow(len(self.ids))
        self.shared.shared.extend({} for _ in fresh)

    def advance(
        self,
        sets: Sequence[Sequence[str]],
        success: np.ndarray,
        confidence: np.ndarray,
        contexts: Sequence[str | None] | None = None,
    ) -> None:
        """Add episodes, oldest first: the memories each retrieved (by id; one given twice
        counts once), its outcome, its confidence and its context label (or ``None``)."""
        y = np.asarray(success, dtype=bool)
        w = np.asarray(confidence, dtype=float)
        if y.ndim != 1 or len(sets) != y.size or w.shape != y.shape:
            raise ValidationError("sets", f"need one set, outcome and confidence per episode ({len(sets)} sets)")
        if not np.all(np.isfinite(w)) or np.any(w < 0) or np.any(w > 1):
            raise ValidationError("confidence", "must be within [0, 1]")
        if contexts is not None and len(contexts) != y.size:
            raise ValidationError("contexts", f"need one per episode ({y.size}), got {len(contexts)}")
        unique = [list(dict.fromkeys(str(m) for m in s)) for s in sets]
        self._known([mid for s in unique for mid in s])
        for t, members in enumerate(unique):
            ok, wt, rt = bool(y[t]), float(w[t]), self.reference.rate
            self.episodes += 1
            rows = tuple(self._row[mid] for mid in members)
            if rows:
                at = np.array(rows, dtype=np.int64)
                steps = self.detector.advance(self.state, at, ok, wt, rt, self.episodes)
                self.rule.update(self.shared, self.state, at, steps)
                for r in rows:
                    self._at[r].append(self.episodes)
            self.reference.add(ok)
            self._y.append(ok)
            self._w.append(wt)
            self._ref.append(rt)
            self._contexts.append(None if contexts is None else contexts[t])
            self._members.append(rows)

    def read(self) -> NamespaceStreams:
        """Every memory's stream so far, and the change alarms that stand now."""
        policy, detector, rule, state, shared = self.policy, self.detector, self.rule, self.state, self.shared
        ids, size = self.ids, len(self.ids)
        if not self.episodes:
            return NamespaceStreams(list(ids), {}, None, {}, math.inf)
        y = np.array(self._y, dtype=bool)
        w, reference = np.array(self._w, dtype=float), np.array(self._ref, dtype=float)
        alarm, level = policy.change_flags(state.statistic, state.observations)
        held: dict[str, tuple[str, ...]] = {}
        for m in np.flatnonzero(alarm).tolist():
            bar = dataclasses.replace(detector, threshold=policy.change_bar(level, float(state.observations[m])))
            held[ids[m]] = tuple(ids[j] for j in rule.holding(shared, state, bar, m))
        flagged = {mid for mid, by in held.items() if not by}
        rising = {ids[m] for m in np.flatnonzero(state.statistic >= detector.threshold / 2).tolist()}
        at, members, contexts = self._at, self._members, self._contexts

        def frozen(p: int) -> frozenset[str]:
            """The memories episode ``p`` (from 1) retrieved, by id."""
            return frozenset(ids[r] for r in members[p - 1])

        window = policy.staleness_window
        fired: set[str] = set()
        explained: dict[str, tuple[str, ...]] = {}
        if policy.window_test:
            retrievals = {ids[m]: [(bool(y[p - 1]), frozen(p)) for p in at[m]] for m in range(size) if at[m]}
            fired, explained = window_hold(
                retrievals, flagged | rising, window=window, drop=policy.staleness_drop, theta_low=policy.theta_low
            )
        suspects = fired | set(held)
        labelled = any(c is not None for c in contexts)
        streams: dict[str, OutcomeStream] = {}
        for m in range(size):
            if not at[m]:
                continue
            mid, pos = ids[m], np.array(at[m], dtype=np.int64)  # a copy: the column grows on
            ys = y[pos - 1]
            tail = zip(pos[-window:].tolist(), ys[-window:].tolist(), strict=True)
            failed = [frozen(p) for p, ok in tail if not ok]
            streams[mid] = OutcomeStream(
                ys,
                w[pos - 1],
                reference[pos - 1],
                pos,
                held.get(mid, ()),
                tuple(contexts[p - 1] for p in pos.tolist()) if labelled else None,
                tuple(sorted(set(failing_with(mid, failed, flagged)) | set(explained.get(mid, ())))),
                mid in suspects,
                change_alarm=mid in held,
                change_level=level,
                reading=_reading(detector, state, m, float(reference[pos[-1] - 1])),
            )
        return NamespaceStreams(list(ids), streams, state, held, level)


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


def _reading(detector: BernoulliCusum, state: CusumState, row: int, last_reference: float) -> CusumReading:
    """Row ``row`` of a namespace scan as :meth:`BernoulliCusum.scan` of that memory's stream reads it."""
    stat = float(state.statistic[row])
    rows = np.array([row], dtype=np.int64)
    return CusumReading(
        statistic=stat,
        threshold=detector.threshold,
        alarm=stat >= detector.threshold,
        first_alarm=int(state.first_alarm[row]) if state.first_alarm[row] >= 0 else None,
        change_point=int(state.since[row]) if state.since[row] >= 0 else None,
        baseline=float(detector.baseline(state, rows, np.array([last_reference]))[0]),
        observations=float(state.observations[row]),
    )
