"""Issue 14: do quarantined useful memories get released, and by what evidence?

Runs the governed agent of ``memworth reproduce governance`` (``demo.run_agent`` through
``governance.run_seed``: ``govern_every`` 25, the library's defaults, a memory:// store)
against its ungoverned twin, per world and seed, and writes one JSON row per run: the
tally of :func:`memworth_experiments.governance.tally` plus every release and suppression
of a useful memory with its reason (which says whether probes against controls or the
probe-only SPRT decided). Run it once with ``PYTHONPATH`` on main's ``src`` and once on a
branch's, then compare with ``--summary``::

    PYTHONPATH=/tmp/ctrl-main/src python benchmarks/probe_control.py --world agent \
        --seeds 20 --episodes 1500 --out /tmp/ctrl-main-agent.json
    python benchmarks/probe_control.py --summary /tmp/ctrl-main-agent.json /tmp/ctrl-branch-agent.json
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

from memworth.signals.holdout import wilson_interval

RELEASE_WITHIN = 150
"""Episodes after its flag within which issue 14 asks a useful memory to be released."""


def _run(world: str, seeds: list[int], episodes: int, out: Path, settings: dict[str, Any]) -> None:
    import memworth_experiments.governance as governance
    from memworth_experiments.common import load_config
    from memworth_experiments.demo import run_agent  # noqa: F401  (the agent run_seed drives)
    from memworth_experiments.exp5 import CachedEncoder, default_encoder
    from memworth_experiments.governance import PROTECTIVE, run_seed, store_settings

    cfg = load_config("governance")
    encoder = CachedEncoder(default_encoder())
    rows: list[dict[str, Any]] = []
    spec = cfg["worlds"][world]
    kept_events: list[list[dict[str, Any]]] = []
    real_tally = governance.tally

    def tally(run: dict[str, Any], *args: Any) -> dict[str, Any]:
        kept_events.append(run["events"])
        return real_tally(run, *args)

    governance.tally = tally  # type: ignore[assignment]
    for seed in seeds:
        kept_events.clear()
        arms = {"tuned": store_settings(settings)} if settings else {}
        row = run_seed(world, cfg, seed, episodes, encoder, arms)[-1]  # the tuned arm, else the governed agent
        events = kept_events[-1]
        flagged: dict[str, int] = {}
        acts: list[dict[str, Any]] = []
        stale: list[dict[str, Any]] = []
        for e in events:
            if e["action"] in PROTECTIVE and e["memory"] not in flagged:
                flagged[e["memory"]] = e["episode"]
            if e["action"] in ("release", "suppress"):
                (stale if e["memory"] == spec["stale"] else acts).append(
                    {k: e[k] for k in ("episode", "memory", "action", "reason")}
                )
        row["acts"] = acts
        row["stale_acts"] = stale
        rows.append(row)
        out.write_text(json.dumps(rows, indent=1))
        print(world, seed, row["useful_flagged"], "released:", row["useful_released"], flush=True)


def _wilson(s: int, n: int) -> tuple[float, float, float]:
    """The rate with its 95% Wilson interval (the library's, :func:`wilson_interval`)."""
    return (s / n, *wilson_interval(s, n))


def _lift(a: tuple[int, int], b: tuple[int, int]) -> tuple[float, float, float]:
    pa, pb = a[0] / a[1], b[0] / b[1]
    se = math.sqrt(pa * (1 - pa) / a[1] + pb * (1 - pb) / b[1])
    return pa - pb, pa - pb - 1.96 * se, pa - pb + 1.96 * se


def summary(path: Path) -> dict[str, Any]:
    """The issue's numbers over the runs of one file."""
    rows = json.loads(path.read_text())
    flags = within = later = suppressed = 0
    seeds_flagged = 0
    by: dict[str, int] = {}
    for r in rows:
        useful = [x.split("@") for x in r["useful_flagged"].split(";") if x]
        released = {m: int(t) for m, t in (x.split("@") for x in r["useful_released"].split(";") if x)}
        seeds_flagged += bool(useful)
        for m, t in useful:
            flags += 1
            if m in released and released[m] - int(t) <= RELEASE_WITHIN:
                within += 1
                reason = next(a["reason"] for a in r["acts"] if a["memory"] == m and a["action"] == "release")
                kind = "controls" if "controls" in reason else "probe SPRT" if "probe" in reason else "other"
                by[kind] = by.get(kind, 0) + 1
            elif m in released:
                later += 1
        suppressed += sum(1 for a in r["acts"] if a["action"] == "suppress")
    early = (sum(r["early_gov_s"] for r in rows), sum(r["early_n"] for r in rows))
    twin = (sum(r["early_base_s"] for r in rows), sum(r["early_n"] for r in rows))
    after = (sum(r["after_gov_s"] for r in rows), sum(r["after_n"] for r in rows))
    after_twin = (sum(r["after_base_s"] for r in rows), sum(r["after_n"] for r in rows))
    stale_released = sum(any(a["action"] == "release" for a in r.get("stale_acts", ())) for r in rows)
    return {
        "runs": len(rows),
        "stale_released_in_seeds": stale_released,
        "seeds_with_useful_flag": seeds_flagged,
        "useful_flags": flags,
        "released_within_150": within,
        "released_later": later,
        "released_by": by,
        "useful_suppressed": suppressed,
        "early_success": _wilson(*early),
        "twin_early": twin[0] / twin[1],
        "lift_after_shift": _lift(after, after_twin),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--world", choices=("agent", "upgrade"))
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--episodes", type=int, default=1500)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--summary", type=Path, nargs="*")
    parser.add_argument("--probe-share", type=float, help="the store's probe_share (default: the library's)")
    parser.add_argument("--probe-margin", type=float, help="the policy's probe_margin (default: the library's)")
    parser.add_argument(
        "--frozen-baseline", action="store_true", help="the policy's change_frozen_baseline on (default: off)"
    )
    args = parser.parse_args()
    if args.summary:
        for path in args.summary:
            print(path, json.dumps(summary(path)))
        return
    if args.world is None or args.out is None:
        parser.error("--world and --out are needed to run")
    settings: dict[str, Any] = {}
    if args.probe_share is not None:
        settings["probe_share"] = args.probe_share
    policy: dict[str, Any] = {}
    if args.probe_margin is not None:
        policy["probe_margin"] = args.probe_margin
    if args.frozen_baseline:
        policy["change_frozen_baseline"] = True
    if policy:
        settings["policy"] = policy
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    _run(args.world, seeds, args.episodes, args.out, settings)


if __name__ == "__main__":
    main()
