"""memworth's recall-and-record episode loop from two source trees, side by side (issue 17).

Run from the repository root:

    .venv/bin/python benchmarks/bench_trees.py --before main [--memories 1000] [--episodes 2000] [--repeats 3] [--profile]

The workload and the loop are ``benchmarks/bench_peers.py``'s memworth driver
(:func:`bench_peers.drive_memworth`): ``--memories`` memories of 8 made-up words on a fresh
SQLite store with the HashingEncoder, then ``--episodes`` episodes, each a ``recall(query,
k=8)`` and its outcome, recorded one per transaction (``1/txn``) or ``--batch`` per
``record_many`` call (``batched``). Only the episode loop is timed.

``--before`` is a source tree (a folder holding ``memworth/``) or a git revision of this
repository, exported (``git archive REV src``) to a temporary folder; ``--after`` is this
checkout's ``src`` unless given. Each run is a fresh process with that tree first on
``PYTHONPATH``; the trees take turns, the order reversed every other repeat, so load from
other processes falls on both, and the ratio before / after is taken per repeat (median,
min and max reported), of the loop's wall-clock time and of its CPU time (the process's
own seconds, which another process's load moves far less on a shared machine). ``--profile`` adds one run per tree under cProfile and reports the
share of the timed loop spent in recall and its parts (candidate read, the picked memories'
read, worth, ranking, the episode write) and in recording.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

PARTS = {
    "recall": ["store/recall.py:(recall)"],
    "candidate read": ["store/recall.py:(_candidates_steps)", "store/sqlite.py:(candidates)"],
    "picked memories": ["store/recall.py:(memories_steps)", "store/sqlite.py:(memories)"],
    "worth_of": ["store/report.py:(worth_of)"],
    "choose (ranking)": ["store/recall.py:(choose)"],
    "vector search": ["vector_index.py:(search)"],
    "episode write": ["(insert_episode)"],
    "record / record_many": ["store/recording.py:(_record)"],
}
"""The functions whose cumulative time ``--profile`` reports, by ``file:(function)`` suffix, summed
per part. Store steps (generator functions) are timed by cProfile only while their own frames
run: the backend calls the driver makes for them are listed beside them (the backend's reads
are called only from those steps in the loop)."""

DRIVER = """
import cProfile, json, pstats, sys, time, types
sys.path.insert(0, sys.argv[1])
import bench_peers
spec, mode, batch, parts = json.loads(open(sys.argv[2]).read()), sys.argv[3], int(sys.argv[4]), json.loads(sys.argv[5])
walls = []
def clock():  # the driver's clock: CPU seconds of this process; the wall-clock reading is kept beside
    walls.append(time.perf_counter())
    return time.process_time()
bench_peers.time = types.SimpleNamespace(perf_counter=clock)
def drive():
    out = bench_peers.drive_memworth(spec, mode, batch)
    assert len(walls) == 4, "drive_memworth reads its clock 4 times: set-up start and end, loop start and end"
    return {**out, "cpu_s": out["episode_s"], "episode_s": walls[3] - walls[2]}
if not parts:
    print(json.dumps(drive()))
    raise SystemExit
profile = cProfile.Profile()
profile.enable()
out = drive()
profile.disable()
stats = pstats.Stats(profile).stats
shares = {}
for name, suffixes in parts.items():
    shares[name] = 0.0
    for suffix in suffixes:
        where, _, func = suffix.rpartition(":")
        shares[name] += sum(v[3] for (file, _, fn), v in stats.items() if f"({fn})" == func and file.endswith(where))
print(json.dumps({**out, "profile": shares}))
"""


def tree(spec: str, work: Path) -> Path:
    """The source folder ``spec`` names: a folder holding ``memworth/``, or a git revision exported."""
    path = Path(spec)
    if (path / "memworth").is_dir():
        return path.resolve()
    if (path / "src" / "memworth").is_dir():
        return (path / "src").resolve()
    out = work / f"tree-{len(list(work.iterdir()))}"
    out.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", spec, "src"], capture_output=True, check=False)
    if archive.returncode != 0:
        raise SystemExit(f"{spec!r} is neither a source folder nor a git revision: {archive.stderr.decode().strip()}")
    subprocess.run(["tar", "-x", "-C", str(out)], input=archive.stdout, check=True)
    return out / "src"


def run(src: Path, spec: dict[str, Any], mode: str, batch: int, work: Path, profile: bool) -> dict[str, Any]:
    """One fresh process timing the loop with ``src`` first on the path, on a fresh database."""
    db = work / "bench.db"
    for f in work.glob("bench.db*"):
        f.unlink()
    spec_file = work / "spec.json"
    spec_file.write_text(json.dumps({**spec, "db": str(db)}))
    script = work / "driver.py"
    script.write_text(DRIVER)
    env = {**os.environ, "PYTHONPATH": str(src)}
    parts = json.dumps(PARTS if profile else {})
    cmd = [sys.executable, str(script), str(HERE), str(spec_file), mode, str(batch), parts]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        raise SystemExit(f"the driver failed with {src}: {done.stderr.strip()[-2000:]}")
    out: dict[str, Any] = json.loads(lines[-1])
    return out


def spread(values: list[float]) -> dict[str, float]:
    vals = sorted(values)
    n = len(vals)
    median = vals[n // 2] if n % 2 else (vals[n // 2 - 1] + vals[n // 2]) / 2
    return {"median": median, "min": vals[0], "max": vals[-1]}


def main() -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--before", required=True, help="source folder or git revision to compare against")
    p.add_argument("--after", default=str(ROOT / "src"), help="source folder or git revision (default: this checkout)")
    p.add_argument("--memories", type=int, default=1000)
    p.add_argument("--episodes", type=int, default=2000)
    p.add_argument("--batch", type=int, default=100, help="outcomes per record_many call (batched)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--modes", nargs="+", default=["batched", "1/txn"], choices=["batched", "1/txn"])
    p.add_argument("--profile", action="store_true", help="one more run per tree under cProfile: where the loop goes")
    p.add_argument("--json", type=Path, default=HERE / "results" / "trees.json")
    args = p.parse_args()
    for field in ("memories", "episodes", "batch", "repeats"):
        if getattr(args, field) < 1:
            p.error(f"--{field} must be at least 1, got {getattr(args, field)}")
    sys.path.insert(0, str(HERE))
    import bench_peers

    work = Path(tempfile.mkdtemp(prefix="bench-trees-"))
    try:
        trees = {"before": tree(args.before, work), "after": tree(args.after, work)}
        spec = bench_peers.workload(args.memories, args.episodes)
        load_start = os.getloadavg()
        result: dict[str, Any] = {"modes": {}}
        for mode in args.modes:
            per: dict[str, dict[str, list[float]]] = {
                "wall": {"before": [], "after": []},
                "cpu": {"before": [], "after": []},
            }
            for rep in range(args.repeats):
                order = ["before", "after"] if rep % 2 == 0 else ["after", "before"]
                for name in order:
                    got = run(trees[name], spec, mode, args.batch, work, profile=False)
                    per["wall"][name].append(got["episode_s"] / got["episodes"] * 1000)
                    per["cpu"][name].append(got["cpu_s"] / got["episodes"] * 1000)
                    print(
                        f"{mode} repeat {rep + 1} {name}: {per['wall'][name][-1]:.2f} s per 1,000 episodes"
                        f" ({per['cpu'][name][-1]:.2f} s CPU)",
                        flush=True,
                    )
            entry: dict[str, Any] = {}
            for clock, times in per.items():
                ratios = [b / a for b, a in zip(times["before"], times["after"], strict=True)]
                entry[clock] = {
                    "s_per_1000": {name: spread(v) | {"values": v} for name, v in times.items()},
                    "speed-up": spread(ratios) | {"values": ratios},
                }
            if args.profile:
                entry["profile"] = {}
                for name in ("before", "after"):
                    got = run(trees[name], spec, mode, args.batch, work, profile=True)
                    loop = got["episode_s"]  # the timed loop, profiled
                    entry["profile"][name] = {k: v / loop for k, v in got["profile"].items()} | {"loop_s": loop}
            result["modes"][mode] = entry
        load_end = os.getloadavg()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"\n{args.memories} memories, {args.episodes} episodes, k=8, SQLite, HashingEncoder; before: {args.before}")
    print(f"load average at start {load_start[0]:.2f}, at end {load_end[0]:.2f} ({os.cpu_count()} CPUs)\n")
    print("| mode | clock | before (s / 1,000 episodes) | after | speed-up median (min-max) |")
    print("|---|---|---|---|---|")
    for mode, e in result["modes"].items():
        for clock in ("wall", "cpu"):
            b, a, r = e[clock]["s_per_1000"]["before"], e[clock]["s_per_1000"]["after"], e[clock]["speed-up"]
            print(
                f"| {mode} | {clock} | {b['median']:.2f} | {a['median']:.2f} |"
                f" {r['median']:.2f}x ({r['min']:.2f}-{r['max']:.2f}) |"
            )
    for mode, e in result["modes"].items():
        if "profile" in e:
            print(f"\nshare of the profiled loop, {mode} (cProfile, one run each):\n")
            print("| part | before | after |")
            print("|---|---|---|")
            for part in PARTS:
                print(f"| {part} | {e['profile']['before'][part]:.0%} | {e['profile']['after'][part]:.0%} |")
            print(
                f"| loop (s, profiled) | {e['profile']['before']['loop_s']:.1f} | {e['profile']['after']['loop_s']:.1f} |"
            )
    args.json.parent.mkdir(parents=True, exist_ok=True)
    settings = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    args.json.write_text(
        json.dumps({**result, "settings": settings, "load_start": load_start, "load_end": load_end}, indent=2)
    )
    print(f"\nwrote {args.json}")


if __name__ == "__main__":
    main()
