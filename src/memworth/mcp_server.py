"""``memworth mcp``: the memory store over the Model Context Protocol (official ``mcp`` SDK).

One process serves one store and one namespace, over stdio (an agent host launches it)
or streamable HTTP. Five tools mirror the HTTP API (:mod:`memworth.server.app`):

``remember``               store a memory (text, metadata, context labels, provenance)
``recall``                 the best memories for a query, and the episode that logs them
``report_outcome``         success or failure of a recalled episode: credits its memories
``worth``                  a memory's worth, interval, evidence, class, status, standing
``governance_proposals``   what governance would change, with the numbers; applies nothing

and a resource, ``memworth://memories/{memory_id}``, reads one memory as JSON.

Every memworth error, and every argument the tool schemas refuse, comes back as a tool
error (``isError``) whose text is ``<ErrorType>: <field>: <reason>``, never a traceback;
a refused call writes nothing. The store is not thread-safe and the SDK runs tools on
worker threads, so every store call holds one lock, as in the HTTP API.
"""

from __future__ import annotations

import argparse
import inspect
import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import Annotated, Any, Literal, TypeVar

import pydantic
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError
from mcp_types import CallToolResult, InputRequiredResult, ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field

from memworth import __version__
from memworth.errors import MemworthError, UnknownMemoryError, ValidationError
from memworth.estimators import BetaMean, WilsonBound
from memworth.store import Memory, MemoryStore
from memworth.store.store import MAX_K, MAX_TEXT, _name
from memworth.store_cli import DEFAULT_URL, _with_store

__all__ = ["create_server", "register"]

_T = TypeVar("_T")

LOOPBACK = ("127.0.0.1", "localhost", "::1")

INSTRUCTIONS = """Governed long-term memory. Call `recall` before a task to get memories that
worked before (each with its worth: the share of episodes it took part in that succeeded),
then `report_outcome` with the episode id once you know whether the task succeeded:
that outcome is what teaches the store which memories help. `remember` stores a new
memory; `worth` explains one; `governance_proposals` lists memories to promote, demote,
suppress, deprecate or re-verify."""


# -- what the tools return ------------------------------------------------------------------


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


class WorthView(_View):
    id: str
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
    proposal: ProposalView | None = Field(description="what governance would change now, if anything")


class GovernanceView(_View):
    namespace: str
    proposals: list[ProposalView]
    applied: bool = Field(description="always false: this tool only proposes")


# -- the server ----------------------------------------------------------------------------


class _Server(MCPServer):
    """MCPServer whose argument errors read like the store's: ``ValidationError: k: <reason>``.

    An argument a tool does not declare is refused, as the HTTP API refuses an unknown
    field, rather than dropped: ``governance_proposals(theta_low=0.3)`` would otherwise
    answer under the store's own policy as if the setting had been taken.
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


def _tool_error(exc: MemworthError, field: str) -> ToolError:
    if isinstance(exc, ValidationError):
        return ToolError(f"{type(exc).__name__}: {exc.field}: {exc.reason}")
    return ToolError(f"{type(exc).__name__}: {field}: {exc}")


def _counts(m: Memory) -> CountsView:
    return CountsView(success=m.counts.success, failure=m.counts.failure, retrievals=m.counts.n)


def _memory_view(store: MemoryStore, m: Memory) -> MemoryView:
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
        counts=_counts(m),
        worth=klass.worth,
        value_class=klass.value_class.value,
    )


Text = Annotated[str, Field(min_length=1, max_length=MAX_TEXT)]
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
    >>> sorted(t.name for t in asyncio.run(server.list_tools()))
    ['governance_proposals', 'recall', 'remember', 'report_outcome', 'worth']
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
    _name(namespace, "namespace")  # refused now, not at the first call
    lock = threading.Lock()
    server = _Server("memworth", instructions=INSTRUCTIONS, version=__version__, log_level="WARNING")

    def call(fn: Callable[[], _T], field: str) -> _T:
        """Run one store call under the lock; a memworth error becomes a tool error naming ``field``."""
        with lock:
            try:
                return fn()
            except MemworthError as exc:
                raise _tool_error(exc, field) from None

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
    ) -> MemoryView:
        """Store one memory. It starts at worth 0.5 (no evidence) and earns worth from the outcomes
        of the episodes that recall it; outcomes also credit the memories it was derived from."""
        item: dict[str, Any] = {"text": text, "id": id, "metadata": metadata, "contexts": contexts}
        item |= {"derived_from": derived_from, "part_of": part_of}
        linked = {"derived_from": derived_from or [], "part_of": part_of or []}
        with lock:
            try:
                m = store.add_many([item], namespace=namespace)[0]
            except UnknownMemoryError as exc:
                field = next((k for k, ids in linked.items() if exc.memory_id in ids), "id")
                raise _tool_error(exc, field) from None
            except MemworthError as exc:
                raise _tool_error(exc, "id") from None
            return _memory_view(store, m)

    @tool(writes)
    def recall(
        query: Annotated[Text, Field(description="what you are looking for")],
        k: Annotated[int, Field(ge=1, le=MAX_K, strict=True, description="how many memories")] = 4,
        context: Annotated[str | None, Field(min_length=1, max_length=200, description="context label")] = None,
        tier: Annotated[Literal["all", "hot"], Field(description="'hot': only the proven memories")] = "all",
    ) -> RecallView:
        """The k best active memories for a query, ranked by similarity and worth, and the id of
        the episode that logs this recall: report its outcome with report_outcome."""
        r = call(lambda: store.recall(query, k, context=context, namespace=namespace, tier=tier), "query")
        results = [
            RecalledView(
                id=x.memory.id,
                text=x.memory.text,
                similarity=x.similarity,
                worth=x.worth,
                lower=x.lower,
                upper=x.upper,
                value_class=x.value_class,
                score=x.score,
                propensity=x.propensity,
                explored=x.explored,
            )
            for x in r
        ]
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
    ) -> OutcomeView:
        """Record whether the task behind a recall succeeded. Every memory the episode retrieved
        gets the credit; an episode takes one outcome only."""

        def record() -> OutcomeView:
            store.record(episode, outcome, source=source, confidence=confidence, namespace=namespace)
            conf = store.sources[source] if confidence is None else confidence
            ep = store.backend.episodes([episode])[episode]
            found = {m.id: m for m in store.backend.memories(namespace, [i.memory_id for i in ep.items])}
            credited = [
                CreditedView(id=m.id, worth=store.taxonomy.classify(m.counts).worth, retrievals=m.counts.n)
                for m in (found[i.memory_id] for i in ep.items if i.memory_id in found)
            ]
            return OutcomeView(episode=episode, outcome=outcome, source=source, confidence=conf, memories=credited)

        return call(record, "episode")

    @tool(reads)
    def worth(id: Annotated[str, Field(min_length=1, max_length=200, description="memory id")]) -> WorthView:
        """A memory's worth with its 95% interval, evidence, value class, status, standing, and the
        governance change it would get now (if any)."""

        def read() -> WorthView:
            m = store.get(id, namespace=namespace)
            klass = store.taxonomy.classify(m.counts)
            lo, hi = WilsonBound(evidence="retrievals").interval(m.counts)
            p = store.policy.propose(m.id, m.counts, m.status, m.standing)
            return WorthView(
                id=m.id,
                worth=klass.worth,
                value_class=klass.value_class.value,
                class_reason=klass.reason,
                evidence=klass.evidence,
                counts=_counts(m),
                interval=IntervalView(lower=float(lo), upper=float(hi), method="wilson-95"),
                posterior_mean=float(BetaMean().value(m.counts)),
                status=m.status,
                standing=m.standing,
                hot=store.policy.hot(m.counts, m.status),
                proposal=None if p is None else ProposalView(**p.__dict__),
            )

        return call(read, "id")

    @tool(reads)
    def governance_proposals() -> GovernanceView:
        """What governance proposes for every memory (promote, demote, suppress, deprecate,
        re-verify), each with its reason and numbers. Proposes only: nothing is changed."""
        report = call(lambda: store.govern(apply=False, namespace=namespace), "namespace")
        proposals = [ProposalView(**p.__dict__) for p in report.proposals]
        return GovernanceView(namespace=namespace, proposals=proposals, applied=False)

    @server.resource("memworth://memories/{memory_id}", mime_type="application/json")
    def memory(memory_id: str) -> str:
        """One memory as JSON: text, metadata, provenance, counts, worth, class, status, standing."""
        with lock:
            try:
                m = store.get(memory_id, namespace=namespace)
            except UnknownMemoryError as exc:
                raise ResourceNotFoundError(str(exc)) from None
            except MemworthError as exc:
                raise ResourceError(str(_tool_error(exc, "memory_id"))) from None
            return _memory_view(store, m).model_dump_json(by_alias=True)

    return server


# -- the command ---------------------------------------------------------------------------


def register(commands: Any) -> None:
    """Add the ``mcp`` command to the ``memworth`` CLI (entry point ``memworth.commands``)."""
    text = "serve the store over the Model Context Protocol (stdio or streamable HTTP)"
    p = commands.add_parser("mcp", help=text, description=text[0].upper() + text[1:] + ".")
    p.add_argument(
        "--transport",
        choices=["stdio", "streamable-http"],
        default="stdio",
        help="stdio (an agent host launches the command) or streamable-http (default stdio)",
    )
    p.add_argument("--host", default="127.0.0.1", help="address for streamable-http (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="port for streamable-http (default 8000)")
    p.add_argument(
        "--store",
        default=os.environ.get("MEMWORTH_STORE", DEFAULT_URL),
        help=f"store URL (default: $MEMWORTH_STORE or {DEFAULT_URL})",
    )
    p.add_argument("--namespace", default="default", help="the one namespace the tools see (default: default)")
    p.add_argument(
        "--encoder",
        choices=["minilm", "hashing"],
        help="encoder for a new store (default: the store's own, else all-MiniLM-L6-v2)",
    )
    p.add_argument("--redis", default=os.environ.get("MEMWORTH_REDIS"), help="Redis URL of the hot tier (optional)")
    p.set_defaults(handler=_with_store(_serve))


def _serve(store: MemoryStore, args: argparse.Namespace) -> int:
    if not 0 < args.port < 65536:
        raise ValidationError("--port", f"must be from 1 to 65535, got {args.port}")
    server = create_server(store, namespace=args.namespace)
    where = store.backend.url.split("@")[-1]
    # SIGTERM ends the server like end of input does: uvicorn shuts down gracefully and
    # re-raises the signal, which lands here and unwinds, so the store is closed too.
    previous = signal.signal(signal.SIGTERM, _exit_on_sigterm)
    try:
        if args.transport == "stdio":  # standard output carries the protocol: say nothing there
            print(f"memworth mcp: {where}, namespace {args.namespace!r}, on stdio", file=sys.stderr, flush=True)
            server.run("stdio")
        else:
            url = f"http://{args.host}:{args.port}/mcp"
            print(f"memworth mcp: {where}, namespace {args.namespace!r}, on {url}", file=sys.stderr, flush=True)
            if args.host not in LOOPBACK:
                print(
                    f"memworth mcp: warning: no authentication; anyone who reaches {args.host}:{args.port} "
                    f"can read and write namespace {args.namespace!r}",
                    file=sys.stderr,
                    flush=True,
                )
            server.run("streamable-http", host=args.host, port=args.port)
    except SystemExit as stop:
        if stop.code != 0:
            raise
    finally:
        signal.signal(signal.SIGTERM, previous)
    return 0


def _exit_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(0)
