"""The generation counter: one ``meta`` row (schema 6) against a row per namespace (schema 7).

Run from the repository root, with a PostgreSQL to measure:

    .venv/bin/python benchmarks/bench_generation.py [--url postgresql://...] [--repeats 5]
        [--trees OLD/src NEW/src] [--json benchmarks/results/generation.json]

Three measurements, each side by side in ABBA turns, medians of the repeats:

* ``bump``: one client per schema, each transaction only adds one to the counter and
  commits (``synchronous_commit`` off, so the statement's cost is what is timed): schema
  6's ``UPDATE meta ... WHERE key = 'generation'`` against schema 7's ``UPDATE generations
  ... WHERE namespace = ...`` (an upsert makes the row at a namespace's first change).
  Schema 7 must not be slower.
* ``writers``: four clients, each transaction bumps the counter, inserts a row and
  commits (as a memory insert does): every client on the one ``meta`` row against each
  client in its own namespace's row. Schema 6 serialises them on the row lock until each
  commit is flushed; schema 7 lets namespaces commit side by side.
* ``add`` (with ``--trees``): ``MemoryStore.add`` of one memory, commits not waiting for
  the disk either, through two memworth trees (say main before schema 7, as
  ``git archive <commit> | tar -x -C /tmp/old``, and this one): a worker process per tree,
  each with its own store, adding batches in ABBA turns, so both see the same moments of
  the machine's load; the ratio is the median of the rounds' ratios.

Prints a table and writes JSON. The statements run in a scratch schema dropped at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg

OLD = "UPDATE meta SET value = (value::bigint + 1)::text WHERE key = 'generation'"
NEW = "UPDATE generations SET value = value + 1 WHERE namespace = %s"  # a namespace's row exists after its first change
UPSERT = "INSERT INTO generations VALUES (%s, 1) ON CONFLICT (namespace) DO UPDATE SET value = generations.value + 1"
WRITERS = 4


def paired(times: dict[str, list[float]]) -> float:
    """The median over rounds of new / old, each round's two numbers measured side by side."""
    return statistics.median(n / o for o, n in zip(times["old"], times["new"], strict=True))


def _connect(url: str, schema: str) -> psycopg.Connection[Any]:
    conn = psycopg.connect(url)
    conn.execute(f'SET search_path TO "{schema}"')
    conn.commit()
    return conn


def _bump(conn: psycopg.Connection[Any], new: bool, namespace: str) -> None:
    if new:
        if conn.execute(NEW, (namespace,)).rowcount == 0:
            conn.execute(UPSERT, (namespace,))
    else:
        conn.execute(OLD)


def bump_seconds(url: str, schema: str, rounds: int, batch: int) -> dict[str, list[float]]:
    """Seconds per transaction that only bumps the counter, one number per round: a client per
    schema, ``batch`` transactions each per round in ABBA turns (a load that drifts cancels in
    the rounds' ratios); commits do not wait for the disk, so the statements' own cost is
    timed, not the flush's (milliseconds, and noisy)."""
    conns = {"old": _connect(url, schema), "new": _connect(url, schema)}
    times: dict[str, list[float]] = {"old": [], "new": []}
    try:
        for conn in conns.values():
            conn.execute("SET synchronous_commit = off")
            conn.commit()
        for r in range(rounds):
            for label in ("old", "new") if r % 2 == 0 else ("new", "old"):
                conn = conns[label]
                start = time.perf_counter()
                for _ in range(batch):
                    _bump(conn, label == "new", "default")
                    conn.commit()
                times[label].append((time.perf_counter() - start) / batch)
    finally:
        for conn in conns.values():
            conn.close()
    return times


def buffers_per_bump(url: str, schema: str, new: bool) -> int:
    """Shared buffers one bump reads (EXPLAIN ANALYZE BUFFERS, rolled back): the statement's
    work, which the machine's load does not change."""
    with _connect(url, schema) as conn:
        sql, args = (NEW, ("default",)) if new else (OLD, ())
        plan = conn.execute("EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) " + sql, args).fetchall()
        conn.rollback()
    first = next(line[0] for line in plan if "Buffers:" in line[0])
    return int(first.split("hit=")[1].split()[0])


def writers_per_second(url: str, schema: str, new: bool, n: int) -> float:
    """Transactions per second of :data:`WRITERS` clients, each bumping then inserting a row."""
    conns = [_connect(url, schema) for _ in range(WRITERS)]
    ready = threading.Barrier(WRITERS + 1)

    def work(w: int) -> None:
        conn = conns[w]
        ready.wait()
        for i in range(n):
            _bump(conn, new, f"ns{w}")
            conn.execute("INSERT INTO rows VALUES (%s, %s)", (f"ns{w}", i))
            conn.commit()

    threads = [threading.Thread(target=work, args=(w,)) for w in range(WRITERS)]
    for t in threads:
        t.start()
    ready.wait()
    start = time.perf_counter()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    for conn in conns:
        conn.close()
    return WRITERS * n / elapsed


def add_worker(url: str) -> None:
    """A tree's side of ``add``: reads a count per line, adds that many memories one call at a
    time, answers the seconds they took; the memworth is the one on PYTHONPATH."""
    from memworth import HashingEncoder, MemoryStore

    schema = f"bench_{uuid.uuid4().hex[:12]}"
    no_flush = "options=-csynchronous_commit%3Doff"  # as bump: the write path's cost, not the disk's
    store = MemoryStore.open(f"{url}?schema={schema}&pool_size=2&{no_flush}", encoder=HashingEncoder())
    try:
        store.add("warm up", id="warm")
        print("ready", flush=True)
        done = 0
        for line in sys.stdin:
            start = time.perf_counter()
            for _ in range(int(line)):
                store.add(f"memory number {done}", id=f"m{done}")
                done += 1
            print(time.perf_counter() - start, flush=True)
    finally:
        store.backend.drop()  # type: ignore[attr-defined]  # a PostgresBackend: the URL says so
        store.close()


def add_seconds(url: str, trees: dict[str, str], rounds: int, batch: int) -> dict[str, list[float]]:
    """Seconds per add of each tree (``{"old": src, "new": src}``), one number per round."""
    workers = {}
    for label, src in trees.items():
        env = dict(os.environ, PYTHONPATH=str(Path(src).resolve()))
        workers[label] = subprocess.Popen(
            [sys.executable, __file__, "--url", url, "--add-worker"],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
    times: dict[str, list[float]] = {label: [] for label in trees}
    try:
        for label, worker in workers.items():
            assert worker.stdout is not None and worker.stdout.readline().strip() == "ready", label
        for r in range(rounds):
            for label in ("old", "new") if r % 2 == 0 else ("new", "old"):
                worker = workers[label]
                assert worker.stdin is not None and worker.stdout is not None
                worker.stdin.write(f"{batch}\n")
                worker.stdin.flush()
                times[label].append(float(worker.stdout.readline()) / batch)
    finally:
        for worker in workers.values():
            if worker.stdin is not None:
                worker.stdin.close()
            worker.wait()
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--url", default=os.environ.get("MEMWORTH_BENCH_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
    )
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--bumps", type=int, default=50, help="bump transactions per round and schema (0: skip)")
    parser.add_argument(
        "--writes", type=int, default=150, help="transactions per writer per writers measurement (0: skip)"
    )
    parser.add_argument("--trees", nargs=2, metavar=("OLD_SRC", "NEW_SRC"), help="compare add through two trees")
    parser.add_argument("--rounds", type=int, default=40, help="ABBA rounds of the bump and add comparisons")
    parser.add_argument("--batch", type=int, default=25, help="adds per round and tree")
    parser.add_argument("--add-worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--json", default=str(Path(__file__).resolve().parent / "results" / "generation.json"))
    args = parser.parse_args()
    if args.add_worker:
        add_worker(args.url)
        return 0

    schema = f"bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(args.url, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
        conn.execute(f'SET search_path TO "{schema}"')
        conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        conn.execute("INSERT INTO meta VALUES ('generation', '0')")
        conn.execute("CREATE TABLE generations (namespace TEXT PRIMARY KEY, value BIGINT NOT NULL)")
        conn.execute("CREATE TABLE rows (namespace TEXT NOT NULL, i INTEGER NOT NULL)")
        sync = conn.execute("SHOW synchronous_commit").fetchone()
    results: dict[str, dict[str, list[float]]] = {"writers": {"old": [], "new": []}}
    adds: dict[str, list[float]] = {}
    buffers: dict[str, int] = {}
    try:
        if args.bumps:
            results["bump"] = bump_seconds(args.url, schema, args.rounds, args.bumps)
            buffers = {label: buffers_per_bump(args.url, schema, label == "new") for label in ("old", "new")}
        for r in range(args.repeats):
            for label in ("old", "new") if r % 2 == 0 else ("new", "old"):
                if args.writes:
                    results["writers"][label].append(writers_per_second(args.url, schema, label == "new", args.writes))
        if args.trees:
            adds = add_seconds(args.url, dict(zip(("old", "new"), args.trees, strict=True)), args.rounds, args.batch)
    finally:
        with psycopg.connect(args.url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
    med = {k: {label: statistics.median(v) for label, v in r.items()} for k, r in results.items() if all(r.values())}
    load = os.getloadavg()
    rows = []
    ratios = {k: paired(results[k]) for k in med}
    if "bump" in med:
        bump = med["bump"]
        name = f"bump (us/transaction, {args.rounds} rounds x {args.bumps})"
        rows.append((name, bump["old"] * 1e6, bump["new"] * 1e6, ratios["bump"]))
    if buffers:
        rows.append(("bump (shared buffers read)", buffers["old"], buffers["new"], buffers["new"] / buffers["old"]))
    if "writers" in med:
        w = med["writers"]
        rows.append((f"writers (transactions/s, {WRITERS} clients)", w["old"], w["new"], ratios["writers"]))
    print(
        f"synchronous_commit={sync[0] if sync else '?'}  repeats={args.repeats}  load={load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
    )
    print(f"{'measurement':42} {'schema 6':>12} {'schema 7':>12} {'7 / 6':>8}")
    for name, old, new, ratio in rows:
        print(f"{name:42} {old:12.1f} {new:12.1f} {ratio:8.2f}")
    add_ratio = None
    if adds:
        add_ratio = paired(adds)
        old, new = (statistics.median(adds[label]) * 1e6 for label in ("old", "new"))
        print(f"{f'add (us per add, {args.rounds} rounds x {args.batch})':42} {old:12.1f} {new:12.1f} {add_ratio:8.2f}")
        print("  (add: the trees given)")
    print("  7 / 6: the median of the ratios of each round (or repeat), measured side by side")
    out = {
        "synchronous_commit": sync[0] if sync else None,
        "repeats": args.repeats,
        "load": load,
        "median": med,
        "ratio_new_over_old": ratios,
        "buffers_per_bump": buffers,
        "runs": results,
        "trees": args.trees,
        "add_seconds": adds,
        "add_ratio": add_ratio,
    }
    path = Path(args.json)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
