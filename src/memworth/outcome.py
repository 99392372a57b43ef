"""What counts as an episode outcome, for one episode and for arrays of them."""

from __future__ import annotations

import numpy as np

from memworth.errors import OutcomeError

__all__ = ["as_outcome", "as_outcomes"]

_WORDS = {"success": True, "failure": False}


def as_outcome(value: object, field: str = "success") -> bool:
    """Read one outcome: ``True``/``False``, ``"success"``/``"failure"``, or ``1``/``0``/``-1``.

    ``1`` is success and ``0`` or ``-1`` failure, so both the boolean and the paper's
    ``y in {+1, -1}`` conventions work. Anything else is refused.

    Examples
    --------
    >>> as_outcome(True), as_outcome("failure"), as_outcome(-1)
    (True, False, False)
    >>> as_outcome(0.5)
    Traceback (most recent call last):
    ...
    memworth.errors.OutcomeError: success: must be success or failure (True/False, 'success'/'failure', 1/0/-1), got 0.5
    """
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, str) and value in _WORDS:
        return _WORDS[value]
    if isinstance(value, (int, np.integer)) and value in (1, 0, -1):
        return bool(value == 1)
    raise OutcomeError(field, f"must be success or failure (True/False, 'success'/'failure', 1/0/-1), got {value!r}")


def as_outcomes(values: object, length: int, field: str = "success") -> np.ndarray:
    """Read an array of ``length`` outcomes (booleans, or integers in 1/0/-1) as booleans."""
    arr = np.asarray(values)
    if arr.shape != (length,):
        raise OutcomeError(field, f"must have shape ({length},), got {arr.shape}")
    if arr.dtype == np.bool_:
        return arr
    if not np.issubdtype(arr.dtype, np.integer):
        raise OutcomeError(field, f"must be booleans or integers 1/0/-1, got dtype {arr.dtype}")
    bad = (arr != 1) & (arr != 0) & (arr != -1)
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        value = arr[first].item()
        raise OutcomeError(field, f"entry {first} is {value!r}; outcomes must be 1 (success), 0 or -1 (failure)")
    return arr == 1
