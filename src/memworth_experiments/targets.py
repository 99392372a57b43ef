"""Rows checked against a one-sided target ("at least 19 of 20", "at most 0.05").

The paper's rows (:class:`memworth_experiments.common.Row`) are checked as ours within a
tolerance of the paper's number; the experiments that go past the paper have targets
that are bounds, not numbers to match.
"""

from __future__ import annotations

from dataclasses import dataclass

from memworth_experiments.common import Row


@dataclass
class Bound(Row):
    """A row whose check is ``at_least <= ours <= at_most`` (either side may be open).

    Examples
    --------
    >>> Bound("stale flagged", "share", None, 0.95, 0.0, at_least=0.95).ok
    True
    >>> Bound("false alarms", "max/seed", None, 2.0, 0.0, at_most=1.0).ok
    False
    """

    at_least: float | None = None
    at_most: float | None = None

    @property
    def ok(self) -> bool | None:
        if self.at_least is None and self.at_most is None:
            return super().ok
        low = self.at_least is None or self.ours >= self.at_least - 1e-12
        high = self.at_most is None or self.ours <= self.at_most + 1e-12
        return low and high

    @property
    def target(self) -> str:
        """The bound in words, for notes and the README."""
        parts = []
        if self.at_least is not None:
            parts.append(f">= {self.at_least:g}")
        if self.at_most is not None:
            parts.append(f"<= {self.at_most:g}")
        return " and ".join(parts) or "-"
