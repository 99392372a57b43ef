"""Exponential decay of evidence, for a world whose success rates drift."""

from __future__ import annotations

import numpy as np

__all__ = ["decay_factor"]


def decay_factor(elapsed: float | np.ndarray, half_life: float) -> float | np.ndarray:
    """Weight of evidence ``elapsed`` episodes old: ``2 ** (-elapsed / half_life)``.

    Examples
    --------
    >>> decay_factor(0, 50), decay_factor(50, 50), decay_factor(100, 50)
    (1.0, 0.5, 0.25)
    """
    out = np.exp2(-np.asarray(elapsed, dtype=float) / half_life)
    return float(out) if np.ndim(out) == 0 else out
