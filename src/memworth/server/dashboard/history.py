"""A memory's worth over time: its counts after each outcome that credited it, rebuilt from the outcome log."""

from dataclasses import dataclass

from memworth.counts import Counts
from memworth.estimators import RawWorth
from memworth.store import MemoryStore
from memworth.store.report import INTERVAL

__all__ = ["Point", "trajectory"]


@dataclass(frozen=True)
class Point:
    """One outcome that credited a memory, and its worth and Wilson interval afterwards."""

    episode_id: str
    query: str
    recorded: float
    success: bool
    direct: bool  # retrieved in the episode (False: credit that reached it along provenance edges)
    credit: float
    counts: Counts
    worth: float
    lower: float
    upper: float


def trajectory(store: MemoryStore, memory_id: str, namespace: str) -> list[Point]:
    """The memory's worth after each outcome that credited it, rebuilt from the outcome log.

    The credit is the store's own (:meth:`memworth.MemoryStore.increments_of`: each
    outcome's credit settings, provenance included), so the last point holds the counts
    ``replay`` rebuilds.

    Examples
    --------
    >>> from memworth import HashingEncoder, MemoryStore
    >>> store = MemoryStore.open("memory://", encoder=HashingEncoder(), exploration=0.0)
    >>> _ = store.add("Use list.reverse() to reverse a Python list.", id="rev")
    >>> for ok in (True, True, False):
    ...     store.record(store.recall("reverse a python list", k=1).episode, success=ok)
    >>> [round(p.worth, 3) for p in trajectory(store, "rev", "default")]
    [1.0, 1.0, 0.667]
    """
    points: list[Point] = []
    s = f = n = 0.0
    for o, ep in store.backend.history(namespace):
        mine = [i for i in store.increments_of(o, ep) if i.memory_id == memory_id]
        if not mine:
            continue
        for i in mine:
            s, f, n = s + i.success, f + i.failure, n + i.n
        counts = Counts(s, f, n)
        lo, hi = INTERVAL.interval(counts)
        credit = sum(i.success + i.failure for i in mine)
        direct = any(i.n > 0 for i in mine)
        worth = float(RawWorth().value(counts))
        points.append(
            Point(o.episode_id, ep.query, o.recorded, o.success, direct, credit, counts, worth, float(lo), float(hi))
        )
    return points
