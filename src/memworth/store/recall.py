"""Recall: the candidate search, the ranking and the governed pick every face shares.

A recall embeds the query, finds the most similar active memories (in the database, in
the namespace's vector index or in the Redis hot tier), scores them with the store's
ranking rule and their standing, keeps quarantined ones out except as probes, picks
``k`` with the exploration floor, shares the credit and logs the episode. A holdout
episode is ranked by similarity alone.
"""

from __future__ import annotations

import builtins
import json
import math
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from memworth.counts import Counts, CountsTable
from memworth.credit import normalise
from memworth.embed.vector_index import ExactIndex, HNSWIndex, VectorIndex, faiss_available
from memworth.errors import StoreError, ValidationError
from memworth.ranking import (
    ScoreRule,
    Selection,
    at_face_value,
    drop,
    inclusion_probabilities,
    select,
    with_standing,
)
from memworth.signals.holdout import in_holdout
from memworth.store.backend import Backend, erased_key
from memworth.store.filters import RecallFilter
from memworth.store.records import Episode, EpisodeItem, Memory, ProbeDraw, Recalled
from memworth.store.report import worth_of
from memworth.store.state import StoreState
from memworth.store.steps import Blocking, Call, Steps, run
from memworth.validation import check_context, check_k, check_memory_id, check_name, check_text

if TYPE_CHECKING:
    from memworth.store.hot import HotMemory

__all__ = [
    "FILTERS_KEPT",
    "PROBES_DRAWN",
    "UNGOVERNED",
    "Choice",
    "Recall",
    "RecallMixin",
    "in_contention",
    "served_chance",
]

FILTERS_KEPT = 32
"""Recall filters whose per-memory answers a store keeps (the least recently used go first)."""

CONTENT_KEPT = 100_000
"""Memories per namespace whose unchanging content (text, metadata, contexts, provenance,
expiry) a store object keeps after recall read it, so that a memory picked again is not
read again (the namespace's vector index holds 1.5 KB a memory at 384 dimensions beside)."""

UNGOVERNED = ("active", "suppressed", "deprecated")
"""Statuses a holdout recall may return: all but ``archived``, which a person sets."""


@dataclass(frozen=True)
class Recall:
    """What :meth:`MemoryStore.recall` returns: the memories, best first, and the episode."""

    episode: Episode
    results: tuple[Recalled, ...]
    diagnostics: dict[str, Any] = field(default_factory=dict)

    def __iter__(self) -> Iterator[Recalled]:
        return iter(self.results)

    def __len__(self) -> int:
        return len(self.results)

    @property
    def texts(self) -> list[str]:
        return [r.memory.text for r in self.results]

    def _repr_html_(self) -> str:
        from memworth.reprs import cell, table

        rows = [[r.memory.id, r.memory.text, r.score, r.similarity, r.worth, r.value_class, r.probe] for r in self]
        head = ["id", "text", "score", "similarity", "worth", "class", "probe"]
        return table(head, rows) + f"<p>episode {cell(self.episode.id)}</p>"


@dataclass(frozen=True)
class Choice:
    """What :meth:`MemoryStore.choose` picked: the selection (indices into the candidates,
    with each pick's inclusion probability), every candidate's score, the picks' credit
    weights and which picks are probes of quarantined memories."""

    selection: Selection
    scores: np.ndarray
    weights: np.ndarray
    probe: np.ndarray
    draws: tuple[ProbeDraw, ...] = ()
    """The probe draws of the quarantined candidates in contention (:func:`in_contention`):
    each a probe (allowed to compete) or a control (held out), to log with the episode."""


class _Content(NamedTuple):
    """What never changes under a memory's id: its text, metadata (JSON text, None when
    empty, so each recall hands out its own dict), contexts, provenance and expiry."""

    text: str
    metadata: str | None
    contexts: tuple[str, ...]
    derived_from: tuple[str, ...]
    part_of: tuple[str, ...]
    expires: float | None

    @classmethod
    def of(cls, m: Memory) -> _Content:
        return cls(
            m.text, json.dumps(m.metadata) if m.metadata else None, m.contexts, m.derived_from, m.part_of, m.expires
        )


@dataclass(frozen=True)
class _Candidates:
    """Recall candidates, most similar first: ids, similarities, counts, creation times,
    standings and (from the narrow read) when each last changed.

    ``known`` holds the whole memories when they came with the search (the hot tier);
    otherwise :meth:`memories` builds the picked ones from the narrow read and what never
    changes under their ids, read from the backend only when not kept already.
    """

    ids: list[str]
    sims: np.ndarray
    table: CountsTable
    created: np.ndarray
    standing: list[str]
    known: dict[str, Memory] | None = None
    updated: list[float] | None = None

    @classmethod
    def of(cls, memories: list[Memory], sims: np.ndarray, order: list[str] | None = None) -> _Candidates:
        """From whole memories; with ``order``, the ids of ``sims`` (memories may lack some, in any order)."""
        by_id = {m.id: m for m in memories}
        keep = list(range(len(memories))) if order is None else [i for i, mid in enumerate(order) if mid in by_id]
        mems = memories if order is None else [by_id[order[i]] for i in keep]
        table = CountsTable(
            np.array([m.counts.success for m in mems], dtype=float),
            np.array([m.counts.failure for m in mems], dtype=float),
            np.array([m.counts.n for m in mems], dtype=float),
        )
        created = np.array([m.created for m in mems], dtype=float)
        standing = [m.standing for m in mems]
        return cls([m.id for m in mems], sims[keep], table, created, standing, {m.id: m for m in mems})

    def memories(
        self, backend: Backend, namespace: str, positions: list[int], kept: _Kept | None = None
    ) -> list[Memory]:
        """The memories at ``positions``, as ranked (:meth:`memories_steps` on ``backend``)."""
        return run(self.memories_steps(namespace, positions, kept), backend)

    def memories_steps(self, namespace: str, positions: list[int], kept: _Kept | None = None) -> Steps[list[Memory]]:
        """The memories at ``positions``, as ranked: status, standing, counts and time of last
        change as the narrow read gave them; their text, metadata, contexts, provenance and
        expiry from ``kept``, which reads from the backend (once) only the ones it lacks. As
        steps (:mod:`memworth.store.steps`)."""
        if self.known is not None:
            return [self.known[self.ids[i]] for i in positions]
        content = yield from (kept or _Kept()).of_steps(namespace, [self.ids[i] for i in positions])
        s, f, n = self.table.success.tolist(), self.table.failure.tolist(), self.table.n.tolist()
        out = []
        for i in positions:
            c = content[self.ids[i]]
            updated = self.updated[i] if self.updated is not None else float(self.created[i])
            out.append(
                Memory(
                    self.ids[i],
                    c.text,
                    namespace,
                    json.loads(c.metadata) if c.metadata is not None else {},
                    c.contexts,
                    c.derived_from,
                    c.part_of,
                    "active",
                    self.standing[i],
                    float(self.created[i]),
                    updated,
                    Counts(s[i], f[i], n[i]),
                    c.expires,
                )
            )
        return out


class _Kept:
    """What never changes under the ids of one namespace's memories (:class:`_Content`), as
    recall read it: a memory picked again is built from this and the narrow read, with no
    second read. At most :data:`CONTENT_KEPT` memories (the first kept leave first); dropped
    with the namespace's search state whenever a memory of it is erased."""

    def __init__(self) -> None:
        self.content: dict[str, _Content] = {}

    def of_steps(self, namespace: str, ids: builtins.list[str]) -> Steps[dict[str, _Content]]:
        """The content of ``ids`` (all must exist): one backend read for those not kept. As
        steps (:mod:`memworth.store.steps`)."""
        kept = self.content
        missing = [mid for mid in ids if mid not in kept]
        if missing:
            for m in (yield Call("memories", (namespace, missing))):
                kept[m.id] = _Content.of(m)
            while len(kept) > CONTENT_KEPT:
                del kept[next(iter(kept))]
        out = {}
        for mid in ids:
            if mid not in kept:  # more ids were asked for at once than are kept: read it, keep it not
                (m,) = yield Call("memories", (namespace, [mid]))
                out[mid] = _Content.of(m)
            else:
                out[mid] = kept[mid]
        return out


PROBES_DRAWN = 10
"""Quarantined candidates of one recall drawn for a probe, the best-scored first: the exact
chance of each pick sums over every outcome of their draws (2 ** PROBES_DRAWN at most)."""


def _probe_eligible(scores: np.ndarray, quarantined: np.ndarray) -> np.ndarray:
    """The quarantined candidates a recall draws for a probe: the :data:`PROBES_DRAWN` best-scored."""
    q = np.flatnonzero(quarantined)
    out = np.zeros(scores.size, dtype=bool)
    out[q[np.argsort(-scores[q], kind="stable")[:PROBES_DRAWN]]] = True
    return out


def in_contention(scores: np.ndarray, eligible: np.ndarray, plain: np.ndarray, k: int) -> np.ndarray:
    """The ``eligible`` quarantined candidates that would be served if their draw let them:
    those that, competing alone beside the ``plain`` candidates, rank among the first ``k``
    by score (fewer than ``k`` plain candidates score higher, or as high and come earlier:
    the order :func:`memworth.ranking.select` ranks in). Decided from the scores alone,
    before any draw, so which of them become probes and which controls is left to the draw
    only: the split is randomised.

    Examples
    --------
    >>> import numpy as np
    >>> scores = np.array([0.9, 0.8, 0.85, 0.1])
    >>> plain = np.array([True, True, False, False])
    >>> in_contention(scores, ~plain, plain, k=2).tolist()
    [False, False, True, False]
    """
    out = np.zeros(scores.size, dtype=bool)
    rivals = np.flatnonzero(plain)
    for i in np.flatnonzero(eligible):
        ahead = (scores[rivals] > scores[i]) | ((scores[rivals] == scores[i]) & (rivals < i))
        out[i] = int(ahead.sum()) < int(k)
    return out


def served_chance(
    scores: np.ndarray,
    eligible: np.ndarray,
    plain: np.ndarray,
    explorable: np.ndarray,
    k: int,
    exploration: float,
    share: float,
) -> np.ndarray:
    """Each candidate's exact chance to be picked when the ``plain`` ones always compete and
    each ``eligible`` one competes only when its own draw (chance ``share``) lets it: the
    chance :func:`memworth.ranking.select` picks it among those allowed
    (:func:`memworth.ranking.inclusion_probabilities`), summed over every outcome of the draws."""
    drawn = np.flatnonzero(eligible)
    out = np.zeros(scores.size)
    for mask in range(1 << drawn.size):
        chosen = np.array([(mask >> b) & 1 for b in range(drawn.size)], dtype=bool)
        weight = share ** int(chosen.sum()) * (1.0 - share) ** int((~chosen).sum())
        if weight == 0.0:
            continue
        allowed = plain.copy()
        allowed[drawn[chosen]] = True
        keep = np.flatnonzero(allowed)
        if keep.size == 0:
            continue
        order = np.argsort(-scores[keep], kind="stable")
        out[keep] += weight * inclusion_probabilities(order, explorable[keep], min(int(k), keep.size), exploration)
    return np.clip(out, 0.0, 1.0)


def _wider(n: int, want: int, matched: int) -> int:
    """How many candidates a filtered search asks for next: enough for ``want`` matches at the
    share that matched among ``n`` (half again as many), at least 4 and at most 64 times ``n``."""
    return n * min(64, max(4, math.ceil(1.5 * want / max(matched, 1))))


class _Space:
    """One namespace's search state: ids by index position, the index, inactive ids."""

    def __init__(self) -> None:
        self.generation = -1
        self.last_seq = 0
        self.ids: list[str] = []
        self.index: VectorIndex | None = None
        self.inactive: set[str] = set()
        self.erased: str | None = None  # the namespace's erasure counter the index was built after
        self.kept = _Kept()  # what never changes under the ids recall picked

    def add(self, ids: list[str], matrix: np.ndarray, kind: str, threshold: int) -> None:
        dim = matrix.shape[1]
        total = len(self.ids) + len(ids)
        want_hnsw = kind == "hnsw" or (kind == "auto" and total >= threshold and faiss_available())
        if self.index is None:
            self.index = HNSWIndex(dim) if want_hnsw else ExactIndex(dim)
        elif want_hnsw and isinstance(self.index, ExactIndex):  # outgrew exact search: rebuild as HNSW
            hnsw = HNSWIndex(dim)
            hnsw.add(self.index.matrix)
            self.index = hnsw
        self.index.add(matrix)
        self.ids.extend(ids)


class RecallMixin(StoreState):
    """The recall part of :class:`memworth.store.MemoryStore`: :meth:`recall`, :meth:`choose`, :meth:`score`."""

    def _space(self, namespace: str) -> _Space:
        """The namespace's vector index, brought up to date with the backend."""
        return run(self._space_steps(namespace), self.backend)

    def _space_steps(self, namespace: str) -> Steps[_Space]:
        """:meth:`_space` as steps (:mod:`memworth.store.steps`)."""
        generation = yield Call("generation", (namespace,))
        space = self._spaces.get(namespace)
        if space is None:
            space = self._spaces[namespace] = _Space()
        if space.generation != generation:
            erased = yield Call("get_meta", (erased_key(namespace),))
            if erased != space.erased:  # a memory was erased: its vector leaves the index (rebuilt)
                space = self._spaces[namespace] = _Space()
                space.erased = erased
            ids, seqs, matrix = yield Call("vectors", (namespace,), {"after": space.last_seq})
            if ids:
                space.add(ids, matrix, self.index, self.index_threshold)
                space.last_seq = seqs[-1]
            space.inactive = set((yield Call("inactive", (namespace,))))
            space.generation = generation
        return space

    def recall(
        self,
        query: str,
        k: int = 4,
        *,
        context: str | None = None,
        namespace: str = "default",
        tier: str = "all",
        episode_id: str | None = None,
        where: dict[str, Any] | RecallFilter | None = None,
    ) -> Recall:
        """The ``k`` best active memories for ``query``, and the episode that logs them.

        Candidates are the most similar active memories; they are ranked by the store's
        scoring rule, with the exploration floor; the episode records each pick's credit
        weight and inclusion probability. Report its outcome with :meth:`record`.

        ``tier="hot"`` searches only the hot tier mirrored in Redis (the fastest path,
        with no database read before the episode is logged); if Redis cannot answer,
        recall falls back to every memory and says so in ``diagnostics``.

        ``episode_id``: the caller's own id for the episode (an agent's task id, say;
        default a random one); an id logged already is refused (DuplicateError). In a
        store with a ``holdout`` share, the id's hash decides whether the episode is a
        holdout one: ranked by similarity alone, suppressed and deprecated memories
        included, marked ``episode.holdout``.

        ``where``: consider only the memories that match a filter on metadata (equality,
        ranges), context labels, status and standing (:mod:`memworth.store.filters`),
        applied before ranking; ``context`` only labels the episode. A filtered recall
        searches the database, not the hot tier (which keeps no metadata).
        """
        steps = self._recall_steps(
            query, k, context=context, namespace=namespace, tier=tier, episode_id=episode_id, where=where
        )
        return run(steps, self.backend)

    def _recall_steps(
        self,
        query: str,
        k: int = 4,
        *,
        context: str | None = None,
        namespace: str = "default",
        tier: str = "all",
        episode_id: str | None = None,
        where: dict[str, Any] | RecallFilter | None = None,
    ) -> Steps[Recall]:
        """:meth:`recall` as steps (:mod:`memworth.store.steps`): what the sync and the async store run."""
        query = check_text(query, "query")
        check_name(namespace, "namespace")
        check_k(k)
        check_context(context)
        if not isinstance(tier, str) or tier not in ("all", "hot"):
            raise ValidationError("tier", f"must be 'all' or 'hot', got {tier!r}")
        eid = uuid.uuid4().hex if episode_id is None else check_memory_id(episode_id, "episode_id")
        flt = None if where is None else RecallFilter.of(where)
        yield from self._expire_due_steps(namespace)  # expired memories are erased before any search can return them
        diagnostics: dict[str, Any] = {"tier": "all"}
        if flt is not None:
            diagnostics["where"] = flt.spec
        q = self._embed([query])[0]
        if self.holdout_episode(eid):
            held_out = yield from self._recall_ungoverned_steps(eid, q, query, k, context, namespace, flt)
            return held_out
        picked_results: list[Recalled] = []
        items: list[EpisodeItem] = []
        draws: tuple[ProbeDraw, ...] = ()
        hot: builtins.list[HotMemory] | None = None
        if tier == "hot" and flt is not None:
            diagnostics["hot_tier"] = (
                "a filtered recall needs metadata the hot tier does not keep; searched every memory"
            )
        elif tier == "hot":
            if self.hot is None:
                diagnostics["hot_tier"] = "not configured; searched every memory"
            else:
                try:
                    if namespace in self._hot_stale:  # never serve a mirror that missed a change
                        yield Blocking(self.rebuild_hot_tier, (), {"namespace": namespace})
                    hot = yield Blocking(self.hot.load, (namespace,))
                    diagnostics["tier"] = "hot"
                    diagnostics["hot_tier"] = f"{len(hot)} hot memories from {self.hot.url}"
                except StoreError as exc:
                    diagnostics["hot_tier"] = f"{exc}; searched every memory in the database"
        cand: _Candidates | None = None
        want = max(50, 10 * k)  # candidates ranked per recall
        in_database = None
        if hot is None and self.index in ("auto", "database"):
            search = getattr(self.backend, "search", None)
            n = self._first_n(namespace, flt, want)
            while search is not None:  # with a filter: widen the search until enough candidates match
                in_database = yield Call("search", (namespace, q, n))
                if in_database is None:
                    break
                found_ids, found_sims = in_database
                cand = yield from self._candidates_steps(
                    namespace, list(found_ids), np.asarray(found_sims, dtype=float), flt
                )
                if flt is None or len(cand.ids) >= want or len(found_ids) < n:
                    break
                n = _wider(n, want, len(cand.ids))
        if in_database is not None:
            diagnostics["search"] = "database"
        space = (yield from self._space_steps(namespace)) if hot is None and in_database is None else None
        if hot is not None and hot:
            sims_all = np.stack([h.vector for h in hot]) @ q
            order = np.argsort(-sims_all)[: max(50, 10 * k)]
            mems = [
                Memory(
                    hot[i].id,
                    hot[i].text,
                    namespace,
                    created=hot[i].created,
                    counts=hot[i].counts,
                    standing=hot[i].standing,
                )
                for i in order
            ]
            cand = _Candidates.of(mems, sims_all[order].astype(float))
        elif space is not None and space.index is not None and len(space.ids) > len(space.inactive):
            # Over-fetch by the number of inactive memories, which are dropped here; with a
            # filter, widen the search until enough candidates match or every memory was seen.
            n = self._first_n(namespace, flt, want) + len(space.inactive)
            while True:
                positions, found = space.index.search(q, n)
                keep = [j for j, p in enumerate(positions.tolist()) if space.ids[p] not in space.inactive]
                ids = [space.ids[positions[j]] for j in keep]
                cand = yield from self._candidates_steps(namespace, ids, found[keep].astype(float), flt)
                if flt is None or len(cand.ids) >= want or n >= len(space.ids):
                    break
                n = _wider(n, want, len(cand.ids))
        if cand is not None and cand.ids:
            table = cand.table
            cand_sims = cand.sims
            choice = self.choose(
                namespace, cand.ids, cand_sims, table, cand.created, k, diagnostics, standing=cand.standing
            )
            sel, scores, weights, draws = choice.selection, choice.scores, choice.weights, choice.draws
            picked = yield from cand.memories_steps(namespace, sel.picked.tolist(), None if space is None else space.kept)
            shown = worth_of(self.policy, CountsTable(*(np.asarray(col)[sel.picked] for col in table)))
            for pos, (i, w, p, ex) in enumerate(zip(sel.picked, weights, sel.propensity, sel.explored, strict=True)):
                m = picked[pos]
                probe = bool(choice.probe[pos])
                items.append(EpisodeItem(m.id, float(w), float(p), pos, probe))
                picked_results.append(
                    Recalled(
                        m,
                        float(cand_sims[i]),
                        float(shown.worth[pos]),
                        float(shown.lower[pos]),
                        float(shown.upper[pos]),
                        shown.value_class[pos],
                        float(scores[i]),
                        float(p),
                        bool(ex),
                        probe,
                    )
                )
        episode = Episode(eid, namespace, query, context, self.clock(), tuple(items), draws=draws)
        yield Call("insert_episode", (episode,))
        return Recall(episode, tuple(picked_results), diagnostics)

    def score(
        self,
        sims: np.ndarray,
        table: CountsTable,
        created: np.ndarray,
        scoring: ScoreRule | None = None,
        standing: Sequence[str] | None = None,
    ) -> np.ndarray:
        """The final ranking score of candidates: the store's ``scoring`` rule (or ``scoring``)
        with their standing applied (:func:`memworth.ranking.with_standing`: a promoted
        memory's boost depends on how close it comes to the best of these ``sims``)."""
        rule = self.scoring if scoring is None else scoring
        scores = np.asarray(rule.score(sims, table, self.clock() - created), dtype=float)
        scores = with_standing(rule, scores, standing, sims)
        if not np.isfinite(scores).all():
            raise StoreError("scoring produced a non-finite score")
        return scores

    def choose(
        self,
        namespace: str,
        ids: Sequence[str],
        sims: np.ndarray,
        table: CountsTable,
        created: np.ndarray,
        k: int,
        diagnostics: dict[str, Any],
        scoring: ScoreRule | None = None,
        standing: Sequence[str] | None = None,
    ) -> Choice:
        """The governed recall step every face shares: score the candidates (standing
        applied), keep quarantined ones out except as probes, pick ``k`` with the
        exploration floor, let the ablation planner drop one of a pair, share the credit.

        A candidate under ``re-verify`` is quarantined: it may be picked only on a
        ``probe_share`` of recalls (a fresh draw per recall and memory); when picked it is
        marked a probe and its logged inclusion probability includes that share, so its
        worth keeps learning, inverse-propensity weighting stays exact, and most recalls
        never serve it. Exact for every pick: a drawn probe moves the others' chances too,
        so each pick logs its chance over the draws (:func:`served_chance`; only the
        :data:`PROBES_DRAWN` best-scored quarantined candidates of a recall are drawn for). It competes for those recalls with the higher of its score and the
        score it would have as an unproven memory (no evidence, its worth read at face value,
        :func:`memworth.ranking.at_face_value`, under a lower-bound rule too): its fallen worth is what
        the probes test, so it must not keep the memory from them (a memory whose worth fell
        below every rival's would otherwise never be probed, and never released).

        :meth:`recall` and :meth:`memworth.Sidecar.retrieve` both call it, so standing,
        quarantine, exploration, ablation and credit act the same whichever face recalls.
        """
        scores = self.score(sims, table, created, scoring, standing)
        quarantined = np.zeros(scores.size, dtype=bool)
        if standing is not None:
            quarantined = np.array([s == "re-verify" for s in standing], dtype=bool).reshape(scores.size)
        if quarantined.any():  # a memory under test ranks no lower than an unproven one
            q = np.flatnonzero(quarantined)
            none = np.zeros(q.size)
            born = np.broadcast_to(np.asarray(created, dtype=float), scores.shape)[q]  # one time for all, too
            face = at_face_value(self.scoring if scoring is None else scoring)  # unproven: 0.5, not a bound of 0
            unproven = self.score(sims[q], CountsTable(none, none, none), born, face, None)
            scores = scores.copy()
            scores[q] = np.maximum(scores[q], unproven)
        allowed = ~quarantined
        drawn = quarantined.any() and self.probe_share > 0
        draws: tuple[ProbeDraw, ...] = ()
        if drawn:
            eligible = _probe_eligible(scores, quarantined)
            contending = in_contention(scores, eligible, ~quarantined, k)  # before the draw
            lets = self._rng.random(scores.size) < self.probe_share
            allowed |= eligible & lets
            share = float(self.probe_share)
            if share < 1:  # at share 1 every contender competes: no control to log
                draws = tuple(ProbeDraw(ids[i], bool(lets[i]), share) for i in np.flatnonzero(contending).tolist())
        keep = np.flatnonzero(allowed)  # selection and ablation run among the allowed candidates
        kept_scores = scores[keep]
        explorable = (table.n < self.min_evidence)[keep]
        sel = select(kept_scores, explorable, k, self.exploration, self._rng)
        plan = None
        if self.ablation is not None and sel.picked.size:  # nothing picked (all quarantined): nothing to split
            plan = self.ablation.plan([(namespace, ids[keep[i]]) for i in sel.picked])
        if plan is not None:
            intended = sel.picked
            sel = drop(sel, plan.position, kept_scores, explorable, self.exploration)
            diagnostics["ablation"] = {
                "dropped": ids[keep[intended[plan.position]]],
                "partner": next(ids[keep[i]] for i in intended if (namespace, ids[keep[i]]) == plan.partner),
                "stand_in": ids[keep[sel.picked[-1]]] if sel.picked.size == intended.size else None,
            }
        picked = keep[sel.picked]
        probe = quarantined[picked]
        if drawn:  # who else was drawn moves every pick's chance: the chance over the draws
            every = np.asarray(table.n < self.min_evidence, dtype=bool)
            chance = served_chance(scores, eligible, ~quarantined, every, k, self.exploration, self.probe_share)
            propensity = chance[picked]
        else:
            propensity = sel.propensity
        if probe.any():
            diagnostics["probes"] = [ids[i] for i in picked[probe]]
        if draws:
            diagnostics["controls"] = [d.memory_id for d in draws if not d.probe]
        return Choice(Selection(picked, sel.explored, propensity), scores, self._credit(scores[picked]), probe, draws)

    def holdout_episode(self, episode_id: str) -> bool:
        """Whether the episode ``episode_id`` recalls without governance (the ``holdout`` share)."""
        return self.holdout > 0 and in_holdout(episode_id, self.holdout, self._holdout_seed)

    def _candidates_steps(
        self, namespace: str, ids: builtins.list[str], sims: np.ndarray, where: RecallFilter | None = None
    ) -> Steps[_Candidates]:
        """The active ones of ``ids`` (most similar first) with what ranking reads: one query.

        Only the counts, status and age of the candidates are read here; the ``k`` picked
        memories are read whole afterwards (:meth:`_Candidates.memories`). With a filter,
        only the candidates that match it are kept: its metadata and context part is read
        once per memory and filter and remembered (a memory's metadata and contexts never
        change, and an id is never reused), its status and standing part on the narrow read.
        """
        if getattr(self.backend, "candidates", None) is None:  # a backend without the narrow read: whole memories
            found = yield Call("memories", (namespace, ids))
            alive = [m for m in found if m.status == "active" and (where is None or where.matches(m))]
            return _Candidates.of(alive, sims, ids)
        if where is not None:
            content = yield from self._filter_matches_steps(namespace, where, ids)
            matched = [i for i, mid in enumerate(ids) if content.get(mid)]
            ids, sims = [ids[i] for i in matched], sims[matched]
        rows = {r[0]: r for r in (yield Call("candidates", (namespace, ids)))}
        keep: builtins.list[int] = []
        got: builtins.list[tuple[Any, ...]] = []
        for i, mid in enumerate(ids):
            row = rows.get(mid)
            if row is not None and row[1] == "active" and (where is None or where.matches_state("active", row[6])):
                keep.append(i)
                got.append(row)
        # One column per field (id, status, created, success, failure, n, standing, updated).
        columns = list(zip(*got, strict=True)) if got else [()] * 8
        return _Candidates(
            [ids[i] for i in keep],
            sims[keep],
            CountsTable(*(np.array(columns[c], dtype=float) for c in (3, 4, 5))),
            np.array(columns[2], dtype=float),
            list(map(str, columns[6])),
            updated=list(map(float, columns[7])),
        )

    def _first_n(self, namespace: str, where: RecallFilter | None, want: int) -> int:
        """How many candidates to search for first: ``want``, or with a filter whose answers are
        known for at least 100 memories, enough for ``want`` matches at the share that matched."""
        known = None if where is None else self._filters.get((namespace, where.key))
        if not known or len(known) < 100:
            return want
        share = sum(known.values()) / len(known)
        return want if share <= 0 else min(64 * want, math.ceil(1.5 * want / share))

    def _filter_matches_steps(
        self, namespace: str, where: RecallFilter, ids: builtins.list[str]
    ) -> Steps[dict[str, bool]]:
        """Whether each of ``ids`` matches the metadata and context part of ``where``, read once per
        memory and remembered for the :data:`FILTERS_KEPT` filters used last."""
        key = (namespace, where.key)
        known = self._filters.pop(key, None) or {}
        self._filters[key] = known  # the most recently used last
        while len(self._filters) > FILTERS_KEPT:
            del self._filters[next(iter(self._filters))]
        unknown = [mid for mid in ids if mid not in known]
        if unknown:
            for m in (yield Call("memories", (namespace, unknown))):
                known[m.id] = where.matches_content(m)
        return known

    def _recall_ungoverned_steps(
        self,
        eid: str,
        q: np.ndarray,
        query: str,
        k: int,
        context: str | None,
        namespace: str,
        where: RecallFilter | None = None,
    ) -> Steps[Recall]:
        """A holdout recall: the ``k`` most similar memories that governance could have hidden or not
        (of those that match ``where``, when given)."""
        space = yield from self._space_steps(namespace)
        pairs: builtins.list[tuple[Memory, float]] = []
        n = max(50, 10 * k) + len(space.inactive)
        while space.index is not None and space.ids:
            positions, found = space.index.search(q, n)
            hits = [(space.ids[p], float(v)) for p, v in zip(positions, found, strict=True)]
            by_id = {m.id: m for m in (yield Call("memories", (namespace, [mid for mid, _ in hits])))}
            pairs = [
                (by_id[mid], v)
                for mid, v in hits
                if mid in by_id and by_id[mid].status in UNGOVERNED and (where is None or where.matches(by_id[mid]))
            ][:k]
            if where is None or len(pairs) >= k or n >= len(space.ids):
                break
            n = _wider(n, k, len(pairs))
        results: builtins.list[Recalled] = []
        items: builtins.list[EpisodeItem] = []
        if pairs:
            sims = np.array([v for _, v in pairs])
            table = CountsTable(
                *(np.array([getattr(m.counts, f) for m, _ in pairs]) for f in ("success", "failure", "n"))
            )
            shown = worth_of(self.policy, table)
            for pos, ((m, sim), w) in enumerate(zip(pairs, self._credit(sims), strict=True)):
                items.append(EpisodeItem(m.id, float(w), 1.0, pos))
                results.append(
                    Recalled(
                        m,
                        sim,
                        float(shown.worth[pos]),
                        float(shown.lower[pos]),
                        float(shown.upper[pos]),
                        shown.value_class[pos],
                        sim,
                        1.0,
                        False,
                    )
                )
        episode = Episode(eid, namespace, query, context, self.clock(), tuple(items), holdout=True)
        yield Call("insert_episode", (episode,))
        return Recall(episode, tuple(results), {"tier": "all", "holdout": True, "search": "similarity only"})

    def _credit(self, scores: np.ndarray) -> np.ndarray:
        if scores.size == 0:
            return scores
        if self.credit == "uniform":
            return np.full(scores.size, 1.0 / scores.size)
        positive = np.maximum(scores, 0.0)
        if positive.sum() <= 0:
            positive = np.ones_like(positive)
        return normalise(positive, w_min=self.w_min)
