"""Recorded outcomes per second through ``memworth serve``, beside a validate-only FastAPI app.

Both servers run in their own process with the same uvicorn settings (one worker,
``log_level="warning"``, 127.0.0.1); the same client (httpx, async, a few concurrent
keep-alive connections) sends the same bodies (``{"success": ...}``) to
``POST /v1/episodes/{id}/outcome`` of each, in turns, repeat by repeat. memworth's
episodes are recalled beforehand, through the library (untimed); every request of a run
must answer 200.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import numpy as np

from memworth import HashingEncoder, MemoryStore
from memworth_bench.common import Section, Settings, Task, interleave, mid, not_measured, ratio, section, spread
from memworth_bench.data import memory_texts

NAME = "http"
TITLE = "HTTP: recorded outcomes per second, memworth serve vs a validate-only FastAPI endpoint"
CONNECTIONS = 4
K = 4


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start(cmd: list[str], port: int, log_path: Path) -> subprocess.Popen[bytes]:
    import httpx

    out = log_path.open("wb")
    proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{' '.join(cmd[:4])} exited with {proc.returncode}: {log_path.read_text()[-500:]}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.terminate()
    raise RuntimeError(f"server on port {port} did not answer /health within 60 s")


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` and its threads so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _ms(x: float) -> str:
    return f"{x:.2f}"


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


async def _drive(port: int, episodes: list[str], outcomes: list[bool], key: str) -> float:
    import httpx

    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(len(episodes)):
        queue.put_nowait(i)
    failures: list[str] = []
    limits = httpx.Limits(max_connections=CONNECTIONS, max_keepalive_connections=CONNECTIONS)
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(
        base_url=f"http://127.0.0.1:{port}", limits=limits, headers=headers, timeout=60
    ) as client:

        async def worker() -> None:
            while not queue.empty():
                i = queue.get_nowait()
                r = await client.post(f"/v1/episodes/{episodes[i]}/outcome", json={"success": outcomes[i]})
                if r.status_code != 200:
                    failures.append(f"{r.status_code} {r.text[:200]}")

        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(CONNECTIONS)))
        seconds = time.perf_counter() - start
    if failures:
        raise RuntimeError(f"{len(failures)} request(s) failed, first: {failures[0]}")
    return seconds


def measure(settings: Settings) -> Section:
    title = "HTTP outcomes per second"
    try:
        import fastapi  # noqa: F401
        import httpx  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        return not_measured("http", title, f"needs the server extra ({exc})")
    from memworth.server.keys import create_key

    per_run = settings.pick(300, 2000, smoke=50)
    runs = settings.repeats + 1  # + the warm-up
    path = (settings.workdir / f"http-{uuid.uuid4().hex[:8]}.db").resolve()
    url = f"sqlite:///{path}"
    rng = np.random.default_rng(5)
    with MemoryStore.open(url, encoder=HashingEncoder(), seed=0) as store:
        store.add_many([{"id": f"m{i}", "text": t} for i, t in enumerate(memory_texts(rng, 1000))])
        key = create_key(store, "default", "bench")
        eps = [
            store.recall(f"w{rng.integers(5000)} w{rng.integers(5000)}", k=K).episode.id for _ in range(per_run * runs)
        ]
    outcomes = (rng.random(per_run) < 0.6).tolist()
    mw_port, base_port = _free_port(), _free_port()
    serve = [sys.executable, "-m", "memworth.cli", "serve", "--store", url, "--port", str(mw_port), "--log-level"]
    serve.append("warning")  # as the baseline runs: memworth serve's default (info) writes an access-log line a request
    baseline = [sys.executable, "-m", "memworth_bench.http_baseline", "--port", str(base_port)]
    procs = []
    try:
        procs.append(_start(serve, mw_port, settings.workdir / "http-serve.log"))
        procs.append(_start(baseline, base_port, settings.workdir / "http-baseline.log"))
        used = {"n": 0}
        cpu: dict[str, list[float]] = {"memworth": [], "baseline": []}

        def timed(name: str, proc: subprocess.Popen[bytes], port: int, ids: list[str]) -> float:
            before = _cpu_seconds(proc.pid)
            seconds = asyncio.run(_drive(port, ids, outcomes, key))
            cpu[name].append((_cpu_seconds(proc.pid) - before) / per_run)
            return per_run / seconds

        def memworth_run() -> float:
            chunk = eps[used["n"] * per_run : (used["n"] + 1) * per_run]
            used["n"] += 1
            return timed("memworth", procs[0], mw_port, chunk)

        def baseline_run() -> float:
            return timed("baseline", procs[1], base_port, [uuid.uuid4().hex for _ in range(per_run)])

        rates = interleave({"memworth": memworth_run, "baseline": baseline_run}, settings.repeats)
        cpu = {k: v[1:] for k, v in cpu.items()}  # the warm-up run is not a repeat
    finally:
        for p in procs:
            _stop(p)
    with MemoryStore.open(url) as store:
        recorded = len(list(store.backend.outcome_log()))
        consistent = store.replay().consistent
    mw, base = spread(rates["memworth"]), spread(rates["baseline"])
    cpu_ms = {k: [1000 * x for x in v] for k, v in cpu.items()}
    return section(
        "http",
        f"HTTP: POST /v1/episodes/{{id}}/outcome, {CONNECTIONS} concurrent connections, {per_run:,} requests per run",
        ["server", "outcomes/s median (min-max)", "server CPU ms per request, median (min-max)"],
        [
            ["memworth serve (SQLite store, key lookup, record)", mid(mw), mid(spread(cpu_ms["memworth"]), _ms)],
            ["validate-only FastAPI endpoint (same body model)", mid(base), mid(spread(cpu_ms["baseline"]), _ms)],
        ],
        ratios=[
            ratio("memworth serve / validate-only endpoint", rates["memworth"], rates["baseline"], "requests/s"),
            ratio(
                "memworth serve / validate-only endpoint, server CPU per request",
                cpu_ms["memworth"],
                cpu_ms["baseline"],
                "CPU seconds per request",
            ),
        ],
        notes=[
            f"uvicorn, one worker, log_level=warning, both; client: httpx AsyncClient in the benchmark process, "
            f"{CONNECTIONS} connections",
            f"outcomes in the store afterwards: {recorded:,} (expected {per_run * runs:,}); replay consistent: "
            f"{'yes' if consistent else 'NO'}",
            "requests/s is what a client sees and is capped by the client and the machine's load when the server "
            "is cheap; server CPU per request (user + system time of the server process, /proc) is the server's "
            "own cost and is far less sensitive to load",
        ],
        data={
            "requests_per_run": per_run,
            "connections": CONNECTIONS,
            "memworth_rps": mw,
            "baseline_rps": base,
            "server_cpu_ms_per_request": {k: spread(v) for k, v in cpu_ms.items()},
            "recorded": recorded,
            "expected": per_run * runs,
            "replay_consistent": consistent,
        },
    )


def plan(settings: Settings) -> list[Task]:
    return [Task("http", "HTTP outcomes per second", lambda: measure(settings), tier=0)]
