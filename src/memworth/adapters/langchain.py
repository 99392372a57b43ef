"""LangChain: a retriever that governs any LangChain retriever or vector store with Memory Worth.

:class:`GovernedRetriever` asks the retriever it wraps for candidates (``fetch_k`` of
them), re-ranks them through a :class:`memworth.Sidecar` (similarity blended with worth,
suppressed and deprecated documents dropped), returns the best ``k`` and logs them as
one episode. Each returned document carries, in its metadata, its memworth id, the
episode id and its worth; report how the answer went with :meth:`GovernedRetriever.report`.

A document's memworth id is, in order: ``metadata[id_key]`` when ``id_key`` is set;
``Document.id`` (vector stores set it); otherwise ``"sha256:"`` and the SHA-256 of
``page_content``, so identical texts share their evidence.

Needs the ``langchain`` extra (``langchain-core``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.vectorstores import VectorStore
from pydantic import Field, PrivateAttr

from memworth.aio import AsyncSidecar
from memworth.errors import ValidationError
from memworth.ranking import ScoreRule
from memworth.sidecar import Retrieval, Sidecar, rank_scores
from memworth.store.records import Episode

__all__ = ["GovernedRetriever", "document_id"]

META = "memworth_"
"""Prefix of the metadata keys a governed document gains: ``memworth_id``, ``memworth_episode``,
``memworth_worth``, ``memworth_class``, ``memworth_score``."""


def document_id(doc: Document, id_key: str | None = None) -> str:
    """The memworth id of a document: ``metadata[id_key]``, else ``doc.id``, else a hash of its text.

    Examples
    --------
    >>> from langchain_core.documents import Document
    >>> document_id(Document(page_content="hello", id="doc-7"))
    'doc-7'
    >>> document_id(Document(page_content="hello", metadata={"key": 42}), id_key="key")
    '42'
    >>> document_id(Document(page_content="hello"))[:15]
    'sha256:2cf24dba'
    """
    if id_key is not None:
        value = doc.metadata.get(id_key)
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise ValidationError("id_key", f"document metadata[{id_key!r}] must be a string or integer, got {value!r}")
        return str(value)
    if doc.id:
        return str(doc.id)
    return "sha256:" + hashlib.sha256(doc.page_content.encode()).hexdigest()


class GovernedRetriever(BaseRetriever):
    """A LangChain retriever that re-ranks and filters another one by Memory Worth, and logs episodes.

    Parameters
    ----------
    retriever
        The retriever governed (any ``BaseRetriever``); see :meth:`from_vectorstore`.
    sidecar
        Where the evidence lives (:class:`memworth.Sidecar`).
    k
        Documents returned (``invoke(query, k=...)`` overrides it per call).
    fetch_k
        Candidates asked of ``retriever`` (default ``4 * k``), through its ``k_arg``
        keyword; more candidates give worth more room to promote a proven document.
    k_arg
        The keyword the wrapped retriever takes for its number of results (``"k"``
        for vector-store retrievers); ``None`` to pass none and take what it returns.
    namespace, context
        The sidecar namespace of the documents, and a context label for the episodes.
    id_key
        Metadata key holding a document's id (see :func:`document_id`).
    score_key
        Metadata key holding the wrapped retriever's similarity score; without it
        candidates are scored by position (:func:`memworth.sidecar.rank_scores`).
    scoring
        Ranking rule (default: the sidecar store's, ``Blend``: 0.6 x similarity + 0.4 x worth).

    Examples
    --------
    >>> from langchain_core.documents import Document
    >>> from langchain_core.embeddings import DeterministicFakeEmbedding
    >>> from langchain_core.vectorstores import InMemoryVectorStore
    >>> from memworth import Sidecar
    >>> docs = InMemoryVectorStore(DeterministicFakeEmbedding(size=16))
    >>> _ = docs.add_documents([Document(page_content=t, id=t) for t in ["tea", "coffee", "water"]])
    >>> retriever = GovernedRetriever.from_vectorstore(docs, Sidecar.open("memory://", exploration=0.0), k=2)
    >>> found = retriever.invoke("a hot drink")
    >>> len(found), found[0].metadata["memworth_worth"]
    (2, 0.5)
    >>> retriever.report(True)  # the answer built on them worked
    >>> retriever.sidecar.worth(found[0].id).counts.success
    0.5
    """

    retriever: BaseRetriever
    sidecar: Sidecar
    k: int = Field(default=4, ge=1, le=100)
    fetch_k: int | None = Field(default=None, ge=1, le=10_000)
    k_arg: str | None = "k"
    namespace: str = "default"
    context: str | None = None
    id_key: str | None = None
    score_key: str | None = None
    scoring: ScoreRule | None = None

    _last: Episode | None = PrivateAttr(default=None)
    _async: AsyncSidecar | None = PrivateAttr(default=None)

    @classmethod
    def from_vectorstore(
        cls,
        vectorstore: VectorStore,
        sidecar: Sidecar,
        *,
        search_kwargs: dict[str, Any] | None = None,
        **settings: Any,
    ) -> GovernedRetriever:
        """Govern a LangChain vector store, through its ``as_retriever(search_kwargs=...)``."""
        return cls(
            retriever=vectorstore.as_retriever(search_kwargs=dict(search_kwargs or {})), sidecar=sidecar, **settings
        )

    @property
    def last_episode(self) -> Episode | None:
        """The episode this retriever logged last (with concurrent calls, use each document's
        ``metadata["memworth_episode"]`` instead)."""
        return self._last

    @property
    def async_sidecar(self) -> AsyncSidecar:
        """The sidecar's async face: the async methods run their sidecar work in its store's one
        turn, so concurrent async searches never race on the store; natively on PostgreSQL when
        the sidecar is one :meth:`memworth.aio.AsyncSidecar.open` opened, else on its worker thread."""
        if self._async is None or self._async.sidecar is not self.sidecar:
            self._async = AsyncSidecar(self.sidecar)
        return self._async

    def _inner_kwargs(self, k: int, kwargs: dict[str, Any]) -> dict[str, Any]:
        if self.k_arg is None:
            return kwargs
        return {**kwargs, self.k_arg: max(k, self.fetch_k or 4 * k)}

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, k: int | None = None, **kwargs: Any
    ) -> list[Document]:
        want = self.k if k is None else k
        config = {"callbacks": run_manager.get_child()}
        docs = self.retriever.invoke(query, config, **self._inner_kwargs(want, kwargs))  # type: ignore[arg-type]
        return self._govern(query, docs, want)

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, k: int | None = None, **kwargs: Any
    ) -> list[Document]:
        want = self.k if k is None else k
        config = {"callbacks": run_manager.get_child()}
        docs = await self.retriever.ainvoke(query, config, **self._inner_kwargs(want, kwargs))  # type: ignore[arg-type]
        by_id, scores = self._candidates(docs)
        got = await self.async_sidecar.retrieve(  # natively on a sidecar AsyncSidecar.open opened on PostgreSQL
            list(zip(by_id, scores, strict=True)),
            want,
            query=query,
            context=self.context,
            namespace=self.namespace,
            scoring=self.scoring,
        )
        return self._governed(by_id, got)

    def _candidates(self, docs: list[Document]) -> tuple[dict[str, Document], list[float]]:
        """The documents by memworth id (a repeated id keeps its best place) and their scores."""
        by_id: dict[str, Document] = {}
        for doc in docs:
            by_id.setdefault(document_id(doc, self.id_key), doc)
        if self.score_key is None:
            return by_id, rank_scores(len(by_id)).tolist()
        return by_id, [_score(d, self.score_key) for d in by_id.values()]

    def _govern(self, query: str, docs: list[Document], k: int) -> list[Document]:
        by_id, scores = self._candidates(docs)
        got: Retrieval = self.sidecar.retrieve(
            list(zip(by_id, scores, strict=True)),
            k,
            query=query,
            context=self.context,
            namespace=self.namespace,
            scoring=self.scoring,
        )
        return self._governed(by_id, got)

    def _governed(self, by_id: dict[str, Document], got: Retrieval) -> list[Document]:
        """The picked documents, best first, each with its memworth id, episode and worth in its metadata."""
        self._last = got.episode
        out = []
        for r in got.results:
            doc = by_id[r.id]
            extra = {"id": r.id, "episode": got.episode.id, "worth": r.worth, "class": r.value_class, "score": r.score}
            meta = {**doc.metadata, **{META + key: value for key, value in extra.items()}}
            out.append(doc.model_copy(update={"metadata": meta}))
        return out

    def _episode(self, episode: Episode | Document | str | None) -> Episode | str:
        if episode is None:
            if self._last is None:
                raise ValidationError("episode", "no episode yet: retrieve first, or pass the episode")
            return self._last
        if isinstance(episode, Document):
            ref = episode.metadata.get(META + "episode")
            if not isinstance(ref, str):
                raise ValidationError("episode", "the document carries no memworth_episode: was it governed?")
            return ref
        return episode

    def report(
        self,
        success: object,
        episode: Episode | Document | str | None = None,
        *,
        source: str = "explicit",
        confidence: float | None = None,
        used: Sequence[Document | str] | None = None,
    ) -> None:
        """Record the outcome of an episode: the last one, or one given by id, Episode or returned Document.

        ``used``: the returned documents (or their memworth ids) the agent used; only they are
        credited (``None``: every document the episode returned)."""
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
        episode: Episode | Document | str | None = None,
        *,
        source: str = "explicit",
        confidence: float | None = None,
        used: Sequence[Document | str] | None = None,
    ) -> None:
        """:meth:`report`, awaited (:class:`memworth.aio.AsyncSidecar`): natively on PostgreSQL when
        the sidecar is one :meth:`memworth.aio.AsyncSidecar.open` opened (its ``.sidecar``), on
        its worker thread otherwise."""
        ref = self._episode(episode)
        await self.async_sidecar.record(
            ref, success, source=source, confidence=confidence, used=_used(used), namespace=self.namespace
        )


def _used(used: Sequence[Document | str] | None) -> list[str] | None:
    """The memworth ids of the documents (or ids) an agent says it used."""
    if used is None or isinstance(used, (str, bytes)):
        return used  # type: ignore[return-value]  # a bare string is refused by the store, naming used
    out = []
    for u in used:
        ref = u.metadata.get(META + "id") if isinstance(u, Document) else u
        if not isinstance(ref, str):
            raise ValidationError("used", "a document carries no memworth_id: was it governed?")
        out.append(ref)
    return out


def _score(doc: Document, key: str) -> float:
    value = doc.metadata.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValidationError("score_key", f"document metadata[{key!r}] must be a number, got {value!r}")
    return float(value)
