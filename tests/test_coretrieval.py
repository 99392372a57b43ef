"""Co-retrieval statistics, confound scores, the ablation planner and its wiring into recall."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from memworth import HashingEncoder, MemoryStore, RegressionWorth, UnknownMemoryError, ValidationError
from memworth.ranking import drop, select
from memworth.signals.coretrieval import AblationPlanner, CoRetrieval, confounds


def random_sets(seed: int, episodes: int = 400, memories: int = 15, k: int = 4) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.argsort(rng.random((episodes, memories)), axis=1)[:, :k]


# -- CoRetrieval -------------------------------------------------------------------------


def test_counts_match_a_brute_force_oracle() -> None:
    sets = random_sets(0)
    co = CoRetrieval()
    co.update_batch(sets[:150])
    for row in sets[150:].tolist():
        co.update(row)
    assert co.episodes == len(sets)
    for m in range(15):
        assert co.retrievals(m) == int((sets == m).any(axis=1).sum())
    for a, b in itertools.combinations(range(15), 2):
        both = int(((sets == a).any(axis=1) & (sets == b).any(axis=1)).sum())
        assert co.together(a, b) == co.together(b, a) == both
        if both:
            assert co.share(a, b) == pytest.approx(both / max(co.retrievals(a), co.retrievals(b)))
    listed = {(p.first, p.second): p.together for p in co.pairs()}
    assert sum(listed.values()) == len(sets) * 6  # 4 memories per episode: 6 pairs each


def test_one_episode_at_a_time_equals_a_batch() -> None:
    sets = random_sets(1)
    batch, single = CoRetrieval(), CoRetrieval()
    batch.update_batch(sets)
    for row in sets:
        single.update(row)  # an integer array row takes the vectorised path
    for a, b in itertools.combinations(range(15), 2):
        assert batch.together(a, b) == single.together(a, b)


def test_merge_of_shards_equals_one_statistic() -> None:
    sets = random_sets(2)
    whole, left, right = CoRetrieval(), CoRetrieval(), CoRetrieval()
    whole.update_batch(sets)
    left.update_batch(sets[:100])
    right.update_batch(sets[100:] + 100)  # ids the left shard never saw ...
    right.update_batch(sets[100:])  # ... and ids it did
    merged = left + right
    assert merged.episodes == 100 + 2 * 300
    for a, b in itertools.combinations(range(15), 2):
        assert merged.together(a, b) == whole.together(a, b)
        assert merged.together(a + 100, b + 100) == right.together(a + 100, b + 100)
    assert (CoRetrieval() + CoRetrieval()).episodes == 0


def test_partner_and_habitual_pairs() -> None:
    co = CoRetrieval()
    for t in range(30):
        co.update(["anchor", "hitchhiker", f"x{t % 10}"])
    for t in range(30):
        co.update(["anchor", f"y{t % 10}"])
    # the hitchhiker never comes alone, but the anchor does in half its episodes
    assert co.share("anchor", "hitchhiker") == pytest.approx(0.5)
    assert co.partner("hitchhiker") == ("anchor", 30)
    assert co.partner("x0") == ("hitchhiker", 3)  # closest by share: 3 of the hitchhiker's 30, of the anchor's 60
    assert [(p.first, p.second) for p in co.habitual(min_share=0.5, min_episodes=30)] == [("anchor", "hitchhiker")]
    assert co.habitual(min_share=0.6, min_episodes=1) == []
    assert co.habitual(min_share=0.5, min_episodes=31) == []
    lonely = CoRetrieval()
    lonely.update(["solo"])
    assert lonely.partner("solo") == (None, 0) and list(lonely.pairs()) == []


def test_readers_refuse_unknown_ids_and_bad_input() -> None:
    co = CoRetrieval()
    co.update(["a", "b"])
    with pytest.raises(UnknownMemoryError):
        co.retrievals("zzz")
    with pytest.raises(UnknownMemoryError):
        co.together("a", "zzz")
    for bad in (["a", "a"], [], "ab", [1.5]):
        with pytest.raises(ValidationError):
            co.update(bad)  # type: ignore[arg-type]
    for bad_batch in (np.array([1, 2]), np.array([[1, 1]]), np.array([[0.5, 1.0]]), np.zeros((2, 0), dtype=int)):
        with pytest.raises(ValidationError):
            co.update_batch(bad_batch)
    assert co.episodes == 1 and co.ids() == ["a", "b"]
    with pytest.raises(ValidationError, match="min_share"):
        co.habitual(min_share=0)
    with pytest.raises(ValidationError, match="min_episodes"):
        co.habitual(min_episodes=0)


# -- confounds ---------------------------------------------------------------------------


def test_confound_scores_hand_computed() -> None:
    co = CoRetrieval()
    for t in range(40):
        co.update(["anchor", "hitchhiker"] if t < 36 else ["anchor", "other"])
    adjusted = {"anchor": 0.6, "hitchhiker": 0.4, "other": 0.5}
    found = {c.memory_id: c for c in confounds(co, adjusted)}
    assert set(found) == {"anchor", "hitchhiker"}  # anchor-other: 4 episodes, not habitual
    hitch = found["hitchhiker"]
    assert hitch.partner == "anchor" and hitch.together == 36 and hitch.retrievals == 36
    assert hitch.share == pytest.approx(36 / 40) and hitch.score == pytest.approx(0.9 * 0.2)
    assert hitch.confounded and hitch.independent == 0
    anchor = found["anchor"]
    assert anchor.score == pytest.approx(-0.18) and not anchor.confounded and anchor.independent == 4


def test_equal_worth_and_small_gaps_are_not_flagged() -> None:
    co = CoRetrieval()
    for _ in range(30):
        co.update(["a", "b"])
    assert not any(c.confounded for c in confounds(co, {"a": 0.5, "b": 0.5}))
    assert not any(c.confounded for c in confounds(co, {"a": 0.51, "b": 0.5}, margin=0.02))
    assert [c.memory_id for c in confounds(co, {"a": 0.51, "b": 0.5}, margin=0.0) if c.confounded] == ["b"]
    assert confounds(co, {"a": 0.9, "b": 0.1}, min_episodes=31) == []


def test_confounds_refuse_missing_worth_and_bad_settings() -> None:
    co = CoRetrieval()
    for _ in range(30):
        co.update(["a", "b"])
    with pytest.raises(ValidationError, match="adjusted"):
        confounds(co, {"a": 0.5})
    with pytest.raises(ValidationError, match="margin"):
        confounds(co, {"a": 0.5, "b": 0.5}, margin=-0.1)
    with pytest.raises(ValidationError, match="min_share"):
        confounds(co, {"a": 0.5, "b": 0.5}, min_share=2)


# -- AblationPlanner ---------------------------------------------------------------------


def play(planner: AblationPlanner, episodes: int, seed: int = 0) -> list:
    rng = np.random.default_rng(seed)
    plans = []
    for _ in range(episodes):
        others = (2 + rng.choice(30, size=3, replace=False)).tolist()
        plans.append(planner.plan([0, 1, *others]))
    return plans


@pytest.mark.parametrize("budget", [0.02, 0.1, 0.5, 1.0])
def test_budget_is_never_exceeded(budget: float) -> None:
    planner = AblationPlanner(budget, min_episodes=5, seed=1)
    rng = np.random.default_rng(2)
    for _ in range(1500):
        others = (2 + rng.choice(30, size=3, replace=False)).tolist()
        planner.plan([0, 1, *others])
        assert planner.spent(0, 1) <= budget * planner.together(0, 1)
    assert planner.spent(0, 1) >= 0.6 * budget * 1500  # and most of it is used
    assert len(planner.log) == planner.spent(0, 1)  # only the habitual pair is ever ablated


def test_both_members_are_dropped_in_turn() -> None:
    planner = AblationPlanner(0.2, min_episodes=5, seed=3)
    play(planner, 2000)
    dropped = [a.dropped for a in planner.log]
    assert abs(dropped.count(0) - dropped.count(1)) <= 1
    assert all({a.dropped, a.partner} == {0, 1} for a in planner.log)
    assert all(a.position == a.dropped for a in planner.log)  # the pair sits in slots 0 and 1


def test_nothing_is_dropped_before_a_pair_is_habitual() -> None:
    planner = AblationPlanner(1.0, min_episodes=20, seed=4)
    plans = play(planner, 19)
    assert all(p is None for p in plans)
    # Memory 0 is in every set, but no partner comes with it in half its episodes.
    spread = AblationPlanner(1.0, min_episodes=3, seed=4)
    rng = np.random.default_rng(5)
    assert all(spread.plan([0, int(rng.integers(1, 50)), int(rng.integers(50, 100))]) is None for _ in range(300))
    assert spread.plan(["only"]) is None


def test_seeded_plans_repeat_and_seeds_differ() -> None:
    logs = [
        [(a.dropped, a.position) for a in play(AblationPlanner(0.3, min_episodes=5, seed=s), 500) if a]
        for s in (7, 7, 8)
    ]
    assert logs[0] == logs[1] and logs[0] != logs[2]


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"budget": 0}, "budget"),
        ({"budget": 1.5}, "budget"),
        ({"budget": True}, "budget"),
        ({"min_share": 0}, "min_share"),
        ({"min_episodes": 0}, "min_episodes"),
        ({"min_episodes": 2.5}, "min_episodes"),
    ],
)
def test_planner_refuses_bad_settings(kwargs, field) -> None:
    with pytest.raises(ValidationError) as err:
        AblationPlanner(**kwargs)
    assert err.value.field == field


def test_planner_refuses_bad_sets_without_counting_them() -> None:
    planner = AblationPlanner()
    planner.plan(["a", "b"])
    with pytest.raises(ValidationError):
        planner.plan(["a", "a"])
    assert planner.together("a", "b") == 1
    with pytest.raises(UnknownMemoryError):
        planner.spent("a", "zzz")


# -- ranking.drop and the store ----------------------------------------------------------


def test_drop_gives_the_slot_to_the_next_candidate() -> None:
    scores = np.array([0.9, 0.8, 0.5, 0.1])
    sel = select(scores, np.zeros(4, dtype=bool), 2, 0.0, np.random.default_rng(0))
    out = drop(sel, 1, scores, np.zeros(4, dtype=bool), 0.0)
    assert out.picked.tolist() == [0, 2] and out.propensity.tolist() == [1.0, 0.0]
    full = select(scores, np.zeros(4, dtype=bool), 4, 0.0, np.random.default_rng(0))
    assert drop(full, 0, scores, np.zeros(4, dtype=bool), 0.0).picked.tolist() == [1, 2, 3]
    with pytest.raises(ValidationError, match="position"):
        drop(sel, 2, scores, np.zeros(4, dtype=bool), 0.0)


def test_store_recall_drops_a_habitual_member_and_logs_it() -> None:
    planner = AblationPlanner(0.5, min_episodes=3, seed=0)
    store = MemoryStore.open("memory://", encoder=HashingEncoder(), exploration=0.0, seed=0, ablation=planner)
    store.add("reverse a python list with reverse()", id="specialist")
    store.add("python lists have append and pop", id="hitchhiker")
    store.add("water boils at 100 degrees", id="other")
    ablated = []
    for _ in range(60):
        recall = store.recall("reverse a python list", k=2)
        returned = [r.memory.id for r in recall]
        assert [item.memory_id for item in recall.episode.items] == returned  # the log holds what was returned
        store.record(recall.episode, "specialist" in returned)
        if "ablation" in recall.diagnostics:
            info = recall.diagnostics["ablation"]
            assert info["dropped"] not in returned and info["partner"] in returned
            assert info["stand_in"] == "other" and "other" in returned
            ablated.append(info["dropped"])
    assert ablated and set(ablated) == {"specialist", "hitchhiker"}
    assert len(ablated) == len(planner.log) <= 0.5 * 60
    assert planner.spent(("default", "specialist"), ("default", "hitchhiker")) == len(ablated)
    assert store.replay().consistent  # counters still rebuild from the log
    stats = store.episode_stats()  # adjusted worth reads what recall returned, ablations included
    assert stats.episodes == 60
    assert dict(zip(stats.ids(), stats.totals().n.tolist(), strict=True)) == {
        m.id: m.counts.n for m in store.list() if m.counts.n
    }
    worth = RegressionWorth().worth(stats)
    assert worth["specialist"] > worth["hitchhiker"]
    flagged = [c.memory_id for c in confounds(stats.pairs, worth, min_episodes=5) if c.confounded]
    assert flagged == ["hitchhiker"]
    store.close()


def test_store_refuses_a_planner_that_is_not_one() -> None:
    with pytest.raises(ValidationError, match="ablation"):
        MemoryStore.open("memory://", encoder=HashingEncoder(), ablation="yes")  # type: ignore[arg-type]


def test_alarm_splitter_drops_suspects_only_and_takes_turns() -> None:
    from memworth.signals.coretrieval import AlarmSplitter

    splitter = AlarmSplitter(share=1.0, suspect=6.0, seed=0)
    splitter.watch({"a": 12.0, "b": 11.0, "c": 7.0, "fine": 1.0})
    dropped = [splitter.plan(["fine", "a", "b", "c"]) for _ in range(30)]
    assert all(p is not None and p.dropped in {"a", "b", "c"} and p.partner in {"a", "b", "c"} for p in dropped)
    assert all(p is not None and p.dropped != p.partner for p in dropped)
    assert [splitter.dropped(k) for k in "abc"] == [10, 10, 10]  # the least dropped goes next
    assert splitter.plan(["fine", "a"]) is None  # one suspect: nothing to tell apart
    splitter.watch({"a": 0.0, "b": 0.0, "c": 0.0})  # the alarms went back down
    assert splitter.plan(["a", "b", "c"]) is None
    assert splitter.plan(["x", "y"]) is None  # never watched: no suspects


def test_alarm_splitter_share_and_bad_input() -> None:
    from memworth.signals.coretrieval import AlarmSplitter

    splitter = AlarmSplitter(share=0.25, suspect=6.0, limit=10_000, seed=1)
    splitter.watch({"a": 9.0, "b": 9.0})
    drops = sum(splitter.plan(["a", "b"]) is not None for _ in range(4000))
    assert 900 <= drops <= 1100  # about a quarter
    with pytest.raises(ValidationError, match="share"):
        AlarmSplitter(share=0.0)
    with pytest.raises(ValidationError, match="suspect"):
        AlarmSplitter(suspect=-1.0)
    with pytest.raises(ValidationError, match="limit"):
        AlarmSplitter(limit=0)
    with pytest.raises(ValidationError, match="statistics"):
        splitter.watch({"a": 10**400})
    with pytest.raises(ValidationError, match="statistics"):
        splitter.watch([("a", 9.0)])  # type: ignore[arg-type]
    sure = AlarmSplitter(share=1.0, seed=0)
    sure.watch({"a": 9.0, "b": 9.0})
    with pytest.raises(ValidationError, match="statistics"):
        sure.watch({"b": 1.0, "a": float("nan")})
    assert sure.plan(["a", "b"]) is not None  # nothing changed: "b" kept 9.0


def test_alarm_splitter_stops_at_its_limit() -> None:
    from memworth.signals.coretrieval import AlarmSplitter

    splitter = AlarmSplitter(share=1.0, limit=3, seed=0)
    splitter.watch({"a": 20.0, "b": 20.0})
    plans = [splitter.plan(["a", "b"]) for _ in range(10)]
    assert sum(p is not None for p in plans) == 6 and splitter.dropped("a") == splitter.dropped("b") == 3
    assert splitter.log == [p for p in plans if p is not None]


def test_the_store_refuses_a_planner_of_another_kind() -> None:
    with pytest.raises(ValidationError, match="ablation"):
        MemoryStore.open("memory://", encoder=HashingEncoder(), ablation=object())  # type: ignore[arg-type]


def test_the_store_returns_the_set_without_the_dropped_suspect() -> None:
    from memworth.signals.coretrieval import AlarmSplitter

    splitter = AlarmSplitter(share=1.0, suspect=6.0, seed=0)
    store = MemoryStore.open("memory://", encoder=HashingEncoder(), exploration=0.0, seed=0, ablation=splitter)
    store.add_many([{"id": f"m{i}", "text": f"python list note {i}"} for i in range(4)])
    first = store.recall("python list note", k=2)
    splitter.watch({("default", item.memory_id): 10.0 for item in first.episode.items})
    second = store.recall("python list note", k=2)
    gone = second.diagnostics["ablation"]["dropped"]
    assert gone in {item.memory_id for item in first.episode.items}
    assert gone not in {item.memory_id for item in second.episode.items}
    assert len(second.episode.items) == 2  # the next candidate took the slot
    store.close()
