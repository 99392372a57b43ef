"""HTTP with many tenants (issue 17): does tenant A's long call hold up tenant B, and do
concurrent recalls of different tenants run at once?

Run from the repository root:

    .venv/bin/python benchmarks/bench_http.py [--outcomes 10000] [--reads 100] [--repeats 3] [--workers 4]
        [--switch 0.005] [--processes 1] [--no-single]

Real ``memworth serve`` processes (uvicorn, ``--log-level warning``) over copies of
one SQLite store: one with ``--workers 1`` (one store object: every request waits for the
one before it, as before issue 17; left out with ``--no-single``) and one with ``--workers N``
whose long calls run on its store objects (``--processes 0``). The store holds tenant A
(300 memories registered by id, ``--outcomes`` outcomes of 8 memories each) and tenants
b0..b7 (500 short memories each, HashingEncoder); each tenant has its own API key.

``memworth serve`` with more than one worker runs under a GIL switch interval of 0.5 ms
(``memworth.server.pool.SWITCH_INTERVAL``). With ``--switch S``, a third server runs
``--workers N --switch-interval S`` (``--switch 0.005``: CPython's default, as before the
server set it): how much of B's remaining wait under A's load is the wait for the GIL.
With ``--processes P``, another server runs ``--workers N --processes P``: A's replay and
govern run in P worker processes (``memworth serve``'s default is 1), off the server's GIL.

Per repeat, the servers take turns (each goes first in turn), so load from other
processes falls on all of them:

* quiet: tenant B (b0) reads ``--reads`` memories one after the other (``GET
  /v1/memories/{id}``), nothing else running; latency of each request, client side;
* loaded: the same reads while tenant A loops on ``GET /v1/replay`` and ``POST /v1/govern``
  (``apply: false``) over its outcomes, from another thread;
* 8 recalls: one ``POST /v1/recall`` from each of b0..b7 at once; wall time until all 8 answered.

Prints a table (p50, p99, loaded / quiet ratios, the 8-recall time) with the load average
and writes ``benchmarks/results/http_tenants.json``. Nothing here is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from memworth import HashingEncoder, MemoryStore, Sidecar
from memworth.server.keys import create_key
from memworth_bench.common import spread

HERE = Path(__file__).resolve().parent
TENANTS = [f"b{i}" for i in range(8)]
WORDS = "list dict sort branch merge join index cache test image query retry token shell path lock".split()


def build(path: Path, outcomes: int) -> dict[str, str]:
    """The store file: tenant A's log of ``outcomes`` outcomes, b0..b7's memories; their keys."""
    rng = np.random.default_rng(0)
    with MemoryStore.open(f"sqlite:///{path}", encoder=HashingEncoder(), seed=0) as store:
        sidecar = Sidecar(store)
        ids = [f"m{i}" for i in range(300)]
        sidecar.register(ids, namespace="a")
        done = 0
        while done < outcomes:
            n = min(500, outcomes - done)
            batch = []
            for _ in range(n):
                picked = [ids[i] for i in rng.choice(300, size=8, replace=False)]
                batch.append((sidecar.retrieved(picked, namespace="a").id, bool(rng.random() < 0.7)))
            store.record_many(batch, namespace="a")
            done += n
        for ns in TENANTS:
            texts = [" ".join(rng.choice(WORDS, size=6)) + f" note {i}" for i in range(500)]
            store.add_many([{"id": f"m{i}", "text": t} for i, t in enumerate(texts)], namespace=ns)
        return {ns: create_key(store, ns, "bench") for ns in ["a", *TENANTS]}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve(
    path: Path, workers: int, log: Path, switch: float | None = None, processes: int = 0
) -> tuple[subprocess.Popen[bytes], str]:
    """``memworth serve`` over ``path`` with ``processes`` worker processes for long calls; with
    ``switch``, ``--switch-interval`` that (seconds)."""
    port = _free_port()
    cmd = [sys.executable, "-m", "memworth.cli", "serve", "--store", f"sqlite:///{path}", "--port", str(port)]
    cmd += ["--workers", str(workers), "--processes", str(processes), "--log-level", "warning"]
    if switch is not None:
        cmd += ["--switch-interval", str(switch)]
    proc = subprocess.Popen(cmd, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"memworth serve exited with {proc.returncode}: {log.read_text()[-500:]}")
        try:
            if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                return proc, base
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.terminate()
    raise RuntimeError("memworth serve did not answer /health within 120 s")


def reads(base: str, key: str, n: int) -> list[float]:
    """Latencies (seconds) of ``n`` GET /v1/memories/{id}, one after the other, keep-alive."""
    out = []
    with httpx.Client(base_url=base, headers={"X-API-Key": key}, timeout=120) as client:
        for i in range(n):
            t = time.perf_counter()
            r = client.get(f"/v1/memories/m{i % 500}")
            out.append(time.perf_counter() - t)
            if r.status_code != 200:
                raise RuntimeError(f"read answered {r.status_code}: {r.text[:200]}")
    return out


def loaded_reads(base: str, keys: dict[str, str], n: int) -> tuple[list[float], float]:
    """The reads of :func:`reads` while tenant A loops on replay and govern; (latencies, A's
    calls answered per second over its whole loop, which starts 0.5 s before the reads and
    ends with its call under way when they end)."""
    stop = threading.Event()
    calls = [0]
    span = [0.0, 0.0]

    def tenant_a() -> None:
        with httpx.Client(base_url=base, headers={"X-API-Key": keys["a"]}, timeout=600) as client:
            span[0] = time.perf_counter()
            while not stop.is_set():
                r = client.get("/v1/replay") if calls[0] % 2 == 0 else client.post("/v1/govern", json={"apply": False})
                if r.status_code != 200:
                    raise RuntimeError(f"tenant A answered {r.status_code}: {r.text[:200]}")
                calls[0] += 1
            span[1] = time.perf_counter()

    looping = threading.Thread(target=tenant_a)
    looping.start()
    time.sleep(0.5)  # A's first call is under way
    try:
        lat = reads(base, keys["b0"], n)
    finally:
        stop.set()
        looping.join()
    if span[1] == 0.0:
        raise RuntimeError("tenant A's loop failed (see above)")
    return lat, calls[0] / (span[1] - span[0])


def eight_recalls(base: str, keys: dict[str, str]) -> float:
    """Wall time of one recall from each of b0..b7, all sent at once."""
    clients = [httpx.Client(base_url=base, headers={"X-API-Key": keys[ns]}, timeout=120) for ns in TENANTS]
    try:
        for c in clients:  # connections open before the clock starts
            c.get("/v1/ttl")
        barrier = threading.Barrier(len(clients) + 1)

        def one(i: int) -> None:
            barrier.wait()
            r = clients[i].post("/v1/recall", json={"query": f"{WORDS[i]} {WORDS[i + 3]} note", "k": 4})
            if r.status_code != 200:
                raise RuntimeError(f"recall answered {r.status_code}: {r.text[:200]}")

        with ThreadPoolExecutor(len(clients)) as ex:
            futures = [ex.submit(one, i) for i in range(len(clients))]
            barrier.wait()
            t = time.perf_counter()
            for f in futures:
                f.result()
            return time.perf_counter() - t
    finally:
        for c in clients:
            c.close()


def pct(xs: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(xs) * 1000, q))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--outcomes", type=int, default=10_000)
    p.add_argument("--reads", type=int, default=100)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--workers", type=int, default=4)
    p.add_argument(
        "--switch",
        type=float,
        help="also a server of --workers store objects run with --switch-interval this (seconds; CPython's "
        "default is 0.005, memworth serve's with several workers 0.0005)",
    )
    p.add_argument(
        "--processes", type=int, help="also a server of --workers store objects with this many worker processes"
    )
    p.add_argument("--no-single", action="store_true", help="leave out the --workers 1 server")
    p.add_argument("--out", type=Path, default=HERE / "results" / "http_tenants.json")
    args = p.parse_args()
    load_start = os.getloadavg()
    folder = Path(tempfile.mkdtemp(prefix="bench-http-"))
    procs = []
    try:
        t = time.perf_counter()
        keys = build(folder / "one.db", args.outcomes)
        print(
            f"built the store ({args.outcomes:,} outcomes of tenant A) in {time.perf_counter() - t:.0f} s", flush=True
        )
        modes: dict[str, tuple[int, float | None, int]] = {} if args.no_single else {"workers=1": (1, None, 0)}
        modes[f"workers={args.workers}"] = (args.workers, None, 0)
        if args.switch is not None:
            modes[f"workers={args.workers}, --switch-interval {args.switch:g}"] = (args.workers, args.switch, 0)
        if args.processes is not None:
            modes[f"workers={args.workers}, processes={args.processes}"] = (args.workers, None, args.processes)
        bases = {}
        for i, (name, (w, switch, processes)) in enumerate(modes.items()):
            copy = folder / f"s{i}.db"
            shutil.copy(folder / "one.db", copy)
            proc, bases[name] = serve(copy, w, folder / f"s{i}.log", switch, processes)
            procs.append(proc)
        for base in bases.values():  # warm-up: each server's objects (and processes) read the namespaces once
            reads(base, keys["b0"], 20)
            eight_recalls(base, keys)
            with httpx.Client(base_url=base, headers={"X-API-Key": keys["a"]}, timeout=600) as client:
                client.get("/v1/replay").raise_for_status()
                client.post("/v1/govern", json={"apply": False}).raise_for_status()
        got: dict[str, dict[str, list[Any]]] = {
            m: {"quiet": [], "loaded": [], "a_calls": [], "eight": []} for m in modes
        }
        for rep in range(args.repeats):
            order = list(modes)[rep % len(modes) :] + list(modes)[: rep % len(modes)]  # each goes first in turn
            for name in order:
                base = bases[name]
                got[name]["quiet"].append(reads(base, keys["b0"], args.reads))
                lat, a_calls = loaded_reads(base, keys, args.reads)
                got[name]["loaded"].append(lat)
                got[name]["a_calls"].append(a_calls)
                got[name]["eight"].append(eight_recalls(base, keys))
                print(f"repeat {rep + 1} {name}: done", flush=True)
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(30)
        shutil.rmtree(folder, ignore_errors=True)
    load_end = os.getloadavg()
    rows = {}
    for name, g in got.items():
        per = {
            k: [pct(x, q) for x in g[phase]]
            for k, phase, q in (
                ("quiet_p50", "quiet", 50),
                ("quiet_p99", "quiet", 99),
                ("loaded_p50", "loaded", 50),
                ("loaded_p99", "loaded", 99),
            )
        }
        rows[name] = {
            **{k: spread(v) for k, v in per.items()},
            "p50_ratio": spread([a / b for a, b in zip(per["loaded_p50"], per["quiet_p50"], strict=True)]),
            "p99_ratio": spread([a / b for a, b in zip(per["loaded_p99"], per["quiet_p99"], strict=True)]),
            "eight_recalls_s": spread(g["eight"]),
            "tenant_a_calls_per_s": spread(g["a_calls"]),
        }
    eight_ratio = (
        None
        if args.no_single
        else spread(
            [a / b for a, b in zip(got[f"workers={args.workers}"]["eight"], got["workers=1"]["eight"], strict=True)]
        )
    )
    print()
    print(
        f"tenant B: {args.reads} GETs of one memory, quiet and while tenant A loops on replay/govern over "
        f"{args.outcomes:,} outcomes; medians over {args.repeats} repeats (ms)"
    )
    print()
    print(
        "| server | B p50 quiet | B p99 quiet | B p50 loaded | B p99 loaded | p99 loaded/quiet | A calls/s "
        "| 8 concurrent recalls |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name, r in rows.items():
        print(
            f"| {name} | {r['quiet_p50']['median']:.1f} | {r['quiet_p99']['median']:.1f} | "
            f"{r['loaded_p50']['median']:.1f} | {r['loaded_p99']['median']:.1f} | "
            f"{r['p99_ratio']['median']:.2f}x ({r['p99_ratio']['min']:.2f}-{r['p99_ratio']['max']:.2f}) | {r['tenant_a_calls_per_s']['median']:.2f} | "
            f"{r['eight_recalls_s']['median'] * 1000:.0f} ms |"
        )
    print()
    if eight_ratio is not None:
        print(
            f"8 concurrent recalls (8 tenants), workers={args.workers} / workers=1: "
            f"{eight_ratio['median']:.2f}x the time"
        )
    print(
        f"load average at start {load_start[0]:.2f} {load_start[1]:.2f} {load_start[2]:.2f}, "
        f"at end {load_end[0]:.2f} {load_end[1]:.2f} {load_end[2]:.2f}; {os.cpu_count()} CPUs"
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "outcomes": args.outcomes,
                "reads": args.reads,
                "repeats": args.repeats,
                "workers": args.workers,
                "processes": args.processes,
                "load_start": load_start,
                "load_end": load_end,
                "cpus": os.cpu_count(),
                "servers": rows,
                "eight_recalls_ratio": eight_ratio,
                "raw": {k: {p: v for p, v in g.items()} for k, g in got.items()},
            },
            indent=2,
        )
    )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
