"""LangGraph: a store that governs any LangGraph ``BaseStore``'s searches with Memory Worth.

:class:`GovernedStore` wraps a store (``InMemoryStore``, ``PostgresStore``, ...) and
passes every operation through, except that each search asks the wrapped store for
more candidates (``fetch_factor`` times the page), re-ranks them through a
:class:`memworth.Sidecar` (similarity blended with worth, suppressed and deprecated
items dropped), returns the page asked for and logs it as one episode. Gets by key,
puts, deletes and namespace listings are untouched: reading an item by its key is not a
retrieval, and a deleted item keeps its history.

An item's memworth id is its namespace and key as compact JSON
(``["memories","alice","k1"]``: unambiguous, readable, reversible), or, when that is
longer than 200 characters, ``"sha256:"`` and the SHA-256 of it.

Needs the ``langgraph`` extra.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from typing import Any

from langgraph.store.base import BaseStore, Op, Result, SearchItem, SearchOp

from memworth.aio import AsyncSidecar
from memworth.errors import ValidationError
from memworth.ranking import ScoreRule
from memworth.sidecar import MAX_CANDIDATES, Sidecar
from memworth.sidecar.records import Ranked
from memworth.store.records import Episode
from memworth.validation import MAX_K, check_labels, check_name

__all__ = ["GovernedItem", "GovernedStore", "item_id"]


def item_id(namespace: tuple[str, ...], key: str) -> str:
    """The memworth id of a LangGraph item.

    Examples
    --------
    >>> item_id(("memories", "alice"), "k1")
    '["memories","alice","k1"]'
    >>> item_id(("notes",), "x" * 300)[:7]
    'sha256:'
    """
    text = json.dumps([*namespace, key], separators=(",", ":"), ensure_ascii=False)
    return text if len(text) <= 200 else "sha256:" + hashlib.sha256(text.encode()).hexdigest()


class GovernedItem(SearchItem):
    """A search result with its governance: memworth id, episode, worth, class and final score.

    ``score`` stays the wrapped store's similarity; ``rank_score`` is the blend that ordered it.
    """

    __slots__ = ("episode_id", "memory_id", "rank_score", "value_class", "worth")

    def __init__(
        self, item: SearchItem, *, memory_id: str, episode_id: str, worth: float, value_class: str, rank_score: float
    ) -> None:
        super().__init__(item.namespace, item.key, item.value, item.created_at, item.updated_at, item.score)
        self.memory_id = memory_id
        self.episode_id = episode_id
        self.worth = worth
        self.value_class = value_class
        self.rank_score = rank_score

    def dict(self) -> dict[str, Any]:
        out = super().dict()
        out["memworth"] = {
            "id": self.memory_id,
            "episode": self.episode_id,
            "worth": self.worth,
            "class": self.value_class,
            "score": self.rank_score,
        }
        return out


class GovernedStore(BaseStore):
    """A LangGraph store whose searches are re-ranked and filtered by worth, and logged as episodes.

    Parameters
    ----------
    store
        The store governed (any LangGraph ``BaseStore``).
    sidecar
        Where the evidence lives (:class:`memworth.Sidecar`).
    namespace
        The sidecar namespace the items' evidence is kept in.
    fetch_factor
        A search asks the wrapped store for ``fetch_factor x (offset + limit)`` candidates.
    context
        Context label logged with each episode.
    scoring
        Ranking rule (default: the sidecar store's, ``Blend``). Candidates are scored by
        the wrapped store's similarity when it gives one for every result (a search
        with ``query`` on a store with an index); otherwise every candidate gets
        similarity 1, so worth alone orders them (ties keep the store's order).

    A first page of at most 100 (``offset`` 0) is picked as
    :meth:`memworth.Sidecar.retrieve` picks, with the store's exploration floor; a
    later or larger page is cut from the deterministic :meth:`memworth.Sidecar.rerank`
    and logged with :meth:`memworth.Sidecar.retrieved`.

    Examples
    --------
    >>> from langgraph.store.memory import InMemoryStore
    >>> from memworth import Sidecar
    >>> store = GovernedStore(InMemoryStore(), Sidecar.open("memory://", exploration=0.0))
    >>> store.put(("notes",), "tea", {"text": "green tea at 80 C"})
    >>> store.put(("notes",), "coffee", {"text": "espresso at 93 C"})
    >>> found = store.search(("notes",), limit=1)
    >>> [(item.key, item.worth) for item in found]
    [('tea', 0.5)]
    >>> store.report(False)  # the answer built on it failed
    >>> [item.key for item in store.search(("notes",), limit=1)]
    ['coffee']
    """

    def __init__(
        self,
        store: BaseStore,
        sidecar: Sidecar,
        *,
        namespace: str = "default",
        fetch_factor: int = 4,
        context: str | None = None,
        scoring: ScoreRule | None = None,
    ) -> None:
        if not isinstance(store, BaseStore):
            raise ValidationError("store", f"must be a LangGraph BaseStore, got {type(store).__name__}")
        if not isinstance(sidecar, Sidecar):
            raise ValidationError("sidecar", f"must be a memworth Sidecar, got {type(sidecar).__name__}")
        if isinstance(fetch_factor, bool) or not isinstance(fetch_factor, int) or not 1 <= fetch_factor <= 100:
            raise ValidationError("fetch_factor", f"must be an integer from 1 to 100, got {fetch_factor!r}")
        check_name(namespace, "namespace")
        if context is not None:
            check_labels([context], "context")
        self.store = store
        self.sidecar = sidecar
        self.namespace = namespace
        self.fetch_factor = fetch_factor
        self.context = context
        self.scoring = scoring
        self.supports_ttl = store.supports_ttl
        self.ttl_config = store.ttl_config
        self._last: Episode | None = None
        self.async_sidecar = AsyncSidecar(sidecar)
        """The sidecar's async face: :meth:`abatch` and :meth:`areport` run their sidecar work on
        its store's one worker thread, so concurrent async searches never race on the store."""

    @property
    def last_episode(self) -> Episode | None:
        """The episode the last search logged (with concurrent searches, use each item's ``episode_id``)."""
        return self._last

    def _widen(self, op: Op) -> Op:
        if not isinstance(op, SearchOp):
            return op
        return op._replace(offset=0, limit=min(MAX_CANDIDATES, (op.offset + op.limit) * self.fetch_factor))

    def _candidates(self, found: list[SearchItem]) -> tuple[dict[str, SearchItem], list[tuple[str, float]]]:
        """The items found by memworth id (a repeated id keeps its best place) and the candidates to rank."""
        by_id: dict[str, SearchItem] = {}
        for item in found:
            by_id.setdefault(item_id(item.namespace, item.key), item)
        scores = [item.score for item in by_id.values()]
        if None in scores:  # not a similarity search: no similarity to prefer any item, worth decides
            scores = [1.0] * len(scores)
        return by_id, list(zip(by_id, [float(x) for x in scores if x is not None], strict=True))

    @staticmethod
    def _first_page(op: SearchOp) -> bool:
        """Whether the search is picked as :meth:`memworth.Sidecar.retrieve` picks (else a page of the rerank)."""
        return op.offset == 0 and 1 <= op.limit <= MAX_K

    def _page(self, op: SearchOp, candidates: list[tuple[str, float]]) -> tuple[Episode, list[Ranked]]:
        """A later or larger page: cut from the deterministic rerank, logged as retrieved."""
        query, context, namespace = op.query or "", self.context, self.namespace
        ranked = self.sidecar.rerank(candidates, namespace=namespace, scoring=self.scoring)
        ranked = ranked[op.offset : op.offset + op.limit]
        episode = self.sidecar.retrieved([r.id for r in ranked], query=query, context=context, namespace=namespace)
        return episode, ranked

    def _govern(self, op: SearchOp, found: list[SearchItem]) -> list[SearchItem]:
        by_id, candidates = self._candidates(found)
        if self._first_page(op):
            got = self.sidecar.retrieve(
                candidates,
                op.limit,
                query=op.query or "",
                context=self.context,
                namespace=self.namespace,
                scoring=self.scoring,
            )
            return self._governed(by_id, got.episode, list(got.results))
        return self._governed(by_id, *self._page(op, candidates))

    async def _agovern(self, op: SearchOp, found: list[SearchItem]) -> list[SearchItem]:
        """:meth:`_govern`, awaited: the first page natively when the sidecar is native."""
        by_id, candidates = self._candidates(found)
        if self._first_page(op):
            got = await self.async_sidecar.retrieve(
                candidates,
                op.limit,
                query=op.query or "",
                context=self.context,
                namespace=self.namespace,
                scoring=self.scoring,
            )
            return self._governed(by_id, got.episode, list(got.results))
        return self._governed(by_id, *(await self.async_sidecar.run(lambda _: self._page(op, candidates))))

    def _governed(self, by_id: dict[str, SearchItem], episode: Episode, ranked: list[Ranked]) -> list[SearchItem]:
        """The ranked items, each with its memworth id, episode and worth."""
        self._last = episode
        return [
            GovernedItem(
                by_id[r.id],
                memory_id=r.id,
                episode_id=episode.id,
                worth=r.worth,
                value_class=r.value_class,
                rank_score=r.score,
            )
            for r in ranked
        ]

    def _govern_all(self, ops: list[Op], results: list[Result]) -> list[Result]:
        return [
            self._govern(op, result) if isinstance(op, SearchOp) and isinstance(result, list) else result  # type: ignore[arg-type]
            for op, result in zip(ops, results, strict=True)
        ]

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` on the wrapped store; searches come back governed."""
        ops = list(ops)
        return self._govern_all(ops, self.store.batch([self._widen(op) for op in ops]))

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """:meth:`batch`, async: each search is governed in the sidecar store's turn, its first page
        natively on PostgreSQL when the sidecar is one :meth:`memworth.aio.AsyncSidecar.open`
        opened, else on the store's worker thread."""
        ops = list(ops)
        results = await self.store.abatch([self._widen(op) for op in ops])
        return [
            await self._agovern(op, result) if isinstance(op, SearchOp) and isinstance(result, list) else result  # type: ignore[arg-type]
            for op, result in zip(ops, results, strict=True)
        ]

    def _episode(self, episode: Episode | GovernedItem | str | None) -> Episode | str:
        if episode is None:
            if self._last is None:
                raise ValidationError("episode", "no episode yet: search first, or pass the episode")
            return self._last
        if isinstance(episode, GovernedItem):
            return episode.episode_id
        return episode

    def report(
        self,
        success: object,
        episode: Episode | GovernedItem | str | None = None,
        *,
        source: str = "explicit",
        confidence: float | None = None,
        used: Sequence[GovernedItem | str] | None = None,
    ) -> None:
        """Record the outcome of a search's episode: the last one, or one given by id, Episode or returned item.

        ``used``: the returned items (or their memworth ids) the agent used; only they are
        credited (``None``: every item the search returned)."""
        self.sidecar.record(
            self._episode(episode),
            success,
            source=source,
            confidence=confidence,
            used=_used(used),
            namespace=self.namespace,
        )

    async def areport(
        self,
        success: object,
        episode: Episode | GovernedItem | str | None = None,
        *,
        source: str = "explicit",
        confidence: float | None = None,
        used: Sequence[GovernedItem | str] | None = None,
    ) -> None:
        """:meth:`report`, awaited (:class:`memworth.aio.AsyncSidecar`): natively on PostgreSQL when
        the sidecar is one :meth:`memworth.aio.AsyncSidecar.open` opened (its ``.sidecar``), on
        its worker thread otherwise."""
        ref = self._episode(episode)
        await self.async_sidecar.record(
            ref, success, source=source, confidence=confidence, used=_used(used), namespace=self.namespace
        )


def _used(used: Sequence[GovernedItem | str] | None) -> list[str] | None:
    """The memworth ids of the items (or ids) an agent says it used."""
    if used is None or isinstance(used, (str, bytes)):
        return used  # type: ignore[return-value]  # a bare string is refused by the store, naming used
    return [u.memory_id if isinstance(u, GovernedItem) else u for u in used]
