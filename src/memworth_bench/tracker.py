"""``Tracker.record_batch`` against a dict-of-counters tracker and plain NumPy sums.

Episodes have k=8 distinct integer ids uniform in [0, memories), Bernoulli(0.5)
outcomes and uniform 1/k credit. On the same arrays, in turns:

- ``record_batch`` on a fresh tracker, 100k episodes per call; in one call; and on a
  *warm* tracker that already knows every id (``Tracker.register``, untimed): the
  steady state of a long-running tracker;
- a NumPy reference: the sums ``record_batch`` keeps (weighted success and failure
  sums plus retrieval counts) as three ``np.bincount`` calls, and with ``np.add.at``,
  with no validation and no id lookup (not a ceiling: ``record_batch`` counts a large
  uniform-credit batch with one ``np.bincount`` and can beat it);
- a plain dict-of-counters tracker updated in a Python loop (timed on a prefix of the
  episodes, fed as Python lists converted outside the timed region), and note 004's
  ``MemoryWorthTracker`` transcribed as written there.

Checks (untimed) compare every contender's counts with the bincount sums.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from memworth import Tracker
from memworth_bench.common import Section, Settings, Task, interleave, mid, ratio, section, spread
from memworth_bench.data import episodes

NAME = "tracker"
TITLE = "Tracker.record_batch vs a dict-of-counters tracker and plain NumPy sums"
K = 8
BATCH = 100_000
SEED = 20240601


class DictTracker:
    """Per memory ``[success, failure]`` in a dict, updated in a Python loop."""

    def __init__(self) -> None:
        self.stats: dict[Hashable, list[float]] = {}

    def update_episode(self, retrieved: Sequence[Hashable], success: bool) -> None:
        w = 1.0 / len(retrieved)
        for m in retrieved:
            entry = self.stats.get(m)
            if entry is None:
                entry = self.stats[m] = [0.0, 0.0]
            if success:
                entry[0] += w
            else:
                entry[1] += w


@dataclass
class MemoryStats:
    """Note 004's per-memory record, transcribed."""

    success_hits: float = 0.0
    failure_hits: float = 0.0


class Note004Tracker:
    """Note 004's ``MemoryWorthTracker`` as written there: items are {"memory_id", "weight"} dicts."""

    def __init__(self) -> None:
        self.stats: dict[str, MemoryStats] = {}

    def update_episode(self, retrieved_memories: list[dict[str, Any]], success: bool) -> None:
        for item in retrieved_memories:
            memory_id = item["memory_id"]
            weight = item.get("weight", 1.0)
            if memory_id not in self.stats:
                self.stats[memory_id] = MemoryStats()
            if success:
                self.stats[memory_id].success_hits += weight
            else:
                self.stats[memory_id].failure_hits += weight


def bincount_sums(ids: np.ndarray, success: np.ndarray, memories: int) -> tuple[np.ndarray, ...]:
    """The bare arithmetic of record_batch: weighted success/failure sums and retrieval counts."""
    flat = ids.ravel()
    y = np.repeat(success, ids.shape[1])
    w = np.full(flat.size, 1.0 / ids.shape[1])
    s = np.bincount(flat, weights=np.where(y, w, 0.0), minlength=memories)
    f = np.bincount(flat, weights=np.where(y, 0.0, w), minlength=memories)
    n = np.bincount(flat, minlength=memories)
    return s, f, n


def add_at_sums(ids: np.ndarray, success: np.ndarray, memories: int) -> tuple[np.ndarray, ...]:
    """The same sums with unbuffered ``np.add.at``."""
    flat = ids.ravel()
    y = np.repeat(success, ids.shape[1])
    s, f, n = np.zeros(memories), np.zeros(memories), np.zeros(memories)
    w = 1.0 / ids.shape[1]
    np.add.at(s, flat[y], w)
    np.add.at(f, flat[~y], w)
    np.add.at(n, flat, 1.0)
    return s, f, n


def _batched(t: Tracker, ids: np.ndarray, success: np.ndarray) -> Tracker:
    for start in range(0, len(ids), BATCH):
        t.record_batch(ids[start : start + BATCH], success[start : start + BATCH])
    return t


def _warm(memories: int) -> Tracker:
    t = Tracker()
    t.register(np.arange(memories, dtype=np.int64))
    t.table(np.arange(1))  # sizes the count arrays
    return t


LABELS = {
    "rb_batched": f"record_batch, fresh tracker, {BATCH // 1000}k per call",
    "rb_one_call": "record_batch, fresh tracker, one call",
    "rb_warm": f"record_batch, warm tracker, {BATCH // 1000}k per call",
    "bincount": "np.bincount reference (s, f, n)",
    "add_at": "np.add.at (s, f, n)",
    "dict": "dict-of-counters tracker (Python loop)",
    "note004": "note 004's MemoryWorthTracker",
}
RATIOS = (
    ("rb_batched", "dict", ">= 50"),
    ("rb_warm", "dict", ">= 50"),
    ("rb_batched", "note004", None),
    ("rb_batched", "bincount", None),
    ("rb_one_call", "bincount", None),
    ("rb_warm", "bincount", None),
    ("rb_batched", "add_at", None),
    ("add_at", "bincount", None),
)


def measure(memories: int, n_episodes: int, n_dict: int, repeats: int) -> Section:
    rng = np.random.default_rng(SEED + memories)
    ids, success = episodes(rng, n_episodes, K, memories)
    sub_lists, sub_outcomes = ids[:n_dict].tolist(), success[:n_dict].tolist()
    sub_items = [[{"memory_id": m, "weight": 1.0 / K} for m in row] for row in sub_lists]
    last: dict[str, Any] = {}

    def timed(name: str, setup: Callable[[], Any], run: Callable[[Any], Any]) -> Callable[[], float]:
        def go() -> float:
            state = setup()
            start = time.perf_counter()
            last[name] = run(state)
            return time.perf_counter() - start

        return go

    def run_dict(_: Any) -> DictTracker:
        d = DictTracker()
        for retrieved, ok in zip(sub_lists, sub_outcomes, strict=True):
            d.update_episode(retrieved, ok)
        return d

    def run_note004(_: Any) -> Note004Tracker:
        d = Note004Tracker()
        for retrieved, ok in zip(sub_items, sub_outcomes, strict=True):
            d.update_episode(retrieved, ok)
        return d

    runs = {
        "rb_batched": timed("rb_batched", Tracker, lambda t: _batched(t, ids, success)),
        "rb_one_call": timed("rb_one_call", Tracker, lambda t: t.record_batch(ids, success) or t),
        "rb_warm": timed("rb_warm", lambda: _warm(memories), lambda t: _batched(t, ids, success)),
        "bincount": timed("bincount", lambda: None, lambda _: bincount_sums(ids, success, memories)),
        "add_at": timed("add_at", lambda: None, lambda _: add_at_sums(ids, success, memories)),
        "dict": timed("dict", lambda: None, run_dict),
        "note004": timed("note004", lambda: None, run_note004),
    }
    seconds = interleave(runs, repeats)
    count = {name: n_dict if name in ("dict", "note004") else n_episodes for name in runs}
    eps = {name: [count[name] / s for s in secs] for name, secs in seconds.items()}

    checks = _checks(last, ids, success, memories, n_dict)
    tag = f"{memories // 1000}k" if memories < 1_000_000 else f"{memories // 1_000_000}M"
    rows = [[LABELS[name], f"{count[name]:,}", mid(spread(eps[name]))] for name in runs]
    return section(
        f"tracker@{tag}",
        f"record_batch at {memories:,} memories (k={K})",
        ["contender", "episodes", "episodes/s median (min-max)"],
        rows,
        ratios=[ratio(f"{LABELS[a]} / {LABELS[b]}", eps[a], eps[b], "episodes/s", target) for a, b, target in RATIOS],
        notes=[
            "checks (untimed): " + ", ".join(f"{k}: {'ok' if v else 'MISMATCH'}" for k, v in checks.items()),
            f"the dict trackers run on the first {n_dict:,} episodes (ids as Python lists, converted untimed)",
        ],
        data={
            "memories": memories,
            "episodes": n_episodes,
            "dict_episodes": n_dict,
            "k": K,
            "seconds": {n: spread(s) for n, s in seconds.items()},
            "episodes_per_s": {n: spread(e) for n, e in eps.items()},
            "checks": checks,
        },
    )


def _checks(last: dict[str, Any], ids: np.ndarray, success: np.ndarray, memories: int, n_dict: int) -> dict[str, bool]:
    s, f, n = last["bincount"]
    seen = np.flatnonzero(n > 0)
    out: dict[str, bool] = {}
    for name in ("rb_batched", "rb_one_call"):
        t = last[name].table(seen)
        out[f"{name} == bincount"] = bool(
            len(last[name]) == seen.size
            and np.allclose(t.success, s[seen])
            and np.allclose(t.failure, f[seen])
            and np.array_equal(t.n, n[seen].astype(float))
        )
    tw = last["rb_warm"].table(np.arange(memories))
    out["rb_warm == bincount"] = bool(
        np.allclose(tw.success, s) and np.allclose(tw.failure, f) and np.array_equal(tw.n, n.astype(float))
    )
    a_s, a_f, a_n = last["add_at"]
    out["add_at == bincount"] = bool(np.allclose(a_s, s) and np.allclose(a_f, f) and np.array_equal(a_n, n))
    sub_s, sub_f, _ = bincount_sums(ids[:n_dict], success[:n_dict], memories)
    stats = last["dict"].stats
    keys = np.fromiter(stats.keys(), dtype=np.int64, count=len(stats))
    vals = np.array(list(stats.values()))
    out["dict == bincount"] = bool(np.allclose(vals[:, 0], sub_s[keys]) and np.allclose(vals[:, 1], sub_f[keys]))
    note = last["note004"].stats
    out["note004 == dict"] = bool(
        set(note) == set(stats)
        and all(
            abs(note[m].success_hits - v[0]) < 1e-9 and abs(note[m].failure_hits - v[1]) < 1e-9
            for m, v in stats.items()
        )
    )
    return out


def plan(settings: Settings) -> list[Task]:
    n_episodes = settings.pick(100_000, 500_000, smoke=20_000)
    n_dict = settings.pick(20_000, 100_000, smoke=2_000)
    sizes = settings.pick((100_000,), (100_000, 1_000_000), smoke=(10_000,))
    return [
        Task(
            f"tracker@{m // 1000}k" if m < 1_000_000 else f"tracker@{m // 1_000_000}M",
            f"record_batch at {m:,} memories",
            partial(measure, m, n_episodes, n_dict, settings.repeats),
            tier=0,
        )
        for m in sizes
    ]
