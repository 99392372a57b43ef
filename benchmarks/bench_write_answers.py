"""Did keeping each write with its answer (issue 18) slow the normal path? HTTP write and
recall latency of two source trees, side by side.

Run from the repository root, naming the tree to compare with (another checkout's ``src``):

    .venv/bin/python benchmarks/bench_write_answers.py --before ../main/src [--rounds 300] [--repeats 3]
        [--backends memory,sqlite,postgres] [--postgres postgresql://postgres@127.0.0.1:5432/test]

Each measurement is a child process (``PYTHONPATH`` set to one tree) that opens a fresh
store (HashingEncoder, 200 memories), builds the app (``create_app``, one store object) and
sends, through Starlette's TestClient (the whole ASGI stack in process, no socket noise),
``--rounds`` times: ``POST /v1/memories``, ``POST /v1/recall`` and ``POST
/v1/episodes/{id}/outcome``; it reports each route's latencies. Per repeat and backend the
two trees take turns (each goes first in turn), so load from other processes falls on both.
Prints p50 and p90 per route and tree, and after/before ratios of the medians over repeats,
with the load average; writes JSON (``--out``). Nothing here is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
ROUTES = ("add", "recall", "record")

CHILD = r"""
import json, sys, time, uuid
from fastapi.testclient import TestClient
from memworth import HashingEncoder, MemoryStore
from memworth.server import create_app, create_key

url, rounds = sys.argv[1], int(sys.argv[2])
store = MemoryStore.open(url, encoder=HashingEncoder(), seed=0)
store.add_many([{"id": f"m{i}", "text": f"fact {i} about topic {i % 17} and thing {i % 5}"} for i in range(200)])
h = {"Authorization": "Bearer " + create_key(store, "default", "bench")}
client = TestClient(create_app(store))
times = {"add": [], "recall": [], "record": []}
for i in range(rounds + 20):  # the first 20 warm up
    t0 = time.perf_counter()
    r = client.post("/v1/memories", json={"text": f"new fact {i} about topic {i % 17}", "id": f"n{i}"}, headers=h)
    t1 = time.perf_counter()
    e = client.post("/v1/recall", json={"query": f"topic {i % 17}", "k": 4}, headers=h)
    t2 = time.perf_counter()
    o = client.post(f"/v1/episodes/{e.json()['episode']}/outcome", json={"outcome": "success"}, headers=h)
    t3 = time.perf_counter()
    assert r.status_code == 201 and e.status_code == 200 and o.status_code == 200, (r.text, e.text, o.text)
    if i >= 20:
        times["add"].append(t1 - t0)
        times["recall"].append(t2 - t1)
        times["record"].append(t3 - t2)
if url.startswith("postgres"):
    store.backend.drop()
store.close()
print(json.dumps(times))
"""


def _url(backend: str, postgres: str, workdir: Path) -> str:
    if backend == "memory":
        return "memory://"
    if backend == "sqlite":
        return f"sqlite:///{workdir / f'w{uuid.uuid4().hex[:8]}.db'}"
    sep = "&" if "?" in postgres else "?"
    return f"{postgres}{sep}schema=bench_{uuid.uuid4().hex[:12]}&pool_size=2"


def _run(tree: str, url: str, rounds: int) -> dict[str, list[float]]:
    env = {**os.environ, "PYTHONPATH": tree}
    out = subprocess.run(
        [sys.executable, "-c", CHILD, url, str(rounds)], env=env, capture_output=True, text=True, check=True
    )
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--before", required=True, help="the src folder of the tree to compare with")
    p.add_argument("--after", default=str(HERE.parent / "src"), help="default: this tree's src")
    p.add_argument("--rounds", type=int, default=300)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--backends", default="memory,sqlite,postgres")
    p.add_argument("--postgres", default="postgresql://postgres@127.0.0.1:5432/test")
    p.add_argument("--out", type=Path, default=HERE / "results" / "write_answers.json")
    args = p.parse_args()
    trees = {"before": str(Path(args.before).resolve()), "after": str(Path(args.after).resolve())}
    load = os.getloadavg()
    results: dict[str, dict[str, list[dict[str, float]]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for backend in args.backends.split(","):
            per = results.setdefault(backend, {"before": [], "after": []})
            for repeat in range(args.repeats):
                order = ["before", "after"] if repeat % 2 == 0 else ["after", "before"]
                for name in order:
                    times = _run(trees[name], _url(backend, args.postgres, Path(tmp)), args.rounds)
                    per[name].append(
                        {
                            f"{route}_{q}": float(np.percentile(times[route], pct)) * 1000
                            for route in ROUTES
                            for q, pct in (("p50", 50), ("p90", 90))
                        }
                    )
    print(f"load average before the run: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; after: {os.getloadavg()[0]:.2f}")
    print(f"{'backend':<9}{'route':<8}{'before p50':>11}{'after p50':>11}{'ratio':>7}{'before p90':>12}{'after p90':>11}")
    summary: dict[str, Any] = {}
    for backend, per in results.items():
        for route in ROUTES:
            row = {}
            for q in ("p50", "p90"):
                for name in ("before", "after"):
                    row[f"{name}_{q}"] = float(np.median([r[f"{route}_{q}"] for r in per[name]]))
            row["ratio_p50"] = row["after_p50"] / row["before_p50"]
            summary[f"{backend}/{route}"] = row
            print(
                f"{backend:<9}{route:<8}{row['before_p50']:>9.2f}ms{row['after_p50']:>9.2f}ms{row['ratio_p50']:>7.2f}"
                f"{row['before_p90']:>10.2f}ms{row['after_p90']:>9.2f}ms"
            )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps({"load": load, "rounds": args.rounds, "repeats": args.repeats, "summary": summary, "runs": results}, indent=1)
    )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
