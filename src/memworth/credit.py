"""Credit per episode: how one outcome's unit of evidence splits among the retrieved memories.

The paper (section 3.1) requires the weights of one episode to be non-negative and to
sum to 1; assumption A5 asks for a floor ``w_min`` so that no retrieved memory is starved
of evidence. Three schemes (section 3.3): uniform ``1/k``, score-proportional (weights
proportional to the retrieval scores) and caller-given (e.g. an oracle). The last two are
the same arithmetic: :func:`normalise`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from memworth.errors import ValidationError

__all__ = ["as_float_array", "normalise", "normalise_rows", "share_among_used", "uniform"]


def as_float_array(values: object, field: str) -> np.ndarray:
    """``values`` as a float array, or a :class:`ValidationError` naming ``field``."""
    try:
        return np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise ValidationError(field, f"must be numbers, got {values!r:.80}") from None


def uniform(k: int) -> np.ndarray:
    """Weights ``1/k`` for ``k`` retrieved memories.

    Examples
    --------
    >>> uniform(4)
    array([0.25, 0.25, 0.25, 0.25])
    """
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValidationError("ids", f"an episode must retrieve at least one memory, got k={k!r}")
    return np.full(int(k), 1.0 / int(k))


def normalise(weights: Sequence[float] | np.ndarray, *, w_min: float = 0.0, field: str = "weights") -> np.ndarray:
    """Scale non-negative weights (scores) to sum to 1, with every weight at least ``w_min``.

    The floor is applied by water-filling: weights that would fall below ``w_min`` are
    raised to it and the rest are scaled down proportionally, so the result sums to 1 and
    keeps the order of the inputs.

    Refused, with a :class:`ValidationError` naming ``field``: a weight that is negative or
    not finite, weights that sum to zero, and weights whose sum overflows (is larger than
    the largest float, about 1.8e308), which would otherwise turn every share into 0.

    Examples
    --------
    >>> normalise([3.0, 1.0])
    array([0.75, 0.25])
    >>> normalise([0.98, 0.01, 0.01], w_min=0.05)
    array([0.9 , 0.05, 0.05])
    >>> normalise([1.0, -1.0])
    Traceback (most recent call last):
    ...
    memworth.errors.ValidationError: weights: must be >= 0, got -1.0 at position 1
    >>> normalise([1e308, 1e308])
    Traceback (most recent call last):
    ...
    memworth.errors.ValidationError: weights: sum to more than the largest float; scale them down (only ratios count)
    """
    arr = as_float_array(weights, field)
    if arr.ndim != 1:
        raise ValidationError(field, f"must be a flat list of numbers, got shape {arr.shape}")
    return normalise_rows(arr[None, :], w_min=w_min, field=field)[0]


def normalise_rows(weights: np.ndarray, *, w_min: float = 0.0, field: str = "weights") -> np.ndarray:
    """:func:`normalise` applied to every row of a 2-D array at once (one row per episode)."""
    arr = as_float_array(weights, field)
    if arr.ndim != 2 or arr.shape[1] == 0:
        raise ValidationError(field, f"must have one non-empty row per episode, got shape {arr.shape}")
    check_w_min(w_min, arr.shape[1])
    finite = np.isfinite(arr)
    if not finite.all():
        pos = np.argwhere(~finite)[0]
        raise ValidationError(field, f"must be finite, got {arr[tuple(pos)].item()!r} at position {_where(pos, arr)}")
    negative = arr < 0
    if negative.any():
        pos = np.argwhere(negative)[0]
        raise ValidationError(field, f"must be >= 0, got {arr[tuple(pos)].item()!r} at position {_where(pos, arr)}")
    with np.errstate(over="ignore"):  # an overflowing sum is refused just below, not warned about
        totals = arr.sum(axis=1)
    if not np.isfinite(totals).all():
        row = int(np.flatnonzero(~np.isfinite(totals))[0])
        where = "" if arr.shape[0] == 1 else f" (episode {row})"
        raise ValidationError(field, f"sum to more than the largest float{where}; scale them down (only ratios count)")
    if (totals <= 0).any():
        row = int(np.flatnonzero(totals <= 0)[0])
        where = "" if arr.shape[0] == 1 else f" (episode {row})"
        raise ValidationError(field, f"sum to zero{where}; cannot split credit")
    out = arr / totals[:, None]
    if w_min > 0:
        out = _apply_floor(out, w_min)
    return out


def share_among_used(
    weights: Sequence[float] | np.ndarray, used: Sequence[bool] | np.ndarray, *, rule: str = "uniform", w_min: float = 0.0
) -> np.ndarray:
    """An episode's credit weights once the agent said which of its memories it used.

    The used memories share the episode's unit of credit under the store's credit
    ``rule``: equally (``"uniform"``, ``1/m`` for ``m`` used) or in proportion to the
    weights recall gave them (``"score"``, floored at ``w_min`` among the used, as
    :func:`normalise` does; equal shares if those weights are all zero). The memories not
    used get 0: no credit at all. A memory listed twice in an episode gets its share at
    each position it was used.

    Examples
    --------
    >>> share_among_used([0.25, 0.25, 0.25, 0.25], [False, True, False, False])
    array([0., 1., 0., 0.])
    >>> share_among_used([0.5, 0.3, 0.2], [True, False, True], rule="score")
    array([0.71428571, 0.        , 0.28571429])
    """
    w = as_float_array(weights, "weights")
    mask = np.asarray(used, dtype=bool)
    if w.ndim != 1 or mask.shape != w.shape or not mask.any():
        raise ValidationError("used", f"must mark at least one of the episode's {w.size} memories")
    out = np.zeros(w.size)
    m = int(mask.sum())
    if rule == "uniform" or not (w[mask] > 0).any():
        out[mask] = 1.0 / m
    else:
        out[mask] = normalise(w[mask], w_min=min(w_min, 1.0 / m))
    return out


def check_w_min(w_min: object, k: int) -> None:
    """Refuse a floor that is negative, not finite, or too large for ``k`` weights to sum to 1."""
    if isinstance(w_min, bool) or not isinstance(w_min, (int, float, np.floating, np.integer)):
        raise ValidationError("w_min", f"must be a number, got {type(w_min).__name__}")
    if not np.isfinite(float(w_min)) or w_min < 0:
        raise ValidationError("w_min", f"must be finite and >= 0, got {w_min!r}")
    if w_min * k > 1 + 1e-12:
        raise ValidationError("w_min", f"{w_min} x {k} retrieved memories exceeds 1; weights could not sum to 1")


def _apply_floor(w: np.ndarray, w_min: float) -> np.ndarray:
    # Water-filling: clamp, rescale the free weights to the remaining mass, repeat.
    # Each pass clamps at least one more weight or stops, so k passes suffice.
    clamped = np.zeros(w.shape, dtype=bool)
    out = w.copy()
    for _ in range(w.shape[1]):
        newly = (out < w_min) & ~clamped
        if not newly.any():
            break
        clamped |= newly
        free_mass = np.where(clamped, 0.0, w).sum(axis=1, keepdims=True)
        room = 1.0 - w_min * clamped.sum(axis=1, keepdims=True)
        scale = np.divide(room, free_mass, out=np.zeros_like(room), where=free_mass > 0)
        out = np.where(clamped, w_min, w * scale)
    return out


def _where(pos: np.ndarray, arr: np.ndarray) -> str:
    return str(int(pos[1])) if arr.shape[0] == 1 else f"episode {int(pos[0])}, slot {int(pos[1])}"
