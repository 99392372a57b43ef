"""What the MCP tools return: pydantic models, so that each tool declares its output schema."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from memworth.store import Memory, MemoryStore
from memworth.store.records import AuditEntry

__all__ = [
    "CountsView",
    "CreditedView",
    "GovernanceView",
    "IntervalView",
    "MemoryView",
    "OutcomeView",
    "ProposalView",
    "RecallView",
    "RecalledView",
    "WorthView",
    "counts_view",
    "memory_view",
]


class _View(BaseModel):
    model_config = ConfigDict(populate_by_name=True)


class CountsView(_View):
    success: float = Field(description="hits+: credit from successful episodes")
    failure: float = Field(description="hits-: credit from failed episodes")
    retrievals: float = Field(description="episodes with an outcome that retrieved this memory")


class MemoryView(_View):
    id: str
    text: str
    metadata: dict[str, Any]
    contexts: list[str]
    derived_from: list[str]
    part_of: list[str]
    status: str = Field(description="active, suppressed, deprecated or archived; recall returns only active")
    standing: str = Field(description="normal, promoted, demoted or re-verify")
    created: float
    updated: float
    counts: CountsView
    worth: float = Field(description="hits+ / (hits+ + hits-); 0.5 with no evidence")
    value_class: str = Field(
        validation_alias="class",
        serialization_alias="class",
        description="high, mixed, low or uncertain (too little evidence)",
    )
    expires: float | None = Field(default=None, description="when it expires (seconds since the epoch); null: never")
    expired: bool = Field(default=False, description="its time to live ran out; the next recall erases it")


class RecalledView(_View):
    id: str
    text: str
    similarity: float = Field(description="cosine similarity to the query")
    worth: float
    lower: float = Field(description="lower end of the 95% Wilson interval of worth")
    upper: float = Field(description="upper end of the 95% Wilson interval of worth")
    value_class: str = Field(validation_alias="class", serialization_alias="class")
    score: float = Field(description="the ranking score (similarity and worth blended)")
    propensity: float = Field(description="probability that recall picked this memory")
    explored: bool = Field(description="picked by the exploration floor, not by score")
    probe: bool = Field(
        default=False, description="a memory quarantined for re-verification, served as a test: treat it with doubt"
    )


class RecallView(_View):
    episode: str = Field(description="pass to report_outcome once the task's outcome is known")
    results: list[RecalledView]
    diagnostics: dict[str, Any]


class CreditedView(_View):
    id: str
    worth: float
    retrievals: float


class OutcomeView(_View):
    episode: str
    outcome: Literal["success", "failure"]
    source: str
    confidence: float = Field(description="how much this outcome counted, in (0, 1]")
    memories: list[CreditedView] = Field(description="the episode's memories, with their worth after this outcome")


class IntervalView(_View):
    lower: float
    upper: float
    method: str


class ProposalView(_View):
    memory_id: str
    action: str = Field(description="promote, demote, suppress, deprecate or re-verify")
    field: str = Field(description="status or standing")
    old: str
    new: str
    reason: str
    numbers: dict[str, Any] = Field(description="the evidence behind the proposal")


class PinView(_View):
    until: float | None = Field(
        description="retrievals the memory must reach before governance proposes again (null: until unpinned)"
    )
    audit_seq: int
    action: str
    reason: str


class WorthView(_View):
    """:meth:`memworth.store.report.MemoryReport.row`, field for field (the HTTP ``/worth`` body too)."""

    id: str
    namespace: str
    worth: float
    value_class: str = Field(validation_alias="class", serialization_alias="class")
    class_reason: str
    evidence: float = Field(description="retrievals with an outcome (what min_evidence is compared to)")
    counts: CountsView
    interval: IntervalView
    posterior_mean: float = Field(description="mean of the Beta(1 + hits+, 1 + hits-) posterior")
    status: str
    standing: str
    hot: bool = Field(description="eligible for the hot tier (active, worth >= 0.5, enough evidence)")
    may_consolidate: bool = Field(description="False for high-value memories, which are kept as they are")
    proposal: ProposalView | None = Field(description="what governance would change now, if anything")
    pin: PinView | None = Field(default=None, description="a person's decision that holds governance back")
    held: ProposalView | None = Field(default=None, description="the proposal the pin holds back")


class QueueView(_View):
    namespace: str
    memories: list[WorthView] = Field(description="quarantined memories awaiting verification, with their reports")


class DecisionView(_View):
    seq: int = Field(description="the audit entry's number (restore it with memworth restore)")
    memory_id: str
    action: str
    field: str
    old: str
    new: str
    reason: str
    actor: str | None = Field(default=None, description="who made the change, when known")
    replaced_by: str | None = Field(default=None, description="an edit: the id of the new version")

    @classmethod
    def of(cls, entry: AuditEntry) -> DecisionView:
        """The view of an audit entry a tool's decision made."""
        extra = {"actor": entry.settings.get("actor"), "replaced_by": entry.settings.get("replaced_by")}
        fields: dict[str, Any] = {name: getattr(entry, name) for name in cls.model_fields if name not in extra}
        return cls.model_validate(fields | extra)


class GovernanceView(_View):
    namespace: str
    proposals: list[ProposalView]
    applied: bool = Field(description="always false: this tool only proposes")
    guard: dict[str, Any] | None = Field(
        default=None,
        description="the holdout guard: fired=true means governed success fell below holdout success "
        "with confidence; governance then applies nothing and proposes rollbacks (null: no holdout share)",
    )


def counts_view(m: Memory) -> CountsView:
    """The counts of ``m`` as the tools show them."""
    return CountsView(success=m.counts.success, failure=m.counts.failure, retrievals=m.counts.n)


def memory_view(store: MemoryStore, m: Memory) -> MemoryView:
    """``m`` with its counts, worth and value class, as ``remember`` and the memory resource show it."""
    klass = store.taxonomy.classify(m.counts)
    return MemoryView(
        id=m.id,
        text=m.text,
        metadata=m.metadata,
        contexts=list(m.contexts),
        derived_from=list(m.derived_from),
        part_of=list(m.part_of),
        status=m.status,
        standing=m.standing,
        created=m.created,
        updated=m.updated,
        counts=counts_view(m),
        worth=klass.worth,
        value_class=klass.value_class.value,
        expires=m.expires,
        expired=m.expired(store.clock()),
    )
