"""Source reliability, quotas and the burst detector (pure)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import binom

from memworth import Counts, ValidationError
from memworth.cli import main
from memworth.signals.sources import Agreement, BurstDetector, Reliability, SourceLimit


def test_no_verified_outcome_keeps_the_fixed_confidence() -> None:
    rel = Reliability()
    for conf in (0.0, 0.2, 0.5, 1.0):
        assert rel.weight(Agreement(), conf) == pytest.approx(conf)


def test_the_learned_weight_converges_to_two_r_minus_one() -> None:
    rel = Reliability(prior_strength=10)
    rng = np.random.default_rng(0)
    for r in (0.55, 0.7, 0.9):
        agreed = rng.random(20_000) < r
        stats = Agreement(float(agreed.sum()), float((~agreed).sum()))
        assert rel.weight(stats, 0.2) == pytest.approx(2 * r - 1, abs=0.02)


def test_a_source_that_lies_more_than_half_the_time_gets_no_weight_and_a_strong_prior_moves_slower() -> None:
    assert Reliability().weight(Agreement(10, 40), 1.0) == 0.0
    weak = Reliability(prior_strength=2).weight(Agreement(5, 5), 1.0)
    strong = Reliability(prior_strength=200).weight(Agreement(5, 5), 1.0)
    assert weak < 0.3 < 0.9 < strong


def test_agreement_adds_and_refuses_negative_counts() -> None:
    a = Agreement().add(True).add(False).add(True)
    assert (a.agree, a.disagree, a.total) == (2.0, 1.0, 3.0)
    assert (a + a).total == 6.0
    with pytest.raises(ValidationError):
        Agreement(-1.0, 0.0)
    with pytest.raises(ValidationError):
        Reliability(prior_strength=0).weight(Agreement(), 0.5)


def test_the_interval_covers_the_observed_rate() -> None:
    lo, hi = Reliability().interval(Agreement(70, 30))
    assert lo < 0.7 < hi and hi - lo < 0.2


def test_rate_limit_counts_every_outcome_in_the_window() -> None:
    limit = SourceLimit(max_outcomes=3, window=60)
    recent = [(0.0, ["a"]), (30.0, ["b"]), (50.0, ["c"])]
    assert limit.check("s", recent, [["d"]], now=55.0) is not None
    assert limit.check("s", recent, [["d"]], now=61.0) is None  # the first left the window
    reason = limit.check("s", [], [["a"]] * 4, now=0.0)
    assert reason is not None and "rate limit" in reason and "4 outcomes" in reason


def test_quota_counts_one_memory_once_per_outcome() -> None:
    limit = SourceLimit(max_per_memory=2)
    assert limit.check("s", [(0.0, ["a", "a"])], [["a"]], now=1.0) is None
    reason = limit.check("s", [(0.0, ["a"]), (1.0, ["a", "b"])], [["b", "a"]], now=2.0)
    assert reason is not None and "memory 'a'" in reason


@pytest.mark.parametrize("bad", [{"max_outcomes": 0}, {"max_per_memory": 1.5}, {"window": 0}, {"max_outcomes": True}])
def test_bad_limits_are_refused(bad: dict) -> None:
    with pytest.raises(ValidationError):
        SourceLimit(**bad).check("s", [], [["a"]], now=0.0)


def test_a_flood_of_successes_on_a_low_worth_memory_alerts_with_numbers() -> None:
    before = Counts(success=6.0, failure=14.0, n=80)
    alert = BurstDetector().check("m", before, Counts(success=10.0, failure=0.0, n=40), {"bot": 9.0, "ok": 1.0})
    assert alert is not None
    assert alert.worth_before == pytest.approx(0.3) and alert.worth_now == pytest.approx(16 / 30)
    assert alert.allowed[0] < 0 < alert.allowed[1] < alert.change
    assert alert.sources == {"bot": pytest.approx(0.9), "ok": pytest.approx(0.1)}
    assert "90% of the window's credit from source 'bot'" in alert.reason
    assert alert.numbers()["change"] == pytest.approx(alert.change, abs=1e-6)


def test_a_sudden_collapse_alerts_too() -> None:
    alert = BurstDetector().check("m", Counts(90.0, 10.0, 100), Counts(0.0, 25.0, 25), {"heuristic": 25.0})
    assert alert is not None and alert.change < -0.1


def test_small_or_ordinary_windows_do_not_alert() -> None:
    d = BurstDetector()
    assert d.check("m", Counts(6.0, 14.0, 80), Counts(5.0, 0.0, 5), {}) is None  # too few retrievals
    assert d.check("m", Counts(60.0, 140.0, 800), Counts(10.0, 0.0, 40), {}) is None  # moves worth < 0.1
    assert d.check("m", Counts(), Counts(10.0, 0.0, 40), {}) is None  # no baseline: nothing to compare


def test_false_alert_rate_on_honest_windows_stays_below_alpha() -> None:
    """Windows drawn from the memory's own rate alert less often than alpha allows (a binomial bound)."""
    rng = np.random.default_rng(1)
    detector = BurstDetector(alpha=1e-3, min_change=0.0)
    alerts = 0
    trials = 1500
    for _ in range(trials):
        p = rng.uniform(0.1, 0.9)
        n0 = int(rng.integers(20, 200))
        s0 = float(rng.binomial(n0, p))
        k = int(rng.integers(10, 60))
        s1 = float(rng.binomial(k, p))
        if detector.check("m", Counts(s0, n0 - s0, n0), Counts(s1, k - s1, k), {}) is not None:
            alerts += 1
    # At most alpha in expectation; allow the binomial upper 99.9% quantile of that rate.
    assert alerts <= binom.ppf(0.999, trials, 1e-3)


def test_bad_detector_settings_are_refused() -> None:
    with pytest.raises(ValidationError):
        BurstDetector(alpha=0.0).check("m", Counts(), Counts(1.0, 0.0, 20), {})
    with pytest.raises(ValidationError):
        BurstDetector(window=-1).validate()


def test_quick_sources_experiment_through_the_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "sources"
    assert main(["reproduce", "sources", "--quick", "--no-progress", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    rows = {r["metric"]: r for r in json.loads((out / "results.json").read_text())["rows"]}
    assert all(r["name"] in printed for r in rows.values())
    assert (out / "figure.png").stat().st_size > 10_000 and (out / "raw.csv").exists()
    # Fixed confidences let the gamed source push its memory far above its true rate;
    # learned reliability and the quota keep it near the truth and the ranking intact.
    assert rows["pushed"]["paper"] > 0.25 and abs(rows["pushed"]["ours"]) < 0.15
    assert rows["rho"]["ours"] > rows["rho"]["paper"]
    assert rows["agent_b_weight"]["ours"] < 0.25 < rows["heuristic_weight"]["ours"]
    assert rows["refused"]["paper"] == 0 < rows["refused"]["ours"] and rows["refused_honest"]["ours"] == 0
    # The burst alert fires where the burst lands (the paper's store), never on honest streams.
    assert rows["alerted"]["paper"] > 0
    assert rows["false_alerts_honest"]["paper"] == rows["false_alerts_honest"]["ours"] == 0
