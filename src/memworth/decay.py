"""Exponential decay of evidence, for a world whose success rates drift."""

from __future__ import annotations

import numpy as np

from memworth.credit import as_float_array
from memworth.errors import ValidationError

__all__ = ["decay_factor"]


def decay_factor(elapsed: float | np.ndarray, half_life: float) -> float | np.ndarray:
    """Weight of evidence ``elapsed`` episodes old: ``2 ** (-elapsed / half_life)``.

    Examples
    --------
    >>> decay_factor(0, 50), decay_factor(50, 50), decay_factor(100, 50)
    (1.0, 0.5, 0.25)
    """
    if isinstance(half_life, bool) or not isinstance(half_life, (int, float, np.integer, np.floating)):
        raise ValidationError("half_life", f"must be a number, got {type(half_life).__name__}")
    if not np.isfinite(float(half_life)) or half_life <= 0:
        raise ValidationError("half_life", f"must be finite and > 0, got {half_life!r}")
    age = as_float_array(elapsed, "elapsed")
    if not np.isfinite(age).all() or (age < 0).any():
        raise ValidationError("elapsed", "must be finite and >= 0 (episodes or seconds since the evidence)")
    out = np.exp2(-age / half_life)
    return float(out) if np.ndim(out) == 0 else out
