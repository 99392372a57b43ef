"""Behaviour every backend must show (run against each by the fixtures in conftest.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from memworth import (
    Counts,
    DuplicateError,
    HashingEncoder,
    MemoryStore,
    StoreError,
    UnknownEpisodeError,
    UnknownMemoryError,
    ValidationError,
)
from memworth.store import MAX_TEXT, OutcomeRow
from tests.store.conftest import FACTS


def snapshot(store: MemoryStore, namespace: str = "default") -> list[tuple[str, str, Counts]]:
    return [(m.id, m.status, m.counts) for m in store.list(namespace=namespace)]


def test_add_get_list_round_trip(store: MemoryStore) -> None:
    m = store.add("Water boils at 100 C.", id="w", metadata={"src": "book", "n": [1, 2]}, contexts=["science"])
    got = store.get("w")
    assert got.text == m.text and got.metadata == {"src": "book", "n": [1, 2]} and got.contexts == ("science",)
    assert got.status == "active" and got.counts == Counts()
    assert [x.id for x in store.list(context="science")] == ["w"] and store.list(context="other") == []
    generated = store.add("An id is made up when none is given.")
    assert len(generated.id) == 32 and store.get(generated.id).text == generated.text


def test_ids_are_unique_per_namespace(store: MemoryStore) -> None:
    store.add("one", id="x")
    with pytest.raises(DuplicateError):
        store.add("two", id="x")
    store.add("in another namespace", id="x", namespace="tenant-b")
    assert store.get("x").text == "one" and store.get("x", namespace="tenant-b").text == "in another namespace"


def test_add_many_is_all_or_nothing(store: MemoryStore) -> None:
    store.add("exists", id="a")
    with pytest.raises(DuplicateError):
        store.add_many([{"id": "b", "text": "new"}, {"id": "a", "text": "clash"}])
    assert [m.id for m in store.list()] == ["a"]


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"text": ""}, "text"),
        ({"text": "   "}, "text"),
        ({"text": "x" * (MAX_TEXT + 1)}, "text"),
        ({"text": 5}, "text"),
        ({"text": "ok", "id": ""}, "id"),
        ({"text": "ok", "id": 7}, "id"),
        ({"text": "ok", "metadata": {"x": float("nan")}}, "metadata"),
        ({"text": "ok", "metadata": ["not", "a", "dict"]}, "metadata"),
        ({"text": "ok", "contexts": "science"}, "contexts"),
        ({"text": "ok", "namespace": "has space"}, "namespace"),
    ],
)
def test_bad_memories_are_refused_and_nothing_is_written(store: MemoryStore, kwargs: dict, field: str) -> None:
    kwargs = dict(kwargs)
    text = kwargs.pop("text")
    with pytest.raises(ValidationError) as info:
        store.add(text, **kwargs)
    assert info.value.field == field
    assert store.list() == []


def test_provenance_must_point_at_existing_memories(store: MemoryStore) -> None:
    store.add("a fact", id="fact")
    store.add("a decision", id="decision", derived_from=["fact"])
    store.add_many([{"id": "s", "text": "a strategy"}, {"id": "t", "text": "a step", "part_of": ["s"]}])
    assert store.get("decision").derived_from == ("fact",) and store.get("t").part_of == ("s",)
    with pytest.raises(UnknownMemoryError):
        store.add("orphan", id="orphan", derived_from=["nowhere"])
    assert "orphan" not in {m.id for m in store.list()}


def test_recall_ranks_by_similarity_and_logs_the_episode(filled: MemoryStore) -> None:
    filled.exploration = 0.0
    recall = filled.recall("how do I reverse a python list", k=2)
    assert recall.results[0].memory.id == "reverse"
    assert len(recall) == 2 and len(recall.episode.items) == 2
    assert [i.memory_id for i in recall.episode.items] == [r.memory.id for r in recall]
    assert sum(i.weight for i in recall.episode.items) == pytest.approx(1.0)
    assert all(i.propensity == 1.0 for i in recall.episode.items)  # no exploration: deterministic
    r = recall.results[0]
    assert r.worth == 0.5 and r.value_class == "uncertain" and r.lower == 0.0 and r.upper == 1.0
    assert filled.backend.episodes([recall.episode.id])[recall.episode.id] == recall.episode


def test_recall_excludes_suppressed_and_deprecated(filled: MemoryStore) -> None:
    filled.exploration = 0.0
    filled.set_status("reverse", "suppressed", reason="test")
    filled.set_status("methods", "deprecated", reason="test")
    ids = {r.memory.id for r in filled.recall("reverse a python list", k=6)}
    assert ids == set(FACTS) - {"reverse", "methods"}
    filled.set_status("reverse", "active", reason="undo")
    assert "reverse" in {r.memory.id for r in filled.recall("reverse a python list", k=6)}


def test_recall_reads_a_picked_memory_once_and_shows_it_as_it_is_now(
    filled: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 17: the picked memories' text, metadata, contexts and provenance never change
    under their ids, so recall reads them from the backend once; their status, standing,
    counts and time of last change come from the narrow read of every recall."""
    filled.exploration = 0.0
    filled.add("Reversing a list in place: list.reverse().", id="derived", derived_from=["reverse"],
               metadata={"tags": ["python"]}, contexts=["code"])  # fmt: skip
    reads: list[str] = []
    memories = filled.backend.memories

    def counted(namespace: str, ids: Any = None) -> Any:
        reads.extend(ids or ["(every memory)"])
        return memories(namespace, ids)

    monkeypatch.setattr(filled.backend, "memories", counted)
    first = filled.recall("reverse a python list", k=2)
    assert sorted(reads) == sorted(r.memory.id for r in first) == ["derived", "reverse"]
    filled.record(first, True)
    filled.set_standing("derived", "promoted", reason="a person trusts it")
    reads.clear()
    again = filled.recall("reverse a python list", k=2)
    assert {r.memory.id for r in again} == {"derived", "reverse"}
    searched_in_database = filled.index == "database"  # pgvector: no local index, each recall reads its picks
    assert sorted(reads) == (["derived", "reverse"] if searched_in_database else [])
    monkeypatch.undo()
    for r in again:
        assert r.memory == filled.get(r.memory.id)  # counts, standing and time of change as stored now
    derived = next(r.memory for r in again if r.memory.id == "derived")
    assert (derived.metadata, derived.contexts, derived.derived_from, derived.standing) == (
        {"tags": ["python"]}, ("code",), ("reverse",), "promoted"
    )  # fmt: skip
    derived.metadata["tags"].append("changed by the caller")  # each recall hands out its own metadata
    latest = filled.recall("reverse a python list", k=2)
    assert next(r.memory for r in latest if r.memory.id == "derived").metadata == {"tags": ["python"]}


def test_recall_keeps_at_most_its_bound_of_memories_and_still_answers_right(
    filled: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memworth.store import recall as recall_module

    monkeypatch.setattr(recall_module, "CONTENT_KEPT", 3)
    filled.exploration = 0.0
    for query in ("reverse a python list", "capital city of czech", "water boils", "recursion base case"):
        for r in filled.recall(query, k=4):
            assert r.memory == filled.get(r.memory.id)
    space = filled._spaces.get("default")
    assert space is None or len(space.kept.content) <= 3


def test_an_erased_memory_leaves_what_recall_keeps(filled: MemoryStore) -> None:
    filled.exploration = 0.0
    assert "reverse" in {r.memory.id for r in filled.recall("reverse a python list", k=2)}
    filled.delete("reverse", reason="the user asked")
    recall = filled.recall("reverse a python list", k=2)
    assert "reverse" not in {r.memory.id for r in recall}
    space = filled._spaces.get("default")
    assert space is None or "reverse" not in space.kept.content


def test_record_credits_the_retrieved_memories(filled: MemoryStore) -> None:
    filled.exploration = 0.0
    recall = filled.recall("reverse a python list", k=4)
    filled.record(recall.episode, success=True)
    for item in recall.episode.items:
        assert filled.get(item.memory_id).counts == Counts(item.weight, 0.0, 1.0)
    second = filled.recall("reverse a python list", k=4)
    filled.record(second.episode.id, success="failure", source="heuristic")
    top = second.episode.items[0]
    c = filled.get(top.memory_id).counts
    assert c.failure == pytest.approx(top.weight * 0.2) and c.n == 2.0


def test_recording_twice_is_refused_and_counts_nothing_twice(filled: MemoryStore) -> None:
    recall = filled.recall("capital of the czech republic", k=3)
    filled.record(recall.episode, success=True)
    before = snapshot(filled)
    with pytest.raises(DuplicateError):
        filled.record(recall.episode, success=True)
    with pytest.raises(DuplicateError):
        filled.record(recall.episode, success=False)
    assert snapshot(filled) == before
    assert [o.episode_id for o in filled.backend.outcome_log()] == [recall.episode.id]


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda s, e: s.record("no-such-episode", True), UnknownEpisodeError),
        (lambda s, e: s.record(e, 0.5), ValidationError),
        (lambda s, e: s.record(e, None), ValidationError),
        (lambda s, e: s.record(e, True, source="rumour"), ValidationError),
        (lambda s, e: s.record(e, True, confidence=0.0), ValidationError),
        (lambda s, e: s.record(e, True, confidence=float("nan")), ValidationError),
        (lambda s, e: s.record(e, True, namespace="other"), UnknownEpisodeError),
        (lambda s, e: s.record_many([(e, True), ("missing", True)]), UnknownEpisodeError),
        (lambda s, e: s.record_many([(e, True), (e, False)]), ValidationError),
        (lambda s, e: s.record_many([]), ValidationError),
    ],
)
def test_bad_outcomes_are_refused_and_nothing_is_written(filled: MemoryStore, call: object, error: type) -> None:
    recall = filled.recall("boiling point of water", k=3)
    before = snapshot(filled)
    with pytest.raises(error):
        call(filled, recall.episode)  # type: ignore[operator]
    assert snapshot(filled) == before and list(filled.backend.outcome_log()) == []
    filled.record(recall.episode, True)  # the episode is still recordable
    assert len(list(filled.backend.outcome_log())) == 1


def test_replay_rebuilds_every_counter_exactly(filled: MemoryStore) -> None:
    rng = np.random.default_rng(3)
    queries = ["reverse a list", "capital city", "recursion base case", "water boiling", "python sort"]
    filled.record_many(
        [(filled.recall(str(rng.choice(queries)), k=3).episode, bool(rng.random() < 0.6)) for _ in range(7)]
    )
    for _ in range(60):
        recall = filled.recall(str(rng.choice(queries)), k=int(rng.integers(1, 5)))
        source = str(rng.choice(["explicit", "implicit", "heuristic"]))
        filled.record(recall.episode, bool(rng.random() < 0.5), source=source)
    report = filled.replay()
    assert report.outcomes == 67 and report.consistent
    live = {m.id: m.counts for m in filled.list()}
    assert all(report.rebuilt[("default", mid)] == c for mid, c in live.items() if c.n > 0)


def test_replay_finds_and_repairs_a_tampered_counter(filled: MemoryStore) -> None:
    recall = filled.recall("reverse a list", k=2)
    filled.record(recall.episode, True)
    target = recall.episode.items[0].memory_id
    filled.backend.write_counts("default", {target: Counts(5.0, 5.0, 10.0)})
    report = filled.replay()
    assert not report.consistent and [m[1] for m in report.mismatches] == [target]
    assert filled.replay(apply=True).applied and filled.replay().consistent
    assert filled.get(target).counts == Counts(recall.episode.items[0].weight, 0.0, 1.0)


def test_status_changes_are_audited_and_reversible(filled: MemoryStore) -> None:
    first = filled.set_status("czechoslovakia", "deprecated", reason="the country dissolved in 1993")
    filled.set_status("czechoslovakia", "active", reason="restored for the history task")
    log = filled.audit("czechoslovakia")
    assert [(e.field, e.old, e.new) for e in log] == [
        ("status", "active", "deprecated"),
        ("status", "deprecated", "active"),
    ]
    assert log[0].seq == first.seq < log[1].seq
    assert "1993" in log[0].reason and filled.get("czechoslovakia").status == "active"
    with pytest.raises(ValidationError):
        filled.set_status("czechoslovakia", "active", reason="already")
    with pytest.raises(ValidationError):
        filled.set_status("czechoslovakia", "gone", reason="no such status")
    with pytest.raises(UnknownMemoryError):
        filled.set_status("nope", "archived", reason="x")


def test_namespaces_never_see_each_other(store: MemoryStore) -> None:
    store.add("Tenant A's secret: the launch code is 1234.", id="secret", namespace="a")
    store.add("Tenant B knows about gardening.", id="garden", namespace="b")
    assert {r.memory.id for r in store.recall("launch code secret", k=5, namespace="b")} == {"garden"}
    recall_a = store.recall("launch code", k=1, namespace="a")
    with pytest.raises(UnknownEpisodeError):
        store.record(recall_a.episode, True, namespace="b")
    with pytest.raises(UnknownMemoryError):
        store.get("secret", namespace="b")


def test_the_quarantine_is_counted_across_namespaces(store: MemoryStore) -> None:
    store.add_many([{"id": "x", "text": "one"}, {"id": "y", "text": "two"}], namespace="a")
    store.add("three", id="x", namespace="b")
    assert store.backend.quarantined() == 0
    store.set_standing("x", "re-verify", reason="check", namespace="a")
    store.set_standing("x", "re-verify", reason="check", namespace="b")
    store.set_status("x", "suppressed", reason="out", namespace="b")  # not active: not in the queue
    assert store.backend.quarantined() == 1 == len(store.queue(namespace="a"))


def test_recent_outcomes_are_read_one_namespace_at_a_time(store: MemoryStore) -> None:
    store.add("alpha note", id="x", namespace="a")
    store.add("beta note", id="x", namespace="b")
    for ns, ok in (("a", True), ("b", False), ("a", False)):
        store.record(store.recall("note", k=1, namespace=ns).episode, ok, namespace=ns)
    everything = store.backend.outcomes_since(0.0)
    only_a = store.backend.outcomes_since(0.0, namespace="a")
    assert [o.namespace for o in everything] == ["a", "b", "a"]
    assert [(o.namespace, o.success) for o in only_a] == [("a", True), ("a", False)]
    assert store.backend.outcomes_since(0.0, source="explicit", namespace="b")[0].success is False
    assert store.backend.outcomes_since(0.0, source="heuristic", namespace="b") == []


def test_exploration_gives_low_evidence_memories_slots_and_logs_propensities(store: MemoryStore) -> None:
    store.add_many([{"id": f"m{i}", "text": f"fact number {i} about topic {i % 3}"} for i in range(30)])
    store.exploration = 0.5
    explored = 0
    for _ in range(40):
        recall = store.recall("fact about topic 1", k=4)
        explored += sum(r.explored for r in recall)
        for item in recall.episode.items:
            assert 0.0 < item.propensity <= 1.0
    assert explored > 0


def test_empty_store_recall_is_an_empty_logged_episode(store: MemoryStore) -> None:
    recall = store.recall("anything", k=3)
    assert len(recall) == 0 and store.backend.episodes([recall.episode.id])


def test_episodes_at_reads_the_episodes_and_the_generation_together(filled: MemoryStore) -> None:
    """What recording reads first, in one read: each backend answers as its two separate reads do,
    an episode that retrieved nothing and an unknown id included."""
    backend = filled.backend
    ids = [filled.recall("capital of france", k=3).episode.id, "no-such-episode"]
    empty = MemoryStore.open("memory://", encoder=HashingEncoder()).recall("anything", k=3).episode
    backend.insert_episode(empty)
    ids.append(empty.id)
    ns = empty.namespace
    found, generation = backend.episodes_at(ids, ns)
    assert (found, generation) == (backend.episodes(ids, ns), backend.generation(ns))
    assert set(found) == {ids[0], empty.id} and found[empty.id].items == () and len(found[ids[0]].items) == 3
    assert generation is not None and generation > 0  # adding the memories moved it
    assert backend.episodes_at(["no-such-episode"], ns) == ({}, generation)
    # without a namespace: the episodes, and no generation (PostgreSQL keeps one per namespace)
    assert backend.episodes_at(ids) == (found, None)
    assert backend.episodes_at(ids, "another-namespace") == ({}, backend.generation("another-namespace"))


@pytest.mark.parametrize(("k", "query"), [(0, "q"), (101, "q"), (True, "q"), (3, ""), (3, None)])
def test_bad_recall_is_refused(filled: MemoryStore, k: object, query: object) -> None:
    with pytest.raises(ValidationError):
        filled.recall(query, k=k)  # type: ignore[arg-type]


def test_a_reopened_store_refuses_to_mix_encoders(tmp_path: object) -> None:
    # Only a persistent backend can be reopened; memory:// has nothing to reopen.
    url = f"sqlite:///{tmp_path}/enc.db"
    with MemoryStore.open(url, encoder=HashingEncoder(64)) as s:
        s.add("a memory", id="m")
    with pytest.raises(StoreError):
        MemoryStore.open(url, encoder=HashingEncoder(128))
    with MemoryStore.open(url) as reopened:  # the stored encoder name is enough to rebuild it
        assert reopened.encoder.name == "hashing-64"
        assert [r.memory.id for r in reopened.recall("a memory", k=1)] == ["m"]


def test_credit_propagates_back_along_provenance_and_replays(store: MemoryStore) -> None:
    store.exploration = 0.0
    store.add("Paris is the capital of France.", id="fact")
    store.add("Book the Paris hotel near the capital's centre.", id="decision", derived_from=["fact"])
    store.add("Travel strategy: plan hotels around capital city centres.", id="strategy", derived_from=["decision"])
    recall = store.recall("travel strategy hotels capital city centres", k=1)
    assert [r.memory.id for r in recall] == ["strategy"]
    store.record(recall.episode, success=True)
    got = {m.id: m.counts for m in store.list()}
    assert got["strategy"] == Counts(1.0, 0.0, 1.0)
    assert got["decision"].success == pytest.approx(0.7) and got["decision"].n == 0.0
    assert got["fact"].success == pytest.approx(0.49)
    assert store.replay().consistent


def test_propagation_can_be_turned_off(make_store: Callable[..., MemoryStore]) -> None:
    s = make_store(propagation=0.0)
    s.exploration = 0.0
    s.add("base fact", id="a")
    s.add("derived decision from base fact", id="b", derived_from=["a"])
    s.record(s.recall("derived decision", k=1).episode, success=False)
    assert s.get("a").counts == Counts() and s.get("b").counts.failure == 1.0


def test_a_duplicate_in_a_batch_is_named(filled: MemoryStore) -> None:
    a, b, c = (filled.recall(q, k=2).episode for q in ("reverse a list", "capital city", "water boils"))
    filled.record(b, True)
    with pytest.raises(DuplicateError, match=b.id):
        filled.record_many([(a, True), (b, False), (c, True)])
    assert [o.episode_id for o in filled.backend.outcome_log()] == [b.id]


def test_each_namespace_reads_its_own_log_and_history(store: MemoryStore) -> None:
    for ns in ("default", "tenant-b"):
        store.add("Water boils at 100 C at sea level.", id="w", namespace=ns)
        store.add("Prague is the capital of the Czech Republic.", id="p", namespace=ns)
    mine = store.recall("water boils", k=2, episode_id="a1")
    theirs = [store.recall("prague capital", k=1, namespace="tenant-b", episode_id=f"b{i}") for i in range(3)]
    store.record(theirs[0], success=False)
    store.record(mine, success=True)  # a Recall is accepted as it was returned
    store.record_many([(r, True) for r in theirs[1:]])
    assert [(o.episode_id, o.namespace) for o in store.backend.outcome_log("default")] == [("a1", "default")]
    assert [o.episode_id for o in store.backend.outcome_log("tenant-b")] == ["b0", "b1", "b2"]
    history = store.backend.history("tenant-b")
    assert [(o.episode_id, o.success, ep.id, ep.namespace) for o, ep in history] == [
        ("b0", False, "b0", "tenant-b"),
        ("b1", True, "b1", "tenant-b"),
        ("b2", True, "b2", "tenant-b"),
    ]
    assert [it.memory_id for it in history[0][1].items] == [r.memory.id for r in theirs[0]]
    after = history[0][0].seq
    assert [o.episode_id for o, _ in store.backend.history("tenant-b", after=after)] == ["b1", "b2"]
    assert store.backend.history("nobody") == []
    # counts and proposals of one namespace never see another's outcomes
    assert store.episode_stats().episodes == 1 and store.episode_stats("tenant-b").episodes == 3


def test_a_checkpoint_is_kept_per_namespace_as_given(store: MemoryStore) -> None:
    backend = store.backend
    assert backend.load_checkpoint("default") is None
    data = bytes(range(256)) * 40  # every byte value, NUL included
    backend.save_checkpoint("default", data)
    backend.save_checkpoint("tenant-b", b"b's")
    assert backend.load_checkpoint("default") == data and backend.load_checkpoint("tenant-b") == b"b's"
    backend.save_checkpoint("default", b"newer")  # replaces
    assert backend.load_checkpoint("default") == b"newer"
    backend.drop_checkpoints("default")
    assert backend.load_checkpoint("default") is None and backend.load_checkpoint("tenant-b") == b"b's"
    backend.save_checkpoint("default", b"again")
    backend.drop_checkpoints()
    assert backend.load_checkpoint("default") is None and backend.load_checkpoint("tenant-b") is None


def test_each_outcome_names_the_settings_version_it_was_credited_under(make_store: Callable[..., MemoryStore]) -> None:
    """Schema 6: every outcome keeps the kept settings version in force when it was credited,
    every read of the log returns it, and an outcome logged without one (before versions
    were kept) reads back as None."""
    store = make_store(seed=0)
    base = store.settings_version
    assert base == store.config()["version"]
    store.add_many([{"id": k, "text": v} for k, v in FACTS.items()])
    store.record(store.recall("reverse a list", k=2), True)
    assert store.configure({"recall.exploration": 0.0}, actor="ops") == base + 1 == store.settings_version
    store.record_many([(store.recall("capital city", k=1), False), (store.recall("water boiling", k=2), True)])
    assert store.configure({"credit.propagation": 0.2}, actor="ops") == base + 2
    store.verify(store.recall("recursion base case", k=1), True)  # a verification that becomes the outcome
    old = store.recall("python sort", k=1).episode
    store.backend.append_outcomes([OutcomeRow(old.id, True, "explicit", 1.0, 5.0, namespace="default")], [])
    log = list(store.backend.outcome_log())
    assert [o.settings_version for o in log] == [base, base + 1, base + 1, base + 2, None]
    assert [(o.propagation, o.settings_version) for o in log[-2:]] == [(0.2, base + 2), (None, None)]
    assert list(store.backend.outcome_log("default")) == log
    assert [o for o, _ in store.backend.history("default")] == log
    assert store.backend.outcomes_since(0.0) == log
    assert store.backend.outcomes_of([o.episode_id for o in log]) == {o.episode_id: o for o in log}
    page = store.outcome_page(limit=3)
    assert page.items == log[:3] and store.outcome_page(cursor=page.next_cursor).items == log[3:]
    assert [r["settings_version"] for r in (o.row() for o in log)] == [base, base + 1, base + 1, base + 2, None]


def test_an_outcome_replays_under_the_credit_settings_it_was_recorded_with(
    make_store: Callable[..., MemoryStore], capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 13: outcomes are credited under several kept settings versions (propagation
    off, then on for one hop, then for three); a client opened afterwards with other credit
    settings replays the log and finds it consistent, and ``replay --apply`` from it (in
    Python, and from the CLI, which works under the newest kept version) changes nothing.
    Each outcome keeps its own credit settings and names the version they were kept as."""
    plain = make_store(exploration=0.0, propagation=0.0, seed=0)
    v1 = plain.settings_version
    plain.add("Prague was the capital of Czechoslovakia.", id="fact")
    plain.add("Answers about the split give its year, 1993.", id="decision", derived_from=["fact"])
    note = "Czechoslovakia split in 1993; Prague is the Czech capital."
    plain.add(note, id="note", derived_from=["decision"])

    def outcome(store: MemoryStore, ok: bool) -> None:
        recall = store.recall(note, k=1)
        assert [r.memory.id for r in recall] == ["note"]
        store.record(recall, success=ok)

    for ok in (True, False):
        outcome(plain, ok)
    assert plain.get("decision").counts == Counts()  # nothing propagated to the parent
    assert plain.configure({"credit.propagation": 0.5, "credit.max_hops": 1}, actor="ops") == v1 + 1
    for ok in (True, True):
        outcome(plain, ok)
    assert plain.configure({"credit.max_hops": 3}, actor="ops") == v1 + 2
    outcome(plain, False)
    credited = [(o.propagation, o.max_hops, o.settings_version) for o in plain.backend.outcome_log()]
    assert credited == [(0.0, 3, v1)] * 2 + [(0.5, 1, v1 + 1)] * 2 + [(0.5, 3, v1 + 2)]
    counts = {mid: plain.get(mid).counts for mid in ("decision", "fact")}
    assert (counts["decision"].success, counts["decision"].failure, counts["decision"].n) == pytest.approx((1, 0.5, 0))
    assert (counts["fact"].success, counts["fact"].failure) == pytest.approx((0, 0.25))  # went 2 hops once
    memory = plain.backend.url == "memory://"

    def client(**settings: Any) -> MemoryStore:
        if memory:  # one backend, two store objects, as two processes have on a database
            return MemoryStore(plain.backend, encoder=HashingEncoder(), seed=0, **settings)
        return MemoryStore.open(plain.backend.url, encoder=HashingEncoder(), seed=0, **settings)

    kept = client()
    assert (kept.propagation, kept.max_hops, kept.settings_version) == (0.5, 3, v1 + 2)  # works under the kept ones
    if not memory:
        kept.close()
    # a client opened with other credit settings: a new version
    other = client(propagation=0.9, max_hops=2)
    assert (other.propagation, other.max_hops, other.settings_version) == (0.9, 2, v1 + 3)
    assert other.settings_record()["changed"] == ["credit.propagation", "credit.max_hops"]
    before = snapshot(other)
    assert other.replay().consistent and plain.replay().consistent
    report = other.replay(apply=True)
    assert not report.applied and report.outcomes == 5 and snapshot(other) == before
    if not memory:  # the CLI opens the store as it is kept (under the newest version) and replays
        from memworth.cli import main

        capsys.readouterr()
        assert main(["replay", "--apply", "--json", "--quiet", "--store", plain.backend.url]) == 0
        answer = json.loads(capsys.readouterr().out)
        assert (answer["consistent"], answer["applied"], answer["mismatches"]) == (True, False, [])
        assert snapshot(other) == before
    outcome(other, True)  # this one goes two hops at 0.9
    last = list(other.backend.outcome_log())[-1]
    assert (last.propagation, last.max_hops, last.settings_version) == (0.9, 2, v1 + 3)
    assert other.get("fact").counts.success == pytest.approx(0.81)
    assert other.replay().consistent and plain.replay().consistent
    if not memory:
        other.close()
