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

import dataclasses
import math
from array import array
from collections.abc import Sequence
from dataclasses import dataclass

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
)
from memworth.signals.window_test import failing_with
from memworth.signals.window_test import hold as window_hold

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
        self._members = array("i")  # each episode's memories, by row: _members[_starts[p-1]:_starts[p]]
        self._starts = array("q", [0])
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
            self._at.append(array("i"))
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
            self._members.extend(rows)
            self._starts.append(len(self._members))

    def snapshot(self) -> dict[str, np.ndarray]:
        """The detectors' learned state as arrays (copies): the CUSUM state, the shared
        evidence (each memory's entries in order), the reference rate and the reference
        column. With the episodes themselves, :meth:`resume` rebuilds this scan."""
        state, shared = self.state, self.shared.shared
        return {
            "statistic": state.statistic.copy(),
            "observations": state.observations.copy(),
            "successes": state.successes.copy(),
            "expected": state.expected.copy(),
            "since": state.since.copy(),
            "first_alarm": state.first_alarm.copy(),
            "shared_starts": np.cumsum([0] + [len(d) for d in shared], dtype=np.int64),
            "shared_keys": np.array([j for d in shared for j in d], dtype=np.int64),
            "shared_values": np.array([v for d in shared for v in d.values()], dtype=np.float64),
            "reference_state": np.array(self.reference.state(), dtype=np.float64),
            "reference": np.array(self._ref, dtype=np.float64),
        }

    @classmethod
    def resume(
        cls,
        policy: GovernancePolicy,
        ids: Sequence[str],
        snapshot: dict[str, np.ndarray],
        members: np.ndarray,
        starts: np.ndarray,
        success: np.ndarray,
        confidence: np.ndarray,
        contexts: Sequence[str | None],
        at: Sequence[np.ndarray] | None = None,
    ) -> NamespaceScan:
        """The scan :meth:`snapshot` was taken of, over episodes that retrieved ``members[starts[p]:
        starts[p + 1]]`` (rows of ``ids``, each once, in order) with the given outcomes,
        confidences and contexts; ``at``, when known, each row's episodes (positions from 1,
        ascending; found from ``members`` otherwise). ValueError when the parts do not fit
        together (then scan the episodes again instead)."""
        scan = cls(policy)
        size, episodes = len(ids), int(np.asarray(success).size)
        rows = np.ascontiguousarray(members, dtype=np.int32)
        offsets = np.ascontiguousarray(starts, dtype=np.int64)
        if len(set(ids)) != size:
            raise ValueError("ids repeat")
        if offsets.shape != (episodes + 1,) or offsets[0] != 0 or offsets[-1] != rows.size or np.any(np.diff(offsets) < 0):
            raise ValueError("episode offsets do not fit the members")
        if rows.size and (rows.min() < 0 or rows.max() >= size):
            raise ValueError("members refer past the ids")
        if np.asarray(confidence).shape != (episodes,) or len(contexts) != episodes:
            raise ValueError("need one confidence and one context per episode")
        state = CusumState(*(np.array(snapshot[k]) for k in _STATE))
        if any(getattr(state, k).shape != (size,) for k in _STATE):
            raise ValueError("the CUSUM state does not have one row per memory")
        state.since, state.first_alarm = state.since.astype(np.int64), state.first_alarm.astype(np.int64)
        keys, values = np.asarray(snapshot["shared_keys"]), np.asarray(snapshot["shared_values"])
        bounds = np.asarray(snapshot["shared_starts"])
        if bounds.shape != (size + 1,) or bounds[0] != 0 or bounds[-1] != keys.size or keys.shape != values.shape:
            raise ValueError("the shared evidence does not fit the memories")
        if keys.size and (keys.min() < 0 or keys.max() >= size):
            raise ValueError("the shared evidence refers past the memories")
        reference = np.asarray(snapshot["reference"], dtype=np.float64)
        if reference.shape != (episodes,):
            raise ValueError("need one reference rate per episode")
        scan.ids = list(ids)
        scan._row = {mid: i for i, mid in enumerate(scan.ids)}
        scan.state = state
        scan.shared.shared = [
            dict(zip(keys[a:b].tolist(), values[a:b].tolist(), strict=True))
            for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True)
        ]
        scan.reference.restore(*np.asarray(snapshot["reference_state"], dtype=np.float64).tolist())
        scan.episodes = episodes
        scan._y = array("b", np.asarray(success, dtype=bool).astype(np.int8).tobytes())
        scan._w = array("d", np.ascontiguousarray(confidence, dtype=np.float64).tobytes())
        scan._ref = array("d", reference.tobytes())
        scan._contexts = list(contexts)
        scan._members = array("i", rows.tobytes())
        scan._starts = array("q", offsets.tobytes())
        if at is not None:
            if len(at) != size or sum(len(a) for a in at) != rows.size:
                raise ValueError("the episodes of each memory do not fit the members")
            scan._at = [array("i", np.asarray(a, dtype=np.int32).tobytes()) for a in at]
        elif size:
            owner = np.repeat(np.arange(1, episodes + 1, dtype=np.int32), np.diff(offsets))
            order = np.argsort(rows, kind="stable")
            split = np.cumsum(np.bincount(rows, minlength=size))[:-1]
            scan._at = [array("i", part.tobytes()) for part in np.split(owner[order], split)]
        return scan

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
        at, members, starts, contexts = self._at, self._members, self._starts, self._contexts

        def frozen(p: int) -> frozenset[str]:
            """The memories episode ``p`` (from 1) retrieved, by id."""
            return frozenset(ids[r] for r in members[starts[p - 1] : starts[p]])

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


_STATE = ("statistic", "observations", "successes", "expected", "since", "first_alarm")
"""The arrays of a :class:`memworth.signals.change_detection.CusumState`, in its constructor's order."""


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
