"""Candidate search at scale: exact (matrix-vector product) vs faiss HNSW, with recall@10.

Run from the repository root:

    .venv/bin/python benchmarks/bench_index.py [--quick]

Vectors are 384-d unit vectors shaped like sentence embeddings: 200 topic clusters on a
16-dimensional subspace plus isotropic noise (uniform random vectors would make every
graph index look broken, and no text embedding looks like them). For each size: HNSW
build time, query latency p50/p99 of both indexes over the same queries, and HNSW's
recall@10 against the exact answer. Prints a table, writes JSON; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import numpy as np

from memworth.vector_index import ExactIndex, HNSWIndex

HERE = Path(__file__).resolve().parent


def embeddings(n: int, seed: int, dim: int = 384, intrinsic: int = 16, clusters: int = 200) -> np.ndarray:
    rng = np.random.default_rng(seed)
    basis = np.random.default_rng(99).standard_normal((intrinsic, dim)).astype(np.float32)
    centres = 2 * np.random.default_rng(98).standard_normal((clusters, intrinsic)).astype(np.float32)
    out = np.empty((n, dim), dtype=np.float32)
    for start in range(0, n, 100_000):
        m = min(100_000, n - start)
        z = centres[rng.integers(0, clusters, m)] + rng.standard_normal((m, intrinsic)).astype(np.float32)
        x = z @ basis + 0.5 * rng.standard_normal((m, dim)).astype(np.float32)
        out[start : start + m] = x / np.linalg.norm(x, axis=1, keepdims=True)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="10k and 100k instead of 100k and 1M")
    p.add_argument("--queries", type=int, default=200)
    p.add_argument("--out", type=Path)
    args = p.parse_args(argv)
    sizes = [10_000, 100_000] if args.quick else [100_000, 1_000_000]
    rows = []
    for n in sizes:
        data = embeddings(n, 1)
        queries = embeddings(args.queries, 2)
        exact = ExactIndex(384)
        exact.add(data)
        start = time.perf_counter()
        hnsw = HNSWIndex(384)
        hnsw.add(data)
        build = time.perf_counter() - start
        timings: dict[str, list[float]] = {"exact": [], "hnsw": []}
        hits = 0
        for q in queries:
            t = time.perf_counter()
            truth, _ = exact.search(q, 10)
            timings["exact"].append(time.perf_counter() - t)
            t = time.perf_counter()
            found, _ = hnsw.search(q, 10)
            timings["hnsw"].append(time.perf_counter() - t)
            hits += len(set(truth.tolist()) & set(found.tolist()))
        row = {"vectors": n, "hnsw_build_s": build, "recall_at_10": hits / (10 * len(queries))}
        for name, ts in timings.items():
            ms = np.array(ts) * 1000
            row[f"{name}_p50_ms"] = float(np.percentile(ms, 50))
            row[f"{name}_p99_ms"] = float(np.percentile(ms, 99))
        row["speedup_p50"] = row["exact_p50_ms"] / row["hnsw_p50_ms"]
        rows.append(row)
        print(f"{n:>9,} vectors: exact p50 {row['exact_p50_ms']:7.2f} ms p99 {row['exact_p99_ms']:7.2f} ms | "
              f"HNSW p50 {row['hnsw_p50_ms']:6.3f} ms p99 {row['hnsw_p99_ms']:6.3f} ms | "
              f"x{row['speedup_p50']:.0f} at p50, recall@10 {row['recall_at_10']:.4f}, build {build:.0f} s", flush=True)
        del data, exact, hnsw
    out = args.out or HERE / "results" / ("index_quick.json" if args.quick else "index.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"benchmark": "bench_index", "platform": platform.platform(), "rows": rows}, indent=2) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
