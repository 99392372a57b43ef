"""Each memory's outcome stream from a scored log, built the way the store builds its own.

This is :meth:`memworth.MemoryStore.outcome_streams` over the kept episode log instead of
a backend: one observation per retrieval, in time order, weighted by the outcome's
confidence, against the success rate of all the namespace's episodes before it
(:func:`memworth.signals.change_detection.reference_rates`), with every memory's CUSUM run at once, the
alarms that stand after e-BH across the namespace and the co-retrieved memories that
explain an alarm: the store's own function, :func:`memworth.signals.outcome_streams.namespace_streams`,
reads the episodes. The window test's counts (each memory's last
``staleness_window`` retrievals) are SQL sums (:data:`RECENT_SQL`, run by both engines).

An item with credit 0 (a memory the agent said it did not use, ``record(..., used=...)``)
is no observation: it is left out of the streams, the window counts and the detectors
(:data:`CREDITED`), as the store leaves it out of its own
(:class:`memworth.store.followed.Followed`); its retrieval still counts in ``n``.

:func:`streams_of` works on one namespace's rows as arrays, whichever engine gathered
them (DuckDB here, Spark in :mod:`memworth.spark`); :func:`namespace_rows` fetches
those arrays from the DuckDB state tables.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from memworth.counts import Counts
from memworth.governance import GovernancePolicy
from memworth.signals.change_detection import CusumState, OutcomeStream
from memworth.signals.outcome_streams import namespace_streams as namespace_streams_of

__all__ = [
    "CREDITED",
    "RECENT_SQL",
    "NamespaceRows",
    "Streams",
    "credited",
    "namespace_rows",
    "namespace_streams",
    "reads_log",
    "recent_counts",
    "streams_of",
]


@dataclass
class Streams:
    """One namespace's streams, its last retrievals (the window test's counts) and its detectors' state."""

    ids: list[str]
    streams: Mapping[str, OutcomeStream]
    recent: dict[str, Counts]
    state: CusumState | None
    held: dict[str, tuple[str, ...]]


@dataclass
class NamespaceRows:
    """One namespace's log as arrays: its items and its episodes in time order.

    ``pos``, ``memory_id`` and ``credit`` have one entry per retrieved item; ``pos`` is
    the item's episode, numbered 1, 2, ... in time order. ``success``, ``confidence`` and
    ``context`` have one entry per episode (entry ``p - 1`` for episode ``p``).
    """

    pos: np.ndarray
    memory_id: np.ndarray
    credit: np.ndarray
    success: np.ndarray
    confidence: np.ndarray
    context: list[str | None]


CREDITED = "credit > 0"
"""The SQL predicate of an item that is an observation of its episode's outcome: one with
credit. Every read of the items for streams, window counts or detectors filters on it
(:data:`RECENT_SQL`, :mod:`memworth.logs.detectors`; :func:`credited` for arrays)."""


def credited(credit: np.ndarray) -> np.ndarray:
    """Which items are observations (:data:`CREDITED`, over an array of the items' credit)."""
    return np.asarray(credit, dtype=float) > 0


RECENT_SQL = (
    """
SELECT namespace, memory_id,
       coalesce(sum(mass) FILTER (WHERE success), 0) AS recent_success,
       coalesce(sum(mass) FILTER (WHERE NOT success), 0) AS recent_failure,
       count(*) AS recent_n
FROM (SELECT namespace, memory_id, credit * confidence AS mass, success,
             row_number() OVER (PARTITION BY namespace, memory_id ORDER BY pos DESC) AS back
      FROM {log} WHERE """
    + CREDITED
    + """)
WHERE back <= {window} GROUP BY namespace, memory_id
"""
)
"""Each memory's counts over its last ``window`` retrievals with credit (what the store's
``recent_counts`` gives), from ``log`` (namespace, pos, memory_id, credit, confidence, success
per item). The same SQL runs in DuckDB (:func:`recent_counts`) and in Spark (:mod:`memworth.spark`)."""


def recent_counts(con: Any, namespace: str, window: int) -> dict[str, Counts]:
    """Each memory of ``namespace``'s counts over its last ``window`` retrievals (:data:`RECENT_SQL`)."""
    log = """(SELECT i.namespace, i.pos, i.memory_id, i.credit, e.confidence, e.success
              FROM items i JOIN episodes e ON e.namespace = i.namespace AND e.pos = i.pos WHERE i.namespace = $ns)"""
    rows = con.execute(RECENT_SQL.format(log=log, window=int(window)), {"ns": namespace}).fetchall()
    return {str(mid): Counts(float(s), float(f), float(n)) for _, mid, s, f, n in rows}


def reads_log(policy: GovernancePolicy) -> bool:
    """Whether scoring under ``policy`` reads the kept episode log after the sums: the window
    test reads each memory's last retrievals (:data:`RECENT_SQL`), change detection the
    outcome streams. Without either, a memory's proposal depends on its counts alone (the
    window counts feed only the window test; :meth:`GovernancePolicy.propose`)."""
    return bool(policy.staleness.window_test or policy.change.enabled)


def streams_of(rows: NamespaceRows | None, policy: GovernancePolicy, recent: dict[str, Counts]) -> Streams:
    """Streams and CUSUM state of every memory of one namespace's rows, with its window counts ``recent``.

    Without ``policy.change.enabled`` no streams are built (the store reads none then
    either) and ``rows`` may be ``None``. Items without credit are left out (:func:`credited`).
    """
    if not policy.change.enabled or rows is None:
        return Streams(sorted(recent), {}, recent, None, {})
    kept = credited(rows.credit)
    names, item_pos = rows.memory_id[kept].astype(str), rows.pos[kept].astype(np.int64)
    uniq, inv = np.unique(names, return_inverse=True)
    first = np.full(uniq.size, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(first, inv, item_pos)
    by_first = np.lexsort((uniq, first))  # memories numbered by first retrieval, ties by id
    code_of = np.empty(uniq.size, dtype=np.int64)
    code_of[by_first] = np.arange(uniq.size)
    ids = [str(m) for m in uniq[by_first]]
    code = code_of[inv]
    sets: list[list[int]] = [[] for _ in range(rows.success.size)]  # each episode's memories, by position from 1
    for i in np.lexsort((code, item_pos)).tolist():
        sets[int(item_pos[i]) - 1].append(int(code[i]))
    found = namespace_streams_of(
        policy, ids, sets, np.asarray(rows.success, dtype=bool), np.asarray(rows.confidence, dtype=float), rows.context
    )
    return Streams(ids, found.streams, recent, found.state, found.held)


def namespace_rows(con: Any, namespace: str) -> NamespaceRows:
    """The items and episodes of ``namespace`` in the DuckDB state tables of ``con``."""
    eps = con.execute(
        "SELECT success, confidence, context FROM episodes WHERE namespace = ? ORDER BY pos", [namespace]
    ).fetchnumpy()
    items = con.execute(
        "SELECT pos, memory_id, credit FROM items WHERE namespace = ? ORDER BY pos, memory_id", [namespace]
    ).fetchnumpy()
    return NamespaceRows(
        pos=np.asarray(items["pos"], dtype=np.int64),
        memory_id=np.asarray(items["memory_id"], dtype=object),
        credit=np.asarray(items["credit"], dtype=float),
        success=np.asarray(eps["success"], dtype=bool),
        confidence=np.asarray(eps["confidence"], dtype=float),
        context=[None if c is None or c != c else str(c) for c in np.asarray(eps["context"], dtype=object)],
    )


def namespace_streams(con: Any, namespace: str, policy: GovernancePolicy) -> Streams:
    """Streams, window counts and CUSUM state of every memory of ``namespace`` in the state tables of ``con``.

    With change detection on, the namespace's detectors are taken up where the state's
    last run left them, advanced over the episodes kept since, and saved again
    (:mod:`memworth.logs.detectors`): the same streams :func:`streams_of` gives from the
    whole kept log, at the cost of the new episodes.
    """
    from memworth.logs.detectors import follow, keep

    recent = recent_counts(con, namespace, policy.staleness.window) if policy.staleness.window_test else {}
    if not policy.change.enabled:
        return streams_of(None, policy, recent)
    scan, read = follow(con, namespace, policy)
    keep(con, namespace, scan, read)
    found = scan.read_view()  # each stream made as score_namespace looks it up
    return Streams(found.ids, found.streams, recent, found.state, found.held)
