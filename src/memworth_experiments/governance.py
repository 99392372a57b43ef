"""Past the paper (issue 14): governance that acts, on two agent worlds, against an ungoverned twin.

See ``configs/governance.toml``. Per world and seed the demo's agent loop
(:func:`memworth_experiments.demo.run_agent`) runs the governed store, its ungoverned twin
and, on the first seeds, the ablations; this module tallies what the issue asks for.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import numpy as np

from memworth.governance import GovernancePolicy
from memworth_experiments.common import Result, Row, guard_note, load_world, progress, read_raw
from memworth_experiments.demo import run_agent
from memworth_experiments.exp5 import CachedEncoder, default_encoder, holds_answer

PROTECTIVE = ("re-verify", "suppress", "deprecate")


def store_settings(spec: dict[str, Any]) -> dict[str, Any]:
    """An arm's store settings from the config (``policy`` fields, ``ablation = "none"``)."""
    out = dict(spec)
    if "policy" in out:
        out["policy"] = dataclasses.replace(GovernancePolicy(), **out["policy"])
    if out.get("ablation") == "none":
        out["ablation"] = None
    return out


def tally(
    run: dict[str, Any], base: dict[str, Any], world: dict[str, Any], spec: dict[str, Any], early_end: int
) -> dict[str, Any]:
    """One governed run against the twin: success counts and what governance did to which memory."""
    shift = world["run"]["phase_shift"]
    g, b = run["outcomes"], base["outcomes"]
    families = np.array(run["families"])
    t = np.arange(1, g.size + 1)
    affected = (families == spec["affected"]) & (t > shift) & (t <= early_end)
    after = t > shift
    flagged: dict[str, int] = {}
    released: dict[str, int] = {}
    for e in run["events"]:
        if e["action"] in PROTECTIVE and e["memory"] not in flagged:
            flagged[e["memory"]] = e["episode"]
        if e["action"] == "release" and e["memory"] in flagged and e["memory"] not in released:
            released[e["memory"]] = e["episode"]
    stale = spec["stale"]
    useful = sorted(m for m in flagged if m != stale)
    answering = answers_a_task(world)
    return {
        "early_gov_s": int(g[affected].sum()),
        "early_base_s": int(b[affected].sum()),
        "early_n": int(affected.sum()),
        "after_gov_s": int(g[after].sum()),
        "after_base_s": int(b[after].sum()),
        "after_n": int(after.sum()),
        "stale_flagged": flagged.get(stale, 0),
        "useful_flagged": ";".join(f"{m}@{flagged[m]}" for m in useful),
        "useful_released": ";".join(f"{m}@{released[m]}" for m in useful if m in released),
        "answering_flagged": ";".join(f"{m}@{flagged[m]}" for m in useful if m in answering),
    } | run["guard"]


def answers_a_task(world: dict[str, Any]) -> set[str]:
    """The memories that hold the answer to at least one task of ``world`` (any phase).

    A memory that answers no task (a distractor: in the agent world, Paris or DNA) cannot
    make an episode succeed, so quarantining it costs the agent nothing; the tally counts
    every memory but the stale one as useful (the issue's strict reading) and says apart
    which of those answer a task.
    """
    tasks = [task for family in world["tasks"].values() for task in family]
    return {m for m, text in world["memories"].items() if any(holds_answer(task, text) for task in tasks)}


def run_seed(
    name: str, cfg: dict[str, Any], seed: int, episodes: int, encoder: Any, arms: dict[str, dict[str, Any]]
) -> list[dict[str, Any]]:
    """One seed of world ``name``: the ungoverned twin, the governed agent and ``arms``, tallied.

    An arm with ``record_used`` (not a store setting) is an agent that says which memory it
    answered from (``record(..., used=[it])``; ``unanswered``: what it records when none
    answered, :func:`memworth_experiments.demo.run_agent`); it is compared with an ungoverned
    twin that does the same (run once per seed), so its lift is governance's, not the credit rule's."""
    w, world, spec = cfg["world"], load_world(name), cfg["worlds"][name]
    early_end = min(int(w["early_end"]), episodes)
    minutes = float(w["minutes_per_episode"])
    plain = (False, "all")
    bases = {plain: run_agent(world, seed, episodes, encoder, "memory://", None, minutes)}
    plays = {"governed": (run_agent(world, seed, episodes, encoder, "memory://", int(w["govern_every"]), minutes), plain)}
    for arm, spec_arm in arms.items():
        settings = dict(spec_arm)
        agent = (bool(settings.pop("record_used", False)), str(settings.pop("unanswered", "all")))
        if agent not in bases:
            bases[agent] = run_agent(world, seed, episodes, encoder, "memory://", None, minutes, None, *agent)
        run = run_agent(world, seed, episodes, encoder, "memory://", int(w["govern_every"]), minutes, settings, *agent)
        plays[arm] = (run, agent)
    return [
        {"world": name, "seed": seed, "arm": arm} | tally(p, bases[agent], world, spec, early_end)
        for arm, (p, agent) in plays.items()
    ]


def run(cfg: dict[str, Any], seeds: int, episodes: int, show_progress: bool = True) -> Result:
    w = cfg["world"]
    encoder = CachedEncoder(default_encoder())
    raw: list[dict[str, Any]] = []
    chosen = cfg["quick"].get("arms") if cfg.get("_quick") else None
    arms = {
        name: store_settings(spec) for name, spec in cfg.get("arms", {}).items() if chosen is None or name in chosen
    }
    ablation_seeds = 1 if cfg.get("_quick") else min(seeds, int(w["ablation_seeds"]))
    jobs = [(name, seed) for name in cfg["worlds"] for seed in range(seeds)]
    for name, seed in progress(jobs, len(jobs), "governance", show_progress):
        arms_here = arms if seed < ablation_seeds else {}
        raw += run_seed(name, cfg, seed, episodes, encoder, arms_here)
    rows, notes = _rows(raw, cfg, episodes)
    return Result("governance", rows, raw, {"seeds": seeds, "episodes": episodes, "encoder": encoder.name}, notes)


def _rate_diff(a: tuple[int, int], b: tuple[int, int]) -> tuple[float, float, float]:
    """Difference of two pooled success rates with a 95% Wald interval."""
    pa, pb = a[0] / max(a[1], 1), b[0] / max(b[1], 1)
    se = math.sqrt(pa * (1 - pa) / max(a[1], 1) + pb * (1 - pb) / max(b[1], 1))
    d = pa - pb
    return d, d - 1.96 * se, d + 1.96 * se


def _wilson(s: int, n: int) -> tuple[float, float]:
    from memworth.signals.holdout import wilson_interval

    lo, hi = wilson_interval(s, n)
    return float(lo), float(hi)


def _pool(rows: list[dict[str, Any]], key: str) -> tuple[int, int]:
    """Successes under ``key`` (``early_gov_s``, ``after_base_s``, ...) and their episodes, over ``rows``."""
    return sum(int(r[key]) for r in rows), sum(int(r[key.split("_")[0] + "_n"]) for r in rows)


def _rows(raw: list[dict[str, Any]], cfg: dict[str, Any], episodes: int) -> tuple[list[Row], list[str]]:
    rows: list[Row] = []
    notes: list[str] = []
    early_end = min(int(cfg["world"]["early_end"]), episodes)
    for name, spec in cfg["worlds"].items():
        mine = [r for r in raw if r["world"] == name]
        if not mine:
            continue
        shift = load_world(name)["run"]["phase_shift"]
        role = spec["role"]
        gov = [r for r in mine if r["arm"] == "governed"]
        seeds = len(gov)
        early_g, early_b = _pool(gov, "early_gov_s"), _pool(gov, "early_base_s")
        lo, hi = _wilson(*early_g)
        rows.append(
            Row(
                f"{name} ({role}): {spec['affected']} success, episodes {shift + 1}-{early_end}",
                "rate",
                None,  # not a paper number: the target is in the note
                early_g[0] / max(early_g[1], 1),
                0.0,
                None,
                f"issue 14 target >= 0.70; 95% Wilson {lo:.3f}-{hi:.3f}; ungoverned twin "
                f"{early_b[0] / max(early_b[1], 1):.3f}",
            )
        )
        d, dlo, dhi = _rate_diff(_pool(gov, "after_gov_s"), _pool(gov, "after_base_s"))
        rows.append(
            Row(
                f"{name} ({role}): lift over episodes {shift + 1}-{episodes}",
                "lift",
                None,  # not a paper number: the target is in the note
                d,
                0.0,
                None,
                f"issue 14 target >= +0.18; 95% CI {dlo:+.3f} to {dhi:+.3f} (Wald, pooled over {seeds} seeds)",
            )
        )
        useful = [r for r in gov if r["useful_flagged"]]
        delays = []
        for r in gov:
            flagged = dict(x.split("@") for x in r["useful_flagged"].split(";") if x)
            back = dict(x.split("@") for x in r["useful_released"].split(";") if x)
            delays += [int(back[m]) - int(f) if m in back else math.inf for m, f in flagged.items()]
        slow = sum(1 for x in delays if x > 150)
        rows.append(
            Row(
                f"{name} ({role}): seeds with a useful memory quarantined",
                "seeds",
                None,  # not a paper number: the target is in the note
                float(len(useful)),
                0.0,
                None,
                f"issue 14 target <= 1 of 20; {len(delays)} such flags, {slow} not released by probes within 150 "
                f"episodes (target 0); " + "; ".join(f"seed {r['seed']}: {r['useful_flagged']}" for r in useful[:6]),
            )
        )
        answering = [r for r in gov if r.get("answering_flagged")]
        notes.append(
            f"{name}: seeds where a memory that answers a task of the world was quarantined: "
            f"{len(answering)}/{seeds} (of the {len(useful)} seeds above; the others flagged only memories that "
            "answer no task)" + "".join(f"; seed {r['seed']}: {r['answering_flagged']}" for r in answering[:6])
        )
        detected = [int(r["stale_flagged"]) for r in gov if int(r["stale_flagged"])]
        notes.append(
            f"{name}: stale memory flagged in {len(detected)}/{seeds} seeds, "
            f"{np.mean(detected) - shift if detected else float('nan'):.0f} episodes after the shift on average"
        )
        for arm in ("governed", *sorted({r["arm"] for r in mine} - {"governed"})):
            notes.append(guard_note(f"{name}, {arm}", [r for r in mine if r["arm"] == arm]))
        for arm in sorted({r["arm"] for r in mine} - {"governed"}):
            sel = [r for r in mine if r["arm"] == arm]
            ref = [r for r in gov if r["seed"] in {x["seed"] for x in sel}]
            d_arm = _rate_diff(_pool(sel, "after_gov_s"), _pool(sel, "after_base_s"))
            d_ref = _rate_diff(_pool(ref, "after_gov_s"), _pool(ref, "after_base_s"))
            e_arm = _pool(sel, "early_gov_s")
            wrong = sum(len([x for x in r["useful_flagged"].split(";") if x]) for r in sel)
            caught = sum(1 for r in sel if int(r["stale_flagged"]))
            rows.append(
                Row(
                    f"{name} ({role}): ablation {arm}",
                    "lift",
                    None,
                    d_arm[0],
                    0.0,
                    None,
                    f"lift {d_arm[0]:+.3f} (95% CI {d_arm[1]:+.3f} to {d_arm[2]:+.3f}) against {d_ref[0]:+.3f} with "
                    f"everything on, same {len(sel)} seeds; early {spec['affected']} success "
                    f"{e_arm[0] / max(e_arm[1], 1):.3f}; stale flagged in {caught} seeds; {wrong} useful "
                    f"memories flagged",
                )
            )
    return rows, notes


def figure(raw_csv: Path, out_png: Path) -> None:
    """Per world: early success and lift of each arm, pooled, with 95% intervals."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [dict(r) for r in read_raw(raw_csv)]
    worlds = list(dict.fromkeys(r["world"] for r in rows))
    fig, axes = plt.subplots(1, len(worlds), figsize=(5.2 * len(worlds), 3.8), squeeze=False)
    for ax, world in zip(axes[0], worlds, strict=True):
        mine = [r for r in rows if r["world"] == world]
        arms = list(dict.fromkeys(r["arm"] for r in mine))
        for i, arm in enumerate(arms):
            sel = [r for r in mine if r["arm"] == arm]
            d, lo, hi = _rate_diff(_pool(sel, "after_gov_s"), _pool(sel, "after_base_s"))
            ax.errorbar(i, d, yerr=[[d - lo], [hi - d]], fmt="o", capsize=4)
            ax.text(i + 0.08, d, f"{d:+.3f}", fontsize=8)
        ax.axhline(0.18, color="grey", lw=0.8, ls="--", label="issue target +0.18")
        ax.axhline(0, color="black", lw=0.6)
        ax.set_xticks(range(len(arms)), [a.replace("_", " ") for a in arms], rotation=20, fontsize=8)
        ax.set(title=f"{world}: lift over the ungoverned twin after the shift", ylabel="success lift (95% CI)")
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    fig.savefig(out_png, dpi=130)
    plt.close(fig)
