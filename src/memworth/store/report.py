"""One memory's report: the numbers, the class and the proposal every face shows.

:meth:`memworth.MemoryStore.report` builds it; the CLI, the HTTP API, the MCP server,
the dashboard and the sidecar all show this object (or its :meth:`MemoryReport.row`),
so they cannot disagree on a memory's worth, interval, class, hot-tier eligibility or
the change governance proposes for it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from memworth.counts import Counts, CountsTable
from memworth.estimators import BetaMean, RawWorth, WilsonBound
from memworth.governance import GovernancePolicy, Proposal
from memworth.store.decisions import Pin
from memworth.store.records import Memory

__all__ = ["INTERVAL", "MemoryReport", "Worth", "assess", "worth_of"]

INTERVAL = WilsonBound(evidence="retrievals")
"""The interval every face shows: Wilson 95% over retrievals (note 003's ranking bound)."""
INTERVAL_METHOD = "wilson-95"


@dataclass(frozen=True)
class Worth:
    """Worth, its interval and value class for a batch of counts (arrays, one entry per memory)."""

    worth: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    value_class: list[str]


def worth_of(policy: GovernancePolicy, table: CountsTable) -> Worth:
    """Worth, Wilson interval and the policy's value class for every row of ``table``.

    The one place recall results, lists and reports get these numbers from.

    Examples
    --------
    >>> from memworth.counts import CountsTable
    >>> import numpy as np
    >>> w = worth_of(GovernancePolicy(), CountsTable(np.array([9.0, 1.0]), np.array([1.0, 9.0]), np.array([10.0, 10.0])))
    >>> w.value_class
    ['high', 'low']
    """
    worth = np.asarray(RawWorth().value(table), dtype=float)  # computed once: the interval and class read it
    lo, hi = INTERVAL.interval(table, share=worth)
    classes = [str(c) for c in policy.taxonomy().classify_table(table, worth).tolist()]
    return Worth(worth, np.asarray(lo, dtype=float), np.asarray(hi, dtype=float), classes)


@dataclass(frozen=True)
class MemoryReport:
    """Everything governance knows about one memory now.

    ``proposal`` is what :meth:`memworth.MemoryStore.govern` would propose for it at this
    moment (the same function computes both), or ``None``.
    """

    memory: Memory
    worth: float
    lower: float
    upper: float
    posterior_mean: float
    value_class: str
    class_reason: str
    evidence: float
    hot: bool
    may_consolidate: bool
    proposal: Proposal | None
    pin: Pin | None = None
    """A person's decision that holds governance back (None: not pinned)."""
    held: Proposal | None = None
    """The proposal the pin holds back (it is not in :attr:`proposal`)."""

    @property
    def id(self) -> str:
        return self.memory.id

    @property
    def counts(self) -> Counts:
        return self.memory.counts

    @property
    def retrievals(self) -> float:
        return self.memory.counts.n

    @property
    def status(self) -> str:
        return self.memory.status

    @property
    def standing(self) -> str:
        return self.memory.standing

    def row(self) -> dict[str, Any]:
        """The report as plain JSON types: the one shape the CLI (``--json``), HTTP and MCP print."""
        m, c = self.memory, self.memory.counts
        p = self.proposal
        return {
            "id": m.id,
            "namespace": m.namespace,
            "worth": self.worth,
            "class": self.value_class,
            "class_reason": self.class_reason,
            "counts": {"success": c.success, "failure": c.failure, "retrievals": c.n},
            "evidence": self.evidence,
            "interval": {"lower": self.lower, "upper": self.upper, "method": INTERVAL_METHOD},
            "posterior_mean": self.posterior_mean,
            "status": m.status,
            "standing": m.standing,
            "hot": self.hot,
            "may_consolidate": self.may_consolidate,
            "proposal": _proposal_row(p),
            "pin": None if self.pin is None else self.pin.row(),
            "held": _proposal_row(self.held),
        }

    def _repr_html_(self) -> str:  # Jupyter
        from html import escape

        cells = [
            ("memory", self.memory.id),
            ("worth", f"{self.worth:.3f} [{self.lower:.3f}, {self.upper:.3f}]"),
            ("class", f"{self.value_class} ({self.class_reason})"),
            ("retrievals", f"{self.memory.counts.n:g}"),
            ("status / standing", f"{self.memory.status} / {self.memory.standing}"),
            ("proposal", "none" if self.proposal is None else f"{self.proposal.action}: {self.proposal.reason}"),
        ]
        body = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in cells)
        return f"<table>{body}</table>"


def _proposal_row(p: Proposal | None) -> dict[str, Any] | None:
    if p is None:
        return None
    return {
        "memory_id": p.memory_id,
        "action": p.action,
        "field": p.field,
        "old": p.old,
        "new": p.new,
        "reason": p.reason,
        "numbers": _plain(p.numbers),
    }


def assess(
    policy: GovernancePolicy,
    memory: Memory,
    proposal: Proposal | None,
    *,
    pin: Pin | None = None,
    held: Proposal | None = None,
) -> MemoryReport:
    """The report of ``memory`` under ``policy``, with the proposal governance computed for it
    (or the one ``pin`` holds back)."""
    c = memory.counts
    klass = policy.taxonomy().classify(c)
    lo, hi = INTERVAL.interval(c)
    return MemoryReport(
        memory=memory,
        worth=float(klass.worth),
        lower=float(lo),
        upper=float(hi),
        posterior_mean=float(BetaMean().value(c)),
        value_class=klass.value_class.value,
        class_reason=klass.reason,
        evidence=float(klass.evidence),
        hot=policy.hot(c, memory.status, memory.standing),
        may_consolidate=policy.may_consolidate(c),
        proposal=proposal,
        pin=pin,
        held=held,
    )


def _plain(value: Any) -> Any:
    """``value`` with numpy scalars and tuples turned into JSON types."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value
