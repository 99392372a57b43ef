"""Governance: from a memory's evidence to a proposed change of its status or standing.

Pure: the store gathers counts and history, this module decides, the store applies and
audits. Rules, first match wins, for an ``active`` memory:

1. ``re-verify`` (standing): it used to work and has stopped (the paper's staleness
   signal, section 6), by either of two tests:

   * window (``window_test=True``; off by default, not error-controlled): its last
     ``staleness_window`` retrievals succeeded at a rate more than ``staleness_drop``
     below its lifetime worth and below ``theta_low``;
   * change detection (``change_detection``, given the memory's outcome stream): a
     :class:`memworth.signals.change_detection.BernoulliCusum` on its retrievals, against the success
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
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from operator import attrgetter
from typing import TYPE_CHECKING, Any

import numpy as np

from memworth.counts import Counts, CountsTable, check_counts
from memworth.errors import ValidationError
from memworth.estimators import RawWorth
from memworth.governance.holdout_guard import HoldoutGuard
from memworth.governance.parts import (
    FLAT_NAMES,
    FLAT_OF,
    PARTS,
    ChangeSettings,
    ClassSettings,
    GuardSettings,
    LimitSettings,
    LowWorthSettings,
    ProbeSettings,
    StalenessSettings,
    StandingSettings,
)
from memworth.governance.verification import ControlTest, ProbeTest
from memworth.policy import DecisionRule, DeprecationRule, Taxonomy, ValueClass
from memworth.signals.change_detection import BernoulliCusum, ContextCheck, OutcomeStream
from memworth.signals.confidence_sequences import SequentialDeprecation
from memworth.signals.multiplicity import ebh, ebh_level

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


@dataclass(frozen=True, init=False)
class GovernancePolicy:
    """Settings of the governance rules (defaults: the paper's and the notes' numbers),
    composed of one frozen part per rule (:mod:`memworth.governance.parts`):

    * ``classes`` (:class:`~memworth.governance.parts.ClassSettings`): ``theta_high``,
      ``theta_low``, ``min_evidence``, ``hot_worth``;
    * ``standing`` (:class:`~memworth.governance.parts.StandingSettings`): note 003's
      ``promote_above``, ``demote_below``, ``min_confidence``;
    * ``low_worth`` (:class:`~memworth.governance.parts.LowWorthSettings`): the test that
      suppresses and deprecates: ``rule`` (``"sequential"`` or ``"fixed"``), ``alpha``,
      ``evidence``, ``deprecate_below``;
    * ``staleness`` (:class:`~memworth.governance.parts.StalenessSettings`): the window
      test: ``window_test``, ``window``, ``drop``;
    * ``change`` (:class:`~memworth.governance.parts.ChangeSettings`): the change-detection
      test: ``enabled``, ``odds_ratio``, ``threshold``, ``min_history``,
      ``reference_half_life``, ``context_strength``, ``alpha``;
    * ``probes`` (:class:`~memworth.governance.parts.ProbeSettings`): ``alpha``, ``beta``;
    * ``limits`` (:class:`~memworth.governance.parts.LimitSettings`):
      ``max_changes_per_day``, ``max_quarantined``, ``pin_evidence``;
    * ``holdout_guard`` (:class:`~memworth.governance.parts.GuardSettings`): ``alpha``.

    **Compatibility.** The flat names the policy had before it was composed
    (``theta_low``, ``change_threshold``, ``deprecation``, ``probe_alpha``, ...; the table
    :data:`memworth.governance.parts.FLAT_NAMES`) still work as constructor arguments
    (``GovernancePolicy(theta_low=0.2)``, ``dataclasses.replace(policy, theta_low=0.2)``:
    each changes its part) and as read-only attributes (``policy.change_threshold`` is
    ``policy.change.threshold``); a refusal of a flat argument names the flat name. A part
    may also be given as a dict of its settings (``GovernancePolicy(**policy.settings())``).

    The change-detection test of re-verify (``change.enabled``) runs
    :class:`memworth.signals.change_detection.BernoulliCusum` with ``change.odds_ratio`` (the alternative:
    odds of success that many times lower), ``change.threshold`` (about
    ``exp(threshold)`` retrievals between false alarms) and ``change.min_history``
    (retrievals before a memory is watched), against the success rate of all episodes
    with half-life ``change.reference_half_life`` episodes. When the stream has context
    labels, an alarm whose failures the memory's own record in those contexts explains is
    held (:class:`memworth.signals.change_detection.ContextCheck` with ``change.context_strength``
    pseudo-observations per context), and the window test compares the window's worth
    with what that record predicts for the window's contexts instead of with the
    lifetime worth alone. The window test is also held when at least half of the
    window's failures came with a memory whose change alarm stands
    (``OutcomeStream.window_explained_by``). ``low_worth.rule`` is
    ``"fixed"`` (V_min and worth thresholds) or ``"sequential"`` (a
    ``1 - low_worth.alpha`` confidence sequence over ``low_worth.evidence``:
    ``"weighted"`` hits, valid for any credit, or ``"retrievals"``, one observation per
    retrieval, valid when credit is uniform).

    A person's decision holds governance back: after a restore, an approval, a verdict
    on a quarantined memory or a status or standing set by hand, nothing is proposed for
    that memory until it has ``limits.pin_evidence`` more retrievals (an explicit pin holds
    until unpinned). A quarantined memory (standing ``re-verify``) is released or
    suppressed by the probe test (:class:`memworth.governance.verification.ProbeTest` with
    ``probes.alpha``, the chance of releasing a memory still broken, and ``probes.beta``,
    of suppressing one that recovered).

    Every setting is checked when its part is made (``dataclasses.replace`` included),
    with the bounds each part's documentation gives. A bool is not a number and a string
    is not either. Policies compare and hash by their parts.

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
    >>> from memworth.signals.change_detection import OutcomeStream
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

    The parts, and the flat names of the compatibility layer:

    >>> from memworth.governance.parts import ChangeSettings
    >>> strict = GovernancePolicy(change=ChangeSettings(threshold=9.0))
    >>> strict.change.threshold, strict.change_threshold, strict == GovernancePolicy(change_threshold=9.0)
    (9.0, 9.0, True)

    Settings that cannot work are refused when the policy is made:

    >>> GovernancePolicy(theta_low=0.7)
    Traceback (most recent call last):
    ...
    memworth.errors.ValidationError: theta_low: must be <= theta_high (0.6), got 0.7
    """

    classes: ClassSettings = dataclasses.field(default_factory=ClassSettings)
    standing: StandingSettings = dataclasses.field(default_factory=StandingSettings)
    low_worth: LowWorthSettings = dataclasses.field(default_factory=LowWorthSettings)
    staleness: StalenessSettings = dataclasses.field(default_factory=StalenessSettings)
    change: ChangeSettings = dataclasses.field(default_factory=ChangeSettings)
    probes: ProbeSettings = dataclasses.field(default_factory=ProbeSettings)
    limits: LimitSettings = dataclasses.field(default_factory=LimitSettings)
    holdout_guard: GuardSettings = dataclasses.field(default_factory=GuardSettings)

    def __init__(
        self,
        *,
        classes: ClassSettings | Mapping[str, Any] | None = None,
        standing: StandingSettings | Mapping[str, Any] | None = None,
        low_worth: LowWorthSettings | Mapping[str, Any] | None = None,
        staleness: StalenessSettings | Mapping[str, Any] | None = None,
        change: ChangeSettings | Mapping[str, Any] | None = None,
        probes: ProbeSettings | Mapping[str, Any] | None = None,
        limits: LimitSettings | Mapping[str, Any] | None = None,
        holdout_guard: GuardSettings | Mapping[str, Any] | None = None,
        **flat: Any,
    ) -> None:
        given = {
            "classes": classes,
            "standing": standing,
            "low_worth": low_worth,
            "staleness": staleness,
            "change": change,
            "probes": probes,
            "limits": limits,
            "holdout_guard": holdout_guard,
        }
        parts: dict[str, Any] = {}
        for name, kind in PARTS.items():
            part = given[name]
            if isinstance(part, Mapping):  # its settings, as settings() gives them
                part = make_part(name, part)
            if part is not None and not isinstance(part, kind):
                raise ValidationError(name, f"must be a {kind.__name__}, got {type(part).__name__}")
            parts[name] = kind() if part is None else part
        by_part: dict[str, dict[str, Any]] = {}
        for name, value in flat.items():
            if name not in FLAT_NAMES:
                known = ", ".join([*PARTS, *FLAT_NAMES])
                raise ValidationError(str(name), f"not a governance setting (known: {known})")
            part_name, setting = FLAT_NAMES[name]
            by_part.setdefault(part_name, {})[setting] = value
        for part_name, values in by_part.items():
            try:
                parts[part_name] = dataclasses.replace(parts[part_name], **values)
            except ValidationError as exc:  # named as the caller named it: the flat name
                raise ValidationError(FLAT_OF.get((part_name, exc.field), exc.field), exc.reason) from None
        for name, part in parts.items():
            object.__setattr__(self, name, part)

    if TYPE_CHECKING:  # the flat names (FLAT_NAMES), generated below the class

        def __getattr__(self, name: str) -> Any: ...

    def settings(self) -> dict[str, Any]:
        """The settings as plain JSON, one object per part (for the audit log and the store);
        a sequence (the change detector's ``odds_ratios``, ``weights``) as a list, as JSON reads it back."""
        return {
            part: {k: list(v) if isinstance(v, tuple) else v for k, v in values.items()}
            for part, values in asdict(self).items()
        }

    def flat_settings(self) -> dict[str, Any]:
        """The settings by their flat names (:data:`memworth.governance.parts.FLAT_NAMES`)."""
        return {flat: getattr(getattr(self, part), name) for flat, (part, name) in FLAT_NAMES.items()}

    @classmethod
    def from_settings(cls, settings: object) -> GovernancePolicy:
        """The policy :meth:`settings` describes (as a store keeps it): one object per part,
        or the flat names a store kept before the policy was composed of parts (both may
        be mixed; a flat name wins over its part's object). An unknown setting is refused,
        naming it.

        Examples
        --------
        >>> GovernancePolicy.from_settings({"classes": {"theta_low": 0.2}}).classes.theta_low
        0.2
        >>> GovernancePolicy.from_settings({"theta_low": 0.2}).classes.theta_low
        0.2
        >>> for bad in ({"theta_lo": 0.2}, {"change": {"threshold": -1}}):
        ...     try:
        ...         GovernancePolicy.from_settings(bad)
        ...     except ValidationError as exc:
        ...         print(exc.field)
        theta_lo
        change.threshold
        """
        if not isinstance(settings, Mapping):
            raise ValidationError("policy", f"must be a dict of settings, got {type(settings).__name__}")
        parts: dict[str, Any] = {}
        flat: dict[str, Any] = {}
        for name, value in settings.items():
            if name in PARTS:
                parts[name] = make_part(name, value)
            elif name in FLAT_NAMES:
                flat[name] = value
            else:
                known = ", ".join([*PARTS, *FLAT_NAMES])
                raise ValidationError(str(name), f"not a governance setting (known: {known})")
        return cls(**parts, **flat)

    def quarantine_budget(self, active: int) -> int:
        """How many of ``active`` memories governance may keep quarantined at once by itself:
        ``max_quarantined`` of them, at least one. Quarantine takes a memory's answers out of
        recall, so the memories retrieved for the same tasks start failing and can be flagged
        in turn; the budget keeps such a cascade from emptying a store (measured on the
        ``upgrade`` agent world). A person's approval is not held by it."""
        return max(1, math.floor(self.limits.max_quarantined * active))

    def guard(self) -> HoldoutGuard:
        """The holdout guard (:mod:`memworth.governance.holdout_guard`) at ``guard_alpha``."""
        return HoldoutGuard(self.holdout_guard.alpha)

    def probe_test(self) -> ProbeTest:
        """The probe-only sequential test: resolves a quarantined memory flagged before its
        store logged controls (schema 9), from its probe outcomes against its flag's rates."""
        return ProbeTest(self.probes.alpha, self.probes.beta)

    def control_test(self) -> ControlTest:
        """The randomised test that resolves a quarantined memory: its probes against its controls."""
        return ControlTest(self.probes.alpha, self.probes.beta, self.probes.margin)

    def detector(self) -> BernoulliCusum:
        """The change detector behind the change-detection test of re-verify."""
        c = self.change
        return BernoulliCusum(
            c.odds_ratio,
            c.threshold,
            c.min_history,
            odds_ratios=c.odds_ratios,
            weights=c.weights,
            history_prior=c.history_prior,
            frozen_baseline=c.frozen_baseline,
        )

    def change_evalues(self, statistic: object, watched: object) -> np.ndarray:
        """Each memory's e-value against "its success rate has not broken", from its CUSUM.

        ``exp(statistic) / watched``, ``watched`` being the observations its statistic has
        read since it was first watched (``CusumState.watched``: each counted once, whatever
        its confidence; at least 1; 0 for a memory not yet watched). Why it is an
        e-value: the CUSUM is the largest, over the possible change points, of the likelihood
        ratio of the observations since then, so ``exp(CUSUM)`` is at most their sum (the
        Shiryaev-Roberts statistic), whose expectation without a change is the number of
        change points summed over; a mixture detector's ``exp(statistic)`` is the weighted
        sum of its alternatives' ``exp(CUSUM)``, at most the weighted sum of their
        Shiryaev-Roberts statistics, whose expectation is the same. Exact with the pre-change
        rate known; with the rate estimated from the memory's own history (as here) approximate.
        """
        stat = np.asarray(statistic, dtype=float)
        seen = np.asarray(watched, dtype=float)
        with np.errstate(over="ignore"):
            e = np.exp(stat) / np.maximum(seen, 1.0)
        return np.asarray(np.where(seen > 0, e, 0.0))

    def change_flags(self, statistic: object, watched: object) -> tuple[np.ndarray, float]:
        """Which memories' change alarms stand when they are tested together, and the e-value
        that asked of each: a memory alarms when its CUSUM is at ``change_threshold`` (the
        detector's own bar, about ``exp(threshold)`` observations between false alarms) *and*
        e-BH at ``change_alpha`` over the watched memories rejects it
        (:mod:`memworth.signals.multiplicity`), so the expected share of false alarms among the alarms
        standing at any one reading is at most ``change_alpha``. In a small namespace the
        threshold decides; in a large one, e-BH raises the bar.
        """
        stat = np.asarray(statistic, dtype=float)
        # A memory below the detector's own threshold (its per-memory false-alarm rate) takes part
        # with an e-value of 0: lowering an e-value keeps it one, so the FDR guarantee holds for
        # the alarms that clear both bars.
        e = np.where(stat >= float(self.change.threshold), self.change_evalues(stat, watched), 0.0)
        seen = np.asarray(watched, dtype=float) > 0
        out = np.zeros(e.size, dtype=bool)
        if not seen.any():
            return out, math.inf
        out[seen] = ebh(e[seen], self.change.alpha)
        return out, ebh_level(e[seen], self.change.alpha)

    def change_bar(self, level: float, watched: float) -> float:
        """The CUSUM statistic a memory whose statistic has read ``watched`` observations
        needs to alarm when e-BH asks an e-value of ``level``: that e-value's statistic, and
        at least ``change_threshold``."""
        needed = math.log(level) + math.log(max(float(watched), 1.0))
        return max(float(self.change.threshold), needed)

    def worth_flags(self, counts: list[Counts]) -> list[WorthFlag]:
        """The namespace's test of low worth: for each memory, whether e-BH at
        ``deprecation_alpha`` over every memory's two hypotheses ("its rate is at least
        ``theta_low``", "... at least ``deprecate_below``") rejects one, and which.

        The e-values are Robbins' beta-binomial mixture martingales
        (:class:`memworth.signals.confidence_sequences.BetaBinomialCS`) at each threshold, which stay e-values
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
        if not counts:
            return []
        for c in counts:
            check_counts(c, Counts)
        table = CountsTable(
            np.array([c.success for c in counts], dtype=float),
            np.array([c.failure for c in counts], dtype=float),
            np.array([c.n for c in counts], dtype=float),
        )
        cs = self.sequential(self.classes.theta_low).sequence()
        lower, upper = (np.atleast_1d(np.asarray(x, dtype=float)) for x in cs.interval(table))  # all at once
        actions, evalues, level, tests = self.worth_test(table)
        return [
            WorthFlag(
                actions[i],
                float(evalues[0][i]),
                float(evalues[1][i]),
                level,
                tests,
                float(lower[i]),
                float(upper[i]),
            )
            for i in range(len(counts))
        ]

    def worth_test(
        self, table: CountsTable, distinct: tuple[np.ndarray, np.ndarray] | None = None
    ) -> tuple[np.ndarray, list[np.ndarray], float, int]:
        """The namespace's test of low worth over ``table`` as arrays (what :meth:`worth_flags`
        and :meth:`propose_table` read): each memory's action (``"deprecate"``, ``"suppress"``
        or ``None``), the e-values against theta_low and deprecate_below, the e-value e-BH
        asked of each, and how many hypotheses it weighed.

        ``distinct``: ``(first, back)``, one row of ``table`` per distinct (success, failure,
        n) and each row's place among them (:func:`memworth.logs.score.distinct_rows`). A
        memory's e-values are a function of its counts alone, so they are then computed once
        per distinct row and handed to every memory with those counts (the same numbers;
        e-BH still weighs every memory's two hypotheses)."""
        if distinct is None:
            v, evalues = self._worth_evalues(table)
        else:  # the e-values of the distinct rows, handed to each memory
            first, back = distinct
            v = self._worth_evalues(table, evidence_only=True)[0]
            columns = (np.atleast_1d(np.asarray(c, dtype=float)) for c in (table.success, table.failure, table.n))
            evalues = [e[back] for e in self._worth_evalues(CountsTable(*(c[first] for c in columns)))[1]]
        return self._worth_tested(evalues, v)

    def _worth_evalues(self, table: CountsTable, *, evidence_only: bool = False) -> tuple[np.ndarray, list[np.ndarray]]:
        """Each memory's evidence as the test reads it (0: not tested), and its e-values against
        theta_low and deprecate_below (none with ``evidence_only``)."""
        cs = self.sequential(self.classes.theta_low).sequence()
        s, f = cs._sf(table)
        s, f = np.atleast_1d(np.asarray(s, dtype=float)), np.atleast_1d(np.asarray(f, dtype=float))
        v = s + f
        evalues: list[np.ndarray] = []
        if evidence_only:
            return v, evalues
        ratio = np.where(v > 0, s / np.where(v > 0, v, 1.0), 0.5)
        for theta in (self.classes.theta_low, self.low_worth.deprecate_below):
            theta = min(max(float(theta), 1e-9), 1 - 1e-9)
            log_m = np.atleast_1d(np.asarray(cs.log_martingale(table, theta), dtype=float))
            with np.errstate(over="ignore"):
                evalues.append(np.where((ratio < theta) & (v > 0), np.exp(log_m), 0.0))
        return v, evalues

    def _worth_tested(
        self, evalues: list[np.ndarray], v: np.ndarray
    ) -> tuple[np.ndarray, list[np.ndarray], float, int]:
        """e-BH over every memory's two e-values (``v``: its evidence; 0 is not tested)."""
        tested = np.flatnonzero(v > 0)
        pooled = np.concatenate([evalues[0][tested], evalues[1][tested]])
        rejected = np.zeros((2, v.size), dtype=bool)
        level = math.inf
        if tested.size:
            mask = ebh(pooled, self.low_worth.alpha)
            rejected[0, tested], rejected[1, tested] = mask[: tested.size], mask[tested.size :]
            level = ebh_level(pooled, self.low_worth.alpha)
        actions = np.full(v.size, None, dtype=object)
        actions[rejected[0]] = "suppress"
        actions[rejected[1]] = "deprecate"
        return actions, evalues, level, int(pooled.size)

    def _context_holds(self, stream: OutcomeStream, since: int | None) -> bool:
        """Whether the memory's per-context record before ``since`` explains its excursion
        since then (no labels: no)."""
        if stream.context is None or since is None:
            return False
        check = ContextCheck(self.change.context_strength)
        return check.holds(
            self.detector(), stream.episode, stream.context, stream.success, since=since, weight=stream.weight
        )

    def _context_expects(self, stream: OutcomeStream | None, recent: Counts) -> float | None:
        """The worth the memory's per-context record predicts for the retrievals of the
        window (``None`` without labels or without a record before the window)."""
        if stream is None or stream.context is None or len(stream) <= recent.n:
            return None
        start = int(stream.episode[-int(recent.n)])
        check = ContextCheck(self.change.context_strength)
        return check.expected(stream.episode, stream.context, stream.success, since=start, weight=stream.weight)

    def sequential(self, threshold: float) -> SequentialDeprecation:
        """The confidence-sequence rule at ``threshold`` (for ``deprecation="sequential"``)."""
        return SequentialDeprecation(threshold, self.low_worth.alpha, evidence=self.low_worth.evidence)

    def taxonomy(self) -> Taxonomy:
        """The value classes (the paper's 3.4) at this policy's thresholds: the one taxonomy every face shows."""
        c = self.classes
        return Taxonomy(c.theta_high, c.theta_low, c.min_evidence, evidence="retrievals")

    def deprecation_rule(self) -> DeprecationRule:
        """The fixed deprecation rule (note 004's test) at this policy's settings: worth below
        ``deprecate_below`` with at least ``min_evidence`` retrievals."""
        return DeprecationRule(self.classes.min_evidence, self.low_worth.deprecate_below, evidence="retrievals")

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
        if recent is not None and recent.n >= self.staleness.window:
            now = float(RawWorth().value(recent))
            numbers["recent_worth"] = round(now, 6)
            numbers["recent_retrievals"] = recent.n
            predicted = self._context_expects(stream, recent)
            if predicted is not None:
                numbers["window_expected_from_contexts"] = round(predicted, 6)
            fired = self.staleness.window_test and now < worth - self.staleness.drop and now < self.classes.theta_low
            if fired and predicted is not None and now >= predicted - self.staleness.drop:
                numbers["window_explained_by_context"] = True
            elif fired and stream is not None and stream.window_explained_by:  # their failures, not its
                numbers["window_explained_by"] = list(stream.window_explained_by)
            elif fired:
                expected = (
                    "" if predicted is None else f" and from {predicted:.3f} expected from its record in their contexts"
                )
                stale.append(self._window_reason(recent.n, now, worth, expected))
        if stream is not None and self.change.enabled and len(stream):
            reading = stream.reading or self.detector().scan(  # a namespace scan read it already
                stream.success, stream.weight, stream.reference, stream.episode
            )
            evalue = float(self.change_evalues([reading.statistic], [reading.watched])[0])
            if stream.change_alarm is None or stream.change_level is None:  # tested alone
                flags, level = self.change_flags([reading.statistic], [reading.watched])
                alarm = bool(flags[0])
            else:
                level, alarm = stream.change_level, stream.change_alarm
            bar = self.change_bar(level, reading.watched) if math.isfinite(level) else math.inf
            numbers["change_statistic"] = round(reading.statistic, 6)
            numbers["change_threshold"] = round(bar, 6)
            numbers["change_evalue"] = evalue
            numbers["change_level"] = level
            numbers["change_point"] = reading.change_point
            numbers["change_baseline"] = round(reading.baseline, 6)
            if reading.odds_ratio is not None:  # a mixture: the fall its evidence points to
                numbers["change_odds_ratio"] = reading.odds_ratio
            if alarm and stream.explained_by:  # a co-retrieved memory explains its failures better
                numbers["change_explained_by"] = list(stream.explained_by)
            elif alarm and self._context_holds(stream, reading.change_point):
                numbers["change_explained_by_context"] = True
            elif alarm:
                stale.append(
                    f"success rate broke: CUSUM {reading.statistic:.1f} >= {bar:.1f} since episode "
                    f"{reading.change_point} (e-value {evalue:.3g} >= e-BH bar {level:.3g} at false "
                    f"discovery rate {self.change.alpha:g})"
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

        if self.low_worth.rule == "sequential":
            return self._sequential(counts, numbers, make, standing, worth_flag, protect)
        if counts.n >= self.classes.min_evidence:
            deprecation = self.deprecation_rule().check(counts)
            if deprecation.action == "deprecate":
                return protect("deprecate", deprecation.reason)
            if self.taxonomy().classify(counts).value_class is ValueClass.LOW:
                return protect("suppress", self._low_reason(worth, counts.n))
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
            numbers["alpha"] = self.low_worth.alpha
            e = flag.deprecate_evalue if flag.action == "deprecate" else flag.suppress_evalue
            reason = self._worth_reason(flag.action, numbers["worth"], counts.n, e, flag.level, flag.tests)
            return protect(flag.action, reason)
        return self._standing(counts, numbers, make, standing)

    def _standing(
        self, counts: Counts, numbers: dict[str, Any], make: Callable[[str, str], Proposal | None], standing: str
    ) -> Proposal | None:
        if standing == "re-verify":  # only a person (set_standing / restore) clears a re-verify flag
            return None
        s = self.standing
        rule = DecisionRule(s.promote_above, s.demote_below, s.min_confidence, evidence="retrievals")
        decision = rule.decide(counts)
        numbers["confidence"] = round(decision.numbers["confidence"], 6)
        if decision.action in ("promote", "demote"):
            return make(decision.action, decision.reason)
        return None

    def propose_table(
        self,
        counts: CountsTable,
        recent: CountsTable | None = None,
        *,
        tested: tuple[np.ndarray, list[np.ndarray], float, int] | None = None,
        distinct: tuple[np.ndarray, np.ndarray] | None = None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`propose` for many ``active`` memories of standing ``normal`` without outcome
        streams, at once (how ``memworth score`` proposes when change detection is off).

        Memory ``i`` gets what ``propose(id, counts[i], "active", "normal", recent[i],
        worth_flag=worth_flags(all)[i])`` gives: the namespace's test of low worth is run over
        the whole table. ``recent``: each memory's window counts (``n`` 0: none). Returns
        the action, the new status or standing and the reason, as object arrays with
        ``None`` where nothing is proposed. The rules are :meth:`propose`'s, over arrays; a
        Hypothesis test holds the two equal. ``tested``: what :meth:`worth_test` gave for
        this same table, if the caller has it already (the test is then not run again).
        ``distinct``: the table's distinct rows, as :meth:`worth_test` takes them; a promotion's
        or demotion's reason, a function of the counts alone, is then written once per
        distinct row (the same text).
        """
        check_counts(counts, CountsTable)
        success, failure, n = (np.atleast_1d(np.asarray(c, dtype=float)) for c in counts)
        table = CountsTable(success, failure, n)
        size = n.size
        worth = np.atleast_1d(np.asarray(RawWorth().value(table), dtype=float))
        action = np.full(size, None, dtype=object)
        reason = np.full(size, None, dtype=object)
        todo = np.ones(size, dtype=bool)  # no rule has fired yet
        if recent is not None and self.staleness.window_test:
            check_counts(recent, CountsTable, "recent")
            rn = np.atleast_1d(np.asarray(recent.n, dtype=float))
            now = np.atleast_1d(
                np.asarray(RawWorth().value(CountsTable(recent.success, recent.failure, rn)), dtype=float)
            )
            fired = (rn >= self.staleness.window) & (now < worth - self.staleness.drop) & (now < self.classes.theta_low)
            for i in np.flatnonzero(fired).tolist():
                action[i] = "re-verify"
                reason[i] = self._window_reason(float(rn[i]), float(now[i]), float(worth[i]), "")
            todo &= ~fired
        if self.low_worth.rule == "sequential":
            flags, evalues, level, tests = self.worth_test(table, distinct) if tested is None else tested
            for i in np.flatnonzero(todo & (flags != None)).tolist():  # noqa: E711 - elementwise
                act = str(flags[i])
                e = float(evalues[1][i] if act == "deprecate" else evalues[0][i])
                action[i] = act
                reason[i] = self._worth_reason(act, round(float(worth[i]), 6), float(n[i]), e, level, tests)
            todo &= flags == None  # noqa: E711 - elementwise
        else:
            sure = todo & (n >= self.classes.min_evidence)
            rule = self.deprecation_rule()
            rule.check(Counts(0.0, 0.0, 0.0))  # its settings, checked as the scalar path checks them
            deprecate = sure & (worth < rule.threshold)
            low = sure & ~deprecate & (worth < self.classes.theta_low)
            for i in np.flatnonzero(deprecate).tolist():
                action[i] = "deprecate"
                reason[i] = rule.reason(float(worth[i]), float(n[i]))
            for i in np.flatnonzero(low).tolist():
                action[i] = "suppress"
                reason[i] = self._low_reason(float(worth[i]), float(n[i]))
            todo &= ~(deprecate | low)
        s = self.standing
        rule2 = DecisionRule(s.promote_above, s.demote_below, s.min_confidence, evidence="retrievals")
        decided, _, conf = rule2.decide_table(table)
        # A large table repeats its counts: each reason is written once per (action, worth, confidence),
        # keyed by the numbers' bits (-0.0 and 0.0 print apart).
        rows = np.flatnonzero(todo & (decided != "neutral"))
        conf = np.ascontiguousarray(np.atleast_1d(np.asarray(conf, dtype=float)))
        if distinct is not None:
            # The first of the rows of each distinct counts, and where each row's text is; the
            # counts' distinct rows take -0.0 for 0.0, so the signs of worth and confidence
            # (which print apart) are part of the key.
            key = distinct[1][rows].astype(np.int64) * 4 + np.signbit(worth[rows]) * 2 + np.signbit(conf[rows])
            once, where = np.unique(key, return_index=True, return_inverse=True)[1:]
            texts = np.empty(once.size, dtype=object)
            for j, i in enumerate(rows[once].tolist()):
                texts[j] = rule2.reason(str(decided[i]), float(worth[i]), float(conf[i]))
            action[rows] = decided[rows]
            reason[rows] = texts[where.reshape(-1)]
            rows = rows[:0]  # nothing left for the loop below
        bits = zip(
            decided[rows].tolist(), worth[rows].view(np.int64).tolist(), conf[rows].view(np.int64).tolist(), strict=True
        )
        said: dict[tuple[str, int, int], str] = {}
        for i, key in zip(rows.tolist(), bits, strict=True):
            text = said.get(key)
            if text is None:
                text = said[key] = rule2.reason(str(key[0]), float(worth[i]), float(conf[i]))
            action[i] = str(key[0])
            reason[i] = text
        new = np.full(size, None, dtype=object)
        for act, (_, value) in ACTIONS.items():
            new[action == act] = value
        return action, new, reason

    def _window_reason(self, recent_n: float, now: float, worth: float, expected: str) -> str:
        return (
            f"last {recent_n:g} retrievals at worth {now:.3f}, down from {worth:.3f} overall{expected} "
            f"(drop > {self.staleness.drop:g}, below {self.classes.theta_low:g})"
        )

    def _low_reason(self, worth: float, n: float) -> str:
        return f"low value: worth {worth:.3f} < theta_low {self.classes.theta_low:g} with {n:g} retrievals"

    def _worth_reason(self, action: str, worth: float, n: float, evalue: float, level: float, tests: int) -> str:
        """``worth``: as the proposal's numbers carry it (rounded to 6 places)."""
        theta = self.low_worth.deprecate_below if action == "deprecate" else self.classes.theta_low
        return (
            f"worth {worth:.3f} over {n:g} retrievals: e-value {evalue:.3g} against a rate "
            f">= {theta:g} clears the e-BH bar {level:.3g} (false discovery rate "
            f"{self.low_worth.alpha:g} over {tests} tests)"
        )

    def hot(self, counts: Counts, status: str, standing: str = "normal") -> bool:
        """Hot-tier eligibility (note 003): active, not quarantined (standing ``re-verify``),
        worth >= ``hot_worth``, enough evidence."""
        return (
            status == "active"
            and standing != "re-verify"
            and counts.n >= self.classes.min_evidence
            and float(RawWorth().value(counts)) >= self.classes.hot_worth
        )

    def may_consolidate(self, counts: Counts) -> bool:
        """Consolidation gate (note 003): high-value memories are exempt from merging."""
        return self.taxonomy().classify(counts).value_class is not ValueClass.HIGH


def make_part(name: str, values: object) -> Any:
    """The part ``name`` of a policy from its settings (a mapping); a refusal names the
    dotted setting (``change.threshold``)."""
    kind = PARTS[name]
    if not isinstance(values, Mapping):
        raise ValidationError(name, f"must be an object of settings, got {type(values).__name__}")
    known = [f.name for f in dataclasses.fields(kind)]
    for key in values:
        if key not in known:
            raise ValidationError(f"{name}.{key}", f"not a setting (known: {', '.join(known)})")
    try:
        return kind(**values)
    except ValidationError as exc:
        raise ValidationError(f"{name}.{exc.field}", exc.reason) from None


def _alias(part: str, name: str) -> property:
    return property(attrgetter(f"{part}.{name}"), doc=f"``{part}.{name}`` by its flat name (compatibility).")


for _flat, (_part, _name) in FLAT_NAMES.items():  # the compatibility layer: one property per FLAT_NAMES entry
    setattr(GovernancePolicy, _flat, _alias(_part, _name))
