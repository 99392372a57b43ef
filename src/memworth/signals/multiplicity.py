"""Error control across many memories tested at once: e-values and the e-BH procedure.

Governance tests every memory of a namespace at every ``govern``: is its success rate
below ``theta_low``, below ``deprecate_below``, has it broken? Each test alone errs with
a small probability, but a store of a hundred memories looked at every fifty outcomes
makes thousands of looks, and a per-memory level then flags dozens of good memories by
chance (measured on the diluted workload: 45-56 useful memories flagged per seed).

Each test here gives an *e-value*: a nonnegative number whose expectation is at most 1
when the memory is fine (the null). Large e-values are evidence against the null
(Markov: ``P(e >= 1/alpha) <= alpha``). The e-BH procedure (Wang and Ramdas 2022,
"False discovery rate control with e-values", JRSS-B) takes the ``K`` e-values of a
namespace, sorts them in decreasing order, and rejects the ``k*`` largest, where ``k*``
is the largest ``k`` with ``e_(k) >= K / (alpha * k)``. Its guarantee: the expected share
of false flags among all flags (the false discovery rate) is at most ``alpha``, *whatever
the dependence between the tests*: memories retrieved in the same episodes share every
outcome, so no independence can be assumed. One memory tested alone (``K = 1``) is
rejected when ``e >= 1 / alpha``: the per-memory rule the namespace rule generalises.

Where the e-values come from is each test's business (:mod:`memworth.signals.confidence_sequences` for the
worth thresholds, :mod:`memworth.signals.change_detection` for a broken success rate); the governance
policy (:meth:`memworth.governance.GovernancePolicy.flags`) gathers them.

Examples
--------
>>> ebh([400.0, 30.0, 1.0, 0.2], alpha=0.05).tolist()
[True, False, False, False]
>>> ebh([90.0, 90.0, 1.0, 0.2], alpha=0.05).tolist()
[True, True, False, False]
"""

from __future__ import annotations

import math

import numpy as np

from memworth.errors import ValidationError

__all__ = ["ebh", "ebh_level"]


def _alpha(alpha: object) -> float:
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float, np.integer, np.floating)):
        raise ValidationError("alpha", f"must be a number, got {type(alpha).__name__}")
    a = float(alpha)
    if not (math.isfinite(a) and 0.0 < a < 1.0):
        raise ValidationError("alpha", f"must be in (0, 1), got {alpha!r}")
    return a


def _evalues(evalues: object) -> np.ndarray:
    e = np.asarray(evalues, dtype=float)
    if e.ndim != 1:
        raise ValidationError("evalues", f"must be a 1-D sequence, got shape {e.shape}")
    if np.any(np.isnan(e)) or np.any(e < 0):
        raise ValidationError("evalues", "must be nonnegative numbers (inf allowed), no NaN")
    return e


def ebh_level(evalues: object, alpha: float) -> float:
    """The e-value a hypothesis needs to be rejected by :func:`ebh` among ``evalues``:
    ``K / (alpha * k*)``, or ``K / alpha`` when nothing is rejected (the bar the next one
    would have to clear alone).

    Examples
    --------
    >>> ebh_level([400.0, 30.0, 1.0, 0.2], alpha=0.05)
    80.0
    """
    e, a = _evalues(evalues), _alpha(alpha)
    k = int(ebh(e, a).sum())
    return float(e.size / (a * max(k, 1)))


def ebh(evalues: object, alpha: float) -> np.ndarray:
    """Which hypotheses the e-BH procedure rejects at false discovery rate ``alpha``.

    Parameters
    ----------
    evalues
        One e-value per hypothesis (``inf`` allowed: certain evidence).
    alpha
        The false discovery rate to control, in (0, 1).

    Returns
    -------
    numpy.ndarray
        Booleans, one per hypothesis, in the order given.

    Raises
    ------
    ValidationError
        For a negative or NaN e-value, or ``alpha`` outside (0, 1).
    """
    e, a = _evalues(evalues), _alpha(alpha)
    size = e.size
    out = np.zeros(size, dtype=bool)
    if size == 0:
        return out
    order = np.argsort(-e, kind="stable")
    ranked = e[order]
    k = np.arange(1, size + 1)
    passing = np.flatnonzero(ranked * a * k >= size)
    if passing.size:
        out[order[: int(passing.max()) + 1]] = True
    return out
