"""Outcome sources: reliability learned from verified outcomes, per-source limits, burst alerts.

Note 003 weights each outcome source by a fixed confidence (explicit 1.0, heuristic 0.2).
Here the confidence is learned. A *verified* outcome (a person's verdict, a test run) is
the reference; every time one arrives for an episode that another source already
reported, that source scores one agreement or one disagreement. A source that agrees
with the verified outcome with probability ``r`` carries ``2r - 1`` of a verified
outcome's signal: under symmetric noise ``E[reported] = (1 - r) + (2r - 1) E[true]``, so
only the ``2r - 1`` part of what it says moves with the truth (a coin flip, ``r = 0.5``,
carries nothing; a source that lies more often than not is worth nothing, never a
negative weight). The fixed confidences read the same way: heuristic 0.2 is a source
that agrees 60% of the time, explicit 1.0 one that always agrees.

* :class:`Agreement` holds one source's tally (data); :class:`Reliability` holds the
  settings that turn it into a weight: a Beta posterior on ``r`` whose prior is centred on
  the source's fixed confidence with ``prior_strength`` pseudo-verifications, so a source
  with no verified outcomes keeps note 003's weight and one with many gets its own.
* :class:`SourceLimit`: a quota (outcomes crediting one memory) and a rate limit (outcomes
  in all) per source over a sliding window; beyond it an outcome is refused.
* :class:`BurstDetector`: flags a memory whose worth moved, over the last ``window``
  seconds, further than its earlier evidence makes plausible (a beta-binomial tail
  bound on the window's successes given the retrievals in it).

Pure: the store gathers the numbers, this module decides.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from memworth.counts import Counts
from memworth.errors import ValidationError
from memworth.estimators import RawWorth, WilsonBound

__all__ = ["Agreement", "BurstAlert", "BurstDetector", "Reliability", "SourceLimit"]


def _positive(value: object, name: str, *, allow_zero: bool = False) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or value < 0 or (value == 0 and not allow_zero):  # type: ignore[operator]
        raise ValidationError(name, f"must be a finite number {'>=' if allow_zero else '>'} 0, got {value!r}")
    return float(value)  # type: ignore[arg-type]


def _probability(value: object, name: str) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or not 0 < value < 1:  # type: ignore[operator]
        raise ValidationError(name, f"must be a number in (0, 1), got {value!r}")
    return float(value)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Agreement:
    """How often one source's outcomes matched the verified outcome of the same episode.

    Examples
    --------
    >>> a = Agreement().add(True).add(True).add(False)
    >>> a
    Agreement(agree=2.0, disagree=1.0)
    >>> a.total, round(a.rate, 3)
    (3.0, 0.667)
    >>> a + Agreement(1.0, 0.0)
    Agreement(agree=3.0, disagree=1.0)
    """

    agree: float = 0.0
    disagree: float = 0.0

    def __post_init__(self) -> None:
        _positive(self.agree, "agree", allow_zero=True)
        _positive(self.disagree, "disagree", allow_zero=True)
        object.__setattr__(self, "agree", float(self.agree))
        object.__setattr__(self, "disagree", float(self.disagree))

    @property
    def total(self) -> float:
        return self.agree + self.disagree

    @property
    def rate(self) -> float:
        """Observed agreement; 0.5 with no verified outcome yet."""
        return self.agree / self.total if self.total else 0.5

    def add(self, agreed: bool) -> Agreement:
        """These counts after one more comparison with a verified outcome."""
        return Agreement(self.agree + 1, self.disagree) if agreed else Agreement(self.agree, self.disagree + 1)

    def __add__(self, other: object) -> Agreement:
        if not isinstance(other, Agreement):
            return NotImplemented
        return Agreement(self.agree + other.agree, self.disagree + other.disagree)


@dataclass(frozen=True)
class Reliability:
    """Learned confidence of an outcome source: ``max(0, 2r - 1)``, r its agreement rate.

    ``r`` is the posterior mean of a Beta prior centred on ``(1 + confidence) / 2`` (what
    the source's fixed confidence means as an agreement rate) with ``prior_strength``
    pseudo-verifications, updated by the source's :class:`Agreement` tally.

    Parameters
    ----------
    prior_strength
        How many verified outcomes the fixed confidence is worth; more makes the learned
        weight move slower.

    Examples
    --------
    >>> rel = Reliability(prior_strength=10)
    >>> rel.weight(Agreement(), 0.2)            # nothing verified yet: note 003's fixed weight
    0.2
    >>> round(rel.weight(Agreement(agree=70, disagree=30), 0.2), 3)   # agrees 70%: 2 x 0.7 - 1
    0.382
    >>> rel.weight(Agreement(agree=3, disagree=37), 1.0)              # mostly wrong: no weight
    0.0
    """

    prior_strength: float = 10.0

    def agreement(self, stats: Agreement, confidence: float) -> float:
        """Posterior mean agreement rate of a source with fixed ``confidence``."""
        strength = _positive(self.prior_strength, "prior_strength")
        conf = _positive(confidence, "confidence", allow_zero=True)
        if conf > 1:
            raise ValidationError("confidence", f"must be within [0, 1], got {confidence!r}")
        prior = (1.0 + conf) / 2.0
        return (strength * prior + stats.agree) / (strength + stats.total)

    def weight(self, stats: Agreement, confidence: float) -> float:
        """The confidence to credit this source's outcomes with, in [0, 1]."""
        return round(max(0.0, 2.0 * self.agreement(stats, confidence) - 1.0), 12)

    def interval(self, stats: Agreement, z: float = 1.96) -> tuple[float, float]:
        """Wilson interval of the observed agreement rate alone (no prior), for reports."""
        lo, hi = WilsonBound(z=z, evidence="weighted").interval(Counts(stats.agree, stats.disagree, stats.total))
        return float(lo), float(hi)


@dataclass(frozen=True)
class SourceLimit:
    """A source's quota and rate limit over any ``window`` seconds (``None``: no limit).

    Parameters
    ----------
    max_outcomes
        Rate limit: outcomes the source may record in a namespace per window.
    max_per_memory
        Quota: outcomes the source may record crediting any one memory per window (the
        limit that stops one source from pumping one memory).
    window
        Length of the sliding window, in seconds.

    Examples
    --------
    >>> limit = SourceLimit(max_per_memory=2, window=3600)
    >>> recent = [(100.0, ("a", "b")), (200.0, ("a",))]
    >>> limit.check("agent", recent, [("b",)], now=300.0) is None
    True
    >>> print(limit.check("agent", recent, [("a", "c")], now=300.0))
    source 'agent' reached its quota: memory 'a' would get 3 outcomes in 3600 s (limit 2)
    >>> limit.check("agent", recent, [("a",)], now=4000.0) is None     # the first has left the window
    True
    """

    max_outcomes: int | None = None
    max_per_memory: int | None = None
    window: float = 3600.0

    def validate(self) -> None:
        _positive(self.window, "window")
        for name in ("max_outcomes", "max_per_memory"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
                raise ValidationError(name, f"must be a positive integer or None, got {v!r}")

    def check(
        self,
        source: str,
        recent: Sequence[tuple[float, Sequence[str]]],
        new: Sequence[Sequence[str]],
        now: float,
    ) -> str | None:
        """Why recording ``new`` (memory ids per outcome) would break the limit, or ``None``.

        ``recent``: the source's earlier outcomes as ``(recorded, memory ids)``; those
        older than ``now - window`` are ignored.
        """
        self.validate()
        since = now - self.window
        kept = [ids for at, ids in recent if at > since]
        if self.max_outcomes is not None and len(kept) + len(new) > self.max_outcomes:
            return (
                f"source {source!r} reached its rate limit: {len(kept) + len(new)} outcomes in "
                f"{self.window:g} s (limit {self.max_outcomes})"
            )
        if self.max_per_memory is not None:
            per: dict[str, int] = {}
            for ids in [*kept, *new]:
                for mid in dict.fromkeys(ids):
                    per[mid] = per.get(mid, 0) + 1
            new_ids = {mid for ids in new for mid in ids}
            over = sorted((mid for mid in new_ids if per[mid] > self.max_per_memory), key=lambda m: (-per[m], m))
            if over:
                mid = over[0]
                return (
                    f"source {source!r} reached its quota: memory {mid!r} would get {per[mid]} outcomes in "
                    f"{self.window:g} s (limit {self.max_per_memory})"
                )
        return None


@dataclass(frozen=True)
class BurstAlert:
    """A memory whose worth moved faster over the window than its evidence allows."""

    memory_id: str
    worth_before: float
    worth_now: float
    allowed: tuple[float, float]
    retrievals: float
    p_value: float
    sources: dict[str, float] = field(default_factory=dict)

    @property
    def change(self) -> float:
        return self.worth_now - self.worth_before

    @property
    def reason(self) -> str:
        top = max(self.sources.items(), key=lambda kv: kv[1], default=None)
        who = f"; {top[1]:.0%} of the window's credit from source {top[0]!r}" if top else ""
        return (
            f"worth moved {self.change:+.3f} ({self.worth_before:.3f} -> {self.worth_now:.3f}) over "
            f"{self.retrievals:g} recent retrievals; its earlier evidence allows "
            f"{self.allowed[0]:+.3f} to {self.allowed[1]:+.3f} (tail probability {self.p_value:.2g}){who}"
        )

    def numbers(self) -> dict[str, Any]:
        return {
            "worth_before": round(self.worth_before, 6),
            "worth_now": round(self.worth_now, 6),
            "change": round(self.change, 6),
            "allowed_low": round(self.allowed[0], 6),
            "allowed_high": round(self.allowed[1], 6),
            "retrievals": self.retrievals,
            "p_value": self.p_value,
            "sources": {k: round(v, 6) for k, v in sorted(self.sources.items())},
        }


@dataclass(frozen=True)
class BurstDetector:
    """Flag a memory whose recent outcomes moved its worth more than its evidence allows.

    Before the window the memory had counts ``before`` (worth ``p0`` over ``n0``
    retrievals); in the window it had ``k`` retrievals whose weighted success ratio is
    ``p1``. If nothing changed, the window's successes (in retrieval units, ``k p1``)
    follow the beta-binomial posterior predictive of ``k`` draws given ``before`` (a
    uniform prior plus ``p0 n0`` successes in ``n0``): the binomial bound widened by
    the uncertainty of ``p0``. An alert needs both a tail probability below ``alpha``
    and a change of worth of at least ``min_change``; ``allowed`` is the change that
    the central ``1 - alpha`` range of the window's successes would cause.

    A real change of the world (a memory turning stale) also moves worth fast; the alert
    names the sources that supplied the window's credit, so a person can tell a flood
    from one source apart from a shift every source reports.

    Parameters
    ----------
    window
        Seconds of recent outcomes to test.
    alpha
        Tail probability below which the window is implausible (two-sided).
    min_change
        Smallest change of worth worth an alert.
    min_retrievals
        Fewest retrievals in the window to test at all.

    Examples
    --------
    >>> from memworth import Counts
    >>> detector = BurstDetector()
    >>> before = Counts(success=6.0, failure=14.0, n=80)          # worth 0.30 over 80 retrievals
    >>> flood = Counts(success=10.0, failure=0.0, n=40)           # 40 retrievals, all "success"
    >>> alert = detector.check("m", before, flood, {"agent-b": 10.0})
    >>> round(alert.worth_before, 2), round(alert.worth_now, 2), alert.p_value < 1e-6
    (0.3, 0.53, True)
    >>> print(alert.reason)  # doctest: +ELLIPSIS
    worth moved +0.233 (0.300 -> 0.533) over 40 recent retrievals; ... 100% of the window's credit from source 'agent-b'
    >>> detector.check("m", before, Counts(success=0.8, failure=1.7, n=10), {}) is None   # an ordinary window
    True
    """

    window: float = 3600.0
    alpha: float = 1e-4
    min_change: float = 0.05
    min_retrievals: float = 10

    def validate(self) -> None:
        _positive(self.window, "window")
        _probability(self.alpha, "alpha")
        _positive(self.min_change, "min_change", allow_zero=True)
        _positive(self.min_retrievals, "min_retrievals", allow_zero=True)

    def check(self, memory_id: str, before: Counts, recent: Counts, sources: Mapping[str, float]) -> BurstAlert | None:
        """The alert for one memory, or ``None``. ``sources``: the window's credit per source."""
        self.validate()
        k = recent.n
        if k < max(self.min_retrievals, 1) or recent.evidence <= 0:
            return None
        after = before + recent
        p0 = float(RawWorth().value(before))
        p_now = float(RawWorth().value(after))
        change = p_now - p0
        if abs(change) < self.min_change:
            return None
        from scipy.stats import betabinom  # here: keeps `import memworth` fast

        trials = max(1, round(k))
        a = 1.0 + p0 * before.n
        b = 1.0 + (1.0 - p0) * before.n
        x = trials * recent.success / recent.evidence  # the window's successes in retrieval units
        # the distribution's methods, not a frozen one: freezing builds its docstring each time
        upper_tail = float(betabinom.sf(math.ceil(x - 1e-9) - 1, trials, a, b))  # P(X >= x)
        lower_tail = float(betabinom.cdf(math.floor(x + 1e-9), trials, a, b))  # P(X <= x)
        p_value = min(1.0, 2.0 * min(upper_tail, lower_tail))
        if p_value >= self.alpha:
            return None
        share = recent.evidence / after.evidence
        lo_x, hi_x = (float(v) for v in betabinom.ppf([self.alpha / 2, 1 - self.alpha / 2], trials, a, b))
        allowed = (share * (lo_x / trials - p0), share * (hi_x / trials - p0))
        total = sum(sources.values())
        shares = {s: v / total for s, v in sources.items()} if total > 0 else {}
        return BurstAlert(memory_id, p0, p_now, allowed, k, p_value, shares)
