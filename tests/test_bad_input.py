"""Bad input is refused with the right error, names its field, and changes nothing."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from memworth import (
    MemworthError,
    OutcomeError,
    Tracker,
    UnknownMemoryError,
    ValidationError,
)


def _loaded() -> Tracker:
    """A tracker with totals, contexts and decayed counts, so any stray write would show."""
    t = Tracker(half_life=20.0, w_min=0.01)
    t.record(["a", "b"], True, context="ctx")
    t.record(["b", 3], False, weights=[2.0, 1.0])
    t.record_batch(np.array([[3, 4], [4, 2**40]]), np.array([True, False]), contexts=["ctx", "other"])
    return t


def _state(t: Tracker) -> dict[str, Any]:
    snap: dict[str, Any] = {"len": len(t), "episodes": t.episodes, "ids": t.ids(), "contexts": t.contexts()}
    for name, table in [("totals", t.table()), ("decayed", t.table(decayed=True))] + [
        (f"ctx:{c}", t.table(context=c)) for c in t.contexts()
    ]:
        snap[name] = [arr.tolist() for arr in table]
    return snap


IDS = np.array([[1, 2], [3, 4]])
OK = np.array([True, False])

RECORD_CASES: list[Any] = [
    # (call, error class, field)
    pytest.param(lambda t: t.record([], True), ValidationError, "ids", id="empty-ids"),
    pytest.param(lambda t: t.record(["a", "b", "a"], True), ValidationError, "ids", id="duplicate-id"),
    pytest.param(lambda t: t.record([1, np.int64(1)], True), ValidationError, "ids", id="duplicate-int-kinds"),
    pytest.param(lambda t: t.record("abc", True), ValidationError, "ids", id="str-as-ids"),
    pytest.param(lambda t: t.record(b"abc", True), ValidationError, "ids", id="bytes-as-ids"),
    pytest.param(lambda t: t.record({"a", "b"}, True), ValidationError, "ids", id="set-as-ids"),
    pytest.param(lambda t: t.record(5, True), ValidationError, "ids", id="int-as-ids"),
    pytest.param(lambda t: t.record([True], True), ValidationError, "ids", id="bool-id"),
    pytest.param(lambda t: t.record([1.0], True), ValidationError, "ids", id="float-id"),
    pytest.param(lambda t: t.record([np.float64(2.0)], True), ValidationError, "ids", id="np-float-id"),
    pytest.param(lambda t: t.record([None], True), ValidationError, "ids", id="none-id"),
    pytest.param(lambda t: t.record([["a"]], True), ValidationError, "ids", id="unhashable-id"),
    pytest.param(lambda t: t.record(["new", 1.5], True), ValidationError, "ids", id="valid-then-float-id"),
    pytest.param(lambda t: t.record(["a"], 2), OutcomeError, "success", id="outcome-2"),
    pytest.param(lambda t: t.record(["a"], 0.5), OutcomeError, "success", id="outcome-0.5"),
    pytest.param(lambda t: t.record(["a"], 1.0), OutcomeError, "success", id="outcome-1.0"),
    pytest.param(lambda t: t.record(["a"], None), OutcomeError, "success", id="outcome-None"),
    pytest.param(lambda t: t.record(["a"], "yes"), OutcomeError, "success", id="outcome-yes"),
    pytest.param(lambda t: t.record(["a"], "Success"), OutcomeError, "success", id="outcome-Success"),
    pytest.param(lambda t: t.record(["new", "a"], True, weights=[1.0]), ValidationError, "weights", id="weights-short"),
    pytest.param(
        lambda t: t.record(["new", "a"], True, weights=[1.0, 1.0, 1.0]), ValidationError, "weights", id="weights-long"
    ),
    pytest.param(
        lambda t: t.record(["new", "a"], True, weights=[[1.0, 1.0]]), ValidationError, "weights", id="weights-2d"
    ),
    pytest.param(
        lambda t: t.record(["new", "a"], True, weights=[1.0, -0.5]), ValidationError, "weights", id="weights-negative"
    ),
    pytest.param(
        lambda t: t.record(["new", "a"], True, weights=[1.0, math.nan]), ValidationError, "weights", id="weights-nan"
    ),
    pytest.param(
        lambda t: t.record(["new", "a"], True, weights=[math.inf, 1.0]), ValidationError, "weights", id="weights-inf"
    ),
    pytest.param(
        lambda t: t.record(["new", "a"], True, weights=[0.0, 0.0]), ValidationError, "weights", id="weights-zero"
    ),
    pytest.param(
        lambda t: t.record(["new", "a"], True, weights=["x", "y"]), ValidationError, "weights", id="weights-strings"
    ),
    pytest.param(
        lambda t: t.record([f"m{i}" for i in range(200)], True), ValidationError, "w_min", id="w_min-times-k-over-1"
    ),
    pytest.param(lambda t: t.record(["new"], True, context=2.5), ValidationError, "context", id="float-context"),
    pytest.param(
        lambda t: t.record(["new"], True, context={"a": 1}), ValidationError, "context", id="unhashable-context"
    ),
]

BATCH_CASES: list[Any] = [
    pytest.param(lambda t: t.record_batch(np.array([1, 2]), OK), ValidationError, "ids", id="batch-1d-ids"),
    pytest.param(
        lambda t: t.record_batch(np.zeros((2, 2, 1), dtype=int), OK), ValidationError, "ids", id="batch-3d-ids"
    ),
    pytest.param(
        lambda t: t.record_batch(np.array([[1.0, 2.0], [3.0, 4.0]]), OK), ValidationError, "ids", id="batch-float-ids"
    ),
    pytest.param(
        lambda t: t.record_batch(np.array([[True, False], [False, True]]), OK),
        ValidationError,
        "ids",
        id="batch-bool-ids",
    ),
    pytest.param(
        lambda t: t.record_batch(np.array([["a", "b"], ["c", "d"]]), OK), ValidationError, "ids", id="batch-str-ids"
    ),
    pytest.param(
        lambda t: t.record_batch(np.zeros((2, 0), dtype=int), OK), ValidationError, "ids", id="batch-empty-rows"
    ),
    pytest.param(
        lambda t: t.record_batch(np.array([[1, 2], [7, 7]]), OK), ValidationError, "ids", id="batch-duplicate-in-row"
    ),
    pytest.param(
        lambda t: t.record_batch(np.array([[2**40, 9], [9, 2**40]]), np.array([True, True, False])),
        OutcomeError,
        "success",
        id="batch-success-too-long",
    ),
    pytest.param(
        lambda t: t.record_batch(IDS, np.array([[True, False]])), OutcomeError, "success", id="batch-success-2d"
    ),
    pytest.param(lambda t: t.record_batch(IDS, np.array([1, 2])), OutcomeError, "success", id="batch-success-2"),
    pytest.param(
        lambda t: t.record_batch(IDS, np.array([0.5, 1.0])), OutcomeError, "success", id="batch-success-float"
    ),
    pytest.param(
        lambda t: t.record_batch(IDS, np.array(["yes", "no"])), OutcomeError, "success", id="batch-success-str"
    ),
    pytest.param(
        lambda t: t.record_batch(IDS, OK, weights=np.ones((2, 3))), ValidationError, "weights", id="batch-weights-shape"
    ),
    pytest.param(
        lambda t: t.record_batch(IDS, OK, weights=np.ones(2)), ValidationError, "weights", id="batch-weights-1d"
    ),
    pytest.param(
        lambda t: t.record_batch(IDS, OK, weights=np.array([[1.0, 1.0], [1.0, -1.0]])),
        ValidationError,
        "weights",
        id="batch-weights-negative",
    ),
    pytest.param(
        lambda t: t.record_batch(IDS, OK, weights=np.array([[1.0, math.nan], [1.0, 1.0]])),
        ValidationError,
        "weights",
        id="batch-weights-nan",
    ),
    pytest.param(
        lambda t: t.record_batch(IDS, OK, weights=np.array([[1.0, 1.0], [0.0, 0.0]])),
        ValidationError,
        "weights",
        id="batch-weights-zero-row",
    ),
    pytest.param(
        lambda t: t.record_batch(IDS, OK, weights=np.array([["a", "b"], ["c", "d"]])),
        ValidationError,
        "weights",
        id="batch-weights-strings",
    ),
    pytest.param(
        lambda t: t.record_batch(np.arange(200).reshape(1, 200), np.array([True])),
        ValidationError,
        "w_min",
        id="batch-w_min-times-k-over-1",
    ),
    pytest.param(
        lambda t: t.record_batch(IDS, OK, contexts=["x"]), ValidationError, "contexts", id="batch-contexts-short"
    ),
    pytest.param(
        lambda t: t.record_batch(IDS, OK, contexts=["x", 1.5]), ValidationError, "contexts", id="batch-contexts-float"
    ),
    pytest.param(
        lambda t: t.record_batch(IDS, OK, contexts=["x", None]), ValidationError, "contexts", id="batch-contexts-none"
    ),
]

READ_CASES: list[Any] = [
    pytest.param(lambda t: t.counts("zzz"), UnknownMemoryError, None, id="counts-unknown"),
    pytest.param(lambda t: t.worth("zzz"), UnknownMemoryError, None, id="worth-unknown"),
    pytest.param(lambda t: t.worth(5), UnknownMemoryError, None, id="worth-unknown-int"),
    pytest.param(lambda t: t.worth(2**41), UnknownMemoryError, None, id="worth-unknown-sparse-int"),
    pytest.param(lambda t: t.values(["a", "zzz"]), UnknownMemoryError, None, id="values-unknown"),
    pytest.param(lambda t: t.values(np.array([3, 99])), UnknownMemoryError, None, id="values-unknown-array"),
    pytest.param(
        lambda t: t.counts("a", context="ctx", decayed=True), ValidationError, "context", id="decayed-context"
    ),
    pytest.param(lambda t: t.worth(1.5), ValidationError, "ids", id="worth-float-id"),
]


@pytest.mark.parametrize(("call", "error", "field"), RECORD_CASES + BATCH_CASES + READ_CASES)
def test_bad_input_is_refused_and_changes_nothing(
    call: Callable[[Tracker], object], error: type[Exception], field: str | None
) -> None:
    t = _loaded()
    before = _state(t)
    with pytest.raises(error) as info:
        call(t)
    err = info.value
    assert isinstance(err, MemworthError)
    if isinstance(err, ValidationError):
        assert isinstance(err, ValueError)
        assert err.field == field
        assert str(err).startswith(f"{field}: ")
        assert err.reason and err.reason in str(err)
    if isinstance(err, UnknownMemoryError):
        assert isinstance(err, KeyError)
        assert "unknown memory id" in str(err)
    assert _state(t) == before
    # the tracker still works afterwards
    t.record(["a"], True)
    assert t.episodes == before["episodes"] + 1


def test_unknown_memory_error_names_the_id() -> None:
    t = _loaded()
    with pytest.raises(UnknownMemoryError) as info:
        t.counts("nope")
    assert info.value.memory_id == "nope"
    assert str(info.value) == "unknown memory id: 'nope'"


def test_outcome_error_is_a_validation_error() -> None:
    t = _loaded()
    with pytest.raises(ValidationError):
        t.record(["a"], "maybe")
    with pytest.raises(ValueError):
        t.record(["a"], "maybe")


def test_batch_outcome_message_names_the_entry() -> None:
    t = Tracker()
    with pytest.raises(OutcomeError, match=r"^success: entry 1 is 2; "):
        t.record_batch(IDS, np.array([1, 2]))


def test_duplicate_message_names_the_id_and_episode() -> None:
    t = Tracker()
    with pytest.raises(ValidationError, match="'a' appears twice"):
        t.record(["a", "b", "a"], True)
    with pytest.raises(ValidationError, match="episode 1 retrieves the same id twice"):
        t.record_batch(np.array([[1, 2], [7, 7]]), OK)


@pytest.mark.parametrize("call", ["worth-str", "values-int", "classify-none"])
def test_wrong_kind_of_setting_object_is_refused(call: str) -> None:
    t = Tracker()
    t.record(["a"], success=True)
    with pytest.raises(ValidationError) as info:
        if call == "worth-str":
            t.worth("a", estimator="raw")  # type: ignore[arg-type]
        elif call == "values-int":
            t.values(["a"], estimator=3)  # type: ignore[arg-type]
        else:
            t.classify("a", None)  # type: ignore[arg-type]
    assert info.value.field in ("estimator", "taxonomy")
