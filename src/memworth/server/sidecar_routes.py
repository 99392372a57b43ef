"""The sidecar over HTTP (``/v1/sidecar/...``): any store, in any language, governed by id.

The routes mirror :class:`memworth.Sidecar`; the namespace comes from the API key, as
everywhere in the API. Outcomes go to the existing ``POST /v1/episodes/{id}/outcome``,
governance to ``POST /v1/govern`` and ``POST /v1/audit/{seq}/restore``: external
memories are memories of the key's namespace like any other.
"""

import dataclasses
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Depends
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field

from memworth.errors import ValidationError
from memworth.server.answers import answered
from memworth.server.openapi import errors
from memworth.server.pool import StorePool
from memworth.sidecar import MAX_CANDIDATES, MAX_RETRIEVED, Ranked, Sidecar
from memworth.validation import MAX_K, MAX_TEXT

__all__ = ["sidecar_router"]

T = TypeVar("T")

MemoryId = Annotated[str, Field(min_length=1, max_length=200)]
Label = Annotated[str, Field(min_length=1, max_length=200)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RegisterRequest(_Strict):
    ids: list[MemoryId] = Field(min_length=1, max_length=MAX_CANDIDATES)
    contexts: list[Label] | None = None
    metadata: dict[str, Any] | None = None


class Candidate(_Strict):
    id: MemoryId
    score: float | None = None


class RerankRequest(_Strict):
    candidates: list[Candidate] = Field(max_length=MAX_CANDIDATES)
    k: int | None = Field(default=None, ge=1, le=MAX_K)


class RetrieveRequest(_Strict):
    candidates: list[Candidate] = Field(max_length=MAX_CANDIDATES)
    k: int = Field(default=4, ge=1, le=MAX_K)
    query: str = Field(default="", max_length=MAX_TEXT)
    context: Label | None = None


class RetrievedRequest(_Strict):
    ids: list[MemoryId] = Field(max_length=MAX_RETRIEVED)
    weights: list[float] | None = Field(default=None, max_length=MAX_RETRIEVED)
    query: str = Field(default="", max_length=MAX_TEXT)
    context: Label | None = None


class IdsRequest(_Strict):
    ids: list[MemoryId] = Field(max_length=MAX_CANDIDATES)


def _candidates(items: list[Candidate]) -> list[str] | list[tuple[str, float]]:
    scored = [c.score is not None for c in items]
    if all(scored):
        return [(c.id, float(c.score)) for c in items if c.score is not None]
    if not any(scored):
        return [c.id for c in items]
    raise ValidationError("candidates", "give a score for every candidate or for none (then their order is used)")


def _ranked(r: Ranked) -> dict[str, Any]:
    out = dataclasses.asdict(r)
    out["class"] = out.pop("value_class")
    return out


def sidecar_router(pool: StorePool, writer: Callable[..., Any], reader: Callable[..., Any]) -> APIRouter:
    """Routes of a :class:`memworth.Sidecar` over each store object of ``pool`` (a call runs on
    the tenant's object, under its lock); ``writer`` and ``reader`` are the dependencies that
    turn an API key into its namespace, for a route that writes (refusing read-only keys) and
    for one that only reads."""
    sidecars = {id(s): Sidecar(s) for s in pool.stores}

    def call(namespace: str, fn: Callable[[Sidecar], T]) -> T:
        return pool.run(namespace, lambda s: fn(sidecars[id(s)]))

    router = APIRouter(prefix="/v1/sidecar", tags=["sidecar"])
    Tenant = Annotated[str, Depends(writer)]
    Reader = Annotated[str, Depends(reader)]

    @router.post("/register", responses=errors(409), response_model=dict[str, Any])
    def register(body: RegisterRequest, namespace: Tenant) -> Response:
        """Register external memory ids (idempotent); answers which were new. Kept only with
        its answer (:mod:`memworth.server.answers`)."""

        def registered(sidecar: Sidecar) -> dict[str, Any]:
            new = sidecar.register(body.ids, namespace=namespace, contexts=body.contexts, metadata=body.metadata)
            return {"registered": new, "already": len(body.ids) - len(new)}

        return pool.run(namespace, lambda s: answered(s, lambda s: registered(sidecars[id(s)]))[1])

    @router.post("/rerank")
    def rerank(body: RerankRequest, namespace: Reader) -> dict[str, Any]:
        """Re-rank candidates by similarity blended with worth, without the inactive ones; logs nothing."""
        ranked = call(
            namespace, lambda sidecar: sidecar.rerank(_candidates(body.candidates), body.k, namespace=namespace)
        )
        return {"results": [_ranked(r) for r in ranked]}

    @router.post("/retrieve", responses=errors(409))
    def retrieve(body: RetrieveRequest, namespace: Tenant) -> dict[str, Any]:
        """Pick k candidates (re-rank, exploration floor) and log the episode."""
        got = call(
            namespace,
            lambda sidecar: sidecar.retrieve(
                _candidates(body.candidates), body.k, query=body.query, context=body.context, namespace=namespace
            ),
        )
        return {"episode": got.episode.id, "results": [_ranked(r) for r in got.results]}

    @router.post("/retrieved", responses=errors(409))
    def retrieved(body: RetrievedRequest, namespace: Tenant) -> dict[str, Any]:
        """Log that the other store retrieved these ids in one episode."""
        episode = call(
            namespace,
            lambda sidecar: sidecar.retrieved(
                body.ids, weights=body.weights, query=body.query, context=body.context, namespace=namespace
            ),
        )
        return {"episode": episode.id, "ids": [i.memory_id for i in episode.items]}

    @router.post("/filter")
    def filter_ids(body: IdsRequest, namespace: Reader) -> dict[str, Any]:
        """The ids without the suppressed, deprecated and archived ones, in the order given."""
        return {"ids": call(namespace, lambda sidecar: sidecar.filter(body.ids, namespace=namespace))}

    @router.post("/worth", responses=errors(404))
    def worth(body: IdsRequest, namespace: Reader) -> dict[str, Any]:
        """Worth, interval, evidence, class, standing and suggested action of registered ids."""
        return {
            "results": [
                w.row() for w in call(namespace, lambda sidecar: sidecar.worth_many(body.ids, namespace=namespace))
            ]
        }

    return router
