"""Governance: from a memory's evidence to a proposed change of its status or standing.

Pure: the store gathers counts and history, this module decides, the store applies and
audits. Rules, first match wins, for an ``active`` memory:

1. ``re-verify`` (standing): its last ``staleness_window`` retrievals succeeded at a rate
   more than ``staleness_drop`` below its lifetime worth and below ``theta_low``: it
   used to work and has stopped (the paper's staleness signal, section 6).
2. ``deprecate`` (status): evidence >= ``min_evidence`` retrievals and worth below
   ``deprecate_below`` (note 004's 0.3).
3. ``suppress`` (status): evidence >= ``min_evidence`` and worth below ``theta_low``
   (the paper's low-value class).
4. ``promote`` / ``demote`` (standing): note 003's decision rule, unless the memory is
   flagged for re-verification (a flag only a person clears).

Every proposal carries the numbers behind it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import asdict, dataclass
from typing import Any

from memworth.counts import Counts
from memworth.estimators import RawWorth
from memworth.policy import DecisionRule, Taxonomy, ValueClass

__all__ = ["GovernancePolicy", "Proposal"]

ACTIONS = {
    "re-verify": ("standing", "re-verify"),
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


@dataclass(frozen=True)
class GovernancePolicy:
    """Settings of the governance rules (defaults: the paper's and the notes' numbers).

    Examples
    --------
    >>> policy = GovernancePolicy()
    >>> p = policy.propose("old-fact", Counts(success=1.0, failure=4.0, n=20), "active", "normal")
    >>> p.action, p.new
    ('deprecate', 'deprecated')
    >>> print(p.reason)
    worth 0.200 < 0.3 with 20 retrievals >= 10
    >>> policy.propose("new-fact", Counts(success=1.0, failure=0.0, n=2), "active", "normal") is None
    True
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

    def settings(self) -> dict[str, Any]:
        """The settings as a plain dict, for the audit log."""
        return asdict(self)

    def taxonomy(self) -> Taxonomy:
        return Taxonomy(self.theta_high, self.theta_low, self.min_evidence, evidence="retrievals")

    def propose(
        self, memory_id: str, counts: Counts, status: str, standing: str, recent: Counts | None = None
    ) -> Proposal | None:
        """The change to propose for one memory, or ``None``. ``recent``: counts of its last retrievals."""
        if status != "active":
            return None
        worth = float(RawWorth().value(counts))
        numbers: dict[str, Any] = {"worth": round(worth, 6), "retrievals": counts.n, "evidence": counts.evidence}

        def make(action: str, reason: str) -> Proposal | None:
            fld, new = ACTIONS[action]
            old = status if fld == "status" else standing
            return None if old == new else Proposal(memory_id, action, fld, old, new, reason, numbers)

        if recent is not None and recent.n >= self.staleness_window:
            now = float(RawWorth().value(recent))
            numbers["recent_worth"] = round(now, 6)
            numbers["recent_retrievals"] = recent.n
            if now < worth - self.staleness_drop and now < self.theta_low:
                found = make(
                    "re-verify",
                    f"last {recent.n:g} retrievals at worth {now:.3f}, down from {worth:.3f} overall "
                    f"(drop > {self.staleness_drop:g}, below {self.theta_low:g})",
                )
                if found:
                    return found
        if counts.n >= self.min_evidence:
            if worth < self.deprecate_below:
                return make(
                    "deprecate",
                    f"worth {worth:.3f} < {self.deprecate_below:g} with {counts.n:g} retrievals >= {self.min_evidence:g}",
                )
            if self.taxonomy().classify(counts).value_class is ValueClass.LOW:
                return make(
                    "suppress",
                    f"low value: worth {worth:.3f} < theta_low {self.theta_low:g} with {counts.n:g} retrievals",
                )
        if standing == "re-verify":  # only a person (set_standing / restore) clears a re-verify flag
            return None
        rule = DecisionRule(self.promote_above, self.demote_below, self.min_confidence, evidence="retrievals")
        decision = rule.decide(counts)
        numbers["confidence"] = round(decision.numbers["confidence"], 6)
        if decision.action in ("promote", "demote"):
            return make(decision.action, decision.reason)
        return None

    def hot(self, counts: Counts, status: str) -> bool:
        """Hot-tier eligibility (note 003): active, worth >= ``hot_worth``, enough evidence."""
        return (
            status == "active" and counts.n >= self.min_evidence and float(RawWorth().value(counts)) >= self.hot_worth
        )

    def may_consolidate(self, counts: Counts) -> bool:
        """Consolidation gate (note 003): high-value memories are exempt from merging."""
        return self.taxonomy().classify(counts).value_class is not ValueClass.HIGH
