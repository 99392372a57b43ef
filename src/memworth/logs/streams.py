"""Each memory's outcome stream from a scored log, built the way the store builds its own.

This is :meth:`memworth.MemoryStore.outcome_streams` over the kept episode log instead of
a backend: one observation per retrieval, in time order, weighted by the outcome's
confidence, against the success rate of all the namespace's episodes before it
(:func:`memworth.change.reference_rates`), with every memory's CUSUM run at once and
the co-retrieved memories that explain an alarm (:func:`memworth.change.scan_episodes`
with :class:`memworth.change.ExplainingAway`), as the store does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from memworth.change import CusumState, ExplainingAway, OutcomeStream, reference_rates, scan_episodes
from memworth.counts import Counts
from memworth.governance import GovernancePolicy
from memworth.store.records import Episode, EpisodeItem
from memworth.store.store import _failing_with

__all__ = ["Streams", "namespace_streams"]


@dataclass
class Streams:
    """One namespace's streams, its last retrievals (the window test's counts) and its detectors' state."""

    ids: list[str]
    streams: dict[str, OutcomeStream]
    recent: dict[str, Counts]
    state: CusumState | None
    held: dict[str, tuple[str, ...]]


def namespace_streams(con: Any, namespace: str, policy: GovernancePolicy) -> Streams:
    """Streams, window counts and CUSUM state of every memory of ``namespace`` in the state tables of ``con``."""
    eps = con.execute(
        "SELECT pos, success, confidence, context, episode_id FROM episodes WHERE namespace = ? ORDER BY pos",
        [namespace],
    ).fetchnumpy()
    items = con.execute(
        "SELECT pos, memory_id, credit FROM items WHERE namespace = ? ORDER BY pos, memory_id", [namespace]
    ).fetchnumpy()
    success = np.asarray(eps["success"], dtype=bool)
    confidence = np.asarray(eps["confidence"], dtype=float)
    contexts = [None if c is None or c != c else str(c) for c in np.asarray(eps["context"], dtype=object)]
    pos = np.asarray(items["pos"], dtype=np.int64)
    mids = np.asarray(items["memory_id"], dtype=object)
    credit = np.asarray(items["credit"], dtype=float)
    ids, first = np.unique(mids, return_index=True)
    order_seen = ids[np.argsort(first)]  # first-retrieved first, as the store lists them
    index = {str(m): i for i, m in enumerate(order_seen)}
    row_of = np.array([index[str(m)] for m in mids], dtype=np.int64)
    reference = reference_rates(success, policy.change_reference_half_life)
    window = policy.staleness_window
    by_memory = np.lexsort((pos, row_of))
    bounds = np.flatnonzero(np.r_[True, row_of[by_memory][1:] != row_of[by_memory][:-1], True])
    labelled = any(c is not None for c in contexts)
    streams: dict[str, OutcomeStream] = {}
    recent: dict[str, Counts] = {}
    state: CusumState | None = None
    held: dict[str, tuple[str, ...]] = {}
    flagged: set[str] = set()
    if policy.change_detection and pos.size:
        starts = np.flatnonzero(np.r_[True, pos[1:] != pos[:-1]])
        sets = np.split(row_of, starts[1:])
        detector, rule = policy.detector(), ExplainingAway()
        state, shared = scan_episodes(detector, rule, sets, success, confidence, reference, size=len(order_seen))
        for m in np.flatnonzero(state.statistic >= detector.threshold).tolist():
            held[str(order_seen[m])] = tuple(str(order_seen[j]) for j in rule.holding(shared, state, detector, m))
        flagged = {mid for mid, by in held.items() if not by}
        members = {int(p): [str(x) for x in order_seen[s]] for p, s in zip(pos[starts], sets, strict=True)}
    for b in range(bounds.size - 1):
        sel = by_memory[bounds[b] : bounds[b + 1]]
        mid = str(order_seen[row_of[sel[0]]])
        at = pos[sel]
        y, w = success[at - 1], confidence[at - 1]
        tail = slice(max(0, at.size - window), at.size)
        mass = credit[sel][tail] * w[tail]
        recent[mid] = Counts(float(mass[y[tail]].sum()), float(mass[~y[tail]].sum()), float(at[tail].size))
        if state is None:
            continue
        failed = (
            [
                Episode(
                    str(eps["episode_id"][p - 1]),
                    namespace,
                    "",
                    contexts[p - 1],
                    0.0,
                    tuple(EpisodeItem(x, 0.0, 1.0, i) for i, x in enumerate(members[int(p)])),
                )
                for p in at[tail][~y[tail]]
            ]
            if flagged
            else []
        )
        streams[mid] = OutcomeStream(
            y,
            w,
            reference[at - 1],
            at,
            held.get(mid, ()),
            tuple(contexts[p - 1] for p in at) if labelled else None,
            _failing_with(mid, failed, flagged),
        )
    return Streams([str(m) for m in order_seen], streams, recent, state, held)
