"""The data Memory Worth is computed from: two weighted counters and a retrieval count.

A :class:`Counts` holds one memory's evidence. Two counts add up exactly, so counts
kept on separate shards (processes, hosts, database partitions) merge into the counts
one tracker would have kept. :class:`CountsTable` is the same data for many memories at
once, as arrays; every estimator reads either.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, NamedTuple

import numpy as np

from memworth.errors import ValidationError
from memworth.outcome import as_outcome

__all__ = ["Counts", "CountsTable", "EvidenceUnit", "check_counts", "evidence_of"]

EvidenceUnit = Literal["retrievals", "weighted"]
"""How evidence is measured: retrievals (``n``) or weighted hits (``success + failure``)."""

_UNITS = ("retrievals", "weighted")


@dataclass(frozen=True, slots=True)
class Counts:
    """One memory's evidence: weighted hits+ (``success``), hits- (``failure``), ``n``.

    ``success`` and ``failure`` are the paper's hits+ and hits- (equations 2-3): the sum
    of the credit weights the memory received in successful and failed episodes. ``n``
    is how many episodes retrieved it, whatever its weight. Decayed counts (see
    :func:`memworth.decay_factor`) are counts too, with fractional ``n``.

    Examples
    --------
    >>> a = Counts().add(0.25, success=True).add(0.25, success=False)
    >>> a
    Counts(success=0.25, failure=0.25, n=2.0)
    >>> a + Counts(success=1.0, failure=0.0, n=1.0)
    Counts(success=1.25, failure=0.25, n=3.0)
    >>> a.evidence
    0.5
    """

    success: float = 0.0
    failure: float = 0.0
    n: float = 0.0

    def __post_init__(self) -> None:
        for name in ("success", "failure", "n"):
            value = getattr(self, name)
            if type(value) is float and 0.0 <= value < math.inf:  # the common case, checked first: kept as is
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
                raise ValidationError(name, f"must be a number, got {type(value).__name__}")
            if not math.isfinite(value) or value < 0:
                raise ValidationError(name, f"must be finite and >= 0, got {value!r}")
            object.__setattr__(self, name, float(value))

    @property
    def evidence(self) -> float:
        """The paper's evidence volume V = hits+ + hits-."""
        return self.success + self.failure

    def add(self, weight: float, success: bool) -> Counts:
        """Return these counts after one retrieval credited ``weight``."""
        weight = _amount(weight, "weight")
        if as_outcome(success):
            return Counts(self.success + weight, self.failure, self.n + 1)
        return Counts(self.success, self.failure + weight, self.n + 1)

    def scaled(self, factor: float) -> Counts:
        """Return these counts multiplied by ``factor`` (how decay discounts old evidence)."""
        factor = _amount(factor, "factor")
        return Counts(self.success * factor, self.failure * factor, self.n * factor)

    def __add__(self, other: object) -> Counts:
        if not isinstance(other, Counts):
            return NotImplemented
        return Counts(self.success + other.success, self.failure + other.failure, self.n + other.n)


class CountsTable(NamedTuple):
    """Counts of many memories as aligned float arrays; estimators read it like :class:`Counts`.

    Examples
    --------
    >>> import numpy as np
    >>> from memworth import RawWorth
    >>> table = CountsTable(np.array([3.0, 0.0]), np.array([1.0, 0.0]), np.array([4.0, 0.0]))
    >>> RawWorth().value(table)
    array([0.75, 0.5 ])
    """

    success: np.ndarray
    failure: np.ndarray
    n: np.ndarray

    @property
    def evidence(self) -> np.ndarray:
        """V = hits+ + hits- of every memory."""
        return self.success + self.failure


def evidence_of(counts: Counts | CountsTable, unit: str) -> float | np.ndarray:
    """Evidence volume of ``counts`` in ``unit``: ``"retrievals"`` (n) or ``"weighted"`` (V).

    Examples
    --------
    >>> evidence_of(Counts(2.0, 1.0, 12), "retrievals"), evidence_of(Counts(2.0, 1.0, 12), "weighted")
    (12.0, 3.0)
    """
    check_unit(unit)
    check_counts(counts)
    return counts.n if unit == "retrievals" else counts.success + counts.failure


def check_unit(unit: object, field: str = "evidence") -> None:
    """Refuse an evidence unit that is not one of ``"retrievals"`` or ``"weighted"``."""
    if not isinstance(unit, str) or unit not in _UNITS:
        raise ValidationError(field, f"must be 'retrievals' or 'weighted', got {unit!r}")


def check_counts(counts: object, kind: type | tuple[type, ...] = (), field: str = "counts") -> None:
    """Refuse anything but :class:`Counts` or :class:`CountsTable` (or only ``kind``, when given)."""
    allowed = kind or (Counts, CountsTable)
    if not isinstance(counts, allowed):
        names = " or ".join(k.__name__ for k in (allowed if isinstance(allowed, tuple) else (allowed,)))
        raise ValidationError(field, f"must be {names}, got {type(counts).__name__}")


def _amount(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise ValidationError(name, f"must be a number, got {type(value).__name__}")
    if not math.isfinite(value) or value < 0:
        raise ValidationError(name, f"must be finite and >= 0, got {value!r}")
    return float(value)
