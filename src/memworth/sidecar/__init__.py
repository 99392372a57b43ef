"""Sidecar: Memory Worth for memories that live in another store, governed by id.

An existing memory store (a vector database, a LangChain retriever, a LangGraph store)
keeps its texts and embeddings; the sidecar keeps, for each of its memory ids, the
counts, status, standing, episodes, outcomes and audit trail, in a
:class:`memworth.MemoryStore` backend (SQLite, PostgreSQL or in-process) as *external*
memories: no text, no vector, never returned by the store's own recall. Everything the
store does for its own memories works on them: the append-only episode and outcome
log, replay, governance with its audit log, restore.

The loop: the other store proposes candidates; :meth:`Sidecar.retrieve` re-ranks them
with worth, drops suppressed or deprecated ones and logs the episode (or
:meth:`Sidecar.rerank` and :meth:`Sidecar.retrieved` do the two halves separately);
:meth:`Sidecar.record` reports the outcome; :meth:`Sidecar.worth` and
:meth:`Sidecar.suggestions` read what the evidence says.

The parts: ``sidecar`` holds the :class:`Sidecar` itself, ``records`` what it returns,
``arguments`` the checks on what it is given (candidate lists, ids, ``k``, the query).
"""

from memworth.sidecar.arguments import MAX_CANDIDATES, MAX_RETRIEVED, rank_scores
from memworth.sidecar.records import Ranked, Retrieval
from memworth.sidecar.sidecar import Sidecar
from memworth.store.report import MemoryReport

WorthReport = MemoryReport
"""What :meth:`Sidecar.worth` returns: the store's one :class:`memworth.store.report.MemoryReport`."""

__all__ = [
    "MAX_CANDIDATES",
    "MAX_RETRIEVED",
    "MemoryReport",
    "Ranked",
    "Retrieval",
    "Sidecar",
    "WorthReport",
    "rank_scores",
]
