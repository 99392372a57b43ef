"""The sidecar: external memory ids governed by worth, on every backend, beside ordinary memories."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from memworth import Counts, HashingEncoder, LowerBoundBlend, MemoryStore, Sidecar, UnknownMemoryError, ValidationError
from memworth.sidecar import rank_scores
from tests.store.conftest import FACTS, drop, index_for, url_for


@pytest.fixture
def sidecar() -> Iterator[Sidecar]:
    s = Sidecar.open("memory://", exploration=0.0, seed=0)
    yield s
    s.close()


def fail(sidecar: Sidecar, mid: str, times: int, *, success: bool = False) -> None:
    for _ in range(times):
        sidecar.record(sidecar.retrieved([mid]), success)


@pytest.fixture(params=["memory", "sqlite", "postgres", "pgvector"])
def mixed(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MemoryStore]:
    """A store holding ordinary memories, on every backend (pgvector: search inside PostgreSQL)."""
    kind = str(request.param)
    s = MemoryStore.open(url_for(kind, tmp_path), encoder=HashingEncoder(), seed=0, index=index_for(kind))
    s.exploration = 0.0
    s.add_many([{"id": k, "text": v} for k, v in FACTS.items()])
    yield s
    drop(s)


def test_external_memories_live_beside_ordinary_ones_on_every_backend(mixed: MemoryStore) -> None:
    sidecar = Sidecar(mixed)
    assert sidecar.register([f"ext-{i}" for i in range(8)], contexts=["chroma"]) == [f"ext-{i}" for i in range(8)]
    # Governed like any memory: outcomes, governance, audit, restore.
    fail(sidecar, "ext-0", 20)  # enough for the error-controlled test of low worth
    proposal = next(p for p in sidecar.suggestions() if p.memory_id == "ext-0")
    assert proposal.action == "deprecate"
    applied = sidecar.govern(apply=True).applied
    assert [(e.memory_id, e.new) for e in applied] == [("ext-0", "deprecated")]
    for i in range(1, 8):  # more inactive external memories than... nothing: recall must not care
        sidecar.set_status(f"ext-{i}", "suppressed", reason="test")
    # Never recalled (no vector), and their statuses do not disturb recall of the others.
    recall = mixed.recall("how to reverse a python list", k=6)
    assert recall.results[0].memory.id == "reverse"
    assert not any(r.memory.id.startswith("ext-") for r in recall) and len(recall) == 6
    ext = mixed.get("ext-3")
    assert ext.text == "" and ext.contexts == ("chroma",) and ext.status == "suppressed"
    # Ordinary memories can be governed through the sidecar too.
    assert sidecar.filter(["reverse", "ext-0", "ext-3", "never-seen"]) == ["reverse", "never-seen"]
    sidecar.restore(applied[0].seq)
    assert sidecar.filter(["ext-0"]) == ["ext-0"]
    report = mixed.replay()
    assert report.consistent and report.outcomes == 20
    assert mixed.get("ext-0").counts == Counts(0.0, 20.0, 20.0)


def test_evidence_survives_reopening(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'sidecar.db'}"
    with Sidecar.open(url, exploration=0.0) as sidecar:
        episode = sidecar.retrieve(["a", "b"], k=2).episode
        sidecar.record(episode, True)
    with Sidecar.open(url) as sidecar:
        assert sidecar.worth("a").counts == Counts(0.5, 0.0, 1.0)
        assert [r.id for r in sidecar.rerank(["b", "a"])] == ["b", "a"]  # equal evidence: order kept
        assert sidecar.store.backend.get_meta("encoder") is None  # nothing was ever embedded


def test_register_is_idempotent_and_keeps_the_first_metadata(sidecar: Sidecar) -> None:
    assert sidecar.register(["a", "b"], metadata={"source": "first"}) == ["a", "b"]
    assert sidecar.register(["b", "c"], metadata={"source": "second"}) == ["c"]
    assert sidecar.register(["a"]) == []
    assert [m.metadata["source"] for m in sidecar.store.list()] == ["first", "first", "second"]
    assert sidecar.register(["a"], namespace="other") == ["a"]


def test_outcomes_move_worth_and_the_suggestion(sidecar: Sidecar) -> None:
    fail(sidecar, "good", 10, success=True)
    fail(sidecar, "bad", 25)
    good, bad = sidecar.worth_many(["good", "bad"])
    assert (good.worth, good.value_class, good.retrievals) == (1.0, "high", 10.0)
    assert good.lower > 0.6 and good.upper == 1.0 and good.hot and good.proposal is not None
    assert good.proposal.action == "promote"
    assert (bad.worth, bad.value_class, bad.status) == (0.0, "low", "active")
    assert bad.proposal is not None and bad.proposal.action == "deprecate"
    with pytest.raises(UnknownMemoryError):
        sidecar.worth("never-registered")


def test_rerank_favours_worth_on_ties_and_drops_suppressed(sidecar: Sidecar) -> None:
    fail(sidecar, "proven", 6, success=True)
    fail(sidecar, "failing", 6)
    tied = [("failing", 0.7), ("fresh", 0.7), ("proven", 0.7)]
    ranked = sidecar.rerank(tied)
    assert [r.id for r in ranked] == ["proven", "fresh", "failing"]
    assert [r.registered for r in ranked] == [True, False, True]
    assert ranked[1].worth == 0.5 and ranked[1].retrievals == 0 and ranked[1].value_class == "uncertain"
    assert ranked[0].score == pytest.approx(0.6 * 0.7 + 0.4 * 1.0) and ranked[0].similarity == 0.7
    # Similarity still counts: a much closer candidate beats a proven one.
    assert sidecar.rerank([("proven", 0.1), ("fresh", 0.9)], k=1)[0].id == "fresh"
    # The lower-bound blend is cautious about little evidence.
    assert [r.id for r in sidecar.rerank(tied, scoring=LowerBoundBlend())][:1] == ["proven"]
    sidecar.set_status("proven", "suppressed", reason="stale, says a person")
    assert [r.id for r in sidecar.rerank(tied)] == ["fresh", "failing"]
    assert sidecar.filter(["proven", "fresh"]) == ["fresh"]


def test_ids_alone_are_scored_by_their_order(sidecar: Sidecar) -> None:
    assert rank_scores(2).tolist() == [1.0, 0.5]
    fail(sidecar, "c", 10, success=True)
    ranked = sidecar.rerank(list("abcdefghij"), k=3)
    assert [r.id for r in ranked] == ["c", "a", "b"]  # 0.6 x 0.8 + 0.4 x 1 beats 0.6 x 1 + 0.4 x 0.5
    assert [r.similarity for r in ranked] == pytest.approx([0.8, 1.0, 0.9])
    assert [r.id for r in sidecar.rerank(list("abc"))] == ["a", "b", "c"]  # a third apart: similarity wins


def test_retrieve_logs_picks_with_credit_and_propensity(sidecar: Sidecar) -> None:
    got = sidecar.retrieve([("x", 0.9), ("y", 0.5), ("z", 0.1)], k=2, query="find x", context="chat")
    assert got.ids == ["x", "y"]
    logged = sidecar.store.backend.episodes([got.episode.id])[got.episode.id]
    assert [(i.memory_id, i.weight, i.propensity) for i in logged.items] == [("x", 0.5, 1.0), ("y", 0.5, 1.0)]
    assert (logged.query, logged.context) == ("find x", "chat")
    assert {m.id for m in sidecar.store.list()} == {"x", "y"}  # only the picks were registered
    sidecar.record(got.episode.id, True)
    assert sidecar.worth("x").counts == Counts(0.5, 0.0, 1.0)


def test_exploration_is_logged_with_exact_propensities() -> None:
    with Sidecar.open("memory://", exploration=0.5, seed=3) as sidecar:
        fail(sidecar, "proven", 10, success=True)
        candidates = [("proven", 0.9)] + [(f"new-{i}", 0.5) for i in range(4)]
        explored = [r for _ in range(20) for r in sidecar.retrieve(candidates, k=1).results]
    assert {r.id for r in explored if r.explored} <= {f"new-{i}" for i in range(4)}
    assert any(r.explored for r in explored) and any(r.id == "proven" for r in explored)
    greedy = next(r for r in explored if r.id == "proven")
    assert greedy.propensity == pytest.approx(0.5) and not greedy.explored
    assert next(r for r in explored if r.explored).propensity == pytest.approx(0.5 / 4)


def test_retrieved_with_weights_and_auto_register(sidecar: Sidecar) -> None:
    episode = sidecar.retrieved(["a", "b"], weights=[3.0, 1.0], query="q")
    assert [(i.memory_id, i.weight) for i in episode.items] == [("a", 0.75), ("b", 0.25)]
    sidecar.record(episode, False, source="heuristic")
    counts = sidecar.worth("a").counts
    assert (counts.success, counts.failure, counts.n) == (0.0, pytest.approx(0.75 * 0.2), 1.0)
    strict = Sidecar(sidecar.store, auto_register=False)
    before = len(sidecar.store.list())
    with pytest.raises(UnknownMemoryError):
        strict.retrieved(["a", "unknown"])
    with pytest.raises(UnknownMemoryError):
        strict.retrieve(["unknown", "a"], k=2)
    assert len(sidecar.store.list()) == before  # nothing registered
    assert strict.retrieved(["a"]).items[0].memory_id == "a"
    empty = sidecar.retrieved([])
    sidecar.record(empty, True)  # an episode that retrieved nothing credits nothing
    assert sidecar.worth("a").counts.n == 1


def test_candidates_take_the_http_shape_too(sidecar: Sidecar) -> None:
    sidecar.register(["a", "b"])
    pairs = sidecar.rerank([("a", 0.4), ("b", 0.9)], k=2)
    objects = sidecar.rerank([{"id": "a", "score": 0.4}, {"id": "b", "score": 0.9}], k=2)
    assert [(r.id, r.score) for r in pairs] == [(r.id, r.score) for r in objects]


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda s: s.register("abc"), "ids"),
        (lambda s: s.register(["a", "a"]), "ids"),
        (lambda s: s.register([""]), "id"),
        (lambda s: s.register(["a"], namespace="bad space"), "namespace"),
        (lambda s: s.register(["a"], metadata={"x": {1, 2}}), "metadata"),
        (lambda s: s.register(["a"], contexts="one"), "contexts"),
        (lambda s: s.rerank([("a", float("nan"))]), "candidates[0]"),
        (lambda s: s.rerank([("a", True)]), "candidates[0]"),
        (lambda s: s.rerank([("a", 0.5, 1)]), "candidates[0]"),
        (lambda s: s.rerank(["a", ("b", 0.5)]), "candidates[0]"),
        (lambda s: s.rerank([("a", 0.5), ("a", 0.4)]), "candidates"),
        (lambda s: s.rerank([{"id": "a", "similarity": 0.5}]), "candidates[0]"),
        (lambda s: s.rerank([{"id": "a", "score": "high"}]), "candidates[0]"),
        (lambda s: s.rerank(["a"], k=0), "k"),
        (lambda s: s.retrieve(["a"], k=101), "k"),
        (lambda s: s.retrieve(["a"], query=5), "query"),
        (lambda s: s.retrieve(["a"], context=""), "context"),
        (lambda s: s.retrieved(["a"], weights=[1.0, 2.0]), "weights"),
        (lambda s: s.retrieved(["a"], weights=[-1.0]), "weights"),
        (lambda s: s.retrieved([f"m{i}" for i in range(1001)]), "ids"),
        (lambda s: s.record("no-such-episode", True, source="rumour"), "source"),
        (lambda s: s.filter(None), "ids"),
    ],
)
def test_bad_input_is_refused_with_nothing_written(sidecar: Sidecar, call: object, field: str) -> None:
    with pytest.raises(ValidationError) as err:
        call(sidecar)  # type: ignore[operator]
    assert err.value.field == field
    assert sidecar.store.list() == [] and list(sidecar.store.backend.outcome_log()) == []


def test_settings_are_checked() -> None:
    with pytest.raises(ValidationError):
        Sidecar.open("memory://", auto_register="yes")  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        Sidecar("memory://")  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        Sidecar.open("redis://nowhere")


def test_rerank_of_many_candidates_matches_numpy(sidecar: Sidecar) -> None:
    rng = np.random.default_rng(7)
    ids = [f"m{i}" for i in range(300)]
    for i in rng.choice(300, size=40, replace=False):
        fail(sidecar, ids[i], int(rng.integers(1, 5)), success=bool(rng.integers(0, 2)))
    sims = rng.random(300)
    ranked = sidecar.rerank(list(zip(ids, sims.tolist(), strict=True)), k=25)
    known = {m.id: m.counts for m in sidecar.store.list()}
    worth = np.array([known[m].success / (known[m].success + known[m].failure) if m in known else 0.5 for m in ids])
    expected = np.argsort(-(0.6 * sims + 0.4 * worth), kind="stable")[:25]
    assert [r.id for r in ranked] == [ids[i] for i in expected]


def test_the_sidecar_over_http() -> None:
    from fastapi.testclient import TestClient

    from memworth.server import create_app, create_key

    store = MemoryStore.open("memory://", seed=0, exploration=0.0)
    client = TestClient(create_app(store))
    h = {"Authorization": f"Bearer {create_key(store, 'team-a', 'agent')}"}
    other = {"Authorization": f"Bearer {create_key(store, 'team-b', 'agent')}"}
    r = client.post("/v1/sidecar/register", json={"ids": ["p1", "p2"], "contexts": ["pinecone"]}, headers=h)
    assert r.json() == {"registered": ["p1", "p2"], "already": 0}
    candidates = [{"id": "p1", "score": 0.9}, {"id": "p2", "score": 0.8}, {"id": "p3", "score": 0.1}]
    got = client.post("/v1/sidecar/retrieve", json={"candidates": candidates, "k": 1, "query": "q"}, headers=h)
    assert got.status_code == 200 and [x["id"] for x in got.json()["results"]] == ["p1"]
    episodes = [got.json()["episode"]]
    for _ in range(19):
        episodes.append(client.post("/v1/sidecar/retrieved", json={"ids": ["p1"]}, headers=h).json()["episode"])
    for episode_id in episodes:
        outcome = client.post(f"/v1/episodes/{episode_id}/outcome", json={"success": False}, headers=h)
        assert outcome.status_code == 200
    worth = client.post("/v1/sidecar/worth", json={"ids": ["p1", "p2"]}, headers=h).json()["results"]
    assert [(w["id"], w["worth"], w["counts"]["retrievals"], w["class"]) for w in worth] == [
        ("p1", 0.0, 20.0, "low"),
        ("p2", 0.5, 0.0, "uncertain"),
    ]
    assert worth[0]["proposal"]["action"] == "deprecate"
    applied = client.post("/v1/govern", json={"apply": True}, headers=h).json()["applied"]
    assert [(e["memory_id"], e["new"]) for e in applied] == [("p1", "deprecated")]
    assert client.post("/v1/sidecar/filter", json={"ids": ["p1", "p2", "p9"]}, headers=h).json() == {
        "ids": ["p2", "p9"]
    }
    ranked = client.post("/v1/sidecar/rerank", json={"candidates": [{"id": "p1"}, {"id": "p2"}]}, headers=h).json()
    assert [x["id"] for x in ranked["results"]] == ["p2"] and ranked["results"][0]["class"] == "uncertain"
    logged = client.post("/v1/sidecar/retrieved", json={"ids": ["p2", "p3"], "weights": [3, 1]}, headers=h).json()
    assert logged["ids"] == ["p2", "p3"]
    episode = store.backend.episodes([logged["episode"]])[logged["episode"]]
    assert [i.weight for i in episode.items] == [0.75, 0.25] and episode.namespace == "team-a"
    # One error shape; a key sees only its own namespace.
    mixed_scores = client.post(
        "/v1/sidecar/rerank", json={"candidates": [{"id": "a", "score": 1}, {"id": "b"}]}, headers=h
    )
    assert mixed_scores.status_code == 422 and mixed_scores.json()["error"]["field"] == "candidates"
    assert client.post("/v1/sidecar/worth", json={"ids": ["p1"]}, headers=other).status_code == 404
    assert client.post("/v1/sidecar/worth", json={"ids": ["p1"]}).status_code == 401
    assert client.post("/v1/sidecar/retrieve", json={"candidates": [], "k": 0}, headers=h).status_code == 422
    store.close()


def test_the_sidecar_package_keeps_its_public_names() -> None:
    import memworth.sidecar as package
    from memworth.sidecar import arguments, records, sidecar

    assert package.__all__ == sorted(package.__all__)
    assert set(package.__all__) == {
        "MAX_CANDIDATES",
        "MAX_RETRIEVED",
        "MemoryReport",
        "Ranked",
        "Retrieval",
        "Sidecar",
        "WorthReport",
        "rank_scores",
    }
    assert (package.Sidecar, package.rank_scores, package.Ranked) == (
        sidecar.Sidecar,
        arguments.rank_scores,
        records.Ranked,
    )
    for module in (arguments, records, sidecar):
        assert module.__all__ == sorted(module.__all__) and all(hasattr(module, n) for n in module.__all__)


def test_the_verification_queue_and_pins_on_the_sidecar(sidecar: Sidecar) -> None:
    """Pin and unpin, list the queue and resolve on the sidecar itself, as on every face
    (before, a sidecar user had to reach into ``sidecar.store`` for them)."""
    sidecar.register(["doc-1", "doc-2"])
    sidecar.store.set_standing("doc-1", "re-verify", reason="the page changed")
    assert [r.id for r in sidecar.queue()] == ["doc-1"]
    assert sidecar.filter(["doc-1", "doc-2"]) == ["doc-2"]  # quarantined: served only as a probe
    entry = sidecar.resolve("doc-1", "stale", reason="outdated", status="deprecated")
    assert entry.new == "deprecated" and sidecar.queue() == [] and sidecar.worth("doc-1").pin is not None
    assert sidecar.pin("doc-2", reason="keep").action == "pin" and sidecar.worth("doc-2").pin.until is None
    assert sidecar.unpin("doc-2", reason="let go").action == "unpin" and sidecar.worth("doc-2").pin is None
