"""Past the paper (issue 16): a live agent on real code through a real numpy/pandas upgrade.

See ``configs/upgrade.toml`` and the README. The world (tasks, recipes, environments, the
worker and the table of real test runs) is :mod:`memworth_experiments.upgrade_world`;
this module plays the agent against a governed store, its ungoverned twin and the
ablations, and tallies what the issue asks for: which recipes the upgrade broke and how
soon governance flagged them, false flags, bugs, and task success before and after the
upgrade with 95% intervals; and, on the ungoverned twin's log, an oracle bound
(:func:`oracle_bound`): what any test of a memory's outcome stream could flag in time.
"""

from __future__ import annotations

import hashlib
import math
import multiprocessing
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from memworth import MemoryStore, ValidationError
from memworth.embed.encoders import Encoder
from memworth.ranking import Blend
from memworth.signals.holdout import lift as holdout_lift
from memworth.signals.multiplicity import ebh
from memworth_experiments.common import GuardWatch, Result, Row, guard_note, paired_interval, progress, read_raw
from memworth_experiments.demo import _SimulatedClock
from memworth_experiments.exp5 import CachedEncoder, default_encoder
from memworth_experiments.governance import PROTECTIVE, _rate_diff, _wilson, store_settings
from memworth_experiments.targets import Bound
from memworth_experiments.upgrade_world import (
    Env,
    OutcomeTable,
    Recipe,
    Task,
    build_env,
    cache_root,
    load_tasks,
    outcome_table,
)

CREDITS = ("uniform", "ran", "used")
"""Credit rules: all k recalled recipes share the outcome; only the recipe the agent ran, by
recalling one (k = 1); or k recalled and ``record(..., used=[the recipe it ran])``."""


@dataclass
class World:
    """Everything an episode reads: the tasks, each recipe, and the table of real runs."""

    tasks: list[Task]
    recipes: dict[str, Recipe]
    table: OutcomeTable
    envs: dict[str, Env]

    def broken(self) -> list[str]:
        """Recipes broken by the upgrade: passed on every input before, failed on some input after."""
        return [r for r in self.recipes if self.table.passes(r, "before") and not self.table.passes(r, "after")]

    def bugs(self) -> list[str]:
        """Recipes that failed on some input before the upgrade."""
        return [r for r in self.recipes if not self.table.passes(r, "before")]


def prepare(cfg: dict[str, Any], say: Any = print) -> World:
    """Build (or reuse) both environments and the table of real runs; say what it cost."""
    w = cfg["world"]
    tasks = load_tasks()
    envs = {}
    for role, pins in cfg["envs"].items():
        env = build_env({p: str(v) for p, v in pins.items()}, str(w["interpreter"]))
        how = f"built in {env.seconds:.0f} s" if env.built_now else "cached"
        say(
            f"environment {role}: numpy {env.versions['numpy']}, pandas {env.versions['pandas']}, python "
            f"{env.versions['python']} at {env.path} ({how}; wheels {env.wheel_bytes / 1e6:.1f} MB"
            f"{' downloaded' if env.built_now else ''})"
        )
        envs[role] = env
    table = outcome_table(tasks, envs, int(w["input_seeds"]), float(w["timeout"]))
    recipes = {r.id: r for t in tasks for r in t.recipes}
    say(
        f"outcome table: {len(recipes)} recipes x {table.seeds} input seeds x {len(envs)} environments "
        + (
            "(cached)"
            if table.cached
            else f"= {table.calls} test runs in {table.seconds:.1f} s, {table.restarts} worker restarts"
        )
    )
    return World(tasks, recipes, table, envs)


def sequence(world: World, seed: int, episodes: int, input_seeds: int) -> list[tuple[int, int, int]]:
    """Seed ``seed``'s task sequence: (task index, phrasing index, input seed) per episode, shared by every arm."""
    rng = np.random.default_rng([seed, 16])
    out = []
    for _ in range(episodes):
        t = int(rng.integers(len(world.tasks)))
        out.append((t, int(rng.integers(len(world.tasks[t].requests))), int(rng.integers(input_seeds))))
    return out


def play(
    world: World,
    cfg: dict[str, Any],
    seed: int,
    episodes: list[tuple[int, int, int]],
    encoder: Encoder,
    credit: str,
    governed: bool,
    settings: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One agent over ``episodes``: outcomes, holdout marks, retrievals after the upgrade, flags."""
    w = cfg["world"]
    upgrade_at = int(w["upgrade_at"])
    clock = _SimulatedClock(start=1_700_000_000.0, step=float(w["minutes_per_episode"]) * 60.0)
    chosen = ({"holdout": float(w["holdout"])} if governed else {"ablation": None}) | (settings or {})
    store = MemoryStore.open("memory://", encoder=encoder, seed=seed, clock=clock, **chosen)
    store.add_many([{"id": r.id, "text": r.text} for r in world.recipes.values()])
    k = 1 if credit == "ran" else int(w["k"])
    outcomes, held, ran, crowded, recalled = [], [], [], [], []
    retrieved_before: Counter[str] = Counter()
    retrieved_after: Counter[str] = Counter()
    flags: list[tuple[str, int, str]] = []
    guard = GuardWatch()
    for t, (ti, qi, input_seed) in enumerate(episodes, start=1):
        task = world.tasks[ti]
        clock.tick()
        recall = store.recall(task.requests[qi], k=k, episode_id=f"s{seed}-e{t}")
        env = "before" if t <= upgrade_at else "after"
        pick = next((r.memory.id for r in recall.results if world.recipes[r.memory.id].task == task.id), None)
        crowded.append(
            any(r.memory.standing == "promoted" and world.recipes[r.memory.id].task != task.id for r in recall.results)
        )
        ok = pick is not None and world.table.ok(pick, env, input_seed)
        # "used": the agent says which recipe it ran; when none of the k fits the task it ran
        # nothing, and the recalled recipes share the failure (recall gave it nothing usable)
        store.record(recall.episode, ok, used=[pick] if credit == "used" and pick is not None else None)
        outcomes.append(ok)
        held.append(recall.episode.holdout)
        ran.append(pick or "")
        recalled.append(tuple(r.memory.id for r in recall.results))
        (retrieved_after if t > upgrade_at else retrieved_before).update(r.memory.id for r in recall.results)
        if governed and t % int(w["govern_every"]) == 0:
            report = store.govern(apply=True)
            flags += [(e.memory_id, t, e.action) for e in report.applied if e.action in (*PROTECTIVE, "release")]
            guard.see(t, report)
    store.close()
    return {
        "outcomes": np.array(outcomes, dtype=bool),
        "holdout": np.array(held, dtype=bool),
        "crowded": np.array(crowded, dtype=bool),
        "ran": ran,
        "recalled": recalled,
        "retrieved_before": retrieved_before,
        "retrieved_after": retrieved_after,
        "flags": flags,
        "guard": guard.row(),
    }


def flag_tally(world: World, cfg: dict[str, Any], run: dict[str, Any]) -> dict[str, Any]:
    """What governance flagged in one run: broken recipes (and how soon), false flags, bugs."""
    w = cfg["world"]
    upgrade_at, window = int(w["upgrade_at"]), int(w["flag_window"])
    first: dict[str, int] = {}
    state: dict[str, bool] = {}
    at_upgrade: set[str] | None = None  # memories under a protective action when the upgrade came
    false_flags: dict[str, int] = {}
    for memory, episode, action in sorted(run["flags"], key=lambda f: f[1]):
        if at_upgrade is None and episode > upgrade_at:
            at_upgrade = {m for m, on in state.items() if on}
        if action == "release":
            state[memory] = False
            continue
        state[memory] = True
        first.setdefault(memory, episode)
        env = "before" if episode <= upgrade_at else "after"
        if world.table.passes(memory, env) and memory not in false_flags:
            false_flags[memory] = episode
    protected_at_upgrade = {m for m, on in state.items() if on} if at_upgrade is None else at_upgrade
    after_flags: dict[str, int] = {}
    for memory, episode, action in run["flags"]:
        if action != "release" and episode > upgrade_at:
            after_flags.setdefault(memory, episode)
    eligible = [r for r in world.broken() if run["retrieved_after"][r] >= int(w["min_retrievals"])]
    delays: dict[str, int] = {}
    for r in eligible:
        if r in protected_at_upgrade:
            delays[r] = 0
        elif r in after_flags:
            delays[r] = after_flags[r] - upgrade_at
    flagged = {r: d for r, d in delays.items() if d <= window}
    bugs = [r for r in world.bugs() if run["retrieved_before"][r] >= int(w["min_retrievals"])]
    return {
        "broken_eligible": len(eligible),
        "broken_flagged": len(flagged),
        "delays": ";".join(f"{r}@{d}" for r, d in sorted(flagged.items())),
        "missed": ";".join(sorted(set(eligible) - set(flagged))),
        "false_flags": len(false_flags),
        "false_flagged": ";".join(f"{m}@{e}" for m, e in sorted(false_flags.items())),
        "bugs_eligible": len(bugs),
        "bugs_flagged": sum(1 for r in bugs if r in first),
    } | run["guard"]


ORACLE_ALPHA = 0.05
"""The false discovery rate of the oracle bound (the policy's default ``change.alpha``)."""


def oracle_bound(
    world: World, cfg: dict[str, Any], run: dict[str, Any], *, attributable: bool, used_store: bool = False
) -> dict[str, int]:
    """What any test of one memory's outcome stream could flag in time, at best, in one run.

    Each memory's stream is the outcomes of the episodes that retrieved it (``attributable``:
    only those whose recipe the agent ran, the credit a store would get if the agent said
    which recipe it used; ``used_store``: what a store recording ``used=[the recipe run]``
    sees, which is that recipe's outcome when one ran and, when none did, the failure of
    every recipe recalled, since the agent then names no recipe). The oracle knows each stream's success rate before the upgrade
    and after it (the run's own rates: no estimation error, a bound no real test reaches)
    and tests "it fell" against "as it was" with the likelihood ratio of the stream's
    outcomes in the ``flag_window`` episodes after the upgrade; e-BH at
    :data:`ORACLE_ALPHA` over every memory with an outcome there (the error control the
    library's detectors work under). A stream whose rate did not fall gets e-value 1.

    Returns ``oracle_caught`` (broken recipes retrieved at least ``min_retrievals`` times
    after the upgrade, as :func:`flag_tally` counts them, that e-BH rejects),
    ``oracle_false`` (rejected recipes that pass every input after the upgrade) and
    ``reached`` (those broken recipes the agent ran at least once in the window: a
    breakage that never reached an outcome cannot be seen in any stream).
    """
    w = cfg["world"]
    upgrade_at, end = int(w["upgrade_at"]), int(w["upgrade_at"]) + int(w["flag_window"])
    streams: dict[str, list[tuple[int, bool]]] = {}
    for t, (members, pick, ok) in enumerate(zip(run["recalled"], run["ran"], run["outcomes"], strict=True), start=1):
        for m in ((pick,) if pick else ()) if attributable else ((pick,) if pick and used_store else members):
            streams.setdefault(m, []).append((t, bool(ok)))
    ids, log_e = [], []
    for m, seen in streams.items():
        t = np.array([x for x, _ in seen])
        y = np.array([ok for _, ok in seen], dtype=bool)
        pre, post, window = y[t <= upgrade_at], y[t > upgrade_at], y[(t > upgrade_at) & (t <= end)]
        if not (pre.size and window.size):
            continue
        ids.append(m)
        p0 = float(np.clip(pre.mean(), 0.5 / pre.size, 1 - 0.5 / pre.size))
        p1 = float(np.clip(post.mean(), 0.5 / post.size, 1 - 0.5 / post.size))
        s, f = int(window.sum()), int((~window).sum())
        log_e.append(s * math.log(p1 / p0) + f * math.log((1 - p1) / (1 - p0)) if p1 < p0 else 0.0)
    rejected = set()
    if ids:
        mask = ebh(np.exp(np.minimum(np.array(log_e), 700.0)), ORACLE_ALPHA)
        rejected = {m for m, r in zip(ids, mask.tolist(), strict=True) if r}
    eligible = [r for r in world.broken() if run["retrieved_after"][r] >= int(w["min_retrievals"])]
    ran_in_window = {m for t, m in enumerate(run["ran"], start=1) if m and upgrade_at < t <= end}
    return {
        "oracle_caught": sum(1 for r in eligible if r in rejected),
        "oracle_false": sum(1 for m in rejected if world.table.passes(m, "after")),
        "reached": sum(1 for r in eligible if r in ran_in_window),
    }


def _successes(run: dict[str, Any], upgrade_at: int, holdout: bool | None) -> dict[str, int]:
    """Successes and episodes before and after the upgrade (``holdout``: only those episodes, or only the others)."""
    y, h = run["outcomes"], run["holdout"]
    t = np.arange(1, y.size + 1)
    keep = np.ones(y.size, dtype=bool) if holdout is None else (h == holdout)
    before, after = keep & (t <= upgrade_at), keep & (t > upgrade_at)
    return {
        "before_s": int(y[before].sum()),
        "before_n": int(before.sum()),
        "after_s": int(y[after].sum()),
        "after_n": int(after.sum()),
    }


def _twin_bounds(world: World, cfg: dict[str, Any], run: dict[str, Any], credit: str = "uniform") -> dict[str, Any]:
    """The ungoverned twin's log read by the oracle (:func:`oracle_bound`): on the streams a
    store sees (under ``used`` credit the recipe that ran, or every recipe recalled when none
    ran), and on the streams of the recipe that ran."""
    seen = oracle_bound(world, cfg, run, attributable=False, used_store=credit == "used")
    ran = oracle_bound(world, cfg, run, attributable=True)
    eligible = sum(1 for r in world.broken() if run["retrieved_after"][r] >= int(cfg["world"]["min_retrievals"]))
    return seen | {"broken_eligible": eligible, "ran_caught": ran["oracle_caught"], "ran_false": ran["oracle_false"]}


def run_seed(
    world: World, cfg: dict[str, Any], seed: int, episodes: int, encoder: Encoder, arms: dict[str, dict[str, Any]]
) -> list[dict[str, Any]]:
    """One seed: per credit rule the governed store (with its holdout) and its ungoverned twin; then ``arms``."""
    w = cfg["world"]
    upgrade_at = int(w["upgrade_at"])
    every = int(cfg["run"]["checkpoint_every"])
    seq = sequence(world, seed, episodes, int(w["input_seeds"]))
    rows = []
    plays: list[tuple[str, str, bool, dict[str, Any] | None]] = []
    for credit in CREDITS:
        plays += [(credit, "governed", True, None), (credit, "ungoverned", False, None)]
    plays += [(str(c), arm, True, settings) for c in w["ablation_credits"] for arm, settings in arms.items()]
    for credit, arm, governed, settings in plays:
        run = play(world, cfg, seed, seq, encoder, credit, governed, settings)
        tally = flag_tally(world, cfg, run) if governed else _twin_bounds(world, cfg, run, credit)
        overall = _successes(run, upgrade_at, None)
        arm_only = _successes(run, upgrade_at, False)
        held = _successes(run, upgrade_at, True)
        y = run["outcomes"]
        for start in range(0, y.size, every):
            part = slice(start, start + every)
            rows.append(
                {
                    "credit": credit,
                    "arm": arm,
                    "seed": seed,
                    "bin_end": min(start + every, y.size),
                    "successes": int(y[part].sum()),
                    "episodes": int(y[part].size),
                    "governed_successes": int(y[part][~run["holdout"][part]].sum()),
                    "governed_episodes": int((~run["holdout"][part]).sum()),
                }
            )
        rows[-1] |= {"summary": 1} | {f"all_{k}": v for k, v in overall.items()}
        rows[-1] |= {f"arm_{k}": v for k, v in arm_only.items()} | {f"held_{k}": v for k, v in held.items()}
        rows[-1] |= tally | {"crowded": int(run["crowded"][~run["holdout"]].sum()), "recalls": int((~run["holdout"]).sum())}
    return rows


SUMMARY_FIELDS = (
    "summary",
    *(f"{p}_{k}" for p in ("all", "arm", "held") for k in ("before_s", "before_n", "after_s", "after_n")),
    "broken_eligible",
    "broken_flagged",
    "delays",
    "missed",
    "false_flags",
    "false_flagged",
    "bugs_eligible",
    "bugs_flagged",
    "guard_running",
    "guard_fired_at",
    "guard_held",
    "guard_rollbacks",
    "crowded",
    "recalls",
    "oracle_caught",
    "oracle_false",
    "reached",
    "ran_caught",
    "ran_false",
)


def encoder_for(world: World) -> CachedEncoder:
    """all-MiniLM-L6-v2 with every recipe and request encoded, the vectors kept on disk between runs.

    Encoding the 229 recipes with the NumPy MiniLM takes about a minute on this machine;
    the vectors are saved beside the environments (keyed by the encoder's name, each text
    by itself), so a second run encodes only texts it has not seen.
    """
    encoder = CachedEncoder(default_encoder())
    path = cache_root() / f"vectors-{hashlib.sha256(encoder.name.encode()).hexdigest()[:12]}.npz"
    known = encoder.load(path)
    texts = [r.text for r in world.recipes.values()] + [q for t in world.tasks for q in t.requests]
    encoder.encode(texts)
    if known < len(set(texts)):
        encoder.save(path)
    return encoder


def arm_settings(spec: dict[str, Any]) -> dict[str, Any]:
    """An ablation's store settings: :func:`governance.store_settings`, and ``scoring`` as a :class:`Blend`'s fields."""
    out = store_settings(spec)
    if "scoring" in out:
        out["scoring"] = Blend(**out["scoring"])
    return out


_SHARED: dict[str, Any] = {}
"""What the seed workers read (set before they fork): the world, the config, the encoder, episodes."""


def _seed_job(job: tuple[int, dict[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    seed, arms = job
    return run_seed(_SHARED["world"], _SHARED["cfg"], seed, _SHARED["episodes"], _SHARED["encoder"], arms)


def run(cfg: dict[str, Any], seeds: int, episodes: int, show_progress: bool = True) -> Result:
    w = cfg["world"]
    upgrade_at = int(w["upgrade_at"])
    if episodes <= upgrade_at + int(w["flag_window"]):
        raise ValidationError(
            "--episodes",
            f"must be more than {upgrade_at + int(w['flag_window'])} (upgrade at {upgrade_at} + flag window)",
        )
    unknown = sorted(set(w["ablation_credits"]) - set(CREDITS))
    if unknown:
        raise ValidationError("ablation_credits", f"unknown credit rule(s) {unknown}; choose from {list(CREDITS)}")
    world = prepare(cfg)
    encoder = encoder_for(world)
    chosen = cfg["quick"].get("arms") if cfg.get("_quick") else None
    arms = {name: arm_settings(spec) for name, spec in cfg.get("arms", {}).items() if chosen is None or name in chosen}
    ablation_seeds = 1 if cfg.get("_quick") else min(seeds, int(w["ablation_seeds"]))
    jobs = [(seed, arms if seed < ablation_seeds else {}) for seed in range(seeds)]
    _SHARED.update(world=world, cfg=cfg, encoder=encoder, episodes=episodes)
    workers = max(1, min(int(w["workers"]), seeds))
    raw: list[dict[str, Any]] = []
    if workers == 1 or "fork" not in multiprocessing.get_all_start_methods():
        for job in progress(jobs, seeds, "upgrade", show_progress):
            raw += _seed_job(job)
    else:  # seeds are independent: fork workers that share the world and the encoded vectors
        with multiprocessing.get_context("fork").Pool(workers) as pool:
            for rows in progress(pool.imap(_seed_job, jobs), seeds, "upgrade", show_progress):
                raw += rows
    _SHARED.clear()
    for r in raw:  # one schema for raw.csv: per-bin rows leave the summary fields empty
        for f in SUMMARY_FIELDS:
            r.setdefault(f, "")
    rows, notes = _rows(world, cfg, raw, episodes)
    settings = {
        "seeds": seeds,
        "episodes": episodes,
        "encoder": encoder.name,
        "environments": {
            role: e.versions | {"wheel_mb": round(e.wheel_bytes / 1e6, 1)} for role, e in world.envs.items()
        },
        "tasks": len(world.tasks),
        "recipes": len(world.recipes),
        "broken_by_upgrade": {r: world.table.first_error(r, "after") for r in world.broken()},
        "bugs": {r: world.table.first_error(r, "before") for r in world.bugs()},
    }
    return Result("upgrade", rows, raw, settings, notes)


def _summaries(raw: list[dict[str, Any]], credit: str, arm: str) -> list[dict[str, Any]]:
    return [r for r in raw if r["summary"] == 1 and r["credit"] == credit and r["arm"] == arm]


def _pool(rows: list[dict[str, Any]], key: str) -> tuple[int, int]:
    """Pooled ``(successes, episodes)`` of ``key`` (``arm_after``, ``all_before``, ...)."""
    return sum(int(r[f"{key}_s"]) for r in rows), sum(int(r[f"{key}_n"]) for r in rows)


def _rate(rows: list[dict[str, Any]], key: str) -> str:
    s, n = _pool(rows, key)
    lo, hi = _wilson(s, n)
    return f"{s / max(n, 1):.3f} (95% {lo:.3f}-{hi:.3f}, n={n})"


def _crowded(rows: list[dict[str, Any]]) -> str:
    """Share of governed recalls whose top k held a promoted recipe of another task (crowding by standing)."""
    c, n = sum(int(r["crowded"]) for r in rows), sum(int(r["recalls"]) for r in rows)
    return f"{c / max(n, 1):.1%} of {n}"


def _paired_lift(gov: list[dict[str, Any]], base: list[dict[str, Any]]) -> tuple[float, float, float, str]:
    """Post-upgrade success of the governed store (its non-holdout episodes) minus the twin's on the same
    episodes, per seed; mean with a t interval over seeds (a pooled Wald interval with one seed)."""
    by_seed = {r["seed"]: r for r in base}
    diffs = []
    for g in gov:
        b = by_seed[g["seed"]]
        diffs.append(
            int(g["arm_after_s"]) / max(int(g["arm_after_n"]), 1)
            - int(b["all_after_s"]) / max(int(b["all_after_n"]), 1)
        )
    if len(diffs) >= 2:
        m, lo, hi = paired_interval(diffs)
        return m, lo, hi, f"t interval over {len(diffs)} seeds"
    d, lo, hi = _rate_diff(_pool(gov, "arm_after"), _pool(base, "all_after"))
    return d, lo, hi, "Wald, pooled, one seed"


def _rows(world: World, cfg: dict[str, Any], raw: list[dict[str, Any]], episodes: int) -> tuple[list[Row], list[str]]:
    w, targets, miss = cfg["world"], cfg["targets"], cfg["known_miss"]
    upgrade_at = int(w["upgrade_at"])
    rows: list[Row] = []
    notes = [
        f"ground truth: {len(world.broken())} of {len(world.recipes)} recipes broken by the upgrade, "
        f"{len(world.bugs())} failing before it (bugs, or idioms too new for the old environment)"
    ]
    for credit in CREDITS:
        gov, base = _summaries(raw, credit, "governed"), _summaries(raw, credit, "ungoverned")
        if not gov:
            continue
        seeds = len(gov)
        eligible = sum(int(r["broken_eligible"]) for r in gov)
        flagged = sum(int(r["broken_flagged"]) for r in gov)
        delays = [int(x.split("@")[1]) for r in gov for x in str(r["delays"]).split(";") if x]
        share = flagged / max(eligible, 1)
        rows.append(
            Bound(
                f"{credit}: broken recipes flagged within {w['flag_window']}",
                "share",
                None,
                share,
                0.0,
                None,
                f"issue 16 target >= {targets['flagged_share']:g}; {flagged} of {eligible} (broken recipes retrieved >= {w['min_retrievals']} times after the upgrade, "
                f"summed over {seeds} seeds); median delay {np.median(delays) if delays else float('nan'):.0f} episodes",
                at_least=float(targets["flagged_share"]),
                known_miss=miss["flagged"],
            )
        )
        twin_eligible = sum(int(r["broken_eligible"]) for r in base)
        caught, reached = sum(int(r["oracle_caught"]) for r in base), sum(int(r["reached"]) for r in base)
        by_ran = sum(int(r["ran_caught"]) for r in base)
        rows.append(
            Row(
                f"{credit}: oracle bound, broken recipes flagged within {w['flag_window']}",
                "share",
                None,
                caught / max(twin_eligible, 1),
                0.0,
                None,
                f"{caught} of {twin_eligible} on the ungoverned twin's log: likelihood ratios that know each memory's "
                f"stream success rate before and after the upgrade, e-BH at FDR {ORACLE_ALPHA:g}; false flags per seed "
                f"{np.mean([int(r['oracle_false']) for r in base]):.1f}; {reached} of {twin_eligible} were run at least "
                f"once in the window (a breakage no outcome showed); crediting only the recipe run: {by_ran} of "
                f"{twin_eligible}, false flags per seed {np.mean([int(r['ran_false']) for r in base]):.1f}",
            )
        )
        false_flags = [int(r["false_flags"]) for r in gov]
        rows.append(
            Bound(
                f"{credit}: false flags per seed",
                "mean",
                None,
                float(np.mean(false_flags)),
                float(np.std(false_flags, ddof=1)) if seeds > 1 else 0.0,
                None,
                f"issue 16 target <= {targets['false_flags_per_seed']:g}; recipes that passed every input in the "
                f"environment of the moment, flagged anyway; max {max(false_flags)}",
                at_least=None,
                at_most=float(targets["false_flags_per_seed"]),
                known_miss=miss["false_flags"],
            )
        )
        m, lo, hi, how = _paired_lift(gov, base)
        rows.append(
            Bound(
                f"{credit}: post-upgrade lift over the twin",
                "lift",
                None,
                m,
                0.0,
                None,
                f"issue 16 target >= +{targets['lift']:g}; 95% CI {lo:+.3f} to {hi:+.3f} ({how}); the twin never "
                "governs, same tasks",
                at_least=float(targets["lift"]),
                known_miss=miss["lift"],
            )
        )
        rows.append(
            Bound(
                f"{credit}: lower end of the lift's 95% CI",
                "lift",
                None,
                lo,
                0.0,
                None,
                "issue 16 target > 0: the interval above zero",
                at_least=0.0,
                known_miss=miss["lift"],
            )
        )
        hl = holdout_lift(_pool(gov, "arm_after"), _pool(gov, "held_after"))
        notes.append(
            f"{credit}: success before the upgrade: governed {_rate(gov, 'arm_before')}, twin {_rate(base, 'all_before')}; "
            f"after: governed {_rate(gov, 'arm_after')}, twin {_rate(base, 'all_after')}, "
            f"holdout share {_rate(gov, 'held_after')}; governed over holdout after the upgrade {hl.lift:+.3f} "
            f"(95% CI {hl.lower:+.3f} to {hl.upper:+.3f}, Newcombe, pooled)"
        )
        notes.append(f"{credit}: governed recalls whose top k held a promoted recipe of another task: {_crowded(gov)}")
        notes.append(guard_note(f"{credit} (governed success below the holdout's, anytime-valid)", gov))
        bugs = sum(int(r["bugs_flagged"]) for r in gov)
        bugs_n = sum(int(r["bugs_eligible"]) for r in gov)
        notes.append(
            f"{credit}: bugs (recipes failing before the upgrade, retrieved >= {w['min_retrievals']} times before it) "
            f"flagged at any time: {bugs} of {bugs_n} over {seeds} seeds; false flags: "
            + "; ".join(f"seed {r['seed']}: {r['false_flagged']}" for r in gov if r["false_flagged"])
        )
        missed = Counter(x for r in gov for x in str(r["missed"]).split(";") if x)
        if missed:
            notes.append(
                f"{credit}: broken recipes not flagged in time (seeds): "
                + ", ".join(f"{m} ({n})" for m, n in missed.most_common())
            )
    for abl in w["ablation_credits"]:
        for arm in sorted({r["arm"] for r in raw if r["credit"] == abl} - {"governed", "ungoverned"}):
            sel = _summaries(raw, abl, arm)
            seeds_here = {x["seed"] for x in sel}
            ref = [r for r in _summaries(raw, abl, "governed") if r["seed"] in seeds_here]
            base = [r for r in _summaries(raw, abl, "ungoverned") if r["seed"] in seeds_here]
            d_arm, d_ref = _paired_lift(sel, base), _paired_lift(ref, base)
            share = sum(int(r["broken_flagged"]) for r in sel) / max(sum(int(r["broken_eligible"]) for r in sel), 1)
            rows.append(
                Row(
                    f"{abl}: ablation {arm}",
                    "lift",
                    None,
                    d_arm[0],
                    0.0,
                    None,
                    f"lift {d_arm[0]:+.3f} (95% CI {d_arm[1]:+.3f} to {d_arm[2]:+.3f}) against {d_ref[0]:+.3f} with "
                    f"everything on, same {len(sel)} seeds; success after the upgrade {_rate(sel, 'arm_after')}; "
                    f"broken flagged in time {share:.2f}; false flags/seed {np.mean([int(r['false_flags']) for r in sel]):.1f}; "
                    f"recalls holding another task's promoted recipe {_crowded(sel)} (everything on: {_crowded(ref)})",
                )
            )
    notes.append(f"the upgrade comes after episode {upgrade_at} of {episodes}")
    for r in world.broken():
        notes.append(f"broken by the upgrade: {r}: {world.table.first_error(r, 'after')[:150]}")
    return rows, notes


def figure(raw_csv: Path, out_png: Path) -> None:
    """Success over episodes, governed vs ungoverned, per credit rule (like the paper's Figure 5)."""
    import matplotlib

    matplotlib.use("Agg")
    import tomllib

    import matplotlib.pyplot as plt

    rows = [r for r in read_raw(raw_csv) if r["arm"] in ("governed", "ungoverned")]
    config = raw_csv.with_name("config.toml")
    upgrade_at = tomllib.loads(config.read_text())["world"]["upgrade_at"] if config.exists() else None
    credits = list(dict.fromkeys(r["credit"] for r in rows))
    fig, axes = plt.subplots(1, len(credits), figsize=(6.0 * len(credits), 4.0), squeeze=False, sharey=True)
    for ax, credit in zip(axes[0], credits, strict=True):
        for arm in ("governed", "ungoverned"):
            sel = [r for r in rows if r["credit"] == credit and r["arm"] == arm]
            ends = sorted({int(r["bin_end"]) for r in sel})
            rates, lows, highs = [], [], []
            for end in ends:
                s_key, n_key = (
                    ("governed_successes", "governed_episodes") if arm == "governed" else ("successes", "episodes")
                )
                per_seed = [int(r[s_key]) / max(int(r[n_key]), 1) for r in sel if int(r["bin_end"]) == end]
                m = float(np.mean(per_seed))
                half = 1.96 * float(np.std(per_seed, ddof=1)) / math.sqrt(len(per_seed)) if len(per_seed) > 1 else 0.0
                rates.append(m)
                lows.append(m - half)
                highs.append(m + half)
            ax.plot(ends, rates, label=arm)
            ax.fill_between(ends, lows, highs, alpha=0.2)
        if upgrade_at is not None:
            ax.axvline(upgrade_at, color="black", lw=0.8)
            ax.text(upgrade_at, 0.03, " upgrade: numpy 2, pandas 2", fontsize=8)
        ax.set(xlabel="episode", title=f"credit: {credit}", ylim=(0, 1.02))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    axes[0][0].set_ylabel("task success per bin (mean over seeds, 95% CI)")
    fig.tight_layout()
    fig.savefig(out_png, dpi=130)
    plt.close(fig)
