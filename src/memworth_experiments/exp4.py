"""Experiment 4: a useless memory always retrieved beside a useful one looks just as good."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from memworth import RawWorth, Tracker
from memworth_experiments.common import Result, Row, mean_std, progress, read_raw

ANCHOR, HITCHHIKER = 0, 1


def world(
    seed: int,
    independence: float,
    episodes: int,
    w: dict[str, Any],
    edit: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None,
) -> dict[str, np.ndarray]:
    """One seed's episodes. ``edit(retrieved, spare)`` may change the retrieved sets before
    outcomes are drawn (``spare[t, j]`` is a random other memory for slot ``j``; the
    hitchhiker experiment's ablations use it); without it the draws are unchanged."""
    rng = np.random.default_rng([seed, round(independence * 1000)])
    n, k = w["memories"], w["k"]
    utility = np.concatenate([[w["anchor_utility"], w["hitchhiker_utility"]], rng.uniform(0, 1, n - 2)])
    others = 2 + np.argsort(rng.random((episodes, n - 2)), axis=1)[:, :k]
    paired = rng.random(episodes) < w["pair_rate"]
    alone = rng.random(episodes) < independence
    retrieved = others.copy()
    retrieved[paired, 0] = ANCHOR
    retrieved[paired & ~alone, 1] = HITCHHIKER
    if edit is not None:
        retrieved = edit(retrieved, others)
    p = np.clip(utility[retrieved].mean(axis=1) + rng.normal(0, w["noise_sd"], episodes), 0, 1)
    return {"utility": utility, "retrieved": retrieved, "success": rng.random(episodes) < p}


def run(cfg: dict[str, Any], seeds: int, episodes: int, show_progress: bool = True) -> Result:
    w, every = cfg["world"], cfg["run"]["checkpoint_every"]
    raw: list[dict[str, Any]] = []
    jobs = [(f, s) for f in w["independence"] for s in range(seeds)]
    for independence, seed in progress(jobs, len(jobs), "exp4", show_progress):
        wd = world(seed, independence, episodes, w)
        tracker = Tracker()
        tracker.register(np.arange(w["memories"]))
        for start in range(0, episodes, every):
            sl = slice(start, min(start + every, episodes))
            tracker.record_batch(wd["retrieved"][sl], wd["success"][sl])
            for memory, mid in (("anchor", ANCHOR), ("hitchhiker", HITCHHIKER)):
                c = tracker.counts(mid)
                raw.append(
                    {
                        "seed": seed,
                        "independence": independence,
                        "memory": memory,
                        "episode": sl.stop,
                        "mw": RawWorth().value(c),
                        "mw_eps": c.success / (c.evidence + 1e-12),
                        "evidence": c.evidence,
                    }
                )
    return Result("exp4", _rows(cfg, raw), raw, {"seeds": seeds, "episodes": episodes})


def _final(raw: list[dict[str, Any]], f: float, memory: str, key: str) -> tuple[float, float]:
    last = max(r["episode"] for r in raw)
    return mean_std([r[key] for r in raw if r["independence"] == f and r["memory"] == memory and r["episode"] == last])


def _rows(cfg: dict[str, Any], raw: list[dict[str, Any]]) -> list[Row]:
    tol = cfg["_tolerance"]
    last = max(r["episode"] for r in raw)
    rows = []
    paper = {p["independence"]: p for p in cfg["paper"]}
    for f in cfg["world"]["independence"]:
        ref = paper.get(f, {})
        for memory in ("anchor", "hitchhiker"):
            m, s = _final(raw, f, memory, "mw")
            target = ref.get(memory)
            note = ""
            if memory == "hitchhiker" and f == 1.0:
                me, se = _final(raw, f, memory, "mw_eps")
                rows.append(
                    Row(
                        f"hitchhiker, indep {f:.0%} (definition 3.1)",
                        f"MW@{last}",
                        target,
                        m,
                        s,
                        None,
                        "never retrieved: no evidence, so MW = 0.5 by definition; the paper's 0.000 contradicts it",
                    )
                )
                rows.append(Row(f"hitchhiker, indep {f:.0%} (hits+/(V+eps))", f"MW@{last}", target, me, se, tol, note))
                continue
            if target is None:
                note = "paper gives no number, only the figure"
            rows.append(
                Row(f"{memory}, indep {f:.0%}", f"MW@{last}", target, m, s, tol if target is not None else None, note)
            )
    return rows


def figure(raw_csv: Path, out_png: Path) -> None:
    """Figure 4: anchor and hitchhiker MW over episodes, one panel per independence share."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = read_raw(raw_csv)
    shares = sorted({float(r["independence"]) for r in rows})
    fig, axes = plt.subplots(1, len(shares), figsize=(3.2 * len(shares), 3.4), sharey=True)
    for ax, f in zip(np.atleast_1d(axes), shares, strict=True):
        for memory, colour, true in (("anchor", "tab:blue", 0.90), ("hitchhiker", "tab:red", 0.05)):
            sel = [r for r in rows if float(r["independence"]) == f and r["memory"] == memory]
            eps = sorted({int(r["episode"]) for r in sel})
            vals = [[float(r["mw"]) for r in sel if int(r["episode"]) == e] for e in eps]
            m = np.array([np.mean(v) for v in vals])
            s = np.array([np.std(v, ddof=1) if len(v) > 1 else 0.0 for v in vals])
            ax.plot(eps, m, color=colour, label=memory)
            ax.fill_between(eps, m - s, m + s, color=colour, alpha=0.15)
            ax.axhline(true, color=colour, ls="--", lw=0.8)
        ax.set_title(f"independence {f:.0%}")
        ax.set_xlabel("episode")
        ax.set_ylim(-0.02, 1.0)
        ax.grid(alpha=0.3)
    np.atleast_1d(axes)[0].set_ylabel("MW (dashed: U*)")
    np.atleast_1d(axes)[0].legend(loc="upper right", fontsize=8)
    fig.suptitle("Experiment 4: co-retrieval confound")
    fig.tight_layout()
    fig.savefig(out_png, dpi=130)
    plt.close(fig)
