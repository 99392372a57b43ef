"""What every part of :class:`memworth.store.MemoryStore` shares: its settings and caches, declared once.

The store is one object made of parts, one module each: recall
(:mod:`memworth.store.recall`), recording outcomes (:mod:`memworth.store.recording`),
reading the log (:mod:`memworth.store.log_queries`), governance
(:mod:`memworth.store.governing`), the review of quarantined memories
(:mod:`memworth.store.review`) and the hot tier (:mod:`memworth.store.hot`).
:class:`memworth.store.store.MemoryStore` joins them and sets, in its constructor,
the attributes declared here. Each part inherits :class:`StoreState` so the type
checker knows the attributes and the methods one part calls on another; at run time
it declares nothing (the store's own methods are the ones found).
"""

from __future__ import annotations

import builtins
import contextlib
import threading
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from memworth.embed.encoders import Encoder
from memworth.governance import GovernancePolicy
from memworth.ranking import ScoreRule
from memworth.signals.coretrieval import RecallPlanner
from memworth.signals.sources import Agreement, BurstDetector, Reliability, SourceLimit
from memworth.store.alarms import LiveAlarms
from memworth.store.backend import Backend
from memworth.store.report import MemoryReport

if TYPE_CHECKING:
    from memworth.settings import Settings
    from memworth.signals.change_detection import OutcomeStream
    from memworth.signals.sources import BurstAlert
    from memworth.store.backend import Increment, NewMemory
    from memworth.store.followed import Followed
    from memworth.store.governing import GovernanceReport
    from memworth.store.hot import HotTier
    from memworth.store.recall import _Space
    from memworth.store.records import AuditEntry, Episode, Memory, OutcomeRow
    from memworth.store.steps import Steps

__all__ = ["StoreState"]


class StoreState:
    """The attributes :class:`memworth.store.store.MemoryStore` sets in its constructor
    (see its parameters), and the methods its parts call on one another."""

    backend: Backend
    propagation: float
    max_hops: int
    sources: dict[str, float]
    scoring: ScoreRule
    exploration: float
    min_evidence: float
    policy: GovernancePolicy
    credit: str
    w_min: float
    _rng: np.random.Generator
    clock: Callable[[], float]
    index: str
    index_threshold: int
    hot: HotTier | None
    _hot_stale: set[str]
    _encoder: Encoder | None
    _spaces: dict[str, _Space]
    _parents: dict[str, tuple[int, dict[str, builtins.list[str]]]]
    reliability: Reliability | None
    limits: dict[str, SourceLimit]
    burst: BurstDetector | None
    holdout: float
    probe_share: float
    verifier: Callable[[MemoryReport], object] | None
    verifier_timeout: float
    govern_every: int | None
    govern_every_seconds: float | None
    _governed_at: dict[str, float]
    _outcomes_since_govern: dict[str, int]
    ablation: RecallPlanner | None
    _followed: dict[str, Followed]
    _follow_lock: threading.RLock
    _live: dict[str, LiveAlarms]
    _live_lock: threading.Lock
    _holdout_seed: int
    _agreement: dict[tuple[str, str], Agreement]
    _verified_seq: int
    _next_expiry: dict[str, tuple[int, float | None]]
    _filters: dict[tuple[str, str], dict[str, bool]]
    _settings_seen: str | None
    _settings_version: int

    if TYPE_CHECKING:  # the methods one part calls on another (each defined by its own part)

        def get(self, memory_id: str, *, namespace: str = "default") -> Memory: ...

        def add(
            self,
            text: str,
            *,
            id: str | None = None,
            namespace: str = "default",
            metadata: dict[str, Any] | None = None,
            contexts: Sequence[str] | None = None,
            derived_from: Sequence[str] | None = None,
            part_of: Sequence[str] | None = None,
        ) -> Memory: ...

        def _prepare_one(self, text: str, *, namespace: str, expires: float | None, **item: Any) -> NewMemory: ...

        def _replace(
            self,
            memory: Memory,
            text: str,
            new_id: str | None,
            *,
            reason: str,
            action: str,
            namespace: str,
            settings: dict[str, Any] | None = None,
        ) -> AuditEntry: ...

        def _expire_due(self, namespace: str) -> None: ...

        def _in_transaction(self) -> bool: ...

        def _expire_due_steps(self, namespace: str) -> Steps[None]: ...

        def _ttl_steps(self, namespace: str) -> Steps[float | None]: ...

        def _provenance_steps(self, namespace: str) -> Steps[dict[str, builtins.list[str]]]: ...

        def _embed(self, texts: builtins.list[str]) -> np.ndarray: ...

        def increments_of(
            self, outcome: OutcomeRow, episode: Episode, parents: dict[str, builtins.list[str]] | None = None
        ) -> builtins.list[Increment]: ...

        def _provenance(self, namespace: str) -> dict[str, builtins.list[str]]: ...

        def outcome_streams(self, namespace: str = "default") -> dict[str, OutcomeStream]: ...

        def _streams(self, namespace: str) -> dict[str, OutcomeStream]: ...

        def _start_live_scan(self, namespace: str) -> None: ...

        def _history(self, namespace: str) -> Followed: ...

        def _checkpoint(self, namespace: str) -> None: ...

        def _settled_reads(self) -> contextlib.AbstractContextManager[None]: ...

        def _forget_followed(self, namespace: str | None = None) -> None: ...

        def _bursts(self, namespace: str, memories: builtins.list[Memory]) -> builtins.list[BurstAlert]: ...

        def _govern(self, namespace: str, apply: frozenset[str] | None) -> GovernanceReport: ...

        def reports(
            self, ids: Sequence[str] | None = None, *, namespace: str = "default"
        ) -> builtins.list[MemoryReport]: ...

        def _change(
            self,
            memory_id: str,
            field_name: str,
            new: str,
            *,
            reason: str,
            namespace: str,
            action: str,
            settings: dict[str, Any] | None = None,
            expected: str | None = None,
            pin: bool = False,
            with_new: builtins.list[NewMemory] | None = None,
            requires: dict[str, object] | None = None,
        ) -> AuditEntry: ...

        def _verify_queue(self, namespace: str) -> builtins.list[AuditEntry]: ...

        def rebuild_hot_tier(self, *, namespace: str = "default") -> int: ...

        def _refresh_hot(self, namespace: str) -> None: ...

        @property
        def settings(self) -> Settings: ...

        def _adopt(self, settings: Settings, version: int) -> None: ...

        def _watch(self, statistics: Mapping[Hashable, float]) -> None: ...

        def list(
            self, *, namespace: str = "default", status: str | None = None, context: str | None = None
        ) -> builtins.list[Memory]: ...
