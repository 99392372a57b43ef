"""Holdout assignment and the lift interval (pure)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from memworth import ValidationError
from memworth.cli import main
from memworth.signals.holdout import in_holdout, lift, wilson_interval
from memworth_experiments.demo import _rate_ci


def test_assignment_is_deterministic_seeded_and_near_the_share() -> None:
    ids = [f"task-{i}" for i in range(20_000)]
    a = [in_holdout(i, 0.1, seed=3) for i in ids]
    assert a == [in_holdout(i, 0.1, seed=3) for i in ids]
    assert abs(sum(a) / len(ids) - 0.1) < 0.01
    other = [in_holdout(i, 0.1, seed=4) for i in ids]
    assert a != other and abs(sum(other) / len(ids) - 0.1) < 0.01
    # Nested shares: an episode held out at 5% is held out at 10% too (the same hash).
    assert all(in_holdout(i, 0.1, seed=3) for i in ids if in_holdout(i, 0.05, seed=3))


@pytest.mark.parametrize("share", [-0.1, 1.0, 1.5, "0.1", True])
def test_bad_shares_are_refused(share: object) -> None:
    with pytest.raises(ValidationError):
        in_holdout("e", share)  # type: ignore[arg-type]


def test_newcombe_matches_the_published_examples() -> None:
    """Newcombe (1998), Table II, method 10: 56/70 - 48/80 and 9/10 - 3/10."""
    a = lift((56, 70), (48, 80))
    assert (round(a.lower, 4), round(a.upper, 4)) == (0.0524, 0.3339)
    b = lift((9, 10), (3, 10))
    assert (round(b.lower, 4), round(b.upper, 4)) == (0.1705, 0.809)


def test_wald_is_the_demos_interval() -> None:
    rng = np.random.default_rng(0)
    g = rng.random(900) < 0.8
    h = rng.random(100) < 0.6
    d, lo, hi = _rate_ci(g, h)
    w = lift((int(g.sum()), g.size), (int(h.sum()), h.size), method="wald")
    # The demo rounds z to 1.96; here z is the exact 97.5% normal quantile (1.959964).
    assert (w.lift, w.lower, w.upper) == pytest.approx((d, lo, hi), abs=1e-5)


def test_newcombe_covers_near_its_level_where_wald_does_not() -> None:
    """Coverage over 2,000 simulated small holdouts (n = 30, rate 0.9): Newcombe near 95%."""
    rng = np.random.default_rng(5)
    p1, p2, n1, n2 = 0.95, 0.9, 300, 30
    cover = {"newcombe": 0, "wald": 0}
    for _ in range(2000):
        s1, s2 = int(rng.binomial(n1, p1)), int(rng.binomial(n2, p2))
        for method in cover:
            r = lift((s1, n1), (s2, n2), method=method)
            cover[method] += r.lower <= p1 - p2 <= r.upper
    assert cover["newcombe"] / 2000 > 0.93
    assert cover["wald"] < cover["newcombe"]


def test_empty_arms_and_bad_counts() -> None:
    r = lift((5, 10), (0, 0))
    assert math.isnan(r.lift) and math.isnan(r.holdout_rate)
    assert wilson_interval(0, 0) == (0.0, 1.0)
    with pytest.raises(ValidationError):
        lift((11, 10), (1, 2))
    with pytest.raises(ValidationError):
        lift((1, 10), (1, 2), method="bootstrap")
    with pytest.raises(ValidationError):
        lift((1, 10), (1, 2), level=1.0)


def test_quick_holdout_experiment_through_the_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "holdout"
    assert main(["reproduce", "holdout", "--quick", "--no-progress", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    rows = {r["name"]: r for r in json.loads((out / "results.json").read_text())["rows"]}
    assert all(name in printed for name in rows) and "policy replay" in printed
    assert "the store with the holdout share: the holdout guard fired in " in printed  # it ran, and says what it did
    assert (out / "figure.png").stat().st_size > 10_000
    # Holdout episodes rank exactly as the ungoverned twin does on the same tasks.
    same = rows["holdout arm = twin on the same episodes"]
    assert same["paper"] == same["ours"]
    # The holdout's interval holds the separate governed-vs-ungoverned lift.
    assert rows["lift difference within the holdout's CI"]["ours"] == 1.0
    lifts = rows["lift: holdout (paper column) vs twin (ours)"]
    assert lifts["ours"] > 0
    # Each alternative setting is replayed; a cautious estimator changes some decisions.
    assert {n for n in rows if n.startswith("replay: ")} == {
        "replay: theta_low 0.35",
        "replay: half-life 500",
        "replay: wilson-upper",
        "replay: min_evidence 30",
    }
    assert rows["replay: wilson-upper"]["ours"] > 0


def test_verify_sources_and_holdout_over_http() -> None:
    from fastapi.testclient import TestClient

    from memworth import HashingEncoder, MemoryStore
    from memworth.server import create_app, create_key

    with MemoryStore.open("memory://", encoder=HashingEncoder(), holdout=0.5, seed=0) as store:
        client = TestClient(create_app(store))
        h = {"Authorization": f"Bearer {create_key(store, 'team-a', 'agent')}"}
        client.post("/v1/memories", json={"text": "Water boils at 100 C.", "id": "water"}, headers=h)
        assert client.get("/v1/holdout", headers=h).json()["lift"] is None  # no episodes yet: null, not NaN
        for _ in range(12):
            ep = client.post("/v1/recall", json={"query": "water boils", "k": 1}, headers=h).json()["episode"]
            client.post(f"/v1/episodes/{ep}/outcome", json={"success": True, "source": "heuristic"}, headers=h)
            r = client.post(f"/v1/episodes/{ep}/verify", json={"success": False}, headers=h)
            assert r.status_code == 200 and r.json()["agreed"] is False
        assert client.post(f"/v1/episodes/{ep}/verify", json={"success": True}, headers=h).status_code == 409
        heuristic = next(s for s in client.get("/v1/sources", headers=h).json() if s["source"] == "heuristic")
        assert heuristic["disagree"] == 12 and heuristic["learned"] == 0.0
        report = client.get("/v1/holdout", headers=h).json()
        assert report["governed"]["episodes"] + report["holdout"]["episodes"] == 12
        assert "alerts" in client.post("/v1/govern", json={}, headers=h).json()
