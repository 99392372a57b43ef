"""Experiment 4: a useless memory always retrieved beside a useful one looks just as good.

Paired design: in a seed, every independence level shares the utility pool and every
per-episode draw (the other slots, the outcome noise, the success draw, and the uniform
draw that decides whether an episode is independent, so the independent episodes of a
lower share are among those of a higher one). The levels differ only in whether the
hitchhiker takes its slot, so the anchor's worth moves with the share alone.

Expected worth, from the design (uniform credit: a memory's worth is the success rate of
the episodes that retrieve it). An episode with the pair has the anchor, the hitchhiker
and k - 2 others drawn without replacement from the other N - 2, whose mean utility
``u`` (the seed's pool) is the expected mean of any draw of them; without the
hitchhiker it has k - 1 others. Success has probability clip(mean U* of the set + noise,
0, 1); the clip is left out (the set's mean is ~0.49 +- 0.13 with the noise, so it binds
with probability ~1e-4). Hence

* together: ``(U_a + U_h + (k - 2) u) / k``,  alone: ``(U_a + (k - 1) u) / k``;
* anchor (in every paired episode): ``(1 - f) together + f alone``
  ``= together + f (u - U_h) / k``, linear in the independence share f with slope
  ``(u - U_h) / k`` (0.05625 at u = 0.5: 0.494 at 0%, 0.550 at 100%);
* hitchhiker (only with the anchor): ``together`` at every share below 1 (0.494), and no
  evidence at all at f = 1.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from memworth import RawWorth, Tracker
from memworth_experiments.common import Result, Row, mean_std, paired_interval, progress, read_raw, tolerance_at

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
    # One stream per seed, the same at every independence share (the paired design);
    # at share 0 these are the draws the unpaired version made, so the hitchhiker
    # experiment, which runs share 0, is unchanged.
    rng = np.random.default_rng([seed, 0])
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


def expected_worth(utility: np.ndarray, independence: float, k: int) -> tuple[float, float]:
    """The design's expected (anchor, hitchhiker) worth for one pool (module docstring).

    The hitchhiker's is NaN at share 1 (never retrieved: no evidence).

    Examples
    --------
    >>> pool = np.array([0.90, 0.05] + [0.5] * 98)
    >>> [round(x, 4) for x in expected_worth(pool, 0.0, 8)]
    [0.4938, 0.4938]
    >>> round(expected_worth(pool, 1.0, 8)[0], 4)
    0.55
    """
    anchor, hitchhiker, others = float(utility[ANCHOR]), float(utility[HITCHHIKER]), float(utility[2:].mean())
    together = (anchor + hitchhiker + (k - 2) * others) / k
    alone = (anchor + (k - 1) * others) / k
    return (1 - independence) * together + independence * alone, together if independence < 1 else float("nan")


def run(cfg: dict[str, Any], seeds: int, episodes: int, show_progress: bool = True) -> Result:
    w, every = cfg["world"], cfg["run"]["checkpoint_every"]
    raw: list[dict[str, Any]] = []
    jobs = [(f, s) for f in w["independence"] for s in range(seeds)]
    for independence, seed in progress(jobs, len(jobs), "exp4", show_progress):
        wd = world(seed, independence, episodes, w)
        expected = dict(zip(("anchor", "hitchhiker"), expected_worth(wd["utility"], independence, w["k"]), strict=True))
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
                        "expected": expected[memory],
                    }
                )
    return Result("exp4", _rows(cfg, raw), raw, {"seeds": seeds, "episodes": episodes})


def _per_seed(raw: list[dict[str, Any]], f: float, memory: str, key: str) -> np.ndarray:
    last = max(r["episode"] for r in raw)
    sel = sorted(
        (r for r in raw if r["independence"] == f and r["memory"] == memory and r["episode"] == last),
        key=lambda r: r["seed"],
    )
    return np.array([r[key] for r in sel], dtype=float)


def _final(raw: list[dict[str, Any]], f: float, memory: str, key: str) -> tuple[float, float]:
    return mean_std(_per_seed(raw, f, memory, key))


def _rows(cfg: dict[str, Any], raw: list[dict[str, Any]]) -> list[Row]:
    last = max(r["episode"] for r in raw)
    tol = tolerance_at(cfg, last, cfg["paper_episode"])
    shares = cfg["world"]["independence"]
    source = cfg["paper_source"]
    rows = []
    paper = {p["independence"]: p for p in cfg["paper"]}
    for f in shares:
        ref = paper.get(f, {})
        for memory in ("anchor", "hitchhiker"):
            m, s = _final(raw, f, memory, "mw")
            expected = _per_seed(raw, f, memory, "expected")
            target = ref.get(memory)
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
                        source=source,
                        contradiction="definition 3.1 gives 0.5 without evidence; the paper's 0.000 contradicts it",
                    )
                )
                rows.append(
                    Row(
                        f"hitchhiker, indep {f:.0%} (hits+/(V+eps))",
                        f"MW@{last}",
                        target,
                        me,
                        se,
                        tol,
                        source=source,
                        tuning="the reading hits+ / (hits+ + hits- + epsilon) is adopted only to explain the 0.000",
                    )
                )
                continue
            note = f"design's expectation {np.mean(expected):.4f}"
            if target is None:
                note += "; paper gives no number, only the figure"
            if memory == "anchor" and f == 1.0:
                note += "; the paper's 'not yet converged to U* = 0.90' misreads Theorem 4.1 (MW -> p+, not U*)"
            rows.append(
                Row(
                    f"{memory}, indep {f:.0%}",
                    f"MW@{last}",
                    target,
                    m,
                    s,
                    tol if target is not None else None,
                    note,
                    source=source if target is not None else "",
                )
            )
            mw = _per_seed(raw, f, memory, "mw")
            if np.isfinite(expected).all() and mw.size > 1:
                mean, low, high = paired_interval(mw - expected)
                rows.append(
                    Row(
                        f"{memory}, indep {f:.0%}: ours - expectation",
                        f"MW@{last}",
                        None,
                        mean,
                        float(np.std(mw - expected, ddof=1)),
                        note=f"per seed, against its own pool's expectation; 95% CI {low:+.4f} to {high:+.4f}",
                    )
                )
    rows += _slope_rows(raw, shares, last)
    return rows


def _slope_rows(raw: list[dict[str, Any]], shares: list[float], last: int) -> list[Row]:
    """The anchor's worth against the independence share: least-squares slope and monotonicity."""
    if len(shares) < 2:
        return []
    mw = np.stack([_per_seed(raw, f, "anchor", "mw") for f in shares])
    expected = np.stack([_per_seed(raw, f, "anchor", "expected") for f in sorted(shares)])
    x = np.asarray(shares, dtype=float)
    slope = np.polyfit(x, mw, 1)[0]
    design = np.polyfit(x, expected, 1)[0]
    order = np.argsort(x)
    rising = np.all(np.diff(mw[order], axis=0) > 0, axis=0)
    level = " / ".join(f"{v:.3f}" for v in mw[order].mean(axis=1))
    return [
        Row(
            "anchor: slope of MW over independence share",
            f"dMW/df@{last}",
            None,
            *mean_std(slope),
            note=f"design's slope (u - U_h) / k = {design.mean():.4f}; means by share {level}",
        ),
        Row(
            "anchor: seeds rising at every share step",
            "share of seeds",
            None,
            float(rising.mean()),
            0.0,
            note="paired design: the levels differ only in the hitchhiker's slot",
        ),
    ]


def figure(raw_csv: Path, out_png: Path) -> None:
    """Figure 4: anchor and hitchhiker MW over episodes, one panel per independence share;
    last panel: final MW against the share, beside the design's expectation."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = read_raw(raw_csv)
    shares = sorted({float(r["independence"]) for r in rows})
    last = max(int(r["episode"]) for r in rows)
    fig, axes = plt.subplots(1, len(shares) + 1, figsize=(3.2 * (len(shares) + 1), 3.4))
    colours = {"anchor": "tab:blue", "hitchhiker": "tab:red"}
    for ax, f in zip(axes[:-1], shares, strict=True):
        for memory, true in (("anchor", 0.90), ("hitchhiker", 0.05)):
            sel = [r for r in rows if float(r["independence"]) == f and r["memory"] == memory]
            eps = sorted({int(r["episode"]) for r in sel})
            vals = [[float(r["mw"]) for r in sel if int(r["episode"]) == e] for e in eps]
            m = np.array([np.mean(v) for v in vals])
            s = np.array([np.std(v, ddof=1) if len(v) > 1 else 0.0 for v in vals])
            ax.plot(eps, m, color=colours[memory], label=memory)
            ax.fill_between(eps, m - s, m + s, color=colours[memory], alpha=0.15)
            ax.axhline(true, color=colours[memory], ls="--", lw=0.8)
        ax.set_title(f"independence {f:.0%}")
        ax.set_xlabel("episode")
        ax.set_ylim(-0.02, 1.0)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("MW (dashed: U*)")
    axes[0].legend(loc="upper right", fontsize=8)
    ax = axes[-1]
    for memory, colour in colours.items():
        final = [r for r in rows if r["memory"] == memory and int(r["episode"]) == last]
        x = [f for f in shares if any(float(r["independence"]) == f and r["expected"] != "nan" for r in final)]
        got = [np.mean([float(r["mw"]) for r in final if float(r["independence"]) == f]) for f in x]
        want = [np.mean([float(r["expected"]) for r in final if float(r["independence"]) == f]) for f in x]
        ax.plot(x, want, color=colour, ls="--", lw=1, label=f"{memory}: design")
        ax.plot(x, got, color=colour, marker="o", ls="none", label=f"{memory}: ours")
    ax.set_title(f"MW@{last} vs independence")
    ax.set_xlabel("independence share")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", fontsize=7)
    fig.suptitle("Experiment 4: co-retrieval confound (paired design)")
    fig.tight_layout()
    fig.savefig(out_png, dpi=130)
    plt.close(fig)
