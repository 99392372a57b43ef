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
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from memworth.change import (
    BernoulliCusum,
    CusumReading,
    CusumState,
    ExplainingAway,
    OutcomeStream,
    reference_rates,
    scan_episodes,
)
from memworth.governance import GovernancePolicy
from memworth.window import failing_with
from memworth.window import hold as window_hold

__all__ = ["NamespaceStreams", "namespace_streams"]


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


def namespace_streams(
    policy: GovernancePolicy,
    ids: Sequence[str],
    sets: Sequence[Sequence[int]],
    success: np.ndarray,
    confidence: np.ndarray,
    contexts: Sequence[str | None] | None = None,
) -> NamespaceStreams:
    """The streams of a namespace's memories from its episodes, oldest first.

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
    rows = [list(dict.fromkeys(int(r) for r in s)) for s in sets]
    y = np.asarray(success, dtype=bool)
    w = np.asarray(confidence, dtype=float)
    reference = reference_rates(y, policy.change_reference_half_life)
    size = len(ids)
    if not rows:
        return NamespaceStreams(list(ids), {}, None, {}, math.inf)
    detector, rule = policy.detector(), ExplainingAway()
    state, shared = scan_episodes(detector, rule, rows, y, w, reference, size=size)
    alarm, level = policy.change_flags(state.statistic, state.observations)
    held: dict[str, tuple[str, ...]] = {}
    for m in np.flatnonzero(alarm).tolist():
        bar = dataclasses.replace(detector, threshold=policy.change_bar(level, float(state.observations[m])))
        held[ids[m]] = tuple(ids[j] for j in rule.holding(shared, state, bar, m))
    flagged = {mid for mid, by in held.items() if not by}
    rising = {ids[m] for m in np.flatnonzero(state.statistic >= detector.threshold / 2).tolist()}
    # each memory's retrievals, oldest first: (position in the log from 1, outcome)
    at: list[list[int]] = [[] for _ in range(size)]
    for t, r in enumerate(rows):
        for m in r:
            at[m].append(t + 1)
    frozen = [frozenset(ids[m] for m in r) for r in rows]
    window = policy.staleness_window
    fired: set[str] = set()
    explained: dict[str, tuple[str, ...]] = {}
    if policy.window_test:
        retrievals = {ids[m]: [(bool(y[p - 1]), frozen[p - 1]) for p in at[m]] for m in range(size) if at[m]}
        fired, explained = window_hold(
            retrievals, flagged | rising, window=window, drop=policy.staleness_drop, theta_low=policy.theta_low
        )
    suspects = fired | set(held)
    labelled = contexts is not None and any(c is not None for c in contexts)
    streams: dict[str, OutcomeStream] = {}
    for m in range(size):
        if not at[m]:
            continue
        mid, pos = ids[m], np.asarray(at[m], dtype=np.int64)
        ys = y[pos - 1]
        failed = [frozen[p - 1] for p, ok in zip(pos[-window:].tolist(), ys[-window:].tolist(), strict=True) if not ok]
        streams[mid] = OutcomeStream(
            ys,
            w[pos - 1],
            reference[pos - 1],
            pos,
            held.get(mid, ()),
            tuple(contexts[p - 1] for p in pos.tolist()) if labelled and contexts is not None else None,
            tuple(sorted(set(failing_with(mid, failed, flagged)) | set(explained.get(mid, ())))),
            mid in suspects,
            change_alarm=mid in held,
            change_level=level,
            reading=_reading(detector, state, m, float(reference[pos[-1] - 1])),
        )
    return NamespaceStreams(list(ids), streams, state, held, level)


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
