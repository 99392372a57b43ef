"""Experiment 1: does MW rank memories by true utility when every assumption holds?"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import numpy as np

from memworth import BetaMean, Taxonomy, Tracker
from memworth_experiments.common import Result, Row, mean_std, paired_interval, progress, read_raw, spearman

STRATEGIES = ("no_update", "uniform", "score", "oracle", "beta")
LABELS = {
    "no_update": "No update",
    "uniform": "Uniform",
    "score": "Ours (sim-wt.)",
    "oracle": "Oracle",
    "beta": "Beta-Bernoulli (a=b=1)",
}


def similarity_proxy(utility: np.ndarray, r: float, rng: np.random.Generator) -> np.ndarray:
    """A per-memory score in [0, 1] whose in-sample Pearson correlation with ``utility`` is ``r``."""
    zu = (utility - utility.mean()) / utility.std()
    noise = rng.standard_normal(utility.size)
    noise -= noise.mean()
    noise -= (noise @ zu) / (zu @ zu) * zu  # orthogonal to utility
    noise /= noise.std()
    raw = r * zu + np.sqrt(1 - r * r) * noise
    return (raw - raw.min()) / (raw.max() - raw.min())


def world(seed: int, episodes: int, w: dict[str, Any]) -> dict[str, np.ndarray]:
    """Utilities, similarity proxy, uniform retrievals and outcomes of one seed."""
    rng = np.random.default_rng(seed)
    n, k = w["memories"], w["k"]
    utility = rng.uniform(0, 1, n)
    sim = similarity_proxy(utility, w["similarity_r"], rng)
    retrieved = np.argsort(rng.random((episodes, n)), axis=1)[:, :k]
    p = np.clip(utility[retrieved].mean(axis=1) + rng.normal(0, w["noise_sd"], episodes), 0, 1)
    success = rng.random(episodes) < p
    return {"utility": utility, "sim": sim, "retrieved": retrieved, "success": success}


def run(cfg: dict[str, Any], seeds: int, episodes: int, show_progress: bool = True) -> Result:
    w, every = cfg["world"], cfg["run"]["checkpoint_every"]
    taxonomy = Taxonomy(**cfg["taxonomy"])
    beta = BetaMean(1.0, 1.0)
    raw: list[dict[str, Any]] = []
    for seed in progress(range(seeds), seeds, "exp1", show_progress):
        wd = world(seed, episodes, w)
        trackers = {s: Tracker(w_min=w["w_min"]) for s in ("uniform", "score", "oracle")}
        weights = {"uniform": None, "score": wd["sim"], "oracle": wd["utility"]}
        ids = np.arange(w["memories"])
        for start, stop in _windows(episodes, every, cfg["run"]["fine_every"], cfg["run"]["fine_until"]):
            sl = slice(start, stop)
            r, y = wd["retrieved"][sl], wd["success"][sl]
            for name, tracker in trackers.items():
                per_memory = weights[name]
                tracker.record_batch(r, y, None if per_memory is None else per_memory[r])
            estimates = {
                "no_update": np.full(w["memories"], 0.5),
                **{name: t.values(ids) for name, t in trackers.items()},
                "beta": trackers["uniform"].values(ids, estimator=beta),
            }
            for name in STRATEGIES:
                table = trackers.get(name, trackers["uniform"]).table(ids)
                classes = taxonomy.classify_table(table, estimates[name])
                raw.append(
                    {
                        "seed": seed,
                        "strategy": name,
                        "episode": sl.stop,
                        "rho": spearman(estimates[name], wd["utility"]),
                        "low_value": int((classes == "low").sum()),
                        "uncertain": int((classes == "uncertain").sum()),
                    }
                )
    return Result("exp1", _rows(cfg, raw, episodes), raw, {"seeds": seeds, "episodes": episodes}, _notes(raw))


def _windows(episodes: int, every: int, fine: int, fine_until: int) -> list[tuple[int, int]]:
    """Checkpoint windows: every ``fine`` episodes up to ``fine_until``, then every ``every``.

    Examples
    --------
    >>> _windows(1500, 500, 250, 1000)
    [(0, 250), (250, 500), (500, 750), (750, 1000), (1000, 1500)]
    """
    stops = sorted({*range(every, episodes + 1, every), *range(fine, min(fine_until, episodes) + 1, fine), episodes})
    return list(zip([0, *stops[:-1]], stops, strict=True))


def _select(raw: list[dict[str, Any]], strategy: str, episode: int, key: str) -> list[float]:
    return [r[key] for r in raw if r["strategy"] == strategy and r["episode"] == episode]


def _rows(cfg: dict[str, Any], raw: list[dict[str, Any]], episodes: int) -> list[Row]:
    tol = cfg["_tolerance"]
    rows = []
    present = {r["episode"] for r in raw}
    for entry in cfg["paper"]:
        for ep_text, paper in entry["rho"].items():
            ep = int(ep_text)
            if ep not in present:
                continue
            m, s = mean_std(_select(raw, entry["strategy"], ep, "rho"))
            rows.append(Row(LABELS[entry["strategy"]], f"rho@{ep}", paper, m, s, tol, source=entry["source"]))
            paper_std = entry["std"][ep_text]
            seeds = len(_select(raw, entry["strategy"], ep, "rho"))
            std_tol = round(float(2 * paper_std / np.sqrt(2 * (seeds - 1))), 4)
            rows.append(
                Row(
                    LABELS[entry["strategy"]],
                    f"std rho@{ep}",
                    paper_std,
                    s,
                    0.0,
                    std_tol,
                    "seed std; tolerance: twice the standard error of a seed std at the paper's value",
                    source=entry["source"],
                    known_miss=cfg["std_known_miss"].get(ep_text, ""),
                )
            )
        if "delta" in entry and cfg["delta_episode"] in present:
            rows.append(_delta_row(cfg, raw, entry, cfg["delta_episode"]))
    final = max(present)
    for strategy, paper in cfg["paper_low_value"].items():
        m, s = mean_std(_select(raw, strategy, final, "low_value"))
        rows.append(
            Row(
                LABELS[strategy],
                f"low@{final}",
                paper,
                m,
                s,
                None,
                "count per seed; paper gives no episode count",
                source=cfg["low_value_source"],
            )
        )
    rows += _low_value_rows(cfg, raw)
    for strategy in ("uniform", "score", "oracle"):
        m, s = mean_std(_select(raw, strategy, final, "uncertain"))
        rows.append(Row(LABELS[strategy], f"uncertain@{final}", None, m, s))
    return rows


def _delta_row(cfg: dict[str, Any], raw: list[dict[str, Any]], entry: dict[str, Any], episode: int) -> Row:
    """Table 1's Delta: a strategy's rho minus Uniform's at ``episode``, paired by seed (same worlds)."""

    def by_seed(strategy: str) -> np.ndarray:
        sel = sorted((r for r in raw if r["strategy"] == strategy and r["episode"] == episode), key=lambda r: r["seed"])
        return np.array([r["rho"] for r in sel])

    diff = by_seed(entry["strategy"]) - by_seed("uniform")
    mean, low, high = paired_interval(diff) if diff.size > 1 else (float(diff.mean()), float("nan"), float("nan"))
    return Row(
        f"{LABELS[entry['strategy']]} - Uniform",
        f"Delta@{episode}",
        entry["delta"],
        mean,
        float(np.std(diff, ddof=1)) if diff.size > 1 else 0.0,
        cfg["_tolerance"],
        f"paired by seed (same worlds); 95% CI {low:+.4f} to {high:+.4f}",
        source=entry["source"],
    )


def low_value_curve(raw: list[dict[str, Any]], strategy: str) -> list[tuple[int, float, float]]:
    """Mean and seed std of the low-value count per checkpoint: ``(episode, mean, std)``."""
    return [(e, *mean_std(_select(raw, strategy, e, "low_value"))) for e in sorted({r["episode"] for r in raw})]


def _low_value_rows(cfg: dict[str, Any], raw: list[dict[str, Any]]) -> list[Row]:
    """The paper's 2.1 / 5.2 at the checkpoints nearest them: each alone, then both at once.

    The paper gives no episode count, so the episode is ours, chosen to match: every
    such row reads "matched after documented tuning" when it matches.
    """
    paper, tol, source = cfg["paper_low_value"], cfg["low_value_tolerance"], cfg["low_value_source"]
    curves = {s: {e: m for e, m, _ in low_value_curve(raw, s)} for s in paper}
    rows = []
    for strategy, target in paper.items():
        curve = curves[strategy]
        near = min(curve, key=lambda e: (abs(curve[e] - target), e))
        within = [e for e in curve if abs(curve[e] - target) <= tol]
        span = f"{min(within)}-{max(within)}" if within else "none"
        rows.append(
            Row(
                LABELS[strategy],
                f"low@{near}",
                target,
                curve[near],
                mean_std(_select(raw, strategy, near, "low_value"))[1],
                tol,
                f"checkpoints within the tolerance: {span}",
                source=source,
                tuning="episode chosen as the checkpoint nearest the paper's count (the paper gives none)",
            )
        )
    both = min(curves["uniform"], key=lambda e: max(abs(curves[s][e] - t) for s, t in paper.items()))
    ratio = [curves["score"][e] / curves["uniform"][e] for e in curves["uniform"] if curves["uniform"][e] > 0]
    for strategy, target in paper.items():
        rows.append(
            Row(
                f"{LABELS[strategy]}, both at one checkpoint",
                f"low@{both}",
                target,
                curves[strategy][both],
                mean_std(_select(raw, strategy, both, "low_value"))[1],
                tol,
                f"sim-wt. / uniform count ratio {min(ratio):.2f}-{max(ratio):.2f} over the run; the paper's is "
                f"{paper['score'] / paper['uniform']:.2f}",
                source=source,
                tuning="episode chosen as the checkpoint nearest both counts (the paper gives none)",
                known_miss=cfg["low_value_pair_known_miss"],
            )
        )
    return rows


def _notes(raw: list[dict[str, Any]]) -> list[str]:
    """Where along the run the low-value counts meet the paper's 2.1 and 5.2."""
    notes = []
    for strategy, target in (("uniform", 2.1), ("score", 5.2)):
        curve = low_value_curve(raw, strategy)
        peak = max(curve, key=lambda c: c[1])
        after = next((e for e, m, _ in curve if e > peak[0] and m <= target), None)
        notes.append(
            f"{LABELS[strategy]}: low-value count peaks at {peak[1]:.1f} (episode {peak[0]}) and first falls to "
            f"the paper's {target} at episode {after}"
        )
    return notes


def figure(raw_csv: Path, out_png: Path) -> None:
    """Figure 1: mean rho over episodes per strategy, shaded +-1 std; right, the low-value
    counts over episodes beside the paper's 2.1 and 5.2. Also writes ``low_value.csv``
    (mean and seed std of the count per strategy and checkpoint) beside the figure."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = read_raw(raw_csv)
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(12, 4.2))
    curves = []
    for name in STRATEGIES:
        eps = sorted({int(r["episode"]) for r in rows if r["strategy"] == name})
        sel = [r for r in rows if r["strategy"] == name]
        vals = [[float(r["rho"]) for r in sel if int(r["episode"]) == e] for e in eps]
        m, s = np.array([np.mean(v) for v in vals]), np.array([np.std(v, ddof=1) if len(v) > 1 else 0 for v in vals])
        ax.plot(eps, m, label=LABELS[name], linestyle="--" if name == "beta" else "-")
        ax.fill_between(eps, m - s, m + s, alpha=0.15)
        if name in ("uniform", "score", "oracle"):
            low = [[float(r["low_value"]) for r in sel if int(r["episode"]) == e] for e in eps]
            lm = np.array([np.mean(v) for v in low])
            ls = np.array([np.std(v, ddof=1) if len(v) > 1 else 0.0 for v in low])
            line = bx.plot(eps, lm, label=LABELS[name])[0]
            bx.fill_between(eps, np.maximum(lm - ls, 0), lm + ls, alpha=0.08, color=line.get_color())
            curves += [(name, e, a, b) for e, a, b in zip(eps, lm, ls, strict=True)]
    ax.set_xlabel("episode")
    ax.set_ylabel("Spearman rho (MW vs U*)")
    ax.set_title("Experiment 1: Memory Worth calibration")
    ax.set_ylim(-0.1, 1.0)
    ax.grid(alpha=0.3)
    ax.legend(loc="center right")
    bx.axhline(2.1, color="tab:blue", ls=":", lw=1, label="paper: uniform 2.1")
    bx.axhline(5.2, color="tab:orange", ls=":", lw=1, label="paper: sim-wt. 5.2")
    bx.set_xscale("log")
    bx.set_xlabel("episode (log scale)")
    bx.set_ylabel("low-value memories per seed")
    bx.set_title("low-value counts (theta_L 0.40, V_min 10 retrievals)")
    bx.grid(alpha=0.3)
    bx.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    fig.savefig(out_png, dpi=130)
    plt.close(fig)
    with (out_png.parent / "low_value.csv").open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["strategy", "episode", "low_value_mean", "low_value_std"])
        writer.writerows((name, e, round(float(m), 4), round(float(sd), 4)) for name, e, m, sd in curves)
