"""Each memory's outcome stream from a scored log, built the way the store builds its own.

This is :meth:`memworth.MemoryStore.outcome_streams` over the kept episode log instead of
a backend: one observation per retrieval, in time order, weighted by the outcome's
confidence, against the success rate of all the namespace's episodes before it
(:func:`memworth.change.reference_rates`), with every memory's CUSUM run at once and
the co-retrieved memories that explain an alarm (:func:`memworth.change.scan_episodes`
with :class:`memworth.change.ExplainingAway`), as the store does. The window test's
counts (each memory's last ``staleness_window`` retrievals) are SQL sums.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from memworth.change import CusumState, ExplainingAway, OutcomeStream, reference_rates, scan_episodes
from memworth.counts import Counts
from memworth.governance import GovernancePolicy
from memworth.window import failing_with
from memworth.window import hold as window_hold

__all__ = ["Streams", "namespace_streams", "recent_counts"]


@dataclass
class Streams:
    """One namespace's streams, its last retrievals (the window test's counts) and its detectors' state."""

    ids: list[str]
    streams: dict[str, OutcomeStream]
    recent: dict[str, Counts]
    state: CusumState | None
    held: dict[str, tuple[str, ...]]


def recent_counts(con: Any, namespace: str, window: int) -> dict[str, Counts]:
    """Each memory's counts over its last ``window`` retrievals (what the store's ``recent_counts`` gives)."""
    rows = con.execute(
        """
        SELECT memory_id, coalesce(sum(mass) FILTER (WHERE success), 0), coalesce(sum(mass) FILTER (WHERE NOT success), 0),
               count(*)
        FROM (SELECT i.memory_id, i.credit * e.confidence AS mass, e.success,
                     row_number() OVER (PARTITION BY i.memory_id ORDER BY i.pos DESC) AS back
              FROM items i JOIN episodes e ON e.namespace = i.namespace AND e.pos = i.pos
              WHERE i.namespace = ?)
        WHERE back <= ? GROUP BY memory_id
        """,
        [namespace, window],
    ).fetchall()
    return {str(mid): Counts(float(s), float(f), float(n)) for mid, s, f, n in rows}


def namespace_streams(con: Any, namespace: str, policy: GovernancePolicy) -> Streams:
    """Streams, window counts and CUSUM state of every memory of ``namespace`` in the state tables of ``con``.

    Without ``policy.change_detection`` only the window counts are read (the store reads
    no streams then either).
    """
    recent = recent_counts(con, namespace, policy.staleness_window)
    if not policy.change_detection:
        return Streams(sorted(recent), {}, recent, None, {})
    eps = con.execute(
        "SELECT success, confidence, context, episode_id FROM episodes WHERE namespace = ? ORDER BY pos", [namespace]
    ).fetchnumpy()
    codes = """
        WITH firsts AS (SELECT memory_id, min(pos) AS first FROM items WHERE namespace = $ns GROUP BY memory_id)
        SELECT memory_id, row_number() OVER (ORDER BY first, memory_id) - 1 AS code FROM firsts
    """
    ids = [str(m) for m, _ in con.execute(codes + " ORDER BY code", {"ns": namespace}).fetchall()]
    items = con.execute(
        f"SELECT i.pos, c.code FROM items i JOIN ({codes}) c USING (memory_id) WHERE i.namespace = $ns ORDER BY i.pos, c.code",
        {"ns": namespace},
    ).fetchnumpy()
    success = np.asarray(eps["success"], dtype=bool)
    confidence = np.asarray(eps["confidence"], dtype=float)
    contexts = [None if c is None or c != c else str(c) for c in np.asarray(eps["context"], dtype=object)]
    labelled = any(c is not None for c in contexts)
    pos = np.asarray(items["pos"], dtype=np.int64)
    code = np.asarray(items["code"], dtype=np.int64)
    reference = reference_rates(success, policy.change_reference_half_life)
    starts = np.flatnonzero(np.r_[True, pos[1:] != pos[:-1]]) if pos.size else np.zeros(0, dtype=np.int64)
    sets = np.split(code, starts[1:]) if pos.size else []
    detector, rule = policy.detector(), ExplainingAway()
    state, shared = scan_episodes(detector, rule, sets, success, confidence, reference, size=len(ids))
    held = {
        ids[m]: tuple(ids[j] for j in rule.holding(shared, state, detector, m))
        for m in np.flatnonzero(state.statistic >= detector.threshold).tolist()
    }
    flagged = {mid for mid, by in held.items() if not by}
    rising = {ids[m] for m in np.flatnonzero(state.statistic >= detector.threshold / 2).tolist()}
    members = {int(p): [ids[x] for x in s] for p, s in zip(pos[starts], sets, strict=True)}
    window = policy.staleness_window
    by_memory = np.argsort(code, kind="stable")  # each memory's retrievals, oldest first
    bounds = np.flatnonzero(np.r_[True, code[by_memory][1:] != code[by_memory][:-1], True])
    # the window test's explaining away, as the store runs it (memworth.window.hold)
    frozen = {p: frozenset(m) for p, m in members.items()}
    retrievals = {
        ids[code[by_memory[bounds[b]]]]: [
            (bool(success[p - 1]), frozen[int(p)]) for p in pos[by_memory[bounds[b] : bounds[b + 1]]]
        ]
        for b in range(bounds.size - 1)
    }
    fired, explained = window_hold(
        retrievals,
        flagged | rising,
        window=window,
        drop=policy.staleness_drop,
        theta_low=policy.theta_low,
    )
    suspects = fired | set(held)
    streams: dict[str, OutcomeStream] = {}
    for b in range(bounds.size - 1):
        sel = by_memory[bounds[b] : bounds[b + 1]]
        mid = ids[code[sel[0]]]
        at = pos[sel]
        y = success[at - 1]
        failed_at = at[-window:][~y[-window:]]
        failed = [frozen[int(p)] for p in failed_at]
        streams[mid] = OutcomeStream(
            y,
            confidence[at - 1],
            reference[at - 1],
            at,
            held.get(mid, ()),
            tuple(contexts[p - 1] for p in at) if labelled else None,
            tuple(sorted(set(failing_with(mid, failed, flagged)) | set(explained.get(mid, ())))),
            mid in suspects,
        )
    return Streams(ids, streams, recent, state, held)
