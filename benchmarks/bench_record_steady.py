"""Steady-state recording into SQLite, 100 outcomes per transaction, beside the bare loop.

Run from the repository root:

    .venv/bin/python benchmarks/bench_record_steady.py [--repeats 3] [--batches 20]
        [--trees OLD/src NEW/src] [--recall-here] [--json /tmp/record_steady.json]

``memworth bench --only recording`` times a store object from its first outcome on: the
first ``record_many`` of a store object scans the namespace's whole outcome log to start
the AlarmSplitter's live change statistics (``_start_live``), so at its quick sizes (two
transactions per writer) that scan, not the write path, sets the ratio. This benchmark
times the write path a long-lived store (a server, an agent loop) runs: each contender is
a fresh process with its own SQLite file (WAL, ``synchronous=FULL``), 1,000 memories and
k=4 episodes recalled first (untimed); a store records one batch untimed (the scan), then
``--batches`` batches of 100 timed; the bare loop (``memworth_bench.recording``'s: one
outcome row and k counter upserts into narrow tables) writes the same number of batches.
The first batch's time is reported beside it. Contenders take turns, the order reversed
every other repeat; ratios are per repeat, the median printed.

``--recall-here``: the store object that records also made the recalls (untimed), as a server
or an agent loop does: a SQLite store object keeps the episodes it logged until their outcome
(``_KeptEpisodes``), so it records them without reading them back. Without it, another store
object made them and each batch reads its episodes from the file.

``--trees``: the store contender once per memworth tree (say main, exported with ``git
archive``, and this one), each process importing memworth from that tree's ``src``.
Prints a table and writes JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

PER_TXN = 100
MEMORIES = 1000


def _store_worker(workdir: Path, batches: int, seed: int, recall_here: bool = False) -> dict[str, float]:
    import numpy as np

    from memworth import HashingEncoder, MemoryStore
    from memworth_bench.data import memory_texts

    url = f"sqlite:///{workdir / f'store-{uuid.uuid4().hex[:8]}.db'}"
    with MemoryStore.open(url, encoder=HashingEncoder()) as s:
        texts = memory_texts(np.random.default_rng(0), MEMORIES)
        s.add_many([{"id": f"m{i:05d}", "text": t} for i, t in enumerate(texts)])
    rng = np.random.default_rng(seed)
    n = PER_TXN * (batches + 1)
    words = rng.integers(5000, size=(n, 3))
    queries = [" ".join(f"w{w}" for w in row) for row in words]
    if not recall_here:
        with MemoryStore.open(url + "?synchronous=normal", encoder=HashingEncoder(), seed=seed) as s:
            eps = [s.recall(q, k=4).episode for q in queries]
    ok = (rng.random(n) < 0.6).tolist()
    with MemoryStore.open(url, encoder=HashingEncoder(), seed=seed) as s:
        if recall_here:
            eps = [s.recall(q, k=4).episode for q in queries]
        start = time.perf_counter()
        s.record_many(list(zip(eps[:PER_TXN], ok[:PER_TXN], strict=True)))
        first = time.perf_counter() - start
        start = time.perf_counter()
        for i in range(PER_TXN, n, PER_TXN):
            s.record_many(list(zip(eps[i : i + PER_TXN], ok[i : i + PER_TXN], strict=True)))
        spent = time.perf_counter() - start
        consistent = s.replay().consistent
    return {"eps": batches * PER_TXN / spent, "first_batch_ms": 1000 * first, "replay_consistent": float(consistent)}


def _bare_worker(workdir: Path, batches: int, seed: int) -> dict[str, float]:
    import sqlite3

    from memworth_bench.recording import _OUTCOME, _SQLITE_BARE, _UPSERT, _bare_batches

    path = str(workdir / f"bare-{uuid.uuid4().hex[:8]}.db")
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    for stmt in _SQLITE_BARE:
        db.execute(stmt)
    db.executemany(
        "INSERT INTO m VALUES (?,?,?,?,?,?)", [("default", f"m{i:05d}", 0.0, 0.0, 0.0, 0.0) for i in range(MEMORIES)]
    )
    db.execute("PRAGMA synchronous=FULL")
    upsert, outcome = _UPSERT.format(p="?"), _OUTCOME.format(p="?")
    work = _bare_batches(seed, PER_TXN * batches, PER_TXN, "s")
    start = time.perf_counter()
    for ups, outs in work:
        db.execute("BEGIN IMMEDIATE")
        db.executemany(outcome, [(e, int(y), t) for e, y, t in outs])
        db.executemany(upsert, ups)
        db.execute("COMMIT")
    spent = time.perf_counter() - start
    db.close()
    return {"eps": batches * PER_TXN / spent}


def _run(kind: str, src: str | None, workdir: Path, batches: int, seed: int, recall_here: bool) -> dict[str, float]:
    """One contender in a fresh process (importing memworth from ``src`` when given)."""
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = os.pathsep.join([src, str(Path(__file__).resolve().parents[1] / "src")])
    args = [sys.executable, __file__, "--worker", kind, "--workdir", str(workdir), "--batches", str(batches)]
    args += ["--seed", str(seed)] + (["--recall-here"] if recall_here else [])
    out = subprocess.run(args, env=env, check=True, capture_output=True, text=True)
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--trees", nargs="*", default=[], help="src folders of memworth trees to compare")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp"))
    parser.add_argument("--worker", choices=("store", "bare"), default=None)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--recall-here", action="store_true", help="the recording store object made the recalls")
    a = parser.parse_args()
    if a.worker is not None:
        done = _store_worker(a.workdir, a.batches, a.seed, a.recall_here) if a.worker == "store" else None
        print(json.dumps(done if done is not None else _bare_worker(a.workdir, a.batches, a.seed)))
        return
    a.workdir.mkdir(parents=True, exist_ok=True)
    contenders: list[tuple[str, str, str | None]] = [("bare loop", "bare", None)]
    contenders += [(f"store ({src})", "store", src) for src in a.trees] or [("store (this tree)", "store", None)]
    runs: dict[str, list[dict[str, float]]] = {name: [] for name, _, _ in contenders}
    for r in range(a.repeats):
        order = contenders if r % 2 == 0 else contenders[::-1]
        for name, kind, src in order:
            runs[name].append(_run(kind, src, a.workdir, a.batches, seed=r + 1, recall_here=a.recall_here))
    load = os.getloadavg()
    bare = [x["eps"] for x in runs["bare loop"]]
    print(
        f"SQLite, {PER_TXN} outcomes per transaction, {a.batches} timed batches, {a.repeats} repeats,"
        f" recalls {'by the recording store object' if a.recall_here else 'by another store object'};"
        f" load {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f}"
    )
    print("| contender | episodes/s (median, min-max) | first batch ms (median) | / bare loop (median of repeats) |")
    print("|---|---|---|---|")
    table: dict[str, Any] = {}
    for name, kind, _ in contenders:
        eps = [x["eps"] for x in runs[name]]
        ratio = statistics.median(e / b for e, b in zip(eps, bare, strict=True))
        first = statistics.median(x["first_batch_ms"] for x in runs[name]) if kind == "store" else None
        consistent = all(x.get("replay_consistent", 1.0) == 1.0 for x in runs[name])
        print(
            f"| {name} | {statistics.median(eps):,.0f} ({min(eps):,.0f}-{max(eps):,.0f}) |"
            f" {'' if first is None else f'{first:.0f}'} | {ratio:.3f}x{'' if consistent else ' (replay NOT consistent)'} |"
        )
        table[name] = {"eps": eps, "first_batch_ms": first, "ratio_to_bare": ratio, "replay_consistent": consistent}
    if a.json is not None:
        a.json.write_text(
            json.dumps({"load": load, "batches": a.batches, "recall_here": a.recall_here, "runs": table}, indent=2)
        )


if __name__ == "__main__":
    main()
