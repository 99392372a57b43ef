"""The LangChain adapter: LangChain's standard retriever tests, and worth governing what it returns."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
from typing import Any

import pytest
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.retrievers import BaseRetriever
from langchain_core.vectorstores import InMemoryVectorStore
from langchain_tests.integration_tests import RetrieversIntegrationTests
from pydantic import Field

from memworth import DuplicateError, HashingEncoder, Sidecar, ValidationError
from memworth.adapters.langchain import GovernedRetriever, document_id

# The standard tests include an async one; anyio's plugin runs it (sync tests ignore the mark).
pytestmark = pytest.mark.anyio

TEXTS = {
    "reverse": "Use list.reverse() or slicing [::-1] to reverse a Python list.",
    "reversed": "reversed(list) returns an iterator over a Python list in reverse order.",
    "sort": "Python lists have a sort method; sorted() returns a new sorted list.",
    "append": "Python lists grow with append and extend.",
    "prague": "Prague is the capital of the Czech Republic.",
    "water": "Water boils at 100 degrees Celsius at sea level.",
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class HashingEmbeddings(Embeddings):
    """memworth's deterministic HashingEncoder as LangChain embeddings (similar words, similar vectors)."""

    def __init__(self) -> None:
        self.encoder = HashingEncoder(256)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [list(map(float, v)) for v in self.encoder.encode(texts)]

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


def vectorstore() -> InMemoryVectorStore:
    vs = InMemoryVectorStore(HashingEmbeddings())
    vs.add_documents([Document(page_content=t, id=i) for i, t in TEXTS.items()])
    return vs


class Fixed(BaseRetriever):
    """Returns the same documents whatever the query; remembers the keywords it was called with."""

    docs: list[Document]
    calls: list[dict[str, Any]] = Field(default_factory=list)

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        self.calls.append(kwargs)
        return list(self.docs)[: kwargs.get("k", len(self.docs))]


class TestStandardRetrieverTests(RetrieversIntegrationTests):
    @property
    def retriever_constructor(self) -> type[GovernedRetriever]:
        return GovernedRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"retriever": vectorstore().as_retriever(), "sidecar": Sidecar.open("memory://", seed=0), "k": 2}

    @property
    def retriever_query_example(self) -> str:
        return "how do I reverse a python list"


@pytest.fixture
def governed() -> GovernedRetriever:
    return GovernedRetriever.from_vectorstore(vectorstore(), Sidecar.open("memory://", exploration=0.0), k=2)


def test_documents_carry_the_episode_and_their_worth(governed: GovernedRetriever) -> None:
    found = governed.invoke("how do I reverse a python list")
    assert [d.id for d in found] == ["reverse", "reversed"]
    assert governed.last_episode is not None
    assert {d.metadata["memworth_episode"] for d in found} == {governed.last_episode.id}
    assert [d.metadata["memworth_worth"] for d in found] == [0.5, 0.5]
    assert [d.metadata["memworth_id"] for d in found] == ["reverse", "reversed"]
    assert found[0].page_content == TEXTS["reverse"] and found[0].metadata["memworth_class"] == "uncertain"
    logged = governed.sidecar.store.backend.episodes([governed.last_episode.id])[governed.last_episode.id]
    assert [i.memory_id for i in logged.items] == ["reverse", "reversed"]
    assert logged.query == "how do I reverse a python list"
    governed.report(True, found[1])  # by a returned document
    with pytest.raises(DuplicateError):
        governed.report(False)  # the same episode, again
    with pytest.raises(ValidationError):
        governed.report(True, Document(page_content="never governed"))


def test_outcomes_move_worth_and_the_ranking(governed: GovernedRetriever) -> None:
    query = "capital of the czech republic"
    assert governed.invoke(query, k=1)[0].id == "prague"
    governed.report(False, source="implicit")
    bad = governed.sidecar.worth("prague")
    assert bad.worth == 0.0 and bad.counts.failure == 0.5  # implicit outcomes count half
    assert governed.invoke(query, k=1)[0].id != "prague"  # a failed document gives way to the next candidate
    for _ in range(5):
        assert governed.invoke("reverse a python list", k=1)[0].id == "reverse"
        governed.report(True)
    good = governed.sidecar.worth("reverse")
    assert (good.worth, good.counts.n) == (1.0, 5)
    assert governed.invoke("reverse a python list", k=1)[0].metadata["memworth_worth"] == 1.0


def test_a_suppressed_document_disappears_and_comes_back(governed: GovernedRetriever) -> None:
    query = "capital of the czech republic"
    assert governed.invoke(query, k=1)[0].id == "prague"
    for _ in range(20):  # outcomes reported by another part of the system, by id
        governed.sidecar.record(governed.sidecar.retrieved(["prague"]), False)
    report = governed.sidecar.govern(apply=True)
    assert [(e.memory_id, e.new) for e in report.applied] == [("prague", "deprecated")]
    assert "prague" not in [d.id for d in governed.invoke(query, k=4)]
    governed.sidecar.restore(report.applied[0].seq, reason="the fact was fine; the task was not")
    assert "prague" in [d.id for d in governed.invoke(query, k=4)]
    governed.sidecar.set_status("prague", "suppressed", reason="a person says it is out of date")
    assert "prague" not in [d.id for d in governed.invoke(query, k=4)]


def test_reranking_favours_high_worth_on_ties() -> None:
    docs = [Document(page_content=f"text {i}", id=f"d{i}", metadata={"score": 0.5}) for i in range(4)]
    governed = GovernedRetriever(
        retriever=Fixed(docs=docs), sidecar=Sidecar.open("memory://", exploration=0.0), k=2, score_key="score"
    )
    assert [d.id for d in governed.invoke("anything")] == ["d0", "d1"]  # a tie keeps the given order
    governed.sidecar.record(governed.sidecar.retrieved(["d3"]), True)
    governed.sidecar.record(governed.sidecar.retrieved(["d0"]), False)
    found = governed.invoke("anything")
    assert [d.id for d in found] == ["d3", "d1"]
    assert found[0].metadata["memworth_score"] == pytest.approx(0.6 * 0.5 + 0.4 * 1.0)


def test_the_wrapped_retriever_is_asked_for_fetch_k_candidates() -> None:
    docs = [Document(page_content=f"text {i}", id=f"d{i}") for i in range(20)]
    inner = Fixed(docs=docs, calls=[])
    governed = GovernedRetriever(retriever=inner, sidecar=Sidecar.open("memory://"), k=3, fetch_k=5)
    assert len(governed.invoke("q", filter="kept")) == 3
    assert len(governed.invoke("q", k=7)) == 7
    assert inner.calls == [{"k": 5, "filter": "kept"}, {"k": 7}]
    quiet = GovernedRetriever(retriever=Fixed(docs=docs, calls=[]), sidecar=Sidecar.open("memory://"), k_arg=None)
    assert len(quiet.invoke("q")) == 4 and quiet.retriever.calls == [{}]  # type: ignore[attr-defined]


def test_ids_from_metadata_or_a_hash_of_the_text() -> None:
    docs = [
        Document(page_content="same text"),
        Document(page_content="same text"),  # the same hash: one candidate
        Document(page_content="other text"),
    ]
    governed = GovernedRetriever(retriever=Fixed(docs=docs), sidecar=Sidecar.open("memory://"))
    found = governed.invoke("q")
    assert [d.page_content for d in found] == ["same text", "other text"]
    assert found[0].metadata["memworth_id"] == document_id(docs[0]) and document_id(docs[0]).startswith("sha256:")
    keyed = GovernedRetriever(
        retriever=Fixed(docs=[Document(page_content="x", metadata={"pk": 7})]),
        sidecar=Sidecar.open("memory://"),
        id_key="pk",
    )
    assert keyed.invoke("q")[0].metadata["memworth_id"] == "7"
    missing = GovernedRetriever(retriever=Fixed(docs=docs), sidecar=Sidecar.open("memory://"), id_key="pk")
    with pytest.raises(ValidationError):
        missing.invoke("q")
    unscored = GovernedRetriever(retriever=Fixed(docs=docs), sidecar=Sidecar.open("memory://"), score_key="score")
    with pytest.raises(ValidationError):
        unscored.invoke("q")


def test_report_needs_an_episode(governed: GovernedRetriever) -> None:
    with pytest.raises(ValidationError):
        governed.report(True)
    with pytest.raises(ValidationError):
        governed.invoke("q", k=0)


async def test_async_retrieval_and_report(governed: GovernedRetriever) -> None:
    found = await governed.ainvoke("how do I reverse a python list")
    assert [d.id for d in found] == ["reverse", "reversed"]
    await governed.areport(True)
    assert governed.sidecar.worth("reverse").counts.success == 0.5


async def test_concurrent_async_searches_run_one_at_a_time_on_the_store_worker(governed: GovernedRetriever) -> None:
    threads: set[str] = set()
    busy = {"now": 0, "most": 0}
    retrieve = governed.sidecar.retrieve

    def watched(*args: Any, **kwargs: Any) -> Any:
        threads.add(threading.current_thread().name)
        busy["now"] += 1
        busy["most"] = max(busy["most"], busy["now"])
        try:
            time.sleep(0.001)  # lets another thread in, were there one
            return retrieve(*args, **kwargs)
        finally:
            busy["now"] -= 1

    governed.sidecar.retrieve = watched  # type: ignore[method-assign]
    found = await asyncio.gather(*(governed.ainvoke(f"reverse a python list {i}") for i in range(20)))
    await asyncio.gather(*(governed.areport(i % 2 == 0, docs[0]) for i, docs in enumerate(found)))
    assert busy["most"] == 1 and len(threads) == 1 and threads.pop().startswith("memworth-aio")
    assert len({docs[0].metadata["memworth_episode"] for docs in found}) == 20
    assert governed.sidecar.replay().consistent
    assert sum(m.counts.n for m in governed.sidecar.store.list()) == pytest.approx(40.0)  # 2 documents x 20


def test_import_memworth_does_not_import_langchain() -> None:
    code = "import memworth, sys; print(sorted(m for m in sys.modules if m.startswith(('langchain', 'langgraph'))))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_quarantine_acts_here_as_in_the_store(governed: GovernedRetriever) -> None:
    store = governed.sidecar.store
    assert [d.id for d in governed.invoke("how do I reverse a python list")] == ["reverse", "reversed"]
    store.set_standing("reverse", "re-verify", reason="check it")  # the document id is the memory id
    store.probe_share = 0.0
    for _ in range(5):
        assert "reverse" not in [d.id for d in governed.invoke("how do I reverse a python list")]
    store.probe_share = 1.0
    found = governed.invoke("how do I reverse a python list")
    assert found[0].id == "reverse" and governed.last_episode is not None
    assert governed.last_episode.items[0].probe
