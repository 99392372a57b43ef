"""Confidence sequences: the mixture against its definition, coverage over all time, deprecation by it."""

from __future__ import annotations

import math

import numpy as np
import pytest

from memworth import Counts, CountsTable, ValidationError
from memworth.signals.confidence_sequences import BetaBinomialCS, SequentialDeprecation


@pytest.mark.parametrize(("a", "b"), [(1.0, 1.0), (0.5, 2.0)])
def test_the_mixture_is_the_predictive_probability_over_the_likelihood(a: float, b: float) -> None:
    """M_t(p) = prod of the Beta-Bernoulli predictive probabilities / p^S (1-p)^F, built step by step."""
    rng = np.random.default_rng(0)
    y = rng.random(60) < 0.3
    s = f = 0
    log_predictive = 0.0
    for ok in y:
        log_predictive += math.log(((a + s) if ok else (b + f)) / (a + b + s + f))
        s, f = s + ok, f + (not ok)
    cs = BetaBinomialCS(prior_success=a, prior_failure=b)
    for p in (0.1, 0.3, 0.55, 0.9):
        expected = log_predictive - s * math.log(p) - f * math.log(1 - p)
        assert cs.log_martingale(Counts(float(s), float(f), 60), p) == pytest.approx(expected, rel=1e-12)


def test_the_interval_ends_sit_exactly_at_the_level() -> None:
    cs = BetaBinomialCS(alpha=0.1)
    counts = Counts(success=42.0, failure=58.0, n=100)
    lower, upper = cs.interval(counts)
    assert 0 < lower < 0.42 < upper < 1
    for end in (lower, upper):
        assert cs.log_martingale(counts, end) == pytest.approx(math.log(10), abs=1e-9)
    assert cs.interval(Counts()) == (0.0, 1.0)
    lo, hi = cs.interval(Counts(success=0.0, failure=5.0, n=5))
    assert lo == 0.0 and 0 < hi < 1  # no success yet: the lower end stays at 0


def test_a_table_gives_the_same_intervals_as_single_counts() -> None:
    cs = BetaBinomialCS()
    s, f = np.array([0.0, 3.0, 40.0, 7.5]), np.array([0.0, 9.0, 10.0, 2.5])
    lo, hi = cs.interval(CountsTable(s, f, s + f))
    for i in range(4):
        one = cs.interval(Counts(float(s[i]), float(f[i]), float(s[i] + f[i])))
        assert (lo[i], hi[i]) == pytest.approx(one, abs=1e-12)


def test_below_agrees_with_the_upper_end() -> None:
    cs = BetaBinomialCS()
    s = np.arange(0, 60, dtype=float)
    table = CountsTable(s, 100 - s, np.full(60, 100.0))
    _lo, hi = cs.interval(table)
    np.testing.assert_array_equal(cs.below(table, 0.4), np.asarray(hi) < 0.4)


@pytest.mark.parametrize("p", [0.05, 0.4, 0.8])
def test_coverage_over_all_time_is_at_least_one_minus_alpha(p: float) -> None:
    """2,000 streams of 2,000 observations (seeded): the share whose sequence ever misses p is <= alpha."""
    rng = np.random.default_rng([7, int(p * 100)])
    y = rng.random((2000, 2000)) < p
    s = np.cumsum(y, axis=1, dtype=float)
    f = np.arange(1, 2001, dtype=float)[None, :] - s
    log_m = np.asarray(BetaBinomialCS().log_martingale(CountsTable(s, f, s + f), p))
    missed = (log_m >= math.log(20)).any(axis=1).mean()
    assert missed <= 0.05


def test_fractional_credit_keeps_coverage() -> None:
    """Weights drawn in (0, 1] (fixed before each outcome): weighted hits, still <= alpha over all time."""
    rng = np.random.default_rng(8)
    p = 0.3
    y = rng.random((2000, 2000)) < p
    w = rng.uniform(0.05, 1.0, y.shape)
    s = np.cumsum(w * y, axis=1)
    f = np.cumsum(w * ~y, axis=1)
    log_m = np.asarray(BetaBinomialCS().log_martingale(CountsTable(s, f, s + f), p))
    assert (log_m >= math.log(20)).any(axis=1).mean() <= 0.05


def test_retrievals_unit_rebuilds_unit_weight_counts_under_uniform_credit() -> None:
    credited = Counts(success=7.5, failure=17.5, n=100)  # 30 of 100 retrievals succeeded, credit 1/4
    plain = Counts(success=30.0, failure=70.0, n=100)
    by_retrievals = BetaBinomialCS(evidence="retrievals").interval(credited)
    assert by_retrievals == pytest.approx(BetaBinomialCS().interval(plain), abs=1e-12)
    lo, hi = BetaBinomialCS().interval(credited)  # the weighted unit: a quarter of the evidence, wider
    assert hi - lo > by_retrievals[1] - by_retrievals[0]


def test_sequential_deprecation_needs_evidence_and_acts_on_it() -> None:
    rule = SequentialDeprecation()
    assert rule.check(Counts(success=0.0, failure=3.0, n=3)).action == "keep"  # too little evidence
    assert rule.check(Counts(success=45.0, failure=55.0, n=100)).action == "keep"  # 0.45 >= theta
    d = rule.check(Counts(success=60.0, failure=240.0, n=300))
    assert d.action == "deprecate" and d.numbers["upper"] < 0.4 and d.numbers["worth"] == pytest.approx(0.2)
    assert d.numbers["log_evidence"] >= math.log(20) and "confidence sequence" in d.reason
    s = np.array([0.0, 45.0, 60.0])
    f = np.array([3.0, 55.0, 240.0])
    np.testing.assert_array_equal(rule.check_table(CountsTable(s, f, s + f)), [False, False, True])


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda: BetaBinomialCS(alpha=0).interval(Counts()), "alpha"),
        (lambda: BetaBinomialCS(alpha=1.5).interval(Counts()), "alpha"),
        (lambda: BetaBinomialCS(prior_success=0).interval(Counts()), "prior_success"),
        (lambda: BetaBinomialCS(evidence="votes").interval(Counts()), "evidence"),
        (lambda: BetaBinomialCS().log_martingale(Counts(), 1.0), "p"),
        (lambda: BetaBinomialCS().below(Counts(), 0.0), "threshold"),
        (lambda: SequentialDeprecation(threshold=1.2).check(Counts()), "threshold"),
    ],
)
def test_bad_settings_are_refused(make: object, field: str) -> None:
    with pytest.raises(ValidationError) as err:
        make()  # type: ignore[operator]
    assert err.value.field == field
