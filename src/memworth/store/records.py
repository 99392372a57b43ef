"""What a store keeps: memories, episodes (one recall each), outcomes, audit entries."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from memworth.counts import Counts

__all__ = [
    "STANDINGS",
    "STATUSES",
    "AuditEntry",
    "Episode",
    "EpisodeItem",
    "Memory",
    "OutcomeRow",
    "ProbeDraw",
    "Recalled",
    "Verification",
]

STATUSES = ("active", "suppressed", "deprecated", "archived")
"""Every status a memory can have; recall only returns ``active`` ones."""

STANDINGS = ("normal", "promoted", "demoted", "re-verify")
"""Governance standing of a memory (note 003's promote / demote, the paper's re-verify)."""


@dataclass(frozen=True)
class Memory:
    """One stored memory with its evidence."""

    id: str
    text: str
    namespace: str
    metadata: dict[str, Any] = field(default_factory=dict)
    contexts: tuple[str, ...] = ()
    derived_from: tuple[str, ...] = ()
    part_of: tuple[str, ...] = ()
    status: str = "active"
    standing: str = "normal"
    created: float = 0.0
    updated: float = 0.0
    counts: Counts = field(default_factory=Counts)
    expires: float | None = None
    """When the memory expires (seconds since the epoch; None: never): from then on recall
    skips it, and the next recall or :meth:`MemoryStore.purge_expired` erases it."""

    def expired(self, now: float) -> bool:
        """Whether the memory's time to live has run out at ``now``."""
        return self.expires is not None and self.expires <= now

    def _repr_html_(self) -> str:
        from memworth.estimators import RawWorth
        from memworth.reprs import table

        c = self.counts
        row = [self.id, self.text, self.status, self.standing, float(RawWorth().value(c)), c.n, self.namespace]
        return table(["id", "text", "status", "standing", "worth", "retrievals", "namespace"], [row])


@dataclass(frozen=True)
class EpisodeItem:
    """One retrieved memory of an episode: its credit weight and how likely recall was to pick it."""

    memory_id: str
    weight: float
    propensity: float
    position: int
    probe: bool = False
    """Served as a probe: a memory under re-verify, on the small share of recalls that keep
    testing it (:attr:`memworth.MemoryStore.probe_share`); its propensity includes that share."""


@dataclass(frozen=True)
class ProbeDraw:
    """One randomised draw of a quarantined memory in contention for a recall
    (:meth:`memworth.MemoryStore.choose`): whether the draw let it compete (``probe``, with
    chance ``share``) or held it out (a *control*: it was not served, whatever else happened).

    A draw is logged with its episode (table ``probe_draws`` on the SQL backends) and never
    becomes an episode item: it reaches no recall result, counter, credit or replay. The probe
    test compares the outcomes of the probe draws with those of the control draws.
    """

    memory_id: str
    probe: bool
    share: float


@dataclass(frozen=True)
class Episode:
    """The handle of one recall: pass it (or its id) to ``MemoryStore.record``."""

    id: str
    namespace: str
    query: str
    context: str | None
    created: float
    items: tuple[EpisodeItem, ...]
    holdout: bool = False
    """Recalled without governance (similarity only), for :meth:`MemoryStore.holdout_report`."""
    draws: tuple[ProbeDraw, ...] = field(default=(), compare=False)
    """The probe draws of quarantined memories in contention for this recall (probes and
    controls, :class:`ProbeDraw`): written with the episode; reads of the episode do not
    return them (the probe test reads them with their outcomes, ``Backend.draw_outcomes``)."""


@dataclass(frozen=True)
class OutcomeRow:
    """One recorded outcome, as the append-only log keeps it."""

    episode_id: str
    success: bool
    source: str
    confidence: float
    recorded: float
    seq: int = 0
    namespace: str = ""
    """The namespace of its episode (the log is read namespace by namespace)."""
    propagation: float | None = None
    """The provenance credit share it was credited with (None: logged before schema 3)."""
    max_hops: int | None = None
    """How far that credit travelled (None: logged before schema 3)."""
    settings_version: int | None = None
    """The store's settings version in force when it was credited (:meth:`MemoryStore.config`;
    0: the defaults, never set; None: logged before schema 6, before versions were kept)."""

    def row(self) -> dict[str, Any]:
        """The JSON shape every face lists an outcome in (Python ``outcome_page``, HTTP
        ``/v1/outcomes``, CLI ``outcomes --json``).

        Examples
        --------
        >>> OutcomeRow("e1", True, "explicit", 1.0, 5.0, 3, "default", 0.7, 3, 2).row()["settings_version"]
        2
        """
        return {
            "seq": self.seq,
            "episode": self.episode_id,
            "outcome": "success" if self.success else "failure",
            "source": self.source,
            "confidence": self.confidence,
            "recorded": self.recorded,
            "namespace": self.namespace,
            "propagation": self.propagation,
            "max_hops": self.max_hops,
            "settings_version": self.settings_version,
        }


@dataclass(frozen=True)
class Verification:
    """A verified outcome of an episode, and how the source that reported it fared.

    ``source`` and ``reported`` are the outcome already recorded for the episode when it
    was verified (``None`` when the verification itself became the episode's outcome).
    """

    episode_id: str
    namespace: str
    success: bool
    source: str | None
    reported: bool | None
    recorded: float
    seq: int = 0

    @property
    def agreed(self) -> bool | None:
        return None if self.reported is None else self.reported == self.success


@dataclass(frozen=True)
class Recalled:
    """A memory returned by recall, with everything that ranked it."""

    memory: Memory
    similarity: float
    worth: float
    lower: float
    upper: float
    value_class: str
    score: float
    propensity: float
    explored: bool
    probe: bool = False
    """A quarantined memory (standing ``re-verify``) served as a probe: treat its text with doubt."""

    def row(self) -> dict[str, Any]:
        """The JSON shape every face shows a recalled memory in (HTTP, MCP, ``memworth recall --json``)."""
        return {
            "id": self.memory.id,
            "text": self.memory.text,
            "similarity": self.similarity,
            "worth": self.worth,
            "lower": self.lower,
            "upper": self.upper,
            "class": self.value_class,
            "score": self.score,
            "propensity": self.propensity,
            "explored": self.explored,
            "probe": self.probe,
        }


@dataclass(frozen=True)
class AuditEntry:
    """One change of a memory's ``status`` or ``standing``: what, when, why, under which settings."""

    seq: int
    memory_id: str
    namespace: str
    action: str
    field: str
    old: str
    new: str
    reason: str
    settings: dict[str, Any]
    at: float


def as_matrix(rows: list[bytes], dimension: int) -> np.ndarray:
    """Stored float32 blobs to a (rows, dimension) matrix."""
    if not rows:
        return np.zeros((0, dimension), dtype=np.float32)
    return np.frombuffer(b"".join(rows), dtype=np.float32).reshape(len(rows), dimension).copy()
