"""Outcomes recorded per second into SQLite and PostgreSQL, beside a bare upsert loop.

For each backend, 1 and 4 writer processes, one episode per transaction and 100 per
transaction: ``MemoryStore.record_many`` against a bare loop doing the same writes with
the driver alone (one outcome row and k counter upserts per episode, counters in id
order, the same durability: SQLite WAL with ``synchronous=FULL``, PostgreSQL with
``synchronous_commit`` on). Each writer first recalls its own episodes (untimed), then
all writers start together at a barrier; the rate is all episodes over the time from the
first start to the last finish. Store and bare runs take turns, repeat by repeat.
"""

from __future__ import annotations

import multiprocessing as mp
import sqlite3
import time
import traceback
import uuid
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from functools import partial
from typing import Any

import numpy as np

from memworth import HashingEncoder, MemoryStore
from memworth_bench.common import (
    Section,
    Settings,
    Task,
    interleave,
    mid,
    not_measured,
    pg_value,
    ratio,
    section,
    spread,
    with_query,
)
from memworth_bench.data import memory_texts

NAME = "recording"
TITLE = "Outcomes recorded per second: SQLite and PostgreSQL vs a bare upsert loop"
K = 4
MEMORIES = 1000
WRITERS = (1, 4)
PER_TXN = (1, 100)

_SQLITE_BARE = (
    "CREATE TABLE IF NOT EXISTS m (namespace TEXT, id TEXT, success REAL, failure REAL, n REAL, updated REAL,"
    " PRIMARY KEY (namespace, id))",
    "CREATE TABLE IF NOT EXISTS o (seq INTEGER PRIMARY KEY AUTOINCREMENT, episode_id TEXT NOT NULL UNIQUE,"
    " success INTEGER, source TEXT, confidence REAL, recorded REAL)",
)
_PG_BARE = (
    "CREATE TABLE IF NOT EXISTS m (namespace TEXT, id TEXT, success DOUBLE PRECISION, failure DOUBLE PRECISION,"
    " n DOUBLE PRECISION, updated DOUBLE PRECISION, PRIMARY KEY (namespace, id))",
    "CREATE TABLE IF NOT EXISTS o (seq BIGSERIAL PRIMARY KEY, episode_id TEXT NOT NULL UNIQUE, success BOOLEAN,"
    " source TEXT, confidence DOUBLE PRECISION, recorded DOUBLE PRECISION)",
)
_UPSERT = (
    "INSERT INTO m VALUES ({p},{p},{p},{p},1,{p}) ON CONFLICT (namespace, id) DO UPDATE SET"
    " success = m.success + excluded.success, failure = m.failure + excluded.failure, n = m.n + 1,"
    " updated = excluded.updated"
)
_OUTCOME = "INSERT INTO o (episode_id, success, source, confidence, recorded) VALUES ({p},{p},'explicit',1.0,{p})"


# -- writer processes (top level: they are spawned) -----------------------------------


def _store_writer(url: str, seed: int, n: int, per_txn: int, barrier: Any) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    # The recalls that make the episodes are set-up: they need not wait for the disk.
    if url.startswith("sqlite:"):
        setup_url = with_query(url, synchronous="normal")
    else:
        setup_url = with_query(url, options="-csynchronous_commit=off")
    with MemoryStore.open(setup_url, encoder=HashingEncoder(), seed=seed) as store:
        eps = [
            store.recall(f"w{rng.integers(5000)} w{rng.integers(5000)} w{rng.integers(5000)}", k=K).episode
            for _ in range(n)
        ]
    ok = (rng.random(n) < 0.6).tolist()
    with MemoryStore.open(url, encoder=HashingEncoder(), seed=seed) as store:
        barrier.wait()
        start = time.monotonic()
        for i in range(0, n, per_txn):
            store.record_many(list(zip(eps[i : i + per_txn], ok[i : i + per_txn], strict=True)))
        return start, time.monotonic()


def _bare_batches(
    seed: int, n: int, per_txn: int, tag: str
) -> list[tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]]:
    """Per transaction: the counter upserts (in id order) and the outcome rows, as the store writes them."""
    rng = np.random.default_rng(seed)
    picks = np.argsort(rng.random((n, MEMORIES)), axis=1)[:, :K]  # k distinct memories per episode
    ok = rng.random(n) < 0.6
    out = []
    now = time.time()
    for i in range(0, n, per_txn):
        ups, outs = [], []
        for e in range(i, min(i + per_txn, n)):
            w = 1.0 / K
            for m in picks[e]:
                ups.append(("default", f"m{m:05d}", w if ok[e] else 0.0, 0.0 if ok[e] else w, now))
            outs.append((f"{tag}-{seed}-{e}", bool(ok[e]), now))
        ups.sort(key=lambda r: r[1])
        out.append((ups, outs))
    return out


def _sqlite_bare_writer(path: str, seed: int, n: int, per_txn: int, tag: str, barrier: Any) -> tuple[float, float]:
    batches = _bare_batches(seed, n, per_txn, tag)
    db = sqlite3.connect(path, isolation_level=None, timeout=60.0)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.execute("PRAGMA busy_timeout=60000")
    upsert, outcome = _UPSERT.format(p="?"), _OUTCOME.format(p="?")
    barrier.wait()
    start = time.monotonic()
    for ups, outs in batches:
        db.execute("BEGIN IMMEDIATE")
        db.executemany(outcome, [(e, int(y), t) for e, y, t in outs])
        db.executemany(upsert, ups)
        db.execute("COMMIT")
    end = time.monotonic()
    db.close()
    return start, end


def _pg_bare_writer(
    url: str, schema: str, seed: int, n: int, per_txn: int, tag: str, barrier: Any
) -> tuple[float, float]:
    import psycopg

    batches = _bare_batches(seed, n, per_txn, tag)
    upsert, outcome = _UPSERT.format(p="%s"), _OUTCOME.format(p="%s")
    with psycopg.connect(url) as db:
        db.execute(f'SET search_path TO "{schema}"')
        db.commit()
        barrier.wait()
        start = time.monotonic()
        for ups, outs in batches:
            with db.transaction(), db.cursor() as cur:
                cur.executemany(upsert, ups)
                cur.executemany(outcome, outs)
        return start, time.monotonic()


_BARRIER: Any = None  # in a writer process: the barrier its pool was started with


def _start_writer(barrier: Any) -> None:
    global _BARRIER
    _BARRIER = barrier


def _writer(target: Callable[..., tuple[float, float]], args: tuple[Any, ...]) -> tuple[str, Any]:
    """Run one writer; its (start, end) or its traceback, never leaving the others at the barrier."""
    try:
        return "ok", target(*args, _BARRIER)
    except BaseException:
        _BARRIER.abort()
        return "error", traceback.format_exc()


class _Writers:
    """``count`` writer processes, started once (spawn) and reused run after run."""

    def __init__(self, count: int) -> None:
        ctx = mp.get_context("spawn")
        self.count = count
        self.barrier = ctx.Barrier(count, timeout=900)
        self.pool = ProcessPoolExecutor(count, mp_context=ctx, initializer=_start_writer, initargs=(self.barrier,))

    def run(
        self, target: Callable[..., tuple[float, float]], args_for: Callable[[int], tuple[Any, ...]], episodes: int
    ) -> float:
        """Run ``target`` in every process, released together; all their episodes per second."""
        futures = [self.pool.submit(_writer, target, args_for(w)) for w in range(self.count)]
        got = [f.result(timeout=3600) for f in futures]
        errors = [detail for kind, detail in got if kind == "error"]
        if errors:
            raise RuntimeError(f"a writer failed:\n{errors[0]}")
        spans = [detail for _, detail in got]
        return self.count * episodes / (max(e for _, e in spans) - min(s for s, _ in spans))

    def close(self) -> None:
        self.barrier.abort()  # a writer still waiting (the run was stopped) gives up at once
        self.pool.shutdown(cancel_futures=True)


# -- one backend --------------------------------------------------------------------


class _Backend:
    """Opens a fresh store and a fresh bare database of one kind; drops them afterwards."""

    def __init__(self, kind: str, settings: Settings) -> None:
        self.kind = kind
        self.settings = settings
        self.dropped: list[Callable[[], None]] = []

    def store_url(self) -> str:
        if self.kind == "sqlite":
            path = self.settings.workdir / f"recording-{uuid.uuid4().hex[:8]}.db"
            return f"sqlite:///{path.resolve()}"
        return with_query(self.settings.postgres, schema=f"bench_{uuid.uuid4().hex[:12]}", pool_size="2")

    def new_store(self) -> str:
        url = self.store_url()
        with MemoryStore.open(url, encoder=HashingEncoder()) as s:
            texts = memory_texts(np.random.default_rng(0), MEMORIES)
            s.add_many([{"id": f"m{i:05d}", "text": t} for i, t in enumerate(texts)])
        self.dropped.append(partial(self._drop_store, url))
        return url

    def _drop_store(self, url: str) -> None:
        if self.kind == "postgres":
            with MemoryStore.open(url) as s:
                s.backend.drop()  # type: ignore[attr-defined]

    def new_bare(self) -> str:
        rows = [("default", f"m{i:05d}", 0.0, 0.0, 0.0, 0.0) for i in range(MEMORIES)]
        if self.kind == "sqlite":
            path = str((self.settings.workdir / f"bare-{uuid.uuid4().hex[:8]}.db").resolve())
            db = sqlite3.connect(path, isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            for stmt in _SQLITE_BARE:
                db.execute(stmt)
            db.executemany("INSERT INTO m VALUES (?,?,?,?,?,?)", rows)
            db.close()
            return path
        import psycopg

        schema = f"bare_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.settings.postgres, autocommit=True) as pg:
            pg.execute(f'CREATE SCHEMA "{schema}"')
            pg.execute(f'SET search_path TO "{schema}"')
            for stmt in _PG_BARE:
                pg.execute(stmt)
            with pg.cursor() as cur:
                cur.executemany("INSERT INTO m VALUES (%s,%s,%s,%s,%s,%s)", rows)
        self.dropped.append(partial(self._drop_schema, schema))
        return schema

    def _drop_schema(self, schema: str) -> None:
        import psycopg

        with psycopg.connect(self.settings.postgres, autocommit=True) as db:
            db.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')

    def close(self) -> None:
        for drop in reversed(self.dropped):
            drop()

    def pair(
        self, writers: _Writers, per_txn: int, n: int, repeats: int, warmup: bool
    ) -> tuple[dict[str, list[float]], bool]:
        url, bare = self.new_store(), self.new_bare()
        runs_done = {"store": 0, "bare": 0}

        def store_run() -> float:
            runs_done["store"] += 1
            base = 1000 * runs_done["store"]
            return writers.run(_store_writer, lambda w: (url, base + w, n, per_txn), n)

        def bare_run() -> float:
            runs_done["bare"] += 1
            tag = f"r{runs_done['bare']}"
            if self.kind == "sqlite":
                return writers.run(_sqlite_bare_writer, lambda w: (bare, 10 + w, n, per_txn, tag), n)
            return writers.run(_pg_bare_writer, lambda w: (self.settings.postgres, bare, 10 + w, n, per_txn, tag), n)

        rates = interleave({"store": store_run, "bare": bare_run}, repeats, warmup=warmup)
        with MemoryStore.open(url) as s:
            consistent = s.replay().consistent
        return rates, consistent


def measure(kind: str, settings: Settings) -> Section:
    title = f"Recording into {'SQLite (WAL, synchronous=FULL)' if kind == 'sqlite' else 'PostgreSQL'}"
    backend = _Backend(kind, settings)
    try:
        if kind == "postgres":
            version = str(pg_value(settings.postgres, "SHOW server_version"))
            sync = str(pg_value(settings.postgres, "SHOW synchronous_commit"))
        else:
            version, sync = sqlite3.sqlite_version, "FULL"
    except Exception as exc:  # no server: say so in the report
        return not_measured(f"recording@{kind}", title, f"cannot reach {settings.postgres}: {exc}")
    rows, ratios, data = [], [], []
    pools: list[_Writers] = []
    warmup = not (settings.quick or settings.smoke)
    try:
        for writers in WRITERS:
            pool = _Writers(writers)
            pools.append(pool)
            for per_txn in PER_TXN:
                n = settings.pick(50, 200, smoke=20) if per_txn == 1 else settings.pick(200, 800, smoke=200)
                rates, consistent = backend.pair(pool, per_txn, n, settings.repeats, warmup)
                store, bare = spread(rates["store"]), spread(rates["bare"])
                r = ratio(
                    f"{writers} writer(s), {per_txn}/txn: store / bare", rates["store"], rates["bare"], "episodes/s"
                )
                rows.append(
                    [
                        str(writers),
                        str(per_txn),
                        f"{writers * n:,}",
                        mid(store),
                        mid(bare),
                        f"{r['median']:.2f}",
                        "yes" if consistent else "NO",
                    ]
                )
                ratios.append(r)
                data.append(
                    {
                        "writers": writers,
                        "per_transaction": per_txn,
                        "episodes": writers * n,
                        "store_eps": store,
                        "bare_eps": bare,
                        "replay_consistent": consistent,
                    }
                )
    finally:
        for pool in pools:
            pool.close()
        backend.close()
    return section(
        f"recording@{kind}",
        f"{title} {version}, k={K}",
        [
            "writers",
            "episodes/txn",
            "episodes per run",
            "store episodes/s",
            "bare loop episodes/s",
            "ratio",
            "replay consistent",
        ],
        rows,
        ratios=ratios,
        notes=[
            f"synchronous setting: {sync}; {MEMORIES:,} memories; the writer processes start once and serve "
            "every run; each recalls its episodes first (untimed); store and bare runs alternate"
            + ("" if warmup else "; no warm-up run (quick)"),
            "the store reads the episodes back before writing (to refuse unknown or repeated ones); the bare loop "
            "knows them",
            *(
                [
                    "per transaction the store reads the episodes, then one statement, committed by itself, sets "
                    "every counter of the batch (rows locked in memory-id order, each memory's increments added in "
                    "order) and appends the outcome rows: two round trips; the bare loop sends BEGIN, one upsert per "
                    "retrieved memory (pipelined), one insert per outcome and COMMIT: four; since schema 8 the "
                    "store's counters have a narrow table of their own, as the bare loop's do"
                ]
                if kind == "postgres"
                else [
                    "since schema 8 the store's counters have a narrow table of their own (before, they shared the "
                    "memories row with its text and embedding, about 2 rows per 4 KB page, so each credited memory "
                    "rewrote a page into the WAL); its outcome rows carry three secondary indexes (episode id, "
                    "source and time, namespace and seq) to the bare loop's one"
                ]
            ),
        ],
        data={"backend": kind, "version": version, "k": K, "runs": data},
    )


def plan(settings: Settings) -> list[Task]:
    return [
        Task("recording@sqlite", "Recording into SQLite", lambda: measure("sqlite", settings), tier=0),
        Task("recording@postgres", "Recording into PostgreSQL", lambda: measure("postgres", settings), tier=0),
    ]
