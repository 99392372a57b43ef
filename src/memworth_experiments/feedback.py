"""Feedback loops: sharpen Experiment 3's MW-softmax until retrieval collapses, then repair it.

Experiment 3's world (``exp3``: N = 100, U* ~ U(0,1), k = 8, success with probability
clip(mean U* + N(0, 0.1^2), 0, 1), uniform credit). Policies, each on the same worlds:

* ``sweep``: Experiment 3's own policy (Plackett-Luce draws from softmax(MW / tau),
  ``exp3.run_policy``) at eps = 0 for falling tau: where does it collapse?
* ``collapse``: that policy at the sharp tau, eps = 0;
* ``floor``: the same softmax for the greedy slots plus the store's exploration floor
  (``memworth.ranking.select``: each of the k slots explores with chance eps, drawing
  uniformly from the memories the other slots did not take); MW as the paper computes it;
* ``floor+ipw``: the same episodes as ``floor``, worth from inverse-propensity weighted
  counts (:class:`memworth.signals.propensity.PropensityCounts`, self-normalised per memory) with
  the policy's logged propensities: each pick's inclusion probability over the softmax
  draw and the floor's draw (:func:`memworth.signals.propensity.softmax_inclusion`, from the worth
  known before the episode), ``1 / propensity`` clipped at N / k;
* ``floor+ipw unclipped`` (the same without the clip) and ``floor+ipw given ranking``
  (propensities given the episode's own softmax ranking, ``inclusion_by_rank[rank]``:
  valid but high-variance), on the same episodes, to show what each choice costs;
* ``mixture``: Experiment 3's own floor ((1 - eps) softmax + eps / N per slot), for reference.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from memworth import RawWorth, Tracker
from memworth.signals.propensity import InversePropensity, PropensityCounts, inclusion_by_rank, softmax_inclusion
from memworth_experiments.common import Result, Row, mean_std, read_raw, spearman
from memworth_experiments.exp3 import run_policy
from memworth_experiments.targets import Bound


def world(cfg: dict[str, Any], seeds: int) -> np.ndarray:
    """True utilities, one row per seed, drawn exactly as Experiment 3 draws them."""
    n = cfg["world"]["memories"]
    return np.stack([np.random.default_rng(seed).uniform(0, 1, n) for seed in range(seeds)])


def exp3_settings(cfg: dict[str, Any], temperature: float) -> dict[str, Any]:
    """The settings ``exp3.run_policy`` reads, at ``temperature``."""
    return {"world": cfg["world"], "policy": {"temperature": temperature}, "run": cfg["run"]}


def run_floor(
    utility: np.ndarray,
    cfg: dict[str, Any],
    temperature: float,
    exploration: float,
    episodes: int,
    rng: np.random.Generator,
    propensity_rng: np.random.Generator,
) -> list[tuple[int, dict[str, np.ndarray]]]:
    """Softmax greedy slots plus ``select``'s exploration floor, all seeds side by side.

    Returns ``(episode, {estimate name: worth})`` checkpoints, every estimate read from
    the same episodes: ``floor`` (MW), ``floor+ipw`` (Hajek IPW worth with the policy's
    propensities, ``1 / propensity`` clipped at ``policy.ipw_max_weight``),
    ``floor+ipw unclipped`` and ``floor+ipw given ranking``. Each episode: rank the
    memories by MW / tau plus Gumbel noise (a Plackett-Luce draw from the softmax), draw
    j ~ Binomial(k, eps) exploration slots, take the best k - j ranks and j uniformly
    from the rest. Before the draw the policy logs each memory's inclusion probability,
    :func:`softmax_inclusion` over ``policy.propensity_draws`` Gumbel draws from
    ``propensity_rng`` (a stream of its own, so the episodes do not depend on it).
    """
    seeds, n = utility.shape
    k, noise, every = cfg["world"]["k"], cfg["world"]["noise_sd"], cfg["run"]["checkpoint_every"]
    draws = cfg["policy"]["propensity_draws"]
    offset = (np.arange(seeds) * n)[:, None]
    all_ids = (offset + np.arange(n)).ravel()
    tracker = Tracker()
    tracker.register(all_ids)
    counts = {
        "floor+ipw": PropensityCounts.empty(seeds * n, InversePropensity(cfg["policy"]["ipw_max_weight"])),
        "floor+ipw unclipped": PropensityCounts.empty(seeds * n),
        "floor+ipw given ranking": PropensityCounts.empty(seeds * n),
    }
    by_rank = inclusion_by_rank(n, k, exploration)
    rows = np.arange(seeds)[:, None]
    credit = np.full((seeds, k), 1.0 / k)
    worth = np.full((seeds, n), 0.5)
    out = []
    for t in range(1, episodes + 1):
        policy = softmax_inclusion(worth, temperature, k, exploration, propensity_rng.gumbel(size=(seeds, draws, n)))
        keys = worth / temperature + rng.gumbel(size=(seeds, n))
        rank = np.empty((seeds, n), dtype=np.int64)
        np.put_along_axis(rank, np.argsort(-keys, axis=1), np.broadcast_to(np.arange(n), (seeds, n)), axis=1)
        greedy = k - rng.binomial(k, exploration, size=seeds)
        order = np.where(rank < greedy[:, None], -1.0, rng.random((seeds, n)))
        chosen = np.argpartition(order, k - 1, axis=1)[:, :k]
        p = np.clip(utility[rows, chosen].mean(axis=1) + rng.normal(0, noise, seeds), 0, 1)
        success = rng.random(seeds) < p
        tracker.record_batch(chosen + offset, success)
        logged = policy[rows, chosen]
        counts["floor+ipw"].add(chosen + offset, success, credit, logged)
        counts["floor+ipw unclipped"].add(chosen + offset, success, credit, logged)
        counts["floor+ipw given ranking"].add(chosen + offset, success, credit, by_rank[rank[rows, chosen]])
        flat = (chosen + offset).ravel()
        worth.ravel()[flat] = tracker.values(flat)
        if t % every == 0:
            found = {"floor": tracker.values(all_ids).reshape(seeds, n)}
            found |= {name: _worth(c).reshape(seeds, n) for name, c in counts.items()}
            out.append((t, found))
    return out


def _worth(counts: PropensityCounts) -> np.ndarray:
    return np.asarray(RawWorth().value(counts.table()), dtype=float)


def run(cfg: dict[str, Any], seeds: int, episodes: int, show_progress: bool = True) -> Result:
    from tqdm import tqdm

    utility = world(cfg, seeds)
    pol = cfg["policy"]
    tau, eps = pol["temperature"], pol["exploration"]
    raw: list[dict[str, Any]] = []

    def keep(name: str, episode: int, worth: np.ndarray) -> None:
        for seed in range(seeds):
            raw.append({"seed": seed, "policy": name, "episode": episode, "rho": spearman(worth[seed], utility[seed])})

    jobs: list[tuple[str, float, float | None]] = [(f"sweep tau={t:g}", t, 0.0) for t in pol["sweep"] if t != tau]
    jobs += [("collapse", tau, 0.0), ("mixture", tau, eps), ("floor", tau, None)]
    for i, (name, temperature, floor) in enumerate(tqdm(jobs, desc="feedback", disable=not show_progress, leave=False)):
        rng = np.random.default_rng([seeds, i, 6])
        if floor is None:
            propensity_rng = np.random.default_rng([seeds, i, 6, 1])
            for episode, found in run_floor(utility, cfg, temperature, eps, episodes, rng, propensity_rng):
                for name, worth in found.items():
                    keep(name, episode, worth)
        else:
            for episode, mw in run_policy(utility, floor, exp3_settings(cfg, temperature), episodes, rng):
                keep(name, episode, mw)
    return Result("feedback", _rows(cfg, raw, episodes), raw, {"seeds": seeds, "episodes": episodes})


def _final(raw: list[dict[str, Any]], name: str, episode: int) -> tuple[float, float]:
    return mean_std([r["rho"] for r in raw if r["policy"] == name and r["episode"] == episode])


def _rows(cfg: dict[str, Any], raw: list[dict[str, Any]], episodes: int) -> list[Row]:
    pol, target = cfg["policy"], cfg["target"]
    tau, eps = pol["temperature"], pol["exploration"]
    final = max(r["episode"] for r in raw)
    metric = f"rho@{final}"
    rows: list[Row] = []
    for t in sorted(pol["sweep"], reverse=True):
        if t == tau:
            continue  # the collapse row below
        m, s = _final(raw, f"sweep tau={t:g}", final)
        paper = cfg["paper"]["exp3_eps0"] if t == 3.0 else None
        rows.append(
            Row(f"MW-softmax tau={t:g}, no floor", metric, paper, m, s, None, "Exp 3's paper value" if paper else "")
        )
    m, s = _final(raw, "collapse", final)
    rows.append(
        Bound(
            f"collapse: tau={tau:g}, no floor",
            metric,
            None,
            m,
            s,
            note=f"target < {target['collapse_below']:g}",
            at_most=target["collapse_below"],
        )
    )
    m, s = _final(raw, "mixture", final)
    rows.append(Row(f"Exp 3's floor: tau={tau:g}, eps={eps:g} per slot (MW)", metric, None, m, s))
    m, s = _final(raw, "floor", final)
    rows.append(Row(f"floor alone: tau={tau:g}, select floor eps={eps:g} (MW)", metric, None, m, s))
    clip = pol["ipw_max_weight"]
    m, s = _final(raw, "floor+ipw", final)
    rows.append(
        Bound(
            f"floor + IPW: same episodes, policy's propensities, 1/propensity clipped at {clip:g}",
            metric,
            None,
            m,
            s,
            note=f"target >= {target['repaired_at_least']:g}",
            at_least=target["repaired_at_least"],
        )
    )
    m, s = _final(raw, "floor+ipw unclipped", final)
    rows.append(Row("floor + IPW, policy's propensities, unclipped", metric, None, m, s))
    m, s = _final(raw, "floor+ipw given ranking", final)
    rows.append(Row("floor + IPW, propensities given the episode's ranking, unclipped", metric, None, m, s))
    return rows


def figure(raw_csv: Path, out_png: Path) -> None:
    """Spearman rho over episodes: collapse, floor alone, floor plus IPW (and Exp 3's floor)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = read_raw(raw_csv)
    style = {
        "collapse": ("tab:red", "-", "collapse (no floor)"),
        "mixture": ("tab:grey", ":", "Exp 3's floor, MW"),
        "floor": ("tab:blue", "-", "floor alone, MW"),
        "floor+ipw": ("tab:green", "--", "floor + IPW (policy's propensities, clipped)"),
        "floor+ipw unclipped": ("tab:olive", ":", "floor + IPW, unclipped"),
        "floor+ipw given ranking": ("tab:purple", ":", "floor + IPW, propensities given the ranking"),
    }
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for name, (colour, ls, label) in style.items():
        sel = [r for r in rows if r["policy"] == name]
        eps = sorted({int(r["episode"]) for r in sel})
        vals = [[float(r["rho"]) for r in sel if int(r["episode"]) == e] for e in eps]
        m = np.array([np.mean(v) for v in vals])
        s = np.array([np.std(v, ddof=1) if len(v) > 1 else 0.0 for v in vals])
        ax.plot(eps, m, color=colour, ls=ls, label=label)
        ax.fill_between(eps, m - s, m + s, color=colour, alpha=0.12)
    ax.axhline(0.85, color="black", lw=0.6, ls=":")
    ax.axhline(0.30, color="black", lw=0.6, ls=":")
    ax.set(xlabel="episode", ylabel="Spearman rho (worth vs U*)", ylim=(-0.1, 1.0))
    ax.set_title("Feedback loop at a sharp MW-softmax")
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(out_png, dpi=130)
    plt.close(fig)
