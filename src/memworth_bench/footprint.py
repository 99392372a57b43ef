"""Memory: bytes per stored memory and per logged episode, on disk and in the process.

Measured by adding N and dividing the growth by N, beside a bare baseline holding the
same data:

- on disk, SQLite: a store's file growth per memory (384-d float32 embedding, a 12-word
  text) and per logged episode (a recall of k=4 and its outcome), against bare SQLite
  tables holding the same fields (id, text, embedding; episode, its items, its outcome);
- on disk, PostgreSQL: the schema's total relation size growth, the same store
  operations, against the SQLite store;
- in the process: resident-set growth per memory when a store loads its vectors for
  search (exact and HNSW), against a bare float32 matrix of the same vectors; and a
  :class:`memworth.Tracker` that knows N ids against a dict of ``[success, failure]``.

Sizes are deterministic, so each is measured once; RSS runs in a fresh process each.
"""

from __future__ import annotations

import multiprocessing as mp
import sqlite3
import uuid
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from memworth import HashingEncoder, MemoryStore, Tracker
from memworth_bench.common import Section, Settings, Task, pg_value, rss_bytes, section, with_query
from memworth_bench.data import memory_texts

NAME = "memory"
TITLE = "Memory per stored memory and per logged episode"
K = 4


def _file_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in (path, Path(f"{path}-wal")) if p.exists())


def _fill(store: MemoryStore, texts: list[str], start: int) -> None:
    for i in range(0, len(texts), 5000):
        store.add_many([{"id": f"m{start + i + j:07d}", "text": t} for j, t in enumerate(texts[i : i + 5000])])


def _episodes(store: MemoryStore, rng: np.random.Generator, count: int) -> None:
    for _ in range(count):
        ep = store.recall(" ".join(f"w{x}" for x in rng.integers(0, 5000, 6)), k=K).episode
        store.record(ep, bool(rng.random() < 0.6))


def sqlite_disk(workdir: Path, memories: int, episodes: int) -> dict[str, float]:
    """Bytes per memory and per episode: the store's SQLite file vs bare tables with the same fields."""
    rng = np.random.default_rng(11)
    texts = memory_texts(rng, memories)
    path = (workdir / f"footprint-{uuid.uuid4().hex[:8]}.db").resolve()
    with MemoryStore.open(f"sqlite:///{path}", encoder=HashingEncoder(), seed=0) as s:
        _fill(s, texts[:100], 0)  # the empty store's pages exist before the measured growth
    before = _file_bytes(path)
    with MemoryStore.open(f"sqlite:///{path}", encoder=HashingEncoder(), seed=0) as s:
        _fill(s, texts[100:], 100)
        vectors = s.backend.vectors("default")[2]
    after_memories = _file_bytes(path)
    with MemoryStore.open(f"sqlite:///{path}", encoder=HashingEncoder(), seed=0) as s:
        _episodes(s, rng, episodes)
        log = [(o.episode_id, o.success) for o in s.backend.outcome_log()]
        eps = s.backend.episodes([e for e, _ in log])
    after_episodes = _file_bytes(path)

    bare = (workdir / f"footprint-bare-{uuid.uuid4().hex[:8]}.db").resolve()
    db = sqlite3.connect(bare, isolation_level=None)
    db.execute("CREATE TABLE m (id TEXT PRIMARY KEY, text TEXT NOT NULL, embedding BLOB NOT NULL)")
    db.execute("CREATE TABLE e (id TEXT PRIMARY KEY, query TEXT NOT NULL)")
    db.execute(
        "CREATE TABLE i (episode TEXT, position INTEGER, memory TEXT, weight REAL, PRIMARY KEY (episode, position))"
    )
    db.execute("CREATE TABLE o (episode TEXT PRIMARY KEY, success INTEGER)")
    rows = [(f"m{j:07d}", t, vectors[j].tobytes()) for j, t in enumerate(texts)]
    db.executemany("INSERT INTO m VALUES (?,?,?)", rows[:100])
    bare_before = _file_bytes(bare)
    db.execute("BEGIN")
    db.executemany("INSERT INTO m VALUES (?,?,?)", rows[100:])
    db.execute("COMMIT")
    bare_memories = _file_bytes(bare)
    db.execute("BEGIN")
    for eid, ok in log:
        ep = eps[eid]
        db.execute("INSERT INTO e VALUES (?,?)", (eid, ep.query))
        db.executemany(
            "INSERT INTO i VALUES (?,?,?,?)", [(eid, it.position, it.memory_id, it.weight) for it in ep.items]
        )
        db.execute("INSERT INTO o VALUES (?,?)", (eid, int(ok)))
    db.execute("COMMIT")
    db.close()
    bare_episodes = _file_bytes(bare)
    n = memories - 100
    return {
        "memories": n,
        "episodes": episodes,
        "store_per_memory": (after_memories - before) / n,
        "bare_per_memory": (bare_memories - bare_before) / n,
        "store_per_episode": (after_episodes - after_memories) / episodes,
        "bare_per_episode": (bare_episodes - bare_memories) / episodes,
        "payload_per_memory": float(np.mean([len(t.encode()) for t in texts]) + 384 * 4 + len("m0000000")),
    }


def postgres_disk(url: str, memories: int, episodes: int) -> dict[str, float]:
    """Bytes per memory and per episode in PostgreSQL: total relation size of the store's schema."""
    rng = np.random.default_rng(11)
    texts = memory_texts(rng, memories)
    schema = f"bench_fp_{uuid.uuid4().hex[:10]}"
    store = MemoryStore.open(with_query(url, schema=schema, pool_size="1"), encoder=HashingEncoder(), seed=0)

    def size() -> int:
        sql = (
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind = 'r'"
        )
        return int(pg_value(url, sql, schema))

    try:
        _fill(store, texts[:100], 0)
        before = size()
        _fill(store, texts[100:], 100)
        after_memories = size()
        _episodes(store, rng, episodes)
        after_episodes = size()
    finally:
        store.backend.drop()  # type: ignore[attr-defined]
        store.close()
    n = memories - 100
    return {"per_memory": (after_memories - before) / n, "per_episode": (after_episodes - after_memories) / episodes}


# -- resident memory, each in a fresh process ----------------------------------------


def _rss_store(url: str, index: str) -> tuple[int, int]:
    with MemoryStore.open(url, encoder=HashingEncoder(), index=index, seed=0) as s:
        n = len(s.backend.vectors("default")[0])
        import gc

        gc.collect()
        before = rss_bytes()
        s.recall("w1 w2 w3", k=K)  # loads the vectors into the search index
        return rss_bytes() - before, n


def _rss_matrix(path: str) -> tuple[int, int]:
    db = sqlite3.connect(path)
    n, dim = db.execute("SELECT count(*), max(length(embedding)) / 4 FROM memories").fetchone()
    before = rss_bytes()
    matrix = np.empty((n, dim), dtype=np.float32)  # the vectors alone, filled row by row: no transient copies
    for i, (blob,) in enumerate(db.execute("SELECT embedding FROM memories ORDER BY seq")):
        matrix[i] = np.frombuffer(blob, dtype=np.float32)
    grown = rss_bytes() - before
    db.close()
    return grown, int(matrix.shape[0])


def _rss_tracker(kind: str, n: int) -> tuple[int, int]:
    rng = np.random.default_rng(0)
    ids = rng.permutation(n * 4)[:n].astype(np.int64)
    before = rss_bytes()
    if kind == "tracker":
        t = Tracker()
        t.record_batch(ids.reshape(-1, 1), np.ones(n, dtype=bool))
        keep: Any = t
    else:
        d: dict[int, list[float]] = {}
        for m in ids.tolist():
            d[m] = [1.0, 0.0]
        keep = d
    grown = rss_bytes() - before
    del keep
    return grown, n


def _fresh(fn: Any, *args: Any) -> tuple[int, int]:
    with ProcessPoolExecutor(1, mp_context=mp.get_context("spawn")) as ex:
        result: tuple[int, int] = ex.submit(fn, *args).result()
        return result


def measure_disk(settings: Settings) -> Section:
    memories = settings.pick(5_000, 50_000, smoke=1_000)
    episodes = settings.pick(300, 1_000, smoke=100)
    sq = sqlite_disk(settings.workdir, memories, episodes)
    rows = [
        ["SQLite store", f"{sq['store_per_memory']:,.0f}", f"{sq['store_per_episode']:,.0f}"],
        ["bare SQLite tables, same fields", f"{sq['bare_per_memory']:,.0f}", f"{sq['bare_per_episode']:,.0f}"],
    ]
    ratios = [
        _one("SQLite store / bare SQLite, per memory", sq["store_per_memory"], sq["bare_per_memory"]),
        _one("SQLite store / bare SQLite, per episode", sq["store_per_episode"], sq["bare_per_episode"]),
        _one(
            "SQLite store per memory / raw payload (float32 vector + text + id)",
            sq["store_per_memory"],
            sq["payload_per_memory"],
        ),
    ]
    notes = [f"{sq['memories']:,} memories (384-d, 12-word texts) and {episodes:,} episodes (k={K}, with outcomes)"]
    pg: dict[str, float] | None = None
    try:
        pg = postgres_disk(settings.postgres, memories, episodes)
    except Exception as exc:
        notes.append(f"PostgreSQL: not measured ({type(exc).__name__}: {exc})")
    if pg is not None:
        rows.append(["PostgreSQL store", f"{pg['per_memory']:,.0f}", f"{pg['per_episode']:,.0f}"])
        ratios += [
            _one("PostgreSQL store / SQLite store, per memory", pg["per_memory"], sq["store_per_memory"]),
            _one("PostgreSQL store / SQLite store, per episode", pg["per_episode"], sq["store_per_episode"]),
        ]
        notes.append(
            "PostgreSQL: growth of pg_total_relation_size over the schema's tables (no pgvector column); per "
            "episode it includes the dead row versions left by the counter UPDATEs until VACUUM (MVCC rewrites "
            "each credited memory's row, embedding included)"
        )
    return section(
        "memory@disk",
        "On disk: bytes per stored memory and per logged episode",
        ["where", "bytes per memory", "bytes per episode"],
        rows,
        ratios=ratios,
        notes=notes,
        data={"sqlite": sq, "postgres": pg},
    )


def measure_rss(settings: Settings) -> Section:
    n = settings.pick(20_000, 100_000, smoke=2_000)
    path = (settings.workdir / f"footprint-rss-{uuid.uuid4().hex[:8]}.db").resolve()
    with MemoryStore.open(f"sqlite:///{path}", encoder=HashingEncoder()) as s:
        _fill(s, memory_texts(np.random.default_rng(3), n), 0)
    url = f"sqlite:///{path}"
    got = {
        "store, exact index": _fresh(_rss_store, url, "exact"),
        "store, HNSW index": _fresh(_rss_store, url, "hnsw"),
        "bare float32 matrix": _fresh(_rss_matrix, str(path)),
        "Tracker": _fresh(_rss_tracker, "tracker", n),
        "dict of [success, failure]": _fresh(_rss_tracker, "dict", n),
    }
    per = {k: grown / count for k, (grown, count) in got.items()}
    rows = [[k, f"{count:,}", f"{per[k]:,.0f}"] for k, (_, count) in got.items()]
    return section(
        "memory@rss",
        "In the process: resident-set growth per memory",
        ["what", "memories", "bytes per memory"],
        rows,
        ratios=[
            _one("store exact index / bare float32 matrix", per["store, exact index"], per["bare float32 matrix"]),
            _one("store HNSW index / bare float32 matrix", per["store, HNSW index"], per["bare float32 matrix"]),
            _one("Tracker / dict of [success, failure]", per["Tracker"], per["dict of [success, failure]"]),
        ],
        notes=[
            "a 384-d float32 vector is 1,536 bytes; the store's figures include what its allocator keeps after "
            "loading (the exact index grows its matrix by doubling)",
            "each in a fresh process: RSS before and after the store's first recall (which loads the vectors), "
            "the matrix read, or the tracker filled; one run each (sizes are deterministic, RSS is page-granular)",
        ],
        data={k: {"grown_bytes": g, "count": c, "per_memory": per[k]} for k, (g, c) in got.items()},
    )


def _one(label: str, a: float, b: float) -> dict[str, Any]:
    from memworth_bench.common import ratio

    return ratio(label, [a], [b], "bytes")


def plan(settings: Settings) -> list[Task]:
    return [
        Task("memory@disk", "Bytes on disk", lambda: measure_disk(settings), tier=0),
        Task("memory@rss", "Resident memory", lambda: measure_rss(settings), tier=0),
    ]
