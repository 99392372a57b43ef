"""Holdout: a share of episodes recalls without governance, and the lift it measures.

A store opened with ``holdout=0.1`` sends about 10% of its episodes down the ungoverned
path: candidates by similarity alone (no worth in the ranking, no exploration), with
suppressed and deprecated memories still eligible. The episode is marked, so the lift
(success rate of governed episodes minus that of holdout episodes) can be computed from
the log at any time, with the same tasks flowing to both arms at once: no twin store,
no time confound.

Assignment hashes the episode id with a seed (:func:`in_holdout`), so it is
deterministic and sticky: an agent that passes its own task id as the episode id puts a
retried task in the same arm, and anyone holding the log can recompute each assignment.

The interval on the lift is Newcombe's hybrid score interval (Newcombe 1998, method 10):
a Wilson score interval for each rate, combined. Unlike the Wald interval (the normal
approximation ``d +- z se`` that ``memworth demo`` prints, :func:`lift` with
``method="wald"``), it keeps close to its nominal coverage when one arm is small or its
rate is near 0 or 1, which is where a 10% holdout lives.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from statistics import NormalDist

from memworth.errors import ValidationError

__all__ = ["Lift", "in_holdout", "lift", "wilson_interval"]

METHODS = ("newcombe", "wald")


def check_share(share: object, field: str = "holdout") -> float:
    """A holdout share in [0, 1)."""
    if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 <= share < 1:
        raise ValidationError(field, f"must be a number in [0, 1), got {share!r}")
    return float(share)


def in_holdout(episode_id: str, share: float, seed: int = 0) -> bool:
    """Whether episode ``episode_id`` belongs to the holdout: a seeded hash of its id below ``share``.

    Examples
    --------
    >>> in_holdout("task-17", 0.1, seed=0) == in_holdout("task-17", 0.1, seed=0)   # deterministic
    True
    >>> in_holdout("task-17", 0.0), in_holdout("task-17", 0.999999)
    (False, True)
    >>> sum(in_holdout(f"task-{i}", 0.1) for i in range(10_000))   # about 10%
    975
    """
    share = check_share(share)
    if not isinstance(episode_id, str):
        raise ValidationError("episode_id", f"must be a string, got {type(episode_id).__name__}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValidationError("seed", f"must be an integer, got {seed!r}")
    digest = hashlib.blake2b(episode_id.encode(), digest_size=8, key=str(seed).encode()).digest()
    return int.from_bytes(digest, "big") / 2.0**64 < share


def _z(level: float) -> float:
    if isinstance(level, bool) or not isinstance(level, (int, float)) or not 0 < level < 1:
        raise ValidationError("level", f"must be a number in (0, 1), got {level!r}")
    return NormalDist().inv_cdf(0.5 + level / 2)


def wilson_interval(successes: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a success rate; (0, 1) with no trials.

    Examples
    --------
    >>> [round(x, 3) for x in wilson_interval(8, 10)]
    [0.49, 0.943]
    """
    z = _z(level)
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    centre = p + z * z / (2 * n)
    spread = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, (centre - spread) / (1 + z * z / n)), min(1.0, (centre + spread) / (1 + z * z / n))


@dataclass(frozen=True)
class Lift:
    """Governed minus holdout success rate, with its interval."""

    governed_successes: int
    governed_n: int
    holdout_successes: int
    holdout_n: int
    lift: float
    lower: float
    upper: float
    level: float
    method: str

    @property
    def governed_rate(self) -> float:
        return self.governed_successes / self.governed_n if self.governed_n else math.nan

    @property
    def holdout_rate(self) -> float:
        return self.holdout_successes / self.holdout_n if self.holdout_n else math.nan

    def describe(self) -> str:
        return (
            f"governed {self.governed_rate:.3f} ({self.governed_successes}/{self.governed_n}), holdout "
            f"{self.holdout_rate:.3f} ({self.holdout_successes}/{self.holdout_n}): lift {self.lift:+.3f} "
            f"({self.level:.0%} CI {self.lower:+.3f} to {self.upper:+.3f}, {self.method})"
        )


def _count(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValidationError(name, f"must be a non-negative integer, got {value!r}")
    return value


def lift(governed: tuple[int, int], holdout: tuple[int, int], *, level: float = 0.95, method: str = "newcombe") -> Lift:
    """Lift of the governed arm over the holdout, each given as ``(successes, episodes)``.

    Examples
    --------
    >>> print(lift((720, 900), (60, 100)).describe())
    governed 0.800 (720/900), holdout 0.600 (60/100): lift +0.200 (95% CI +0.105 to +0.301, newcombe)
    >>> print(lift((720, 900), (60, 100), method="wald").describe())
    governed 0.800 (720/900), holdout 0.600 (60/100): lift +0.200 (95% CI +0.100 to +0.300, wald)
    """
    if method not in METHODS:
        raise ValidationError("method", f"must be one of {', '.join(METHODS)}, got {method!r}")
    z = _z(level)
    s1, n1 = (_count(v, f"governed[{i}]") for i, v in enumerate(governed))
    s2, n2 = (_count(v, f"holdout[{i}]") for i, v in enumerate(holdout))
    if s1 > n1 or s2 > n2:
        raise ValidationError("successes", "cannot exceed the number of episodes")
    if n1 == 0 or n2 == 0:
        return Lift(s1, n1, s2, n2, math.nan, math.nan, math.nan, level, method)
    p1, p2 = s1 / n1, s2 / n2
    d = p1 - p2
    if method == "wald":
        se = math.sqrt(p1 * (1 - p1) / n1 + p2 * (1 - p2) / n2)
        return Lift(s1, n1, s2, n2, d, d - z * se, d + z * se, level, method)
    l1, u1 = wilson_interval(s1, n1, level)
    l2, u2 = wilson_interval(s2, n2, level)
    lower = d - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2)
    upper = d + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)
    return Lift(s1, n1, s2, n2, d, lower, upper, level, method)
