"""The :class:`Sidecar`: register another store's memory ids, re-rank its candidates, log episodes, read worth."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any, TypeVar

import numpy as np

from memworth.counts import Counts, CountsTable
from memworth.credit import normalise
from memworth.errors import DuplicateError, UnknownMemoryError, ValidationError
from memworth.governance import Proposal
from memworth.ranking import ScoreRule, Selection
from memworth.sidecar.arguments import (
    MAX_RETRIEVED,
    candidate_scores,
    check_context,
    check_ids,
    check_k,
    check_query,
)
from memworth.sidecar.records import Ranked, Retrieval
from memworth.store.backend import NewMemory
from memworth.store.configuring import WrapsStore
from memworth.store.records import AuditEntry, Episode, EpisodeItem, Memory, ProbeDraw
from memworth.store.report import MemoryReport, worth_of
from memworth.store.steps import Call, Steps, run
from memworth.store.store import (
    UNGOVERNED,
    GovernanceReport,
    MemoryStore,
    ReplayReport,
)
from memworth.validation import check_labels, check_metadata, check_name

__all__ = ["Sidecar"]

R = TypeVar("R")

_NO_VECTOR = np.zeros(0, dtype=np.float32)


class Sidecar(WrapsStore):
    """Memory Worth for memories kept elsewhere: register ids, log retrievals, record outcomes.

    Parameters
    ----------
    store
        Where the evidence lives; use :meth:`open` with a URL rather than building one.
        The store needs no encoder: the sidecar never embeds anything.
    auto_register
        What to do with an id :meth:`retrieved` or :meth:`retrieve` logs that was never
        registered: register it on the spot (True, the default: the other store is the
        truth about which memories exist, so adopting the sidecar needs no migration
        step) or refuse with :class:`memworth.UnknownMemoryError`, writing nothing
        (False: for deployments that register every memory when it is written and want
        a wrong id caught).

    Examples
    --------
    >>> from memworth import Sidecar
    >>> sidecar = Sidecar.open("memory://", exploration=0.0)
    >>> sidecar.register(["doc-1", "doc-2"])
    ['doc-1', 'doc-2']
    >>> picked = sidecar.retrieve([("doc-1", 0.8), ("doc-2", 0.7)], k=1)
    >>> picked.ids
    ['doc-1']
    >>> sidecar.record(picked.episode, success=False)
    >>> sidecar.worth("doc-1").worth
    0.0
    >>> [r.id for r in sidecar.rerank([("doc-1", 0.8), ("doc-2", 0.7)])]
    ['doc-2', 'doc-1']
    """

    def __init__(self, store: MemoryStore, *, auto_register: bool = True) -> None:
        if not isinstance(store, MemoryStore):
            raise ValidationError("store", f"must be a MemoryStore, got {type(store).__name__}")
        if not isinstance(auto_register, bool):
            raise ValidationError("auto_register", f"must be True or False, got {auto_register!r}")
        self.store = store
        self.auto_register = auto_register

    @classmethod
    def open(cls, url: str = "sqlite:///memworth.db", *, auto_register: bool = True, **settings: Any) -> Sidecar:
        """Open (creating if needed) the sidecar at ``url``: ``sqlite:///path.db``, ``postgresql://...``
        or ``memory://``; ``settings`` go to :class:`memworth.MemoryStore` (``exploration``,
        ``seed``, ``scoring``, ``policy``, ``sources``, ``credit``, ...)."""
        store = MemoryStore.open(url, **settings)
        try:
            return cls(store, auto_register=auto_register)
        except BaseException:
            store.close()
            raise

    def __enter__(self) -> Sidecar:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.store.close()

    # -- ids --------------------------------------------------------------------------

    def _known(self, ids: list[str], namespace: str) -> dict[str, Memory]:
        return run(self._known_steps(ids, namespace), self.store.backend)

    def _known_steps(self, ids: list[str], namespace: str) -> Steps[dict[str, Memory]]:
        return {m.id: m for m in (yield Call("memories", (namespace, ids)))} if ids else {}

    def register(
        self,
        ids: Sequence[str],
        *,
        namespace: str = "default",
        contexts: Sequence[str] | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> list[str]:
        """Register external memory ids (no text needed); returns the ids that were new.

        Idempotent: an id already registered (or stored as an ordinary memory) is left
        as it is, metadata and contexts included, so registering on every write, or
        retrying a failed call, is safe. ``contexts`` and ``metadata`` apply to every
        new id of the call. The new ids are inserted in one transaction.
        """
        return run(
            self._register_steps(ids, namespace=namespace, contexts=contexts, metadata=metadata), self.store.backend
        )

    def _register_steps(
        self,
        ids: Sequence[str],
        *,
        namespace: str = "default",
        contexts: Sequence[str] | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Steps[list[str]]:
        """:meth:`register` as steps (:mod:`memworth.store.steps`)."""
        check_name(namespace, "namespace")
        wanted = check_ids(ids, "ids", limit=1_000_000)
        labels = check_labels(contexts, "contexts")
        meta = check_metadata(metadata)
        for _attempt in range(3):
            known = yield from self._known_steps(wanted, namespace)
            new = [mid for mid in wanted if mid not in known]
            if not new:
                return []
            now = self.store.clock()
            rows = [
                NewMemory(Memory(mid, "", namespace, dict(meta), labels, created=now, updated=now), _NO_VECTOR)
                for mid in new
            ]
            try:
                yield Call("insert_memories", (rows,))
                return new
            except DuplicateError:
                continue  # registered by someone else meanwhile: read again, insert the rest
        raise DuplicateError(f"ids kept being registered concurrently in namespace {namespace!r}; retry")

    def filter(self, ids: Sequence[str], *, namespace: str = "default") -> list[str]:
        """``ids`` without the suppressed, deprecated or archived ones, in the order given
        (an unregistered id has no evidence against it and is kept), and without the
        quarantined ones (standing ``re-verify``), which are served only as probes by :meth:`retrieve`."""
        check_name(namespace, "namespace")
        wanted = check_ids(ids)
        known = self._known(wanted, namespace)
        return [
            mid
            for mid in wanted
            if mid not in known or (known[mid].status == "active" and known[mid].standing != "re-verify")
        ]

    # -- ranking and episodes -----------------------------------------------------------

    def _rank(
        self,
        candidates: object,
        namespace: str,
        statuses: tuple[str, ...] = ("active",),
        *,
        quarantined: bool = True,
    ) -> tuple[list[str], np.ndarray, CountsTable, np.ndarray, dict[str, Memory]]:
        """Unknown candidates and those with one of ``statuses`` (without the ones under
        re-verify unless ``quarantined``), with their given similarity, counts and creation time."""
        return run(self._rank_steps(candidates, namespace, statuses, quarantined=quarantined), self.store.backend)

    def _rank_steps(
        self,
        candidates: object,
        namespace: str,
        statuses: tuple[str, ...] = ("active",),
        *,
        quarantined: bool = True,
    ) -> Steps[tuple[list[str], np.ndarray, CountsTable, np.ndarray, dict[str, Memory]]]:
        """:meth:`_rank` as steps."""
        check_name(namespace, "namespace")
        ids, sims = candidate_scores(candidates)
        known = yield from self._known_steps(ids, namespace)

        def kept(mid: str) -> bool:
            m = known.get(mid)
            return m is None or (m.status in statuses and (quarantined or m.standing != "re-verify"))

        keep = [i for i, mid in enumerate(ids) if kept(mid)]
        ids = [ids[i] for i in keep]
        sims = sims[keep]
        mems = [known.get(mid) for mid in ids]
        zero = Counts()
        table = CountsTable(
            np.array([(m.counts if m else zero).success for m in mems], dtype=float),
            np.array([(m.counts if m else zero).failure for m in mems], dtype=float),
            np.array([(m.counts if m else zero).n for m in mems], dtype=float),
        )
        now = self.store.clock()
        created = np.array([m.created if m else now for m in mems], dtype=float)  # unknown: new
        return ids, sims, table, created, known

    def _ranked(
        self,
        ids: list[str],
        sims: np.ndarray,
        scores: np.ndarray,
        table: CountsTable,
        known: dict[str, Memory],
        picked: np.ndarray,
        propensity: np.ndarray | None = None,
        explored: np.ndarray | None = None,
        probe: np.ndarray | None = None,
    ) -> list[Ranked]:
        if not ids:
            return []
        shown = worth_of(self.store.policy, table)
        worth, lo, hi, classes = shown.worth, shown.lower, shown.upper, shown.value_class
        out = []
        for pos, i in enumerate(picked):
            m = known.get(ids[i])
            out.append(
                Ranked(
                    ids[i],
                    float(scores[i]),
                    float(sims[i]),
                    float(worth[i]),
                    float(np.asarray(lo)[i]),
                    float(np.asarray(hi)[i]),
                    float(table.n[i]),
                    str(classes[i]),
                    m.standing if m else "normal",
                    m is not None,
                    1.0 if propensity is None else float(propensity[pos]),
                    False if explored is None else bool(explored[pos]),
                    False if probe is None else bool(probe[pos]),
                )
            )
        return out

    def rerank(
        self,
        candidates: Sequence[tuple[str, float]] | Sequence[str],
        k: int | None = None,
        *,
        namespace: str = "default",
        scoring: ScoreRule | None = None,
    ) -> list[Ranked]:
        """Re-rank another store's candidates by similarity blended with worth; logs nothing.

        ``candidates`` are ``(id, similarity)`` pairs (higher is more similar; the default
        :class:`memworth.ranking.Blend` expects cosine-like scores in [0, 1]) or ids alone,
        best first (scored by :func:`rank_scores`). Suppressed, deprecated and archived
        memories are dropped; unregistered ids count as no evidence (worth 0.5). The
        ranking is the store's ``scoring`` rule unless ``scoring`` is given
        (``Blend``, ``LowerBoundBlend``, ``CosineRecencyWorth``); ties keep the given
        order. Returns the best ``k`` (default: all), deterministically: no exploration.
        """
        if k is not None:
            check_k(k)
        ids, sims, table, created, known = self._rank(candidates, namespace, quarantined=False)
        standing = [known[mid].standing if mid in known else "normal" for mid in ids]
        scores = self.store.score(sims, table, created, scoring, standing) if ids else np.zeros(0)
        order = np.argsort(-scores, kind="stable")[: len(ids) if k is None else k]
        return self._ranked(ids, sims, scores, table, known, order)

    def retrieve(
        self,
        candidates: Sequence[tuple[str, float]] | Sequence[str],
        k: int = 4,
        *,
        query: str = "",
        context: str | None = None,
        namespace: str = "default",
        scoring: ScoreRule | None = None,
    ) -> Retrieval:
        """Pick ``k`` of another store's candidates and log the episode: :meth:`rerank`, then
        the store's exploration floor and credit rule, as :meth:`MemoryStore.recall` does.

        Each pick's inclusion probability is logged with it. Unregistered picks are
        registered first (or refused: see ``auto_register``). Report the outcome with
        :meth:`record`.

        The pick is the store's own recall step (:meth:`MemoryStore.choose`): the store's
        ``ablation`` planner acts here too, and in a store with a ``holdout`` share a holdout
        episode takes the ``k`` most similar candidates without governance (suppressed and
        deprecated ones included), marked ``episode.holdout``, as :meth:`MemoryStore.recall` does.
        """
        steps = self._retrieve_steps(candidates, k, query=query, context=context, namespace=namespace, scoring=scoring)
        return run(steps, self.store.backend)

    def _retrieve_steps(
        self,
        candidates: Sequence[tuple[str, float]] | Sequence[str],
        k: int = 4,
        *,
        query: str = "",
        context: str | None = None,
        namespace: str = "default",
        scoring: ScoreRule | None = None,
    ) -> Steps[Retrieval]:
        """:meth:`retrieve` as steps."""
        check_k(k)
        query = check_query(query)
        check_context(context)
        eid = uuid.uuid4().hex
        diagnostics: dict[str, Any] = {}
        if self.store.holdout_episode(eid):
            ids, sims, table, _created, known = yield from self._rank_steps(candidates, namespace, UNGOVERNED)
            scores = sims
            order = np.argsort(-sims, kind="stable")[:k]
            sel = Selection(order, np.zeros(order.size, dtype=bool), np.ones(order.size))
            weights = self.store._credit(sims[order])
            probe = np.zeros(order.size, dtype=bool)
            draws: tuple[ProbeDraw, ...] = ()
            diagnostics["holdout"] = True
        else:
            ids, sims, table, created, known = yield from self._rank_steps(candidates, namespace)
            standing = [known[mid].standing if mid in known else "normal" for mid in ids]
            choice = self.store.choose(namespace, ids, sims, table, created, k, diagnostics, scoring, standing)
            sel, scores, weights, probe = choice.selection, choice.scores, choice.weights, choice.probe
            draws = choice.draws
        picked = [ids[i] for i in sel.picked]
        yield from self._ensure_steps(picked, known, namespace)
        items = tuple(
            EpisodeItem(mid, float(w), float(p), pos, bool(q))
            for pos, (mid, w, p, q) in enumerate(zip(picked, weights, sel.propensity, probe, strict=True))
        )
        episode = yield from self._log_steps(
            items, query, context, namespace, eid, holdout=bool(diagnostics.get("holdout")), draws=draws
        )
        results = self._ranked(ids, sims, scores, table, known, sel.picked, sel.propensity, sel.explored, probe)
        return Retrieval(episode, tuple(results), diagnostics)

    def retrieved(
        self,
        ids: Sequence[str],
        *,
        weights: Sequence[float] | None = None,
        query: str = "",
        context: str | None = None,
        namespace: str = "default",
    ) -> Episode:
        """Log that the other store retrieved ``ids`` (best first) for one episode; returns
        its handle for :meth:`record`.

        ``weights``: each memory's share of the credit (normalised to sum to 1, with the
        store's ``w_min`` floor); default uniform, 1/k each. The other store chose the
        ids, so each is logged with inclusion probability 1. Unregistered ids are
        registered first (or refused: see ``auto_register``).
        """
        check_name(namespace, "namespace")
        picked = check_ids(ids, "ids", limit=MAX_RETRIEVED)
        query = check_query(query)
        check_context(context)
        if weights is None:
            w = np.full(len(picked), 1.0 / max(len(picked), 1))
        else:
            if len(weights) != len(picked):
                raise ValidationError("weights", f"has {len(weights)} entries for {len(picked)} ids")
            w = normalise(weights, w_min=self.store.w_min) if picked else np.zeros(0)
        self._ensure(picked, self._known(picked, namespace), namespace)
        items = tuple(EpisodeItem(mid, float(x), 1.0, pos) for pos, (mid, x) in enumerate(zip(picked, w, strict=True)))
        return self._log(items, query, context, namespace)

    def _ensure(self, ids: list[str], known: dict[str, Memory], namespace: str) -> None:
        run(self._ensure_steps(ids, known, namespace), self.store.backend)

    def _ensure_steps(self, ids: list[str], known: dict[str, Memory], namespace: str) -> Steps[None]:
        missing = [mid for mid in ids if mid not in known]
        if missing and not self.auto_register:
            raise UnknownMemoryError(missing[0])
        if missing:
            yield from self._register_steps(missing, namespace=namespace)

    def _log(
        self,
        items: tuple[EpisodeItem, ...],
        query: str,
        context: str | None,
        namespace: str,
        episode_id: str | None = None,
        *,
        holdout: bool = False,
    ) -> Episode:
        return run(self._log_steps(items, query, context, namespace, episode_id, holdout=holdout), self.store.backend)

    def _log_steps(
        self,
        items: tuple[EpisodeItem, ...],
        query: str,
        context: str | None,
        namespace: str,
        episode_id: str | None = None,
        *,
        holdout: bool = False,
        draws: tuple[ProbeDraw, ...] = (),
    ) -> Steps[Episode]:
        eid = uuid.uuid4().hex if episode_id is None else episode_id
        episode = Episode(eid, namespace, query, context, self.store.clock(), items, holdout=holdout, draws=draws)
        yield Call("insert_episode", (episode,))
        return episode

    # -- outcomes and evidence ----------------------------------------------------------

    def record(
        self,
        episode: Retrieval | Episode | str,
        success: object,
        *,
        source: str = "explicit",
        confidence: float | None = None,
        used: Sequence[str] | None = None,
        namespace: str | None = None,
    ) -> None:
        """Record an episode's outcome (see :meth:`MemoryStore.record`): credit its memories, log it.

        ``episode``: the :class:`Retrieval` :meth:`retrieve` returned, an episode, or its id.
        ``used``: the ids of the retrieved documents the agent used; only they are credited
        (``None``: all of them). ``namespace``: the episode's (a :class:`Retrieval` carries it; an
        id needs it when two namespaces logged the same id, which PostgreSQL allows)."""
        self.store.record(
            episode.episode if isinstance(episode, Retrieval) else episode,
            success,
            source=source,
            confidence=confidence,
            used=used,
            namespace=namespace,
        )

    def _record_steps(
        self,
        episode: Retrieval | Episode | str,
        success: object,
        *,
        source: str = "explicit",
        confidence: float | None = None,
        used: Sequence[str] | None = None,
        namespace: str | None = None,
    ) -> Steps[None]:
        """:meth:`record` as steps (:mod:`memworth.store.steps`), for an async sidecar."""
        ref = episode.episode if isinstance(episode, Retrieval) else episode
        yield from self.store._record_steps_one(
            ref, success, source=source, confidence=confidence, used=used, namespace=namespace
        )

    def _worth_steps(self, memory_id: str, *, namespace: str = "default") -> Steps[MemoryReport]:
        """:meth:`worth` as steps."""
        found = yield from self._worth_many_steps([memory_id], namespace=namespace)
        return found[0]

    def _worth_many_steps(self, ids: Sequence[str], *, namespace: str = "default") -> Steps[list[MemoryReport]]:
        """:meth:`worth_many` as steps."""
        found = yield from self.store._reports_steps(check_ids(ids), namespace=namespace)
        return found

    def _following_steps(self, steps: Steps[R]) -> Steps[R]:
        """The store's :meth:`MemoryStore._following_steps`: its kept settings first."""
        return self.store._following_steps(steps)

    def worth(self, memory_id: str, *, namespace: str = "default") -> MemoryReport:
        """One registered memory's report (:meth:`MemoryStore.report`): worth, interval,
        evidence, class, status and the change governance proposes now."""
        return self.worth_many([memory_id], namespace=namespace)[0]

    def worth_many(self, ids: Sequence[str], *, namespace: str = "default") -> list[MemoryReport]:
        """:meth:`worth` for many ids, in the order given; an unregistered id raises UnknownMemoryError."""
        return self.store.reports(check_ids(ids), namespace=namespace)

    # -- governance (the store's, on the same memories) ---------------------------------

    def suggestions(self, *, namespace: str = "default") -> list[Proposal]:
        """What governance proposes now (suppress, deprecate, re-verify, promote, demote), with reasons."""
        return self.store.govern(apply=False, namespace=namespace).proposals

    def govern(self, *, apply: bool = False, namespace: str = "default") -> GovernanceReport:
        """Propose and, with ``apply``, make the changes, audited (see :meth:`MemoryStore.govern`)."""
        return self.store.govern(apply=apply, namespace=namespace)

    def set_status(self, memory_id: str, status: str, *, reason: str, namespace: str = "default") -> AuditEntry:
        """Suppress, deprecate, archive or reactivate a memory by hand, audited."""
        return self.store.set_status(memory_id, status, reason=reason, namespace=namespace)

    def restore(
        self, audit_seq: int, *, reason: str = "restored", actor: str | None = None, namespace: str = "default"
    ) -> AuditEntry:
        """Undo one audited change, naming who undid it (``actor``)."""
        return self.store.restore(audit_seq, reason=reason, actor=actor, namespace=namespace)

    # -- review (the store's verification queue and pins) -----------------------------

    def queue(self, *, namespace: str = "default") -> list[MemoryReport]:
        """Memories quarantined for re-verification (:meth:`retrieve` serves them only as probes), with their reports."""
        return self.store.queue(namespace=namespace)

    def resolve(
        self,
        memory_id: str,
        verdict: str,
        *,
        reason: str,
        text: str | None = None,
        new_id: str | None = None,
        status: str | None = None,
        actor: str | None = None,
        namespace: str = "default",
    ) -> AuditEntry:
        """Resolve a quarantined memory, audited (naming ``actor``) and pinned (:meth:`MemoryStore.resolve`):
        ``confirmed``, ``stale`` (``status``: suppressed, the default, or deprecated) or
        ``edited`` (``text`` becomes a new memory kept here, ``new_id``)."""
        return self.store.resolve(
            memory_id, verdict, reason=reason, text=text, new_id=new_id, status=status, actor=actor, namespace=namespace
        )

    def pin(self, memory_id: str, *, reason: str, actor: str | None = None, namespace: str = "default") -> AuditEntry:
        """Keep governance away from a memory until :meth:`unpin` (audited, naming ``actor``)."""
        return self.store.pin(memory_id, reason=reason, actor=actor, namespace=namespace)

    def unpin(self, memory_id: str, *, reason: str, actor: str | None = None, namespace: str = "default") -> AuditEntry:
        """End a memory's pin (an explicit one, or the one a person's decision set); audited, naming ``actor``."""
        return self.store.unpin(memory_id, reason=reason, actor=actor, namespace=namespace)

    def audit(self, memory_id: str | None = None, *, namespace: str = "default") -> list[AuditEntry]:
        """The audit log of a namespace (or one memory), oldest first."""
        return self.store.audit(memory_id, namespace=namespace)

    def replay(self, *, apply: bool = False) -> ReplayReport:
        """Rebuild every counter from the outcome log (see :meth:`MemoryStore.replay`)."""
        return self.store.replay(apply=apply)
