"""Credit: how one episode's unit of evidence splits among the retrieved memories."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from memworth import ValidationError, normalise, normalise_rows, uniform

scores = st.lists(st.floats(min_value=0.0, max_value=1e6), min_size=1, max_size=12).filter(lambda w: sum(w) > 0)


@pytest.mark.parametrize("k", [1, 2, 3, 5, 7, 100])
def test_uniform_is_one_over_k_and_sums_to_one(k: int) -> None:
    w = uniform(k)
    assert w.shape == (k,)
    assert np.all(w == 1.0 / k)
    assert w.sum() == pytest.approx(1.0, abs=1e-12)


def test_uniform_accepts_numpy_integers() -> None:
    np.testing.assert_array_equal(uniform(np.int64(2)), [0.5, 0.5])


@pytest.mark.parametrize("k", [0, -1, True, 2.0, "3", None])
def test_uniform_refuses_a_bad_k(k: object) -> None:
    with pytest.raises(ValidationError) as info:
        uniform(k)  # type: ignore[arg-type]
    assert info.value.field == "ids"


@given(scores)
def test_normalise_sums_to_one_and_is_proportional(w: list[float]) -> None:
    out = normalise(w)
    assert out.sum() == pytest.approx(1.0, abs=1e-12)
    assert np.all(out >= 0)
    np.testing.assert_allclose(out * sum(w), w, rtol=1e-9, atol=1e-300)


@given(scores)
def test_normalise_keeps_order(w: list[float]) -> None:
    out = normalise(w)
    for i in range(len(w)):
        for j in range(len(w)):
            if w[i] > w[j]:
                assert out[i] >= out[j]
            if w[i] == w[j]:
                assert out[i] == out[j]


@given(scores, st.floats(min_value=0.0, max_value=1.0))
def test_floor_is_respected_sum_is_one_and_order_is_kept(w: list[float], frac: float) -> None:
    k = len(w)
    w_min = frac / k  # every admissible floor: 0 <= w_min <= 1/k
    out = normalise(w, w_min=w_min)
    assert out.shape == (k,)
    assert out.sum() == pytest.approx(1.0, abs=1e-9)
    assert np.all(out >= w_min - 1e-12)
    for i in range(k):
        for j in range(k):
            if w[i] > w[j]:
                assert out[i] >= out[j] - 1e-12


@given(scores, st.floats(min_value=0.0, max_value=1.0))
def test_floor_scales_the_unclamped_weights_by_one_common_factor(w: list[float], frac: float) -> None:
    k = len(w)
    w_min = frac / k
    out = normalise(w, w_min=w_min)
    base = np.asarray(w) / sum(w)
    free = out > w_min + 1e-9
    if free.sum() >= 2:
        ratios = out[free] / base[free]
        np.testing.assert_allclose(ratios, ratios[0], rtol=1e-9)
        assert ratios[0] <= 1 + 1e-12  # mass is only ever taken from the free weights


@given(scores, st.floats(min_value=0.0, max_value=1.0))
def test_floor_leaves_weights_already_above_it_alone(w: list[float], frac: float) -> None:
    base = np.asarray(w) / sum(w)
    w_min = float(base.min()) * frac
    assume(w_min * len(w) <= 1)
    np.testing.assert_allclose(normalise(w, w_min=w_min), base, rtol=1e-12, atol=1e-300)


def test_floor_example_from_the_paper_assumption() -> None:
    np.testing.assert_allclose(normalise([0.98, 0.01, 0.01], w_min=0.05), [0.9, 0.05, 0.05], rtol=1e-12)
    np.testing.assert_allclose(normalise([1.0, 0.0, 0.0], w_min=0.2), [0.6, 0.2, 0.2], rtol=1e-12)
    # the largest admissible floor makes the weights uniform
    np.testing.assert_allclose(normalise([5.0, 1.0, 0.0, 0.0], w_min=0.25), [0.25] * 4, rtol=1e-12)


@given(
    st.lists(
        st.lists(st.floats(0.0, 1e3), min_size=3, max_size=3).filter(lambda r: sum(r) > 0), min_size=1, max_size=8
    ),
    st.floats(0.0, 1 / 3),
)
def test_normalise_rows_is_normalise_on_every_row(rows: list[list[float]], w_min: float) -> None:
    out = normalise_rows(np.array(rows), w_min=w_min)
    assert out.shape == (len(rows), 3)
    for row, got in zip(rows, out, strict=True):
        np.testing.assert_allclose(got, normalise(row, w_min=w_min), rtol=1e-12, atol=1e-15)


BAD_WEIGHTS = [
    pytest.param([1.0, -1.0], "weights", id="negative"),
    pytest.param([1.0, math.nan], "weights", id="nan"),
    pytest.param([math.inf, 1.0], "weights", id="inf"),
    pytest.param([-math.inf, 1.0], "weights", id="-inf"),
    pytest.param([0.0, 0.0], "weights", id="all-zero"),
    pytest.param([], "weights", id="empty"),
    pytest.param([[1.0, 2.0]], "weights", id="2-D"),
    pytest.param(1.0, "weights", id="scalar"),
]


@pytest.mark.parametrize(("weights", "field"), BAD_WEIGHTS)
def test_normalise_refuses_bad_weights(weights: object, field: str) -> None:
    with pytest.raises(ValidationError) as info:
        normalise(weights)  # type: ignore[arg-type]
    assert info.value.field == field
    assert str(info.value).startswith(f"{field}: ")


def test_normalise_names_a_custom_field() -> None:
    with pytest.raises(ValidationError) as info:
        normalise([-1.0], field="scores")
    assert info.value.field == "scores"


@pytest.mark.parametrize(
    ("w_min", "k"),
    [(0.5, 3), (0.34, 3), (1.01, 1), (-0.1, 2), (math.nan, 2), (math.inf, 2), (True, 2), ("0.1", 2)],
)
def test_normalise_refuses_a_bad_floor(w_min: object, k: int) -> None:
    with pytest.raises(ValidationError) as info:
        normalise([1.0] * k, w_min=w_min)  # type: ignore[arg-type]
    assert info.value.field == "w_min"


@pytest.mark.parametrize(
    "weights",
    [np.array([1.0, 2.0]), np.zeros((2, 0)), np.array([[1.0, -2.0]]), np.array([[1.0, 1.0], [0.0, 0.0]])],
)
def test_normalise_rows_refuses_bad_rows(weights: np.ndarray) -> None:
    with pytest.raises(ValidationError) as info:
        normalise_rows(weights)
    assert info.value.field == "weights"


def test_normalise_rows_names_the_episode_and_slot() -> None:
    with pytest.raises(ValidationError, match=r"episode 1, slot 0"):
        normalise_rows(np.array([[1.0, 1.0], [-1.0, 1.0]]))
    with pytest.raises(ValidationError, match=r"\(episode 1\)"):
        normalise_rows(np.array([[1.0, 1.0], [0.0, 0.0]]))


@pytest.mark.parametrize(
    ("weights", "message"),
    [
        ([1.0, -1.0], "weights: must be >= 0, got -1.0 at position 1"),
        ([1.0, math.nan], "weights: must be finite, got nan at position 1"),
        ([math.inf, 1.0], "weights: must be finite, got inf at position 0"),
    ],
)
def test_error_message_shows_the_plain_number(weights: list[float], message: str) -> None:
    # The documented message (see normalise's docstring) shows the offending number as a
    # caller wrote it, not as a numpy scalar repr such as ``np.float64(-1.0)``.
    with pytest.raises(ValidationError) as info:
        normalise(weights)
    assert str(info.value) == message
