"""The live change statistics' step: microseconds per outcome, per memworth tree, side by side.

Run from the repository root:

    .venv/bin/python benchmarks/bench_live_step.py [--trees OLD/src NEW/src] [--repeats 5]
        [--json /tmp/live_step.json]

What the store does for each outcome it records when an AlarmSplitter plans its recalls
(``Recording._advance_live``): :class:`memworth.store.alarms.LiveAlarms` advances the
CUSUM of the episode's memories (``BernoulliCusum.advance`` for one outcome,
``advance_many`` for a batch). A namespace of 1,000 memories, k=4 episodes, 70%
successes, a fifth of the outcomes at confidence 0.5, the default policy; the live
statistics start from a scan of 10,000 outcomes, then advance over 3,000 more:

* ``one``: one :meth:`LiveAlarms.advance` per outcome (a server's or ``record``'s);
* ``batch 3``: :meth:`LiveAlarms.advance_many` of 3 outcomes (a group commit);
* ``batch 100``: of 100 (``record_many`` of 100, SQLite's steady-state benchmark);
* ``scan``: :class:`NamespaceScan` over 20,000 outcomes from nothing (govern's, a first record's).

Each tree runs in its own process, the trees taking turns (order reversed every other
repeat); a process times each mode ``--inner`` times and keeps the fastest. The figure per
tree is the median over repeats. Every process also prints a digest of the CUSUM state the
live statistics and a scan of the same outcomes end in (they must be equal, byte for byte,
within a process), and the digests must agree between trees: the step changed no number.
Independent of load in principle (one thread, CPU-bound), but on a shared machine the
medians move; the ratio per repeat is the side-by-side figure. Prints a table and writes JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

MODES = ("one", "batch 3", "batch 100", "scan")


def _worker(inner: int) -> dict[str, Any]:
    import hashlib

    import numpy as np

    from memworth.governance import GovernancePolicy
    from memworth.signals.outcome_streams import NamespaceScan
    from memworth.store.alarms import LiveAlarms

    rng = np.random.default_rng(0)
    n = 13_000
    sets = [[f"m{j}" for j in rng.choice(1000, 4, replace=False)] for _ in range(n)]
    won = rng.random(n) < 0.7
    weight = np.where(rng.random(n) < 0.2, 0.5, 1.0)
    policy = GovernancePolicy()
    scan = NamespaceScan(policy)
    scan.advance(sets[:10_000], won[:10_000], weight[:10_000])
    tail = [(s, bool(y), float(w)) for s, y, w in zip(sets[10_000:], won[10_000:], weight[10_000:], strict=True)]

    def live() -> LiveAlarms:
        return LiveAlarms(scan.detector, scan.columns.ids, scan.state.copy(), scan.reference.copy(), scan.episodes)

    def one() -> None:
        alarms = live()
        for outcome in tail:
            alarms.advance(*outcome)

    def batches(size: int) -> None:
        alarms = live()
        for i in range(0, len(tail), size):
            alarms.advance_many(tail[i : i + size])

    more = [[f"m{j}" for j in rng.choice(1000, 4, replace=False)] for _ in range(7_000)]
    log, log_won, log_weight = sets + more, np.r_[won, rng.random(7_000) < 0.7], np.r_[weight, np.ones(7_000)]

    def whole_scan() -> None:
        NamespaceScan(policy).advance(log, log_won, log_weight)

    runs = {"one": (one, len(tail)), "batch 3": (lambda: batches(3), len(tail))}
    runs |= {"batch 100": (lambda: batches(100), len(tail)), "scan": (whole_scan, len(log))}
    out: dict[str, Any] = {}
    for mode in MODES:
        work, count = runs[mode]
        best = float("inf")
        for _ in range(inner):
            start = time.process_time()
            work()
            best = min(best, time.process_time() - start)
        out[mode] = best / count * 1e6
    # the live statistics and a scan of the same outcomes end in the same state, byte for byte
    alarms = live()
    for outcome in tail:
        alarms.advance(*outcome)
    rescan = NamespaceScan(policy)
    rescan.advance(sets, won, weight)
    digest = hashlib.sha256()
    size = len(rescan.ids)
    for name in ("statistic", "observations", "successes", "expected", "since", "first_alarm", "watched"):
        theirs, ours = getattr(rescan.state, name)[:size], getattr(alarms.state, name)[:size]
        if theirs.tobytes() != ours.tobytes():
            raise SystemExit(f"the live {name} differs from the scan's")
        digest.update(theirs.tobytes())
    out["digest"] = digest.hexdigest()[:16]
    return out


def _run(src: str | None, inner: int) -> dict[str, Any]:
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = src
    args = [sys.executable, __file__, "--worker", "--inner", str(inner)]
    done = subprocess.run(args, env=env, check=True, capture_output=True, text=True)
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trees", nargs="*", default=[], help="src folders of memworth trees to compare")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--inner", type=int, default=3, help="timings per mode in a process (the fastest kept)")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--worker", action="store_true")
    a = parser.parse_args()
    if a.worker:
        print(json.dumps(_worker(a.inner)))
        return
    trees: list[str | None] = list(a.trees) or [None]
    before = os.getloadavg()
    runs: dict[str | None, list[dict[str, Any]]] = {t: [] for t in trees}
    for r in range(a.repeats):
        for tree in trees if r % 2 == 0 else trees[::-1]:
            runs[tree].append(_run(tree, a.inner))
    after = os.getloadavg()
    digests = {run["digest"] for rs in runs.values() for run in rs}
    name = {t: "this tree" if t is None else t for t in trees}
    print(
        f"Live change statistics, us of CPU per outcome (median over {a.repeats} repeats, min-max);"
        f" load {before[0]:.2f} / {before[1]:.2f} / {before[2]:.2f} before,"
        f" {after[0]:.2f} / {after[1]:.2f} / {after[2]:.2f} after"
    )
    print("| tree | " + " | ".join(MODES) + " |")
    print("|---|" + "---|" * len(MODES))
    table: dict[str, Any] = {}
    for t in trees:
        cells = []
        for mode in MODES:
            values = [run[mode] for run in runs[t]]
            cells.append(f"{statistics.median(values):.1f} ({min(values):.1f}-{max(values):.1f})")
        print(f"| {name[t]} | " + " | ".join(cells) + " |")
        table[name[t]] = {mode: [run[mode] for run in runs[t]] for mode in MODES}
    if len(trees) > 1:
        first = trees[0]
        for t in trees[1:]:
            ratios = [
                statistics.median(b[mode] / o[mode] for o, b in zip(runs[first], runs[t], strict=True)) for mode in MODES
            ]
            print(f"| {name[t]} / {name[first]} | " + " | ".join(f"{x:.2f}x" for x in ratios) + " |")
    same = len(digests) == 1
    print(f"CUSUM state digest {'the same in every run: ' + next(iter(digests)) if same else 'DIFFERS: ' + str(digests)}")
    if a.json is not None:
        a.json.write_text(json.dumps({"load_before": before, "load_after": after, "runs": table, "same_state": same}, indent=2))


if __name__ == "__main__":
    main()
