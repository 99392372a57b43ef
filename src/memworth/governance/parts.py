"""The governance policy's settings, one small part per rule.

:class:`memworth.governance.GovernancePolicy` is composed of these frozen parts, each
checked when it is made, naming the setting and the reason:

* :class:`ClassSettings` (``classes``): the value classes' thresholds and evidence floor,
  and the hot tier's worth floor;
* :class:`StandingSettings` (``standing``): note 003's promote / demote rule;
* :class:`LowWorthSettings` (``low_worth``): the test that suppresses and deprecates
  (``sequential`` e-BH or the paper's ``fixed`` rule);
* :class:`StalenessSettings` (``staleness``): the window test of re-verify;
* :class:`ChangeSettings` (``change``): the change-detection test of re-verify (CUSUM, e-BH);
* :class:`ProbeSettings` (``probes``): the probe test that resolves a quarantined memory;
* :class:`LimitSettings` (``limits``): how much governance may change by itself, and how
  long a person's decision holds it back;
* :class:`GuardSettings` (``holdout_guard``): the holdout guard's error rate.

:data:`FLAT_NAMES` maps each setting's name from before the policy was composed
(``change_threshold``, ``theta_low``, ...) to its part and name: the one table the
compatibility layer (flat constructor arguments and attribute reads, the old dotted
names of ``memworth config set``, stores that kept the old flat JSON) is generated from.

Examples
--------
>>> ChangeSettings(threshold=9.0).threshold
9.0
>>> FLAT_NAMES["change_threshold"]
('change', 'threshold')
>>> ClassSettings(theta_low=0.7)
Traceback (most recent call last):
...
memworth.errors.ValidationError: theta_low: must be <= theta_high (0.6), got 0.7
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

import numpy as np

from memworth.counts import check_unit
from memworth.errors import ValidationError
from memworth.signals.change_detection import mixture_of

__all__ = [
    "FLAT_NAMES",
    "PARTS",
    "ChangeSettings",
    "ClassSettings",
    "GuardSettings",
    "LimitSettings",
    "LowWorthSettings",
    "ProbeSettings",
    "StalenessSettings",
    "StandingSettings",
]

DEPRECATION_MODES = ("fixed", "sequential")


def _plain(settings: object) -> None:
    """Keep NumPy scalars given for settings as the Python numbers they equal (``np.int64(3)``
    is 3): the settings are written as JSON (kept settings, checkpoint fingerprints), which
    refuses NumPy integers and booleans. Exact: ``item()`` changes the type, not the value."""
    for f in fields(settings):  # type: ignore[arg-type]
        value = getattr(settings, f.name)
        if isinstance(value, np.generic):
            object.__setattr__(settings, f.name, value.item())


def _number(value: object, name: str, low: float, high: float = math.inf, *, open_ends: bool = False) -> None:
    """Refuse ``value`` unless it is a real number within the bounds (a bool or a string is
    not a number; no coercion); the bounds are inclusive unless ``open_ends``."""
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


def _count(value: object, name: str, low: int) -> None:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ValidationError(name, f"must be an integer, got {type(value).__name__} {value!r}")
    if value < low:
        raise ValidationError(name, f"must be >= {low}, got {value!r}")


def _switch(value: object, name: str) -> None:
    if not isinstance(value, (bool, np.bool_)):
        raise ValidationError(name, f"must be True or False, got {type(value).__name__}")


@dataclass(frozen=True)
class ClassSettings:
    """The value classes (the paper's 3.4) and the hot tier.

    Parameters
    ----------
    theta_high, theta_low
        Worth at or above ``theta_high`` is high, below ``theta_low`` low
        (``theta_low <= theta_high``, both in [0, 1]); ``theta_low`` is also the rate the
        test of low worth suppresses below.
    min_evidence
        Retrievals before a memory is classed (and before the fixed rules act).
    hot_worth
        Worth at or above which a memory with enough evidence is hot (note 003).
    """

    theta_high: float = 0.60
    theta_low: float = 0.40
    min_evidence: float = 10
    hot_worth: float = 0.50

    def __post_init__(self) -> None:
        _plain(self)
        for name in ("theta_high", "theta_low", "hot_worth"):
            _number(getattr(self, name), name, 0.0, 1.0)
        if float(self.theta_low) > float(self.theta_high):
            raise ValidationError("theta_low", f"must be <= theta_high ({self.theta_high!r}), got {self.theta_low!r}")
        _number(self.min_evidence, "min_evidence", 0.0)


@dataclass(frozen=True)
class StandingSettings:
    """Note 003's decision rule: promote above ``promote_above``, demote below
    ``demote_below`` (``demote_below <= promote_above``), when the Wilson interval's
    confidence is at least ``min_confidence``."""

    promote_above: float = 0.70
    demote_below: float = 0.30
    min_confidence: float = 0.50

    def __post_init__(self) -> None:
        _plain(self)
        for name in ("promote_above", "demote_below", "min_confidence"):
            _number(getattr(self, name), name, 0.0, 1.0)
        if float(self.demote_below) > float(self.promote_above):
            raise ValidationError(
                "demote_below", f"must be <= promote_above ({self.promote_above!r}), got {self.demote_below!r}"
            )


@dataclass(frozen=True)
class LowWorthSettings:
    """The test that suppresses (below ``classes.theta_low``) and deprecates (below
    ``deprecate_below``).

    Parameters
    ----------
    rule
        ``"sequential"``: e-BH at ``alpha`` over every memory's beta-binomial mixture
        e-values (the false discovery rate controlled however often one looks);
        ``"fixed"``: the paper's rule (``classes.min_evidence`` retrievals and worth below
        the threshold).
    alpha
        The sequential test's false discovery rate, in (0, 1).
    evidence
        ``"retrievals"`` (one observation per retrieval, valid when credit is uniform) or
        ``"weighted"`` (credited hits, valid for any credit).
    deprecate_below
        Note 004's deprecation threshold, in [0, 1].
    """

    rule: str = "sequential"
    alpha: float = 0.05
    evidence: str = "retrievals"
    deprecate_below: float = 0.30

    def __post_init__(self) -> None:
        _plain(self)
        if not isinstance(self.rule, str) or self.rule not in DEPRECATION_MODES:
            raise ValidationError("rule", f"must be 'fixed' or 'sequential', got {self.rule!r}")
        _number(self.alpha, "alpha", 0.0, 1.0, open_ends=True)
        check_unit(self.evidence, "evidence")
        _number(self.deprecate_below, "deprecate_below", 0.0, 1.0)


@dataclass(frozen=True)
class StalenessSettings:
    """The window test of re-verify (off by default; not error-controlled): the last
    ``window`` retrievals (an integer >= 1) succeeded at a rate more than ``drop`` (in
    [0, 1]) below the lifetime worth and below ``classes.theta_low``."""

    window_test: bool = False
    window: int = 20
    drop: float = 0.25

    def __post_init__(self) -> None:
        _plain(self)
        _switch(self.window_test, "window_test")
        _count(self.window, "window", 1)
        _number(self.drop, "drop", 0.0, 1.0)


@dataclass(frozen=True)
class ChangeSettings:
    """The change-detection test of re-verify (:class:`memworth.signals.change_detection.BernoulliCusum`).

    Parameters
    ----------
    enabled
        Run it (a bool).
    odds_ratio
        The alternative: odds of success that many times lower, in (0, 1).
    threshold
        The CUSUM's bar (about ``exp(threshold)`` retrievals between false alarms), > 0.
    min_history
        Retrievals before a memory is watched, >= 0.
    reference_half_life
        Half-life, in episodes, of the success rate of all episodes the CUSUM compares with, > 0.
    context_strength
        Pseudo-observations per context of :class:`memworth.signals.change_detection.ContextCheck`, > 0.
    alpha
        e-BH's false discovery rate across a namespace's alarms, in (0, 1).
    odds_ratios
        A mixture of alternatives in place of ``odds_ratio``: distinct odds ratios in (0, 1)
        (empty: the single ``odds_ratio``). The detector then keeps one CUSUM per
        alternative and alarms on their weighted mixture (the e-detector of
        :mod:`memworth.signals.change_detection`), so a moderate fall is caught as well as
        a sharp one, at a cost of about ``log(1 / weight)`` in the threshold.
    weights
        The alternatives' weights, one per odds ratio (positive, normalised to sum to 1;
        empty: equal).
    history_prior
        Pseudo-observations at the reference rate that stand in for a memory's own
        history (>= 0): a memory is watched after ``min_history - history_prior`` of its
        own observations, its pre-change rate shrunk toward the reference meanwhile.
    hold_apart
        Explaining away by failures apart (an integer >= 0; 0, off, by default): a change
        alarm is also held while a memory that came with at least half of its failures
        since its change point failed more often without it than it did without that
        memory, over at least this many retrievals apart
        (:meth:`memworth.signals.change_detection.ExplainingAway.failing_apart`).
    frozen_baseline
        Learn a memory's pre-change rate from the observations before its current
        excursion only (a bool; off by default): while its CUSUM is above 0 the baseline
        stays where it was when the excursion started
        (``BernoulliCusum(frozen_baseline=True)``).
    """

    enabled: bool = True
    odds_ratio: float = 0.05
    threshold: float = 12.0
    min_history: float = 10.0
    reference_half_life: float = 50.0
    context_strength: float = 0.25
    alpha: float = 0.05
    odds_ratios: tuple[float, ...] = ()
    weights: tuple[float, ...] = ()
    history_prior: float = 0.0
    hold_apart: int = 0
    frozen_baseline: bool = False

    def __post_init__(self) -> None:
        _plain(self)
        _switch(self.enabled, "enabled")
        _switch(self.frozen_baseline, "frozen_baseline")
        _count(self.hold_apart, "hold_apart", 0)
        _number(self.odds_ratio, "odds_ratio", 0.0, 1.0, open_ends=True)
        # Settings read back from JSON or TOML give lists: kept as tuples of floats, so two
        # equal policies compare (and repr) equal.
        mixture_of(self.odds_ratios, self.weights)
        object.__setattr__(self, "odds_ratios", tuple(float(v) for v in self.odds_ratios))
        object.__setattr__(self, "weights", tuple(float(v) for v in self.weights))
        _number(self.history_prior, "history_prior", 0.0)
        _number(self.threshold, "threshold", 0.0, open_ends=True)
        _number(self.min_history, "min_history", 0.0)
        _number(self.reference_half_life, "reference_half_life", 0.0, open_ends=True)
        _number(self.context_strength, "context_strength", 0.0, open_ends=True)
        _number(self.alpha, "alpha", 0.0, 1.0, open_ends=True)


@dataclass(frozen=True)
class ProbeSettings:
    """The probe test that releases or suppresses a quarantined memory
    (:class:`memworth.governance.verification.ControlTest`, probes against controls; for a flag
    raised before the store logged controls, :class:`memworth.governance.verification.ProbeTest`):
    ``alpha`` is the chance of releasing a memory still broken (raising the failure chance by ``margin``),
    ``beta`` of suppressing one that recovered (does no harm), both in (0, 0.5)."""

    alpha: float = 0.05
    beta: float = 0.05
    margin: float = 0.2
    """How much higher than its controls' a released memory's failure chance is shown to stay
    below (:class:`memworth.governance.verification.ControlTest`), in (0, 1)."""

    def __post_init__(self) -> None:
        _plain(self)
        _number(self.alpha, "alpha", 0.0, 0.5, open_ends=True)
        _number(self.beta, "beta", 0.0, 0.5, open_ends=True)
        _number(self.margin, "margin", 0.0, 1.0, open_ends=True)


@dataclass(frozen=True)
class LimitSettings:
    """How much governance changes by itself.

    Parameters
    ----------
    max_changes_per_day
        Promote / demote changes per memory in 24 hours (an integer >= 0).
    max_quarantined
        Share of a namespace's active memories governance may keep quarantined at once
        (at least one), in [0, 1].
    pin_evidence
        Retrievals a person's decision holds governance back for, >= 0.
    """

    max_changes_per_day: int = 3
    max_quarantined: float = 0.1
    pin_evidence: float = 50.0

    def __post_init__(self) -> None:
        _plain(self)
        _count(self.max_changes_per_day, "max_changes_per_day", 0)
        _number(self.max_quarantined, "max_quarantined", 0.0, 1.0)
        _number(self.pin_evidence, "pin_evidence", 0.0)


@dataclass(frozen=True)
class GuardSettings:
    """The holdout guard (:mod:`memworth.governance.holdout_guard`): ``alpha``, its error rate, in (0, 1)."""

    alpha: float = 0.05

    def __post_init__(self) -> None:
        _plain(self)
        _number(self.alpha, "alpha", 0.0, 1.0, open_ends=True)


PARTS: dict[str, type] = {
    "classes": ClassSettings,
    "standing": StandingSettings,
    "low_worth": LowWorthSettings,
    "staleness": StalenessSettings,
    "change": ChangeSettings,
    "probes": ProbeSettings,
    "limits": LimitSettings,
    "holdout_guard": GuardSettings,
}
"""The parts of a governance policy, by name, in the order the settings JSON shows them."""

FLAT_NAMES: dict[str, tuple[str, str]] = {
    "theta_high": ("classes", "theta_high"),
    "theta_low": ("classes", "theta_low"),
    "min_evidence": ("classes", "min_evidence"),
    "hot_worth": ("classes", "hot_worth"),
    "promote_above": ("standing", "promote_above"),
    "demote_below": ("standing", "demote_below"),
    "min_confidence": ("standing", "min_confidence"),
    "deprecation": ("low_worth", "rule"),
    "deprecation_alpha": ("low_worth", "alpha"),
    "deprecation_evidence": ("low_worth", "evidence"),
    "deprecate_below": ("low_worth", "deprecate_below"),
    "window_test": ("staleness", "window_test"),
    "staleness_window": ("staleness", "window"),
    "staleness_drop": ("staleness", "drop"),
    "change_detection": ("change", "enabled"),
    "change_odds_ratio": ("change", "odds_ratio"),
    "change_threshold": ("change", "threshold"),
    "change_min_history": ("change", "min_history"),
    "change_reference_half_life": ("change", "reference_half_life"),
    "change_context_strength": ("change", "context_strength"),
    "change_alpha": ("change", "alpha"),
    "change_odds_ratios": ("change", "odds_ratios"),
    "change_weights": ("change", "weights"),
    "change_history_prior": ("change", "history_prior"),
    "change_hold_apart": ("change", "hold_apart"),
    "change_frozen_baseline": ("change", "frozen_baseline"),
    "probe_alpha": ("probes", "alpha"),
    "probe_beta": ("probes", "beta"),
    "probe_margin": ("probes", "margin"),
    "max_changes_per_day": ("limits", "max_changes_per_day"),
    "max_quarantined": ("limits", "max_quarantined"),
    "pin_evidence": ("limits", "pin_evidence"),
    "guard_alpha": ("holdout_guard", "alpha"),
}
"""Each setting's flat name (as ``GovernancePolicy`` had them before it was composed of
parts) -> (part, setting): the compatibility layer's one table."""

FLAT_OF: dict[tuple[str, str], str] = {where: flat for flat, where in FLAT_NAMES.items()}
"""The other way round: (part, setting) -> flat name."""
