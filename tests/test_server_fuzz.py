"""Schemathesis against the OpenAPI document: generated requests to every route, no 5xx."""

from __future__ import annotations

import hypothesis
import schemathesis

from memworth import HashingEncoder, MemoryStore
from memworth.server import create_app, create_key

STORE = MemoryStore.open("memory://", encoder=HashingEncoder(), seed=0)
KEY = create_key(STORE, "fuzz", "schemathesis")
STORE.add_many([{"id": f"m{i}", "text": f"memory number {i} about topic {i % 3}"} for i in range(5)], namespace="fuzz")
APP = create_app(STORE)
SCHEMA = schemathesis.openapi.from_asgi("/openapi.json", APP)
TRIED = {"count": 0}


@SCHEMA.parametrize()
@hypothesis.settings(max_examples=40, deadline=None, suppress_health_check=list(hypothesis.HealthCheck))
def test_no_route_answers_with_a_server_error(case: schemathesis.Case) -> None:
    for headers in ({"Authorization": f"Bearer {KEY}"}, {}):  # with the key, and without
        response = case.call(headers=headers)
        TRIED["count"] += 1
        assert response.status_code < 500, (case.method, case.path, response.status_code, response.text[:300])
        if response.status_code >= 400:
            body = response.json()
            assert body["ok"] is False and {"type", "field", "reason", "status"} == set(body["error"])
