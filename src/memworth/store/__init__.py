"""The governed memory store: memories, recall, outcomes, the log, and the backends under them."""

from memworth.store.backend import Backend, Increment, NewMemory
from memworth.store.records import STATUSES, AuditEntry, Episode, EpisodeItem, Memory, OutcomeRow, Recalled
from memworth.store.store import DEFAULT_SOURCES, MAX_TEXT, MemoryStore, Page, Recall, ReplayReport, credit_increments

__all__ = [
    "DEFAULT_SOURCES",
    "MAX_TEXT",
    "STATUSES",
    "AuditEntry",
    "Backend",
    "Episode",
    "EpisodeItem",
    "Increment",
    "Memory",
    "MemoryStore",
    "NewMemory",
    "OutcomeRow",
    "Page",
    "Recall",
    "Recalled",
    "ReplayReport",
    "credit_increments",
]
