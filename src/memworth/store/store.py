"""MemoryStore: memories an agent recalls, governed by the worth their outcomes earn.

The store is a thin facade: this module holds its settings (the constructor),
opening and closing, the encoder, and adding and reading memories. Each other part
is one module, joined here as a base class of :class:`MemoryStore`:

* :mod:`memworth.store.recall`: recall, the candidate search, ranking and the pick;
* :mod:`memworth.store.recording`: outcomes, sources, credit and its provenance;
* :mod:`memworth.store.log_queries`: what the log says (streams, alarms, bursts,
  holdout lift, policy replay, counter replay);
* :mod:`memworth.store.governing`: proposals, govern, approve, restore, audited
  changes, the kept policy;
* :mod:`memworth.store.review`: the queue of quarantined memories, verdicts, pins;
* :mod:`memworth.store.forgetting`: delete (erase for good), edit, expiry;
* :mod:`memworth.store.paging`: lists a page at a time, with a cursor;
* :mod:`memworth.store.hot`: the Redis hot tier;
* :mod:`memworth.store.transaction`: a unit of work, the writes of a block kept or undone together.

:mod:`memworth.store.state` declares what they share; input checks are in
:mod:`memworth.validation`.
"""

from __future__ import annotations

import builtins
import dataclasses
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from memworth.counts import Counts
from memworth.embed.encoders import Encoder, HashingEncoder
from memworth.embed.vector_index import faiss_available
from memworth.errors import ErasedMemoryError, SettingsError, StoreError, UnknownMemoryError, ValidationError
from memworth.governance import GovernancePolicy
from memworth.progress import Progress
from memworth.progress import check as check_progress
from memworth.ranking import ScoreRule
from memworth.settings import Settings
from memworth.signals.coretrieval import RecallPlanner
from memworth.signals.sources import Agreement, BurstDetector, Reliability, SourceLimit
from memworth.store.alarms import LiveAlarms
from memworth.store.backend import Backend, NewMemory
from memworth.store.configuring import (
    FOLLOWING,
    KEPT,
    ConfigMixin,
    following_settings,
    settings_from_arguments,
)
from memworth.store.forgetting import ForgettingMixin
from memworth.store.governing import AUTOMATIC, POLICY_KEY, RATE_LIMITED, GovernanceMixin, GovernanceReport
from memworth.store.hot import HotTierMixin
from memworth.store.log_queries import Followed, LogMixin, ReplayReport
from memworth.store.paging import Page, PagingMixin
from memworth.store.recall import UNGOVERNED, Choice, Recall, RecallMixin
from memworth.store.recording import DEFAULT_SOURCES, VERIFIED, RecordingMixin, credit_increments
from memworth.store.records import STATUSES, Memory
from memworth.store.report import MemoryReport
from memworth.store.review import VERDICTS, ReviewMixin
from memworth.store.steps import Blocking, Call, Steps, run
from memworth.store.transaction import TransactionMixin
from memworth.validation import (
    MAX_K,
    MAX_METADATA,
    MAX_TEXT,
    check_labels,
    check_memory_id,
    check_metadata,
    check_name,
    check_store_settings,
    check_text,
    check_ttl,
    check_verifier,
)

if TYPE_CHECKING:
    from memworth.store.hot import HotTier


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
    "Page",
    "Recall",
    "ReplayReport",
    "credit_increments",
]


class MemoryStore(
    ConfigMixin,
    RecallMixin,
    RecordingMixin,
    LogMixin,
    GovernanceMixin,
    ReviewMixin,
    ForgettingMixin,
    PagingMixin,
    HotTierMixin,
    TransactionMixin,
):
    """A governed memory store over a backend (SQLite by default).

    Parameters
    ----------
    backend
        Where memories and logs live; use :meth:`open` with a URL rather than building one.
    encoder
        Turns texts into vectors. Default: the encoder the store was created with, or
        all-MiniLM-L6-v2 for a new store.
    settings
        Every setting at once (:class:`memworth.Settings`); the arguments below change
        single ones. A store keeps its settings with its data, versioned: a setting not
        given here is the kept one (else its default), so every face and process that
        opens the store works under the same ones; settings that differ from the kept ones
        become a new version (:meth:`configure`, :meth:`settings_history`). A version another
        store object (another process) keeps later is followed within a second and wins over
        these arguments (:meth:`follow_settings`). ``encoder``, ``seed``, ``clock``,
        ``hot_tier`` and ``verifier`` belong to this store object only.
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
        (:class:`memworth.signals.sources.Reliability`); ``None`` (default): the fixed
        confidences of ``sources``, as note 003 has them.
    limits
        Per-source quota and rate limit ``{source: SourceLimit}``; an outcome beyond one
        is refused and nothing is written.
    burst
        The burst alert :meth:`govern` reports (:class:`memworth.signals.sources.BurstDetector`);
        ``None`` turns it off.
    holdout
        Share of episodes (by a seeded hash of the episode id) that recall without
        governance: similarity only, suppressed and deprecated memories included; see
        :meth:`holdout_report` and :meth:`holdout_guard`. The share and the hash's seed are
        kept with the store, so every face that opens it by URL holds out the same
        episodes and reads the same guard; ``None`` (default): the kept share (else 0).
    verifier
        Called by :meth:`govern` with ``apply`` for each quarantined memory (once per flag)
        with its :class:`MemoryReport`; returns a verdict (``"confirmed"``, ``"stale"``) or
        ``("edited", new_text)``, which :meth:`resolve` applies. A verifier that raises,
        answers something else or takes longer than ``verifier_timeout`` seconds leaves
        the memory as it is, with an audited ``verifier-failed`` entry.
    govern_every
        Continuous governance (off by default): after every ``govern_every`` outcomes in a
        namespace, this store object governs that namespace, applying the protective actions
        (re-verify, suppress, deprecate) and the probe test's releases, and only proposing
        promote and demote. It counts, from its first outcome in the namespace, the outcomes
        logged there by any store object since continuous governance last ran (the store
        keeps that mark), then the ones it records itself. The round runs inside the
        ``record`` call that triggers it, and asks the ``verifier`` (if any) about the
        queue: that call waits for the verifier, up to ``verifier_timeout`` seconds per
        quarantined memory (see the README's "Continuous governance").
    govern_every_seconds
        Continuous governance by time (off by default): at the first outcome recorded in a
        namespace once this many seconds (of ``clock``) have passed since the last
        automatic round there (by either trigger, by any store object), this store object
        governs it as above. The round is claimed with the same compare-and-set mark, so of
        two store objects past the interval one governs. The first outcome starts the clock.
    probe_share
        Quarantine: a memory whose standing is ``re-verify`` is not served as an answer; on
        this share of the recalls it is allowed back as a probe (marked ``probe`` in the
        result and the episode log, its inclusion probability scaled by the share), so its
        worth keeps learning while most recalls never serve it. 0 never serves it.
    ablation
        An :class:`memworth.signals.coretrieval.AblationPlanner`: in a budgeted share of the
        episodes that would retrieve a habitual pair, recall drops one member (the next
        candidate takes its slot), so that adjusted worth has independent evidence. The
        planner sees ``(namespace, id)`` keys; ``recall().diagnostics["ablation"]`` says
        what was dropped; the episode logs the set actually returned. An
        :class:`memworth.signals.coretrieval.AlarmSplitter` instead drops one of two or more
        co-retrieved memories in change alarm (with the policy's ``change_detection``
        on): their statistics come from a scan of the namespace's log (at its first
        outcome recorded here and at every :meth:`govern`), advanced by every outcome
        this store object records; other processes' outcomes count from the next scan.
        ``"split"`` (the default) is a new AlarmSplitter for this store: memories that are
        always retrieved together get separated once two of them look broken, so the
        change detectors can tell which one broke before either is quarantined (on the
        demo world it kept the successor facts out of quarantine); ``"pairs"`` is an
        AblationPlanner; None turns it off. The kind and its share are kept with the
        settings (``recall.planner``, ``recall.planner_share``).
    actor
        Who opens the store with settings that differ from the kept ones, for the
        settings' history.

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
        settings: Settings | None = None,
        scoring: ScoreRule = KEPT,
        exploration: float = KEPT,
        min_evidence: float = KEPT,
        credit: str = KEPT,
        w_min: float = KEPT,
        sources: dict[str, float] | None = KEPT,
        seed: int | None = None,
        propagation: float = KEPT,
        max_hops: int = KEPT,
        policy: GovernancePolicy | None = None,
        clock: Callable[[], float] = time.time,
        index: str = KEPT,
        index_threshold: int = KEPT,
        hot_tier: str | None = None,
        reliability: Reliability | None = KEPT,
        limits: dict[str, SourceLimit] | None = KEPT,
        burst: BurstDetector | None = KEPT,
        holdout: float | None = None,
        ablation: RecallPlanner | str | None = KEPT,
        probe_share: float = KEPT,
        verifier: Callable[[MemoryReport], object] | None = None,
        verifier_timeout: float = KEPT,
        govern_every: int | None = KEPT,
        govern_every_seconds: float | None = KEPT,
        actor: str = "python",
    ) -> None:
        check_store_settings(clock, seed)
        if settings is not None and not isinstance(settings, Settings):
            raise ValidationError("settings", f"must be a memworth.Settings, got {type(settings).__name__}")
        check_verifier(verifier)
        self.backend = backend
        self.clock = clock
        self._seed = seed
        self._rng = np.random.default_rng(seed)
        named = {
            "scoring": scoring,
            "exploration": exploration,
            "min_evidence": min_evidence,
            "credit": credit,
            "w_min": w_min,
            "sources": sources,
            "propagation": propagation,
            "max_hops": max_hops,
            "policy": policy,
            "index": index,
            "index_threshold": index_threshold,
            "reliability": reliability,
            "limits": limits,
            "burst": burst,
            "holdout": holdout,
            "ablation": ablation,
            "probe_share": probe_share,
            "verifier_timeout": verifier_timeout,
            "govern_every": govern_every,
            "govern_every_seconds": govern_every_seconds,
        }
        given = {k: v for k, v in named.items() if v is not KEPT and not (k in ("policy", "holdout") and v is None)}
        kept, version = self._kept_settings()  # read first: a later version is followed
        chosen, self._planner_given = settings_from_arguments(settings or kept, given, seed)
        if chosen.recall.index == "hnsw" and not faiss_available():
            raise ValidationError("index", "'hnsw' needs faiss: pip install 'memworth[index]'")
        self.hot: HotTier | None = None
        self._hot_stale: set[str] = set()  # namespaces whose mirror missed a change (Redis was down)
        if hot_tier is not None:
            from memworth.store.hot import HotTier

            self.hot = HotTier(hot_tier)
        self._encoder = encoder
        self._bind_encoder(encoder)
        self._spaces = {}
        self._adopt(chosen, version)
        if settings is not None or given:  # a new version, on the newest kept one if another came first
            self._write_version(lambda now_kept: settings_from_arguments(settings or now_kept, given, seed)[0], actor)
        self._parents: dict[str, tuple[int, dict[str, list[str]]]] = {}
        self.verifier = verifier
        self._outcomes_since_govern: dict[str, int] = {}
        self._governed_at: dict[str, float] = {}  # per namespace: the last automatic round's time, as last read
        self._followed: dict[str, Followed] = {}  # per namespace: its history as last read, and its detectors
        self._follow_lock = threading.RLock()
        self._live: dict[str, LiveAlarms] = {}  # per namespace, for an AlarmSplitter
        self._live_lock = threading.Lock()
        self._agreement: dict[tuple[str, str], Agreement] = {}
        self._verified_seq = 0
        self._next_expiry: dict[str, tuple[int, float | None]] = {}
        self._filters: dict[tuple[str, str], dict[str, bool]] = {}  # recall filters' answers per memory

    # -- opening and closing ---------------------------------------------------------

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

    def _embed(self, texts: list[str], progress: Progress = False) -> np.ndarray:
        """Vectors of ``texts``; more than :data:`EMBED_CHUNK` go to the encoder in chunks.

        Chunks hold texts of similar length (sorted by characters), so the encoder's own
        batches stay full; with ``progress`` a bar on stderr counts the texts embedded.
        """
        if len(texts) <= EMBED_CHUNK:
            return self._checked(self.encoder.encode(texts), len(texts))
        from memworth.progress import bar

        order = np.argsort(np.fromiter(map(len, texts), dtype=np.int64, count=len(texts)), kind="stable")
        vectors = np.empty((len(texts), self.encoder.dimension), dtype=np.float32)
        shown = bar(len(texts), "embedding", progress)
        try:
            for start in range(0, len(texts), EMBED_CHUNK):
                rows = order[start : start + EMBED_CHUNK]
                vectors[rows] = self._checked(self.encoder.encode([texts[i] for i in rows]), len(rows))
                shown.update(len(rows))
        finally:
            shown.close()
        return vectors

    def _checked(self, encoded: object, n: int) -> np.ndarray:
        vectors = np.asarray(encoded, dtype=np.float32)
        if vectors.shape != (n, self.encoder.dimension) or not np.isfinite(vectors).all():
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
        ttl: float | None = None,
    ) -> Memory:
        """Store one memory; see :meth:`add_many`."""
        return run(
            self._add_steps(
                text,
                id=id,
                namespace=namespace,
                metadata=metadata,
                contexts=contexts,
                derived_from=derived_from,
                part_of=part_of,
                ttl=ttl,
            ),
            self.backend,
        )

    def _add_steps(
        self,
        text: str,
        *,
        id: str | None = None,
        namespace: str = "default",
        metadata: dict[str, Any] | None = None,
        contexts: Sequence[str] | None = None,
        derived_from: Sequence[str] | None = None,
        part_of: Sequence[str] | None = None,
        ttl: float | None = None,
    ) -> Steps[Memory]:
        """:meth:`add` as steps (:mod:`memworth.store.steps`): what the sync and the async store run."""
        item: dict[str, Any] = {"text": text, "id": id, "metadata": metadata, "contexts": contexts}
        item |= {"derived_from": derived_from, "part_of": part_of, "ttl": ttl}
        check_name(namespace, "namespace")
        now = self.clock()
        kept_ttl = yield from self._ttl_steps(namespace)
        added = yield from self._add_new_steps(_new_memories([item], namespace, now, kept_ttl), namespace)
        return added[0]

    def _prepare_one(self, text: str, *, namespace: str, expires: float | None, **item: Any) -> NewMemory:
        """The row of one new memory, checked and embedded, with an expiry time instead of a time
        to live (an edit keeps the old version's); nothing is written."""
        new = _new_memories([{"text": text, **item}], namespace, self.clock(), None)[0]
        return self._prepare([dataclasses.replace(new, expires=expires)], namespace)[0]

    def add_many(
        self, items: Sequence[dict[str, Any]], *, namespace: str = "default", progress: Progress = False
    ) -> list[Memory]:
        """Store many memories in one transaction (all or none), embedding them in batches.

        Each item is a dict with ``text`` and optionally ``id`` (default: a random one),
        ``metadata`` (JSON object), ``contexts`` (labels), ``derived_from`` and ``part_of``
        (ids of memories in the same namespace, or elsewhere in ``items``) and ``ttl``
        (seconds to live; default the namespace's, :meth:`set_ttl`, else forever). An id
        in use or erased before (:meth:`delete`) is refused (DuplicateError).

        Every item is checked before anything is written: a bad one is refused with the
        field at fault and its position (``items[i]``) in the reason. The memory rows go
        to the backend in one bulk write (SQLite ``executemany``, PostgreSQL ``COPY``)
        inside one transaction, so loading many memories costs one round trip, not one
        per memory. Texts are embedded in chunks of :data:`EMBED_CHUNK`; with ``progress``
        a bar on stderr (tqdm, when installed) counts them, which for 100,000 memories is
        minutes of work (BENCHMARKS.md).
        """
        return run(self._add_many_steps(items, namespace=namespace, progress=progress), self.backend)

    def _add_many_steps(
        self, items: Sequence[dict[str, Any]], *, namespace: str = "default", progress: Progress = False
    ) -> Steps[builtins.list[Memory]]:
        """:meth:`add_many` as steps; more than :data:`EMBED_INLINE` items are one blocking step
        (checking, embedding, building and sending thousands of rows is CPU work)."""
        if isinstance(items, Sequence) and not isinstance(items, (str, dict)) and len(items) > EMBED_INLINE:
            added = yield Blocking(run, (self._add_many_body(items, namespace, progress), self.backend))
            return added
        added = yield from self._add_many_body(items, namespace, progress)
        return added

    def _add_many_body(
        self, items: Sequence[dict[str, Any]], namespace: str, progress: Progress
    ) -> Steps[builtins.list[Memory]]:
        check_name(namespace, "namespace")
        check_progress(progress)
        if isinstance(items, (str, dict)) or not isinstance(items, Sequence) or not items:
            raise ValidationError("items", "must be a non-empty list of memories (dicts with 'text')")
        now = self.clock()
        kept_ttl = yield from self._ttl_steps(namespace)
        added = yield from self._add_new_steps(
            _new_memories(items, namespace, now, kept_ttl, positions=True), namespace, progress=progress
        )
        return added

    def _add(self, memories: builtins.list[Memory], namespace: str, progress: Progress = False) -> builtins.list[Memory]:
        """Check provenance, embed and insert in one backend call (one transaction)."""
        return run(self._add_new_steps(memories, namespace, progress), self.backend)

    def _add_new_steps(
        self, memories: builtins.list[Memory], namespace: str, progress: Progress = False
    ) -> Steps[builtins.list[Memory]]:
        """:meth:`_add` as steps: the write of more than :data:`EMBED_INLINE` memories (building
        and sending each row is CPU work in proportion) is a blocking step."""
        rows = yield from self._prepare_steps(memories, namespace, progress)
        if len(rows) > EMBED_INLINE:
            yield Blocking(self.backend.insert_memories, (rows,))
        else:
            yield Call("insert_memories", (rows,))
        # the namespace's generation moved: the provenance cached for it is not current, and a
        # record crediting a held episode with it would be refused by the write (then read back);
        # forgotten, the next record reads the provenance at once, as a record by id does
        self._parents.pop(namespace, None)
        return memories

    def _prepare(
        self, memories: builtins.list[Memory], namespace: str, progress: Progress = False
    ) -> builtins.list[NewMemory]:
        """The rows to insert for ``memories``: provenance checked, embedded; nothing written."""
        return run(self._prepare_steps(memories, namespace, progress), self.backend)

    def _prepare_steps(
        self, memories: builtins.list[Memory], namespace: str, progress: Progress = False
    ) -> Steps[builtins.list[NewMemory]]:
        """:meth:`_prepare` as steps: embedding more than :data:`EMBED_INLINE` texts is a
        blocking step (an async store makes it in a thread)."""
        known = {m.id for m in memories}
        linked = {d for m in memories for d in (*m.derived_from, *m.part_of)} - known
        if linked:
            found = {m.id for m in (yield Call("memories", (namespace, sorted(linked))))}
            missing = sorted(linked - found)
            if missing:
                raise UnknownMemoryError(missing[0])
        texts = [m.text for m in memories]
        if len(texts) > EMBED_INLINE:
            vectors = yield Blocking(self._embed, (texts, progress))
        else:
            vectors = self._embed(texts, progress)
        return [NewMemory(m, v) for m, v in zip(memories, vectors, strict=True)]

    def get(self, memory_id: str, *, namespace: str = "default") -> Memory:
        """One memory, with its current counts; ErasedMemoryError (a 404) for one erased by :meth:`delete`."""
        return run(self._get_steps(memory_id, namespace=namespace), self.backend)

    def _get_steps(self, memory_id: str, *, namespace: str = "default") -> Steps[Memory]:
        """:meth:`get` as steps."""
        check_name(namespace, "namespace")
        found = yield Call("memories", (namespace, [check_memory_id(memory_id)]))
        if not found:
            gone = yield Call("erased", (namespace, [memory_id]))
            if memory_id in gone:
                raise ErasedMemoryError(memory_id, gone[memory_id])
            raise UnknownMemoryError(memory_id)
        return found[0]

    def list(
        self, *, namespace: str = "default", status: str | None = None, context: str | None = None
    ) -> list[Memory]:
        """Memories of a namespace, optionally only one status or one context label."""
        return run(self._list_steps(namespace=namespace, status=status, context=context), self.backend)

    def _list_steps(
        self, *, namespace: str = "default", status: str | None = None, context: str | None = None
    ) -> Steps[builtins.list[Memory]]:
        """:meth:`list` as steps."""
        check_name(namespace, "namespace")
        if status is not None and (not isinstance(status, str) or status not in STATUSES):
            raise ValidationError("status", f"must be one of {', '.join(STATUSES)}, got {status!r}")
        out = yield Call("memories", (namespace,))
        if status is not None:
            out = [m for m in out if m.status == status]
        if context is not None:
            out = [m for m in out if context in m.contexts]
        return out


EMBED_CHUNK = 1024
"""Texts per encoder call when a store embeds many (add_many): the progress bar's step."""

EMBED_INLINE = 8
"""Most texts an async store embeds (and memories it writes) on the event loop itself (a
query, a few memories); more are embedded and written in a worker thread, so that the loop
never waits on a long encoder call or on building a long ``COPY``."""

_FIELDS = frozenset({"text", "id", "metadata", "contexts", "derived_from", "part_of", "ttl"})
_NO_COUNTS = Counts()  # frozen: every new memory can share it


for _name in FOLLOWING:  # each first puts in force a settings version another process kept
    setattr(MemoryStore, _name, following_settings(getattr(MemoryStore, _name)))


def _new_memories(
    items: Sequence[Any], namespace: str, now: float, ttl: float | None, *, positions: bool = False
) -> list[Memory]:
    """Validate every item (nothing is written yet) and build its :class:`Memory`; an item
    without its own ``ttl`` gets ``ttl`` (the namespace's).

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
            own = check_ttl(item.get("ttl"))
            life = own if own is not None else ttl
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
                    expires=None if life is None else now + life,
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


def _encoder_named(name: str) -> Encoder:
    if name.startswith("hashing-") and name[8:].isdigit():
        return HashingEncoder(int(name[8:]))
    if name == "all-MiniLM-L6-v2":
        from memworth.embed.minilm import load_minilm

        return load_minilm()
    raise SettingsError(
        f"the store's embeddings come from {name!r}; pass that encoder to MemoryStore.open(encoder=...)"
    )
