"""Schemathesis against the OpenAPI document: generated requests to every route answer no 5xx,
and every answer conforms to the document (its status is declared, with the declared headers,
content type and body schema), with a key, with a read-only key and with none."""

from __future__ import annotations

import re

import hypothesis
import pytest
import schemathesis
from fastapi.testclient import TestClient
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from schemathesis.config import SchemathesisConfig

from memworth import HashingEncoder, MemoryStore
from memworth.server import create_app, create_key

STORE = MemoryStore.open("memory://", encoder=HashingEncoder(), seed=0)
KEY = create_key(STORE, "fuzz", "schemathesis")
READER = create_key(STORE, "fuzz", "reader", read_only=True)
STORE.add_many([{"id": f"m{i}", "text": f"memory number {i} about topic {i % 3}"} for i in range(5)], namespace="fuzz")
APP = create_app(STORE)
SCHEMA = schemathesis.openapi.from_asgi("/openapi.json", APP)
QUICK = schemathesis.openapi.from_asgi(  # the default suite: generated requests, without the coverage phase's
    "/openapi.json", APP, config=SchemathesisConfig.from_dict({"phases": {"coverage": {"enabled": False}}})
)
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    response_headers_conformance,
    content_type_conformance,
    response_schema_conformance,
]
HEADERS = ({"Authorization": f"Bearer {KEY}"}, {"X-API-Key": READER}, {})  # a key, a read-only key, none


def _conforms(case: schemathesis.Case) -> None:
    for headers in HEADERS:
        response = case.call(headers=headers)
        case.validate_response(response, checks=CHECKS)
        if response.status_code >= 400:
            body = response.json()
            assert body["ok"] is False and {"type", "field", "reason", "status"} == set(body["error"])
            assert body["error"]["status"] == response.status_code


@QUICK.parametrize()
@hypothesis.settings(max_examples=15, deadline=None, suppress_health_check=list(hypothesis.HealthCheck))
def test_every_answer_conforms_to_the_openapi_document(case: schemathesis.Case) -> None:
    """Fifteen generated requests an operation, each with three keys (the default suite; the
    coverage phase's edge cases run at length, with the slow marker)."""
    _conforms(case)


@pytest.mark.slow  # the full run: `make test-full`
@SCHEMA.parametrize()
@hypothesis.settings(max_examples=40, deadline=None, suppress_health_check=list(hypothesis.HealthCheck))
def test_every_answer_conforms_to_the_openapi_document_at_length(case: schemathesis.Case) -> None:
    """Forty generated requests an operation and the coverage phase's edge cases, each with three keys."""
    _conforms(case)


def test_a_method_a_path_does_not_take_is_405_with_allow_listing_the_documented_methods() -> None:
    client = TestClient(APP)
    paths = client.get("/openapi.json").json()["paths"]
    tried = 0
    for template, operations in paths.items():
        path = re.sub(r"\{[^}]*\}", "m1", template)
        documented = sorted(m.upper() for m in operations)
        for method in {"GET", "POST", "PUT", "PATCH", "DELETE"} - set(documented):
            r = client.request(method, path, headers={"Authorization": f"Bearer {KEY}"})
            assert r.status_code == 405, (method, path, r.status_code)
            assert r.headers["allow"] == ", ".join(documented), (method, path, r.headers["allow"])
            assert r.json()["error"]["type"] == "MethodNotAllowed"
            tried += 1
    assert tried > 50


def test_the_document_declares_each_error_status_with_the_error_body() -> None:
    doc = TestClient(APP).get("/openapi.json").json()
    paths = doc["paths"]
    delete = paths["/v1/memories/{memory_id}"]["delete"]["responses"]
    assert {"401", "403", "404", "409", "413", "422", "503"} <= set(delete)
    assert delete["401"]["headers"]["WWW-Authenticate"]["schema"] == {"type": "string"}
    body = delete["422"]["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[-1]
    assert set(doc["components"]["schemas"][body]["properties"]) == {"ok", "error"}
    reads = paths["/v1/memories/{memory_id}"]["get"]["responses"]
    assert "404" in reads and "403" not in reads  # a read-only key may read
    assert "403" not in paths["/v1/sidecar/rerank"]["post"]["responses"]  # a re-ranking logs nothing
    assert "403" in paths["/v1/recall"]["post"]["responses"]  # a recall logs an episode
    assert {"401", "503"}.isdisjoint(paths["/health"]["get"]["responses"])  # no key needed
