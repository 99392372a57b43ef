"""Governance policy: pure rules from counts to a class or an action, each with its reason.

* :class:`Taxonomy` - the paper's value taxonomy (definition 3.2): high, uncertain,
  mixed, low.
* :class:`DecisionRule` - note 003's promote / demote / neutral rule.
* :class:`DeprecationRule` - note 004's deprecation test.

Rules hold only their settings and read :class:`memworth.Counts`; every answer carries
the numbers that produced it, so an audit log can say why.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import numpy as np

from memworth.counts import Counts, CountsTable, check_counts, check_unit, evidence_of
from memworth.errors import ValidationError
from memworth.estimators import RawWorth, WilsonBound

__all__ = [
    "Classification",
    "Decision",
    "DecisionRule",
    "DeprecationRule",
    "Taxonomy",
    "ValueClass",
]


class ValueClass(StrEnum):
    """The four classes of the paper's value taxonomy (definition 3.2)."""

    HIGH = "high"
    UNCERTAIN = "uncertain"
    MIXED = "mixed"
    LOW = "low"


@dataclass(frozen=True)
class Classification:
    """A memory's class, with the worth and evidence it was read from and why."""

    value_class: ValueClass
    worth: float
    evidence: float
    reason: str


@dataclass(frozen=True)
class Decision:
    """An action proposed by a rule, with its reason and the numbers behind it."""

    action: str
    reason: str
    numbers: dict[str, Any] = field(default_factory=dict)


def _number(value: object, name: str, lo: float | None = None, hi: float | None = None) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise ValidationError(name, f"must be a number, got {type(value).__name__}")
    v = float(value)
    if not np.isfinite(v) or (lo is not None and v < lo) or (hi is not None and v > hi):
        raise ValidationError(name, f"must be finite and within [{lo}, {hi}], got {value!r}")
    return v


@dataclass(frozen=True)
class Taxonomy:
    """The paper's value taxonomy: high / uncertain / mixed / low.

    * uncertain: evidence < ``min_evidence`` (whatever the ratio);
    * high: worth > ``theta_high``;
    * low: worth < ``theta_low``;
    * mixed: otherwise (``theta_low <= worth <= theta_high``).

    Parameters
    ----------
    theta_high, theta_low
        Worth thresholds (paper: 0.60 and 0.40).
    min_evidence
        V_min (paper: 10).
    evidence
        Unit of evidence, required: the paper defines V as weighted hits (definition
        3.2) but counts V_min = 10 in retrievals in section 5.2, so the choice is the
        caller's: ``"weighted"`` or ``"retrievals"``.

    Examples
    --------
    >>> taxonomy = Taxonomy(evidence="retrievals")
    >>> taxonomy.classify(Counts(success=1.0, failure=0.25, n=10)).value_class
    <ValueClass.HIGH: 'high'>
    >>> print(taxonomy.classify(Counts(success=1.0, failure=0.25, n=9)).reason)
    evidence 9 retrievals < min_evidence 10
    >>> Taxonomy(evidence="weighted").classify(Counts(success=1.0, failure=0.25, n=10)).value_class
    <ValueClass.UNCERTAIN: 'uncertain'>
    """

    theta_high: float = 0.60
    theta_low: float = 0.40
    min_evidence: float = 10.0
    evidence: str = field(default="", kw_only=True)

    def _check(self) -> None:
        if isinstance(self.evidence, str) and self.evidence == "":
            raise ValidationError(
                "evidence",
                "must be chosen explicitly: 'retrievals' (count of retrievals) or 'weighted' (hits+ + hits-)",
            )
        check_unit(self.evidence)
        hi = _number(self.theta_high, "theta_high", 0.0, 1.0)
        lo = _number(self.theta_low, "theta_low", 0.0, 1.0)
        if lo > hi:
            raise ValidationError("theta_low", f"must be <= theta_high ({hi}), got {lo}")
        _number(self.min_evidence, "min_evidence", 0.0)

    def classify(self, counts: Counts, worth: float | None = None) -> Classification:
        """Classify one memory; ``worth`` defaults to the raw MW ratio of ``counts``."""
        self._check()
        check_counts(counts, Counts)
        w = float(RawWorth().value(counts)) if worth is None else _number(worth, "worth", 0.0, 1.0)
        v = float(evidence_of(counts, self.evidence))
        unit = "retrievals" if self.evidence == "retrievals" else "weighted hits"
        if v < self.min_evidence:
            return Classification(
                ValueClass.UNCERTAIN, w, v, f"evidence {v:g} {unit} < min_evidence {self.min_evidence:g}"
            )
        if w > self.theta_high:
            return Classification(ValueClass.HIGH, w, v, f"worth {w:.3f} > theta_high {self.theta_high:g}")
        if w < self.theta_low:
            return Classification(ValueClass.LOW, w, v, f"worth {w:.3f} < theta_low {self.theta_low:g}")
        return Classification(
            ValueClass.MIXED, w, v, f"theta_low {self.theta_low:g} <= worth {w:.3f} <= theta_high {self.theta_high:g}"
        )

    def classify_table(self, counts: CountsTable, worth: np.ndarray | None = None) -> np.ndarray:
        """Classify many memories at once; returns an array of class names (``"high"``, ...)."""
        self._check()
        check_counts(counts, CountsTable)
        w = np.asarray(RawWorth().value(counts) if worth is None else worth, dtype=float)
        v = np.asarray(evidence_of(counts, self.evidence), dtype=float)
        out = np.full(w.shape, ValueClass.MIXED.value, dtype=object)
        out[w > self.theta_high] = ValueClass.HIGH.value
        out[w < self.theta_low] = ValueClass.LOW.value
        out[v < self.min_evidence] = ValueClass.UNCERTAIN.value
        return out


@dataclass(frozen=True)
class DecisionRule:
    """Note 003's rule: promote, demote, or neutral, from worth and confidence.

    ``confidence`` is defined here as one minus the width of the Wilson score interval
    (``z``, ``evidence`` settings) around the worth ratio: 0 with no evidence, near 1
    with a lot. One observation gives about 0.21, ten unanimous ones about 0.72, ten at
    a 0.8 ratio about 0.55. Then, in order:

    * confidence < ``insufficient_below`` -> ``neutral`` (insufficient data);
    * worth > ``promote_above`` and confidence > ``min_confidence`` -> ``promote``;
    * worth < ``demote_below`` and confidence > ``min_confidence`` -> ``demote``;
    * otherwise -> ``neutral``.

    Examples
    --------
    >>> rule = DecisionRule()
    >>> rule.decide(Counts(success=9.0, failure=1.0, n=10)).action
    'promote'
    >>> d = rule.decide(Counts(success=1.0, failure=0.0, n=1))
    >>> d.action, d.reason
    ('neutral', 'insufficient data: confidence 0.207 < 0.3')
    """

    promote_above: float = 0.7
    demote_below: float = 0.3
    min_confidence: float = 0.5
    insufficient_below: float = 0.3
    z: float = 1.96
    evidence: str = "weighted"

    def confidence(self, counts: Counts) -> float:
        """One minus the width of the Wilson interval around the worth ratio."""
        check_counts(counts, Counts)
        lo, hi = WilsonBound(z=self.z, evidence=self.evidence).interval(counts)
        return float(1.0 - (hi - lo))

    def decide(self, counts: Counts) -> Decision:
        """``promote``, ``demote`` or ``neutral`` for ``counts``, with the reason and numbers."""
        for name in ("promote_above", "demote_below", "min_confidence", "insufficient_below"):
            _number(getattr(self, name), name, 0.0, 1.0)
        worth = float(RawWorth().value(counts))
        conf = self.confidence(counts)
        numbers = {"worth": worth, "confidence": conf, "evidence": float(evidence_of(counts, self.evidence))}
        if conf < self.insufficient_below:
            return Decision(
                "neutral", f"insufficient data: confidence {conf:.3f} < {self.insufficient_below:g}", numbers
            )
        if worth > self.promote_above and conf > self.min_confidence:
            return Decision("promote", self.reason("promote", worth, conf), numbers)
        if worth < self.demote_below and conf > self.min_confidence:
            return Decision("demote", self.reason("demote", worth, conf), numbers)
        return Decision("neutral", f"worth {worth:.3f} with confidence {conf:.3f}: no rule fired", numbers)

    def decide_table(self, counts: CountsTable) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`decide` of many memories at once: each one's action (``"promote"``,
        ``"demote"`` or ``"neutral"``, an object array), worth and confidence; the reason of
        a promotion or demotion is :meth:`reason` of those."""
        for name in ("promote_above", "demote_below", "min_confidence", "insufficient_below"):
            _number(getattr(self, name), name, 0.0, 1.0)
        check_counts(counts, CountsTable)
        worth = np.atleast_1d(np.asarray(RawWorth().value(counts), dtype=float))
        lo, hi = WilsonBound(z=self.z, evidence=self.evidence).interval(counts)
        conf = np.atleast_1d(1.0 - (np.asarray(hi, dtype=float) - np.asarray(lo, dtype=float)))
        sure = (conf >= self.insufficient_below) & (conf > self.min_confidence)
        action = np.full(worth.shape, "neutral", dtype=object)
        action[sure & (worth < self.demote_below)] = "demote"
        action[sure & (worth > self.promote_above)] = "promote"
        return action, worth, conf

    def reason(self, action: str, worth: float, confidence: float) -> str:
        """Why ``action`` (``"promote"`` or ``"demote"``) was decided at ``worth`` and ``confidence``."""
        if action == "promote":
            return f"worth {worth:.3f} > {self.promote_above:g} and confidence {confidence:.3f} > {self.min_confidence:g}"
        return f"worth {worth:.3f} < {self.demote_below:g} and confidence {confidence:.3f} > {self.min_confidence:g}"


@dataclass(frozen=True)
class DeprecationRule:
    """Note 004's test: deprecate when evidence >= ``min_evidence`` and worth < ``threshold``.

    Examples
    --------
    >>> rule = DeprecationRule()
    >>> rule.check(Counts(success=1.0, failure=4.0, n=5)).action
    'deprecate'
    >>> print(rule.check(Counts(success=1.0, failure=3.0, n=4)).reason)
    evidence 4 < min_evidence 5: keep
    """

    min_evidence: float = 5.0
    threshold: float = 0.3
    evidence: str = "weighted"

    def check(self, counts: Counts) -> Decision:
        """``deprecate`` or ``keep`` for ``counts``, with the reason and numbers."""
        check_unit(self.evidence)
        check_counts(counts, Counts)
        min_ev = _number(self.min_evidence, "min_evidence", 0.0)
        threshold = _number(self.threshold, "threshold", 0.0, 1.0)
        worth = float(RawWorth().value(counts))
        v = float(evidence_of(counts, self.evidence))
        numbers = {"worth": worth, "evidence": v, "min_evidence": min_ev, "threshold": threshold}
        if v < min_ev:
            return Decision("keep", f"evidence {v:g} < min_evidence {min_ev:g}: keep", numbers)
        if worth < threshold:
            return Decision("deprecate", self.reason(worth, v), numbers)
        return Decision("keep", f"worth {worth:.3f} >= {threshold:g}: keep", numbers)

    def reason(self, worth: float, evidence: float) -> str:
        """Why a memory of ``worth`` with ``evidence`` is deprecated."""
        return f"worth {worth:.3f} < {self.threshold:g} with evidence {evidence:g} >= {self.min_evidence:g}"
