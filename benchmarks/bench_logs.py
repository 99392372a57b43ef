"""``memworth score`` against DuckDB running only the bare GROUP BY sums on the same Parquet files.

Each contender runs in its own process (so its peak memory is its own), the repeats take
turns with the order reversed every other repeat, and the ratio is taken per repeat.
Prints a table and writes ``benchmarks/logs.json``. Measures; asserts nothing.

    python benchmarks/bench_logs.py --rows 1000000 --repeats 3
    python benchmarks/bench_logs.py --rows 200000 --change-detection
    python benchmarks/bench_logs.py --rows 1000000 --files 20 --incremental 10 --change-detection
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

BARE = """
import resource, sys, time, duckdb
files = sys.argv[1:]
t = time.perf_counter()
con = duckdb.connect()
con.execute('SET enable_progress_bar = false')
con.execute(f"SELECT memory_id, sum(1.0 / k) FILTER (WHERE outcome = 'success'), sum(1.0 / k) FILTER (WHERE outcome = 'failure'), count(*) "
            f"FROM (SELECT *, count(*) OVER (PARTITION BY episode_id) AS k FROM read_parquet({files!r})) GROUP BY memory_id").fetchall()
print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
"""

INCREMENTAL = """
import os, resource, shutil, sys, time
from memworth.governance import GovernancePolicy
from memworth.logs import ScoreSettings, score_files
detect, state, copy = sys.argv[1] == "1", sys.argv[2], sys.argv[3]
if os.path.exists(state):
    shutil.copyfile(state, copy)
t = time.perf_counter()
limit = None if sys.argv[4] == "-" else sys.argv[4]
score_files(sys.argv[5:], ScoreSettings(policy=GovernancePolicy(change_detection=detect)), state=copy, memory_limit=limit)
print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
"""

SCORE = """
import resource, sys, time
from memworth.governance import GovernancePolicy
from memworth.logs import ScoreSettings, score_files
detect = sys.argv[1] == "1"
t = time.perf_counter()
limit = None if sys.argv[2] == "-" else sys.argv[2]
score_files(sys.argv[3:], ScoreSettings(policy=GovernancePolicy(change_detection=detect)), memory_limit=limit)
print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
"""


def make_logs(folder: Path, rows: int, k: int, memories: int, files: int) -> list[str]:
    """Synthetic retrieval logs: rows/k episodes of k distinct memories, 70% success, in ``files`` Parquet files."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    rng = np.random.default_rng(0)
    episodes = rows // k
    out = []
    for f, part in enumerate(np.array_split(np.arange(episodes), files)):
        mem = (rng.integers(0, memories, size=(part.size, 1)) + np.arange(k) * (memories // k)) % memories
        ok = rng.random(part.size) < 0.7
        table = pa.table(  # ids made text by Arrow (numpy's astype(str) took minutes per 10M rows)
            {
                "episode_id": pa.array(np.repeat(part, k)).cast(pa.string()),
                "memory_id": pa.array(mem.ravel()).cast(pa.string()),
                "outcome": pc.if_else(pa.array(np.repeat(ok, k)), "success", "failure"),
                "timestamp": np.repeat(part.astype(float), k),
            }
        )
        path = folder / f"part-{f:03d}.parquet"
        pq.write_table(table, path)
        out.append(str(path))
    return out


def run(code: str, args: list[str], src: str | None = None) -> tuple[float, int]:
    env = None if src is None else {**os.environ, "PYTHONPATH": src}
    got = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, check=True, env=env)
    seconds, peak = got.stdout.strip().splitlines()[-1].split()
    return float(seconds), int(peak)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--k", type=int, default=8)
    p.add_argument("--memories", type=int, default=10_000)
    p.add_argument("--files", type=int, default=10)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--change-detection", action="store_true", help="score with the change-point alarm on")
    p.add_argument(
        "--incremental",
        type=int,
        default=0,
        metavar="NEW",
        help="instead: add the last NEW files to a state holding the others, against scoring only those NEW files",
    )
    p.add_argument("--memory-limit", help="DuckDB memory cap for score, e.g. 2GB")
    p.add_argument(
        "--baseline-src",
        help="also time score from another checkout's src/ (e.g. main's), in the same turns: a before/after ratio",
    )
    p.add_argument("--logs", type=Path, help="folder to keep the logs in, reused by a later run with the same sizes (default: a temporary one)")
    p.add_argument("--json", type=Path, default=Path(__file__).with_name("logs.json"))
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) if args.logs is None else args.logs
        folder.mkdir(parents=True, exist_ok=True)
        wanted = {"rows": args.rows, "k": args.k, "memories": args.memories, "files": args.files}
        made = folder / "logs.json"
        if made.exists() and json.loads(made.read_text()) == wanted:  # kept from an earlier run with these settings
            files = [str(f) for f in sorted(folder.glob("part-*.parquet"))]
        else:
            files = make_logs(folder, args.rows, args.k, args.memories, args.files)
            made.write_text(json.dumps(wanted))
        flag = "1" if args.change_detection else "0"
        results: dict[str, list[tuple[float, int]]] = {"bare": [], "score": []}
        limit = args.memory_limit or "-"
        contenders = {"bare": (BARE, files), "score": (SCORE, [flag, limit, *files])}
        if args.incremental:  # "bare": score only the new files; "score": add them to the state of the old ones
            old, new = files[: -args.incremental], files[-args.incremental :]
            state = str(Path(tmp) / "state.duckdb")
            run(INCREMENTAL, [flag, str(Path(tmp) / "empty.duckdb"), state, limit, *old])  # the state of the old files
            contenders = {
                "bare": (SCORE, [flag, limit, *new]),
                "score": (INCREMENTAL, [flag, state, str(Path(tmp) / "work.duckdb"), limit, *files]),
            }
        srcs: dict[str, str | None] = {"bare": None, "score": None}
        if args.baseline_src:
            results["before"] = []
            contenders["before"] = contenders["score"]
            srcs["before"] = str(Path(args.baseline_src).resolve())
        for r in range(args.repeats):
            order = list(contenders) if r % 2 == 0 else list(reversed(contenders))
            for who in order:
                results[who].append(run(*contenders[who], src=srcs[who]))
    ratios = [s[0] / b[0] for s, b in zip(results["score"], results["bare"], strict=True)]
    report = {
        "rows": args.rows,
        "k": args.k,
        "memories": args.memories,
        "files": args.files,
        "change_detection": args.change_detection,
        "memory_limit": args.memory_limit,
        "incremental_new_files": args.incremental,
        "baseline": "score of only the new files" if args.incremental else "bare DuckDB GROUP BY",
        "bare_seconds": [b[0] for b in results["bare"]],
        "score_seconds": [s[0] for s in results["score"]],
        "ratio_median": statistics.median(ratios),
        "ratio_min": min(ratios),
        "ratio_max": max(ratios),
        "bare_peak_bytes": max(b[1] for b in results["bare"]),
        "score_peak_bytes": max(s[1] for s in results["score"]),
    }
    if "before" in results:
        before = [s[0] / b[0] for s, b in zip(results["before"], results["bare"], strict=True)]
        report |= {
            "baseline_src": args.baseline_src,
            "before_seconds": [s[0] for s in results["before"]],
            "before_ratio_median": statistics.median(before),
            "before_peak_bytes": max(s[1] for s in results["before"]),
        }
    print(f"{'rows':>10} {'detect':>6} {'bare s':>8} {'score s':>8} {'ratio (min-max)':>20} {'peak MB bare/score':>20}")
    print(
        f"{args.rows:>10} {flag:>6} {statistics.median(report['bare_seconds']):>8.2f} "
        f"{statistics.median(report['score_seconds']):>8.2f} "
        f"{report['ratio_median']:>8.2f} ({report['ratio_min']:.2f}-{report['ratio_max']:.2f}) "
        f"{report['bare_peak_bytes'] / 2**20:>9.0f}/{report['score_peak_bytes'] / 2**20:.0f}"
    )
    if "before" in results:
        print(
            f"{'before':>10} {flag:>6} {'':>8} {statistics.median(report['before_seconds']):>8.2f} "
            f"{report['before_ratio_median']:>8.2f} {'':>15} {report['before_peak_bytes'] / 2**20:>15.0f}"
        )
    args.json.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
