"""Beyond the paper: context-adjusted worth against Experiment 2's task-difficulty confound.

On the same episodes as Experiment 2 (and a variant with Experiment 1's coupling), the
paper's global and hard-task-only MW beside ours: a regression of outcomes on retrieval
indicators with per-context intercepts (contexts from task labels, or learned online by
clustering query embeddings), and the within-stratum normalisation.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from memworth import RawWorth
from memworth.signals.context_adjusted import EpisodeStats, RegressionWorth, StratifiedWorth
from memworth.signals.query_clusters import QueryClusters
from memworth_experiments import exp2
from memworth_experiments.common import Result, load_config, mean_std, progress, read_raw, spearman
from memworth_experiments.targets import Bound

ESTIMATORS = ("global", "hard_only", "stratified", "ours_labels", "ours_clusters")
LABELS = {
    "global": "global MW (paper)",
    "hard_only": "hard-task-only MW (paper)",
    "stratified": "stratified MW, task labels",
    "ours_labels": "ours, task labels",
    "ours_clusters": "ours, learned clusters",
}
WORLDS = ("exp2", "variant")


def world_settings(cfg: dict[str, Any], name: str) -> dict[str, Any]:
    """Experiment 2's world (configs/exp2.toml) with this experiment's overrides for ``name``."""
    return load_config("exp2")["world"] | cfg["worlds"].get(name, {})


def queries(seed: int, hard: np.ndarray, q: dict[str, Any]) -> np.ndarray:
    """One query embedding per episode: its task type's topic centroid plus noise, unit length."""
    rng = np.random.default_rng([seed, 2])  # not Exp 2's stream: its episodes stay as they are
    dim, topics = q["dimension"], q["topics"]
    centroids = rng.normal(size=(2 * topics, dim))
    centroids /= np.linalg.norm(centroids, axis=1, keepdims=True)
    topic = rng.integers(topics, size=hard.size) + topics * hard.astype(int)
    vectors = centroids[topic] + rng.normal(0.0, q["noise_sd"], size=(hard.size, dim))
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def run_world(cfg: dict[str, Any], name: str, seed: int, episodes: int) -> tuple[list[dict[str, Any]], float]:
    """Every estimator's rho at every checkpoint of one seed; and the clusters' purity."""
    w, q, est = world_settings(cfg, name), cfg["queries"], cfg["estimators"]
    wd = exp2.world(seed, episodes, w)
    labels = np.where(wd["hard"], "hard", "easy")
    clusters = QueryClusters(q["cluster_threshold"], q["max_clusters"]).assign_many(queries(seed, wd["hard"], q))
    by_label, by_cluster = EpisodeStats(), EpisodeStats()
    regression, stratified = RegressionWorth(est["ridge"]), StratifiedWorth(est["strength"])
    every = cfg["run"]["checkpoint_every"]
    raw = []
    for start in range(0, episodes, every):
        sl = slice(start, min(start + every, episodes))
        by_label.update_batch(wd["retrieved"][sl], wd["success"][sl], labels[sl])
        by_cluster.update_batch(wd["retrieved"][sl], wd["success"][sl], clusters[sl])
        seen = np.asarray(by_label.ids())
        utility = wd["utility"][seen]
        # The paper's estimators read the same episodes, unweighted indicator counts
        # (uniform credit 1/k gives the same ratios).
        hard = by_label.table("hard")
        values = {
            "global": (RawWorth().value(by_label.totals()), np.ones(seen.size, dtype=bool)),
            "hard_only": (RawWorth().value(hard), hard.n > 0),
            "stratified": (stratified.values(by_label), np.ones(seen.size, dtype=bool)),
            "ours_labels": (regression.values(by_label), np.ones(seen.size, dtype=bool)),
            "ours_clusters": (regression.values(by_cluster, seen), np.ones(seen.size, dtype=bool)),
        }
        for estimator, (v, mask) in values.items():
            raw.append(
                {
                    "seed": seed,
                    "world": name,
                    "estimator": estimator,
                    "episode": sl.stop,
                    "rho": spearman(np.asarray(v)[mask], utility[mask]),
                    "evaluated": int(mask.sum()),
                }
            )
    # Purity: the share of episodes whose cluster's majority task type is their own.
    hard_share = np.bincount(clusters, weights=wd["hard"]) / np.bincount(clusters)
    purity = float(np.mean((hard_share[clusters] >= 0.5) == wd["hard"]))
    return raw, purity


def run(cfg: dict[str, Any], seeds: int, episodes: int, show_progress: bool = True) -> Result:
    raw: list[dict[str, Any]] = []
    purity: dict[str, list[float]] = {name: [] for name in WORLDS}
    jobs = [(name, seed) for name in WORLDS for seed in range(seeds)]
    for name, seed in progress(jobs, len(jobs), "context", show_progress):
        rows, p = run_world(cfg, name, seed, episodes)
        raw += rows
        purity[name].append(p)
    notes = [
        f"learned clusters: purity {np.mean(purity[n]):.3f} (share of episodes in a cluster of their own task type) in {n}"
        for n in WORLDS
    ]
    return Result("context", _rows(cfg, raw), raw, {"seeds": seeds, "episodes": episodes}, notes)


def final(raw: list[dict[str, Any]], world: str, estimator: str) -> np.ndarray:
    """Per-seed rho of ``estimator`` in ``world`` at the last checkpoint, in seed order."""
    last = max(r["episode"] for r in raw)
    rows = sorted(
        (r for r in raw if r["world"] == world and r["estimator"] == estimator and r["episode"] == last),
        key=lambda r: r["seed"],
    )
    return np.array([r["rho"] for r in rows])


def _rows(cfg: dict[str, Any], raw: list[dict[str, Any]]) -> list[Bound]:
    last = max(r["episode"] for r in raw)
    metric = f"rho@{last}"
    rows = []
    for world in WORLDS:
        paper = {e: final(raw, world, e) for e in ("global", "hard_only")}
        for ours in ("ours_labels", "ours_clusters", "stratified"):
            mine = final(raw, world, ours)
            m, s = mean_std(mine.tolist())
            for ref, theirs in paper.items():
                bound = float(theirs.mean())
                if world == "variant":
                    bound = max(bound, float(cfg["targets"]["variant_rho"]))
                wins = int((mine > theirs).sum())
                diff = mine - theirs
                se = float(diff.std(ddof=1) / np.sqrt(diff.size)) if diff.size > 1 else 0.0
                note = (
                    f"above it in {wins} of {mine.size} seeds; paired difference {diff.mean():+.3f} +- {se:.3f} (s.e.)"
                )
                if world == "variant":
                    note += f"; rho >= {cfg['targets']['variant_rho']} in {int((mine >= cfg['targets']['variant_rho']).sum())} seeds"
                checked = ours != "stratified"
                rows.append(
                    Bound(
                        f"{world}: {LABELS[ours]} vs {LABELS[ref]}",
                        metric,
                        float(theirs.mean()),
                        m,
                        s,
                        note=note + (f"; target: ours >= {bound:.3f}" if checked else "; shown, not a target"),
                        at_least=bound if checked else None,
                    )
                )
    return rows


def figure(raw_csv: Path, out_png: Path) -> None:
    """Rho over episodes, paper's estimators and ours, one panel per world."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = read_raw(raw_csv)
    colours = {
        "global": "tab:orange",
        "hard_only": "tab:green",
        "stratified": "tab:purple",
        "ours_labels": "tab:blue",
        "ours_clusters": "tab:cyan",
    }
    fig, axes = plt.subplots(1, len(WORLDS), figsize=(11, 4.2), sharey=True)
    for ax, world in zip(axes, WORLDS, strict=True):
        for est in ESTIMATORS:
            sel = [r for r in rows if r["world"] == world and r["estimator"] == est]
            eps = sorted({int(r["episode"]) for r in sel})
            vals = [[float(r["rho"]) for r in sel if int(r["episode"]) == e] for e in eps]
            m = np.array([np.mean(v) for v in vals])
            s = np.array([np.std(v, ddof=1) if len(v) > 1 else 0.0 for v in vals])
            style = "--" if est in ("global", "hard_only") else "-"
            ax.plot(eps, m, label=LABELS[est], color=colours[est], ls=style)
            ax.fill_between(eps, m - s, m + s, alpha=0.12, color=colours[est])
        ax.axhline(0.0, color="grey", lw=0.8)
        title = "Experiment 2 (coupling 0.12)" if world == "exp2" else "variant: coupling 1.0"
        ax.set_title(title)
        ax.set_xlabel("episode")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("Spearman rho (estimate vs U*)")
    axes[0].legend(loc="lower right", fontsize=8)
    fig.suptitle("Context-adjusted worth vs the paper's estimators, same episodes")
    fig.tight_layout()
    fig.savefig(out_png, dpi=130)
    plt.close(fig)
