"""The server's long calls, as plain data: what ``/v1/govern``, ``/v1/replay`` and ``/v1/queue`` answer.

The dashboard's governance page (:func:`memworth.server.dashboard.pages.governance_page`, a
govern that applies nothing, and the queue) is one too: its page data pickles whole.

Each function takes a store object and the tenant's namespace and returns the route's JSON
answer, so it runs the same on one of the server's store objects or in a worker process
(:mod:`memworth.server.processes`), which sends back only plain data. These are the calls
that read a namespace's whole log or every memory of it: on 10,000 outcomes (measured with
``benchmarks/bench_http.py``'s store, one warm store object) replay took 1.6-2.1 s, govern
0.95 s warm and 5.8 s cold, the queue 0.2-0.5 s; the holdout report, sources, audit and
outcome pages, one memory's worth and the key lookup took 6-75 ms warm and stay on the
server's objects (a trip to a process costs a few ms and, with one process, a wait behind
another tenant's govern). The holdout report and a memory's worth read the namespace's log
too: the first time a store object serves them for a namespace they took 1.0 s and 2.6 s
(cold), then follow the log from where they left it.

Each function is module-level (a worker process finds it by name) and only reads its
arguments; the route counts the metrics from the answer. A call that changes something
(govern) runs in one transaction with the rendering of its answer, wherever it runs
(:func:`memworth.server.answers.checked`): its changes commit only once the answer is known
to render, so a failure to answer there rolls them back.
"""

from __future__ import annotations

from typing import Any

from memworth.server.answers import checked
from memworth.store import MemoryStore

__all__ = ["govern", "queue", "replay", "rescan"]


def govern(store: MemoryStore, namespace: str, apply: bool) -> dict[str, Any]:
    """``POST /v1/govern``: :meth:`memworth.MemoryStore.govern`, its report's row, committed
    with the answer rendered."""
    return checked(store, lambda s: s.govern(apply=apply, namespace=namespace).row())


def replay(store: MemoryStore, namespace: str) -> dict[str, Any]:
    """``GET /v1/replay``: whether the namespace's counters equal the ones its log rebuilds
    (:meth:`memworth.MemoryStore.replay`), and where they differ."""
    r = store.replay()
    mine = [(mid, live, want) for ns, mid, live, want in r.mismatches if ns == namespace]
    return {
        "consistent": not mine,
        "mismatches": [{"id": mid, "live": live.__dict__, "log": want.__dict__} for mid, live, want in mine],
    }


def queue(store: MemoryStore, namespace: str) -> list[dict[str, Any]]:
    """``GET /v1/queue``: the quarantined memories, each with its report's row."""
    return [r.row() for r in store.queue(namespace=namespace)]


def rescan(store: MemoryStore, namespace: str) -> None:
    """What a store object of the server catches up on after a govern ran elsewhere: its live
    change statistics for the namespace (an :class:`memworth.signals.coretrieval.AlarmSplitter`'s, kept
    only where it records outcomes), scanned again as its own govern would have (from where it
    last read the log)."""
    if namespace in store._live:
        store.outcome_streams(namespace)
