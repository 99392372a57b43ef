"""The FastAPI app: store verbs as routes, one namespace per API key, one error shape.

Every error, whatever raised it, is answered as::

    {"ok": false, "error": {"type": "ValidationError", "field": "text", "reason": "...", "status": 422}}

Memworth errors carry their status on the class (:mod:`memworth.errors`: validation 422,
unknown id 404, conflict 409, rate limit 429, database unreachable 503); a missing, unknown,
revoked or expired key is 401 (with ``WWW-Authenticate: Bearer``), and so is a request carrying
two different keys; a read-only key asking for a change is 403 (:mod:`memworth.server.keys`);
a body over ``max_body`` bytes is 413. The OpenAPI document declares each of these for every
route that can answer it (:mod:`memworth.server.openapi`); a method a path does not take is
405 with ``Allow``.
Every route but ``/health`` and the OpenAPI document needs a key, and a key only ever
reads or writes its own namespace: the namespace comes from the key, never from the
request. A key the server has seen is checked from memory and confirmed in the store on the
route's own thread, so a revocation by any process holds on the next request
(:mod:`memworth.server.verified_keys`).

A memory id in a path is one percent-encoded segment (``/`` as ``%2F``; ``.`` and ``..``
as ``%2E`` and ``%2E%2E``), read as the client sent it: ``/v1/memories/a%2Fworth`` is the
memory ``a/worth``, ``/v1/memories/a/worth`` the worth of ``a`` (:mod:`memworth.server.ids`).

Any other error is a bug: it is logged (``memworth.server``) and answered 500 in the same
shape, and the connection stays open for the client's next request.

A write is kept only with its answer: every route that changes something runs the change and
renders its whole answer (validated and encoded as JSON) in one transaction of the store
(:meth:`memworth.MemoryStore.transaction`), which commits only once the answer is ready, so a
failure to answer (a 500) rolls the change back whole (:mod:`memworth.server.answers`). Recall (and the
sidecar's retrieve and retrieved) log an episode as they answer and are not held to it: an
episode whose answer failed has no outcome, which counts nothing, as for a client that never
reports one.

Requests run on a pool of store objects over the store's database
(:class:`memworth.server.pool.StorePool`; ``create_app(store, workers=N)``, ``memworth
serve --workers N``, default :data:`memworth.server.pool.DEFAULT_WORKERS` = 4, 1 over
``memory://``): each object is used by one thread at a time, a tenant with calls in flight
keeps its object (its calls run in order) and one with none takes the least busy, so one
tenant's long call (govern, replay, holdout) leaves the other tenants free objects.
``PUT /v1/config`` answers once the new settings are in force on every object.

The longest calls (govern, replay, the queue: :mod:`memworth.server.long_calls`) run in
worker processes with ``create_app(store, processes=N)`` (``memworth serve --processes N``,
default 1 over a database another process can open, else 0;
:mod:`memworth.server.processes`): a tenant's govern then holds no GIL other tenants' reads
need. The answers, errors and statuses are the same either way.
"""

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Annotated, Any, Literal, Self

from fastapi import Depends, FastAPI, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictFloat, model_validator
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from memworth import __version__
from memworth.errors import AuthError, MemworthError, NotAdminError
from memworth.server import long_calls
from memworth.server.answers import answered, rendered
from memworth.server.dashboard import dashboard_router
from memworth.server.group_commit import GroupCommit
from memworth.server.ids import RawIdPaths, path_id
from memworth.server.keys import check_key, key_hash, list_keys, presented, stored_key
from memworth.server.metrics import CONTENT_TYPE_LATEST, Metrics, TimedRoutes
from memworth.server.openapi import WWW_AUTHENTICATE, allowed_methods, declare_errors, document, errors
from memworth.server.pool import StorePool
from memworth.server.sidecar_routes import sidecar_router
from memworth.server.verified_keys import VerifiedKeys, confirmed, still_valid
from memworth.store import Memory, MemoryStore
from memworth.store.records import AuditEntry
from memworth.validation import MAX_K, MAX_PAGE, MAX_REASON, MAX_TEXT, check_actor

__all__ = ["create_app"]

MAX_BODY = 1 << 20  # bytes

_log = logging.getLogger("memworth.server")

PathId = Annotated[
    str,
    Path(description="the memory id as one percent-encoded path segment: '/' as %2F, '.' and '..' as %2E, %2E%2E"),
]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class NewMemory(_Strict):
    text: str = Field(min_length=1, max_length=MAX_TEXT)
    id: str | None = Field(default=None, min_length=1, max_length=200)
    metadata: dict[str, Any] | None = None
    contexts: list[str] | None = None
    derived_from: list[str] | None = None
    part_of: list[str] | None = None
    ttl: StrictFloat | None = Field(default=None, description="seconds to live (default: the namespace's)")


DEFAULT_PAGE = 100
"""Page size of a list route given a ``cursor`` but no ``limit``."""

MAX_BATCH = 10_000
"""Most items in one batch request (the body limit, 1 MB by default, usually binds first)."""


class NewMemories(_Strict):
    items: list[NewMemory] = Field(min_length=1, max_length=MAX_BATCH, description="the memories, all or none")


class MemoryChange(_Strict):
    """One change to a memory, audited: its ``text`` (a new version replaces it, see
    ``MemoryStore.edit``), its ``status`` or its ``standing``; exactly one of the three."""

    reason: str = Field(min_length=1, json_schema_extra={"maxLength": MAX_REASON})
    actor: str | None = Field(
        default=None, min_length=1, max_length=100, description="who asked (the key is named too)"
    )
    text: str | None = Field(default=None, min_length=1, max_length=MAX_TEXT)
    new_id: str | None = Field(default=None, min_length=1, max_length=200)
    keep_old: StrictBool = True
    status: Literal["active", "suppressed", "deprecated", "archived"] | None = None
    standing: Literal["normal", "promoted", "demoted", "re-verify"] | None = None

    @model_validator(mode="after")
    def _one_change(self) -> Self:
        given = [name for name in ("text", "status", "standing") if getattr(self, name) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of text, status, standing (got {', '.join(given) or 'none'})")
        if self.text is None and (self.new_id is not None or not self.keep_old):
            raise ValueError("new_id and keep_old go with text only")
        return self


class ExpireRequest(_Strict):
    list_only: StrictBool = Field(default=False, description="list the expired memories, erase nothing")


class TTLRequest(_Strict):
    ttl: StrictFloat | None = Field(description="seconds new memories of the namespace live; null: forever")


class RecallRequest(_Strict):
    query: str = Field(min_length=1, max_length=MAX_TEXT)
    k: int = Field(default=4, ge=1, le=MAX_K)
    context: str | None = Field(default=None, min_length=1, max_length=200)
    tier: Literal["all", "hot"] = "all"
    where: dict[str, Any] | None = Field(
        default=None,
        description='consider only matching memories: {"metadata": {key: value | {"gte": x, "lt": y} | {"in": [...]}},'
        ' "contexts": [...], "status": [...], "standing": [...]}',
    )


class _Outcome(_Strict):
    """An outcome as every face names it: ``"outcome": "success" | "failure"`` (as the MCP
    tool and the CLI take it); ``"success": true | false`` is still read. Exactly one of the
    two, strictly typed: ``"yes"``, ``1`` or ``"true"`` are refused, not coerced."""

    outcome: Literal["success", "failure"] | None = None
    success: StrictBool | None = None

    @model_validator(mode="after")
    def _one_outcome(self) -> Self:
        if (self.outcome is None) == (self.success is None):
            raise ValueError("give the outcome once: 'outcome': 'success' or 'failure' (or 'success': true/false)")
        return self

    @property
    def ok(self) -> bool:
        return self.outcome == "success" if self.outcome is not None else bool(self.success)


USED = Field(
    default=None,
    max_length=1000,
    description="the ids of the recalled memories the agent used: they share the credit, the others get none"
    " (left out: every recalled memory is credited); an id the episode did not recall, an empty list or an id"
    " named twice is refused",
)


class OutcomeRequest(_Outcome):
    source: str = Field(default="explicit", min_length=1, max_length=64)
    confidence: float | None = Field(default=None, gt=0, le=1)
    used: list[Annotated[str, Field(min_length=1, max_length=200)]] | None = USED


class OutcomeItem(_Outcome):
    episode: str = Field(min_length=1, max_length=200, description="the episode id recall returned")
    used: list[Annotated[str, Field(min_length=1, max_length=200)]] | None = USED


class OutcomeBatch(_Strict):
    outcomes: list[OutcomeItem] = Field(min_length=1, max_length=MAX_BATCH, description="one per episode, all or none")
    source: str = Field(default="explicit", min_length=1, max_length=64)
    confidence: float | None = Field(default=None, gt=0, le=1)


class VerifyRequest(_Outcome):
    pass


class GovernRequest(_Strict):
    apply: StrictBool = False  # true or false only, as the library's check_flag ("no" would read as true)


class ConfigChange(_Strict):
    changes: dict[str, Any] = Field(min_length=1, max_length=100)
    actor: str | None = Field(default=None, min_length=1, max_length=200)


class ResolveRequest(_Strict):
    verdict: Literal["confirmed", "stale", "edited"]
    reason: str = Field(min_length=1, json_schema_extra={"maxLength": MAX_REASON})
    text: str | None = Field(default=None, min_length=1, max_length=MAX_TEXT)
    new_id: str | None = Field(default=None, min_length=1, max_length=200)
    status: Literal["suppressed", "deprecated"] | None = None  # with stale (default suppressed)
    actor: str | None = Field(
        default=None, min_length=1, max_length=100, description="who decided (the key is named too)"
    )


class PinRequest(_Strict):
    reason: str = Field(min_length=1, json_schema_extra={"maxLength": MAX_REASON})
    actor: str | None = Field(
        default=None, min_length=1, max_length=100, description="who decided (the key is named too)"
    )


class RestoreRequest(_Strict):
    reason: str = Field(default="restored through the API", min_length=1, json_schema_extra={"maxLength": MAX_REASON})
    actor: str | None = Field(
        default=None, min_length=1, max_length=100, description="who decided (the key is named too)"
    )


def _error(
    status: int, kind: str, reason: str, field: str | None = None, headers: dict[str, str] | None = None
) -> JSONResponse:
    headers = dict(headers or {})
    if status == 401:
        headers.setdefault("WWW-Authenticate", WWW_AUTHENTICATE)  # RFC 9110: a 401 names the scheme to use
    return JSONResponse(
        {"ok": False, "error": {"type": kind, "field": field, "reason": reason, "status": status}},
        status_code=status,
        headers=headers,
    )


def _memory(store: MemoryStore, m: Memory) -> dict[str, Any]:
    klass = store.taxonomy.classify(m.counts)
    c = m.counts
    return {
        "id": m.id,
        "text": m.text,
        "metadata": m.metadata,
        "contexts": list(m.contexts),
        "derived_from": list(m.derived_from),
        "part_of": list(m.part_of),
        "status": m.status,
        "standing": m.standing,
        "created": m.created,
        "updated": m.updated,
        "counts": {"success": c.success, "failure": c.failure, "retrievals": c.n},
        "worth": klass.worth,
        "class": klass.value_class.value,
        "expires": m.expires,
        "expired": m.expired(store.clock()),
    }


class _BodyLimit:
    """Refuse request bodies over ``limit`` bytes (declared or streamed) with 413."""

    def __init__(self, app: Any, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(
        self, scope: dict[str, Any], receive: Callable[[], Awaitable[dict[str, Any]]], send: Any
    ) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.limit):
            await _error(413, "PayloadTooLarge", f"request body over {self.limit} bytes")(scope, receive, send)
            return
        seen = 0

        async def limited() -> dict[str, Any]:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.limit:
                raise _TooLarge(self.limit)
            return message

        try:
            await self.app(scope, limited, send)
        except _TooLarge:
            await _error(413, "PayloadTooLarge", f"request body over {self.limit} bytes")(scope, receive, send)


class _CatchAll:
    """Answer an error that no handler took (a bug) with the one JSON shape, status 500; log it.

    Starlette's last-resort handler sends its answer and then raises the error again, for
    the server to log; uvicorn then closes the connection, so a keep-alive client's next
    request on it is reset. Here the error ends with the answer: logged, answered 500,
    connection kept. An error after the answer has begun cannot be answered any more and
    goes on to the server, which closes the connection: the only honest end of a half-sent
    answer.
    """

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(
        self, scope: dict[str, Any], receive: Callable[[], Awaitable[dict[str, Any]]], send: Any
    ) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def watched(message: dict[str, Any]) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, watched)
        except Exception as exc:
            if started:
                raise
            _log.error("unexpected error answering %s %s", scope.get("method"), scope.get("path"), exc_info=exc)
            reason = f"unexpected {type(exc).__name__} (a bug in memworth; the server's log has the details)"
            await _error(500, "InternalError", reason)(scope, receive, send)


class _TooLarge(StarletteHTTPException):
    """A streamed body grew past the limit. An HTTPException, so that FastAPI, reading the body
    of a JSON route, passes it on (any other error there becomes its 400 "error parsing the body")."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"request body over {limit} bytes")


def create_app(
    store: MemoryStore,
    *,
    max_body: int = MAX_BODY,
    workers: int = 1,
    url: str | None = None,
    processes: int = 0,
    hot_tier: str | None = None,
) -> FastAPI:
    """The HTTP app over ``store`` (which it does not close), its requests run on ``workers``
    store objects over the store's database: ``store`` and ``workers - 1`` more, opened now and
    closed when the app shuts down (:class:`memworth.server.pool.StorePool`). With 1, every
    request waits for the one before it; ``memworth serve`` runs
    :data:`memworth.server.pool.DEFAULT_WORKERS`. ``url``: the URL ``store`` was opened with,
    needed when it holds a password (``store.backend.url`` hides it).

    ``processes``: worker processes for the long calls (:mod:`memworth.server.processes`),
    started at the first one and stopped when the app shuts down; 0 (default) runs them on the
    store objects. ``hot_tier``: the Redis URL of the store's hot tier, needed with processes
    when it holds a password."""
    pool = StorePool(store, workers, url=url, processes=processes, hot_tier=hot_tier)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        try:
            yield
        finally:
            pool.close()

    app = FastAPI(
        title="memworth", version=__version__, description="Memory Worth: governed agent memory.", lifespan=lifespan
    )
    app.state.pool = pool
    metrics = Metrics(lambda: pool.run(None, lambda s: s.backend.quarantined()))
    call = pool.run  # call(namespace, fn): fn(store object) on the tenant's object, under its lock
    committer = GroupCommit(pool)  # concurrent outcomes of a tenant share one commit

    verified = VerifiedKeys()

    async def key_namespace(request: Request, write: bool) -> str:
        # The two headers are read here, not declared as Header() parameters: FastAPI's parameter
        # machinery cost more per request than the key lookup itself. The OpenAPI document still
        # declares them on every keyed route (memworth.server.openapi.KEY_HEADERS). A key seen
        # before is checked from memory, with no thread of its own, and confirmed in the store on
        # the route's thread (memworth.server.verified_keys).
        headers = request.headers
        field, key = presented(headers.get("authorization"), headers.get("x-api-key"))
        digest = key_hash(key)
        info = verified.get(digest)
        if info is None:
            info = await run_in_threadpool(call, None, lambda s: stored_key(s, digest)) if digest else None
            if info is None:
                raise AuthError(field, "unknown API key")
            verified.keep(digest, info)
            verified.from_store()
        else:
            verified.from_memory(digest, field)
        check_key(info, field, write=write)
        request.state.key_name = info.name  # the audit log names the key a change came through
        request.state.key_admin = info.admin  # may change the store's settings
        return info.namespace

    def confirm(digest: str, field: str) -> None:
        """The key served from memory, read again on the route's thread: a revoked key stops here."""
        try:
            still_valid(call(None, lambda s: stored_key(s, digest)), field)
        except AuthError:
            verified.forget(digest)
            raise

    async def reader(request: Request) -> str:
        """The namespace of the request's key (any valid key may read)."""
        return await key_namespace(request, write=False)

    async def writer(request: Request) -> str:
        """The namespace of the request's key, which must not be read-only (the route changes something)."""
        return await key_namespace(request, write=True)

    def _actor(request: Request, given: str | None) -> str:
        """Who makes a change: the ``actor`` the request names, and the API key it came with."""
        key = f"api key {request.state.key_name}"
        return key if given is None else f"{given} ({key})"

    Reader = Annotated[str, Depends(reader)]
    Writer = Annotated[str, Depends(writer)]

    @app.exception_handler(MemworthError)
    async def memworth_error(request: Request, exc: MemworthError) -> JSONResponse:
        status = exc.status  # each error class carries its status (memworth.errors)
        metrics.errors.labels(type(exc).__name__, str(status)).inc()
        field = getattr(exc, "field", None)
        reason = getattr(exc, "reason", None) or str(exc)
        return _error(status, getattr(exc, "http_type", type(exc).__name__), reason, field)

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {"loc": (), "msg": "invalid request"}
        loc = [str(x) for x in first.get("loc", ()) if x not in ("body", "query", "path", "header")]
        return _error(422, "ValidationError", str(first.get("msg")), ".".join(loc) or None)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        kind = {401: "Unauthorized", 404: "NotFound", 405: "MethodNotAllowed", 413: "PayloadTooLarge"}.get(
            exc.status_code, "HTTPError"
        )
        if exc.status_code == 400:  # FastAPI could not read the body (bytes that are not UTF-8): the body is refused
            return _error(422, "ValidationError", "must be JSON (UTF-8 text)", "body")
        headers = dict(exc.headers or {})
        if exc.status_code == 405:  # every method the path takes, not only those of the first route matched
            headers["Allow"] = ", ".join(allowed_methods(app, dict(request.scope)))
        return _error(exc.status_code, kind, str(exc.detail), headers=headers)

    def write(
        namespace: str,
        work: Callable[[MemoryStore], Any],
        *,
        status: int = 200,
        counted: Callable[[Any], None] | None = None,
    ) -> Response:
        """``work(store object)``, a change, answered: the answer is rendered inside the change's
        transaction (:func:`answered`), so a change is kept only when its answer is ready, and
        a failure to answer leaves nothing changed. ``counted(content)`` counts the metrics of
        a committed change."""
        content, response = call(namespace, lambda s: answered(s, work, status))
        if counted is not None:
            counted(content)
        return response

    def entry_row(entry: AuditEntry) -> dict[str, Any]:
        """A change a person made through the API, answered as its audit entry."""
        return dict(entry.__dict__)

    def count_action(row: dict[str, Any]) -> None:
        metrics.actions.labels(row["action"]).inc()

    @app.get("/metrics", response_class=Response)
    def prometheus() -> Response:
        """Prometheus metrics: aggregates over every tenant, no ids or texts (so no key is needed)."""
        return Response(content=metrics.exposition(), media_type=CONTENT_TYPE_LATEST)

    @app.get("/health")
    def health() -> dict[str, Any]:
        ok = True
        detail = "ok"
        try:
            call(None, lambda s: s.backend.generation())
        except MemworthError as exc:
            ok, detail = False, str(exc)
        return {"ok": ok, "version": __version__, "backend": pool.first.backend.url.split("@")[-1], "detail": detail}

    @app.post("/v1/memories", status_code=201, responses=errors(404, 409), response_model=dict[str, Any])
    def add_memory(body: NewMemory, namespace: Writer) -> Response:
        item = body.model_dump(exclude_none=True)
        return write(namespace, lambda s: _memory(s, s.add_many([item], namespace=namespace)[0]), status=201)

    @app.post("/v1/batch/memories", status_code=201, responses=errors(404, 409), response_model=dict[str, Any])
    def add_memories(body: NewMemories, namespace: Writer) -> Response:
        """Store many memories in one transaction: all or none. A refused item is named by its
        position: ``items.3.text`` for a field this route checks, or the field with ``(items[3])``
        ending the reason for one the store checks (nothing is written either way)."""
        items = [item.model_dump(exclude_none=True) for item in body.items]
        return write(
            namespace, lambda s: {"memories": [_memory(s, m) for m in s.add_many(items, namespace=namespace)]}, status=201
        )

    @app.post("/v1/batch/outcomes", responses=errors(404, 409, 429), response_model=dict[str, Any])
    def record_outcomes(body: OutcomeBatch, namespace: Writer) -> Response:
        """Record the outcomes of many episodes in one transaction: all or none. A refused item is
        named by its position (``outcomes.3.outcome``, ``outcomes[3].episode``); an episode that has
        an outcome already is a 409 whose reason names it and its position."""
        pairs = [(o.episode, o.ok) for o in body.outcomes]
        outcomes = [(o.episode, o.ok, o.used) for o in body.outcomes]

        def record_all(s: MemoryStore) -> dict[str, Any]:
            s.record_many(outcomes, source=body.source, confidence=body.confidence, namespace=namespace)
            return {
                "ok": True,
                "recorded": len(pairs),
                "outcomes": [{"episode": e, "outcome": "success" if ok else "failure"} for e, ok in pairs],
            }

        def count(content: dict[str, Any]) -> None:
            for o in content["outcomes"]:
                metrics.outcomes.labels(body.source, o["outcome"]).inc()

        return write(namespace, record_all, counted=count)

    @app.get("/v1/memories")
    def list_memories(
        namespace: Reader,
        status: str | None = None,
        context: str | None = None,
        limit: Annotated[int | None, Query(description=f"a page of at most this many (1-{MAX_PAGE})")] = None,
        cursor: Annotated[str | None, Query(description="the next_cursor of the previous page")] = None,
    ) -> list[dict[str, Any]] | dict[str, Any]:
        """The namespace's memories in insertion order: all of them as a list, or with ``limit``
        (or ``cursor``) one page, ``{"memories": [...], "next_cursor": ...}`` (null on the last)."""
        if limit is None and cursor is None:
            return list(
                call(
                    namespace,
                    lambda s: [_memory(s, m) for m in s.list(namespace=namespace, status=status, context=context)],
                )
            )

        def one_page(s: MemoryStore) -> dict[str, Any]:
            page = s.list_page(
                limit=DEFAULT_PAGE if limit is None else limit,
                cursor=cursor,
                namespace=namespace,
                status=status,
                context=context,
            )
            return {"memories": [_memory(s, m) for m in page.items], "next_cursor": page.next_cursor}

        return dict(call(namespace, one_page))

    # Ids in paths: one percent-encoded segment, read as sent (memworth.server.ids); a bare id
    # (convertor memory_id) never ends in a literal /worth, /resolve, /pin or /unpin: those are sub-resources.
    @app.get("/v1/memories/{memory_id:path}/worth")
    def worth(memory_id: PathId, namespace: Reader) -> dict[str, Any]:
        return call(namespace, lambda s: s.report(path_id(memory_id), namespace=namespace).row())

    @app.get("/v1/memories/{memory_id:memory_id}")
    def get_memory(memory_id: PathId, namespace: Reader) -> dict[str, Any]:
        mid = path_id(memory_id)
        return dict(call(namespace, lambda s: _memory(s, s.get(mid, namespace=namespace))))

    @app.delete("/v1/memories/{memory_id:memory_id}", responses=errors(409), response_model=dict[str, Any])
    def delete_memory(
        memory_id: PathId,
        namespace: Writer,
        request: Request,
        reason: Annotated[str, Query(min_length=1, json_schema_extra={"maxLength": MAX_REASON}, description="why (kept in the tombstone)")],
        actor: Annotated[
            str | None, Query(min_length=1, max_length=100, description="who asked (the key is named too)")
        ] = None,
    ) -> Response:
        """Erase a memory for good: text, embedding and metadata are deleted; the answer is its
        tombstone (the audit entry, action ``erase``). Reading the id afterwards is a 404 saying
        it was erased; adding it again is a 409 (an erased id is never reused)."""
        mid = path_id(memory_id)
        who = _actor(request, actor)
        return write(
            namespace,
            lambda s: entry_row(s.delete(mid, reason=reason, actor=who, namespace=namespace)),
            counted=count_action,
        )

    @app.patch("/v1/memories/{memory_id:memory_id}", responses=errors(409, 429), response_model=dict[str, Any])
    def change_memory(memory_id: PathId, body: MemoryChange, namespace: Writer, request: Request) -> Response:
        """Change one thing of a memory, audited: ``text`` (a new version, re-embedded, with fresh
        counters, replaces it; the old one is archived with its counters, or erased with
        ``keep_old: false``), ``status`` or ``standing`` (a person's decision: it pins the memory).
        The answer is the audit entry; for a text, ``memory`` is the new version."""
        mid = path_id(memory_id)
        who = _actor(request, body.actor)
        if body.text is not None:
            text = body.text

            def edit(s: MemoryStore) -> dict[str, Any]:
                entry = s.edit(
                    mid, text, reason=body.reason, actor=who, new_id=body.new_id, keep_old=body.keep_old,
                    namespace=namespace,
                )  # fmt: skip
                return {
                    **entry_row(entry),
                    "memory": _memory(s, s.get(entry.settings["replaced_by"], namespace=namespace)),
                }

            return write(namespace, edit, counted=count_action)
        if body.status is not None:
            status = body.status
            return write(
                namespace,
                lambda s: entry_row(s.set_status(mid, status, reason=body.reason, actor=who, namespace=namespace)),
                counted=count_action,
            )
        standing = str(body.standing)
        return write(
            namespace,
            lambda s: entry_row(s.set_standing(mid, standing, reason=body.reason, actor=who, namespace=namespace)),
            counted=count_action,
        )

    @app.get("/v1/ttl")
    def get_ttl(namespace: Reader) -> dict[str, Any]:
        """The namespace's time to live for new memories, in seconds (null: they never expire)."""
        return {"ttl": call(namespace, lambda s: s.ttl(namespace=namespace))}

    @app.put("/v1/ttl", response_model=dict[str, Any])
    def put_ttl(body: TTLRequest, namespace: Writer) -> Response:
        """Give memories added to the namespace from now on ``ttl`` seconds to live (null: forever)."""
        ttl = body.ttl

        def set_ttl(s: MemoryStore) -> dict[str, Any]:
            s.set_ttl(ttl, namespace=namespace)
            return {"ttl": s.ttl(namespace=namespace)}

        return write(namespace, set_ttl)

    @app.post("/v1/expire", response_model=dict[str, Any])
    def expire(body: ExpireRequest, namespace: Writer) -> Response:
        """Erase the namespace's expired memories now (recall also does it first): their tombstones;
        with ``list_only``, the expired memories, erasing nothing."""
        if body.list_only:
            return write(namespace, lambda s: {"expired": [_memory(s, m) for m in s.expired(namespace=namespace)]})

        def count(content: dict[str, Any]) -> None:
            for row in content["erased"]:
                count_action(row)

        return write(
            namespace,
            lambda s: {"erased": [entry_row(e) for e in s.purge_expired(namespace=namespace)]},
            counted=count,
        )

    @app.post("/v1/recall")
    def recall(body: RecallRequest, namespace: Writer) -> dict[str, Any]:
        r = call(
            namespace,
            lambda s: s.recall(
                body.query, body.k, context=body.context, namespace=namespace, tier=body.tier, where=body.where
            ),
        )
        return {"episode": r.episode.id, "results": [x.row() for x in r], "diagnostics": r.diagnostics}

    @app.post("/v1/episodes/{episode_id}/outcome", responses=errors(409, 429), response_model=dict[str, Any])
    def record(episode_id: str, body: OutcomeRequest, namespace: Writer) -> Response:
        outcome = "success" if body.ok else "failure"

        content = {"ok": True, "episode": episode_id, "outcome": outcome, "success": body.ok}
        answer = committer.record(  # rendered inside the transaction that records it, as write() does
            namespace,
            episode_id,
            body.ok,
            source=body.source,
            confidence=body.confidence,
            used=body.used,
            answer=lambda: rendered(content),
        )
        metrics.outcomes.labels(body.source, outcome).inc()
        return answer

    @app.post("/v1/govern", responses=errors(429), response_model=dict[str, Any])
    def govern(body: GovernRequest, namespace: Writer) -> Response:
        """Govern the namespace (with ``apply``, make the changes): its changes commit once the
        answer is rendered, where it runs (a worker process, or the tenant's store object)."""
        row = pool.long(namespace, long_calls.govern, body.apply, then=long_calls.rescan)
        answer = rendered(row)  # shown to render before the govern committed: the same data renders the same
        for e in row["applied"]:
            metrics.actions.labels(e["action"]).inc()
        return answer

    @app.post("/v1/episodes/{episode_id}/verify", responses=errors(409), response_model=dict[str, Any])
    def verify(episode_id: str, body: VerifyRequest, namespace: Writer) -> Response:
        def verified(s: MemoryStore) -> dict[str, Any]:
            v = s.verify(episode_id, body.ok, namespace=namespace)
            return {"ok": True, "episode": episode_id, "success": v.success, "source": v.source, "agreed": v.agreed}

        return write(namespace, verified)

    @app.get("/v1/sources")
    def sources(namespace: Reader) -> list[dict[str, Any]]:
        return [r.row() for r in call(namespace, lambda s: s.source_reliability(namespace)).values()]

    @app.get("/v1/holdout")
    def holdout(namespace: Reader) -> dict[str, Any]:
        r = call(namespace, lambda s: s.holdout_report(namespace=namespace))
        guard = call(namespace, lambda s: s.holdout_guard(namespace=namespace))
        numbers = {"lift": r.lift, "lower": r.lower, "upper": r.upper}
        return {
            "governed": {"successes": r.governed_successes, "episodes": r.governed_n},
            "holdout": {"successes": r.holdout_successes, "episodes": r.holdout_n},
            **{k: None if v != v else v for k, v in numbers.items()},  # NaN (an empty arm) -> null
            "level": r.level,
            "method": r.method,
            "guard": None if guard is None else guard.row(),
        }

    @app.get("/v1/queue")
    def queue(namespace: Reader) -> list[dict[str, Any]]:
        """Memories awaiting verification (quarantined), each with its report."""
        return pool.long(namespace, long_calls.queue)

    @app.post("/v1/memories/{memory_id:path}/resolve", responses=errors(409, 429), response_model=dict[str, Any])
    def resolve(memory_id: PathId, body: ResolveRequest, namespace: Writer, request: Request) -> Response:
        """Resolve a quarantined memory: confirmed, stale or edited (audited, naming who; a person's decision sticks)."""
        mid = path_id(memory_id)
        who = _actor(request, body.actor)
        return write(
            namespace,
            lambda s: entry_row(
                s.resolve(
                    mid,
                    body.verdict,
                    reason=body.reason,
                    text=body.text,
                    new_id=body.new_id,
                    status=body.status,
                    actor=who,
                    namespace=namespace,
                )
            ),
            counted=count_action,
        )

    @app.post("/v1/memories/{memory_id:path}/pin", responses=errors(409), response_model=dict[str, Any])
    def pin(memory_id: PathId, body: PinRequest, namespace: Writer, request: Request) -> Response:
        """Keep governance away from a memory until it is unpinned (audited, naming who)."""
        mid, who = path_id(memory_id), _actor(request, body.actor)
        return write(
            namespace,
            lambda s: entry_row(s.pin(mid, reason=body.reason, actor=who, namespace=namespace)),
            counted=count_action,
        )

    @app.post("/v1/memories/{memory_id:path}/unpin", responses=errors(409), response_model=dict[str, Any])
    def unpin(memory_id: PathId, body: PinRequest, namespace: Writer, request: Request) -> Response:
        """End a memory's pin (audited, naming who)."""
        mid, who = path_id(memory_id), _actor(request, body.actor)
        return write(
            namespace,
            lambda s: entry_row(s.unpin(mid, reason=body.reason, actor=who, namespace=namespace)),
            counted=count_action,
        )

    @app.post("/v1/audit/{seq}/restore", responses=errors(409, 429), response_model=dict[str, Any])
    def restore(seq: int, body: RestoreRequest, namespace: Writer, request: Request) -> Response:
        who = _actor(request, body.actor)
        return write(
            namespace,
            lambda s: entry_row(s.restore(seq, reason=body.reason, actor=who, namespace=namespace)),
            counted=count_action,
        )

    @app.get("/v1/audit")
    def audit(
        namespace: Reader,
        memory_id: str | None = None,
        limit: Annotated[int | None, Query(description=f"a page of at most this many (1-{MAX_PAGE})")] = None,
        cursor: Annotated[str | None, Query(description="the next_cursor of the previous page")] = None,
    ) -> list[dict[str, Any]] | dict[str, Any]:
        """The audit log, oldest first: all of it, or with ``limit`` (or ``cursor``) one page,
        ``{"entries": [...], "next_cursor": ...}``."""
        if limit is None and cursor is None:
            return [e.__dict__ for e in call(namespace, lambda s: s.audit(memory_id, namespace=namespace))]
        page = call(
            namespace,
            lambda s: s.audit_page(
                memory_id, limit=DEFAULT_PAGE if limit is None else limit, cursor=cursor, namespace=namespace
            ),
        )
        return {"entries": [e.__dict__ for e in page.items], "next_cursor": page.next_cursor}

    @app.get("/v1/outcomes")
    def outcomes(
        namespace: Reader,
        limit: Annotated[int, Query(description=f"a page of at most this many (1-{MAX_PAGE})")] = DEFAULT_PAGE,
        cursor: Annotated[str | None, Query(description="the next_cursor of the previous page")] = None,
    ) -> dict[str, Any]:
        """The namespace's outcome log in commit order, a page at a time:
        ``{"outcomes": [...], "next_cursor": ...}`` (null on the last page); each outcome
        as :meth:`memworth.store.OutcomeRow.row` shows it, with the credit settings and the
        settings version it was credited under."""
        page = call(namespace, lambda s: s.outcome_page(limit=limit, cursor=cursor, namespace=namespace))
        return {"outcomes": [o.row() for o in page.items], "next_cursor": page.next_cursor}

    @app.get("/v1/keys")
    def keys(namespace: Reader) -> list[dict[str, Any]]:
        """The namespace's API keys, oldest first, revoked and expired ones too: id, name, created,
        expires, read_only, revoked, state; never a key or its hash. Keys are made and revoked
        with ``memworth keys``."""
        return [k.row() for k in call(namespace, lambda s: list_keys(s, namespace))]

    @app.get("/v1/replay")
    def replay(namespace: Reader) -> dict[str, Any]:
        return pool.long(namespace, long_calls.replay)

    @app.get("/v1/config")
    def get_config(namespace: Reader) -> dict[str, Any]:
        """The store's settings in force and their version (every namespace works under them)."""
        return dict(call(namespace, lambda s: s.config()))

    @app.put("/v1/config", responses=errors(409), response_model=dict[str, Any])
    def put_config(body: ConfigChange, namespace: Writer, request: Request) -> Response:
        """Change settings by dotted name (``{"changes": {"recall.exploration": 0.05}}``): a new
        version, kept with the store, recorded with the key that made it. Needs an admin key.
        409: other processes kept new versions each time this one was about to be written."""
        check_actor(body.actor)
        call(namespace, lambda s: s.settings.changed(body.changes))  # bad input is a 422, whoever asks
        if not request.state.key_admin:
            raise NotAdminError(
                "Authorization", "changing the store's settings needs an admin key (memworth keys create --admin)"
            )
        actor = _actor(request, body.actor)

        def configure(s: MemoryStore) -> dict[str, Any]:
            s.configure(body.changes, actor=actor)
            return s.config()

        answer = write(namespace, configure)  # kept with its answer
        pool.follow_everywhere()  # then in force on every store object
        return answer

    app.include_router(dashboard_router(pool))  # the web dashboard, /dashboard
    sidecar = sidecar_router(pool, writer, reader)
    declare_errors(sidecar.routes, reader, writer)
    confirmed(sidecar.routes, {reader, writer}, confirm)
    app.include_router(sidecar)  # memories kept elsewhere, by id: /v1/sidecar
    declare_errors(app.routes, reader, writer)
    confirmed(app.routes, {reader, writer}, confirm)  # every keyed route confirms a key served from memory
    document(app)
    app.add_middleware(TimedRoutes, metrics=metrics)  # inside the router's scope: sees the route template
    app.add_middleware(RawIdPaths, prefixes=("/v1/memories/",))
    app.add_middleware(_BodyLimit, limit=max_body)
    app.add_middleware(_CatchAll)  # outermost of ours: whatever fails inside is answered
    return app
