"""Estimators: ranges, interval containment and shrinkage, and oracles from scipy."""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pytest
import scipy.stats
from hypothesis import given
from hypothesis import strategies as st
from scipy.special import ndtri

from memworth import (
    BetaBound,
    BetaMean,
    ContextPooled,
    Counts,
    CountsTable,
    Decayed,
    RawWorth,
    ValidationError,
    WilsonBound,
)

# Any non-negative finite count (tiny, subnormal and large values included).
any_count = st.floats(min_value=0.0, max_value=1e12, allow_nan=False, allow_infinity=False)
# Counts in a range where floating-point rounding is not the subject of the test.
fair_count = st.one_of(st.just(0.0), st.floats(min_value=1e-3, max_value=1e7))
any_counts = st.builds(Counts, any_count, any_count, any_count)
fair_counts = st.builds(Counts, fair_count, fair_count, fair_count)
prior = st.floats(min_value=0.05, max_value=50.0)
level = st.floats(min_value=0.5, max_value=0.999)

ESTIMATORS = [
    pytest.param(RawWorth(), id="RawWorth"),
    pytest.param(BetaMean(), id="BetaMean"),
    pytest.param(BetaMean(prior_success=0.5, prior_failure=3.0), id="BetaMean-prior"),
    pytest.param(BetaBound("lower"), id="BetaBound-lower"),
    pytest.param(BetaBound("upper"), id="BetaBound-upper"),
    pytest.param(BetaBound("lower", evidence="retrievals"), id="BetaBound-lower-retrievals"),
    pytest.param(BetaBound("upper", level=0.5, evidence="retrievals"), id="BetaBound-upper-retrievals"),
    pytest.param(WilsonBound("lower"), id="WilsonBound-lower"),
    pytest.param(WilsonBound("upper", evidence="retrievals"), id="WilsonBound-upper-retrievals"),
    pytest.param(Decayed(RawWorth(), half_life=10), id="Decayed"),
    pytest.param(ContextPooled(), id="ContextPooled"),
]

POOL_BASES = [
    pytest.param(RawWorth(), id="RawWorth"),
    pytest.param(BetaMean(), id="BetaMean"),
    pytest.param(BetaBound("lower"), id="BetaBound-lower"),
    pytest.param(WilsonBound("upper", evidence="retrievals"), id="WilsonBound-upper-retrievals"),
]


# -- documented values ----------------------------------------------------------------


def test_documented_values() -> None:
    assert RawWorth().value(Counts(8.0, 2.0, 10)) == 0.8
    assert RawWorth().value(Counts()) == 0.5
    assert RawWorth(no_evidence=0.0).value(Counts(0.0, 0.0, 5)) == 0.0
    assert BetaMean().value(Counts(8.0, 2.0, 10)) == 0.75
    assert BetaMean(prior_success=2, prior_failure=8).value(Counts()) == pytest.approx(0.2)
    assert BetaBound("lower").value(Counts(80.0, 20.0, 100)) == pytest.approx(0.711, abs=5e-4)
    assert WilsonBound().value(Counts(1.0, 0.0, 1)) == pytest.approx(0.207, abs=5e-4)
    assert WilsonBound().value(Counts(10.0, 1.0, 11)) == pytest.approx(0.623, abs=5e-4)


def test_no_evidence() -> None:
    assert WilsonBound().interval(Counts()) == (0.0, 1.0)
    assert WilsonBound(evidence="retrievals").interval(Counts(3.0, 1.0, 0.0)) == (0.0, 1.0)
    lo, hi = BetaBound().interval(Counts())  # Beta(1, 1) is uniform: quantiles are the tails
    assert lo == pytest.approx(0.025, abs=1e-12)
    assert hi == pytest.approx(0.975, abs=1e-12)
    assert BetaMean().value(Counts()) == 0.5


@given(any_counts, prior, prior)
def test_beta_mean_formula(c: Counts, a: float, b: float) -> None:
    got = BetaMean(prior_success=a, prior_failure=b).value(c)
    assert got == pytest.approx((a + c.success) / (a + b + c.success + c.failure), rel=1e-12)


@given(any_counts)
def test_raw_worth_formula(c: Counts) -> None:
    v = c.success + c.failure
    expected = 0.5 if v == 0 else c.success / v
    assert RawWorth().value(c) == pytest.approx(expected, rel=1e-12)


# -- range ----------------------------------------------------------------------------


@pytest.mark.parametrize("estimator", ESTIMATORS)
@given(c=any_counts)
def test_values_lie_in_unit_interval(estimator: object, c: Counts) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        value = estimator.value(c)  # type: ignore[attr-defined]
    assert isinstance(value, float)
    assert 0.0 <= value <= 1.0


@pytest.mark.parametrize("base", POOL_BASES)
@given(context=any_counts, glob=any_counts, strength=st.floats(0.0, 1e4))
def test_context_pooled_values_lie_in_unit_interval(
    base: object, context: Counts, glob: Counts, strength: float
) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        value = ContextPooled(base=base, strength=strength).value_in_context(context, glob)  # type: ignore[arg-type]
    assert 0.0 <= value <= 1.0


@pytest.mark.parametrize("tiny", [1e-160, 1e-200, 2.0**-1074])
def test_wilson_bound_on_tiny_evidence_is_a_number_without_warnings(tiny: float) -> None:
    # Decayed counts shrink geometrically: a memory last retrieved 600 half-lives ago has
    # counts near 1e-181 and, later, subnormal ones. Its bounds must still be in [0, 1].
    c = Counts(tiny, 0.0, tiny)
    for evidence in ("weighted", "retrievals"):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            lo, hi = WilsonBound(evidence=evidence).interval(c)
        assert 0.0 <= lo <= hi <= 1.0


# -- containment ------------------------------------------------------------------------


@given(fair_counts, st.floats(0.1, 5.0))
def test_wilson_interval_contains_the_ratio(c: Counts, z: float) -> None:
    for evidence in ("weighted", "retrievals"):
        lo, hi = WilsonBound(z=z, evidence=evidence).interval(c)
        p = RawWorth().value(c)
        assert 0.0 <= lo <= p + 1e-12
        assert p - 1e-12 <= hi <= 1.0


@given(fair_counts, level)
def test_beta_interval_contains_the_posterior_mean(c: Counts, lvl: float) -> None:
    lo, hi = BetaBound(level=lvl).interval(c)
    mean = BetaMean().value(c)
    assert lo <= mean + 1e-12
    assert mean - 1e-12 <= hi


@given(fair_counts, level)
def test_beta_retrievals_interval_contains_its_posterior_mean(c: Counts, lvl: float) -> None:
    p = RawWorth().value(c)
    mean = (1 + p * c.n) / (2 + c.n)
    lo, hi = BetaBound(level=lvl, evidence="retrievals").interval(c)
    assert lo <= mean + 1e-12
    assert mean - 1e-12 <= hi


@given(fair_counts, st.floats(0.5, 0.999), st.floats(0.5, 0.999))
def test_wider_level_gives_wider_beta_interval(c: Counts, l1: float, l2: float) -> None:
    small, big = sorted((l1, l2))
    lo_s, hi_s = BetaBound(level=small).interval(c)
    lo_b, hi_b = BetaBound(level=big).interval(c)
    assert lo_b <= lo_s + 1e-12
    assert hi_s <= hi_b + 1e-12


@given(fair_counts)
def test_value_is_the_chosen_end_of_the_interval(c: Counts) -> None:
    for cls in (BetaBound, WilsonBound):
        lo, hi = cls().interval(c)
        assert cls("lower").value(c) == lo
        assert cls("upper").value(c) == hi


# -- more evidence never widens an interval -----------------------------------------------

SHRINKING = [
    pytest.param(BetaBound(), id="BetaBound-weighted"),
    pytest.param(BetaBound(level=0.8), id="BetaBound-0.8"),
    pytest.param(BetaBound(evidence="retrievals"), id="BetaBound-retrievals"),
    pytest.param(WilsonBound(), id="WilsonBound-weighted"),
    pytest.param(WilsonBound(z=3.0), id="WilsonBound-z3"),
    pytest.param(WilsonBound(evidence="retrievals"), id="WilsonBound-retrievals"),
]


@pytest.mark.parametrize("estimator", SHRINKING)
@given(c=fair_counts, scale=st.floats(1.0, 1e3))
def test_more_evidence_at_the_same_ratio_never_widens(estimator: object, c: Counts, scale: float) -> None:
    lo1, hi1 = estimator.interval(c)  # type: ignore[attr-defined]
    lo2, hi2 = estimator.interval(c.scaled(scale))  # type: ignore[attr-defined]
    assert hi2 - lo2 <= (hi1 - lo1) + 1e-9


# -- oracles ----------------------------------------------------------------------------


@given(s=st.floats(0, 1e4), f=st.floats(0, 1e4), a=prior, b=prior, lvl=level)
def test_beta_bound_equals_scipy_beta_quantiles(s: float, f: float, a: float, b: float, lvl: float) -> None:
    c = Counts(s, f, s + f)
    lo, hi = BetaBound(level=lvl, prior_success=a, prior_failure=b).interval(c)
    tail = (1 - lvl) / 2
    assert lo == pytest.approx(scipy.stats.beta.ppf(tail, a + s, b + f), rel=1e-9, abs=1e-12)
    assert hi == pytest.approx(scipy.stats.beta.ppf(1 - tail, a + s, b + f), rel=1e-9, abs=1e-12)
    assert hi == pytest.approx(scipy.stats.beta.isf(tail, a + s, b + f), rel=1e-9, abs=1e-12)


@given(s=st.floats(0, 1e3), f=st.floats(0, 1e3), n=st.floats(0, 1e3), lvl=level)
def test_beta_bound_on_retrievals_equals_scipy(s: float, f: float, n: float, lvl: float) -> None:
    c = Counts(s, f, n)
    p = 0.5 if s + f == 0 else s / (s + f)
    lo, hi = BetaBound(level=lvl, evidence="retrievals").interval(c)
    tail = (1 - lvl) / 2
    assert lo == pytest.approx(scipy.stats.beta.ppf(tail, 1 + p * n, 1 + (1 - p) * n), rel=1e-9, abs=1e-12)
    assert hi == pytest.approx(scipy.stats.beta.ppf(1 - tail, 1 + p * n, 1 + (1 - p) * n), rel=1e-9, abs=1e-12)


def _wilson_reference(p: float, n: float, z: float) -> tuple[float, float]:
    """Note 003's formula, written out with the math module."""
    if n == 0:
        return 0.0, 1.0
    centre = p + z * z / (2 * n)
    spread = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    denom = 1 + z * z / n
    return max(0.0, (centre - spread) / denom), min(1.0, (centre + spread) / denom)


@given(s=fair_count, f=fair_count, n=fair_count, z=st.floats(0.1, 4.0))
def test_wilson_equals_hand_reference(s: float, f: float, n: float, z: float) -> None:
    p = 0.5 if s + f == 0 else s / (s + f)
    c = Counts(s, f, n)
    for evidence, size in (("weighted", s + f), ("retrievals", n)):
        lo, hi = WilsonBound(z=z, evidence=evidence).interval(c)
        ref_lo, ref_hi = _wilson_reference(p, size, z)
        assert lo == pytest.approx(ref_lo, rel=1e-9, abs=1e-12)
        assert hi == pytest.approx(ref_hi, rel=1e-9, abs=1e-12)


Z95 = float(ndtri(0.975))


@given(st.integers(1, 500).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
def test_wilson_weighted_agrees_with_scipy_binomtest(kn: tuple[int, int]) -> None:
    k, n = kn
    ci = scipy.stats.binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    lo, hi = WilsonBound(z=Z95).interval(Counts(float(k), float(n - k), float(n)))
    assert lo == pytest.approx(ci.low, abs=1e-12)
    assert hi == pytest.approx(ci.high, abs=1e-12)


@given(
    st.integers(1, 500).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))),
    st.sampled_from([0.2, 0.25, 1 / 3, 0.5, 1.0]),
)
def test_wilson_retrievals_agrees_with_scipy_binomtest(kn: tuple[int, int], weight: float) -> None:
    # n retrievals, each credited ``weight``: the ratio is k/n, the evidence n retrievals.
    k, n = kn
    ci = scipy.stats.binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    c = Counts(k * weight, (n - k) * weight, float(n))
    lo, hi = WilsonBound(z=Z95, evidence="retrievals").interval(c)
    assert lo == pytest.approx(ci.low, abs=1e-12)
    assert hi == pytest.approx(ci.high, abs=1e-12)


# -- vectorised = elementwise --------------------------------------------------------------


@pytest.mark.parametrize("estimator", ESTIMATORS)
@given(rows=st.lists(st.tuples(fair_count, fair_count, fair_count), min_size=1, max_size=20))
def test_table_equals_elementwise(estimator: object, rows: list[tuple[float, float, float]]) -> None:
    s, f, n = (np.array(col) for col in zip(*rows, strict=True))
    vec = estimator.value(CountsTable(s, f, n))  # type: ignore[attr-defined]
    assert isinstance(vec, np.ndarray)
    assert vec.shape == (len(rows),)
    one = [estimator.value(Counts(*r)) for r in rows]  # type: ignore[attr-defined]
    np.testing.assert_allclose(vec, one, rtol=1e-12, atol=1e-15)


@given(rows=st.lists(st.tuples(fair_count, fair_count, fair_count), min_size=1, max_size=20), glob=fair_counts)
def test_context_pooled_table_equals_elementwise(rows: list[tuple[float, float, float]], glob: Counts) -> None:
    s, f, n = (np.array(col) for col in zip(*rows, strict=True))
    pooled = ContextPooled(base=BetaMean(), strength=7.0)
    g = CountsTable(np.full(len(rows), glob.success), np.full(len(rows), glob.failure), np.full(len(rows), glob.n))
    vec = pooled.value_in_context(CountsTable(s, f, n), g)
    one = [pooled.value_in_context(Counts(*r), glob) for r in rows]
    np.testing.assert_allclose(vec, one, rtol=1e-12)


# -- ContextPooled and Decayed ---------------------------------------------------------------


def test_context_pooled_documented_values() -> None:
    pooled = ContextPooled(strength=10)
    glob = Counts(30.0, 10.0, 40)
    assert pooled.value_in_context(Counts(), glob) == 0.75
    assert pooled.value_in_context(Counts(0.0, 10.0, 10), glob) == pytest.approx(0.375)


@given(context=fair_counts, glob=fair_counts, strength=st.floats(0.0, 100.0))
def test_context_pooled_is_shrinkage_toward_the_global_ratio(context: Counts, glob: Counts, strength: float) -> None:
    g = RawWorth().value(glob)
    v = context.success + context.failure + strength
    expected = 0.5 if v == 0 else (context.success + strength * g) / v
    assert ContextPooled(strength=strength).value_in_context(context, glob) == pytest.approx(expected, rel=1e-9)


def test_context_pooled_moves_from_global_to_context_with_evidence() -> None:
    pooled = ContextPooled(strength=5.0)
    glob = Counts(90.0, 10.0, 100)
    values = [pooled.value_in_context(Counts(0.0, float(m), float(m)), glob) for m in (0, 1, 10, 100, 10_000)]
    assert values[0] == pytest.approx(0.9)
    assert all(a > b for a, b in itertools.pairwise(values))
    assert values[-1] < 0.001


def test_context_pooled_without_context_is_its_base() -> None:
    c = Counts(3.0, 1.0, 4.0)
    assert ContextPooled(base=BetaMean()).value(c) == BetaMean().value(c)


def test_decayed_applies_its_base_to_the_counts_given() -> None:
    c = Counts(3.0, 1.0, 4.0)
    assert Decayed(WilsonBound(), half_life=5).value(c) == WilsonBound().value(c)


# -- settings are validated ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("estimator", "field"),
    [
        (RawWorth(no_evidence=1.5), "no_evidence"),
        (RawWorth(no_evidence=math.nan), "no_evidence"),
        (BetaMean(prior_success=0.0), "prior_success"),
        (BetaMean(prior_failure=-1.0), "prior_failure"),
        (BetaBound(side="middle"), "side"),  # type: ignore[arg-type]
        (BetaBound(level=1.0), "level"),
        (BetaBound(level=0.0), "level"),
        (BetaBound(level=True), "level"),  # type: ignore[arg-type]
        (BetaBound(prior_success=math.inf), "prior_success"),
        (BetaBound(evidence="hits"), "evidence"),
        (WilsonBound(side="both"), "side"),  # type: ignore[arg-type]
        (WilsonBound(z=0.0), "z"),
        (WilsonBound(z=-1.96), "z"),
        (WilsonBound(z="1.96"), "z"),  # type: ignore[arg-type]
        (WilsonBound(evidence="retrieval"), "evidence"),
        (Decayed(half_life=0.0), "half_life"),
        (Decayed(half_life=math.inf), "half_life"),
    ],
)
def test_bad_settings_are_refused_when_used(estimator: object, field: str) -> None:
    with pytest.raises(ValidationError) as info:
        estimator.value(Counts(1.0, 1.0, 2.0))  # type: ignore[attr-defined]
    assert info.value.field == field


@pytest.mark.parametrize("strength", [-1.0, math.nan, math.inf])
def test_context_pooled_refuses_a_bad_strength(strength: float) -> None:
    with pytest.raises(ValidationError) as info:
        ContextPooled(strength=strength).value_in_context(Counts(), Counts())
    assert info.value.field == "strength"


@given(st.lists(st.tuples(any_count, any_count, any_count), min_size=1, max_size=20), st.sampled_from([0.5, 1.96, 3.0]))
def test_one_memorys_worth_and_wilson_interval_equal_the_tables_bit_for_bit(
    rows: list[tuple[float, float, float]], z: float
) -> None:
    """Governance reads one memory at a time through a Python-float path; a table goes
    through NumPy. Same formula, same IEEE operations: the same bits."""
    counts = [Counts(s, f, n) for s, f, n in rows]
    table = CountsTable(
        np.array([c.success for c in counts]), np.array([c.failure for c in counts]), np.array([c.n for c in counts])
    )
    raw = RawWorth().value(table)
    for evidence in ("weighted", "retrievals"):
        lo, hi = WilsonBound(z=z, evidence=evidence).interval(table)
        for i, c in enumerate(counts):
            one = WilsonBound(z=z, evidence=evidence).interval(c)
            assert type(one[0]) is float and (one[0], one[1]) == (lo[i], hi[i])
    for i, c in enumerate(counts):
        assert RawWorth().value(c) == raw[i] and type(RawWorth().value(c)) is float
    assert RawWorth(no_evidence=0.25).value(Counts(0.0, 0.0, 3.0)) == 0.25


@given(st.lists(st.tuples(any_count, any_count, any_count), min_size=1, max_size=12))
def test_an_interval_from_the_share_the_caller_has_is_the_same_bit_for_bit(rows: list[tuple[float, ...]]) -> None:
    # worth_of computes the share once and hands it to the interval: no number may move,
    # and no array division may warn (zero evidence included).
    table = CountsTable(*(np.array(col, dtype=float) for col in zip(*rows, strict=True)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        share = RawWorth().value(table)
        for evidence in ("weighted", "retrievals"):
            given_share = WilsonBound(evidence=evidence).interval(table, share=share)
            computed = WilsonBound(evidence=evidence).interval(table)
            assert all(np.array_equal(a, b) for a, b in zip(given_share, computed, strict=True))
    for i, row in enumerate(rows):  # and the array path equals the one-memory path
        c = Counts(*row)
        assert RawWorth().value(c) == share[i]
        assert WilsonBound(evidence="retrievals").interval(c, share=float(share[i])) == tuple(
            float(x[i]) for x in WilsonBound(evidence="retrievals").interval(table)
        )
