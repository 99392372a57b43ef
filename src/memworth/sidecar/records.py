"""What the sidecar returns: a re-ranked candidate, a logged retrieval, a memory's worth report."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from memworth.store.records import Episode

__all__ = ["Ranked", "Retrieval"]


@dataclass(frozen=True)
class Ranked:
    """One candidate after re-ranking: its final score and the evidence behind it.

    ``similarity`` is the score the other store gave (or :func:`~memworth.sidecar.rank_scores`
    of its position); ``registered`` is False for an id the sidecar has never seen (no evidence).
    """

    id: str
    score: float
    similarity: float
    worth: float
    lower: float
    upper: float
    retrievals: float
    value_class: str
    standing: str
    registered: bool
    propensity: float = 1.0
    explored: bool = False
    probe: bool = False


@dataclass(frozen=True)
class Retrieval:
    """What :meth:`Sidecar.retrieve` returns: the picks, best first, and the logged episode."""

    episode: Episode
    results: tuple[Ranked, ...]
    diagnostics: dict[str, Any] = field(default_factory=dict)
    """``ablation`` (what the store's planner dropped) and ``holdout`` (an ungoverned episode)."""

    @property
    def ids(self) -> list[str]:
        return [r.id for r in self.results]


