"""The holdout guard: is governance making the agent fail more than no governance would?

A store opened with a holdout share ``pi`` recalls that share of its episodes without
governance (:mod:`memworth.signals.holdout`), picked by a hash of the episode id, so both arms
see the same tasks at the same time. The guard watches the difference of their success
rates as the outcomes arrive and fires when the governed arm is worse *with confidence*,
however often it is looked at.

The test. Each episode ``t`` gives ``X_t = Y_t / (1 - pi)`` when governed and
``X_t = -Y_t / pi`` when held out (``Y_t``: 1 for a success): an unbiased estimate of
(governed success rate - holdout success rate), whatever the tasks. Under the null
"governance is at least as good" (at every episode, given the past), the wealth of a
bettor who stakes a fraction ``lam`` against it, ``W_t = prod(1 - lam * X_s)``, is a
nonnegative supermartingale for any ``lam`` in ``[0, 1 - pi]``; so is the average of
several (a grid of stakes, so that both a large and a small gap are found quickly). By
Ville's inequality the chance that the average *ever* reaches ``1 / alpha`` under the
null is at most ``alpha``: the guard is anytime-valid (Waudby-Smith and Ramdas 2024,
"Estimating means of bounded random variables by betting", JRSS-B).

Where it was last ahead. The cumulative sum of ``X`` is the lift summed over episodes;
the episode where it peaked is the last point where governance was furthest ahead, and
the actions governance took since then are the ones the guard proposes to roll back.

Examples
--------
Governed episodes succeed half the time, held-out ones (one in five) always:

>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> holdout = rng.random(3000) < 0.2
>>> success = np.where(holdout, True, rng.random(3000) < 0.5)
>>> reading = HoldoutGuard().check(holdout, success, share=0.2)
>>> reading.fired, reading.lift < 0
(True, True)
>>> HoldoutGuard().check(holdout, np.where(holdout, False, True), share=0.2).fired
False
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from memworth.errors import ValidationError

__all__ = ["GuardReading", "HoldoutGuard"]

STAKES = (0.005, 0.01, 0.02, 0.05, 0.1, 0.2)
"""The grid of stakes (fractions of ``1 - pi``) the guard's wealth averages over."""


@dataclass(frozen=True)
class GuardReading:
    """Where the holdout guard stands after a namespace's episodes.

    ``fired``: governed success is below holdout success with confidence ``1 - alpha``;
    ``evalue``: the bettor's wealth now (fires at ``1 / alpha``); ``lift``: governed minus
    holdout success rate (inverse-propensity estimate); ``episodes`` and ``held_out``:
    how many episodes were read and held out; ``ahead``: the episode (counted from 1 in
    the log) after which governance last led by the most (``0``: before the first), and
    the reading's reason in words.
    """

    fired: bool
    evalue: float
    lift: float
    episodes: int
    held_out: int
    ahead: int
    alpha: float
    reason: str

    def row(self) -> dict[str, object]:
        """The JSON shape every face shows."""
        return {
            "fired": self.fired,
            "evalue": self.evalue,
            "lift": self.lift,
            "episodes": self.episodes,
            "held_out": self.held_out,
            "ahead_since_episode": self.ahead,
            "alpha": self.alpha,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class HoldoutGuard:
    """The anytime-valid test that governed success has fallen below holdout success (settings only).

    Parameters
    ----------
    alpha
        The chance of ever firing while governance is at least as good as no governance.
    """

    alpha: float = 0.05

    def _alpha(self) -> float:
        a = self.alpha
        if isinstance(a, bool) or not isinstance(a, (int, float, np.integer, np.floating)):
            raise ValidationError("guard_alpha", f"must be a number, got {type(a).__name__}")
        if not (math.isfinite(float(a)) and 0.0 < float(a) < 1.0):
            raise ValidationError("guard_alpha", f"must be in (0, 1), got {a!r}")
        return float(a)

    def check(self, holdout: np.ndarray, success: np.ndarray, *, share: float) -> GuardReading:
        """Read the guard over episodes in log order: ``holdout[t]`` whether episode ``t`` was
        held out, ``success[t]`` its outcome; ``share`` the holdout share they were drawn with."""
        alpha = self._alpha()
        h = np.asarray(holdout, dtype=bool)
        y = np.asarray(success, dtype=bool)
        if h.shape != y.shape or h.ndim != 1:
            raise ValidationError("holdout", f"must be one flag per outcome ({y.size}), got shape {h.shape}")
        if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 < share < 1:
            raise ValidationError("share", f"must be a holdout share in (0, 1), got {share!r}")
        pi = float(share)
        yf = y.astype(float)
        x = np.where(h, -yf / pi, yf / (1.0 - pi))
        stakes = np.asarray(STAKES) * (1.0 - pi)
        log_wealth = np.log1p(-np.outer(x, stakes)).sum(axis=0) if x.size else np.zeros(stakes.size)
        top = float(log_wealth.max())
        evalue = math.exp(top) * float(np.exp(log_wealth - top).mean()) if math.isfinite(top) else math.inf
        total = np.concatenate([[0.0], np.cumsum(x)])
        ahead = int(np.argmax(total))  # the last point where the summed lift peaked
        lift = float(x.mean()) if x.size else 0.0
        fired = evalue >= 1.0 / alpha
        if fired:
            reason = (
                f"governed success is below holdout success: e-value {evalue:.3g} >= {1 / alpha:g} "
                f"(lift {lift:+.3f} over {y.size} episodes, {int(h.sum())} held out); governance last led "
                f"after episode {ahead}"
            )
        else:
            reason = f"no evidence that governance hurts: e-value {evalue:.3g} < {1 / alpha:g} (lift {lift:+.3f})"
        return GuardReading(fired, evalue, lift, int(y.size), int(h.sum()), ahead, alpha, reason)
