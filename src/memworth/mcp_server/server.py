"""The MCP server of one store and one namespace: its tools, its memory resource, the SDK glue.

The SDK runs tools on worker threads and the store is not thread-safe, so every store
call holds one lock, as in the HTTP API. A memworth error, or an argument a tool's schema
refuses, becomes a tool error whose text is ``<ErrorType>: <field>: <reason>``.
"""

from __future__ import annotations

import inspect
import json
import threading
from collections.abc import Callable, Iterable
from typing import Annotated, Any, Literal, TypeVar
from urllib.parse import quote, unquote

import pydantic
from mcp.server.lowlevel.helper_types import ReadResourceContents
from mcp.server.mcpserver import Context, MCPServer, ResourceSecurity
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError
from mcp_types import CallToolResult, InputRequiredResult, ToolAnnotations
from pydantic import AnyUrl, Field

from memworth import __version__
from memworth.errors import MemworthError, UnknownMemoryError, ValidationError
from memworth.mcp_server.views import (
    CreditedView,
    DecisionView,
    GovernanceView,
    MemoryView,
    OutcomeView,
    ProposalView,
    QueueView,
    RecalledView,
    RecallView,
    WorthView,
    memory_view,
)
from memworth.store import MemoryStore
from memworth.validation import MAX_K, MAX_REASON, MAX_TEXT, check_name

__all__ = ["MEMORY_PREFIX", "MEMORY_TEMPLATE", "create_server", "memory_uri", "uri_memory_id"]

_T = TypeVar("_T")
_V = TypeVar("_V", bound=pydantic.BaseModel)

INSTRUCTIONS = """Governed long-term memory. Call `recall` before a task to get memories that
worked before (each with its worth: the share of episodes it took part in that succeeded),
then `report_outcome` with the episode id once you know whether the task succeeded:
that outcome is what teaches the store which memories help. `remember` stores a new
memory; `worth` explains one; `governance_proposals` lists memories to promote, demote,
suppress, deprecate or re-verify."""

MEMORY_PREFIX = "memworth://memories/"
MEMORY_TEMPLATE = MEMORY_PREFIX + "{memory_id}"
SETTINGS_URI = "memworth://settings"
MEMORY_DESCRIPTION = (
    "One memory as JSON: text, metadata, provenance, counts, worth, class, status, standing. "
    "The id goes in the URI percent-encoded as one segment (RFC 6570 simple expansion): "
    "the memory 'notes/2024 café' is memworth://memories/notes%2F2024%20caf%C3%A9."
)


def memory_uri(memory_id: str) -> str:
    """The URI of a memory's resource: its id percent-encoded as one segment.

    Every character but ``A-Z a-z 0-9 - . _ ~`` is encoded (``/`` as ``%2F``, ``%`` as
    ``%25``, a space as ``%20``, Unicode as its UTF-8 bytes), as RFC 6570 expands
    ``{memory_id}``; the ids ``.`` and ``..`` are encoded too (``%2E``), which clients
    would otherwise drop as dot segments. The same encoding as the HTTP API's paths.

    Examples
    --------
    >>> memory_uri("notes/2024 café")
    'memworth://memories/notes%2F2024%20caf%C3%A9'
    >>> memory_uri("50%"), memory_uri("..")
    ('memworth://memories/50%25', 'memworth://memories/%2E%2E')
    """
    if memory_id in (".", ".."):
        return MEMORY_PREFIX + "%2E" * len(memory_id)
    return MEMORY_PREFIX + quote(memory_id, safe="")


def uri_memory_id(uri: str) -> str:
    """The memory id a memory URI names: everything after :data:`MEMORY_PREFIX`, percent-decoded once.

    An unencoded ``/`` (or ``?``, ``#``, space) is read as part of the id: a memory has no
    sub-resources, so ``memworth://memories/a/b`` can only mean the memory ``a/b``.

    Examples
    --------
    >>> uri_memory_id("memworth://memories/notes%2F2024%20caf%C3%A9"), uri_memory_id("memworth://memories/a/b")
    ('notes/2024 café', 'a/b')
    >>> uri_memory_id("memworth://memories/%FF")
    Traceback (most recent call last):
    ...
    memworth.errors.ValidationError: memory_id: must be UTF-8 once percent-decoded, got '%FF'
    """
    segment = uri.removeprefix(MEMORY_PREFIX)
    try:
        return unquote(segment, errors="strict")
    except UnicodeDecodeError:
        raise ValidationError("memory_id", f"must be UTF-8 once percent-decoded, got {segment!r}") from None


# -- the server ----------------------------------------------------------------------------


class _Server(MCPServer):
    """MCPServer whose argument errors read like the store's: ``ValidationError: k: <reason>``.

    An argument a tool does not declare is refused, as the HTTP API refuses an unknown
    field, rather than dropped: ``governance_proposals(theta_low=0.3)`` would otherwise
    answer under the store's own policy as if the setting had been taken.

    A memory URI is read in its canonical form (:func:`memory_uri` of the id it names), so
    an id holding "/", "?", "#", spaces or raw Unicode reaches the memory resource whether
    or not the client encoded them, and one that is not UTF-8 once decoded is refused.
    """

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        schema = next((t.input_schema for t in await self.list_tools() if t.name == name), None)
        declared = sorted((schema or {}).get("properties", {}))
        unknown = [] if schema is None else sorted(set(arguments) - set(declared))
        if unknown:  # (an unknown tool is left to the SDK's own error)
            takes = ", ".join(declared) or "no arguments"
            raise ToolError(
                f"Error executing tool {name}: ValidationError: {unknown[0]}: not an argument of {name} (takes: {takes})"
            )
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(cause, pydantic.ValidationError) and cause.errors():
                first = cause.errors()[0]
                field = ".".join(str(part) for part in first["loc"]) or "arguments"
                raise ToolError(f"Error executing tool {name}: ValidationError: {field}: {first['msg']}") from cause
            raise

    async def read_resource(
        self, uri: AnyUrl | str, context: Context[Any, Any] | None = None
    ) -> Iterable[ReadResourceContents] | InputRequiredResult:
        text = str(uri)
        if text.startswith(MEMORY_PREFIX):
            try:
                text = memory_uri(uri_memory_id(text))
            except ValidationError as exc:
                raise ResourceError(str(_tool_error(exc, "memory_id"))) from None
        return await super().read_resource(text, context)


def _tool_error(exc: MemworthError, field: str) -> ToolError:
    if isinstance(exc, ValidationError):
        return ToolError(f"{type(exc).__name__}: {exc.field}: {exc.reason}")
    return ToolError(f"{type(exc).__name__}: {field}: {exc}")


Text = Annotated[str, Field(min_length=1, max_length=MAX_TEXT)]
Id = Annotated[str, Field(min_length=1, max_length=200, description="memory id")]
Reason = Annotated[str, Field(min_length=1, json_schema_extra={"maxLength": MAX_REASON}, description="why (kept in the audit log)")]
Actor = Annotated[str, Field(min_length=1, max_length=200, description="who asked (kept in the audit log)")]
Labels = list[str] | None


def create_server(store: MemoryStore, *, namespace: str = "default") -> MCPServer:
    """An MCP server whose tools read and write ``namespace`` of ``store`` (which it does not close).

    Parameters
    ----------
    store
        The store to serve; one server owns it (its calls are serialised by one lock).
    namespace
        The only namespace the tools see.

    Examples
    --------
    >>> import asyncio
    >>> from memworth import HashingEncoder, MemoryStore
    >>> store = MemoryStore.open("memory://", encoder=HashingEncoder(), seed=0)
    >>> server = create_server(store)
    >>> print(" ".join(sorted(t.name for t in asyncio.run(server.list_tools()))))
    edit_memory forget_memory governance_proposals pin_memory recall remember report_outcome resolve_memory set_memory_status unpin_memory verification_queue worth
    >>> r = asyncio.run(server.call_tool("remember", {"text": "Reverse a list with [::-1].", "id": "rev"}))
    >>> r.structured_content["worth"], r.structured_content["class"]
    (0.5, 'uncertain')
    >>> asyncio.run(server.call_tool("remember", {"text": "   "}))
    Traceback (most recent call last):
    ...
    mcp.server.mcpserver.exceptions.ToolError: Error executing tool remember: ValidationError: text: must not be empty
    >>> store.close()
    """
    if not isinstance(store, MemoryStore):
        raise ValidationError("store", f"must be a MemoryStore, got {type(store).__name__}")
    check_name(namespace, "namespace")  # refused now, not at the first call
    lock = threading.Lock()
    server = _Server("memworth", instructions=INSTRUCTIONS, version=__version__, log_level="WARNING")

    def call(fn: Callable[[], _T], field: str) -> _T:
        """Run one store call under the lock; a memworth error becomes a tool error naming ``field``."""
        with lock:
            try:
                return fn()
            except MemworthError as exc:
                raise _tool_error(exc, field) from None

    def change(fn: Callable[[], _V], field: str | Callable[[MemworthError], str]) -> _V:
        """A tool that changes something: ``fn`` makes the change and builds its answer (a view),
        rendered to JSON inside one transaction of the store, so the change is kept only once
        its answer is ready (a failure to answer rolls it back whole). A memworth error becomes
        a tool error naming ``field`` (or the field ``field(error)`` names)."""
        with lock:
            try:
                with store.transaction():
                    view = fn()
                    view.model_dump_json()  # what the tool answers, shown to render before the commit
                    return view
            except MemworthError as exc:
                raise _tool_error(exc, field if isinstance(field, str) else field(exc)) from None

    def tool(annotations: ToolAnnotations) -> Callable[[Callable[..., _T]], Callable[..., _T]]:
        """Register a tool, its docstring (dedented) as the description the model reads."""

        def add(fn: Callable[..., _T]) -> Callable[..., _T]:
            server.add_tool(fn, description=inspect.cleandoc(fn.__doc__ or ""), annotations=annotations)
            return fn

        return add

    writes = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False)
    reads = ToolAnnotations(read_only_hint=True, open_world_hint=False)

    @tool(writes)
    def remember(
        text: Annotated[Text, Field(description="the memory itself, 1-32768 characters")],
        id: Annotated[str | None, Field(description="its id (default: a random one)")] = None,
        metadata: Annotated[dict[str, Any] | None, Field(description="any JSON object kept with it")] = None,
        contexts: Annotated[Labels, Field(description="context labels, e.g. the task type")] = None,
        derived_from: Annotated[Labels, Field(description="ids of memories it was derived from")] = None,
        part_of: Annotated[Labels, Field(description="ids of memories it is part of")] = None,
        ttl: Annotated[
            float | None,
            Field(gt=0, strict=True, description="seconds it lives (default: the namespace's; else forever)"),
        ] = None,
    ) -> MemoryView:
        """Store one memory. It starts at worth 0.5 (no evidence) and earns worth from the outcomes
        of the episodes that recall it; outcomes also credit the memories it was derived from."""
        linked = {"derived_from": derived_from or [], "part_of": part_of or []}

        def field(exc: MemworthError) -> str:
            if isinstance(exc, UnknownMemoryError):
                return next((k for k, ids in linked.items() if exc.memory_id in ids), "id")
            return "id"

        def add() -> MemoryView:
            m = store.add(
                text,
                id=id,
                namespace=namespace,
                metadata=metadata,
                contexts=contexts,
                derived_from=derived_from,
                part_of=part_of,
                ttl=ttl,
            )
            return memory_view(store, m)

        return change(add, field)

    @tool(writes)
    def recall(
        query: Annotated[Text, Field(description="what you are looking for")],
        k: Annotated[int, Field(ge=1, le=MAX_K, strict=True, description="how many memories")] = 4,
        context: Annotated[str | None, Field(min_length=1, max_length=200, description="context label")] = None,
        tier: Annotated[Literal["all", "hot"], Field(description="'hot': only the proven memories")] = "all",
        where: Annotated[
            dict[str, Any] | None,
            Field(
                description='only memories that match: {"metadata": {key: value or {"gte": x, "lt": y} or'
                ' {"in": [...]}}, "contexts": [labels, any of], "status": [...], "standing": [...]}'
            ),
        ] = None,
    ) -> RecallView:
        """The k best active memories for a query, ranked by similarity and worth, and the id of
        the episode that logs this recall: report its outcome with report_outcome."""
        r = call(lambda: store.recall(query, k, context=context, namespace=namespace, tier=tier, where=where), "query")
        results = [RecalledView.model_validate(x.row()) for x in r]
        return RecallView(episode=r.episode.id, results=results, diagnostics=r.diagnostics)

    @tool(writes)
    def report_outcome(
        episode: Annotated[str, Field(min_length=1, max_length=200, description="the episode id recall returned")],
        outcome: Annotated[Literal["success", "failure"], Field(description="did the task succeed?")],
        source: Annotated[
            str, Field(description="explicit (a verdict, a test: counts 1), implicit (0.5), heuristic (0.2)")
        ] = "explicit",
        confidence: Annotated[
            float | None, Field(gt=0, le=1, strict=True, description="override the source's confidence")
        ] = None,
        used: Annotated[
            list[Annotated[str, Field(min_length=1, max_length=200)]] | None,
            Field(
                max_length=1000,
                description="ids of the recalled memories you actually used (e.g. the note whose answer you gave):"
                " only they are credited; leave out to credit every recalled memory",
            ),
        ] = None,
    ) -> OutcomeView:
        """Record whether the task behind a recall succeeded. The memories the episode retrieved
        share the credit (only those named in ``used``, when given); an episode takes one outcome only."""

        def record() -> OutcomeView:
            store.record(episode, outcome, source=source, confidence=confidence, namespace=namespace, used=used)
            conf = store.sources[source] if confidence is None else confidence
            ep = store.backend.episodes([episode], namespace=namespace)[episode]
            found = {m.id: m for m in store.backend.memories(namespace, [i.memory_id for i in ep.items])}
            credited = [
                CreditedView(id=m.id, worth=store.taxonomy.classify(m.counts).worth, retrievals=m.counts.n)
                for m in (found[i.memory_id] for i in ep.items if i.memory_id in found and i.weight > 0)
            ]
            return OutcomeView(episode=episode, outcome=outcome, source=source, confidence=conf, memories=credited)

        return change(record, "episode")

    @tool(reads)
    def worth(id: Annotated[str, Field(min_length=1, max_length=200, description="memory id")]) -> WorthView:
        """A memory's worth with its 95% interval, evidence, value class, status, standing, and the
        governance change it would get now (if any)."""

        def read() -> WorthView:
            return WorthView.model_validate(store.report(id, namespace=namespace).row())

        return call(read, "id")

    @tool(reads)
    def verification_queue() -> QueueView:
        """Memories quarantined for re-verification (recall serves them only as marked probes),
        each with its worth, evidence and why it was flagged. Resolve one with resolve_memory."""
        reports = call(lambda: store.queue(namespace=namespace), "namespace")
        return QueueView(namespace=namespace, memories=[WorthView.model_validate(r.row()) for r in reports])

    @tool(writes)
    def resolve_memory(
        id: Annotated[str, Field(min_length=1, max_length=200, description="memory id")],
        verdict: Annotated[
            Literal["confirmed", "stale", "edited"],
            Field(description="confirmed: still right; stale: take it out of recall; edited: replace its text"),
        ],
        reason: Annotated[str, Field(min_length=1, json_schema_extra={"maxLength": MAX_REASON}, description="why (kept in the audit log)")],
        text: Annotated[str | None, Field(description="with edited: the corrected text")] = None,
        new_id: Annotated[
            str | None, Field(min_length=1, max_length=200, description="with edited: the new memory's id")
        ] = None,
        status: Annotated[
            Literal["suppressed", "deprecated"] | None,
            Field(description="with stale: suppressed (the default) or deprecated"),
        ] = None,
        actor: Actor = "mcp",
    ) -> DecisionView:
        """Resolve a quarantined memory. The decision is audited, can be undone with a restore,
        and sticks: governance proposes nothing for the memory until new evidence comes."""
        return change(
            lambda: DecisionView.of(
                store.resolve(
                    id,
                    verdict,
                    reason=reason,
                    text=text,
                    new_id=new_id,
                    status=status,
                    actor=actor,
                    namespace=namespace,
                )
            ),
            "id",
        )

    @tool(writes)
    def pin_memory(
        id: Annotated[str, Field(min_length=1, max_length=200, description="memory id")],
        reason: Annotated[str, Field(min_length=1, json_schema_extra={"maxLength": MAX_REASON}, description="why (kept in the audit log)")],
        actor: Actor = "mcp",
    ) -> DecisionView:
        """Keep governance away from a memory (no proposals for it) until it is unpinned."""
        return change(lambda: DecisionView.of(store.pin(id, reason=reason, actor=actor, namespace=namespace)), "id")

    @tool(writes)
    def unpin_memory(
        id: Annotated[str, Field(min_length=1, max_length=200, description="memory id")],
        reason: Annotated[str, Field(min_length=1, json_schema_extra={"maxLength": MAX_REASON}, description="why (kept in the audit log)")],
        actor: Actor = "mcp",
    ) -> DecisionView:
        """End a memory's pin, so governance may propose changes for it again."""
        return change(lambda: DecisionView.of(store.unpin(id, reason=reason, actor=actor, namespace=namespace)), "id")

    destroys = ToolAnnotations(
        read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False
    )

    @tool(destroys)
    def forget_memory(id: Id, reason: Reason, actor: Actor = "mcp") -> DecisionView:
        """Erase a memory for good: its text, embedding and metadata are deleted and cannot be
        recovered. Only a tombstone stays (the id, who, when, why). Use it when a user asks for
        their data to be forgotten or a memory must not exist any more; to take a memory out of
        recall reversibly, use set_memory_status instead."""
        return change(
            lambda: DecisionView.of(store.delete(id, reason=reason, actor=actor, namespace=namespace)), "id"
        )

    @tool(writes)
    def edit_memory(
        id: Id,
        text: Annotated[Text, Field(description="the corrected text")],
        reason: Reason,
        new_id: Annotated[str | None, Field(min_length=1, max_length=200, description="the new version's id")] = None,
        keep_old: Annotated[bool, Field(strict=True, description="false: erase the old version")] = True,
        actor: Actor = "mcp",
    ) -> DecisionView:
        """Replace a memory's text. The new text becomes a new memory (re-embedded, worth starting
        afresh) derived from the old one, which is archived with its counters (or erased with
        keep_old false). The answer's new field is 'archived'; replaced_by names the new id."""
        return change(
            lambda: DecisionView.of(
                store.edit(id, text, reason=reason, actor=actor, new_id=new_id, keep_old=keep_old, namespace=namespace)
            ),
            "id",
        )

    @tool(writes)
    def set_memory_status(
        id: Id,
        reason: Reason,
        status: Annotated[
            Literal["active", "suppressed", "deprecated", "archived"] | None,
            Field(description="recall returns only active memories"),
        ] = None,
        standing: Annotated[
            Literal["normal", "promoted", "demoted", "re-verify"] | None,
            Field(description="re-verify quarantines it until a verdict"),
        ] = None,
        actor: Actor = "mcp",
    ) -> DecisionView:
        """Set a memory's status or its standing by hand (give exactly one). Audited, reversible
        with a restore, and it sticks: governance proposes nothing for it until new evidence."""
        if (status is None) == (standing is None):
            raise ToolError("ValidationError: status: give exactly one of status and standing")
        if status is not None:
            chosen = status
            return change(
                lambda: DecisionView.of(store.set_status(id, chosen, reason=reason, actor=actor, namespace=namespace)),
                "id",
            )
        level = str(standing)
        return change(
            lambda: DecisionView.of(store.set_standing(id, level, reason=reason, actor=actor, namespace=namespace)),
            "id",
        )

    @tool(reads)
    def governance_proposals() -> GovernanceView:
        """What governance proposes for every memory (promote, demote, suppress, deprecate,
        re-verify), each with its reason and numbers. Proposes only: nothing is changed."""
        report = call(lambda: store.govern(apply=False, namespace=namespace), "namespace")
        proposals = [ProposalView(**p.__dict__) for p in report.proposals]
        guard = None if report.guard is None else report.guard.row()
        return GovernanceView(namespace=namespace, proposals=proposals, applied=False, guard=guard)

    @server.resource(
        MEMORY_TEMPLATE,
        name="memory",
        description=MEMORY_DESCRIPTION,
        mime_type="application/json",
        # An id is looked up as it is, never joined to a path: "..", "/x" or "C:x" are ids like any other.
        security=ResourceSecurity(exempt_params=frozenset({"memory_id"})),
    )
    def memory(memory_id: str) -> str:
        """One memory as JSON (``memory_id`` arrives percent-decoded, see :func:`memory_uri`)."""
        with lock:
            try:
                m = store.get(memory_id, namespace=namespace)
            except UnknownMemoryError as exc:
                raise ResourceNotFoundError(str(exc)) from None
            except MemworthError as exc:
                raise ResourceError(str(_tool_error(exc, "memory_id"))) from None
            return memory_view(store, m).model_dump_json(by_alias=True)

    @server.resource(
        SETTINGS_URI,
        name="settings",
        description="The store's settings in force and their version (memworth config show; GET /v1/config).",
        mime_type="application/json",
    )
    def settings() -> str:
        """The store's settings as JSON: the shape every face shows (:meth:`MemoryStore.config`)."""
        with lock:
            return json.dumps(store.config(), sort_keys=True)

    return server
