"""``memworth demo``: a governed agent on real text with the real model, against an ungoverned twin.

The world is ``worlds/agent.toml``: Experiment 5's set-up (20 memories, a distribution
shift at episode 100 that turns the Czechoslovakia memory stale) with tasks where
similarity keeps recalling the stale memory whatever its worth. Two agents see the same task sequence: one runs
``govern(apply=True)`` every ``--govern-every`` episodes, the other never governs. Both
use an embedded SQLite store with the library's defaults (0.6 x similarity + 0.4 x MW,
a 10% exploration floor). The report says which memories were flagged, suppressed,
deprecated or promoted, when and why, and what governance did to task success.
Time is simulated: each episode is five minutes of agent time (1,500 episodes = 5 days),
so the store's daily rate limit on promote / demote applies as it would in deployment.
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path
from typing import Any

import numpy as np

from memworth import MemoryStore, Recall, ValidationError
from memworth.embed.encoders import Encoder
from memworth.outputs import folder_to_write
from memworth_experiments.common import GuardWatch, guard_note, load_world
from memworth_experiments.exp5 import ROLES, CachedEncoder, default_encoder, draw_task, holds_answer, succeeded


def register(commands: Any) -> None:
    """Add ``demo`` to the ``memworth`` CLI (entry point ``memworth.commands``)."""
    p = commands.add_parser(
        "demo", help="a governed agent on real text vs an ungoverned twin (about a minute)", description=__doc__
    )
    p.add_argument("--episodes", type=int, default=1500, help="episodes per agent (default 1500)")
    p.add_argument("--seed", type=int, default=0, help="seed of the task sequence and exploration (default 0)")
    p.add_argument("--govern-every", type=int, default=25, help="episodes between governance rounds (default 25)")
    p.add_argument("--out", type=Path, default=Path("results/demo"), help="folder for the stores and figures")
    p.set_defaults(handler=handle)


class _SimulatedClock:
    """Simulated time: each episode advances it by ``step`` seconds (so daily limits mean something)."""

    def __init__(self, start: float, step: float) -> None:
        self.now = start
        self.step = step

    def tick(self) -> None:
        self.now += self.step

    def __call__(self) -> float:
        return self.now


def run_agent(
    cfg: dict[str, Any],
    seed: int,
    episodes: int,
    encoder: Encoder,
    url: str,
    govern_every: int | None,
    minutes_per_episode: float = 5.0,
    settings: dict[str, Any] | None = None,
    record_used: bool = False,
    unanswered: str = "all",
) -> dict[str, Any]:
    """Run one agent; return per-episode outcomes, MW trajectories and governance events.

    ``settings``: further :class:`memworth.MemoryStore` settings (the demo uses the defaults). The
    ungoverned twin (``govern_every`` None) also runs without the alarm splitter, which is
    governance too: it changes what recall returns once memories look broken.
    ``record_used``: the agent says which memory it answered from (:func:`answered_from`),
    ``record(..., used=[it])``; otherwise every recalled memory shares the outcome. When no
    recalled memory gave an answer, ``unanswered`` says what it records: ``"all"`` (every
    recalled memory shares the failure) or ``"skip"`` (no outcome: it used no memory, so it
    credits none; its failure still counts in the run's success rate)."""
    if unanswered not in ("all", "skip"):
        raise ValidationError("unanswered", f"must be 'all' or 'skip', got {unanswered!r}")
    task_rng = np.random.default_rng([seed, 1])
    r = cfg["run"]
    clock = _SimulatedClock(start=1_700_000_000.0, step=minutes_per_episode * 60.0)
    chosen = ({} if govern_every else {"ablation": None}) | (settings or {})
    store = MemoryStore.open(url, encoder=encoder, seed=seed, clock=clock, **chosen)
    store.add_many([{"id": mid, "text": text} for mid, text in cfg["memories"].items()])
    outcomes, families, events, trajectory = [], [], [], []
    guard = GuardWatch()
    for t in range(1, episodes + 1):
        family, task, query = draw_task(cfg, t, task_rng)
        clock.tick()
        recall = store.recall(query, k=r["k"])
        ok = succeeded(task, recall.texts)
        source = answered_from(task, recall) if record_used else None
        if source is not None or not record_used or unanswered == "all":
            store.record(recall.episode, ok, used=None if source is None else [source])
        outcomes.append(ok)
        families.append(family)
        if govern_every and t % govern_every == 0:
            report = store.govern(apply=True)
            guard.see(t, report)
            events += [
                {
                    "episode": t,
                    "memory": e.memory_id,
                    "action": e.action,
                    "change": f"{e.field} {e.old} -> {e.new}",
                    "reason": e.reason,
                }
                for e in report.applied
            ]
        if t % 10 == 0:
            for m in store.backend.memories("default", list(ROLES)):
                c = m.counts
                trajectory.append((t, m.id, c.success / c.evidence if c.evidence else 0.5))
    final = {m.id: m for m in store.list()}
    replay_ok = store.replay().consistent
    store.close()
    return {
        "outcomes": np.array(outcomes),
        "families": families,
        "events": events,
        "trajectory": trajectory,
        "final": final,
        "replay_ok": replay_ok,
        "guard": guard.row(),
    }


def answered_from(task: dict[str, Any], recall: Recall) -> str | None:
    """The memory whose answer the agent gave, as :func:`succeeded` judges the recalled set: the
    first that holds a misleading phrase (the agent followed it, and failed), else the first
    that holds every answer keyword; ``None`` when no recalled memory gave an answer."""
    lowered = [(r.memory.id, r.memory.text.lower()) for r in recall]
    for mid, text in lowered:
        if any(bad in text for bad in task.get("misleading", [])):
            return mid
    return next((mid for mid, text in lowered if holds_answer(task, text)), None)


def _rate_ci(a: np.ndarray, b: np.ndarray) -> tuple[float, float, float]:
    """Difference of success rates a - b with a 95% normal-approximation interval."""
    pa, pb = a.mean(), b.mean()
    se = math.sqrt(pa * (1 - pa) / a.size + pb * (1 - pb) / b.size)
    d = pa - pb
    return float(d), float(d - 1.96 * se), float(d + 1.96 * se)


def handle(args: argparse.Namespace) -> int:
    if args.episodes < 200:
        raise ValidationError("--episodes", f"must be at least 200 (the shift comes at 100), got {args.episodes}")
    if args.govern_every < 1:
        raise ValidationError("--govern-every", f"must be at least 1, got {args.govern_every}")
    cfg = load_world("agent")
    shift = cfg["run"]["phase_shift"]
    folder_to_write(args.out, "--out")
    if args.out.exists():
        for name in ("governed.db", "ungoverned.db"):
            for suffix in ("", "-wal", "-shm"):
                (args.out / f"{name}{suffix}").unlink(missing_ok=True)
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    print("loading all-MiniLM-L6-v2 (local weights) ...", flush=True)
    encoder = CachedEncoder(default_encoder())
    print(
        f"running the governed agent ({args.episodes} episodes, governance every {args.govern_every}) ...", flush=True
    )
    gov = run_agent(cfg, args.seed, args.episodes, encoder, f"sqlite:///{args.out / 'governed.db'}", args.govern_every)
    print("running the ungoverned twin on the same tasks ...", flush=True)
    base = run_agent(cfg, args.seed, args.episodes, encoder, f"sqlite:///{args.out / 'ungoverned.db'}", None)
    print_report(gov, base, shift, args)
    draw(gov, base, shift, args.out)
    print(
        f"\nfigures: {args.out / 'worth.png'}, {args.out / 'success.png'}; stores: {args.out}/*.db "
        f"(try: memworth show stale --store sqlite:///{args.out / 'governed.db'})"
    )
    print(f"done in {time.perf_counter() - started:.0f} s")
    return 0


def print_report(gov: dict[str, Any], base: dict[str, Any], shift: int, args: argparse.Namespace) -> None:
    events = gov["events"]
    protective = [e for e in events if e["action"] in ("re-verify", "suppress", "deprecate")]
    print("\n== What governance did ==")
    for e in (x for x in events if x["action"] in ("re-verify", "suppress", "deprecate", "release")):
        print(f"episode {e['episode']:>5}: {e['action']:<9} {e['memory']:<15} {e['change']:<28} because {e['reason']}")
    for action in ("promote", "demote"):
        names = [e["memory"] for e in events if e["action"] == action]
        if names:
            first = min(e["episode"] for e in events if e["action"] == action)
            print(
                f"{action}d {len(names)} memories (from episode {first}; note 003's rule: worth > 0.7 with "
                f"confidence > 0.5): {', '.join(sorted(set(names)))}"
            )
    if not events:
        print("nothing: no memory crossed a threshold")
    print("\n== Staleness ==")
    print(
        f"the task distribution shifted after episode {shift}; it made one memory wrong: "
        "'stale' (Czechoslovakia as a country)."
    )
    for e in (x for x in protective if x["memory"] == "stale"):
        print(f"  stale: {e['action']} at episode {e['episode']} ({e['episode'] - shift} episodes after the shift)")
    collateral = sorted({e["memory"] for e in protective if e["memory"] != "stale"})
    for mid in collateral:
        flagged = min(e["episode"] for e in protective if e["memory"] == mid)
        back = [e["episode"] for e in events if e["memory"] == mid and e["action"] == "release" and e["episode"] > flagged]
        if back:
            print(f"  {mid}: quarantined at episode {flagged}, released by its probe outcomes at episode {back[0]}")
    if collateral:
        print(
            f"  also flagged, though not stale themselves: {', '.join(collateral)} (they were retrieved beside the "
            "stale memory or beside unanswerable tasks: Memory Worth measures association, not cause)"
        )
    print("\n== Task success, governed vs ungoverned (same tasks) ==")
    g, b = gov["outcomes"], base["outcomes"]
    after_g, after_b = g[shift:], b[shift:]
    d, lo, hi = _rate_ci(after_g, after_b)
    print(f"episodes 1-{shift}:            governed {g[:shift].mean():.3f}   ungoverned {b[:shift].mean():.3f}")
    print(
        f"episodes {shift + 1}-{g.size}:         governed {after_g.mean():.3f}   ungoverned {after_b.mean():.3f}   "
        f"lift {d:+.3f} (95% CI {lo:+.3f} to {hi:+.3f})"
    )
    fam = np.array(gov["families"])[shift:]
    geo = fam == "geography_new"
    print(f"post-shift geography tasks: governed {after_g[geo].mean():.3f}   ungoverned {after_b[geo].mean():.3f}")
    # Before quarantine, the stale memory was served until its suppression near episode 400:
    # the window that shows whether early detection buys the agent anything.
    end = min(g.size, 400)
    early = slice(shift, end)
    geo_early = np.array(gov["families"])[early] == "geography_new"
    d, lo, hi = _rate_ci(g[early][geo_early], b[early][geo_early])
    print(
        f"post-shift geography tasks, episodes {shift + 1}-{end}: governed {g[early][geo_early].mean():.3f}   "
        f"ungoverned {b[early][geo_early].mean():.3f}   lift {d:+.3f} (95% CI {lo:+.3f} to {hi:+.3f})"
    )
    print("\n== Final standing of the governed store (memories not active or not normal) ==")
    for m in gov["final"].values():
        c = m.counts
        if m.status != "active" or m.standing not in ("normal", "promoted"):
            print(
                f"{m.id:<15} {m.status:<10} {m.standing:<9} worth {c.success / c.evidence if c.evidence else 0.5:.3f} "
                f"over {c.n:g} retrievals"
            )
    print(f"counters equal a replay of the log: governed {gov['replay_ok']}, ungoverned {base['replay_ok']}")
    print(guard_note("governed store", [{"seed": args.seed} | gov["guard"]]))


def draw(gov: dict[str, Any], base: dict[str, Any], shift: int, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    for role in ROLES:
        pts = [(t, mw) for t, mid, mw in gov["trajectory"] if mid == role]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], label=role)
    for e in gov["events"]:
        if e["action"] in ("re-verify", "suppress", "deprecate"):
            ax.axvline(e["episode"], color="red", lw=0.6, ls=":")
            ax.text(e["episode"], 0.02, f" {e['action']} {e['memory']}", rotation=90, fontsize=7, color="red")
    ax.axvline(shift, color="black", lw=0.8)
    ax.axhline(0.40, color="grey", lw=0.6, ls="--")
    ax.set(
        xlabel="episode", ylabel="Memory Worth", ylim=(0, 1.02), title="Governed agent: worth and governance actions"
    )
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out / "worth.png", dpi=130)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    window = 100
    for name, run in (("governed", gov), ("ungoverned", base)):
        y = run["outcomes"].astype(float)
        rolling = np.convolve(y, np.ones(window) / window, mode="valid")
        ax.plot(np.arange(window, y.size + 1), rolling, label=name)
    ax.axvline(shift, color="black", lw=0.8)
    ax.set(
        xlabel="episode",
        ylabel=f"success rate (last {window} episodes)",
        ylim=(0, 1.02),
        title="Task success with and without governance",
    )
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out / "success.png", dpi=130)
    plt.close(fig)
