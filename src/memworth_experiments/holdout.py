"""Past the paper: the lift a 10% holdout measures, against a separate ungoverned twin; policy replay.

See ``configs/holdout.toml``. Per seed, three stores on the agent world (``worlds/agent.toml``: Experiment 5's set-up) and one task
sequence: a governed store with a holdout share, the same without it, and an ungoverned
(similarity-only) twin. Then governance is replayed over the governed store's log under
other settings.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np

from memworth import Blend, MemoryStore
from memworth.embed.encoders import Encoder
from memworth.governance import GovernancePolicy
from memworth.governance.replay import ReplaySettings
from memworth.signals.holdout import lift
from memworth_experiments.common import GuardWatch, Result, Row, guard_note, load_world, progress, read_raw
from memworth_experiments.exp5 import CachedEncoder, default_encoder, draw_task, succeeded

ARMS = ("governed_arm", "holdout_arm", "governed", "ungoverned", "twin_on_held")
ACTIONS = ("suppress", "deprecate", "re-verify", "promote", "demote")


class _Clock:
    def __init__(self, step: float) -> None:
        self.now = 1_700_000_000.0
        self.step = step

    def __call__(self) -> float:
        return self.now


def replay_settings(cfg: dict[str, Any]) -> list[ReplaySettings]:
    """The alternative settings of ``[[replay]]``: policy fields, ``half_life``, ``estimator``."""
    every = int(cfg["world"]["replay_every"])
    out = []
    for spec in cfg["replay"]:
        spec = dict(spec)
        name = spec.pop("name")
        half_life = spec.pop("half_life", None)
        estimator = spec.pop("estimator", "raw")
        policy = dataclasses.replace(GovernancePolicy(), **spec)
        out.append(ReplaySettings(name, policy, half_life, estimator, every))
    return out


def run_seed(world: dict[str, Any], cfg: dict[str, Any], seed: int, episodes: int, encoder: Encoder) -> dict[str, Any]:
    w = cfg["world"]
    shift = world["run"]["phase_shift"]
    clocks = {name: _Clock(60.0 * w["minutes_per_episode"]) for name in ("holdout", "governed", "ungoverned")}
    settings: dict[str, dict[str, Any]] = {
        "holdout": {"holdout": float(w["holdout"])},
        "governed": {},
        # no governance at all: no worth in the score, no exploration, no splitting of suspects
        "ungoverned": {"scoring": Blend(similarity=1.0, worth=0.0), "exploration": 0.0, "ablation": None},
    }
    stores = {
        name: MemoryStore.open("memory://", encoder=encoder, seed=seed, clock=clocks[name], **extra)
        for name, extra in settings.items()
    }
    for s in stores.values():
        s.add_many([{"id": mid, "text": text} for mid, text in world["memories"].items()])
    rng = np.random.default_rng([seed, 1])
    outcomes: dict[str, list[tuple[int, bool, bool]]] = {name: [] for name in stores}
    guard = GuardWatch()  # the holdout store's guard (the governed store without a share has none)
    for t in range(1, episodes + 1):
        _family, task, query = draw_task(world, t, rng)
        for name, store in stores.items():
            clocks[name].now += clocks[name].step
            recall = store.recall(query, k=world["run"]["k"], episode_id=f"s{seed}-t{t}")
            ok = succeeded(task, recall.texts)
            store.record(recall.episode, ok)
            outcomes[name].append((t, ok, recall.episode.holdout))
            if name != "ungoverned" and t % w["govern_every"] == 0:
                report = store.govern(apply=True)
                if name == "holdout":
                    guard.see(t, report)
    assert all(s.replay().consistent for s in stores.values())
    from_log = stores["holdout"].holdout_report()  # the library's own tally, all episodes
    replay = stores["governed"].replay_policy(*replay_settings(cfg), every=int(w["replay_every"]))
    for s in stores.values():
        s.close()

    def tally(name: str, holdout: bool | None, only: set[int] | None = None) -> tuple[int, int]:
        rows = [
            ok
            for t, ok, h in outcomes[name]
            if t > shift and (holdout is None or h == holdout) and (only is None or t in only)
        ]
        return sum(rows), len(rows)

    held = {t for t, _ok, h in outcomes["holdout"] if h}

    arms = {
        "governed_arm": tally("holdout", False),
        "holdout_arm": tally("holdout", True),
        "governed": tally("governed", None),
        "ungoverned": tally("ungoverned", None),
        "twin_on_held": tally("ungoverned", None, held),
    }
    all_eps = [(ok, h) for _t, ok, h in outcomes["holdout"]]
    assert (from_log.governed_n, from_log.holdout_n) == (
        sum(not h for _, h in all_eps),
        sum(h for _, h in all_eps),
    )
    return {"arms": arms, "replay": replay.table(), "guard": guard.row()}


def run(cfg: dict[str, Any], seeds: int, episodes: int, show_progress: bool = True) -> Result:
    world = load_world("agent")
    encoder = CachedEncoder(default_encoder())
    raw: list[dict[str, Any]] = []
    for seed in progress(range(seeds), seeds, "holdout", show_progress):
        got = run_seed(world, cfg, seed, episodes, encoder)
        row: dict[str, Any] = {"seed": seed, "kind": "arms", "settings": ""}
        for arm in ARMS:
            row[f"{arm}_successes"], row[f"{arm}_n"] = got["arms"][arm]
        row |= {a: "" for a in (*ACTIONS, "differ")} | got["guard"]
        raw.append(row)
        for r in got["replay"]:
            raw.append(
                {"seed": seed, "kind": "replay", "settings": r["settings"]}
                | {f"{arm}_{x}": "" for arm in ARMS for x in ("successes", "n")}
                | {a: r[a] for a in (*ACTIONS, "differ")}
                | {key: "" for key in got["guard"]}
            )
    rows, notes = _rows(raw, float(cfg["world"]["holdout"]))
    return Result("holdout", rows, raw, {"seeds": seeds, "episodes": episodes, "encoder": encoder.name}, notes)


def pooled(raw: list[dict[str, Any]], arm: str) -> tuple[int, int]:
    arms = [r for r in raw if r["kind"] == "arms"]
    return sum(int(r[f"{arm}_successes"]) for r in arms), sum(int(r[f"{arm}_n"]) for r in arms)


def _rows(raw: list[dict[str, Any]], share: float) -> tuple[list[Row], list[str]]:
    inside = lift(pooled(raw, "governed_arm"), pooled(raw, "holdout_arm"))
    twin = lift(pooled(raw, "governed"), pooled(raw, "ungoverned"), method="wald")
    twin_newcombe = lift(pooled(raw, "governed"), pooled(raw, "ungoverned"))
    half = (inside.upper - inside.lower) / 2
    rows = [
        Row("success: governed arm / governed store", "rate", inside.governed_rate, twin.governed_rate, 0.0),
        Row("success: holdout arm / ungoverned twin", "rate", inside.holdout_rate, twin.holdout_rate, 0.0),
        Row(
            "lift: holdout (paper column) vs twin (ours)",
            "lift",
            inside.lift,
            twin.lift,
            half,
            None,
            f"holdout {inside.lower:+.3f} to {inside.upper:+.3f} (Newcombe, {inside.holdout_n} held-out episodes); "
            f"twin {twin.lower:+.3f} to {twin.upper:+.3f} (Wald, as the demo), Newcombe "
            f"{twin_newcombe.lower:+.3f} to {twin_newcombe.upper:+.3f}",
        ),
        Row(
            "holdout arm = twin on the same episodes",
            "rate",
            inside.holdout_rate,
            pooled(raw, "twin_on_held")[0] / max(1, pooled(raw, "twin_on_held")[1]),
            0.0,
            None,
            "both rank by similarity alone, so the same episodes must give the same outcomes",
        ),
        Row(
            "lift difference within the holdout's CI",
            "agree",
            None,
            float(inside.lower <= twin.lift <= inside.upper),
            abs(inside.lift - twin.lift),
            None,
            "1 when the twin's lift lies inside the holdout's interval; std column: |difference|",
        ),
    ]
    notes = [
        f"after the shift; {share:.0%} holdout; pooled over seeds",
        guard_note("the store with the holdout share", [r for r in raw if r["kind"] == "arms"]),
        "policy replay over the governed store's log:",
    ]
    replay = [r for r in raw if r["kind"] == "replay"]
    names = list(dict.fromkeys(r["settings"] for r in replay))
    notes.append(f"  {'settings':<16} " + " ".join(f"{a:>9}" for a in (*ACTIONS, "differ")) + "  (mean per seed)")
    for name in names:
        sel = [r for r in replay if r["settings"] == name]
        means = [np.mean([float(r[a]) for r in sel]) for a in (*ACTIONS, "differ")]
        notes.append(f"  {name:<16} " + " ".join(f"{m:>9.1f}" for m in means))
        if name != "current":
            rows.append(
                Row(
                    f"replay: {name}",
                    "differ",
                    None,
                    float(means[-1]),
                    float(np.std([float(r["differ"]) for r in sel], ddof=1)) if len(sel) > 1 else 0.0,
                    None,
                    "memories that end differently from the current settings; "
                    + ", ".join(f"{a} {m:.1f}" for a, m in zip(ACTIONS, means, strict=False)),
                )
            )
    return rows, notes


def figure(raw_csv: Path, out_png: Path) -> None:
    """Success rates of the four arms (pooled, with Wilson intervals) and the two lifts."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from memworth.signals.holdout import wilson_interval

    rows: list[dict[str, Any]] = [dict(r) for r in read_raw(raw_csv)]
    fig, axes = plt.subplots(1, 2, figsize=(9.5, 3.8))
    labels = ["governed arm", "holdout arm", "governed store", "ungoverned twin"]
    for i, arm in enumerate(ARMS[:4]):
        s, n = pooled(rows, arm)
        lo, hi = wilson_interval(s, n)
        axes[0].bar(i, s / n, color="tab:blue" if i < 2 else "tab:grey", alpha=0.7)
        axes[0].errorbar(i, s / n, yerr=[[s / n - lo], [hi - s / n]], color="black", capsize=3)
    axes[0].set_xticks(range(4), labels, fontsize=8)
    axes[0].set_ylim(0, 1)
    axes[0].set_title("success after the shift (95% Wilson)", fontsize=10)
    inside = lift(pooled(rows, "governed_arm"), pooled(rows, "holdout_arm"))
    twin = lift(pooled(rows, "governed"), pooled(rows, "ungoverned"), method="wald")
    for i, r in enumerate((inside, twin)):
        axes[1].errorbar(i, r.lift, yerr=[[r.lift - r.lower], [r.upper - r.lift]], fmt="o", capsize=4)
        axes[1].text(i + 0.05, r.lift, f" {r.lift:+.3f}", fontsize=8)
    axes[1].axhline(0, color="black", lw=0.6)
    axes[1].set_xticks(range(2), ["holdout lift (Newcombe)", "twin lift (Wald)"])
    axes[1].set_xlim(-0.5, 1.5)
    axes[1].set_title("lift of governance, 95% CI", fontsize=10)
    for ax in axes:
        ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    fig.savefig(out_png, dpi=130)
    plt.close(fig)
