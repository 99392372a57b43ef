"""The generation counter: one ``meta`` row (schema 6) against a row per namespace (schema 7).

Run from the repository root, with a PostgreSQL to measure:

    .venv/bin/python benchmarks/bench_generation.py [--url postgresql://...] [--repeats 5]
        [--json benchmarks/results/generation.json]

Three measurements, each side by side in turns (old, new, old, new, ...), medians of the repeats:

* ``bump``: one client, each transaction only adds one to the counter and commits (with
  ``synchronous_commit`` off, so the statement's cost is what is timed): the schema-6 statement (``UPDATE meta ... WHERE key = 'generation'``) against schema 7's
  (``INSERT INTO generations ... ON CONFLICT DO UPDATE``). Schema 7 must not be slower.
* ``writers``: four clients, each transaction bumps the counter, inserts a row and
  commits (as a memory insert does): every client on the one ``meta`` row against each
  client in its own namespace's row. Schema 6 serialises them on the row lock until each
  commit is flushed; schema 7 lets namespaces commit side by side.
* ``add``: ``MemoryStore.add`` of one memory (no flush either), through the memworth on ``PYTHONPATH`` (run
  the script once with each tree's ``src`` to compare the whole write path).

Prints a table and writes JSON. The statements run in a scratch schema dropped at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg

OLD = "UPDATE meta SET value = (value::bigint + 1)::text WHERE key = 'generation'"
NEW = "INSERT INTO generations VALUES (%s, 1) ON CONFLICT (namespace) DO UPDATE SET value = generations.value + 1"
WRITERS = 4


def _connect(url: str, schema: str) -> psycopg.Connection[Any]:
    conn = psycopg.connect(url)
    conn.execute(f'SET search_path TO "{schema}"')
    conn.commit()
    return conn


def _bump(conn: psycopg.Connection[Any], new: bool, namespace: str) -> None:
    if new:
        conn.execute(NEW, (namespace,))
    else:
        conn.execute(OLD)


def bump_seconds(url: str, schema: str, new: bool, n: int) -> float:
    """Seconds per transaction that only bumps the counter (one client), commits not waiting
    for the disk: the statements' own cost, not the flush's (milliseconds, and noisy)."""
    with _connect(url, schema) as conn:
        conn.execute("SET synchronous_commit = off")
        conn.commit()
        start = time.perf_counter()
        for _ in range(n):
            _bump(conn, new, "default")
            conn.commit()
        return (time.perf_counter() - start) / n


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


def add_seconds(url: str, n: int) -> float:
    """Seconds per ``MemoryStore.add`` of one memory, through the memworth on PYTHONPATH
    (commits not waiting for the disk)."""
    from memworth import HashingEncoder, MemoryStore

    schema = f"bench_{uuid.uuid4().hex[:12]}"
    no_flush = "options=-csynchronous_commit%3Doff"  # as bump: the write path's cost, not the disk's
    store = MemoryStore.open(f"{url}?schema={schema}&pool_size=2&{no_flush}", encoder=HashingEncoder())
    try:
        store.add("warm up", id="warm")
        start = time.perf_counter()
        for i in range(n):
            store.add(f"memory number {i}", id=f"m{i}")
        return (time.perf_counter() - start) / n
    finally:
        store.backend.drop()
        store.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--url", default=os.environ.get("MEMWORTH_BENCH_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
    )
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--bumps", type=int, default=500, help="transactions per bump measurement (0: skip)")
    parser.add_argument(
        "--writes", type=int, default=150, help="transactions per writer per writers measurement (0: skip)"
    )
    parser.add_argument("--adds", type=int, default=150, help="adds per add measurement (0: skip)")
    parser.add_argument("--json", default=str(Path(__file__).resolve().parent / "results" / "generation.json"))
    args = parser.parse_args()

    schema = f"bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(args.url, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
        conn.execute(f'SET search_path TO "{schema}"')
        conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        conn.execute("INSERT INTO meta VALUES ('generation', '0')")
        conn.execute("CREATE TABLE generations (namespace TEXT PRIMARY KEY, value BIGINT NOT NULL)")
        conn.execute("CREATE TABLE rows (namespace TEXT NOT NULL, i INTEGER NOT NULL)")
        sync = conn.execute("SHOW synchronous_commit").fetchone()
    results: dict[str, dict[str, list[float]]] = {"bump": {"old": [], "new": []}, "writers": {"old": [], "new": []}}
    adds: list[float] = []
    try:
        for _ in range(args.repeats):
            for label, new in (("old", False), ("new", True)):
                if args.bumps:
                    results["bump"][label].append(bump_seconds(args.url, schema, new, args.bumps))
                if args.writes:
                    results["writers"][label].append(writers_per_second(args.url, schema, new, args.writes))
            if args.adds:
                adds.append(add_seconds(args.url, args.adds))
    finally:
        with psycopg.connect(args.url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
    med = {k: {label: statistics.median(v) for label, v in r.items()} for k, r in results.items() if all(r.values())}
    load = os.getloadavg()
    rows = []
    if "bump" in med:
        bump = med["bump"]
        rows.append(
            (
                "bump (us per transaction, 1 client, no flush)",
                bump["old"] * 1e6,
                bump["new"] * 1e6,
                bump["new"] / bump["old"],
            )
        )
    if "writers" in med:
        w = med["writers"]
        rows.append((f"writers (transactions/s, {WRITERS} clients)", w["old"], w["new"], w["new"] / w["old"]))
    print(
        f"synchronous_commit={sync[0] if sync else '?'}  repeats={args.repeats}  load={load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
    )
    print(f"{'measurement':42} {'schema 6':>12} {'schema 7':>12} {'7 / 6':>8}")
    for name, old, new, ratio in rows:
        print(f"{name:42} {old:12.1f} {new:12.1f} {ratio:8.2f}")
    if adds:
        print(f"add, memworth on PYTHONPATH (us per add): {statistics.median(adds) * 1e6:.1f}")
    out = {
        "synchronous_commit": sync[0] if sync else None,
        "repeats": args.repeats,
        "load": load,
        "median": med,
        "runs": results,
        "add_seconds": adds,
        "add_median_seconds": statistics.median(adds) if adds else None,
    }
    path = Path(args.json)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
