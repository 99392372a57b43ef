"""``memworth reproduce``: run one of the paper's experiments and write its outputs."""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from pathlib import Path
from typing import Any

from memworth import ValidationError
from memworth.outputs import folder_to_write
from memworth_experiments.common import (
    EXPERIMENTS,
    PAPER_EXPERIMENTS,
    Result,
    format_table,
    load_config,
    summary_table,
    unexpected_misses,
    write_outputs,
    write_summary,
)

DESCRIPTION = """Rebuild a table and figure of the paper, printing our numbers beside the paper's.

Writes results.json (rows of name, metric, paper or paper_range, ours, std, tolerance,
source, compares, status), raw.csv (per seed and checkpoint), config.toml (the settings
used) and figure.png into --out. Each paper number gets a status: matched, matched after
documented tuning, contradicted by the paper itself (with the reason), missed, or not
checked. 'paper' (exp1-exp5) and 'all' end with one table of every paper number and write
summary.json. --check exits 1 on a miss that has no documented reason."""


def register(commands: Any) -> None:
    """Add the ``reproduce`` command to the ``memworth`` CLI (entry point ``memworth.commands``)."""
    p = commands.add_parser(
        "reproduce",
        help="rebuild one of the paper's experiments (exp1-exp5) or one that goes past it",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "experiment",
        choices=[*EXPERIMENTS, "paper", "all"],
        help="which experiment; 'paper' runs exp1-exp5, 'all' every one; both end with one table of every paper number",
    )
    p.add_argument("--seeds", type=int, help="independent seeds (default: the paper's 20)")
    p.add_argument("--episodes", type=int, help="episodes per seed (default: the paper's 10,000)")
    p.add_argument("--quick", action="store_true", help="the small variant CI runs (fewer seeds, looser tolerance)")
    p.add_argument("--out", type=Path, help="output folder (default: results/<experiment>)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument(
        "--check",
        action="store_true",
        help="exit 1 if a number misses the paper's by more than the tolerance without a documented reason",
    )
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    names = {"all": EXPERIMENTS, "paper": PAPER_EXPERIMENTS}.get(args.experiment, (args.experiment,))
    missed = 0
    results = []
    base = args.out if args.out is not None else Path("results")
    folder_to_write(base, "--out")  # before minutes of work, not after
    for name in names:
        out = base / name if (args.out is None or len(names) > 1) else base
        result = reproduce(
            name,
            seeds=args.seeds,
            episodes=args.episodes,
            quick=args.quick,
            out=out,
            show_progress=not args.no_progress,
        )
        missed += len(unexpected_misses(result.rows))
        results.append(result)
    if len(names) > 1:
        paper = [r for r in results if r.experiment in PAPER_EXPERIMENTS]
        print("\nEvery number the paper prints, with its check:")
        print(summary_table(paper))
        write_summary(paper, base / "summary.json")
        print(f"wrote {base}/summary.json")
    return 1 if (missed and args.check) else 0


def reproduce(
    name: str,
    *,
    seeds: int | None = None,
    episodes: int | None = None,
    quick: bool = False,
    out: Path,
    show_progress: bool = True,
) -> Result:
    """Run experiment ``name``, write its outputs to ``out``, print the table; return its result."""
    cfg = load_config(name)
    size = cfg["quick"] if quick else cfg["run"]
    seeds = size["seeds"] if seeds is None else seeds
    episodes = size["episodes"] if episodes is None else episodes
    every = cfg["run"]["checkpoint_every"]
    if isinstance(seeds, bool) or seeds < 2:
        raise ValidationError("--seeds", f"must be at least 2 (a spread needs two seeds), got {seeds}")
    if episodes < every or episodes % every:
        raise ValidationError(
            "--episodes", f"must be a positive multiple of the checkpoint interval {every}, got {episodes}"
        )
    cfg["_tolerance"] = cfg["tolerance"]["quick" if quick else "full"]
    cfg["_quick"] = quick
    module = importlib.import_module(f"memworth_experiments.{name}")
    started = time.perf_counter()
    result = module.run(cfg, seeds, episodes, show_progress)
    result.settings |= {
        "quick": quick,
        "tolerance": cfg["_tolerance"],
        "seconds": round(time.perf_counter() - started, 2),
    }
    paths = write_outputs(result, out, cfg["_text"])
    module.figure(paths["raw"], out / "figure.png")
    print(f"\n{name}: {seeds} seeds x {episodes} episodes ({result.settings['seconds']} s)")
    print(format_table(result))
    for note in result.notes:
        print(f"note: {note}")
    print(f"wrote {out}/results.json, raw.csv, config.toml, figure.png")
    known = [r for r in result.rows if r.ok is False and r.known_miss]
    if known:
        print(f"{len(known)} documented miss(es), reported and not failed: " + "; ".join(r.name for r in known))
    misses = len(unexpected_misses(result.rows))
    if misses:
        print(f"{misses} number(s) outside the tolerance of {cfg['_tolerance']}", file=sys.stderr)
    return result
