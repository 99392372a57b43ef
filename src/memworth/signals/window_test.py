"""The window test's explaining-away: whose failures are these?

The window test re-verifies a memory whose last ``window`` retrievals fell far below its
lifetime worth. When a stale memory misleads a family of tasks, every memory retrieved
beside it on those tasks sees its recent worth fall too, and re-verifying them all
quarantines the very memories that answer the family (measured on the ``upgrade`` agent
world: a cascade of 12-32 flags in 500 episodes, and success below the ungoverned twin).

A suspect ``q`` explains memory ``m``'s fall when ``q`` came with at least half of the
failures in ``m``'s window and either

* without ``q``, ``m`` is fine: among ``m``'s window retrievals that did not include ``q``
  (at least ``min_apart`` of them), its success rate is within ``drop`` of its lifetime
  worth; or
* without ``m``, ``q`` fails: among ``q``'s own last ``window`` retrievals that did not
  include ``m`` (at least ``min_apart``), its success rate is more than ``drop`` below its
  lifetime worth.

Both read only recent retrievals (the window), so that successes from before a change do
not clear a memory that broke. Suspects are the memories whose own window test fires, and
any whose change statistic is high. The test is asymmetric, as explaining away should be:
the stale memory fails with or without the memories beside it, so none of them explains
it, while they succeed whenever it is absent, or it fails wherever they are absent, so it
explains them. Two memories that never appear apart cannot be told apart here; neither is
held (the alarm splitter separates such pairs in recall).

Examples
--------
>>> import numpy as np
>>> stale = [(False, {"stale", "helper"})] * 6 + [(False, {"stale"})] * 4
>>> helper = [(True, {"helper"})] * 6 + [(False, {"stale", "helper"})] * 6
>>> rows = {"stale": stale, "helper": helper}
>>> explainers(rows, lifetime={"stale": 0.9, "helper": 0.9}, suspects={"stale", "helper"}, window=6)
{'helper': ('stale',)}
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

__all__ = ["explainers", "failing_with", "fires", "hold"]

Retrieval = tuple[bool, Collection[str]]
"""One retrieval of a memory: the episode's outcome and the ids the episode retrieved."""


def failing_with(memory_id: str, failures: Sequence[Collection[str]], flagged: Collection[str]) -> tuple[str, ...]:
    """The flagged memories (other than ``memory_id``) that came with at least half of the
    failed episodes ``failures`` (each given by the ids it retrieved; none if they did not).

    Examples
    --------
    >>> failing_with("m", [{"m", "stale"}, {"m", "stale"}, {"m"}], {"stale"})
    ('stale',)
    >>> failing_with("m", [{"m", "stale"}, {"m"}, {"m"}], {"stale"})
    ()
    """
    if not failures:
        return ()
    present = [set(ids) & set(flagged) - {memory_id} for ids in failures]
    if 2 * sum(1 for found in present if found) < len(failures):
        return ()
    return tuple(sorted(set().union(*present)))


def fires(rows: Sequence[Retrieval], lifetime: float, *, window: int, drop: float, theta_low: float) -> bool:
    """The window test: the last ``window`` retrievals' success rate is more than ``drop``
    below ``lifetime`` and below ``theta_low``."""
    if len(rows) < window:
        return False
    recent = sum(ok for ok, _ in rows[-window:]) / window
    return recent < lifetime - drop and recent < theta_low


def explainers(
    rows: Mapping[str, Sequence[Retrieval]],
    *,
    lifetime: Mapping[str, float],
    suspects: Collection[str],
    window: int,
    drop: float = 0.25,
    min_apart: int = 3,
) -> dict[str, tuple[str, ...]]:
    """For each memory of ``rows`` whose window holds failures, the suspects that explain them.

    ``rows``: each memory's retrievals with an outcome, oldest first (a suspect missing
    from ``rows`` can only explain through the first condition); ``lifetime``: each
    memory's lifetime worth. Memories nothing explains are left out.
    """

    def rate(outcomes: list[bool]) -> float | None:
        return sum(outcomes) / len(outcomes) if len(outcomes) >= min_apart else None

    found: dict[str, set[str]] = {}
    apart: dict[tuple[str, str], float | None] = {}  # (a, b): a's recent success rate without b
    for mid, seen in rows.items():
        recent = seen[-window:]
        failures = [ids for ok, ids in recent if not ok]
        if not failures:
            continue
        for q in suspects:
            if q == mid or 2 * sum(1 for ids in failures if q in ids) < len(failures):
                continue
            m_apart = apart[(mid, q)] = rate([ok for ok, ids in recent if q not in ids])
            q_apart = apart[(q, mid)] = rate([ok for ok, ids in rows.get(q, ())[-window:] if mid not in ids])
            fine_apart = m_apart is not None and m_apart >= lifetime.get(mid, 0.5) - drop
            q_fails_alone = q_apart is not None and q_apart < lifetime.get(q, 0.5) - drop
            if fine_apart or q_fails_alone:
                found.setdefault(mid, set()).add(q)
    # Two memories that each explain the other: the one that does worse without the other
    # is the culprit and keeps its flag; with no difference, neither holds the other.
    before = {mid: set(qs) for mid, qs in found.items()}
    for mid, qs in found.items():
        for q in list(qs):
            if mid in before.get(q, set()):
                mine, theirs = apart.get((mid, q)), apart.get((q, mid))
                if mine is None or theirs is None or mine <= theirs:
                    qs.discard(q)
    return {mid: tuple(sorted(qs)) for mid, qs in found.items() if qs}


def hold(
    retrievals: Mapping[str, Sequence[Retrieval]],
    suspects: Collection[str],
    *,
    window: int,
    drop: float,
    theta_low: float,
) -> tuple[set[str], dict[str, tuple[str, ...]]]:
    """The window test over a namespace: the memories whose window test fires, and for each
    memory the suspects that explain its window failures (:func:`explainers`), suspects being
    those that fire and ``suspects`` (memories whose change statistic is high).

    Lifetime worth is read from the same retrievals (success share of each memory's
    retrievals), so the store and ``memworth score`` decide alike from the same log.
    """
    lifetime = {mid: (sum(ok for ok, _ in r) / len(r) if r else 0.5) for mid, r in retrievals.items()}
    fired = {
        mid for mid, r in retrievals.items() if fires(r, lifetime[mid], window=window, drop=drop, theta_low=theta_low)
    }
    everyone = set(suspects) | fired
    if not everyone:
        return fired, {}
    return fired, explainers(retrievals, lifetime=lifetime, suspects=everyone, window=window, drop=drop)
