"""The inclusion probability a recall logs for each pick is the true chance of serving it,
also when quarantined memories are drawn for probes (their draws move every pick's chance)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from memworth import CountsTable, HashingEncoder, MemoryStore
from memworth.ranking import Blend


@pytest.mark.parametrize("exploration", [0.0, 0.3])
def test_every_pick_logs_its_chance_over_the_probe_draws(exploration: float) -> None:
    """Two quarantined candidates ranked above the others: before, a plain pick logged 1.0 (its
    chance given the draw it saw) though a drawn probe takes its place on a share of recalls, and
    the second probe logged the share though the first one, when drawn, takes its slot."""
    s = MemoryStore.open(
        "memory://", encoder=HashingEncoder(), seed=1, exploration=exploration, probe_share=0.4, scoring=Blend()
    )
    ids = ["q1", "q2", "a", "b", "c"]
    sims = np.array([0.9, 0.85, 0.6, 0.5, 0.4])
    n = np.array([20.0, 20.0, 20.0, 20.0, 1.0])
    table = CountsTable(0.8 * n, 0.2 * n, n)
    standing = ["re-verify", "re-verify", "normal", "normal", "normal"]
    created = np.full(5, s.clock())
    runs = 3_000
    served: Counter[str] = Counter()
    logged: dict[str, set[float]] = {}
    for _ in range(runs):
        c = s.choose("default", ids, sims, table, created, 2, {}, None, standing)
        for i, p in zip(c.selection.picked.tolist(), c.selection.propensity.tolist(), strict=True):
            served[ids[i]] += 1
            logged.setdefault(ids[i], set()).add(round(p, 9))
    for mid, chances in logged.items():
        assert len(chances) == 1, (mid, chances)  # the same candidates, the same chance whatever was drawn
        (p,) = chances
        sd = (p * (1 - p) / runs) ** 0.5
        assert served[mid] / runs == pytest.approx(p, abs=5 * sd + 1e-9), mid


def test_choose_takes_one_creation_time_for_every_candidate_with_a_quarantined_one() -> None:
    """``created`` as one time broadcast over the candidates, as scoring takes it: the unproven
    score of a quarantined candidate indexed it and failed (IndexError) where choose had worked."""
    s = MemoryStore.open("memory://", encoder=HashingEncoder(), seed=0, probe_share=1.0)
    n = np.array([5.0, 5.0])
    table = CountsTable(0.5 * n, 0.5 * n, n)
    c = s.choose(
        "default", ["a", "b"], np.array([0.9, 0.8]), table, np.float64(s.clock()), 1, {}, None, ["re-verify", "normal"]
    )
    assert c.selection.picked.tolist() == [0] and c.probe.tolist() == [True]
