"""Calibrated deprecation: a confidence sequence against a fixed V_min, watched after every retrieval.

Each simulated memory has a fixed success probability p+ and a stream of retrievals,
each an independent success with probability p+ (one observation of weight 1 per
retrieval; the "credit 1/8" rows give each retrieval Exp 1's uniform credit 1/k with
k = 8 instead). Every rule is checked after every retrieval, on the same streams; a
memory counts as deprecated from the first retrieval at which its rule fires.

* ``paper``: the value taxonomy's low class, worth < theta_L with V >= V_min retrievals;
* ``store``: ``GovernancePolicy``'s default deprecation, worth < 0.3 with V >= 10;
* ``bayes``: the paper's section 6 suggestion, a Beta(1, 1) credible bound
  (``BetaBound("upper")``, 95% two-sided) below theta_L, valid at one fixed time only;
* ``cs`` (ours): :class:`memworth.signals.confidence_sequences.SequentialDeprecation`, the 95% beta-binomial
  confidence sequence wholly below theta_L;
* ``cs-credit``: the same rule on counts credited 1/8 per retrieval (weighted evidence).

For unit weights the success count is an integer, and each rule fires at retrieval n
exactly when the count is at most a boundary b(n) (fewer successes is more evidence of a
low rate); the boundaries come from the library's own rules (bisection over the count)
and the streams are compared with them.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from memworth import BetaBound, CountsTable
from memworth.signals.confidence_sequences import SequentialDeprecation
from memworth_experiments.common import Result, Row, mean_std, progress, read_raw
from memworth_experiments.targets import Bound

RULES = ("paper", "store", "bayes", "cs", "cs-credit")
LABELS = {
    "paper": "fixed V_min (paper)",
    "store": "store default (MW < 0.3)",
    "bayes": "Beta bound (fixed-time)",
    "cs": "confidence sequence (ours)",
    "cs-credit": "CS, credit 1/8 (ours)",
}


def boundary(fires: Any, horizon: int, theta: float) -> np.ndarray:
    """For n = 1..horizon, the largest success count at which ``fires(successes, n)`` holds (-1: none).

    ``fires`` takes arrays of counts and retrievals and must be monotone: true for a count
    implies true for every smaller count. Counts at or above ``theta * n`` never fire.
    """
    n = np.arange(1, horizon + 1, dtype=float)
    lo = np.full(horizon, -1.0)
    hi = np.ceil(theta * n)  # fires nowhere at or above the threshold's count
    for _ in range(math.ceil(math.log2(horizon + 2)) + 1):
        mid = np.floor((lo + hi) / 2)
        live = hi - lo > 1
        test = np.where(live, np.maximum(mid, 0.0), 0.0)
        f = np.asarray(fires(test, n), dtype=bool) & live
        lo = np.where(f, mid, lo)
        hi = np.where(live & ~f, mid, hi)
    return lo.astype(np.int64)


def rule_boundaries(cfg: dict[str, Any], horizon: int) -> dict[str, np.ndarray]:
    """Each rule's boundary b(n), from the library's rules."""
    theta, alpha = cfg["rule"]["theta_low"], cfg["rule"]["alpha"]
    v_min, store_below, k = cfg["rule"]["v_min"], cfg["rule"]["store_deprecate_below"], cfg["rule"]["credit_k"]
    cs = SequentialDeprecation(threshold=theta, alpha=alpha)
    bayes = BetaBound("upper", level=0.95)

    def table(s: np.ndarray, n: np.ndarray, scale: float = 1.0) -> CountsTable:
        return CountsTable(s * scale, (n - s) * scale, n)

    return {
        "paper": boundary(lambda s, n: (n >= v_min) & (s / n < theta), horizon, theta),
        "store": boundary(lambda s, n: (n >= 10) & (s / n < store_below), horizon, theta),
        "bayes": boundary(lambda s, n: np.asarray(bayes.value(table(s, n))) < theta, horizon, theta),
        "cs": boundary(lambda s, n: cs.check_table(table(s, n)), horizon, theta),
        "cs-credit": boundary(lambda s, n: cs.check_table(table(s, n, 1.0 / k)), horizon, theta),
    }


def first_deprecation(successes: np.ndarray, bound: np.ndarray) -> np.ndarray:
    """Per memory (row), the retrieval (1-based) at which the count first meets the boundary; 0: never."""
    fired = successes <= bound[None, : successes.shape[1]]
    hit = fired.any(axis=1)
    return np.where(hit, fired.argmax(axis=1) + 1, 0)


def checkpoints(length: int, every: int) -> list[int]:
    """Retrievals at which the share deprecated is read: a few early ones, then every ``every``."""
    early = [n for n in (10, 20, 30, 50, 70) if n < every and n <= length]
    return early + list(range(every, length + 1, every))


def simulate(
    cfg: dict[str, Any], seed: int, horizon: int, bounds: dict[str, np.ndarray]
) -> dict[str, tuple[np.ndarray, dict[str, np.ndarray]]]:
    """One seed: per group, the memories' p+ and each rule's first deprecation retrieval."""
    rng = np.random.default_rng([seed, 4])
    out = {}
    for group, spec in cfg["groups"].items():
        size = spec["memories"]
        p = rng.uniform(spec["low"], spec["high"], size)
        length = min(horizon, spec.get("horizon", horizon))
        firsts: dict[str, list[np.ndarray]] = {rule: [] for rule in RULES}
        for start in range(0, size, 250):  # chunks keep the (memories x retrievals) arrays small
            part = p[start : start + 250]
            s = np.cumsum(rng.random((part.size, length)) < part[:, None], axis=1, dtype=np.int32)
            for rule in RULES:
                firsts[rule].append(first_deprecation(s, bounds[rule]))
        out[group] = (p, {rule: np.concatenate(v) for rule, v in firsts.items()})
    return out


def run(cfg: dict[str, Any], seeds: int, episodes: int, show_progress: bool = True) -> Result:
    every = cfg["run"]["checkpoint_every"]
    bounds = rule_boundaries(cfg, episodes)
    raw: list[dict[str, Any]] = []
    medians: dict[tuple[str, str], list[float]] = {}
    for seed in progress(range(seeds), seeds, "deprecation", show_progress):
        for group, (_p, firsts) in simulate(cfg, seed, episodes, bounds).items():
            length = min(episodes, cfg["groups"][group].get("horizon", episodes))
            for rule in RULES:
                f = firsts[rule]
                medians.setdefault((group, rule), []).append(float(np.median(np.where(f > 0, f, length + 1))))
                for n in checkpoints(length, every):
                    raw.append(
                        {
                            "seed": seed,
                            "group": group,
                            "rule": rule,
                            "retrievals": n,
                            "deprecated": float(np.mean((f > 0) & (f <= n))),
                        }
                    )
    settings = {"seeds": seeds, "episodes": episodes, "memories": {g: s["memories"] for g, s in cfg["groups"].items()}}
    return Result("deprecation", _rows(cfg, raw, episodes, medians), raw, settings)


def _share(raw: list[dict[str, Any]], group: str, rule: str, n: int) -> tuple[float, float]:
    return mean_std(
        [r["deprecated"] for r in raw if r["group"] == group and r["rule"] == rule and r["retrievals"] == n]
    )


def _rows(
    cfg: dict[str, Any], raw: list[dict[str, Any]], episodes: int, medians: dict[tuple[str, str], list[float]]
) -> list[Row]:
    target, groups = cfg["target"], cfg["groups"]
    rows: list[Row] = []
    for group, spec in groups.items():
        length = min(episodes, spec.get("horizon", episodes))
        low_rate = group in ("power", "edge")
        at = min(length, target["power_within"]) if low_rate else length
        what = "deprecated" if low_rate else "false-deprecation rate"
        metric = f"share@{at} retr."
        span = f"p+ ~ U[{spec['low']:g}, {spec['high']:g}]"
        for rule in RULES:
            m, s = _share(raw, group, rule, at)
            name = f"{group}: {LABELS[rule]}"
            if rule == "cs" and group == "null":
                rows.append(
                    Bound(
                        name,
                        metric,
                        None,
                        m,
                        s,
                        note=f"{what}, {span}; target <= {target['false_rate_at_most']:g}",
                        at_most=target["false_rate_at_most"],
                    )
                )
            elif rule == "cs" and group == "power":
                rows.append(
                    Bound(
                        name,
                        metric,
                        None,
                        m,
                        s,
                        note=f"{what}, {span}; target >= {target['power_at_least']:g}",
                        at_least=target["power_at_least"],
                    )
                )
            else:
                rows.append(Row(name, metric, None, m, s, None, f"{what}, {span}" if rule == "paper" else ""))
    for group in ("power", "edge"):
        if group not in groups:
            continue
        for rule in RULES:
            m, s = mean_std(medians[(group, rule)])
            note = "median retrieval at which a memory is deprecated (never: horizon + 1)" if rule == "paper" else ""
            rows.append(Row(f"{group} median: {LABELS[rule]}", "median retr.", None, m, s, None, note))
    return rows


def figure(raw_csv: Path, out_png: Path) -> None:
    """False-deprecation rate (left) and power (right) against retrievals, per rule."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = read_raw(raw_csv)
    colours = {
        "paper": "tab:orange",
        "store": "tab:brown",
        "bayes": "tab:grey",
        "cs": "tab:blue",
        "cs-credit": "tab:cyan",
    }
    groups = [g for g in ("null", "boundary", "power", "edge") if any(r["group"] == g for r in rows)]
    fig, axes = plt.subplots(1, len(groups), figsize=(4.2 * len(groups), 4.0))
    for ax, group in zip(np.atleast_1d(axes), groups, strict=True):
        for rule in RULES:
            sel = [r for r in rows if r["group"] == group and r["rule"] == rule]
            ns = sorted({int(r["retrievals"]) for r in sel})
            m = [np.mean([float(r["deprecated"]) for r in sel if int(r["retrievals"]) == n]) for n in ns]
            ax.plot(ns, m, color=colours[rule], label=LABELS[rule], ls="--" if rule == "cs-credit" else "-")
        if group in ("power", "edge"):
            ax.axhline(0.90, color="black", lw=0.6, ls=":")
            ax.set(ylabel="share deprecated", title=f"{group}: p+ <= theta_L - 0.1: power")
        else:
            ax.axhline(0.05, color="black", lw=0.6, ls=":")
            ax.set(ylabel="share ever deprecated", title=f"{group}: p+ >= theta_L: false deprecation")
        ax.set(xlabel="retrievals watched", ylim=(0, 1.0), xscale="log")
        ax.grid(alpha=0.3)
    np.atleast_1d(axes)[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out_png, dpi=130)
    plt.close(fig)
