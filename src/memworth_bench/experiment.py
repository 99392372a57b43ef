"""Wall time of the paper's Experiment 1: every strategy, 20 seeds x 10,000 episodes.

Timed with no progress bar, after one untimed warm-up. The side-by-side figure is the
full run against a 2-seed run of the same experiment, taken in turns: how the cost grows
with seeds.
"""

from __future__ import annotations

import time
from typing import Any

from memworth_bench.common import Section, Settings, Task, interleave, mid, ratio, section, spread

NAME = "exp1"
TITLE = "Experiment 1 wall time (all strategies)"


def _run(seeds: int, episodes: int, out: dict[str, Any]) -> float:
    from memworth_experiments import exp1
    from memworth_experiments.common import load_config

    cfg = load_config("exp1")
    cfg["_tolerance"] = cfg["tolerance"]["full"]
    start = time.perf_counter()
    result = exp1.run(cfg, seeds, episodes, show_progress=False)
    seconds = time.perf_counter() - start
    out[f"misses_{seeds}"] = sum(1 for r in result.rows if r.ok is False)
    return seconds


def measure(seeds: int, episodes: int, repeats: int) -> Section:
    out: dict[str, Any] = {}
    secs = interleave({"full": lambda: _run(seeds, episodes, out), "two": lambda: _run(2, episodes, out)}, repeats)
    full, two = spread(secs["full"]), spread(secs["two"])
    return section(
        "exp1",
        f"Experiment 1: {seeds} seeds x {episodes:,} episodes, all strategies",
        ["run", "wall time, s: median (min-max)"],
        [
            [f"{seeds} seeds (the paper's run)", mid(full, lambda x: f"{x:.2f}")],
            ["2 seeds", mid(two, lambda x: f"{x:.2f}")],
        ],
        ratios=[ratio(f"{seeds} seeds / 2 seeds", secs["full"], secs["two"], "wall time")],
        notes=[
            f"rows outside the paper's tolerance in the last {seeds}-seed repeat: {out.get(f'misses_{seeds}')} "
            "(a reproduction matter, not a benchmark criterion)"
        ],
        data={"seeds": seeds, "episodes": episodes, "seconds": full, "seconds_2_seeds": two},
    )


def plan(settings: Settings) -> list[Task]:
    seeds = settings.pick(6, 20, smoke=3)
    episodes = settings.pick(10_000, 10_000, smoke=1_000)
    return [Task("exp1", f"Experiment 1, {seeds} seeds", lambda: measure(seeds, episodes, settings.repeats), tier=1)]
