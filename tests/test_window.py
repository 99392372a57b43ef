"""The window test's explaining-away (memworth.signals.window_test): whose failures are these?"""

from __future__ import annotations

from memworth.signals.window_test import explainers, fires


def test_a_memory_that_fails_only_beside_a_suspect_is_explained_by_it() -> None:
    helper = [(True, {"helper", "other"})] * 10 + [(False, {"helper", "stale"})] * 20
    stale = [(True, {"stale"})] * 10 + [(False, {"helper", "stale"})] * 20 + [(False, {"stale"})] * 5
    rows = {"helper": helper, "stale": stale}
    found = explainers(rows, lifetime={"helper": 0.8, "stale": 0.8}, suspects={"helper", "stale"}, window=20)
    assert found == {"helper": ("stale",)}  # the stale one fails without the helper too: nothing explains it


def test_two_memories_never_seen_apart_are_not_told_apart() -> None:
    pair = [(True, {"a", "b"})] * 10 + [(False, {"a", "b"})] * 20
    found = explainers({"a": pair, "b": pair}, lifetime={"a": 0.5, "b": 0.5}, suspects={"a", "b"}, window=20)
    assert found == {}


def test_too_few_retrievals_apart_hold_nothing() -> None:
    helper = [(True, {"helper"})] * 2 + [(False, {"helper", "stale"})] * 18
    found = explainers({"helper": helper}, lifetime={"helper": 0.5}, suspects={"stale"}, window=20, min_apart=3)
    assert found == {}
    assert explainers({"helper": helper}, lifetime={"helper": 0.5}, suspects={"stale"}, window=20, min_apart=2) == {
        "helper": ("stale",)
    }


def test_successes_from_before_a_change_do_not_clear_the_memory_that_broke() -> None:
    stale = [(True, {"stale"})] * 40 + [(False, {"stale", "helper"})] * 15 + [(False, {"stale"})] * 5
    helper = [(True, {"helper"})] * 40 + [(False, {"stale", "helper"})] * 15
    rows = {"stale": stale, "helper": helper}
    found = explainers(rows, lifetime={"stale": 0.7, "helper": 0.7}, suspects={"stale", "helper"}, window=20)
    assert found == {"helper": ("stale",)}  # the stale one fails alone: it explains the helper, not the reverse


def test_a_suspect_in_fewer_than_half_of_the_failures_explains_nothing() -> None:
    m = [(True, {"m"})] * 10 + [(False, {"m", "q"})] * 4 + [(False, {"m"})] * 6
    assert explainers({"m": m}, lifetime={"m": 0.9}, suspects={"q"}, window=10) == {}


def test_the_window_test_fires_on_a_fall_below_both_bounds() -> None:
    fell = [(True, set())] * 30 + [(False, set())] * 20
    assert fires(fell, 0.6, window=20, drop=0.25, theta_low=0.4)
    assert not fires(fell[:10], 1.0, window=20, drop=0.25, theta_low=0.4)  # fewer than window retrievals
    mild = [(True, set())] * 30 + [(True, set())] * 10 + [(False, set())] * 10
    assert not fires(mild, 0.75, window=20, drop=0.25, theta_low=0.4)  # 0.5: not below theta_low


def test_two_memories_that_explain_each_other_leave_the_one_that_does_worse_alone_flagged() -> None:
    # both fail without the other now and then; stale never succeeds without friend, friend sometimes does
    stale = [(False, {"stale", "friend"})] * 14 + [(False, {"stale"})] * 6
    friend = [(False, {"stale", "friend"})] * 14 + [(False, {"friend"})] * 3 + [(True, {"friend"})] * 3
    rows = {"stale": stale, "friend": friend}
    found = explainers(rows, lifetime={"stale": 0.8, "friend": 0.8}, suspects={"stale", "friend"}, window=20)
    assert found == {"friend": ("stale",)}
    a = [(False, {"a", "b"})] * 14 + [(False, {"a"})] * 6
    b = [(False, {"a", "b"})] * 14 + [(False, {"b"})] * 6
    same = explainers({"a": a, "b": b}, lifetime={"a": 0.8, "b": 0.8}, suspects={"a", "b"}, window=20)
    assert same == {}  # no difference between them: neither holds the other
