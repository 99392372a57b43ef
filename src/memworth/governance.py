"""Governance: from a memory's evidence to a proposed change of its status or standing.

Pure: the store gathers counts and history, this module decides, the store applies and
audits. Rules, first match wins, for an ``active`` memory:

1. ``re-verify`` (standing): it used to work and has stopped (the paper's staleness
   signal, section 6), by either of two tests:

   * window (``window_test=True``; off by default, not error-controlled): its last
     ``staleness_window`` retrievals succeeded at a rate more than ``staleness_drop``
     below its lifetime worth and below ``theta_low``;
   * change detection (``change_detection``, given the memory's outcome stream): a
     :class:`memworth.change.BernoulliCusum` on its retrievals, against the success
     rate of all episodes, is at or above its threshold now and e-BH across the
     namespace's memories rejects it (``change_alpha``): its success rate broke.
     The proposal carries the statistic, the threshold and the estimated change point.

2. ``deprecate`` (status): with ``deprecation="sequential"`` (default), the namespace's
   test of low worth rejects "its rate is at least ``deprecate_below``" (e-BH at
   ``deprecation_alpha`` over every memory's beta-binomial mixture e-values,
   :meth:`GovernancePolicy.worth_flags`: no V_min, the false discovery rate controlled
   however often one looks); with ``"fixed"``, the paper's rule: evidence >=
   ``min_evidence`` retrievals and worth below ``deprecate_below`` (note 004's 0.3).
3. ``suppress`` (status): likewise at ``theta_low``. Neither is proposed while a memory
   in alarm came with at least half of the memory's recent failures (explaining away:
   those failures are that memory's).
4. ``promote`` / ``demote`` (standing): note 003's decision rule, unless the memory is
   flagged for re-verification (a flag only a person clears).

Every proposal carries the numbers behind it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from memworth.change import BernoulliCusum, ContextCheck, OutcomeStream
from memworth.counts import Counts, check_counts, check_unit
from memworth.errors import ValidationError
from memworth.estimators import RawWorth
from memworth.guard import HoldoutGuard
from memworth.multiplicity import ebh, ebh_level
from memworth.policy import DecisionRule, DeprecationRule, Taxonomy, ValueClass
from memworth.sequences import SequentialDeprecation
from memworth.verification import ProbeTest

__all__ = ["GovernancePolicy", "Proposal", "WorthFlag"]

ACTIONS = {
    "re-verify": ("standing", "re-verify"),
    "release": ("standing", "normal"),
    "deprecate": ("status", "deprecated"),
    "suppress": ("status", "suppressed"),
    "promote": ("standing", "promoted"),
    "demote": ("standing", "demoted"),
}


@dataclass(frozen=True)
class Proposal:
    """A change governance proposes for one memory."""

    memory_id: str
    action: str
    field: str
    old: str
    new: str
    reason: str
    numbers: dict[str, Any] = dataclasses.field(default_factory=dict)

    def _repr_html_(self) -> str:
        from memworth.reprs import table

        return table(
            ["memory", "action", "change", "reason"],
            [[self.memory_id, self.action, f"{self.field}: {self.old} -> {self.new}", self.reason]],
        )


@dataclass(frozen=True)
class WorthFlag:
    """Where one memory stands in its namespace's test of low worth (``deprecation="sequential"``).

    ``action`` is ``"deprecate"``, ``"suppress"`` or ``None``; ``suppress_evalue`` and
    ``deprecate_evalue`` are the e-values against "its rate is at least ``theta_low``"
    (resp. ``deprecate_below``); ``level`` the e-value e-BH asked of each, and ``tests``
    how many hypotheses it weighed together; ``lower`` and ``upper`` its
    ``1 - deprecation_alpha`` confidence sequence (shown beside the decision).
    """

    action: str | None
    suppress_evalue: float
    deprecate_evalue: float
    level: float
    tests: int
    lower: float = 0.0
    upper: float = 1.0


@dataclass(frozen=True)
class GovernancePolicy:
    """Settings of the governance rules (defaults: the paper's and the notes' numbers).

    The change-detection test of re-verify (``change_detection``) runs
    :class:`memworth.change.BernoulliCusum` with ``change_odds_ratio`` (the alternative:
    odds of success that many times lower), ``change_threshold`` (about
    ``exp(threshold)`` retrievals between false alarms) and ``change_min_history``
    (retrievals before a memory is watched), against the success rate of all episodes
    with half-life ``change_reference_half_life`` episodes. When the stream has context
    labels, an alarm whose failures the memory's own record in those contexts explains is
    held (:class:`memworth.change.ContextCheck` with ``change_context_strength``
    pseudo-observations per context), and the window test compares the window's worth
    with what that record predicts for the window's contexts instead of with the
    lifetime worth alone. The window test is also held when at least half of the
    window's failures came with a memory whose change alarm stands
    (``OutcomeStream.window_explained_by``). ``deprecation`` is
    ``"fixed"`` (V_min and worth thresholds) or ``"sequential"`` (a
    ``1 - deprecation_alpha`` confidence sequence over ``deprecation_evidence``:
    ``"weighted"`` hits, valid for any credit, or ``"retrievals"``, one observation per
    retrieval, valid when credit is uniform).

    A person's decision holds governance back: after a restore, an approval, a verdict
    on a quarantined memory or a status or standing set by hand, nothing is proposed for
    that memory until it has ``pin_evidence`` more retrievals (an explicit pin holds until
    unpinned). A quarantined memory (standing ``re-verify``) is released or suppressed by
    the probe test (:class:`memworth.verification.ProbeTest` with ``probe_alpha``, the
    chance of releasing a memory still broken, and ``probe_beta``, of suppressing one that
    recovered).

    Every setting is checked when the policy is made (``dataclasses.replace`` included):
    probabilities and worth thresholds in [0, 1] with ``theta_low <= theta_high`` and
    ``demote_below <= promote_above``, ``min_evidence`` a finite number >= 0,
    ``staleness_window`` an integer >= 1, ``max_changes_per_day`` an integer >= 0,
    ``change_odds_ratio`` and ``deprecation_alpha`` in (0, 1), ``change_threshold`` and
    ``change_reference_half_life`` and ``change_context_strength`` finite and > 0,
    ``change_min_history`` >= 0, ``pin_evidence`` >= 0, ``probe_alpha`` and ``probe_beta``
    in (0, 0.5), ``change_detection`` a bool. A bool is not a number and a string is not either.

    Raises
    ------
    ValidationError
        Naming the setting and the reason, for the first setting that is wrong.

    Examples
    --------
    >>> policy = GovernancePolicy()
    >>> p = policy.propose("old-fact", Counts(success=1.0, failure=29.0, n=30), "active", "normal")
    >>> p.action, p.new
    ('deprecate', 'deprecated')
    >>> print(p.reason)  # doctest: +NORMALIZE_WHITESPACE
    worth 0.033 over 30 retrievals: e-value 111 against a rate >= 0.3 clears the e-BH bar 20
    (false discovery rate 0.05 over 2 tests)
    >>> policy.propose("new-fact", Counts(success=1.0, failure=0.0, n=2), "active", "normal") is None
    True

    A success rate that broke, seen in the outcome stream (40 successes, then 10 failures):

    >>> import numpy as np
    >>> from memworth.change import OutcomeStream
    >>> y = np.array([True] * 40 + [False] * 10)
    >>> stream = OutcomeStream(y, np.ones(50), None, np.arange(1, 51))
    >>> p = policy.propose("old-fact", Counts(success=10.0, failure=2.5, n=50), "active", "normal", stream=stream)
    >>> p.action, p.numbers["change_point"], p.numbers["change_threshold"]
    ('re-verify', 41, 12.0)

    The paper's fixed V_min instead of the namespace's error control (not recommended: it
    flags useful memories by chance once a store is large):

    >>> fixed = GovernancePolicy(deprecation="fixed")
    >>> print(fixed.propose("m", Counts(success=1.0, failure=4.0, n=20), "active", "normal").reason)
    worth 0.200 < 0.3 with evidence 20 >= 10

    Settings that cannot work are refused when the policy is made:

    >>> GovernancePolicy(theta_low=0.7)
    Traceback (most recent call last):
    ...
    memworth.errors.ValidationError: theta_low: must be <= theta_high (0.6), got 0.7
    """

    theta_high: float = 0.60
    theta_low: float = 0.40
    min_evidence: float = 10
    deprecate_below: float = 0.30
    promote_above: float = 0.70
    demote_below: float = 0.30
    min_confidence: float = 0.50
    staleness_window: int = 20
    staleness_drop: float = 0.25
    max_changes_per_day: int = 3
    hot_worth: float = 0.50
    change_detection: bool = True
    change_odds_ratio: float = 0.05
    change_threshold: float = 12.0
    change_min_history: float = 10.0
    change_reference_half_life: float = 50.0
    change_context_strength: float = 0.25
    deprecation: str = "sequential"
    deprecation_alpha: float = 0.05
    deprecation_evidence: str = "retrievals"
    pin_evidence: float = 50.0
    probe_alpha: float = 0.05
    probe_beta: float = 0.05
    max_quarantined: float = 0.1
    change_alpha: float = 0.05
    window_test: bool = False
    guard_alpha: float = 0.05

    def __post_init__(self) -> None:
        _check_policy(self)

    def settings(self) -> dict[str, Any]:
        """The settings as a plain dict, for the audit log."""
        return asdict(self)

    @classmethod
    def from_settings(cls, settings: object) -> GovernancePolicy:
        """The policy :meth:`settings` describes (as a store keeps it); an unknown setting is
        refused, naming it.

        Examples
        --------
        >>> GovernancePolicy.from_settings({"theta_low": 0.2}).theta_low
        0.2
        >>> try:
        ...     GovernancePolicy.from_settings({"theta_lo": 0.2})
        ... except ValidationError as exc:
        ...     print(exc.field)
        theta_lo
        """
        if not isinstance(settings, dict):
            raise ValidationError("policy", f"must be a dict of settings, got {type(settings).__name__}")
        known = sorted(f.name for f in dataclasses.fields(cls))
        for name in settings:
            if name not in known:
                raise ValidationError(str(name), f"not a governance setting (known: {', '.join(known)})")
        return cls(**settings)

    def quarantine_budget(self, active: int) -> int:
        """How many of ``active`` memories governance may keep quarantined at once by itself:
        ``max_quarantined`` of them, at least one. Quarantine takes a memory's answers out of
        recall, so the memories retrieved for the same tasks start failing and can be flagged
        in turn; the budget keeps such a cascade from emptying a store (measured on the
        ``upgrade`` agent world). A person's approval is not held by it."""
        return max(1, math.floor(self.max_quarantined * active))

    def guard(self) -> HoldoutGuard:
        """The holdout guard (:mod:`memworth.guard`) at ``guard_alpha``."""
        return HoldoutGuard(self.guard_alpha)

    def probe_test(self) -> ProbeTest:
        """The sequential test that resolves a quarantined memory from its probe outcomes."""
        return ProbeTest(self.probe_alpha, self.probe_beta)

    def detector(self) -> BernoulliCusum:
        """The change detector behind the change-detection test of re-verify."""
        return BernoulliCusum(self.change_odds_ratio, self.change_threshold, self.change_min_history)

    def change_evalues(self, statistic: object, observations: object) -> np.ndarray:
        """Each memory's e-value against "its success rate has not broken", from its CUSUM.

        ``exp(statistic) / watched``, ``watched`` being its observations since it was first
        watched (``observations - change_min_history``, at least 1; 0 for a memory not yet
        watched). Why it is an e-value: the CUSUM is the largest, over the possible change
        points, of the likelihood ratio of the observations since then, so ``exp(CUSUM)``
        is at most their sum (the Shiryaev-Roberts statistic), whose expectation without a
        change is the number of change points summed over. Exact with the pre-change rate
        known; with the rate estimated from the memory's own history (as here) approximate.
        """
        stat = np.asarray(statistic, dtype=float)
        watched = np.asarray(observations, dtype=float) - float(self.change_min_history)
        with np.errstate(over="ignore"):
            e = np.exp(stat) / np.maximum(watched, 1.0)
        return np.asarray(np.where(watched > 0, e, 0.0))

    def change_flags(self, statistic: object, observations: object) -> tuple[np.ndarray, float]:
        """Which memories' change alarms stand when they are tested together, and the e-value
        that asked of each: a memory alarms when its CUSUM is at ``change_threshold`` (the
        detector's own bar, about ``exp(threshold)`` observations between false alarms) *and*
        e-BH at ``change_alpha`` over the watched memories rejects it
        (:mod:`memworth.multiplicity`), so the expected share of false alarms among the alarms
        standing at any one reading is at most ``change_alpha``. In a small namespace the
        threshold decides; in a large one, e-BH raises the bar.
        """
        stat = np.asarray(statistic, dtype=float)
        # A memory below the detector's own threshold (its per-memory false-alarm rate) takes part
        # with an e-value of 0: lowering an e-value keeps it one, so the FDR guarantee holds for
        # the alarms that clear both bars.
        e = np.where(stat >= float(self.change_threshold), self.change_evalues(stat, observations), 0.0)
        watched = np.asarray(observations, dtype=float) > float(self.change_min_history)
        out = np.zeros(e.size, dtype=bool)
        if not watched.any():
            return out, math.inf
        out[watched] = ebh(e[watched], self.change_alpha)
        return out, ebh_level(e[watched], self.change_alpha)

    def change_bar(self, level: float, observations: float) -> float:
        """The CUSUM statistic a memory with ``observations`` needs to alarm when e-BH asks an
        e-value of ``level``: that e-value's statistic, and at least ``change_threshold``."""
        needed = math.log(level) + math.log(max(float(observations) - float(self.change_min_history), 1.0))
        return max(float(self.change_threshold), needed)

    def worth_flags(self, counts: list[Counts]) -> list[WorthFlag]:
        """The namespace's test of low worth: for each memory, whether e-BH at
        ``deprecation_alpha`` over every memory's two hypotheses ("its rate is at least
        ``theta_low``", "... at least ``deprecate_below``") rejects one, and which.

        The e-values are Robbins' beta-binomial mixture martingales
        (:class:`memworth.sequences.BetaBinomialCS`) at each threshold, which stay e-values
        however often one looks: the expected share of useful memories among those
        suppressed or deprecated at any reading is at most ``deprecation_alpha``. One
        memory alone is suppressed when its confidence sequence at ``deprecation_alpha / 2``
        lies below ``theta_low``.

        Examples
        --------
        >>> policy = GovernancePolicy()
        >>> [f.action for f in policy.worth_flags([Counts(1.0, 29.0, 30), Counts(15.0, 15.0, 30)])]
        ['deprecate', None]
        """
        from memworth.counts import CountsTable

        if not counts:
            return []
        for c in counts:
            check_counts(c, Counts)
        table = CountsTable(
            np.array([c.success for c in counts], dtype=float),
            np.array([c.failure for c in counts], dtype=float),
            np.array([c.n for c in counts], dtype=float),
        )
        cs = self.sequential(self.theta_low).sequence()
        lower, upper = (np.atleast_1d(np.asarray(x, dtype=float)) for x in cs.interval(table))  # all at once
        s, f = cs._sf(table)
        v = s + f
        ratio = np.where(v > 0, s / np.where(v > 0, v, 1.0), 0.5)
        evalues = []
        for theta in (self.theta_low, self.deprecate_below):
            theta = min(max(float(theta), 1e-9), 1 - 1e-9)
            log_m = np.asarray(cs.log_martingale(table, theta), dtype=float)
            with np.errstate(over="ignore"):
                evalues.append(np.where((ratio < theta) & (v > 0), np.exp(log_m), 0.0))
        tested = np.flatnonzero(v > 0)
        pooled = np.concatenate([evalues[0][tested], evalues[1][tested]])
        rejected = np.zeros((2, len(counts)), dtype=bool)
        level = math.inf
        if tested.size:
            mask = ebh(pooled, self.deprecation_alpha)
            rejected[0, tested], rejected[1, tested] = mask[: tested.size], mask[tested.size :]
            level = ebh_level(pooled, self.deprecation_alpha)
        return [
            WorthFlag(
                "deprecate" if rejected[1, i] else "suppress" if rejected[0, i] else None,
                float(evalues[0][i]),
                float(evalues[1][i]),
                level,
                int(pooled.size),
                float(lower[i]),
                float(upper[i]),
            )
            for i in range(len(counts))
        ]

    def _context_holds(self, stream: OutcomeStream, since: int | None) -> bool:
        """Whether the memory's per-context record before ``since`` explains its excursion
        since then (no labels: no)."""
        if stream.context is None or since is None:
            return False
        check = ContextCheck(self.change_context_strength)
        return check.holds(
            self.detector(), stream.episode, stream.context, stream.success, since=since, weight=stream.weight
        )

    def _context_expects(self, stream: OutcomeStream | None, recent: Counts) -> float | None:
        """The worth the memory's per-context record predicts for the retrievals of the
        window (``None`` without labels or without a record before the window)."""
        if stream is None or stream.context is None or len(stream) <= recent.n:
            return None
        start = int(stream.episode[-int(recent.n)])
        check = ContextCheck(self.change_context_strength)
        return check.expected(stream.episode, stream.context, stream.success, since=start, weight=stream.weight)

    def sequential(self, threshold: float) -> SequentialDeprecation:
        """The confidence-sequence rule at ``threshold`` (for ``deprecation="sequential"``)."""
        return SequentialDeprecation(threshold, self.deprecation_alpha, evidence=self.deprecation_evidence)

    def taxonomy(self) -> Taxonomy:
        """The value classes (the paper's 3.4) at this policy's thresholds: the one taxonomy every face shows."""
        return Taxonomy(self.theta_high, self.theta_low, self.min_evidence, evidence="retrievals")

    def deprecation_rule(self) -> DeprecationRule:
        """The fixed deprecation rule (note 004's test) at this policy's settings: worth below
        ``deprecate_below`` with at least ``min_evidence`` retrievals."""
        return DeprecationRule(self.min_evidence, self.deprecate_below, evidence="retrievals")

    def propose(
        self,
        memory_id: str,
        counts: Counts,
        status: str,
        standing: str,
        recent: Counts | None = None,
        *,
        stream: OutcomeStream | None = None,
        worth_flag: WorthFlag | None = None,
    ) -> Proposal | None:
        """The change to propose for one memory, or ``None``.

        ``recent``: counts of its last retrievals (the window test); ``stream``: its
        outcome stream (the change-detection test; :meth:`memworth.MemoryStore.outcome_streams`);
        ``worth_flag``: where it stands in its namespace's test of low worth
        (:meth:`worth_flags` over the namespace). A stream without a namespace decision
        (``change_alarm`` None) and a memory without ``worth_flag`` are tested alone.
        """
        check_counts(counts, Counts)
        if recent is not None:
            check_counts(recent, Counts, "recent")
        for name, value in (("status", status), ("standing", standing)):
            if not isinstance(value, str):
                raise ValidationError(name, f"must be a string, got {type(value).__name__}")
        if status != "active":
            return None
        worth = float(RawWorth().value(counts))
        numbers: dict[str, Any] = {"worth": round(worth, 6), "retrievals": counts.n, "evidence": counts.evidence}

        def make(action: str, reason: str) -> Proposal | None:
            fld, new = ACTIONS[action]
            old = status if fld == "status" else standing
            return None if old == new else Proposal(memory_id, action, fld, old, new, reason, numbers)

        stale: list[str] = []
        if recent is not None and recent.n >= self.staleness_window:
            now = float(RawWorth().value(recent))
            numbers["recent_worth"] = round(now, 6)
            numbers["recent_retrievals"] = recent.n
            predicted = self._context_expects(stream, recent)
            if predicted is not None:
                numbers["window_expected_from_contexts"] = round(predicted, 6)
            fired = self.window_test and now < worth - self.staleness_drop and now < self.theta_low
            if fired and predicted is not None and now >= predicted - self.staleness_drop:
                numbers["window_explained_by_context"] = True
            elif fired and stream is not None and stream.window_explained_by:  # their failures, not its
                numbers["window_explained_by"] = list(stream.window_explained_by)
            elif fired:
                expected = (
                    "" if predicted is None else f" and from {predicted:.3f} expected from its record in their contexts"
                )
                stale.append(
                    f"last {recent.n:g} retrievals at worth {now:.3f}, down from {worth:.3f} overall{expected} "
                    f"(drop > {self.staleness_drop:g}, below {self.theta_low:g})"
                )
        if stream is not None and self.change_detection and len(stream):
            reading = stream.reading or self.detector().scan(  # a namespace scan read it already
                stream.success, stream.weight, stream.reference, stream.episode
            )
            evalue = float(self.change_evalues([reading.statistic], [reading.observations])[0])
            if stream.change_alarm is None or stream.change_level is None:  # tested alone
                flags, level = self.change_flags([reading.statistic], [reading.observations])
                alarm = bool(flags[0])
            else:
                level, alarm = stream.change_level, stream.change_alarm
            bar = self.change_bar(level, reading.observations) if math.isfinite(level) else math.inf
            numbers["change_statistic"] = round(reading.statistic, 6)
            numbers["change_threshold"] = round(bar, 6)
            numbers["change_evalue"] = evalue
            numbers["change_level"] = level
            numbers["change_point"] = reading.change_point
            numbers["change_baseline"] = round(reading.baseline, 6)
            if alarm and stream.explained_by:  # a co-retrieved memory explains its failures better
                numbers["change_explained_by"] = list(stream.explained_by)
            elif alarm and self._context_holds(stream, reading.change_point):
                numbers["change_explained_by_context"] = True
            elif alarm:
                stale.append(
                    f"success rate broke: CUSUM {reading.statistic:.1f} >= {bar:.1f} since episode "
                    f"{reading.change_point} (e-value {evalue:.3g} >= e-BH bar {level:.3g} at false "
                    f"discovery rate {self.change_alpha:g})"
                )
        if stale:
            found = make("re-verify", "; ".join(stale))
            if found:
                return found
        def protect(action: str, reason: str) -> Proposal | None:
            """Suppress or deprecate, unless a memory in alarm came with at least half of its
            recent failures (``OutcomeStream.window_explained_by``): those failures are that
            memory's, so only the standing rule is left to apply."""
            if stream is not None and stream.window_explained_by:
                numbers["worth_explained_by"] = list(stream.window_explained_by)
                return self._standing(counts, numbers, make, standing)
            return make(action, reason)

        if self.deprecation == "sequential":
            return self._sequential(counts, numbers, make, standing, worth_flag, protect)
        if counts.n >= self.min_evidence:
            deprecation = self.deprecation_rule().check(counts)
            if deprecation.action == "deprecate":
                return protect("deprecate", deprecation.reason)
            if self.taxonomy().classify(counts).value_class is ValueClass.LOW:
                return protect(
                    "suppress",
                    f"low value: worth {worth:.3f} < theta_low {self.theta_low:g} with {counts.n:g} retrievals",
                )
        return self._standing(counts, numbers, make, standing)

    def _sequential(
        self,
        counts: Counts,
        numbers: dict[str, Any],
        make: Callable[[str, str], Proposal | None],
        standing: str,
        flag: WorthFlag | None,
        protect: Callable[[str, str], Proposal | None],
    ) -> Proposal | None:
        """Deprecate / suppress (through ``protect``) when the namespace's e-BH test of low
        worth rejects, else standing."""
        flag = self.worth_flags([counts])[0] if flag is None else flag
        numbers["cs_lower"], numbers["cs_upper"] = round(flag.lower, 6), round(flag.upper, 6)
        numbers["suppress_evalue"], numbers["deprecate_evalue"] = flag.suppress_evalue, flag.deprecate_evalue
        numbers["worth_level"], numbers["worth_tests"] = flag.level, flag.tests
        if flag.action is not None:
            numbers["alpha"] = self.deprecation_alpha
            theta = self.deprecate_below if flag.action == "deprecate" else self.theta_low
            e = flag.deprecate_evalue if flag.action == "deprecate" else flag.suppress_evalue
            reason = (
                f"worth {numbers['worth']:.3f} over {counts.n:g} retrievals: e-value {e:.3g} against a rate "
                f">= {theta:g} clears the e-BH bar {flag.level:.3g} (false discovery rate "
                f"{self.deprecation_alpha:g} over {flag.tests} tests)"
            )
            return protect(flag.action, reason)
        return self._standing(counts, numbers, make, standing)

    def _standing(
        self, counts: Counts, numbers: dict[str, Any], make: Callable[[str, str], Proposal | None], standing: str
    ) -> Proposal | None:
        if standing == "re-verify":  # only a person (set_standing / restore) clears a re-verify flag
            return None
        rule = DecisionRule(self.promote_above, self.demote_below, self.min_confidence, evidence="retrievals")
        decision = rule.decide(counts)
        numbers["confidence"] = round(decision.numbers["confidence"], 6)
        if decision.action in ("promote", "demote"):
            return make(decision.action, decision.reason)
        return None

    def hot(self, counts: Counts, status: str, standing: str = "normal") -> bool:
        """Hot-tier eligibility (note 003): active, not quarantined (standing ``re-verify``),
        worth >= ``hot_worth``, enough evidence."""
        return (
            status == "active"
            and standing != "re-verify"
            and counts.n >= self.min_evidence
            and float(RawWorth().value(counts)) >= self.hot_worth
        )

    def may_consolidate(self, counts: Counts) -> bool:
        """Consolidation gate (note 003): high-value memories are exempt from merging."""
        return self.taxonomy().classify(counts).value_class is not ValueClass.HIGH


# -- settings ------------------------------------------------------------------------------

DEPRECATION_MODES = ("fixed", "sequential")


def _number(
    policy: GovernancePolicy, name: str, low: float, high: float = math.inf, *, open_ends: bool = False
) -> None:
    """Refuse the setting ``name`` unless it is a real number within the bounds.

    A bool or a string is not a number (no coercion); the bounds are inclusive unless
    ``open_ends``.
    """
    value = getattr(policy, name)
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValidationError(name, f"must be a number, got {type(value).__name__} {value!r}")
    v = float(value)
    inside = (low < v < high) if open_ends else (low <= v <= high)
    if not math.isfinite(v) or not inside:
        if math.isfinite(high):
            span = f"in ({low:g}, {high:g})" if open_ends else f"in [{low:g}, {high:g}]"
        else:
            span = f"> {low:g}" if open_ends else f">= {low:g}"
        raise ValidationError(name, f"must be a finite number {span}, got {value!r}")


def _count(policy: GovernancePolicy, name: str, low: int) -> None:
    value = getattr(policy, name)
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ValidationError(name, f"must be an integer, got {type(value).__name__} {value!r}")
    if value < low:
        raise ValidationError(name, f"must be >= {low}, got {value!r}")


def _check_policy(policy: GovernancePolicy) -> None:
    """Refuse a policy whose settings the rules cannot read, naming the setting and why."""
    for name in (
        "theta_high",
        "theta_low",
        "deprecate_below",
        "promote_above",
        "demote_below",
        "min_confidence",
        "staleness_drop",
        "hot_worth",
    ):
        _number(policy, name, 0.0, 1.0)
    if float(policy.theta_low) > float(policy.theta_high):
        raise ValidationError("theta_low", f"must be <= theta_high ({policy.theta_high!r}), got {policy.theta_low!r}")
    if float(policy.demote_below) > float(policy.promote_above):
        raise ValidationError(
            "demote_below", f"must be <= promote_above ({policy.promote_above!r}), got {policy.demote_below!r}"
        )
    _number(policy, "min_evidence", 0.0)
    _count(policy, "staleness_window", 1)
    _count(policy, "max_changes_per_day", 0)
    if not isinstance(policy.change_detection, (bool, np.bool_)):
        raise ValidationError(
            "change_detection", f"must be True or False, got {type(policy.change_detection).__name__}"
        )
    _number(policy, "change_odds_ratio", 0.0, 1.0, open_ends=True)
    _number(policy, "change_threshold", 0.0, open_ends=True)
    _number(policy, "change_min_history", 0.0)
    _number(policy, "change_reference_half_life", 0.0, open_ends=True)
    _number(policy, "change_context_strength", 0.0, open_ends=True)
    if not isinstance(policy.deprecation, str) or policy.deprecation not in DEPRECATION_MODES:
        raise ValidationError("deprecation", f"must be 'fixed' or 'sequential', got {policy.deprecation!r}")
    _number(policy, "deprecation_alpha", 0.0, 1.0, open_ends=True)
    _number(policy, "pin_evidence", 0.0)
    _number(policy, "probe_alpha", 0.0, 0.5, open_ends=True)
    _number(policy, "probe_beta", 0.0, 0.5, open_ends=True)
    _number(policy, "max_quarantined", 0.0, 1.0)
    _number(policy, "change_alpha", 0.0, 1.0, open_ends=True)
    _number(policy, "guard_alpha", 0.0, 1.0, open_ends=True)
    if not isinstance(policy.window_test, (bool, np.bool_)):
        raise ValidationError("window_test", f"must be True or False, got {type(policy.window_test).__name__}")
    check_unit(policy.deprecation_evidence, "deprecation_evidence")
