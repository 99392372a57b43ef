"""MemoryStore: memories an agent recalls, governed by the worth their outcomes earn."""

from __future__ import annotations

import builtins
import json
import math
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from memworth.adjusted import EpisodeStats
from memworth.change import CusumState, ExplainingAway, OutcomeStream, reference_rates, scan_episodes
from memworth.coretrieval import AlarmSplitter, RecallPlanner
from memworth.counts import Counts
from memworth.credit import check_w_min
from memworth.encoders import Encoder, HashingEncoder
from memworth.errors import (
    ChangedError,
    ConflictError,
    RateLimitError,
    SettingsError,
    StoreError,
    UnknownEntryError,
    UnknownEpisodeError,
    UnknownMemoryError,
    ValidationError,
)
from memworth.estimators import RawWorth
from memworth.governance import GovernancePolicy, Proposal
from memworth.holdout import Lift, check_share
from memworth.outcome import as_outcome
from memworth.policy import Taxonomy
from memworth.policy_replay import ReplaySettings
from memworth.ranking import Blend, ScoreRule
from memworth.sources import Agreement, BurstAlert, BurstDetector, Reliability, SourceLimit
from memworth.store import decisions, outcome_log
from memworth.store.alarms import LiveAlarms
from memworth.store.backend import Backend, Increment, NewMemory
from memworth.store.outcome_log import PolicyReplayReport, SourceReport
from memworth.store.recall import UNGOVERNED, Choice, Recall, RecallMixin
from memworth.store.records import STANDINGS, STATUSES, AuditEntry, Episode, Memory, OutcomeRow, Verification
from memworth.store.report import MemoryReport, assess
from memworth.validation import (
    MAX_K,
    MAX_METADATA,
    MAX_TEXT,
    check_confidence,
    check_labels,
    check_memory_id,
    check_metadata,
    check_name,
    check_storable,
    check_store_settings,
    check_text,
)
from memworth.vector_index import faiss_available

if TYPE_CHECKING:
    from memworth.store.hot import HotMemory, HotTier

RATE_LIMITED = ("promote", "demote")
AUTOMATIC = frozenset({"re-verify", "suppress", "deprecate", "release"})
"""What continuous governance (``govern_every``) applies by itself; the rest it only proposes."""

__all__ = [
    "AUTOMATIC",
    "DEFAULT_SOURCES",
    "MAX_K",
    "MAX_METADATA",
    "MAX_TEXT",
    "POLICY_KEY",
    "RATE_LIMITED",
    "UNGOVERNED",
    "VERDICTS",
    "VERIFIED",
    "Choice",
    "GovernanceReport",
    "MemoryStore",
    "Recall",
    "ReplayReport",
    "credit_increments",
]

DEFAULT_SOURCES = {"explicit": 1.0, "implicit": 0.5, "heuristic": 0.2, "verified": 1.0}
"""Outcome sources and their confidence (note 003): an outcome adds ``weight x confidence``
to hits. Explicit signals (a user's verdict, a test result) count fully; heuristic ones
(a keyword match, a guess from the transcript) count a fifth, so it takes about five
times as many of them (note 003: 25 against 5) to move worth as far. ``verified`` is the
reference the other sources' reliability is learned against (:meth:`MemoryStore.verify`)."""
VERIFIED = "verified"
POLICY_KEY = "policy"
"""The store's ``meta`` key of the governance policy it keeps (and ``policy_history``)."""


@dataclass(frozen=True)
class _Decision:
    """One memory's proposal, or the proposal a person's pin holds back, with the pin."""

    proposal: Proposal | None
    held: Proposal | None
    pin: decisions.Pin | None


def _until(pin: decisions.Pin) -> str:
    return "until unpinned" if pin.until is None else f"until {pin.until:g} retrievals"


VERDICTS = ("confirmed", "stale", "edited")
"""How a quarantined memory is resolved: back to normal, out of recall, or replaced by new text."""


@dataclass(frozen=True)
class GovernanceReport:
    """What :meth:`MemoryStore.govern` proposed, applied (as audit entries) and skipped (with why)."""

    proposals: list[Proposal]
    applied: list[AuditEntry]
    skipped: list[tuple[Proposal, str]]
    alerts: list[BurstAlert] = field(default_factory=list)
    """Memories whose worth moved faster than their evidence allows (the store's ``burst``)."""


@dataclass(frozen=True)
class ReplayReport:
    """Counters rebuilt from the outcome log, and where they differ from the live ones."""

    outcomes: int
    rebuilt: dict[tuple[str, str], Counts]
    mismatches: list[tuple[str, str, Counts, Counts]] = field(default_factory=list)
    applied: bool = False

    @property
    def consistent(self) -> bool:
        return not self.mismatches


class MemoryStore(RecallMixin):
    """A governed memory store over a backend (SQLite by default).

    Parameters
    ----------
    backend
        Where memories and logs live; use :meth:`open` with a URL rather than building one.
    encoder
        Turns texts into vectors. Default: the encoder the store was created with, or
        all-MiniLM-L6-v2 for a new store.
    scoring
        How candidates are ranked: :class:`memworth.ranking.Blend` (default, the paper's
        0.6 x similarity + 0.4 x worth), ``CosineRecencyWorth`` or ``LowerBoundBlend``.
    exploration
        Chance that each recall slot goes to a low-evidence memory (assumption A2's floor).
    min_evidence
        Retrievals below which a memory is low-evidence for the exploration floor, and the
        governance policy's ``min_evidence`` when no ``policy`` is given. Value classes,
        hot-tier eligibility and every proposal read the policy (:attr:`taxonomy` is
        ``policy.taxonomy()``), so every face shows the classes governance acts on.
    credit
        ``"uniform"`` (1/k) or ``"score"`` (proportional to the final score).
    w_min
        Floor on a credit weight.
    sources
        Extra or overriding outcome sources ``{name: confidence}``.
    seed
        Seed of the exploration draws (``None``: fresh randomness).
    propagation
        Note 003's TD-lambda: an outcome also credits the memories a retrieved memory was
        derived from (or is part of), ``propagation ** hops`` of its credit at each hop;
        0 turns it off.
    max_hops
        How far back along provenance edges credit travels.
    policy
        Governance settings (:class:`memworth.governance.GovernancePolicy`).
    index
        Candidate search: ``"exact"`` (matrix-vector product), ``"hnsw"`` (faiss, extra
        ``index``), ``"database"`` (inside the database: PostgreSQL with pgvector) or
        ``"auto"``: in the database when it can, else exact until a namespace holds
        ``index_threshold`` memories, then HNSW when faiss is installed.
    index_threshold
        Size at which ``"auto"`` switches to HNSW.
    hot_tier
        ``redis://...``: mirror each namespace's hot memories there
        (:meth:`rebuild_hot_tier`, after every applied governance round) and serve
        ``recall(..., tier="hot")`` from it. Without Redis the store works the same.
    clock
        Seconds since the epoch, for timestamps, recency and the daily rate limit
        (default ``time.time``; simulations pass their own).
    reliability
        Learn each source's confidence from verified outcomes
        (:class:`memworth.sources.Reliability`); ``None`` (default): the fixed
        confidences of ``sources``, as note 003 has them.
    limits
        Per-source quota and rate limit ``{source: SourceLimit}``; an outcome beyond one
        is refused and nothing is written.
    burst
        The burst alert :meth:`govern` reports (:class:`memworth.sources.BurstDetector`);
        ``None`` turns it off.
    holdout
        Share of episodes (by a seeded hash of the episode id) that recall without
        governance: similarity only, suppressed and deprecated memories included; see
        :meth:`holdout_report`.
    verifier
        Called by :meth:`govern` with ``apply`` for each quarantined memory (once per flag)
        with its :class:`MemoryReport`; returns a verdict (``"confirmed"``, ``"stale"``) or
        ``("edited", new_text)``, which :meth:`resolve` applies. A verifier that raises,
        answers something else or takes longer than ``verifier_timeout`` seconds leaves
        the memory as it is, with an audited ``verifier-failed`` entry.
    govern_every
        Continuous governance (off by default): after every ``govern_every`` outcomes this
        store object records in a namespace, it governs that namespace, applying the
        protective actions (re-verify, suppress, deprecate) and the probe test's releases,
        and only proposing promote and demote.
    probe_share
        Quarantine: a memory whose standing is ``re-verify`` is not served as an answer; on
        this share of the recalls it is allowed back as a probe (marked ``probe`` in the
        result and the episode log, its inclusion probability scaled by the share), so its
        worth keeps learning while most recalls never serve it. 0 never serves it.
    ablation
        An :class:`memworth.coretrieval.AblationPlanner`: in a budgeted share of the
        episodes that would retrieve a habitual pair, recall drops one member (the next
        candidate takes its slot), so that adjusted worth has independent evidence. The
        planner sees ``(namespace, id)`` keys; ``recall().diagnostics["ablation"]`` says
        what was dropped; the episode logs the set actually returned. An
        :class:`memworth.coretrieval.AlarmSplitter` instead drops one of two or more
        co-retrieved memories in change alarm (with the policy's ``change_detection``
        on): their statistics come from a scan of the namespace's log (at its first
        outcome recorded here and at every :meth:`govern`), advanced by every outcome
        this store object records; other processes' outcomes count from the next scan.
        ``"split"`` (the default) is a new AlarmSplitter for this store: memories that are
        always retrieved together get separated once two of them look broken, so the
        change detectors can tell which one broke before either is quarantined (on the
        demo world it kept the successor facts out of quarantine); None turns it off.

    Examples
    --------
    >>> from memworth import MemoryStore, HashingEncoder
    >>> store = MemoryStore.open("memory://", encoder=HashingEncoder(), seed=0)  # seed: the exploration draws
    >>> _ = store.add("Use list.reverse() or [::-1] to reverse a Python list.", id="reverse")
    >>> _ = store.add("Prague is the capital of the Czech Republic.", id="prague")
    >>> recall = store.recall("how to reverse a python list", k=1)
    >>> [r.memory.id for r in recall]
    ['reverse']
    >>> store.record(recall.episode, success=True)
    >>> store.get("reverse").counts
    Counts(success=1.0, failure=0.0, n=1.0)
    """

    def __init__(
        self,
        backend: Backend,
        *,
        encoder: Encoder | None = None,
        scoring: ScoreRule | None = None,
        exploration: float = 0.1,
        min_evidence: float = 10,
        credit: str = "uniform",
        w_min: float = 0.0,
        sources: dict[str, float] | None = None,
        seed: int | None = None,
        propagation: float = 0.7,
        max_hops: int = 3,
        policy: GovernancePolicy | None = None,
        clock: Callable[[], float] = time.time,
        index: str = "auto",
        index_threshold: int = 200_000,
        hot_tier: str | None = None,
        reliability: Reliability | None = None,
        limits: dict[str, SourceLimit] | None = None,
        burst: BurstDetector | None = BurstDetector(),  # noqa: B008 (frozen, so sharing is safe)
        holdout: float = 0.0,
        ablation: RecallPlanner | str | None = "split",
        probe_share: float = 0.1,
        verifier: Callable[[MemoryReport], object] | None = None,
        verifier_timeout: float = 30.0,
        govern_every: int | None = None,
    ) -> None:
        if isinstance(exploration, bool) or not isinstance(exploration, (int, float)) or not 0 <= exploration <= 1:
            raise ValidationError("exploration", f"must be within [0, 1], got {exploration!r}")
        if not isinstance(credit, str) or credit not in ("uniform", "score"):
            raise ValidationError("credit", f"must be 'uniform' or 'score', got {credit!r}")
        check_w_min(w_min, 1)
        if isinstance(propagation, bool) or not isinstance(propagation, (int, float)) or not 0 <= propagation < 1:
            raise ValidationError("propagation", f"must be within [0, 1), got {propagation!r}")
        if isinstance(max_hops, bool) or not isinstance(max_hops, int) or not 0 <= max_hops <= 10:
            raise ValidationError("max_hops", f"must be an integer from 0 to 10, got {max_hops!r}")
        check_store_settings(min_evidence, sources, scoring, policy, clock, seed)
        self.propagation = float(propagation)
        self.max_hops = max_hops
        self.sources = dict(DEFAULT_SOURCES)
        for name, conf in (sources or {}).items():
            check_name(name, "sources")
            self.sources[name] = check_confidence(conf)
        self.backend = backend
        self.scoring: ScoreRule = scoring if scoring is not None else Blend()
        self.exploration = float(exploration)
        self.min_evidence = min_evidence
        self.policy = GovernancePolicy(min_evidence=min_evidence)
        self.credit = credit
        self.w_min = w_min
        self._rng = np.random.default_rng(seed)
        self.clock = clock
        if not isinstance(index, str) or index not in ("auto", "exact", "hnsw", "database"):
            raise ValidationError("index", f"must be 'auto', 'exact', 'hnsw' or 'database', got {index!r}")
        if index == "hnsw" and not faiss_available():
            raise ValidationError("index", "'hnsw' needs faiss: pip install 'memworth[index]'")
        if isinstance(index_threshold, bool) or not isinstance(index_threshold, int) or index_threshold < 1:
            raise ValidationError("index_threshold", f"must be a positive integer, got {index_threshold!r}")
        self.index = index
        self.index_threshold = index_threshold
        self.hot: HotTier | None = None
        self._hot_stale: set[str] = set()  # namespaces whose mirror missed a change (Redis was down)
        if hot_tier is not None:
            from memworth.store.hot import HotTier

            self.hot = HotTier(hot_tier)
        self._encoder = encoder
        self._bind_encoder(encoder)
        self._bind_policy(policy)
        self._spaces = {}
        self._parents: dict[str, tuple[int, dict[str, list[str]]]] = {}
        if reliability is not None and not isinstance(reliability, Reliability):
            raise ValidationError("reliability", f"must be a Reliability or None, got {type(reliability).__name__}")
        self.reliability = reliability
        self.limits: dict[str, SourceLimit] = {}
        for name, limit in (limits or {}).items():
            if name not in self.sources:
                raise ValidationError("limits", f"unknown source {name!r}; known: {', '.join(sorted(self.sources))}")
            if not isinstance(limit, SourceLimit):
                raise ValidationError("limits", f"{name!r} must map to a SourceLimit, got {type(limit).__name__}")
            limit.validate()
            self.limits[name] = limit
        if burst is not None:
            if not isinstance(burst, BurstDetector):
                raise ValidationError("burst", f"must be a BurstDetector or None, got {type(burst).__name__}")
            burst.validate()
        self.burst = burst
        self.holdout = check_share(holdout)
        if isinstance(probe_share, bool) or not isinstance(probe_share, (int, float)) or not 0 <= probe_share <= 1:
            raise ValidationError("probe_share", f"must be within [0, 1], got {probe_share!r}")
        self.probe_share = float(probe_share)
        if verifier is not None and not callable(verifier):
            raise ValidationError("verifier", f"must be a function of a MemoryReport, got {type(verifier).__name__}")
        if isinstance(verifier_timeout, bool) or not isinstance(verifier_timeout, (int, float)) or not (
            0 < verifier_timeout < math.inf
        ):
            raise ValidationError("verifier_timeout", f"must be a positive number of seconds, got {verifier_timeout!r}")
        if govern_every is not None and (isinstance(govern_every, bool) or not isinstance(govern_every, int) or govern_every < 1):
            raise ValidationError("govern_every", f"must be a positive integer or None, got {govern_every!r}")
        self.verifier = verifier
        self.verifier_timeout = float(verifier_timeout)
        self.govern_every = govern_every
        self._outcomes_since_govern: dict[str, int] = {}
        if isinstance(ablation, str) and ablation == "split":
            ablation = AlarmSplitter()  # one per store: it keeps the store's alarm statistics
        if ablation is not None and not isinstance(ablation, RecallPlanner):
            kind = type(ablation).__name__
            raise ValidationError("ablation", f"must be an AblationPlanner, an AlarmSplitter or None, got {kind}")
        self.ablation = ablation
        self._live: dict[str, LiveAlarms] = {}  # per namespace, for an AlarmSplitter
        self._live_lock = threading.Lock()
        self._holdout_seed = 0 if seed is None else int(seed)
        self._agreement: dict[tuple[str, str], Agreement] = {}
        self._verified_seq = 0

    # -- the policy, kept with the data ------------------------------------------------

    def _bind_policy(self, given: GovernancePolicy | None) -> None:
        """Use ``given`` and keep it with the store (a new version when it differs from the
        kept one), or, with none given, the policy the store keeps (else the defaults)."""
        if given is not None:
            self.set_policy(given)
            return
        kept = self.policy_record()
        if kept is not None:
            self.policy = GovernancePolicy.from_settings(kept["settings"])

    def policy_record(self) -> dict[str, Any] | None:
        """The governance policy the store keeps: ``{"version", "settings", "at"}`` (None: never set)."""
        stored = self.backend.get_meta(POLICY_KEY)
        return None if stored is None else dict(json.loads(stored))

    def set_policy(self, policy: GovernancePolicy) -> int:
        """Govern under ``policy`` from now on, and keep it with the store so that every face
        and every process that opens the store without a ``policy`` governs under it.

        A policy that differs from the kept one becomes a new version (the previous ones
        stay listed in :meth:`policy_history`); returns the version in force. Every applied
        governance change is audited with the settings it was made under.
        """
        if not isinstance(policy, GovernancePolicy):
            raise ValidationError("policy", f"must be a GovernancePolicy, got {type(policy).__name__}")
        kept = self.policy_record()
        self.policy = policy
        if kept is not None and kept["settings"] == policy.settings():
            return int(kept["version"])
        version = 1 if kept is None else int(kept["version"]) + 1
        record = {"version": version, "settings": policy.settings(), "at": self.clock()}
        history = self.policy_history()
        self.backend.set_meta(POLICY_KEY + "_history", json.dumps([*history, record], sort_keys=True))
        self.backend.set_meta(POLICY_KEY, json.dumps(record, sort_keys=True))
        return version

    def policy_history(self) -> builtins.list[dict[str, Any]]:
        """Every policy version the store was governed under, oldest first."""
        stored = self.backend.get_meta(POLICY_KEY + "_history")
        return [] if stored is None else builtins.list(json.loads(stored))

    @property
    def taxonomy(self) -> Taxonomy:
        """The value classes every face shows: the governance policy's (its thresholds and ``min_evidence``)."""
        return self.policy.taxonomy()

    @classmethod
    def open(cls, url: str = "sqlite:///memworth.db", **settings: Any) -> MemoryStore:
        """Open (creating if needed) the store at ``url``: ``sqlite:///path.db``, ``postgresql://...`` or ``memory://``."""
        if not isinstance(url, str):
            raise ValidationError("url", f"must be a string, got {type(url).__name__}")
        backend: Backend
        if url.startswith("sqlite:"):
            from memworth.store.sqlite import SQLiteBackend

            backend = SQLiteBackend(url)
        elif url.startswith(("postgresql:", "postgres:")):
            from memworth.store.postgres import PostgresBackend

            backend = PostgresBackend(url)
        elif url == "memory://":
            from memworth.store.memory import MemoryBackend

            backend = MemoryBackend(url)
        else:
            raise ValidationError(
                "url", f"unsupported store URL {url!r}: use sqlite:///path.db, postgresql://... or memory://"
            )
        try:
            return cls(backend, **settings)
        except BaseException:
            backend.close()
            raise

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.backend.close()
        if self.hot is not None:
            self.hot.close()

    # -- encoder ----------------------------------------------------------------------

    def _bind_encoder(self, encoder: Encoder | None) -> None:
        stored = self.backend.get_meta("encoder")
        if encoder is None:
            return
        if not isinstance(encoder, Encoder):
            raise ValidationError("encoder", f"must have name, dimension and encode(), got {type(encoder).__name__}")
        if stored is None:
            self.backend.set_meta("encoder", encoder.name)
            self.backend.set_meta("dimension", str(encoder.dimension))
        elif stored != encoder.name:
            raise SettingsError(
                f"{self.backend.url} holds embeddings from {stored!r}; refusing to mix in {encoder.name!r}"
            )

    @property
    def encoder(self) -> Encoder:
        if self._encoder is None:
            stored = self.backend.get_meta("encoder")
            self._encoder = _encoder_named(stored or "all-MiniLM-L6-v2")
            self._bind_encoder(self._encoder)
        return self._encoder

    def _embed(self, texts: list[str]) -> np.ndarray:
        vectors = np.asarray(self.encoder.encode(texts), dtype=np.float32)
        if vectors.shape != (len(texts), self.encoder.dimension) or not np.isfinite(vectors).all():
            raise StoreError(f"encoder {self.encoder.name!r} returned unusable vectors of shape {vectors.shape}")
        return vectors

    # -- memories ---------------------------------------------------------------------

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
    ) -> Memory:
        """Store one memory; see :meth:`add_many`."""
        item = {"text": text, "id": id, "metadata": metadata, "contexts": contexts}
        item |= {"derived_from": derived_from, "part_of": part_of}
        check_name(namespace, "namespace")
        return self._add(_new_memories([item], namespace, self.clock(), positions=False), namespace)[0]

    def add_many(self, items: Sequence[dict[str, Any]], *, namespace: str = "default") -> list[Memory]:
        """Store many memories in one transaction (all or none), embedding them in one batch.

        Each item is a dict with ``text`` and optionally ``id`` (default: a random one),
        ``metadata`` (JSON object), ``contexts`` (labels), ``derived_from`` and ``part_of``
        (ids of memories in the same namespace, or elsewhere in ``items``).

        Every item is checked before anything is written: a bad one is refused with the
        field at fault and its position (``items[i]``) in the reason. The memory rows go
        to the backend in one bulk write (SQLite ``executemany``, PostgreSQL ``COPY``)
        inside one transaction, so loading many memories costs one round trip, not one
        per memory.
        """
        check_name(namespace, "namespace")
        if isinstance(items, (str, dict)) or not isinstance(items, Sequence) or not items:
            raise ValidationError("items", "must be a non-empty list of memories (dicts with 'text')")
        return self._add(_new_memories(items, namespace, self.clock(), positions=True), namespace)

    def _add(self, memories: builtins.list[Memory], namespace: str) -> builtins.list[Memory]:
        """Check provenance, embed in one batch and insert in one backend call (one transaction)."""
        known = {m.id for m in memories}
        linked = {d for m in memories for d in (*m.derived_from, *m.part_of)} - known
        if linked:
            found = {m.id for m in self.backend.memories(namespace, sorted(linked))}
            missing = sorted(linked - found)
            if missing:
                raise UnknownMemoryError(missing[0])
        vectors = self._embed([m.text for m in memories])
        self.backend.insert_memories([NewMemory(m, v) for m, v in zip(memories, vectors, strict=True)])
        return memories

    def get(self, memory_id: str, *, namespace: str = "default") -> Memory:
        """One memory, with its current counts."""
        check_name(namespace, "namespace")
        found = self.backend.memories(namespace, [check_memory_id(memory_id)])
        if not found:
            raise UnknownMemoryError(memory_id)
        return found[0]

    def list(
        self, *, namespace: str = "default", status: str | None = None, context: str | None = None
    ) -> list[Memory]:
        """Memories of a namespace, optionally only one status or one context label."""
        check_name(namespace, "namespace")
        if status is not None and (not isinstance(status, str) or status not in STATUSES):
            raise ValidationError("status", f"must be one of {', '.join(STATUSES)}, got {status!r}")
        out = self.backend.memories(namespace)
        if status is not None:
            out = [m for m in out if m.status == status]
        if context is not None:
            out = [m for m in out if context in m.contexts]
        return out

    # -- recall -----------------------------------------------------------------------

    # -- outcomes ---------------------------------------------------------------------

    def record(
        self,
        episode: Recall | Episode | str,
        success: object,
        *,
        source: str = "explicit",
        confidence: float | None = None,
        namespace: str | None = None,
    ) -> None:
        """Record the outcome of one recalled episode: credit its memories and log it, atomically.

        ``episode``: the :class:`Recall` that :meth:`recall` returned, its ``episode``, or the episode's id.
        """
        self.record_many([(episode, success)], source=source, confidence=confidence, namespace=namespace)

    def record_many(
        self,
        outcomes: Iterable[tuple[Recall | Episode | str, object]],
        *,
        source: str = "explicit",
        confidence: float | None = None,
        namespace: str | None = None,
    ) -> None:
        """Record many ``(episode, success)`` outcomes in one transaction (all or none).

        Refused, with nothing written: an unknown episode, an episode from another
        ``namespace`` (when given), an episode already recorded (here or earlier), an
        outcome that is not success/failure, an unknown source, an outcome beyond the
        source's quota or rate limit (``limits``).

        With ``reliability`` set, an outcome is credited with the source's learned
        confidence (a ``confidence`` given here can lower it, never raise it).
        ``source="verified"`` is :meth:`verify`.
        """
        self._record(outcomes, source, confidence, namespace)

    def verify(self, episode: Recall | Episode | str, success: object, *, namespace: str | None = None) -> Verification:
        """Record the verified outcome of an episode: the reference source reliability is learned from.

        If the episode has no outcome yet, the verified one becomes its outcome (source
        ``verified``, full confidence). If another source reported it already, nothing is
        credited again; that source scores one agreement or disagreement, which moves its
        learned confidence (:meth:`source_reliability`). An episode is verified once.

        Examples
        --------
        >>> from memworth import MemoryStore, HashingEncoder
        >>> store = MemoryStore.open("memory://", encoder=HashingEncoder(), exploration=0.0)
        >>> _ = store.add("Prague is the capital of the Czech Republic.", id="prague")
        >>> ep = store.recall("capital of the czech republic", k=1).episode
        >>> store.record(ep, success=True, source="heuristic")
        >>> store.verify(ep, success=False).agreed           # the heuristic got it wrong
        False
        >>> store.source_reliability()["heuristic"].agreement
        Agreement(agree=0.0, disagree=1.0)
        """
        return self._record([(episode, success)], VERIFIED, None, namespace)[0]

    def _record(
        self,
        outcomes: Iterable[tuple[Recall | Episode | str, object]],
        source: str,
        confidence: float | None,
        namespace: str | None,
    ) -> builtins.list[Verification]:
        if not isinstance(source, str) or source not in self.sources:
            raise ValidationError("source", f"unknown source {source!r}; known: {', '.join(sorted(self.sources))}")
        given = None if confidence is None else check_confidence(confidence)
        if namespace is not None:
            check_name(namespace, "namespace")
        if isinstance(outcomes, (str, bytes, dict)) or not isinstance(outcomes, Iterable):
            raise ValidationError(
                "outcomes", f"must be a list of (episode, success) pairs, got {type(outcomes).__name__}"
            )
        pairs = list(outcomes)
        if not pairs:
            raise ValidationError("outcomes", "nothing to record")
        ids = []
        for i, pair in enumerate(pairs):
            if not isinstance(pair, tuple) or len(pair) != 2:
                raise ValidationError(f"outcomes[{i}]", "must be an (episode, success) pair")
            ref = pair[0].episode.id if isinstance(pair[0], Recall) else pair[0].id if isinstance(pair[0], Episode) else pair[0]
            if not isinstance(ref, str):
                raise ValidationError("episode", f"must be a Recall, an Episode or its id, got {type(ref).__name__}")
            ids.append(check_storable(ref, "episode"))
        if len(set(ids)) != len(ids):
            raise ValidationError("episode", "the same episode appears twice in one call")
        results = [as_outcome(p[1]) for p in pairs]
        known = self.backend.episodes(ids)
        now = self.clock()
        episodes = []
        for eid in ids:
            ep = known.get(eid)
            if ep is None or (namespace is not None and ep.namespace != namespace):
                raise UnknownEpisodeError(eid)
            episodes.append(ep)
        self._check_limits(source, episodes, now)
        if self.reliability is not None and source != VERIFIED:
            self._refresh_agreement()
        earlier = self.backend.outcomes_of(ids) if source == VERIFIED else {}
        parents = {ns: self._parents_of(ns) for ns in {ep.namespace for ep in episodes}}  # one read per call
        self._start_live({ep.namespace for ep in episodes})
        rows, increments, checks = [], [], []
        credited: builtins.list[tuple[Episode, bool, float]] = []
        for ep, ok in zip(episodes, results, strict=True):
            if source == VERIFIED:
                before = earlier.get(ep.id)
                reported = (None, None) if before is None else (before.source, before.success)
                checks.append(Verification(ep.id, ep.namespace, ok, reported[0], reported[1], now))
                if before is not None:
                    continue
            conf = self._weight(source, ep.namespace, given)
            row = OutcomeRow(ep.id, ok, source, conf, now, 0, ep.namespace, self.propagation, self.max_hops)
            rows.append(row)
            increments += self.increments_of(row, ep, parents[ep.namespace])
            credited.append((ep, ok, conf))
        if source == VERIFIED:
            self.backend.append_verifications(checks, rows, increments)
        else:
            self.backend.append_outcomes(rows, increments)
        self._advance_live(credited)
        if self.govern_every is not None:
            for ns in sorted({ep.namespace for ep in episodes}):
                seen = self._outcomes_since_govern.get(ns, 0) + sum(1 for ep in episodes if ep.namespace == ns)
                if seen >= self.govern_every:
                    self._outcomes_since_govern[ns] = 0
                    self._govern(ns, AUTOMATIC)
                else:
                    self._outcomes_since_govern[ns] = seen
        return checks

    def _start_live(self, namespaces: set[str]) -> None:
        """Scan the namespaces an AlarmSplitter has no live statistics for yet (before new outcomes land)."""
        if not isinstance(self.ablation, AlarmSplitter) or not self.policy.change_detection:
            return
        for ns in sorted(namespaces):
            if ns not in self._live:
                self.outcome_streams(ns)

    def _advance_live(self, credited: builtins.list[tuple[Episode, bool, float]]) -> None:
        """Advance the live change statistics with outcomes just logged; tell the splitter."""
        if not isinstance(self.ablation, AlarmSplitter):
            return
        with self._live_lock:
            for ep, ok, conf in credited:
                live = self._live.get(ep.namespace)
                if live is not None:
                    moved = live.advance([item.memory_id for item in ep.items], ok, conf)
                    self.ablation.watch({(ep.namespace, mid): stat for mid, stat in moved.items()})

    def _weight(self, source: str, namespace: str, given: float | None) -> float:
        """The confidence an outcome of ``source`` is credited with."""
        fixed = self.sources[source]
        if self.reliability is None or source == VERIFIED:
            return fixed if given is None else given
        learned = self.reliability.weight(self._agreement.get((namespace, source), Agreement()), fixed)
        return learned if given is None else min(given, learned)

    def _refresh_agreement(self) -> None:
        """Fold verifications logged since the last call into each source's agreement tally."""
        for v in self.backend.verifications(after=self._verified_seq):
            if v.source is not None and v.reported is not None:
                key = (v.namespace, v.source)
                self._agreement[key] = self._agreement.get(key, Agreement()).add(v.reported == v.success)
            self._verified_seq = max(self._verified_seq, v.seq)

    def _check_limits(self, source: str, episodes: builtins.list[Episode], now: float) -> None:
        """Refuse (ValidationError, nothing written) outcomes beyond the source's quota or rate limit."""
        limit = self.limits.get(source)
        if limit is None:
            return
        recent = self.backend.outcomes_since(now - limit.window, source)
        logged = self.backend.episodes([o.episode_id for o in recent])
        for ns in sorted({ep.namespace for ep in episodes}):
            before = [
                (o.recorded, [it.memory_id for it in logged[o.episode_id].items])
                for o in recent
                if o.episode_id in logged and logged[o.episode_id].namespace == ns
            ]
            new = [[it.memory_id for it in ep.items] for ep in episodes if ep.namespace == ns]
            reason = limit.check(source, before, new, now)
            if reason is not None:
                raise RateLimitError(f"source: {reason}; nothing recorded")

    def source_reliability(self, namespace: str = "default") -> dict[str, SourceReport]:
        """Each source's fixed confidence, verified agreement, learned confidence and limit."""
        check_name(namespace, "namespace")
        self._refresh_agreement()
        rel = self.reliability if self.reliability is not None else Reliability()
        out = {}
        for name, fixed in sorted(self.sources.items()):
            stats = self._agreement.get((namespace, name), Agreement())
            learned = fixed if name == VERIFIED else rel.weight(stats, fixed)
            used = learned if self.reliability is not None else fixed
            out[name] = SourceReport(
                name,
                fixed,
                stats,
                rel.agreement(stats, fixed),
                rel.interval(stats),
                learned,
                used,
                self.limits.get(name),
            )
        return out

    def increments_of(
        self, outcome: OutcomeRow, episode: Episode, parents: dict[str, builtins.list[str]] | None = None
    ) -> builtins.list[Increment]:
        """The counter increments ``outcome`` caused, under the credit settings it was recorded
        with (its ``propagation`` and ``max_hops``; an outcome logged before they were kept
        uses this store's). Recording, replay, burst alerts, policy replay and the
        dashboard all credit through here, so a replay rebuilds what was done, whoever
        replays. ``parents`` (the namespace's provenance) is read when needed and not given."""
        propagation = self.propagation if outcome.propagation is None else outcome.propagation
        hops = self.max_hops if outcome.max_hops is None else outcome.max_hops
        if parents is None:
            parents = self._provenance(episode.namespace) if propagation > 0 and hops > 0 else {}
        return credit_increments(episode, outcome.success, outcome.confidence, parents, propagation, hops)

    def _parents_of(self, namespace: str) -> dict[str, builtins.list[str]]:
        """The provenance credit propagates along: none when propagation is off."""
        return self._provenance(namespace) if self.propagation > 0 and self.max_hops > 0 else {}

    def _provenance(self, namespace: str) -> dict[str, builtins.list[str]]:
        generation = self.backend.generation()
        cached = self._parents.get(namespace)
        if cached is None or cached[0] != generation:
            parents: dict[str, builtins.list[str]] = {}
            for src, dst, _kind in sorted(self.backend.edges(namespace)):
                parents.setdefault(src, []).append(dst)
            self._parents[namespace] = cached = (generation, parents)
        return cached[1]

    # -- standing ---------------------------------------------------------------------

    def set_status(self, memory_id: str, status: str, *, reason: str, namespace: str = "default") -> AuditEntry:
        """Change a memory's status by hand, with an audit entry saying why; reversible with :meth:`restore`.

        A person's decision: it pins the memory (governance proposes nothing for it until
        ``policy.pin_evidence`` more retrievals)."""
        if not isinstance(status, str) or status not in STATUSES:
            raise ValidationError("status", f"must be one of {', '.join(STATUSES)}, got {status!r}")
        return self._change(
            memory_id, "status", status, reason=reason, namespace=namespace, action="set-status", pin=True
        )

    def set_standing(self, memory_id: str, standing: str, *, reason: str, namespace: str = "default") -> AuditEntry:
        """Change a memory's governance standing by hand (normal, promoted, demoted, re-verify).

        A person's decision pins the memory, except a flag for ``re-verify``: that asks for
        verification, which a person, the verifier or the probe test then resolves."""
        if not isinstance(standing, str) or standing not in STANDINGS:
            raise ValidationError("standing", f"must be one of {', '.join(STANDINGS)}, got {standing!r}")
        return self._change(
            memory_id,
            "standing",
            standing,
            reason=reason,
            namespace=namespace,
            action="set-standing",
            pin=standing != "re-verify",
        )

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
    ) -> AuditEntry:
        """Make one audited change; with ``pin`` (a person's decision) the entry pins the memory
        for ``policy.pin_evidence`` more retrievals (:mod:`memworth.store.decisions`)."""
        reason = check_text(reason, "reason")
        current = self.get(memory_id, namespace=namespace)
        settings = dict(settings or {})
        if pin:
            settings["pin"] = {"until": current.counts.n + float(self.policy.pin_evidence)}
        if "numbers" not in settings:  # what the memory showed when the change was made (a flag's "before")
            worth = float(RawWorth().value(current.counts))
            settings["numbers"] = {"worth": round(worth, 6), "retrievals": current.counts.n}
        old = getattr(current, field_name)
        if expected is not None and old != expected:  # a proposal made for a state that has gone
            raise ChangedError(
                f"memory {memory_id!r} changed since it was read: {field_name} is {old!r}, not {expected!r}"
            )
        if old == new:
            raise ValidationError(field_name, f"memory {memory_id!r} is already {new!r}")
        entry = AuditEntry(0, memory_id, namespace, action, field_name, old, new, reason, settings, self.clock())
        saved = self.backend.change(entry)
        leaves = (field_name == "status" and new != "active") or (field_name == "standing" and new == "re-verify")
        if self.hot is not None and leaves:
            try:  # a memory that stops being active must not be served from the mirror
                self.hot.remove(namespace, memory_id)
            except StoreError:  # Redis down: hot recall rebuilds the mirror before using it again
                self._hot_stale.add(namespace)
        return saved

    # -- governance -------------------------------------------------------------------

    def recent_counts(self, namespace: str = "default", window: int | None = None) -> dict[str, Counts]:
        """Each memory's counts over its last ``window`` direct retrievals with an outcome."""
        check_name(namespace, "namespace")
        if window is not None and (isinstance(window, bool) or not isinstance(window, int) or window < 1):
            raise ValidationError("window", f"must be a positive integer or None, got {window!r}")
        size = self.policy.staleness_window if window is None else window
        return _recent(self.backend.history(namespace), size)

    def episode_stats(self, namespace: str = "default") -> EpisodeStats:
        """The namespace's episodes with an outcome, as :class:`memworth.adjusted.EpisodeStats`.

        Each episode counts the set recall returned (after any ablation), its outcome and
        its ``context`` label. Adjusted worth and confound flags read it::

            stats = store.episode_stats()
            flags = confounds(stats.pairs, RegressionWorth().worth(stats))
        """
        check_name(namespace, "namespace")
        stats = EpisodeStats()
        for o, ep in self.backend.history(namespace):
            if ep.items:
                stats.update([item.memory_id for item in ep.items], o.success, context=ep.context)
        return stats

    def outcome_streams(self, namespace: str = "default") -> dict[str, OutcomeStream]:
        """Each memory's direct retrievals with an outcome, oldest first, for change detection.

        One observation per retrieval: success, the outcome's confidence as its weight,
        the success rate of all the namespace's episodes just before it (exponentially
        weighted, half-life ``policy.change_reference_half_life``) and the outcome's
        position in the namespace's log (from 1).
        """
        check_name(namespace, "namespace")
        return self._streams(namespace, self.backend.history(namespace))

    def _streams(
        self, namespace: str, rows: builtins.list[tuple[OutcomeRow, Episode]]
    ) -> dict[str, OutcomeStream]:
        """The outcome streams of :meth:`outcome_streams`, from the namespace's history."""
        reference = reference_rates(
            np.array([o.success for o, _ in rows], dtype=bool), self.policy.change_reference_half_life
        )
        seen: dict[str, tuple[list[bool], list[float], list[float], list[int], list[str | None]]] = {}
        for i, (o, ep) in enumerate(rows):
            for item in ep.items:
                y, w, ref, at, ctx = seen.setdefault(item.memory_id, ([], [], [], [], []))
                y.append(o.success)
                w.append(o.confidence)
                ref.append(float(reference[i]))
                at.append(i + 1)
                ctx.append(ep.context)
        labelled = any(ep.context is not None for _, ep in rows)
        alarms = self._held_alarms(rows, reference, list(seen), namespace)
        flagged = {mid for mid, by in alarms.items() if not by}
        window = self.policy.staleness_window
        return {
            mid: OutcomeStream(
                np.array(y, dtype=bool),
                np.array(w),
                np.array(ref),
                np.array(at, dtype=np.int64),
                alarms.get(mid, ()),
                tuple(ctx) if labelled else None,
                _failing_with(mid, [rows[i - 1][1] for i, ok in zip(at[-window:], y[-window:], strict=True) if not ok], flagged),
            )
            for mid, (y, w, ref, at, ctx) in seen.items()
        }

    def _held_alarms(
        self,
        rows: builtins.list[tuple[OutcomeRow, Episode]],
        reference: np.ndarray,
        ids: builtins.list[str],
        namespace: str,
    ) -> dict[str, tuple[str, ...]]:
        """Every memory in alarm, with the co-retrieved memories that explain its failures
        better (:class:`memworth.change.ExplainingAway` over every memory's CUSUM at once;
        none: the alarm stands).

        An :class:`memworth.coretrieval.AlarmSplitter` as the store's ablation planner is
        given the statistics found here (it splits suspects until the next scan)."""
        if not rows:
            if isinstance(self.ablation, AlarmSplitter):
                with self._live_lock:
                    nothing = np.zeros(0, dtype=bool)
                    half_life = self.policy.change_reference_half_life
                    self._live[namespace] = LiveAlarms(self.policy.detector(), half_life, [], CusumState.empty(0), nothing)
            return {}
        index = {mid: i for i, mid in enumerate(ids)}
        sets = [[index[item.memory_id] for item in dict((it.memory_id, it) for it in ep.items).values()] for _, ep in rows]
        detector, rule = self.policy.detector(), ExplainingAway()
        success = np.array([o.success for o, _ in rows], dtype=bool)
        weight = np.array([o.confidence for o, _ in rows], dtype=float)
        state, shared = scan_episodes(detector, rule, sets, success, weight, reference, size=len(ids))
        if isinstance(self.ablation, AlarmSplitter):
            with self._live_lock:
                live = LiveAlarms(detector, self.policy.change_reference_half_life, ids, state, success)
                self._live[namespace] = live
                self.ablation.watch({(namespace, mid): stat for mid, stat in live.statistics().items()})
        alarm = np.flatnonzero(state.statistic >= detector.threshold).tolist()
        return {ids[m]: tuple(ids[j] for j in rule.holding(shared, state, detector, m)) for m in alarm}

    def govern(self, *, apply: bool = False, namespace: str = "default") -> GovernanceReport:
        """Propose (and with ``apply``, make) governance changes for every memory of a namespace.

        Applied changes are audited with the policy's settings. Promote and demote (note
        003's strengthen / weaken) are capped at ``max_changes_per_day`` per memory in any
        24 hours, so a burst of outcomes cannot flip a memory's standing back and forth;
        protective actions (re-verify, suppress, deprecate) are never held back, since
        each is reversible with :meth:`restore`.
        """
        return self._govern(namespace, None if apply else frozenset())

    def _govern(self, namespace: str, apply: frozenset[str] | None) -> GovernanceReport:
        """:meth:`govern`, applying the proposals whose action is in ``apply`` (None: all)."""
        check_name(namespace, "namespace")
        memories = self.backend.memories(namespace)
        found = self._decide(memories, namespace)
        proposals = [d.proposal for d in (found[m.id] for m in memories) if d.proposal is not None]
        skipped: list[tuple[Proposal, str]] = [
            (d.held, f"pinned by a person (audit entry {d.pin.seq}: {d.pin.action}) {_until(d.pin)}")
            for d in (found[m.id] for m in memories)
            if d.held is not None and d.pin is not None
        ]
        alerts = self._bursts(namespace, memories)
        applied: list[AuditEntry] = []
        if apply is None or apply:
            for p in proposals:
                if apply is not None and p.action not in apply:
                    continue
                try:
                    applied.append(self._apply(p, namespace))
                except StoreError as exc:  # rate-limited, or changed by someone else since we read it
                    skipped.append((p, str(exc)))
            if self.verifier is not None:
                applied += self._verify_queue(namespace)
            self._refresh_hot(namespace)
        return GovernanceReport(proposals, applied, skipped, alerts)

    def proposals(
        self, memories: Sequence[Memory] | None = None, *, namespace: str = "default"
    ) -> dict[str, Proposal | None]:
        """The change governance proposes now for each of ``memories`` (default: every memory
        of the namespace), by id; ``None`` where it proposes nothing.

        The one proposal function: :meth:`govern`, :meth:`approve` and :meth:`report` (and
        through it every face) call it. It reads the namespace's history once, for the
        window test and the change detectors (whose explaining-away rule weighs every
        memory of the namespace together).
        """
        return {mid: d.proposal for mid, d in self._decide(memories, namespace).items()}

    def _decide(self, memories: Sequence[Memory] | None, namespace: str) -> dict[str, _Decision]:
        """Each memory's proposal, the one a pin holds back, and its pin: the history and
        the audit log read once.

        A quarantined memory (standing ``re-verify``) is first put to the probe test
        (:meth:`GovernancePolicy.probe_test` over its outcomes since its flag): ``release``
        or ``suppress`` when the evidence decides, else the ordinary rules. A memory a person
        pinned gets no proposal while the pin holds (the one it would get is ``held``).
        """
        check_name(namespace, "namespace")
        chosen = self.backend.memories(namespace) if memories is None else builtins.list(memories)
        history = self.backend.history(namespace)
        audit = self.backend.audit_log(namespace)
        recent = _recent(history, self.policy.staleness_window)
        streams = self._streams(namespace, history) if self.policy.change_detection else {}
        pinned, flagged = decisions.pins(audit), decisions.flags(audit)
        out: dict[str, _Decision] = {}
        for m in chosen:
            p = None
            flag = flagged.get(m.id)
            if m.status == "active" and m.standing == "re-verify" and flag is not None:
                p = self._probe_proposal(m, flag, history)
            if p is None:
                p = self.policy.propose(
                    m.id, m.counts, m.status, m.standing, recent.get(m.id), stream=streams.get(m.id)
                )
            pin = pinned.get(m.id)
            if pin is not None and pin.holds(m.counts.n):
                out[m.id] = _Decision(None, p, pin)
            else:
                out[m.id] = _Decision(p, None, None)
        return out

    def _probe_proposal(self, m: Memory, flag: AuditEntry, history: Sequence[tuple[OutcomeRow, Episode]]) -> Proposal | None:
        """Release or suppress a quarantined memory when its probe outcomes decide (else None)."""
        worth = float(RawWorth().value(m.counts))
        evidence = decisions.probe_evidence(history, flag, worth, float(self.policy.change_odds_ratio))
        decision = self.policy.probe_test().decide(
            evidence.success, evidence.weight, before=evidence.before, after=evidence.after
        )
        if decision.action == "wait":
            return None
        numbers = {"worth": round(worth, 6), "retrievals": m.counts.n, "flag_seq": flag.seq}
        numbers |= {k: (round(v, 6) if isinstance(v, float) else v) for k, v in decision.numbers.items()}
        if decision.action == "release":
            return Proposal(m.id, "release", "standing", "re-verify", "normal", decision.reason, numbers)
        return Proposal(m.id, "suppress", "status", "active", "suppressed", decision.reason, numbers)

    def report(self, memory_id: str, *, namespace: str = "default") -> MemoryReport:
        """One memory's worth, interval, evidence, class, status, standing, hot-tier
        eligibility and the proposal :meth:`govern` would make for it now.

        Every face shows this report; :meth:`MemoryReport.row` is its JSON shape.

        Examples
        --------
        >>> from memworth import MemoryStore, HashingEncoder
        >>> store = MemoryStore.open("memory://", encoder=HashingEncoder(), exploration=0.0)
        >>> _ = store.add("Prague was the capital of Czechoslovakia.", id="cz")
        >>> for _ in range(12):
        ...     store.record(store.recall("capital of czechoslovakia", k=1), success=False)
        >>> r = store.report("cz")
        >>> r.value_class, r.proposal.action, r.proposal.reason
        ('low', 'deprecate', 'worth 0.000 < 0.3 with evidence 12 >= 10')
        """
        memory = self.get(memory_id, namespace=namespace)
        d = self._decide([memory], namespace)[memory.id]
        return assess(self.policy, memory, d.proposal, pin=d.pin, held=d.held)

    def reports(
        self, ids: Sequence[str] | None = None, *, namespace: str = "default"
    ) -> builtins.list[MemoryReport]:
        """:meth:`report` for many memories with one history read: ``ids`` in the order given
        (an unknown one raises UnknownMemoryError), or every memory of the namespace."""
        check_name(namespace, "namespace")
        if ids is None:
            memories = self.backend.memories(namespace)
        else:
            wanted = [check_memory_id(mid) for mid in ids]
            by_id = {m.id: m for m in self.backend.memories(namespace, wanted)}
            missing = [mid for mid in wanted if mid not in by_id]
            if missing:
                raise UnknownMemoryError(missing[0])
            memories = [by_id[mid] for mid in wanted]
        found = self._decide(memories, namespace)
        return [assess(self.policy, m, found[m.id].proposal, pin=found[m.id].pin, held=found[m.id].held) for m in memories]

    def burst_alerts(self, *, namespace: str = "default") -> builtins.list[BurstAlert]:
        """Memories whose worth the outcomes of the last ``burst.window`` seconds moved further
        than their earlier evidence allows (also in :meth:`govern`'s report)."""
        check_name(namespace, "namespace")
        return self._bursts(namespace, self.backend.memories(namespace))

    def _bursts(self, namespace: str, memories: builtins.list[Memory]) -> builtins.list[BurstAlert]:
        if self.burst is None:
            return []
        return outcome_log.burst_alerts(self.backend, self.burst, namespace, self.clock(), memories, self.increments_of)

    def holdout_report(self, *, namespace: str = "default", level: float = 0.95, method: str = "newcombe") -> Lift:
        """Success rate of governed episodes against holdout ones, from the log, with the lift's interval.

        Examples
        --------
        >>> from memworth import MemoryStore, HashingEncoder
        >>> store = MemoryStore.open("memory://", encoder=HashingEncoder(), holdout=0.5, seed=0)
        >>> _ = store.add("Prague is the capital of the Czech Republic.", id="prague")
        >>> for i in range(40):
        ...     ep = store.recall("capital of the czech republic", k=1, episode_id=f"task-{i}").episode
        ...     store.record(ep, success=not ep.holdout)
        >>> report = store.holdout_report()
        >>> report.governed_n + report.holdout_n, report.lift
        (40, 1.0)
        """
        check_name(namespace, "namespace")
        return outcome_log.holdout_lift(self.backend, namespace, level, method)

    def replay_policy(
        self, *alternatives: ReplaySettings, namespace: str = "default", every: int = 100
    ) -> PolicyReplayReport:
        """Re-run governance over the namespace's log under the store's policy and each alternative.

        See :mod:`memworth.policy_replay` for what a replay can and cannot tell.

        Examples
        --------
        >>> from memworth import MemoryStore, HashingEncoder
        >>> from memworth.governance import GovernancePolicy
        >>> from memworth.policy_replay import ReplaySettings
        >>> store = MemoryStore.open("memory://", encoder=HashingEncoder(), exploration=0.0)
        >>> _ = store.add("Prague was the capital of Czechoslovakia.", id="cz")
        >>> for i in range(30):
        ...     store.record(store.recall("capital of czechoslovakia", k=1).episode, success=i % 3 == 0)
        >>> report = store.replay_policy(ReplaySettings("lenient", GovernancePolicy(theta_low=0.3)), every=10)
        >>> [d.describe() for d in report.differences["lenient"]]
        ['cz: suppressed/normal (suppress@20) -> active/normal (no action)']
        """
        check_name(namespace, "namespace")
        baseline = ReplaySettings("current", self.policy, every=every)
        return outcome_log.replay_policy(self.backend, namespace, baseline, alternatives, self.increments_of)

    # -- the verification loop --------------------------------------------------------

    def queue(self, *, namespace: str = "default") -> builtins.list[MemoryReport]:
        """Memories awaiting verification (active, standing ``re-verify``: quarantined), with
        their reports; resolve each with :meth:`resolve` (or let the probe test or the
        ``verifier`` do it)."""
        return [r for r in self.reports(namespace=namespace) if r.status == "active" and r.standing == "re-verify"]

    def resolve(
        self,
        memory_id: str,
        verdict: str,
        *,
        reason: str,
        text: str | None = None,
        new_id: str | None = None,
        status: str = "suppressed",
        namespace: str = "default",
    ) -> AuditEntry:
        """Resolve a quarantined memory, audited and pinned (a person's or a verifier's decision).

        ``confirmed``: back to standing ``normal``, its counters (and the fall they showed)
        kept. ``stale``: ``status`` (``suppressed``, default, or ``deprecated``). ``edited``:
        ``text`` becomes a new memory (``new_id``, default ``<id>~<8 hex>``) derived from
        this one, with the same metadata and contexts and fresh counters (the old ones
        measured the old text); this one is archived, its entry naming its replacement.
        Refused, with nothing changed: a memory not awaiting verification (ConflictError),
        an unknown verdict, ``edited`` without text (ValidationError).

        Examples
        --------
        >>> from memworth import MemoryStore, HashingEncoder
        >>> store = MemoryStore.open("memory://", encoder=HashingEncoder())
        >>> _ = store.add("Prague was the capital of Czechoslovakia.", id="cz")
        >>> _ = store.set_standing("cz", "re-verify", reason="looks stale")
        >>> [r.id for r in store.queue()]
        ['cz']
        >>> entry = store.resolve("cz", "edited", reason="updated", text="Czechoslovakia split in 1993.", new_id="cz2")
        >>> store.get("cz").status, store.get("cz2").derived_from, store.queue()
        ('archived', ('cz',), [])
        """
        if not isinstance(verdict, str) or verdict not in VERDICTS:
            raise ValidationError("verdict", f"must be one of {', '.join(VERDICTS)}, got {verdict!r}")
        reason = check_text(reason, "reason")
        memory = self.get(memory_id, namespace=namespace)
        if memory.status != "active" or memory.standing != "re-verify":
            raise ConflictError(
                f"memory {memory_id!r} is not awaiting verification (status {memory.status}, standing {memory.standing})"
            )
        if verdict == "confirmed":
            return self._change(
                memory.id, "standing", "normal", reason=f"confirmed: {reason}", namespace=namespace,
                action="resolve", expected="re-verify", pin=True,
            )  # fmt: skip
        if verdict == "stale":
            if status not in ("suppressed", "deprecated"):
                raise ValidationError("status", f"must be 'suppressed' or 'deprecated', got {status!r}")
            return self._change(
                memory.id, "status", status, reason=f"stale: {reason}", namespace=namespace,
                action="resolve", expected="active", pin=True,
            )  # fmt: skip
        if text is None:
            raise ValidationError("text", "an edited memory needs its new text")
        new_text = check_text(text, "text")
        replacement = check_memory_id(new_id, "new_id") if new_id is not None else f"{memory.id[:190]}~{uuid.uuid4().hex[:8]}"
        new = self.add(
            new_text,
            id=replacement,
            namespace=namespace,
            metadata=memory.metadata,
            contexts=memory.contexts,
            derived_from=[memory.id],
        )
        return self._change(
            memory.id, "status", "archived", reason=f"edited: replaced by {new.id}: {reason}", namespace=namespace,
            action="resolve", settings={"replaced_by": new.id}, expected="active", pin=True,
        )  # fmt: skip

    def pin(self, memory_id: str, *, reason: str, namespace: str = "default") -> AuditEntry:
        """Keep governance away from a memory until :meth:`unpin` (audited)."""
        return self._note(memory_id, "pin", "pinned", reason, namespace, {"pin": {"until": None}})

    def unpin(self, memory_id: str, *, reason: str, namespace: str = "default") -> AuditEntry:
        """End a memory's pin (an explicit one, or the one a person's decision set); audited."""
        return self._note(memory_id, "unpin", "unpinned", reason, namespace, {"pin": None})

    def _note(
        self, memory_id: str, action: str, new: str, reason: str, namespace: str, settings: dict[str, Any]
    ) -> AuditEntry:
        """An audit entry that changes no column (a pin, a verifier's failure)."""
        reason = check_text(reason, "reason")
        memory = self.get(memory_id, namespace=namespace)
        field_name = "verification" if action == "verifier-failed" else "pin"
        entry = AuditEntry(0, memory.id, namespace, action, field_name, "", new, reason, settings, self.clock())
        return self.backend.change(entry)

    def _verify_queue(self, namespace: str) -> builtins.list[AuditEntry]:
        """Ask the ``verifier`` about each quarantined memory (once per flag): resolve on its
        verdict, or audit its failure (an exception, a bad answer, no answer within
        ``verifier_timeout`` seconds) and leave the memory as it is."""
        assert self.verifier is not None
        done: builtins.list[AuditEntry] = []
        audit = self.backend.audit_log(namespace)
        flagged = decisions.flags(audit)
        for report in self.queue(namespace=namespace):
            flag = flagged.get(report.id)
            asked = [e for e in audit if e.memory_id == report.id and e.action == "verifier-failed"]
            if report.pin is not None or (flag is not None and any(e.seq > flag.seq for e in asked)):
                continue  # pinned, or the verifier already failed on this flag
            try:
                verdict, text = _call_with_timeout(self.verifier, report, self.verifier_timeout)
                done.append(
                    self.resolve(report.id, verdict, reason="verifier", text=text, namespace=namespace)
                )
            except Exception as exc:
                why = f"verifier failed: {type(exc).__name__}: {exc}"[:2000]
                done.append(self._note(report.id, "verifier-failed", "unresolved", why, namespace, {}))
        return done

    def approve(self, memory_id: str, action: str, *, namespace: str = "default") -> AuditEntry:
        """Apply the one change governance proposes now for one memory, as ``govern(apply=True)`` would.

        ``action`` must be what :meth:`govern` proposes for the memory at this moment, so a
        stale approval changes nothing (ValidationError); the rate limit and the audit entry
        are those of :meth:`govern` (StoreError when the limit holds the change back).

        Examples
        --------
        >>> from memworth import MemoryStore, HashingEncoder
        >>> store = MemoryStore.open("memory://", encoder=HashingEncoder(), exploration=0.0)
        >>> _ = store.add("Prague was the capital of Czechoslovakia.", id="cz")
        >>> for _ in range(12):
        ...     store.record(store.recall("capital of czechoslovakia", k=1).episode, success=False)
        >>> [(p.memory_id, p.action) for p in store.govern().proposals]
        [('cz', 'deprecate')]
        >>> entry = store.approve("cz", "deprecate")
        >>> entry.action, entry.new, store.get("cz").status
        ('deprecate', 'deprecated', 'deprecated')
        """
        memory = self.get(memory_id, namespace=namespace)
        p = self.proposals([memory], namespace=namespace)[memory.id]
        if p is None or p.action != action:
            now = "nothing" if p is None else repr(p.action)
            raise ValidationError("action", f"governance proposes {now} for {memory_id!r}, not {action!r}")
        entry = self._apply(p, namespace, pin=True)  # a person approved it: the decision sticks
        self._refresh_hot(namespace)
        return entry

    def _apply(self, p: Proposal, namespace: str, *, pin: bool = False) -> AuditEntry:
        """Make one proposed change, audited with the policy's settings; StoreError when rate-limited."""
        if p.action in RATE_LIMITED:
            day_ago = self.clock() - 86400
            changes = [
                e
                for e in self.backend.audit_log(namespace, p.memory_id)
                if e.at >= day_ago and e.action in RATE_LIMITED
            ]
            if len(changes) >= self.policy.max_changes_per_day:
                raise RateLimitError(f"rate limit: {len(changes)} promote/demote changes in the last 24 h")
        return self._change(
            p.memory_id,
            p.field,
            p.new,
            reason=p.reason,
            namespace=namespace,
            action=p.action,
            settings={"policy": self.policy.settings(), "numbers": p.numbers},
            expected=p.old,
            pin=pin,
        )

    def _refresh_hot(self, namespace: str) -> None:
        if self.hot is not None:
            try:
                self.rebuild_hot_tier(namespace=namespace)
            except StoreError:
                pass  # Redis down: the database stays the truth; rebuild_hot_tier later

    def restore(self, audit_seq: int, *, reason: str = "restored", namespace: str = "default") -> AuditEntry:
        """Undo one audited change (the memory must still be as that change left it)."""
        if isinstance(audit_seq, bool) or not isinstance(audit_seq, int):
            raise ValidationError("audit_seq", f"must be an integer, got {audit_seq!r}")
        reason = check_text(reason, "reason")  # bad input is refused before anything is looked up
        entry = next((e for e in self.backend.audit_log(namespace) if e.seq == audit_seq), None)
        if entry is None:
            raise UnknownEntryError(audit_seq, namespace)
        if entry.field not in ("status", "standing"):
            raise ValidationError("audit_seq", f"entry {audit_seq} ({entry.action}) changed nothing to undo; use pin/unpin")
        current = getattr(self.get(entry.memory_id, namespace=namespace), entry.field)
        if current != entry.new:
            raise ChangedError(
                f"memory {entry.memory_id!r} has {entry.field} {current!r}, not {entry.new!r} as entry {audit_seq} left it"
            )
        suffix = f" (undoes entry {audit_seq}: {entry.action})"  # the note must fit the reason's limit too
        if len(check_text(reason, "reason")) + len(suffix) > MAX_TEXT:
            raise ValidationError(
                "reason", f"is {len(reason)} characters; a restore's limit is {MAX_TEXT - len(suffix)}"
            )
        return self._change(
            entry.memory_id,
            entry.field,
            entry.old,
            reason=reason + suffix,
            namespace=namespace,
            action="restore",
            expected=entry.new,  # changed again meanwhile: StoreError, as above
            pin=True,  # a person undid it: governance does not redo it on the same evidence
        )

    def _hot_from_database(self, namespace: str) -> builtins.list[HotMemory]:
        from memworth.store.hot import HotMemory

        eligible = {m.id: m for m in self.hot_tier(namespace=namespace)}
        ids, _seqs, matrix = self.backend.vectors(namespace)
        rows = {mid: matrix[i] for i, mid in enumerate(ids) if mid in eligible}
        return [
            HotMemory(mid, eligible[mid].text, eligible[mid].counts, eligible[mid].created, rows[mid])
            for mid in sorted(eligible)
            if mid in rows  # external memories (governed by id, no vector) cannot be recalled
        ]

    def rebuild_hot_tier(self, *, namespace: str = "default") -> int:
        """Rewrite the Redis hot tier of ``namespace`` from the database; returns how many memories."""
        if self.hot is None:
            raise SettingsError("no hot tier configured: open the store with hot_tier='redis://...'")
        check_name(namespace, "namespace")
        memories = self._hot_from_database(namespace)
        self.hot.replace(namespace, memories)
        self._hot_stale.discard(namespace)
        return len(memories)

    def check_hot_tier(self, *, namespace: str = "default") -> dict[str, builtins.list[str]]:
        """Differences between Redis and the hot set the database implies: missing, extra, stale ids."""
        if self.hot is None:
            raise SettingsError("no hot tier configured: open the store with hot_tier='redis://...'")
        want = {m.id: m.payload() for m in self._hot_from_database(namespace)}
        have = self.hot.entries(namespace)
        stale = [mid for mid in sorted(set(want) & set(have)) if want[mid] != have[mid]]
        return {"missing": sorted(set(want) - set(have)), "extra": sorted(set(have) - set(want)), "stale": stale}

    def hot_tier(self, *, namespace: str = "default") -> builtins.list[Memory]:
        """Memories eligible for the hot tier (note 003: worth >= 0.5, with enough evidence)."""
        return [m for m in self.list(namespace=namespace) if self.policy.hot(m.counts, m.status, m.standing)]

    def may_consolidate(self, memory_id: str, *, namespace: str = "default") -> bool:
        """The consolidation gate: False for high-value memories, which are kept as they are."""
        return self.policy.may_consolidate(self.get(memory_id, namespace=namespace).counts)

    def audit(self, memory_id: str | None = None, *, namespace: str = "default") -> builtins.list[AuditEntry]:
        """The audit log of a namespace (or of one memory), oldest first."""
        check_name(namespace, "namespace")
        if memory_id is not None:
            check_memory_id(memory_id, "memory_id")
        return self.backend.audit_log(namespace, memory_id)

    # -- the log ----------------------------------------------------------------------

    def replay(self, *, apply: bool = False) -> ReplayReport:
        """Rebuild every counter from the outcome log; report (and with ``apply``, fix) differences."""
        rebuilt: dict[tuple[str, str], list[float]] = {}
        log = list(self.backend.outcome_log())
        episodes: dict[str, Episode] = {}
        ids = [o.episode_id for o in log]
        for start in range(0, len(ids), 5000):
            episodes |= self.backend.episodes(ids[start : start + 5000])
        parents: dict[str, dict[str, builtins.list[str]]] = {}  # one provenance read per namespace
        for o in log:
            ep = episodes[o.episode_id]
            if ep.namespace not in parents:
                parents[ep.namespace] = self._provenance(ep.namespace)
            for inc in self.increments_of(o, ep, parents[ep.namespace]):
                acc = rebuilt.setdefault((inc.namespace, inc.memory_id), [0.0, 0.0, 0.0])
                acc[0] += inc.success
                acc[1] += inc.failure
                acc[2] += inc.n
        counts = {key: Counts(*v) for key, v in rebuilt.items()}
        mismatches = []
        live_all: dict[tuple[str, str], Counts] = {}
        for ns in self.backend.namespaces():
            for m in self.backend.memories(ns):
                live_all[(ns, m.id)] = m.counts
        for key, live in live_all.items():
            want = counts.get(key, Counts())
            if (live.success, live.failure, live.n) != (want.success, want.failure, want.n):
                mismatches.append((key[0], key[1], live, want))
        if apply and mismatches:
            by_ns: dict[str, dict[str, Counts]] = {}
            for ns, mid, _live, want in mismatches:
                by_ns.setdefault(ns, {})[mid] = want
            for ns, fixes in by_ns.items():
                self.backend.write_counts(ns, fixes)
        return ReplayReport(len(log), counts, mismatches, applied=apply and bool(mismatches))


def _failing_with(memory_id: str, failures: builtins.list[Episode], flagged: set[str]) -> tuple[str, ...]:
    """The flagged memories (other than ``memory_id``) that came with at least half of the
    failed episodes ``failures`` (none if they did not)."""
    if not failures:
        return ()
    present = [{item.memory_id for item in ep.items} & flagged - {memory_id} for ep in failures]
    if 2 * sum(1 for found in present if found) < len(failures):
        return ()
    return tuple(sorted(set().union(*present)))


_FIELDS = frozenset({"text", "id", "metadata", "contexts", "derived_from", "part_of"})
_NO_COUNTS = Counts()  # frozen: every new memory can share it


def _new_memories(items: Sequence[Any], namespace: str, now: float, *, positions: bool) -> list[Memory]:
    """Validate every item (nothing is written yet) and build its :class:`Memory`.

    With ``positions``, a refused item's reason ends with its position, ``(items[i])``.
    """
    memories = []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise ValidationError(f"items[{i}]", "must be a dict with at least 'text'")
        unknown = set(item) - _FIELDS
        if unknown:
            raise ValidationError(f"items[{i}]", f"unknown field(s): {', '.join(sorted(unknown))}")
        try:
            mid = item.get("id")
            memories.append(
                Memory(
                    id=uuid.uuid4().hex if mid is None else check_memory_id(mid),
                    text=check_text(item.get("text"), "text"),
                    namespace=namespace,
                    metadata=check_metadata(item.get("metadata")),
                    contexts=check_labels(item.get("contexts"), "contexts"),
                    derived_from=check_labels(item.get("derived_from"), "derived_from"),
                    part_of=check_labels(item.get("part_of"), "part_of"),
                    created=now,
                    updated=now,
                    counts=_NO_COUNTS,
                )
            )
        except ValidationError as exc:
            if not positions:
                raise
            raise ValidationError(exc.field, f"{exc.reason} (items[{i}])") from None
    first: dict[str, int] = {}
    for i, m in enumerate(memories):
        j = first.setdefault(m.id, i)
        if j != i:
            raise ValidationError("id", f"the same id {m.id!r} appears twice in one call (items[{j}] and items[{i}])")
    return memories


def credit_increments(
    episode: Episode,
    success: bool,
    confidence: float,
    parents: dict[str, list[str]] | None = None,
    propagation: float = 0.0,
    max_hops: int = 0,
) -> list[Increment]:
    """The counter increments one outcome causes, in a fixed order.

    Each retrieved memory gets ``weight x confidence`` on hits+ (success) or hits- and 1
    on n. With ``propagation`` > 0, credit also flows to the memories it was derived
    from (``parents``), ``propagation ** hops`` of it at each hop up to ``max_hops``,
    breadth first, each ancestor once per retrieved memory (so cycles are harmless);
    propagated credit adds no retrieval to n.

    Examples
    --------
    >>> from memworth.store import Episode, EpisodeItem
    >>> ep = Episode("e", "default", "q", None, 0.0, (EpisodeItem("strategy", 1.0, 1.0, 0),))
    >>> parents = {"strategy": ["decision"], "decision": ["fact", "strategy"]}
    >>> [(i.memory_id, round(i.success, 2), i.n) for i in credit_increments(ep, True, 1.0, parents, 0.7, 3)]
    [('strategy', 1.0, 1.0), ('decision', 0.7, 0.0), ('fact', 0.49, 0.0)]
    """
    out = []
    for item in episode.items:
        mass = item.weight * confidence
        out.append(
            Increment(episode.namespace, item.memory_id, mass if success else 0.0, 0.0 if success else mass, 1.0)
        )
        if not parents or propagation <= 0:
            continue
        seen = {item.memory_id}
        frontier = [item.memory_id]
        share = mass
        for _hop in range(max_hops):
            share *= propagation
            nxt = []
            for node in frontier:
                for parent in parents.get(node, ()):
                    if parent not in seen:
                        seen.add(parent)
                        nxt.append(parent)
                        credit = (share, 0.0) if success else (0.0, share)
                        out.append(Increment(episode.namespace, parent, credit[0], credit[1], 0.0))
            frontier = nxt
            if not frontier:
                break
    return out


def _call_with_timeout(
    fn: Callable[[MemoryReport], object], report: MemoryReport, timeout: float
) -> tuple[str, str | None]:
    """``fn(report)`` in a daemon thread, as ``(verdict, text)``; TimeoutError when it has not
    answered in ``timeout`` s (the thread is left to finish on its own: Python cannot stop it)."""
    result: dict[str, object] = {}

    def run() -> None:
        try:
            result["value"] = fn(report)
        except BaseException as exc:
            result["error"] = exc

    worker = threading.Thread(target=run, name="memworth-verifier", daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        raise TimeoutError(f"no answer within {timeout:g} s")
    if "error" in result:
        raise result["error"]  # type: ignore[misc]
    answer = result.get("value")
    if isinstance(answer, str):
        return answer, None
    if isinstance(answer, tuple) and len(answer) == 2 and answer[0] == "edited" and isinstance(answer[1], str):
        return "edited", answer[1]
    raise ValidationError("verifier", f"must answer a verdict or ('edited', text), got {answer!r}")


def _recent(history: list[tuple[OutcomeRow, Episode]], size: int) -> dict[str, Counts]:
    """Each memory's counts over its last ``size`` direct retrievals in ``history`` (oldest first)."""
    recent: dict[str, list[float]] = {}
    full: set[str] = set()
    for o, ep in reversed(history):  # newest first
        for item in ep.items:
            if item.memory_id in full:
                continue
            acc = recent.setdefault(item.memory_id, [0.0, 0.0, 0.0])
            acc[0 if o.success else 1] += item.weight * o.confidence
            acc[2] += 1
            if acc[2] >= size:
                full.add(item.memory_id)
    return {mid: Counts(*v) for mid, v in recent.items()}


def _encoder_named(name: str) -> Encoder:
    if name.startswith("hashing-") and name[8:].isdigit():
        return HashingEncoder(int(name[8:]))
    if name == "all-MiniLM-L6-v2":
        from memworth.minilm import MiniLMEncoder

        return MiniLMEncoder()
    raise SettingsError(f"the store's embeddings come from {name!r}; pass that encoder to MemoryStore.open(encoder=...)")
