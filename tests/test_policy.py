"""Policy: the paper's value taxonomy, note 003's decision rule, note 004's deprecation test."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from memworth import (
    Classification,
    Counts,
    CountsTable,
    Decision,
    DecisionRule,
    DeprecationRule,
    Taxonomy,
    ValidationError,
    ValueClass,
    WilsonBound,
)

RETRIEVALS = Taxonomy(evidence="retrievals")
WEIGHTED = Taxonomy(evidence="weighted")


def _cls(taxonomy: Taxonomy, counts: Counts, worth: float | None = None) -> ValueClass:
    return taxonomy.classify(counts, worth).value_class


# -- Taxonomy ------------------------------------------------------------------------------


def test_paper_defaults() -> None:
    t = Taxonomy(evidence="weighted")
    assert (t.theta_high, t.theta_low, t.min_evidence) == (0.60, 0.40, 10.0)


@pytest.mark.parametrize(
    ("worth", "expected"),
    [
        (1.0, ValueClass.HIGH),
        (0.600001, ValueClass.HIGH),
        (0.6, ValueClass.MIXED),  # high needs worth > theta_high, strictly
        (0.5, ValueClass.MIXED),
        (0.4, ValueClass.MIXED),  # low needs worth < theta_low, strictly
        (0.399999, ValueClass.LOW),
        (0.0, ValueClass.LOW),
    ],
)
def test_worth_boundaries(worth: float, expected: ValueClass) -> None:
    enough = Counts(10.0, 10.0, 20.0)
    assert _cls(WEIGHTED, enough, worth) is expected


@pytest.mark.parametrize(
    ("s", "f", "expected"),
    [
        (6.0, 4.0, ValueClass.MIXED),
        (4.0, 6.0, ValueClass.MIXED),
        (6.5, 3.5, ValueClass.HIGH),
        (3.5, 6.5, ValueClass.LOW),
    ],
)
def test_worth_boundaries_from_counts(s: float, f: float, expected: ValueClass) -> None:
    assert _cls(WEIGHTED, Counts(s, f, 10.0)) is expected


@pytest.mark.parametrize(
    ("v", "expected"), [(9.999, ValueClass.UNCERTAIN), (10.0, ValueClass.HIGH), (0.0, ValueClass.UNCERTAIN)]
)
def test_evidence_boundary(v: float, expected: ValueClass) -> None:
    # uncertain means V < V_min, strictly; the ratio does not matter below V_min
    assert _cls(WEIGHTED, Counts(v, 0.0, 100.0)) is expected
    assert _cls(RETRIEVALS, Counts(100.0, 0.0, v)) is expected


def test_uncertain_whatever_the_worth() -> None:
    for worth in (0.0, 0.5, 1.0):
        assert _cls(RETRIEVALS, Counts(1.0, 1.0, 9.0), worth) is ValueClass.UNCERTAIN


def test_retrievals_and_weighted_units_differ() -> None:
    # ten retrievals at k=4 credit: 2.5 weighted hits
    c = Counts(success=2.0, failure=0.5, n=10)
    a = RETRIEVALS.classify(c)
    b = WEIGHTED.classify(c)
    assert a.value_class is ValueClass.HIGH
    assert b.value_class is ValueClass.UNCERTAIN
    assert (a.evidence, b.evidence) == (10.0, 2.5)
    assert a.worth == b.worth == 0.8


def test_classification_carries_its_numbers_and_reason() -> None:
    got = RETRIEVALS.classify(Counts(1.0, 0.25, 10))
    assert isinstance(got, Classification)
    assert got.worth == 0.8
    assert got.evidence == 10.0
    assert got.reason == "worth 0.800 > theta_high 0.6"
    assert RETRIEVALS.classify(Counts(1.0, 0.25, 9)).reason == "evidence 9 retrievals < min_evidence 10"
    assert "weighted hits" in WEIGHTED.classify(Counts(1.0, 0.25, 9)).reason
    low = WEIGHTED.classify(Counts(1.0, 9.0, 10))
    assert low.reason == "worth 0.100 < theta_low 0.4"
    mixed = WEIGHTED.classify(Counts(5.0, 5.0, 10))
    assert mixed.reason == "theta_low 0.4 <= worth 0.500 <= theta_high 0.6"


def test_given_worth_overrides_the_ratio() -> None:
    got = WEIGHTED.classify(Counts(10.0, 0.0, 10), worth=0.1)
    assert got.value_class is ValueClass.LOW
    assert got.worth == 0.1


def test_value_class_is_a_string() -> None:
    assert ValueClass.HIGH == "high"
    assert str(ValueClass.UNCERTAIN) == "uncertain"
    assert {c.value for c in ValueClass} == {"high", "uncertain", "mixed", "low"}


def test_evidence_unit_must_be_chosen_explicitly() -> None:
    t = Taxonomy()
    with pytest.raises(ValidationError) as info:
        t.classify(Counts(10.0, 0.0, 10.0))
    assert info.value.field == "evidence"
    assert "evidence" in str(info.value)
    with pytest.raises(ValidationError) as info:
        t.classify_table(CountsTable(np.ones(2), np.ones(2), np.ones(2)))
    assert info.value.field == "evidence"


def test_evidence_is_keyword_only() -> None:
    with pytest.raises(TypeError):
        Taxonomy(0.6, 0.4, 10.0, "weighted")  # type: ignore[misc]


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"evidence": "hits"}, "evidence"),
        ({"evidence": "weighted", "theta_high": 1.5}, "theta_high"),
        ({"evidence": "weighted", "theta_low": -0.1}, "theta_low"),
        ({"evidence": "weighted", "theta_low": 0.7, "theta_high": 0.6}, "theta_low"),
        ({"evidence": "weighted", "theta_high": math.nan}, "theta_high"),
        ({"evidence": "weighted", "min_evidence": -1}, "min_evidence"),
        ({"evidence": "weighted", "min_evidence": True}, "min_evidence"),
    ],
)
def test_bad_taxonomy_settings(kwargs: dict, field: str) -> None:
    with pytest.raises(ValidationError) as info:
        Taxonomy(**kwargs).classify(Counts(1.0, 1.0, 2.0))
    assert info.value.field == field


@pytest.mark.parametrize("worth", [-0.1, 1.1, math.nan])
def test_given_worth_must_be_a_probability(worth: float) -> None:
    with pytest.raises(ValidationError) as info:
        WEIGHTED.classify(Counts(10.0, 0.0, 10.0), worth=worth)
    assert info.value.field == "worth"


count = st.one_of(st.integers(0, 30).map(float), st.floats(0.0, 30.0))
thresholds = st.tuples(st.floats(0.0, 1.0), st.floats(0.0, 1.0)).map(sorted)


@given(
    rows=st.lists(st.tuples(count, count, count), min_size=1, max_size=25),
    th=thresholds,
    min_ev=st.sampled_from([0.0, 1.0, 5.0, 10.0, 12.5]),
    unit=st.sampled_from(["retrievals", "weighted"]),
    with_worth=st.booleans(),
    data=st.data(),
)
def test_classify_table_agrees_with_classify(rows, th, min_ev, unit, with_worth, data) -> None:  # type: ignore[no-untyped-def]
    taxonomy = Taxonomy(theta_high=th[1], theta_low=th[0], min_evidence=min_ev, evidence=unit)
    s, f, n = (np.array(col) for col in zip(*rows, strict=True))
    worth = None
    if with_worth:
        worth = np.array(data.draw(st.lists(st.floats(0.0, 1.0), min_size=len(rows), max_size=len(rows))))
    table = taxonomy.classify_table(CountsTable(s, f, n), worth)
    assert table.shape == (len(rows),)
    for i, row in enumerate(rows):
        one = taxonomy.classify(Counts(*row), None if worth is None else float(worth[i]))
        assert table[i] == one.value_class.value


# -- DecisionRule ----------------------------------------------------------------------------


def test_confidence_is_one_minus_the_wilson_width() -> None:
    rule = DecisionRule()
    for c in (Counts(), Counts(1.0, 0.0, 1.0), Counts(8.0, 2.0, 10.0), Counts(50.0, 50.0, 100.0)):
        lo, hi = WilsonBound().interval(c)
        assert rule.confidence(c) == pytest.approx(1 - (hi - lo), abs=1e-15)
    assert rule.confidence(Counts()) == 0.0
    assert rule.confidence(Counts(1.0, 0.0, 1)) == pytest.approx(0.21, abs=0.01)
    assert rule.confidence(Counts(10.0, 0.0, 10)) == pytest.approx(0.72, abs=0.01)
    assert rule.confidence(Counts(8.0, 2.0, 10)) == pytest.approx(0.55, abs=0.01)


def _numbers_in_reason(d: Decision) -> None:
    assert f"{d.numbers['worth']:.3f}" in d.reason
    assert f"{d.numbers['confidence']:.3f}" in d.reason


def test_promote() -> None:
    d = DecisionRule().decide(Counts(9.0, 1.0, 10))
    assert d.action == "promote"
    assert d.numbers["worth"] == 0.9
    assert d.numbers["evidence"] == 10.0
    assert d.numbers["confidence"] > 0.5
    _numbers_in_reason(d)
    assert "> 0.7" in d.reason and "> 0.5" in d.reason


def test_demote() -> None:
    d = DecisionRule().decide(Counts(1.0, 9.0, 10))
    assert d.action == "demote"
    assert d.numbers["worth"] == 0.1
    _numbers_in_reason(d)
    assert "< 0.3" in d.reason


def test_neutral_when_insufficient_data() -> None:
    d = DecisionRule().decide(Counts(1.0, 0.0, 1))
    assert d.action == "neutral"
    assert d.reason == "insufficient data: confidence 0.207 < 0.3"


def test_neutral_when_worth_is_middling() -> None:
    d = DecisionRule().decide(Counts(50.0, 50.0, 100))
    assert d.action == "neutral"
    assert d.numbers["confidence"] > 0.5
    _numbers_in_reason(d)
    assert "no rule fired" in d.reason


def test_neutral_when_worth_is_high_but_confidence_between_thresholds() -> None:
    c = Counts(3.0, 0.0, 3)  # worth 1.0, confidence ~0.44: not insufficient, not confident
    conf = DecisionRule().confidence(c)
    assert 0.3 < conf < 0.5
    d = DecisionRule().decide(c)
    assert d.action == "neutral"
    assert f"{conf:.3f}" in d.reason
    assert DecisionRule(min_confidence=0.4).decide(c).action == "promote"


def test_promote_and_demote_thresholds_are_strict() -> None:
    at_promote = Counts(700.0, 300.0, 1000)  # worth 0.7 exactly, plenty of confidence
    at_demote = Counts(300.0, 700.0, 1000)
    assert DecisionRule().decide(at_promote).action == "neutral"
    assert DecisionRule().decide(at_demote).action == "neutral"
    assert DecisionRule(promote_above=0.69).decide(at_promote).action == "promote"
    assert DecisionRule(demote_below=0.31).decide(at_demote).action == "demote"


def test_decision_rule_evidence_unit() -> None:
    c = Counts(2.25, 0.25, 10)  # 10 retrievals, 2.5 weighted hits
    assert DecisionRule(evidence="weighted").decide(c).action == "neutral"
    assert DecisionRule(evidence="retrievals").decide(c).action == "promote"
    assert DecisionRule(evidence="retrievals").decide(c).numbers["evidence"] == 10.0


@pytest.mark.parametrize("name", ["promote_above", "demote_below", "min_confidence", "insufficient_below"])
@pytest.mark.parametrize("bad", [-0.1, 1.1, math.nan])
def test_bad_decision_rule_settings(name: str, bad: float) -> None:
    with pytest.raises(ValidationError) as info:
        DecisionRule(**{name: bad}).decide(Counts(1.0, 1.0, 2.0))
    assert info.value.field == name


# -- DeprecationRule -------------------------------------------------------------------------


def test_deprecation_defaults() -> None:
    rule = DeprecationRule()
    assert (rule.min_evidence, rule.threshold, rule.evidence) == (5.0, 0.3, "weighted")


@pytest.mark.parametrize(
    ("counts", "action"),
    [
        (Counts(1.0, 4.0, 5), "deprecate"),  # evidence exactly 5, worth 0.2
        (Counts(0.0, 100.0, 100), "deprecate"),
        (Counts(1.0, 3.0, 4), "keep"),  # evidence 4 < 5
        (Counts(0.0, 4.999, 100), "keep"),  # evidence just below 5, worth 0
        (Counts(1.5, 3.5, 5), "keep"),  # worth exactly 0.3: deprecate needs < 0.3
        (Counts(5.0, 5.0, 10), "keep"),
    ],
)
def test_deprecation_cases(counts: Counts, action: str) -> None:
    d = DeprecationRule().check(counts)
    assert d.action == action
    assert d.numbers["min_evidence"] == 5.0
    assert d.numbers["threshold"] == 0.3


def test_deprecation_reasons_name_the_numbers() -> None:
    assert DeprecationRule().check(Counts(1.0, 3.0, 4)).reason == "evidence 4 < min_evidence 5: keep"
    assert DeprecationRule().check(Counts(1.0, 4.0, 5)).reason == "worth 0.200 < 0.3 with evidence 5 >= 5"
    assert DeprecationRule().check(Counts(5.0, 5.0, 10)).reason == "worth 0.500 >= 0.3: keep"


def test_deprecation_in_retrievals() -> None:
    c = Counts(0.25, 1.0, 5)  # 5 retrievals, 1.25 weighted hits, worth 0.2
    assert DeprecationRule().check(c).action == "keep"
    assert DeprecationRule(evidence="retrievals").check(c).action == "deprecate"


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [({"evidence": "n"}, "evidence"), ({"min_evidence": -1.0}, "min_evidence"), ({"threshold": 1.5}, "threshold")],
)
def test_bad_deprecation_settings(kwargs: dict, field: str) -> None:
    with pytest.raises(ValidationError) as info:
        DeprecationRule(**kwargs).check(Counts(1.0, 4.0, 5))
    assert info.value.field == field
