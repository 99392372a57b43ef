"""Each memory's outcome stream from a scored log, built the way the store builds its own.

This is :meth:`memworth.MemoryStore.outcome_streams` over the kept episode log instead of
a backend: one observation per retrieval, in time order, weighted by the outcome's
confidence, against the success rate of all the namespace's episodes before it
(:func:`memworth.change.reference_rates`), with every memory's CUSUM run at once, the
alarms that stand after e-BH across the namespace and the co-retrieved memories that
explain an alarm: the store's own function, :func:`memworth.streams.namespace_streams`,
reads the episodes this module fetches. The window test's counts (each memory's last
``staleness_window`` retrievals) are SQL sums.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from memworth.change import CusumState, OutcomeStream
from memworth.counts import Counts
from memworth.governance import GovernancePolicy
from memworth.streams import namespace_streams as namespace_streams_of

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
    pos = np.asarray(items["pos"], dtype=np.int64)
    code = np.asarray(items["code"], dtype=np.int64)
    sets: list[list[int]] = [[] for _ in range(success.size)]  # each episode's memories, by position from 1
    for p, c in zip(pos.tolist(), code.tolist(), strict=True):
        sets[p - 1].append(c)
    found = namespace_streams_of(policy, ids, sets, success, confidence, contexts)
    state, streams, held = found.state, found.streams, found.held
    return Streams(ids, streams, recent, state, held)
