"""Steady-state recording into PostgreSQL, one outcome per transaction, beside the bare loop.

Run from the repository root (PostgreSQL at ``--url``; each run uses schemas of its own, dropped after):

    .venv/bin/python benchmarks/bench_record_steady_pg.py [--repeats 3] [--episodes 300]
        [--writers 1 4] [--trees OLD/src NEW/src] [--json /tmp/record_steady_pg.json]

``memworth bench --only recording`` times a store object from its first outcome on (its
first ``record_many`` scans the namespace's outcome log to start the AlarmSplitter's live
statistics) and, at ``--quick`` sizes, a writer records 50 outcomes: a fixed cost per writer
weighs on its ratio. This benchmark times what a long-lived writer (a server, an agent loop)
does per outcome: ``MemoryStore.record`` one per transaction, beside
``memworth_bench.recording``'s bare loop (per transaction one pipelined ``executemany`` of
the k=4 counter upserts and one outcome insert, then commit).

Per contender and repeat: a fresh store (1,000 memories) or bare schema; ``--writers``
processes, each recalls its own k=4 episodes (untimed, ``synchronous_commit=off``), records
``--warmup`` of them untimed (the first-record scan, psycopg's statement preparation), says
it is ready, and when every writer is, all record ``--episodes`` more at once; the rate is all
timed episodes over the time from the first start to the last finish. Contenders take turns,
the order reversed every other repeat; ratios are per repeat, the median printed.

``--trees``: the store contender once per memworth tree (say main, exported with ``git
archive``, and this one), each process importing memworth from that tree's ``src``.
Prints a table per writer count and writes JSON.
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

MEMORIES = 1000
K = 4
URL = "postgresql://postgres@127.0.0.1:5432/test"


def _with_schema(url: str, schema: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}schema={schema}&pool_size=2"


def _setup(kind: str, url: str, schema: str) -> None:
    """A fresh store (or bare schema) with the memories, in schema ``schema``."""
    import numpy as np

    from memworth_bench.data import memory_texts

    if kind == "store":
        from memworth import HashingEncoder, MemoryStore

        with MemoryStore.open(_with_schema(url, schema), encoder=HashingEncoder()) as s:
            texts = memory_texts(np.random.default_rng(0), MEMORIES)
            s.add_many([{"id": f"m{i:05d}", "text": t} for i, t in enumerate(texts)])
        return
    import psycopg

    from memworth_bench.recording import _PG_BARE

    with psycopg.connect(url, autocommit=True) as pg:
        pg.execute(f'CREATE SCHEMA "{schema}"')
        pg.execute(f'SET search_path TO "{schema}"')
        for stmt in _PG_BARE:
            pg.execute(stmt)
        with pg.cursor() as cur:
            cur.executemany(
                "INSERT INTO m VALUES (%s,%s,%s,%s,%s,%s)",
                [("default", f"m{i:05d}", 0.0, 0.0, 0.0, 0.0) for i in range(MEMORIES)],
            )


def _drop(url: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as pg:
        pg.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def _go() -> float:
    """Say ready, wait for the word, and answer the start time."""
    print("ready", flush=True)
    sys.stdin.readline()
    return time.monotonic()


def _store_writer(url: str, schema: str, episodes: int, warmup: int, seed: int) -> dict[str, Any]:
    import numpy as np

    from memworth import HashingEncoder, MemoryStore

    rng = np.random.default_rng(seed)
    n = warmup + episodes
    queries = [" ".join(f"w{w}" for w in row) for row in rng.integers(5000, size=(n, 3))]
    store_url = _with_schema(url, schema)
    with MemoryStore.open(store_url + "&options=-csynchronous_commit%3Doff", encoder=HashingEncoder(), seed=seed) as s:
        eps = [s.recall(q, k=K).episode for q in queries]
    ok = (rng.random(n) < 0.6).tolist()
    with MemoryStore.open(store_url, encoder=HashingEncoder(), seed=seed) as s:
        for i in range(warmup):
            s.record(eps[i], ok[i])
        start = _go()
        for i in range(warmup, n):
            s.record(eps[i], ok[i])
        end = time.monotonic()
    return {"start": start, "end": end}


def _bare_writer(url: str, schema: str, episodes: int, warmup: int, seed: int) -> dict[str, Any]:
    import psycopg

    from memworth_bench.recording import _OUTCOME, _UPSERT, _bare_batches

    work = _bare_batches(seed, warmup + episodes, 1, "s")
    upsert, outcome = _UPSERT.format(p="%s"), _OUTCOME.format(p="%s")
    with psycopg.connect(url) as db:
        db.execute(f'SET search_path TO "{schema}"')
        db.commit()

        def write(batch: Any) -> None:
            ups, outs = batch
            with db.transaction(), db.cursor() as cur:
                cur.executemany(upsert, ups)
                cur.executemany(outcome, outs)

        for batch in work[:warmup]:
            write(batch)
        start = _go()
        for batch in work[warmup:]:
            write(batch)
        end = time.monotonic()
    return {"start": start, "end": end}


def _env(src: str | None) -> dict[str, str]:
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = os.pathsep.join([src, str(Path(__file__).resolve().parents[1] / "src")])
    return env


def _run(kind: str, src: str | None, a: argparse.Namespace, writers: int, seed: int) -> float:
    """One contender: set up, start ``writers`` fresh processes, release them together; episodes/s."""
    schema = f"steady_{uuid.uuid4().hex[:12]}"
    base = [sys.executable, __file__, "--url", a.url, "--schema", schema]
    subprocess.run([*base, "--setup", kind], env=_env(src), check=True)
    try:
        procs = [
            subprocess.Popen(
                [
                    *base,
                    "--worker",
                    kind,
                    "--episodes",
                    str(a.episodes),
                    "--warmup",
                    str(a.warmup),
                    "--seed",
                    str(1000 * seed + w),
                ],
                env=_env(src),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            for w in range(writers)
        ]
        for p in procs:
            assert p.stdout is not None
            if p.stdout.readline().strip() != "ready":
                raise RuntimeError(f"a {kind} writer failed before its start")
        for p in procs:
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        spans = []
        for p in procs:
            out, _ = p.communicate(timeout=3600)
            if p.returncode != 0:
                raise RuntimeError(f"a {kind} writer failed ({p.returncode})")
            spans.append(json.loads(out.strip().splitlines()[-1]))
        return writers * a.episodes / (max(s["end"] for s in spans) - min(s["start"] for s in spans))
    finally:
        if kind == "store":
            consistent = subprocess.run([*base, "--replay"], env=_env(src), capture_output=True, text=True)
            if consistent.stdout.strip() != "True":
                print(f"replay NOT consistent in {schema}: {consistent.stdout} {consistent.stderr}", file=sys.stderr)
        _drop(a.url, schema)


def _replay(url: str, schema: str) -> bool:
    from memworth import MemoryStore

    with MemoryStore.open(_with_schema(url, schema)) as s:
        return s.replay().consistent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=URL)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--episodes", type=int, default=300, help="timed outcomes per writer")
    parser.add_argument("--warmup", type=int, default=10, help="untimed outcomes per writer first")
    parser.add_argument("--writers", type=int, nargs="*", default=[1, 4])
    parser.add_argument("--trees", nargs="*", default=[], help="src folders of memworth trees to compare")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--schema", default=None)
    parser.add_argument("--setup", choices=("store", "bare"), default=None)
    parser.add_argument("--worker", choices=("store", "bare"), default=None)
    parser.add_argument("--replay", action="store_true")
    parser.add_argument("--seed", type=int, default=1)
    a = parser.parse_args()
    if a.setup is not None:
        _setup(a.setup, a.url, a.schema)
        return
    if a.replay:
        print(_replay(a.url, a.schema))
        return
    if a.worker is not None:
        writer = _store_writer if a.worker == "store" else _bare_writer
        print(json.dumps(writer(a.url, a.schema, a.episodes, a.warmup, a.seed)))
        return
    contenders: list[tuple[str, str, str | None]] = [("bare loop", "bare", None)]
    contenders += [(f"store ({src})", "store", src) for src in a.trees] or [("store (this tree)", "store", None)]
    table: dict[str, Any] = {}
    loads = [os.getloadavg()]
    for writers in a.writers:
        runs: dict[str, list[float]] = {name: [] for name, _, _ in contenders}
        for r in range(a.repeats):
            order = contenders if r % 2 == 0 else contenders[::-1]
            for name, kind, src in order:
                runs[name].append(_run(kind, src, a, writers, seed=r + 1))
        loads.append(os.getloadavg())
        bare = runs["bare loop"]
        print(
            f"\nPostgreSQL, 1 outcome per transaction, {writers} writer(s), {a.episodes} timed outcomes each"
            f" after {a.warmup} untimed, {a.repeats} repeats; load at the end {loads[-1][0]:.2f} /"
            f" {loads[-1][1]:.2f} / {loads[-1][2]:.2f}"
        )
        print("| contender | episodes/s (median, min-max) | / bare loop (median of repeats) |")
        print("|---|---|---|")
        for name, _, _ in contenders:
            eps = runs[name]
            ratio = statistics.median(e / b for e, b in zip(eps, bare, strict=True))
            print(f"| {name} | {statistics.median(eps):,.0f} ({min(eps):,.0f}-{max(eps):,.0f}) | {ratio:.3f}x |")
            table.setdefault(str(writers), {})[name] = {"eps": eps, "ratio_to_bare": ratio}
    if a.json is not None:
        a.json.write_text(json.dumps({"loads": loads, "episodes": a.episodes, "runs": table}, indent=2))


if __name__ == "__main__":
    main()
