"""Reads of the outcome log behind sources, burst alerts, holdout and policy replay.

Everything here is computed from what a backend logged (outcomes, episodes,
verifications), never from counters, so it holds for any process that reads the same
database. :class:`memworth.MemoryStore` calls these; they are not public API.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from memworth.counts import Counts
from memworth.governance.replay import (
    Credit,
    Difference,
    LoggedOutcome,
    PolicyRun,
    ReplaySettings,
    compare,
    replay_governance,
)
from memworth.signals.holdout import Lift, lift
from memworth.signals.sources import Agreement, BurstAlert, BurstDetector, SourceLimit
from memworth.store.backend import Backend, Increment
from memworth.store.records import Episode, Memory, OutcomeRow

__all__ = ["PolicyReplayReport", "SourceReport"]

Increments = Callable[[OutcomeRow, Episode], list[Increment]]
"""How one outcome turns into counter increments (:meth:`memworth.MemoryStore.increments_of`)."""


@dataclass(frozen=True)
class SourceReport:
    """One outcome source of a namespace: fixed and learned confidence, evidence, limit."""

    source: str
    fixed: float
    agreement: Agreement
    agreement_rate: float
    interval: tuple[float, float]
    learned: float
    in_use: float
    limit: SourceLimit | None

    def row(self) -> dict[str, Any]:
        """Plain JSON-ready fields: what ``memworth sources --json`` and ``GET /v1/sources`` answer."""
        return {
            "source": self.source,
            "fixed": self.fixed,
            "agree": self.agreement.agree,
            "disagree": self.agreement.disagree,
            "agreement": self.agreement_rate,
            "interval": list(self.interval),
            "learned": self.learned,
            "in_use": self.in_use,
            "limit": None if self.limit is None else asdict(self.limit),
        }


@dataclass
class PolicyReplayReport:
    """Governance re-run over the log: the current settings and each alternative, and how they differ."""

    outcomes: int
    baseline: PolicyRun
    runs: dict[str, PolicyRun]
    differences: dict[str, list[Difference]]

    def table(self) -> list[dict[str, object]]:
        """One row per run: how many memories each action hit, and how many end differently."""
        rows: list[dict[str, object]] = []
        for name, run in [(self.baseline.settings.name, self.baseline), *self.runs.items()]:
            tally = run.tally()
            rows.append(
                {
                    "settings": name,
                    **{a: tally.get(a, 0) for a in ("suppress", "deprecate", "re-verify", "promote", "demote")},
                    "differ": len(self.differences.get(name, [])) if run is not self.baseline else 0,
                }
            )
        return rows


def episodes_of(backend: Backend, outcomes: Sequence[OutcomeRow]) -> dict[tuple[str, str], Episode]:
    """The episodes of ``outcomes`` by (namespace, episode id): one read per namespace (and
    5,000 ids), each naming its namespace, so a read goes to one shard and an episode id
    logged in two namespaces (PostgreSQL keeps ids unique per namespace) is no ambiguity."""
    by_namespace: dict[str, list[str]] = {}
    for o in outcomes:
        by_namespace.setdefault(o.namespace, []).append(o.episode_id)
    found: dict[tuple[str, str], Episode] = {}
    for namespace, ids in by_namespace.items():
        for start in range(0, len(ids), 5000):
            for eid, ep in backend.episodes(ids[start : start + 5000], namespace=namespace).items():
                found[(namespace, eid)] = ep
    return found


def logged(
    backend: Backend, namespace: str | None = None, rows: Sequence[OutcomeRow] | None = None
) -> Iterator[tuple[OutcomeRow, Episode]]:
    """Outcomes (all, or ``rows``) with their episodes, in log order; only ``namespace`` when given
    (then one indexed read of that namespace's history, when no ``rows`` are given)."""
    if rows is None and namespace is not None:
        yield from backend.history(namespace)
        return
    log = list(backend.outcome_log()) if rows is None else list(rows)
    for start in range(0, len(log), 5000):
        chunk = [o for o in log[start : start + 5000] if namespace is None or o.namespace == namespace]
        episodes = episodes_of(backend, chunk)
        for o in chunk:
            ep = episodes.get((o.namespace, o.episode_id))
            if ep is not None:
                yield o, ep


DISORDER = 60.0
"""Seconds by which an outcome's recording time may run behind one logged before it (clocks
of concurrent writers): how far past the window :func:`burst_alerts` reads back."""


def window_start(recorded: Sequence[float], since: float) -> int:
    """Where the outcomes of a burst window begin in a namespace's times of recording (log
    order): the first of the tail recorded at or after ``since`` less :data:`DISORDER`.

    >>> window_start([1.0, 5.0, 200.0, 230.0], since=250.0)
    2
    """
    start = len(recorded)
    while start > 0 and recorded[start - 1] >= since - DISORDER:
        start -= 1
    return start


def burst_alerts(
    tail: Sequence[tuple[OutcomeRow, Episode]],
    detector: BurstDetector,
    now: float,
    memories: Sequence[Memory],
    increments: Increments,
) -> list[BurstAlert]:
    """Alerts for the memories whose worth the last ``detector.window`` seconds moved too far.

    ``tail`` is the namespace's outcomes in log order from :func:`window_start` on (those
    recorded before the window are skipped)."""
    since = now - detector.window
    window: dict[str, list[float]] = {}
    by_source: dict[str, dict[str, float]] = {}
    for o, ep in tail:
        if o.recorded < since:
            continue
        for inc in increments(o, ep):
            acc = window.setdefault(inc.memory_id, [0.0, 0.0, 0.0])
            acc[0] += inc.success
            acc[1] += inc.failure
            acc[2] += inc.n
            per = by_source.setdefault(inc.memory_id, {})
            per[o.source] = per.get(o.source, 0.0) + inc.success + inc.failure
    alerts = []
    for m in memories:
        got = window.get(m.id)
        if got is None:
            continue
        c = m.counts
        before = Counts(max(0.0, c.success - got[0]), max(0.0, c.failure - got[1]), max(0.0, c.n - got[2]))
        alert = detector.check(m.id, before, Counts(*got), by_source.get(m.id, {}))
        if alert is not None:
            alerts.append(alert)
    return alerts


def holdout_lift(held: np.ndarray, won: np.ndarray, level: float, method: str) -> Lift:
    """Success of governed against holdout episodes of a namespace: per outcome, whether its
    episode was held out and whether it succeeded."""
    h, w = np.asarray(held, dtype=bool), np.asarray(won, dtype=bool)
    governed = (int(np.sum(w & ~h)), int(np.sum(~h)))
    holdout = (int(np.sum(w & h)), int(np.sum(h)))
    return lift(governed, holdout, level=level, method=method)


def replay_policy(
    backend: Backend,
    namespace: str,
    baseline: ReplaySettings,
    alternatives: Sequence[ReplaySettings],
    increments: Increments,
) -> PolicyReplayReport:
    """Governance under ``baseline`` and each alternative over the namespace's log, compared."""
    names = [baseline.name, *(a.name for a in alternatives)]
    if len(set(names)) != len(names):
        from memworth.errors import ValidationError

        raise ValidationError("name", f"settings need distinct names, got {names}")
    for s in (baseline, *alternatives):
        s.validate()
    steps = [
        LoggedOutcome(
            o.recorded,
            tuple(Credit(i.memory_id, i.success, i.failure, i.n) for i in increments(o, ep)),
        )
        for o, ep in logged(backend, namespace)
    ]
    ids = [m.id for m in backend.memories(namespace)]
    base = replay_governance(steps, baseline, ids)
    runs = {a.name: replay_governance(steps, a, ids) for a in alternatives}
    return PolicyReplayReport(len(steps), base, runs, {name: compare(base, run) for name, run in runs.items()})
