"""memworth against the peers a user would install instead (issue 17): veramem and runtime-memory.

Run from the repository root:

    .venv/bin/python benchmarks/bench_peers.py [--memories 1000] [--episodes 2000] [--batch 100] [--repeats 3]

Each peer is installed at its pinned version (``--peers veramem==0.1.0 runtime-memory==4.0.1``)
in a virtualenv of its own, never in memworth's dependencies: ``python -m venv --without-pip``
on the interpreter running this script, then this interpreter's pip installs the pin into it
(``pip --python``). The venvs are cached under ``~/.cache/memworth/peer-envs/<name>-<version>``
(``--envs`` to change; a venv is kept only once its install succeeded). A peer whose venv
cannot be made (no network, no such version) is reported as **not measured**, with pip's
reason, and its ratios too.

The workload is generated once per run, here, and handed to every contender as the same
JSON file: ``--memories`` memories of 8 words each, drawn from a vocabulary of 1,000
made-up words (so a query matches a few memories, not all of them); ``--episodes`` queries of
4 words (3 from one memory, 1 at random); one outcome per episode, success with
probability 0.7. An *episode* is a retrieval of the 8 best memories for one query followed
by its success/failure outcome credited to those memories, through each system's own
public API, on its own SQLite file:

* **veramem 0.1.0**: ``Memory(path, llm=NoLLM(), embedder=HashEmbedder())``, its offline
  defaults (no model provider reachable: no LLM, feature-hashed 1,024-d vectors). Set-up:
  ``add(text, user_id="bench", infer=False)`` per memory (a raw episode, its memory, ledger
  entries). Episode: ``search(query, user_id="bench", limit=8)`` (hybrid: exact dense
  search + FTS5 BM25 over memories and raw episodes, reciprocal-rank fusion, the
  contextual outcome ranking; the trace is logged) then ``feedback(trace_id, +1 or -1,
  cited=<the 8 ids>)`` (each cited memory's success/failure counts, an outcome row each,
  the trace's outcome and a hash-chained ledger entry).
* **runtime-memory 4.0.1**: ``create_engine(path)`` with its default provider, which a plain
  ``pip install runtime-memory`` resolves to keyword search only (no
  sentence-transformers: ``NullEmbeddingProvider``, BM25). Set-up: ``add(content,
  category=PATTERN, project="bench")`` per memory. Episode: ``search(query, limit=8,
  project="bench")`` (BM25 plus its outcome-weighted ranking; it increments the returned
  memories' use counts, a write) then ``record_outcome(<the 8 ids>, WORKED or FAILED)``.
  Its API is asyncio; the driver awaits each call in one event loop.
* **memworth** (this checkout, the interpreter running this script):
  ``MemoryStore.open("sqlite:///...", encoder=HashingEncoder(), seed=0)`` (384-d
  feature-hashed vectors, exact search). Set-up: one ``add_many`` of every memory. Episode:
  ``recall(query, k=8)`` (candidate search, worth-aware ranking with the exploration floor;
  the episode row with each pick's credit weight and inclusion probability is written)
  then its outcome, in three modes: ``record()`` one outcome per transaction;
  ``record_many()`` of ``--batch`` outcomes per call (the recalls still log one episode
  each; only the outcomes are batched); and ``record()`` on a store opened with
  ``?synchronous=normal``.

Fairness notes. Both peers open SQLite in WAL mode with ``synchronous=NORMAL``: a commit is
not fsynced, so a power cut can lose the last acknowledged outcomes. memworth's default is
``synchronous=FULL`` (an acknowledged outcome survives a power cut), so its first two modes pay
an fsync per transaction that the peers do not; the third mode gives memworth the peers'
durability. The systems do different work per episode (veramem also searches raw episodes
and keeps a ledger; runtime-memory searches keywords only; memworth also logs inclusion
probabilities and updates its change statistics): the comparison is what a user's episode
costs through each API, not the same SQL. Each contender's episodes run in a fresh
subprocess on a fresh database (its own venv for a peer, this interpreter for memworth);
set-up and start-up are not timed, only the loop over the episodes. Each driver reports the
mean number of memories its retrievals returned, so a contender that returned fewer than 8
is visible.

Per repeat, every contender runs once, taking turns, the order reversed every other repeat,
so load from other processes falls on all of them; a ratio (peer / memworth mode) is taken
per repeat. Prints the table (seconds per 1,000 episodes, median and min-max over the
repeats; ratios; the issue's targets: at least 2x veramem one outcome per transaction and
10x batched) with the load average, and writes ``benchmarks/results/peers.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DEFAULT_PEERS = ["veramem==0.1.0", "runtime-memory==4.0.1"]
DEFAULT_ENVS = Path.home() / ".cache" / "memworth" / "peer-envs"
MEMWORTH_MODES = ["1/txn", "batched", "1/txn normal"]
TARGETS = {("veramem", "1/txn"): 2.0, ("veramem", "batched"): 10.0}
"""Issue 17's targets: memworth at least this many times faster than the peer, per episode."""

_SYLLABLES = "ka lo mi ne ru sa ti vo pe da gu ri zo fa le".split()
_OK = ".memworth-installed"

VERAMEM_DRIVER = """
import json, os, sys, time
from importlib.metadata import version
from veramem import Memory
from veramem.providers import HashEmbedder, NoLLM

spec = json.load(open(sys.argv[1]))
mem = Memory(spec["db"], llm=NoLLM(), embedder=HashEmbedder())
t = time.perf_counter()
for text in spec["memories"]:
    mem.add(text, user_id="bench", infer=False)
setup = time.perf_counter() - t
got = 0
t = time.perf_counter()
for query, ok in zip(spec["queries"], spec["outcomes"]):
    res = mem.search(query, user_id="bench", limit=spec["k"])
    ids = [h.memory.id for h in res.hits]
    mem.feedback(res.trace_id, 1.0 if ok else -1.0, cited=ids)
    got += len(ids)
took = time.perf_counter() - t
print(json.dumps({"contender": "veramem", "version": version("veramem"), "mode": "search+feedback",
                  "episodes": len(spec["queries"]), "memories": len(spec["memories"]), "episode_s": took,
                  "setup_s": setup, "retrieved_mean": got / max(1, len(spec["queries"]))}))
"""

RUNTIME_MEMORY_DRIVER = """
import asyncio, json, sys, time
from importlib.metadata import version
from runtime_memory.core.engine import create_engine
from runtime_memory.core.models import MemoryCategory, Outcome

async def main():
    spec = json.load(open(sys.argv[1]))
    engine = await create_engine(spec["db"])
    t = time.perf_counter()
    for text in spec["memories"]:
        await engine.add(content=text, category=MemoryCategory.PATTERN, project="bench")
    setup = time.perf_counter() - t
    got = 0
    t = time.perf_counter()
    for query, ok in zip(spec["queries"], spec["outcomes"]):
        hits = await engine.search(query, limit=spec["k"], project="bench")
        ids = [h.memory.id for h in hits]
        await engine.record_outcome(ids, Outcome.WORKED if ok else Outcome.FAILED)
        got += len(ids)
    took = time.perf_counter() - t
    provider = type(engine.embedding_provider).__name__
    await engine.close()
    print(json.dumps({"contender": "runtime-memory", "version": version("runtime-memory"),
                      "mode": "search+record_outcome (" + provider + ")", "episodes": len(spec["queries"]),
                      "memories": len(spec["memories"]), "episode_s": took, "setup_s": setup,
                      "retrieved_mean": got / max(1, len(spec["queries"]))}))

asyncio.run(main())
"""

PEER_DRIVERS = {"veramem": VERAMEM_DRIVER, "runtime-memory": RUNTIME_MEMORY_DRIVER}


def workload(memories: int, episodes: int, seed: int = 0) -> dict[str, Any]:
    """The memories, queries and outcomes every contender gets (plain lists: JSON-ready)."""
    rng = random.Random(seed)
    vocab: set[str] = set()
    while len(vocab) < 1000:
        vocab.add("".join(rng.choice(_SYLLABLES) for _ in range(3)))
    words = sorted(vocab)
    texts = [" ".join(rng.choice(words) for _ in range(8)) for _ in range(memories)]
    queries = [" ".join([*rng.sample(rng.choice(texts).split(), 3), rng.choice(words)]) for _ in range(episodes)]
    outcomes = [rng.random() < 0.7 for _ in range(episodes)]
    return {"memories": texts, "queries": queries, "outcomes": outcomes, "k": 8}


def peer_env(requirement: str, envs: Path, timeout: float = 900.0) -> tuple[Path | None, str]:
    """The python of ``requirement``'s own venv (made and cached on first use), or None and why not.

    ``requirement`` is ``name==version``. A venv whose install failed is removed, so the
    next run tries again.
    """
    name, sep, version = requirement.partition("==")
    if not sep or not name or not version:
        return None, f"{requirement!r} is not name==version"
    folder = envs / f"{name}-{version}"
    python = folder / "bin" / "python"
    if (folder / _OK).exists() and python.exists():
        return python, f"cached in {folder}"
    shutil.rmtree(folder, ignore_errors=True)
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return None, f"cannot make {folder}: {exc.strerror or exc}"
    steps = [
        [sys.executable, "-m", "venv", "--without-pip", str(folder)],
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--disable-pip-version-check",
         requirement],
    ]  # fmt: skip
    for cmd in steps:
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            shutil.rmtree(folder, ignore_errors=True)
            return None, f"{' '.join(cmd[2:5])} took over {timeout:.0f} s"
        if done.returncode != 0:
            shutil.rmtree(folder, ignore_errors=True)
            lines = [ln for ln in (done.stderr or done.stdout).splitlines() if ln.strip()]
            errors = [ln for ln in lines if ln.startswith("ERROR")] or lines[-1:]
            return None, f"installing {requirement} failed: {errors[-1] if errors else f'exit {done.returncode}'}"
    (folder / _OK).write_text(requirement + "\n")
    return python, f"installed in {folder}"


def drive_memworth(spec: dict[str, Any], mode: str, batch: int = 100) -> dict[str, Any]:
    """memworth's episodes in ``mode`` (one of :data:`MEMWORTH_MODES`) on a fresh SQLite store at ``spec["db"]``."""
    from importlib.metadata import version

    from memworth import HashingEncoder, MemoryStore

    if mode not in MEMWORTH_MODES:
        raise ValueError(f"mode must be one of {MEMWORTH_MODES}, got {mode!r}")
    url = f"sqlite:///{spec['db']}" + ("?synchronous=normal" if mode.endswith("normal") else "")
    k, pairs = spec["k"], list(zip(spec["queries"], spec["outcomes"], strict=True))
    with MemoryStore.open(url, encoder=HashingEncoder(), seed=0) as store:
        t = time.perf_counter()
        store.add_many([{"id": f"m{i}", "text": text} for i, text in enumerate(spec["memories"])])
        setup = time.perf_counter() - t
        got = 0
        t = time.perf_counter()
        if mode == "batched":
            for start in range(0, len(pairs), batch):
                done = []
                for query, ok in pairs[start : start + batch]:
                    rec = store.recall(query, k=k)
                    got += len(rec)
                    done.append((rec, ok))
                store.record_many(done)
        else:
            for query, ok in pairs:
                rec = store.recall(query, k=k)
                got += len(rec)
                store.record(rec, ok)
        took = time.perf_counter() - t
        recorded = store.backend.outcome_count("default")
    return {
        "contender": "memworth",
        "version": version("memworth"),
        "mode": mode if mode != "batched" else f"batched ({batch} per record_many)",
        "episodes": len(pairs),
        "memories": len(spec["memories"]),
        "episode_s": took,
        "setup_s": setup,
        "retrieved_mean": got / max(1, len(pairs)),
        "recorded": recorded,
    }


def run_driver(cmd: list[str], timeout: float) -> dict[str, Any]:
    """Run one driver process; its last stdout line is its JSON, or the result is ``{"error": ...}``."""
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"took over {timeout:.0f} s"}
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        return {"error": f"driver failed: {tail}"}
    try:
        out: dict[str, Any] = json.loads(lines[-1])
    except json.JSONDecodeError:
        return {"error": f"driver printed no JSON: {lines[-1][:200]}"}
    return out


def spread(values: list[float]) -> dict[str, Any]:
    """Median, min and max of repeated measurements, and the values."""
    vals = sorted(values)
    n = len(vals)
    median = vals[n // 2] if n % 2 else (vals[n // 2 - 1] + vals[n // 2]) / 2
    return {"median": median, "min": vals[0], "max": vals[-1], "values": list(values)}


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Every contender's seconds per 1,000 episodes, repeat by repeat, and the ratios."""
    work = Path(tempfile.mkdtemp(prefix="bench-peers-"))
    try:
        spec = workload(args.memories, args.episodes, args.seed)
        contenders: dict[str, list[str]] = {}
        not_measured: dict[str, str] = {}
        for req in dict.fromkeys(args.peers):
            name = req.partition("==")[0]
            label = req.replace("==", " ")
            if name not in PEER_DRIVERS:
                not_measured[label] = f"no driver for {name} (drivers: {', '.join(PEER_DRIVERS)})"
                continue
            python, why = peer_env(req, args.envs)
            print(f"{req}: {why}", flush=True)
            if python is None:
                not_measured[label] = why
                continue
            script = work / f"drive_{name.replace('-', '_')}.py"
            script.write_text(PEER_DRIVERS[name])
            contenders[label] = [str(python), str(script)]
        for mode in MEMWORTH_MODES:
            contenders[f"memworth {mode}"] = [
                sys.executable, str(Path(__file__).resolve()), "--drive", mode, "--batch", str(args.batch)
            ]  # fmt: skip
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name in contenders}
        for rep in range(args.repeats):
            order = list(contenders) if rep % 2 == 0 else list(contenders)[::-1]
            for name in order:
                db = work / f"{name.replace(' ', '_').replace('/', '-')}-{rep}.db"
                spec_file = work / "spec.json"
                spec_file.write_text(json.dumps({**spec, "db": str(db)}))
                got = run_driver([*contenders[name], str(spec_file)], args.timeout)
                runs[name].append(got)
                for f in work.glob(f"{db.name}*"):
                    f.unlink()
                shown = got.get("error") or f"{got['episode_s'] / got['episodes'] * 1000:.2f} s per 1,000 episodes"
                print(f"repeat {rep + 1} {name}: {shown}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return summarise(runs, not_measured)


def summarise(runs: dict[str, list[dict[str, Any]]], not_measured: dict[str, str]) -> dict[str, Any]:
    """Rows (seconds per 1,000 episodes) and ratios (peer / memworth mode) from the drivers' outputs.

    ``runs``: each contender's driver outputs, one per repeat (``{"error": ...}`` for a failed
    one), peers named ``"name version"``, memworth's modes ``"memworth <mode>"``;
    ``not_measured``: the peers that could not run, and why.
    """
    rows: dict[str, dict[str, Any]] = {}
    per_k: dict[str, list[float | None]] = {}
    for name, outs in runs.items():
        ok = [o for o in outs if "error" not in o]
        per_k[name] = [o["episode_s"] / o["episodes"] * 1000 if "error" not in o else None for o in outs]
        if not ok:
            errs = sorted({o["error"] for o in outs})
            rows[name] = {"status": f"not measured: {'; '.join(errs)}"}
            continue
        rows[name] = {
            "status": "measured" if len(ok) == len(outs) else f"{len(outs) - len(ok)} of {len(outs)} repeats failed",
            "version": ok[0]["version"],
            "mode": ok[0]["mode"],
            "s_per_1000": spread([v for v in per_k[name] if v is not None]),
            "retrieved_mean": min(o["retrieved_mean"] for o in ok),
            "setup_s": spread([o["setup_s"] for o in ok]),
        }
    for name, why in not_measured.items():
        rows[name] = {"status": f"not measured: {why}"}
    ratios = []
    peers = [n for n in [*runs, *not_measured] if not n.startswith("memworth")]
    for peer in dict.fromkeys(peers):
        for mode in MEMWORTH_MODES:
            mw = f"memworth {mode}"
            target = TARGETS.get((peer.split(" ")[0], mode))
            pairs = [
                (p, m) for p, m in zip(per_k.get(peer, []), per_k.get(mw, []), strict=False) if p is not None and m
            ]
            entry: dict[str, Any] = {"peer": peer, "memworth": mode, "target": target}
            if not pairs:
                reason = rows.get(peer, {}).get("status", "")
                if not reason.startswith("not measured"):  # then memworth's mode failed
                    reason = rows.get(mw, {}).get("status", "")
                entry["status"] = reason if reason.startswith("not measured") else "not measured"
            else:
                entry["ratio"] = spread([p / m for p, m in pairs])
                entry["met"] = None if target is None else entry["ratio"]["median"] >= target
            ratios.append(entry)
    return {"rows": rows, "ratios": ratios}


def render(result: dict[str, Any], args: argparse.Namespace, load: tuple[Any, Any]) -> str:
    """The Markdown table printed and kept in BENCHMARKS.md."""

    def fmt(s: dict[str, Any], digits: int = 2) -> str:
        return f"{s['median']:.{digits}f} ({s['min']:.{digits}f}-{s['max']:.{digits}f})"

    out = [
        f"{args.memories:,} memories, {args.episodes:,} episodes of 8 memories each, SQLite; "
        f"median (min-max) over {args.repeats} repeats",
        "",
        "| contender | episode | s per 1,000 episodes | mean memories per retrieval |",
        "|---|---|---|---|",
    ]
    for name, row in result["rows"].items():
        if "s_per_1000" not in row:
            out.append(f"| {name} | | {row['status']} | |")
            continue
        who = f"memworth {row['version']}" if name.startswith("memworth") else name
        mode = row["mode"] if not name.startswith("memworth") else f"recall + record, {row['mode']}"
        note = "" if row["status"] == "measured" else f" ({row['status']})"
        out.append(f"| {who} | {mode} | {fmt(row['s_per_1000'])}{note} | {row['retrieved_mean']:.1f} |")
    out += ["", "| peer | memworth mode | peer / memworth (per repeat) | target | met |", "|---|---|---|---|---|"]
    for r in result["ratios"]:
        target = "" if r["target"] is None else f">= {r['target']:g}x"
        if "ratio" not in r:
            out.append(f"| {r['peer']} | {r['memworth']} | {r['status']} | {target} | |")
            continue
        met = "" if r["met"] is None else ("yes" if r["met"] else "no")
        out.append(f"| {r['peer']} | {r['memworth']} | {fmt(r['ratio'], 1)}x | {target} | {met} |")
    start, end = load
    out += [
        "",
        f"load average at start {start[0]:.2f} {start[1]:.2f} {start[2]:.2f}, "
        f"at end {end[0]:.2f} {end[1]:.2f} {end[2]:.2f}; {os.cpu_count()} CPUs",
    ]
    return "\n".join(out)


def main() -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--memories", type=int, default=1000)
    p.add_argument("--episodes", type=int, default=2000)
    p.add_argument("--batch", type=int, default=100, help="outcomes per record_many call (memworth batched)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--peers", nargs="*", default=DEFAULT_PEERS, help="name==version of each peer")
    p.add_argument("--envs", type=Path, default=DEFAULT_ENVS, help="where the peers' venvs are cached")
    p.add_argument("--timeout", type=float, default=3600.0, help="seconds one contender's run may take")
    p.add_argument("--out", type=Path, default=HERE / "results" / "peers.json")
    p.add_argument("--drive", choices=MEMWORTH_MODES, help=argparse.SUPPRESS)  # the memworth driver process
    p.add_argument("spec", nargs="?", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.drive:
        if args.spec is None:
            p.error("--drive needs the workload file")
        print(json.dumps(drive_memworth(json.loads(args.spec.read_text()), args.drive, args.batch)))
        return
    if args.spec is not None:
        p.error(f"unexpected argument {str(args.spec)!r} (sizes are flags: --memories, --episodes)")
    for field in ("memories", "episodes", "batch", "repeats"):
        if getattr(args, field) < 1:
            p.error(f"--{field} must be at least 1, got {getattr(args, field)}")
    load_start = os.getloadavg()
    result = measure(args)
    load_end = os.getloadavg()
    table = render(result, args, (load_start, load_end))
    print()
    print(table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    settings = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items() if k not in ("drive", "spec")}
    args.out.write_text(
        json.dumps(
            {**result, "settings": settings, "load_start": load_start, "load_end": load_end, "cpus": os.cpu_count()},
            indent=2,
        )
    )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
