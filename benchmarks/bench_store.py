"""Store benchmarks: outcomes recorded per second on SQLite, and recall latency by store size.

Run from the repository root:

    .venv/bin/python benchmarks/bench_store.py [--quick] [--out PATH]

1. Recording (SQLite, and PostgreSQL unless ``--postgres ''``): ``MemoryStore.record`` (one transaction per episode) and ``record_many``
   (100 per transaction) against a bare sqlite3 loop doing the same writes (one outcome
   row and k counter increments per episode, same pragmas: WAL, synchronous=FULL), all
   in the same run on the same machine; the ratio is what to compare.
2. Recall: p50 / p99 latency of ``MemoryStore.recall`` (exact search: one matrix-vector
   product over the namespace's active embeddings, then scoring and logging the episode)
   at 10k and 100k memories. The hashing encoder is used so the numbers measure the
   store, not the model (see bench_embed.py for encoding).

Prints a table and writes JSON; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import platform
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

import memworth
from memworth import HashingEncoder, MemoryStore

HERE = Path(__file__).resolve().parent
K = 4


def _store(path: Path, n: int, rng: np.random.Generator) -> MemoryStore:
    store = MemoryStore.open(f"sqlite:///{path}", encoder=HashingEncoder(), seed=0)
    words = [f"w{i}" for i in range(5000)]
    for start in range(0, n, 5000):
        batch = [{"id": f"m{i}", "text": " ".join(rng.choice(words, 12))} for i in range(start, min(n, start + 5000))]
        store.add_many(batch)
    return store


def bench_postgres(url: str, episodes: int, rng: np.random.Generator) -> dict[str, Any]:
    """The same comparison on PostgreSQL: MemoryStore vs a bare psycopg loop, one writer."""
    import uuid

    import psycopg

    out: dict[str, Any] = {"episodes": episodes, "k": K}
    schema = f"bench_{uuid.uuid4().hex[:12]}"
    store = MemoryStore.open(f"{url}?schema={schema}", encoder=HashingEncoder(), seed=0)
    try:
        words = [f"w{i}" for i in range(5000)]
        store.add_many([{"id": f"m{i}", "text": " ".join(rng.choice(words, 12))} for i in range(1000)])
        for mode in ("record", "record_many"):
            eps = [store.recall(f"w{rng.integers(5000)} w{rng.integers(5000)}", k=K).episode for _ in range(episodes)]
            ok = rng.random(episodes) < 0.6
            start = time.perf_counter()
            if mode == "record":
                for ep, y in zip(eps, ok, strict=True):
                    store.record(ep, bool(y))
            else:
                for i in range(0, episodes, 100):
                    store.record_many([(e, bool(y)) for e, y in zip(eps[i : i + 100], ok[i : i + 100], strict=True)])
            out[mode] = episodes / (time.perf_counter() - start)
        assert store.replay().consistent
    finally:
        store.backend.drop()  # type: ignore[attr-defined]
        store.close()
    with psycopg.connect(url, autocommit=True) as db:
        db.execute(f"CREATE SCHEMA {schema}")
        db.execute(f"SET search_path TO {schema}")
        db.execute("CREATE TABLE m (id TEXT PRIMARY KEY, s DOUBLE PRECISION, f DOUBLE PRECISION, n DOUBLE PRECISION)")
        db.execute("CREATE TABLE o (seq BIGSERIAL PRIMARY KEY, episode TEXT UNIQUE, ok BOOLEAN)")
        with db.cursor() as cur:
            cur.executemany("INSERT INTO m VALUES (%s, 0, 0, 0)", [(f"m{i}",) for i in range(1000)])
        picks = rng.integers(0, 1000, size=(episodes, K))
        for mode, per_txn in (("bare_per_episode", 1), ("bare_batched", 100)):
            start = time.perf_counter()
            for i in range(0, episodes, per_txn):
                with db.transaction(), db.cursor() as cur:
                    rows = [
                        (1 / K, f"m{m}") for e in range(i, min(i + per_txn, episodes)) for m in sorted(set(picks[e].tolist()))
                    ]
                    cur.executemany("UPDATE m SET s = s + %s, n = n + 1 WHERE id = %s", rows)
                    cur.executemany(
                        "INSERT INTO o (episode, ok) VALUES (%s, true)",
                        [(f"{mode}{e}",) for e in range(i, min(i + per_txn, episodes))],
                    )
            out[mode] = episodes / (time.perf_counter() - start)
        db.execute(f"DROP SCHEMA {schema} CASCADE")
    out["ratio_record_vs_bare"] = out["record"] / out["bare_per_episode"]
    out["ratio_record_many_vs_bare"] = out["record_many"] / out["bare_batched"]
    return out


def bench_recording(episodes: int, rng: np.random.Generator) -> dict[str, Any]:
    out: dict[str, Any] = {"episodes": episodes, "k": K}
    with tempfile.TemporaryDirectory() as tmp:
        for mode in ("record", "record_many"):
            store = _store(Path(tmp) / f"{mode}.db", 1000, rng)
            eps = [store.recall(f"w{rng.integers(5000)} w{rng.integers(5000)}", k=K).episode for _ in range(episodes)]
            ok = rng.random(episodes) < 0.6
            start = time.perf_counter()
            if mode == "record":
                for ep, y in zip(eps, ok, strict=True):
                    store.record(ep, bool(y))
            else:
                for i in range(0, episodes, 100):
                    store.record_many([(e, bool(y)) for e, y in zip(eps[i : i + 100], ok[i : i + 100], strict=True)])
            out[mode] = episodes / (time.perf_counter() - start)
            assert store.replay().consistent
            store.close()
        # the bare loop: the same rows and increments, straight sqlite3
        db = sqlite3.connect(Path(tmp) / "bare.db", isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        db.execute("CREATE TABLE m (id TEXT PRIMARY KEY, s REAL, f REAL, n REAL)")
        db.execute("CREATE TABLE o (seq INTEGER PRIMARY KEY, episode TEXT UNIQUE, ok INT)")
        db.executemany("INSERT INTO m VALUES (?, 0, 0, 0)", [(f"m{i}",) for i in range(1000)])
        picks = rng.integers(0, 1000, size=(episodes, K))
        start = time.perf_counter()
        for e in range(episodes):
            db.execute("BEGIN IMMEDIATE")
            db.execute("INSERT INTO o (episode, ok) VALUES (?, 1)", (f"e{e}",))
            for m in sorted(set(picks[e].tolist())):
                db.execute("UPDATE m SET s = s + ?, f = f + 0, n = n + 1 WHERE id = ?", (1 / K, f"m{m}"))
            db.execute("COMMIT")
        out["bare_per_episode"] = episodes / (time.perf_counter() - start)
        start = time.perf_counter()
        for i in range(0, episodes, 100):
            db.execute("BEGIN IMMEDIATE")
            for e in range(i, min(i + 100, episodes)):
                db.execute("INSERT INTO o (episode, ok) VALUES (?, 1)", (f"b{e}",))
                for m in sorted(set(picks[e].tolist())):
                    db.execute("UPDATE m SET s = s + ?, f = f + 0, n = n + 1 WHERE id = ?", (1 / K, f"m{m}"))
            db.execute("COMMIT")
        out["bare_batched"] = episodes / (time.perf_counter() - start)
        db.close()
    out["ratio_record_vs_bare"] = out["record"] / out["bare_per_episode"]
    out["ratio_record_many_vs_bare"] = out["record_many"] / out["bare_batched"]
    return out


def bench_recall(sizes: list[int], queries: int, rng: np.random.Generator) -> list[dict[str, Any]]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            store = _store(Path(tmp) / f"recall{n}.db", n, rng)
            store.recall("warm up the cache", k=K)
            times = []
            for _ in range(queries):
                q = " ".join(f"w{x}" for x in rng.integers(0, 5000, 6))
                start = time.perf_counter()
                store.recall(q, k=K)
                times.append(time.perf_counter() - start)
            store.close()
            ms = np.array(times) * 1000
            rows.append({"memories": n, "queries": queries, "p50_ms": float(np.percentile(ms, 50)),
                         "p99_ms": float(np.percentile(ms, 99)), "mean_ms": float(ms.mean())})
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="smaller sizes")
    p.add_argument("--out", type=Path, help="JSON output (default benchmarks/results/store[_quick].json)")
    p.add_argument("--postgres", default="postgresql://postgres@127.0.0.1:5432/test",
                   help="PostgreSQL to measure too ('' to skip)")
    args = p.parse_args(argv)
    rng = np.random.default_rng(7)
    episodes = 300 if args.quick else 2000
    sizes = [10_000] if args.quick else [10_000, 100_000]
    print(f"recording {episodes} episodes ...", file=sys.stderr)
    rec = bench_recording(episodes, rng)
    pg = None
    if args.postgres:
        print(f"recording {episodes} episodes into PostgreSQL ...", file=sys.stderr)
        pg = bench_postgres(args.postgres, episodes, rng)
    print(f"recall at {sizes} memories ...", file=sys.stderr)
    recall = bench_recall(sizes, 50 if args.quick else 300, rng)
    report = {
        "benchmark": "bench_store",
        "machine": {"platform": platform.platform(), "python": platform.python_version(), "numpy": np.__version__,
                    "memworth": memworth.__version__, "sqlite": sqlite3.sqlite_version},
        "recording": rec,
        "recording_postgres": pg,
        "recall": recall,
        "notes": ["1M memories need the vector index (faiss), not built yet: not measured"],
    }
    print(f"\nrecording into SQLite (WAL, synchronous=FULL), k={K}, episodes/s:")
    print(f"  MemoryStore.record (1 per transaction)  {rec['record']:>9.0f}   bare sqlite3 loop {rec['bare_per_episode']:>9.0f}"
          f"   ratio {rec['ratio_record_vs_bare']:.2f}")
    print(f"  MemoryStore.record_many (100 per txn)   {rec['record_many']:>9.0f}   bare sqlite3 loop {rec['bare_batched']:>9.0f}"
          f"   ratio {rec['ratio_record_many_vs_bare']:.2f}")
    if pg is not None:
        print(f"\nrecording into PostgreSQL (one writer, synchronous_commit on), k={K}, episodes/s:")
        print(f"  MemoryStore.record (1 per transaction)  {pg['record']:>9.0f}   bare psycopg loop {pg['bare_per_episode']:>9.0f}"
              f"   ratio {pg['ratio_record_vs_bare']:.2f}")
        print(f"  MemoryStore.record_many (100 per txn)   {pg['record_many']:>9.0f}   bare psycopg loop {pg['bare_batched']:>9.0f}"
              f"   ratio {pg['ratio_record_many_vs_bare']:.2f}")
    print("\nrecall latency (exact search, hashing encoder):")
    for r in recall:
        print(f"  {r['memories']:>8,} memories   p50 {r['p50_ms']:7.2f} ms   p99 {r['p99_ms']:7.2f} ms")
    out = args.out or HERE / "results" / ("store_quick.json" if args.quick else "store.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
