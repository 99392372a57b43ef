"""Estimators: settings only; each reads counts (:class:`Counts` or :class:`CountsTable`).

=================  =====================================================================
``RawWorth``       the paper's MW = hits+ / (hits+ + hits-), 0.5 with no evidence
``BetaMean``       Beta-Bernoulli posterior mean (prior pseudo-counts configurable)
``BetaBound``      lower or upper end of the central Beta credible interval
``WilsonBound``    lower or upper end of the Wilson score interval (note 003's formula)
``Decayed``        any estimator above, read from exponentially decayed counts
``ContextPooled``  any estimator above, on a context's counts pooled toward the global rate
=================  =====================================================================

Every estimator has ``value(counts)``; the interval estimators also have
``interval(counts) -> (lower, upper)``. All formulas are vectorised: pass a
:class:`CountsTable` to score many memories at once.

Evidence for the interval estimators is measured, by the ``evidence`` setting, in weighted
hits (``"weighted"``, V = hits+ + hits-, the paper's definition and the default) or in
retrievals (``"retrievals"``, n, with the success share taken from the weighted ratio).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from memworth.counts import Counts, CountsTable, check_counts, check_unit
from memworth.errors import ValidationError

__all__ = [
    "BetaBound",
    "BetaMean",
    "ContextPooled",
    "Decayed",
    "RawWorth",
    "WilsonBound",
]

CountsLike = Counts | CountsTable
Side = Literal["lower", "upper"]


def _ratio(counts: CountsLike, default: float) -> float | np.ndarray:
    check_counts(counts)
    if isinstance(counts, Counts):  # one memory (governance asks per memory): Python floats,
        v = counts.success + counts.failure  # the same IEEE operations as the array path below
        return counts.success / v if v > 0 else float(default)
    s = np.asarray(counts.success, dtype=float)
    v = s + np.asarray(counts.failure, dtype=float)
    some = v > 0
    return _unbox(np.where(some, s / np.where(some, v, 1.0), default))  # never divides by 0


def _wilson(n: Any, p: Any, z: float, root: Callable[[Any], Any], unit: Callable[[Any], Any]) -> tuple[Any, Any]:
    """The Wilson interval of success share ``p`` over evidence ``n``: note 003's formula
    multiplied through by n, stable for any n >= 0 since nothing divides by n or squares it
    (at n = 0 it gives the whole interval [0, 1]). Written once for floats and for arrays:
    ``root`` is the square root of the positive part, ``unit`` clips to [0, 1]."""
    z2 = z * z
    centre = n * p + z2 / 2
    spread = z * root(n * p * (1 - p) + z2 / 4)
    return unit((centre - spread) / (n + z2)), unit((centre + spread) / (n + z2))


def _root(x: float) -> float:
    return math.sqrt(max(x, 0.0))


def _roots(x: np.ndarray) -> np.ndarray:
    return np.asarray(np.sqrt(np.maximum(x, 0.0)))


def _unit(x: float) -> float:
    return min(max(x, 0.0), 1.0)


def _units(x: np.ndarray) -> np.ndarray:
    return np.asarray(np.clip(x, 0.0, 1.0))


def _unbox(x: np.ndarray) -> float | np.ndarray:
    return float(x) if np.ndim(x) == 0 else x


def _check_prob(value: object, name: str, *, open_interval: bool = True) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise ValidationError(name, f"must be a number, got {type(value).__name__}")
    v = float(value)
    lo_ok = v > 0 if open_interval else v >= 0
    hi_ok = v < 1 if open_interval else v <= 1
    if not (np.isfinite(v) and lo_ok and hi_ok):
        interval = "(0, 1)" if open_interval else "[0, 1]"
        raise ValidationError(name, f"must be in {interval}, got {value!r}")
    return v


def _check_positive(value: object, name: str, *, allow_zero: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise ValidationError(name, f"must be a number, got {type(value).__name__}")
    v = float(value)
    if not np.isfinite(v) or v < 0 or (v == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValidationError(name, f"must be finite and {bound}, got {value!r}")
    return v


def _check_side(side: object) -> None:
    if side not in ("lower", "upper"):
        raise ValidationError("side", f"must be 'lower' or 'upper', got {side!r}")


def _pseudo_counts(counts: CountsLike, evidence: str) -> tuple[np.ndarray, np.ndarray]:
    check_unit(evidence)
    check_counts(counts)
    s = np.asarray(counts.success, dtype=float)
    f = np.asarray(counts.failure, dtype=float)
    if evidence == "weighted":
        return s, f
    n = np.asarray(counts.n, dtype=float)
    p = np.asarray(_ratio(counts, 0.5), dtype=float)
    return p * n, (1 - p) * n


@dataclass(frozen=True)
class RawWorth:
    """The paper's Memory Worth (definition 3.1): hits+ / (hits+ + hits-).

    Parameters
    ----------
    no_evidence
        The value with no evidence at all (the paper's 0.5).

    Examples
    --------
    >>> RawWorth().value(Counts(success=8.0, failure=2.0, n=10))
    0.8
    >>> RawWorth().value(Counts())
    0.5
    """

    no_evidence: float = 0.5

    def value(self, counts: CountsLike) -> float | np.ndarray:
        """The estimate for ``counts`` (a float, or an array for a CountsTable)."""
        return _ratio(counts, _check_prob(self.no_evidence, "no_evidence", open_interval=False))


@dataclass(frozen=True)
class BetaMean:
    """Posterior mean of a Beta-Bernoulli model: (a + hits+) / (a + b + hits+ + hits-).

    Parameters
    ----------
    prior_success, prior_failure
        Prior pseudo-counts a and b (a = b = 1 is the uniform prior the paper uses).

    Examples
    --------
    >>> BetaMean().value(Counts(success=8.0, failure=2.0, n=10))
    0.75
    >>> BetaMean(prior_success=2, prior_failure=8).value(Counts())
    0.2
    """

    prior_success: float = 1.0
    prior_failure: float = 1.0

    def value(self, counts: CountsLike) -> float | np.ndarray:
        """The estimate for ``counts`` (a float, or an array for a CountsTable)."""
        a = _check_positive(self.prior_success, "prior_success")
        b = _check_positive(self.prior_failure, "prior_failure")
        check_counts(counts)
        s = np.asarray(counts.success, dtype=float)
        f = np.asarray(counts.failure, dtype=float)
        return _unbox((a + s) / (a + b + s + f))


@dataclass(frozen=True)
class BetaBound:
    """An end of the central ``level`` credible interval of the Beta posterior.

    With ``level=0.95`` the lower bound is the posterior's 2.5% quantile, the same
    two-sided convention as :class:`WilsonBound` with ``z=1.96``.

    Parameters
    ----------
    side
        ``"lower"`` (cautious ranking, deprecation that needs strong evidence) or ``"upper"``.
    level
        Credible level of the two-sided interval, in (0, 1).
    prior_success, prior_failure
        Prior pseudo-counts.
    evidence
        ``"weighted"`` (posterior on hits+ and hits-) or ``"retrievals"`` (on n retrievals).

    Examples
    --------
    >>> lo = BetaBound("lower").value(Counts(success=80.0, failure=20.0, n=100))
    >>> round(lo, 3)
    0.711
    >>> [round(x, 3) for x in BetaBound().interval(Counts(success=8.0, failure=2.0, n=10))]
    [0.482, 0.94]
    """

    side: Side = "lower"
    level: float = 0.95
    prior_success: float = 1.0
    prior_failure: float = 1.0
    evidence: str = "weighted"

    def interval(self, counts: CountsLike) -> tuple[float | np.ndarray, float | np.ndarray]:
        """``(lower, upper)`` for ``counts`` (floats, or arrays for a CountsTable)."""
        level = _check_prob(self.level, "level")
        a = _check_positive(self.prior_success, "prior_success")
        b = _check_positive(self.prior_failure, "prior_failure")
        s, f = _pseudo_counts(counts, self.evidence)
        from scipy.special import betaincinv  # imported here: keeps `import memworth` fast

        tail = (1 - level) / 2
        return _unbox(betaincinv(a + s, b + f, tail)), _unbox(betaincinv(a + s, b + f, 1 - tail))

    def value(self, counts: CountsLike) -> float | np.ndarray:
        """The estimate for ``counts`` (a float, or an array for a CountsTable)."""
        _check_side(self.side)
        lo, hi = self.interval(counts)
        return lo if self.side == "lower" else hi


@dataclass(frozen=True)
class WilsonBound:
    """An end of the Wilson score interval (note 003), [0, 1] with no evidence.

    lower = (p + z^2/2n - z sqrt(p(1-p)/n + z^2/4n^2)) / (1 + z^2/n), with p the MW ratio.

    Parameters
    ----------
    side
        ``"lower"`` (note 003's confidence-adjusted ranking score) or ``"upper"``.
    z
        Normal quantile; 1.96 for a two-sided 95% interval.
    evidence
        ``"weighted"`` (n = hits+ + hits-) or ``"retrievals"`` (n = retrievals).

    Examples
    --------
    >>> wilson = WilsonBound()
    >>> round(wilson.value(Counts(success=1.0, failure=0.0, n=1)), 3)
    0.207
    >>> round(wilson.value(Counts(success=10.0, failure=1.0, n=11)), 3)
    0.623
    """

    side: Side = "lower"
    z: float = 1.96
    evidence: str = "weighted"

    def interval(
        self, counts: CountsLike, share: float | np.ndarray | None = None
    ) -> tuple[float | np.ndarray, float | np.ndarray]:
        """``(lower, upper)`` for ``counts`` (floats, or arrays for a CountsTable).

        ``share``: the success share of ``counts`` when the caller has it already (what
        ``RawWorth().value(counts)`` gives), so that it is not computed again.
        """
        z = _check_positive(self.z, "z")
        check_unit(self.evidence)
        if isinstance(counts, Counts):  # one memory: Python floats, bit for bit the array result
            p1 = float(_ratio(counts, 0.5) if share is None else share)
            n1 = counts.success + counts.failure if self.evidence == "weighted" else counts.n
            return _wilson(n1, p1, z, _root, _unit)
        p = np.asarray(_ratio(counts, 0.5) if share is None else share, dtype=float)
        if self.evidence == "weighted":
            n = np.asarray(counts.success, dtype=float) + np.asarray(counts.failure, dtype=float)
        else:
            n = np.asarray(counts.n, dtype=float)
        lo, hi = _wilson(n, p, z, _roots, _units)
        return _unbox(lo), _unbox(hi)

    def value(self, counts: CountsLike) -> float | np.ndarray:
        """The estimate for ``counts`` (a float, or an array for a CountsTable)."""
        _check_side(self.side)
        lo, hi = self.interval(counts)
        return lo if self.side == "lower" else hi


@dataclass(frozen=True)
class Decayed:
    """Read ``base`` from exponentially decayed counts, for a non-stationary world.

    Evidence from ``half_life`` episodes ago counts half as much as evidence from now. The
    decayed counts themselves are kept by whoever accumulates (a :class:`memworth.Tracker`
    built with the same ``half_life``), since they cannot be recovered from totals; this
    wrapper names which counts to read and applies ``base`` to them. It gives up the
    paper's almost-sure convergence (section 7) in exchange for tracking drift.

    Examples
    --------
    >>> from memworth import Tracker
    >>> t = Tracker(half_life=10)
    >>> for _ in range(50):
    ...     t.record(["m"], success=True)
    >>> for _ in range(10):
    ...     t.record(["m"], success=False)
    >>> round(t.worth("m"), 3), round(t.worth("m", estimator=Decayed(RawWorth(), half_life=10)), 3)
    (0.833, 0.492)
    """

    base: RawWorth | BetaMean | BetaBound | WilsonBound = field(default_factory=RawWorth)
    half_life: float = 100.0

    def value(self, counts: CountsLike) -> float | np.ndarray:
        """The estimate for ``counts`` (a float, or an array for a CountsTable)."""
        _check_positive(self.half_life, "half_life")
        return _base(self.base).value(counts)


@dataclass(frozen=True)
class ContextPooled:
    """Worth within one context (task type, query cluster), pooled toward the global rate.

    The context's counts get ``strength`` pseudo-observations of the memory's global
    MW ratio added before ``base`` reads them: with no context evidence the estimate is
    the global one; with much more than ``strength`` it is the context's own. This is
    the shrinkage the paper's "use prior or global pool average" suggests (section 3.4).

    Examples
    --------
    >>> pooled = ContextPooled(strength=10)
    >>> glob = Counts(success=30.0, failure=10.0, n=40)
    >>> pooled.value_in_context(Counts(), glob)
    0.75
    >>> round(pooled.value_in_context(Counts(success=0.0, failure=10.0, n=10), glob), 3)
    0.375
    """

    base: RawWorth | BetaMean | BetaBound | WilsonBound = field(default_factory=RawWorth)
    strength: float = 10.0

    def value(self, counts: CountsLike) -> float | np.ndarray:
        """Without a context there is nothing to pool: ``base`` on ``counts``."""
        return _base(self.base).value(counts)

    def value_in_context(self, context_counts: CountsLike, global_counts: CountsLike) -> float | np.ndarray:
        """``base`` on the context's counts plus ``strength`` pseudo-observations of the global ratio."""
        strength = _check_positive(self.strength, "strength", allow_zero=True)
        base = _base(self.base)
        check_counts(context_counts, field="context_counts")
        g = np.asarray(_ratio(global_counts, 0.5), dtype=float)
        s = np.asarray(context_counts.success, dtype=float) + strength * g
        f = np.asarray(context_counts.failure, dtype=float) + strength * (1 - g)
        n = np.asarray(context_counts.n, dtype=float) + strength
        if np.ndim(s) == 0:
            return base.value(Counts(float(s), float(f), float(n)))
        return base.value(CountsTable(s, f, n))


Estimator = RawWorth | BetaMean | BetaBound | WilsonBound | Decayed | ContextPooled


def _base(base: object) -> RawWorth | BetaMean | BetaBound | WilsonBound:
    """The estimator a wrapper reads through; refused unless it is one of the four plain ones."""
    if not isinstance(base, (RawWorth, BetaMean, BetaBound, WilsonBound)):
        raise ValidationError(
            "base", f"must be RawWorth, BetaMean, BetaBound or WilsonBound, got {type(base).__name__}"
        )
    return base
