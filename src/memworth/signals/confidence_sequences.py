"""Anytime-valid confidence sequences for a memory's success probability, and deprecation by them.

A fixed evidence threshold (the paper's V_min) checked after every retrieval deprecates
a memory whose true rate is fine whenever its worth dips below theta_L, and given long
enough every such memory dips. A confidence sequence is a sequence of intervals that
contain the true rate at every time at once with probability at least ``1 - alpha``,
so a rule that acts only when the whole interval lies below theta_L errs with
probability at most ``alpha`` however long one watches, and however often one looks.

Which sequence: Robbins' beta-binomial mixture (Robbins 1970; Howard, Ramdas, McAuliffe
and Sekhon 2021, "Time-uniform, nonparametric, nonasymptotic confidence sequences",
section 3). For a candidate rate ``p``, mix the likelihood ratio of every rate ``q``
against ``p`` over a Beta(a, b) prior on ``q``:

    M_t(p) = B(a + S_t, b + F_t) / B(a, b) / (p ** S_t * (1 - p) ** F_t)

where S_t and F_t are the weighted successes and failures so far (hits+ and hits-). The
sequence is every ``p`` with ``M_t(p) < 1 / alpha``; it is an interval (log M_t is
convex in p) around the worth ratio, computed from the counts alone.

Validity conditions. Each observation is a success indicator ``y`` in {0, 1} (any value
in [0, 1] works too) with a weight ``w`` in [0, 1] that is fixed before ``y`` is seen,
and ``E[y | the past, w] = p``: the rate is constant (the paper's A6). Then M_t(p) at the
true ``p`` is a nonnegative supermartingale starting at 1, and Ville's inequality gives
``P(M_t(p) >= 1 / alpha for some t) <= alpha``.

Weighted observations (fractional credit). An observation of weight ``w`` adds ``w * y``
to S and ``w * (1 - y)`` to F, which is exactly how the paper's counters grow (``w`` =
credit share, times the outcome's confidence in the store). The mixture then multiplies
each likelihood ratio raised to the power ``w``; since ``E[L ** w] <= E[L] ** w = 1``
for ``w <= 1`` (Jensen), the supermartingale survives: fractional credit costs power
(k = 8 retrievals at 1/8 credit count as one), never validity. When every retrieval
carries the same weight, ``evidence="retrievals"`` rebuilds one observation per
retrieval (successes = worth x retrievals) and recovers that power; with unequal
weights that reconstruction is only approximate, so ``"weighted"`` is the default.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from memworth.counts import Counts, CountsTable, check_unit
from memworth.errors import ValidationError
from memworth.policy import Decision

__all__ = ["BetaBinomialCS", "SequentialDeprecation"]

CountsLike = Counts | CountsTable
_ITERATIONS = 60  # bisection steps: the bound to within 2 ** -60


def _prob(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValidationError(name, f"must be a number, got {type(value).__name__}")
    v = float(value)
    if not (math.isfinite(v) and 0.0 < v < 1.0):
        raise ValidationError(name, f"must be in (0, 1), got {value!r}")
    return v


def _positive(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValidationError(name, f"must be a number, got {type(value).__name__}")
    v = float(value)
    if not (math.isfinite(v) and v > 0):
        raise ValidationError(name, f"must be finite and > 0, got {value!r}")
    return v


def _unbox(x: np.ndarray) -> float | np.ndarray:
    return float(x) if np.ndim(x) == 0 else x


@dataclass(frozen=True)
class BetaBinomialCS:
    """Robbins' beta-binomial mixture confidence sequence for a success probability (settings only).

    Parameters
    ----------
    alpha
        Chance that the sequence ever misses the true rate, over all time.
    prior_success, prior_failure
        The Beta(a, b) mixing distribution (not a belief: any choice is valid; a = b = 1
        spreads the power evenly over rates).
    evidence
        ``"weighted"`` (S, F = hits+, hits-: valid for any weights in [0, 1]) or
        ``"retrievals"`` (one observation per retrieval: valid when every retrieval had
        the same weight).

    Examples
    --------
    >>> cs = BetaBinomialCS()
    >>> [round(x, 3) for x in cs.interval(Counts(success=30.0, failure=70.0, n=100))]
    [0.169, 0.457]
    >>> cs.interval(Counts())
    (0.0, 1.0)
    """

    alpha: float = 0.05
    prior_success: float = 1.0
    prior_failure: float = 1.0
    evidence: str = "weighted"

    def _settings(self) -> tuple[float, float, float]:
        check_unit(self.evidence)
        return (
            _prob(self.alpha, "alpha"),
            _positive(self.prior_success, "prior_success"),
            _positive(self.prior_failure, "prior_failure"),
        )

    def _sf(self, counts: CountsLike) -> tuple[np.ndarray, np.ndarray]:
        s = np.asarray(counts.success, dtype=float)
        f = np.asarray(counts.failure, dtype=float)
        if self.evidence == "retrievals":
            v = s + f
            ratio = np.where(v > 0, s / np.where(v > 0, v, 1.0), 0.5)
            n = np.asarray(counts.n, dtype=float)
            return ratio * n, (1 - ratio) * n
        return s, f

    def log_martingale(self, counts: CountsLike, p: float | np.ndarray) -> float | np.ndarray:
        """log M_t(p): the evidence against rate ``p`` (the sequence excludes p at log(1 / alpha))."""
        _alpha, a, b = self._settings()
        s, f = self._sf(counts)
        return _unbox(_log_martingale_at(s, f, a, b)(p))

    def interval(self, counts: CountsLike) -> tuple[float | np.ndarray, float | np.ndarray]:
        """``(lower, upper)``: every rate the sequence has not excluded (floats, or arrays)."""
        alpha, a, b = self._settings()
        s, f = self._sf(counts)
        s, f = np.broadcast_arrays(s, f)
        v = s + f
        centre = np.where(v > 0, s / np.where(v > 0, v, 1.0), 0.5)
        level = math.log(1.0 / alpha)
        tiny = 1e-12
        # log M_t of these counts as log_martingale(CountsTable(s, f, v), p) reads them, its
        # Beta-function term (most of the cost, the same at every p) computed once, not per step.
        log_m = _log_martingale_at(*self._sf(CountsTable(s, f, v)), a, b)

        def excluded(p: np.ndarray) -> np.ndarray:
            return np.asarray(log_m(p)) >= level

        # Lower end: log M is decreasing on (0, centre]; bisect for where it crosses the level.
        lo, hi = np.full(s.shape, tiny), np.clip(centre, tiny, 1 - tiny)
        for _ in range(_ITERATIONS):
            mid = (lo + hi) / 2
            out = excluded(mid)
            lo, hi = np.where(out, mid, lo), np.where(out, hi, mid)
        lower = np.where(excluded(np.full(s.shape, tiny)), hi, 0.0)
        # Upper end: log M is increasing on [centre, 1).
        lo, hi = np.clip(centre, tiny, 1 - tiny), np.full(s.shape, 1 - tiny)
        for _ in range(_ITERATIONS):
            mid = (lo + hi) / 2
            out = excluded(mid)
            lo, hi = np.where(out, lo, mid), np.where(out, mid, hi)
        upper = np.where(excluded(np.full(s.shape, 1 - tiny)), lo, 1.0)
        return _unbox(lower), _unbox(upper)

    def below(self, counts: CountsLike, threshold: float) -> bool | np.ndarray:
        """Whether the whole interval lies below ``threshold`` (upper end < threshold), exactly.

        Since log M_t is convex with its minimum at the worth ratio, the upper end is below
        ``threshold`` exactly when the ratio is and ``threshold`` itself is excluded.
        """
        alpha, _a, _b = self._settings()
        theta = _prob(threshold, "threshold")
        s, f = self._sf(counts)
        v = s + f
        centre = np.where(v > 0, s / np.where(v > 0, v, 1.0), 0.5)
        out = (centre < theta) & (np.asarray(self.log_martingale(counts, theta)) >= math.log(1.0 / alpha))
        return bool(out) if np.ndim(out) == 0 else out


def _log_martingale_at(s: np.ndarray, f: np.ndarray, a: float, b: float) -> Callable[[Any], np.ndarray]:
    """log M_t(p) of the Beta(a, b) mixture after ``s`` successes and ``f`` failures, as a function of p.

    The Beta-function term does not depend on p and is computed here once; the bisection
    of :meth:`BetaBinomialCS.interval` calls the function at 120 points.
    """
    from scipy.special import betaln  # imported here: keeps `import memworth` fast

    mixture = betaln(a + s, b + f) - betaln(a, b)

    def at(p: Any) -> np.ndarray:
        q = np.asarray(p, dtype=float)
        if not np.all((q > 0) & (q < 1)):
            raise ValidationError("p", "must be strictly between 0 and 1")
        return mixture - s * np.log(q) - f * np.log1p(-q)

    return at


@dataclass(frozen=True)
class SequentialDeprecation:
    """Deprecate when a confidence sequence lies wholly below ``threshold`` (no V_min).

    The chance of ever deprecating a memory whose rate is at least ``threshold`` stays
    below ``alpha``, however long it is watched (see the module docstring for the
    conditions). Memories with little evidence are never deprecated, since their
    interval is wide: the evidence threshold comes from the data.

    Examples
    --------
    >>> rule = SequentialDeprecation()
    >>> rule.check(Counts(success=3.0, failure=7.0, n=10)).action
    'keep'
    >>> d = rule.check(Counts(success=30.0, failure=100.0, n=130))
    >>> d.action, round(d.numbers["upper"], 3)
    ('deprecate', 0.364)
    """

    threshold: float = 0.40
    alpha: float = 0.05
    prior_success: float = 1.0
    prior_failure: float = 1.0
    evidence: str = "weighted"

    def sequence(self) -> BetaBinomialCS:
        """The confidence sequence the rule reads."""
        return BetaBinomialCS(self.alpha, self.prior_success, self.prior_failure, self.evidence)

    def check(self, counts: Counts) -> Decision:
        """``deprecate`` or ``keep`` for ``counts``, with the interval and numbers behind it."""
        cs = self.sequence()
        theta = _prob(self.threshold, "threshold")
        lower, upper = (float(x) for x in cs.interval(counts))
        s, f = cs._sf(counts)
        v = float(s + f)
        worth = float(s / v) if v > 0 else 0.5
        numbers = {
            "worth": worth,
            "lower": lower,
            "upper": upper,
            "evidence": v,
            "alpha": float(self.alpha),
            "threshold": theta,
            "log_evidence": float(cs.log_martingale(counts, theta)),
        }
        level = f"{1 - float(self.alpha):.0%}"
        if cs.below(counts, theta):
            reason = f"{level} confidence sequence [{lower:.3f}, {upper:.3f}] lies below {theta:g} (evidence {v:g})"
            return Decision("deprecate", reason, numbers)
        return Decision(
            "keep", f"{level} confidence sequence [{lower:.3f}, {upper:.3f}] reaches {theta:g}: keep", numbers
        )

    def check_table(self, counts: CountsTable) -> np.ndarray:
        """Which of many memories to deprecate (booleans), vectorised."""
        return np.asarray(self.sequence().below(counts, _prob(self.threshold, "threshold")), dtype=bool)
