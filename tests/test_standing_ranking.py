"""Standing in the ranking rules: a promoted memory is lifted among the query's near matches only."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from memworth import CountsTable, ValidationError
from memworth.ranking import Blend, CosineRecencyWorth, LowerBoundBlend, with_standing
from memworth.settings import RecallSettings, Settings


def ranked(rule: Blend, sims: list[float], standing: list[str]) -> list[int]:
    """Candidate indices best first, every candidate with the same counts (worth 0.9 on 10 retrievals)."""
    n = len(sims)
    counts = CountsTable(np.full(n, 9.0), np.full(n, 1.0), np.full(n, 10.0))
    base = rule.score(np.array(sims), counts, np.zeros(n))
    return np.argsort(-with_standing(rule, base, standing, np.array(sims)), kind="stable").tolist()


def test_a_promoted_memory_does_not_outrank_a_better_match_for_a_query_it_barely_matches() -> None:
    sims, standing = [0.80, 0.70], ["normal", "promoted"]
    assert ranked(Blend(), sims, standing) == [0, 1]
    # the flat boost of before (+0.1 whatever the query) put it first: 0.6 x 0.1 < 0.1
    assert ranked(Blend(promoted_margin=100.0), sims, standing) == [1, 0]


def test_a_promoted_memory_still_wins_among_near_equal_matches() -> None:
    assert ranked(Blend(), [0.80, 0.79, 0.50], ["normal", "promoted", "normal"]) == [1, 0, 2]
    assert ranked(Blend(), [0.80, 0.80], ["normal", "promoted"]) == [1, 0]


def test_the_boost_is_full_at_the_best_match_and_fades_to_nothing_at_the_margin() -> None:
    rule = Blend(promoted_boost=0.2, promoted_margin=0.1)
    sims = np.array([0.9, 0.9, 0.85, 0.8, 0.5])
    out = with_standing(rule, np.zeros(5), ["promoted"] * 5, sims)
    assert out == pytest.approx([0.2, 0.2, 0.1, 0.0, 0.0])
    only_best = with_standing(Blend(promoted_margin=0.0), np.zeros(3), ["promoted"] * 3, np.array([0.9, 0.9, 0.89]))
    assert only_best == pytest.approx([0.1, 0.1, 0.0])


def test_demotion_lowers_a_memory_whatever_the_query() -> None:
    out = with_standing(Blend(), np.full(3, 0.5), ["demoted", "demoted", "normal"], np.array([0.9, 0.1, 0.5]))
    assert out == pytest.approx([0.4, 0.4, 0.5])


@given(
    sims=st.lists(st.floats(-1.0, 1.0), min_size=1, max_size=8),
    margin=st.floats(0.0, 1.0),
    boost=st.floats(0.0, 1.0),
)
@example(sims=[0.5, 0.0], margin=5e-324, boost=0.1)  # gap / margin overflows: no boost, no warning
def test_the_boost_never_exceeds_its_setting_and_never_grows_with_the_gap(
    sims: list[float], margin: float, boost: float
) -> None:
    s = np.array(sims)
    gained = with_standing(
        Blend(promoted_boost=boost, promoted_margin=margin), np.zeros(s.size), ["promoted"] * s.size, s
    )
    assert ((gained >= 0) & (gained <= boost + 1e-12)).all()
    assert gained[int(np.argmax(s))] == pytest.approx(boost)
    order = np.argsort(-s, kind="stable")
    assert (np.diff(gained[order]) <= 1e-12).all()  # less similar: never more boost


@pytest.mark.parametrize("rule", [Blend, LowerBoundBlend, CosineRecencyWorth])
@pytest.mark.parametrize("bad", [-0.1, float("nan"), float("inf"), True, "0.1"])
def test_a_bad_margin_is_refused_by_name(rule: type[Blend] | type[CosineRecencyWorth], bad: object) -> None:
    with pytest.raises(ValidationError) as exc:
        rule(promoted_margin=bad).validate()  # type: ignore[arg-type]
    assert exc.value.field == "promoted_margin"
    with pytest.raises(ValidationError) as exc:
        RecallSettings(scoring=rule(promoted_margin=bad))  # type: ignore[arg-type]
    assert exc.value.field == "scoring.promoted_margin"


def test_the_margin_is_a_setting_of_the_store() -> None:
    s = Settings().changed({"recall.scoring.promoted_margin": 0.2})
    assert isinstance(s.recall.scoring, Blend) and s.recall.scoring.promoted_margin == 0.2
    assert Settings.from_dict(s.to_dict()) == s
    assert Settings.diff(Settings(), s) == ["recall.scoring"]
    with pytest.raises(ValidationError) as exc:
        Settings().changed({"recall.scoring.promoted_margin": -1})
    assert exc.value.field == "recall.scoring.promoted_margin"


def test_similarities_that_do_not_match_the_scores_are_refused() -> None:
    with pytest.raises(ValidationError) as exc:
        with_standing(Blend(), np.zeros(3), ["normal"] * 3, np.zeros(2))
    assert exc.value.field == "similarity"
