"""Resolving a quarantined memory from its probe outcomes: a sequential probability ratio test.

A memory flagged ``re-verify`` is quarantined: recall serves it only as a probe, on a
small share of the recalls where it would rank (:meth:`memworth.MemoryStore.choose`).
Each probe outcome is evidence between two hypotheses the flag itself states:

* ``recovered``: its success rate is back at the rate it had before the flag
  (``before``, the worth governance saw when it flagged the memory);
* ``broken``: its success rate is the lower one that raised the flag (``after``: the
  change detector's alternative, or the recent worth the window test saw).

Wald's sequential probability ratio test adds, per outcome of weight ``w`` (its source's
confidence), ``w * log(p1 / p0)`` for a success and ``w * log((1 - p1) / (1 - p0))`` for
a failure, and stops at ``log((1 - beta) / alpha)`` (release: the rate came back) or
``log(beta / (1 - alpha))`` (suppress: the failures continue). ``alpha`` bounds the chance
of releasing a memory that is still broken and ``beta`` the chance of suppressing one that
recovered, whenever the test is looked at (Wald's bounds hold for the stopped test). Until
either bound is crossed the answer is ``wait``: the memory stays quarantined.

Examples
--------
>>> import numpy as np
>>> test = ProbeTest()
>>> test.decide(np.array([True, True, True, True]), np.ones(4), before=0.8, after=0.2).action
'release'
>>> test.decide(np.array([False, False, False]), np.ones(3), before=0.8, after=0.2).action
'suppress'
>>> test.decide(np.array([True, False]), np.ones(2), before=0.8, after=0.2).action
'wait'
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from memworth.errors import ValidationError
from memworth.policy import Decision

__all__ = ["ProbeTest"]

_EDGE = 1e-3  # rates are kept inside [EDGE, 1 - EDGE]: a hypothesis of 0 or 1 is refuted by one outcome


@dataclass(frozen=True)
class ProbeTest:
    """Wald's SPRT between the rate a memory had before its flag and the rate that raised it.

    Parameters
    ----------
    alpha
        Chance of releasing a memory whose success rate is still the broken one.
    beta
        Chance of suppressing a memory whose success rate came back.
    """

    alpha: float = 0.05
    beta: float = 0.05

    def _check(self) -> None:
        for name in ("alpha", "beta"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < float(v) < 0.5:
                raise ValidationError(name, f"must be a number in (0, 0.5), got {v!r}")

    def statistic(self, success: np.ndarray, weight: np.ndarray, before: float, after: float) -> float:
        """The log-likelihood ratio of ``recovered`` against ``broken`` over the outcomes."""
        y = np.asarray(success, dtype=bool)
        w = np.asarray(weight, dtype=float)
        if y.shape != w.shape or (w.size and (not np.isfinite(w).all() or (w < 0).any())):
            raise ValidationError("weight", "must be finite, >= 0 and one per outcome")
        for name, v in (("before", before), ("after", after)):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not 0 <= v <= 1:
                raise ValidationError(name, f"must be a rate in [0, 1], got {v!r}")
        p1 = min(max(float(before), _EDGE), 1 - _EDGE)
        p0 = min(max(float(after), _EDGE), 1 - _EDGE)
        win, loss = math.log(p1 / p0), math.log((1 - p1) / (1 - p0))
        return float(np.sum(np.where(y, win, loss) * w))

    def decide(self, success: np.ndarray, weight: np.ndarray, *, before: float, after: float) -> Decision:
        """``release``, ``suppress`` or ``wait``, with the reason and the numbers behind it.

        When ``before <= after`` the flag states no fall to test, and the memory is released.
        """
        self._check()
        n = int(np.asarray(success).size)
        llr = self.statistic(success, weight, before, after)
        upper = math.log((1 - self.beta) / self.alpha)
        lower = math.log(self.beta / (1 - self.alpha))
        numbers = {"probe_outcomes": n, "probe_llr": llr, "release_at": upper, "suppress_at": lower}
        numbers |= {"rate_before": float(before), "rate_after": float(after)}
        if float(before) <= float(after):
            return Decision("release", f"the flag states no fall ({before:.3f} -> {after:.3f})", numbers)
        if llr >= upper:
            return Decision(
                "release",
                f"probe outcomes say the success rate came back: {n} probes, log-likelihood ratio "
                f"{llr:.2f} >= {upper:.2f} (rate {before:.3f} against {after:.3f})",
                numbers,
            )
        if llr <= lower:
            return Decision(
                "suppress",
                f"probe outcomes say the failures continue: {n} probes, log-likelihood ratio "
                f"{llr:.2f} <= {lower:.2f} (rate {after:.3f} against {before:.3f})",
                numbers,
            )
        return Decision("wait", f"{n} probes, log-likelihood ratio {llr:.2f} within ({lower:.2f}, {upper:.2f})", numbers)
