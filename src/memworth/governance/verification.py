"""Resolving a quarantined memory from its probe outcomes.

:class:`ControlTest` (the test govern runs) compares the recalls where a random draw served
the memory (probes) with those where it held the memory out (controls); :class:`ProbeTest`,
Wald's SPRT on the probes alone against the rates the flag states, resolves the flags raised
before a store logged controls (schema 9), which have none.

The probe-only test, :class:`ProbeTest`:

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

__all__ = ["BETS", "ControlTest", "ProbeTest"]

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


BETS = (0.05, 0.1, 0.2, 0.3, 0.5, 0.7)
"""The betting fractions :class:`ControlTest` averages its e-processes over (a mixture of
e-processes with fixed weights is an e-process): small ones win on weak, long evidence,
large ones on strong, short evidence."""


@dataclass(frozen=True)
class ControlTest:
    """An anytime-valid randomised test of a quarantined memory: its probes against its controls.

    In each recall where the quarantined memory would be served if allowed (it would rank
    among the first k beside the other candidates: :func:`memworth.store.recall.in_contention`),
    a random draw with chance ``q`` (the probe share) lets it compete (a *probe*) or holds it
    out (a *control*). Let ``f1`` and ``f0`` be the failure chances of that recall as a probe
    and as a control. Given that a recall failed, the chance it was a probe is
    ``q f1 / (q f1 + (1 - q) f0)``, and given that it succeeded, ``q s1 / (q s1 + (1 - q) s0)``
    (``s = 1 - f``). So each outcome's arm is a coin whose bias tells how the memory acts,
    whatever the task, the context, or the other memories recalled beside it (they are the
    same, on average, in both arms: that is what the draw buys).

    Two e-processes bet on those coins, each a product over the outcomes in log order, each
    averaged over the betting fractions :data:`BETS` (``b``), an outcome of confidence ``w``
    scaling its bet:

    * *harm* (``suppress``), against "the memory does no harm: ``f1 <= f0`` in every
      contested recall": a failure multiplies it by ``1 + b w (A - q) / q`` and a success by
      ``1 - b w (A - q) / (1 - q)`` (``A`` 1 for a probe, 0 for a control): failures that fall
      on probes and successes on controls, more often than the draw explains, raise it;
    * *no harm beyond the margin* (``release``), against "the memory raises the failure
      chance by at least ``margin``: ``f1 >= f0 + margin`` in every contested recall": then a
      failure is a probe with chance at least ``qf = q / (q + (1 - q) (1 - margin))`` and a
      success with chance at most ``qs = q (1 - margin) / (q (1 - margin) + 1 - q)`` (the
      bounds at the worst ``f0``), so a failure multiplies it by ``1 - b w (A - qf) / (1 - qf)``
      and a success by ``1 + b w (A - qs) / qs``: failures on controls and successes on probes
      raise it, even when neither arm ever fails.

    Guarantee: under its hypothesis each product is a nonnegative supermartingale (given the
    past and the outcome, the arm's expected bet is at most 0), so by Ville's inequality the
    chance that it ever reaches ``1 / alpha`` is at most ``alpha``, however long the memory
    is watched and however often govern looks (the draw's fresh randomness is all it
    assumes: contexts, rivals and rates may change from recall to recall). So a memory that
    raises the failure chance by ``margin`` or more in every contested recall is released
    with chance at most ``alpha``, and one that does no harm is suppressed with chance at
    most ``beta``. Between the two (``f0 < f1 <
    f0 + margin``) either may happen; the answer is ``wait`` until one bar is reached.

    What the guarantee needs of the outcomes: that whether a draw's outcome is recorded at all,
    and the confidence it is recorded with, do not depend on the arm beyond the outcome itself.
    A caller that records only the recalls that served something, or reports a failure with
    less confidence when the memory was held out, breaks it (both in a 2,000-run check of
    the harm e-process: confidence 0.1 on control failures only, the memory doing nothing,
    suppressed 99% of runs). Nothing the store itself does depends on the arm that way:
    a source's confidence is fixed or learned from verified outcomes.

    Parameters
    ----------
    alpha
        Chance of releasing a memory that raises the failure chance by ``margin`` or more.
    beta
        Chance of suppressing a memory that does no harm.
    margin
        How much higher than the controls' a released memory's failure chance is shown to
        stay below (a difference of chances), in (0, 1).

    Examples
    --------
    >>> import numpy as np
    >>> test = ControlTest()
    >>> probe = np.array([True, False] * 20)  # half the contested recalls probes (share 0.5)
    >>> share = np.full(40, 0.5)
    >>> test.decide(probe, share, ~probe, np.ones(40)).action  # the probes fail, the controls succeed
    'suppress'
    >>> test.decide(probe, share, probe, np.ones(40)).action  # the probes succeed, the controls fail
    'release'
    >>> test.decide(probe[:4], share[:4], np.ones(4, dtype=bool), np.ones(4)).action
    'wait'
    """

    alpha: float = 0.05
    beta: float = 0.05
    margin: float = 0.2

    def _check(self) -> None:
        for name in ("alpha", "beta"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < float(v) < 0.5:
                raise ValidationError(name, f"must be a number in (0, 0.5), got {v!r}")
        m = self.margin
        if isinstance(m, bool) or not isinstance(m, (int, float)) or not 0 < float(m) < 1:
            raise ValidationError("margin", f"must be a number in (0, 1), got {m!r}")

    def statistics(
        self, probe: np.ndarray, share: np.ndarray, success: np.ndarray, weight: np.ndarray
    ) -> tuple[float, float]:
        """The log e-values of *harm* and of *no harm beyond the margin* over the outcomes."""
        a = np.asarray(probe, dtype=bool).astype(float)
        q = np.asarray(share, dtype=float)
        y = np.asarray(success, dtype=bool)
        w = np.asarray(weight, dtype=float)
        if not (a.shape == q.shape == y.shape == w.shape) or a.ndim != 1:
            raise ValidationError("weight", "probe, share, success and weight must be one per outcome")
        if w.size and (not np.isfinite(w).all() or (w < 0).any() or (w > 1).any()):
            raise ValidationError("weight", "must be finite and within [0, 1]")
        if q.size and (not np.isfinite(q).all() or (q <= 0).any() or (q >= 1).any()):
            raise ValidationError("share", "must be a chance within (0, 1)")
        keep = 1 - float(self.margin)
        qf = q / (q + (1 - q) * keep)  # a failure's least chance to be a probe under harm by the margin
        qs = q * keep / (q * keep + 1 - q)  # a success's greatest chance to be a probe under it
        harm = np.where(y, -(a - q) / (1 - q), (a - q) / q)
        fine = np.where(y, (a - qs) / qs, -(a - qf) / (1 - qf))
        return _mixture(harm * w), _mixture(fine * w)

    def decide(self, probe: np.ndarray, share: np.ndarray, success: np.ndarray, weight: np.ndarray) -> Decision:
        """``release``, ``suppress`` or ``wait`` from the outcomes of the probe draws (each a
        probe or a control, with the draw's chance ``share``, its outcome and confidence),
        with the reason and the numbers behind it."""
        self._check()
        harm, fine = self.statistics(probe, share, success, weight)
        arm = np.asarray(probe, dtype=bool)
        ok = np.asarray(success, dtype=bool)
        n1, n0 = int(arm.sum()), int((~arm).sum())
        s1, s0 = int((ok & arm).sum()), int((ok & ~arm).sum())
        suppress_at, release_at = math.log(1 / self.beta), math.log(1 / self.alpha)
        numbers: dict[str, float] = {"probes": n1, "probe_successes": s1, "controls": n0, "control_successes": s0}
        numbers |= {"log_e_harm": harm, "log_e_no_harm": fine, "suppress_at": suppress_at, "release_at": release_at}
        numbers |= {"margin": float(self.margin)}
        seen = f"probes {s1}/{n1} succeeded, controls {s0}/{n0}"
        if harm >= suppress_at:
            return Decision(
                "suppress",
                f"probes against controls say it does harm: {seen}; log e-value {harm:.2f} >= {suppress_at:.2f}",
                numbers,
            )
        if fine >= release_at:
            return Decision(
                "release",
                f"probes against controls say it does no harm (failure chance not {self.margin:g} higher): {seen}; "
                f"log e-value {fine:.2f} >= {release_at:.2f}",
                numbers,
            )
        return Decision("wait", f"{seen}; log e-values {harm:.2f} (harm), {fine:.2f} (no harm)", numbers)


def _mixture(bets: np.ndarray) -> float:
    """The log of the average over :data:`BETS` of the products of ``1 + b x`` over the
    ``bets`` ``x`` (each at least -1, so every factor is positive: every ``b`` is below 1)."""
    if bets.size == 0:
        return 0.0
    logs = np.array([np.sum(np.log1p(b * bets)) for b in BETS])
    top = float(logs.max())
    return top + math.log(float(np.mean(np.exp(logs - top))))
