"""What the OpenAPI document says a route answers: every error status it can give, in the one error shape.

:func:`declare_errors` runs once the routes are in place and gives each route the
statuses it can answer besides success, read from what the route is:

* every route of the API: 413 (a body over the limit; the check runs before routing) and
  422 (a parameter or body refused), with :class:`ErrorBody` instead of FastAPI's default;
* a route that needs a key (it depends on ``reader`` or ``writer``): 401, with
  ``WWW-Authenticate``, and 503 (the database cannot be reached); a route that changes
  something (it depends on ``writer``) also 403 (the key is read-only); and the two headers
  that carry the key (:data:`KEY_HEADERS`);
* a route with a memory, episode or audit entry in its path: 404;
* and what a route declares itself (``responses=errors(409, 429)``).

A request with a method a path does not take is answered 405 with ``Allow`` listing the
methods it does take (:func:`allowed_methods`).
"""

from collections.abc import Callable, Iterable
from typing import Any, Literal

from fastapi import FastAPI
from fastapi.routing import APIRoute
from pydantic import BaseModel
from starlette.routing import BaseRoute, Match

__all__ = ["KEY_HEADERS", "ErrorBody", "allowed_methods", "declare_errors", "document", "errors"]

WWW_AUTHENTICATE = 'Bearer realm="memworth"'

REASONS = {
    400: "Bad request",
    401: "No valid API key: missing, unknown, revoked or expired, or two different keys in one request",
    403: "The API key is read-only: it may not change anything",
    404: "No such memory, episode or audit entry in the key's namespace",
    409: "At odds with what the store holds (an id or an outcome that exists already, a memory changed since)",
    413: "The request body is over the server's limit",
    422: "A parameter or a field of the body is refused: the error names it and says why",
    429: "A rate limit or a quota holds the change back; nothing was written",
    503: "The database or the hot tier cannot be reached now; try again later",
}

METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
"""The methods an ``Allow`` header may list (HEAD and OPTIONS are the server's own)."""

PATH_IDS = ("memory_id", "episode_id", "seq", "ref")


class ErrorDetail(BaseModel):
    type: str
    field: str | None
    reason: str
    status: int


class ErrorBody(BaseModel):
    """Every error the API answers: ``{"ok": false, "error": {type, field, reason, status}}``."""

    ok: Literal[False]
    error: ErrorDetail


def errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI ``responses`` of these error statuses, each with :class:`ErrorBody`
    (a reference: :func:`document` puts the schema in the document's components)."""
    out: dict[int | str, dict[str, Any]] = {}
    body = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}
    for status in statuses:
        out[status] = {"description": REASONS[status], "content": body}
        if status == 401:
            out[status]["headers"] = {
                "WWW-Authenticate": {"description": "the scheme to use: Bearer", "schema": {"type": "string"}}
            }
    return out


KEY_HEADERS: tuple[dict[str, Any], ...] = tuple(
    {
        "in": "header",
        "name": name,
        "required": False,
        "schema": {"anyOf": [{"type": "string"}, {"type": "null"}], "title": title},
    }
    for name, title in (("authorization", "Authorization"), ("x-api-key", "X-Api-Key"))
)
"""The headers that carry a request's key (``Authorization: Bearer <key>`` or ``X-API-Key``), as
the OpenAPI parameters of every route that needs one. The key dependency reads them from the
request itself (cheaper than FastAPI's ``Header()`` parameters); :func:`declare_errors` declares
them."""


def declare_errors(routes: Iterable[BaseRoute], reader: Callable[..., Any], writer: Callable[..., Any]) -> None:
    """Give each of ``routes`` the error statuses it can answer (see the module's docstring).

    Run it on a router's routes before the router is included (FastAPI may keep included
    routes apart from ``app.routes``), and on ``app.routes`` once they are all in place.
    """
    for route in routes:
        if not isinstance(route, APIRoute) or not route.include_in_schema:
            continue
        statuses = {413, 422}
        calls = {d.call for d in route.dependant.dependencies}
        if calls & {reader, writer}:
            statuses |= {401, 503}
            extra = dict(route.openapi_extra or {})
            named = {p.get("name") for p in extra.get("parameters", [])}
            extra["parameters"] = [*extra.get("parameters", []), *(h for h in KEY_HEADERS if h["name"] not in named)]
            route.openapi_extra = extra  # FastAPI appends these after the route's own parameters
        if writer in calls:
            statuses.add(403)
        if any(p.name in PATH_IDS for p in route.dependant.path_params):
            statuses.add(404)
        declared = {int(s) for s in route.responses if str(s).isdigit()}
        route.responses = {**errors(*sorted(statuses - declared)), **route.responses}


def document(app: FastAPI) -> None:
    """Make ``app``'s OpenAPI document carry :class:`ErrorBody` among its components."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            doc = generate()
            schema = ErrorBody.model_json_schema(ref_template="#/components/schemas/{model}")
            schemas = doc.setdefault("components", {}).setdefault("schemas", {})
            schemas.update(schema.pop("$defs", {}))
            schemas["ErrorBody"] = schema
            app.openapi_schema = doc
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def allowed_methods(app: FastAPI, scope: dict[str, Any]) -> list[str]:
    """The methods some route of ``app`` takes at the path of ``scope``, sorted: each method
    is tried against the router as a request would be (included routers too)."""
    return sorted(
        method
        for method in METHODS
        if any(route.matches({**scope, "method": method})[0] == Match.FULL for route in app.router.routes)
    )
