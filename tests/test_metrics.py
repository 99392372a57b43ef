"""GET /metrics: Prometheus metrics of the HTTP API, aggregates only."""

from __future__ import annotations

from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from memworth import MemoryStore
from memworth.server.app import create_app
from memworth.server.keys import create_key


def samples(client: TestClient) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    r = client.get("/metrics")  # no key: aggregates only
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    out = {}
    for family in text_string_to_metric_families(r.text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_metrics_count_recalls_outcomes_actions_errors_and_the_queue(store: MemoryStore) -> None:
    client = TestClient(create_app(store))
    h = {"X-API-Key": create_key(store, "secret-tenant", "k")}
    store.add("Prague was the capital of Czechoslovakia.", id="private-id", namespace="secret-tenant")
    for ok in ("failure",) * 20:  # enough for the error-controlled test of low worth
        episode = client.post("/v1/recall", json={"query": "capital of czechoslovakia", "k": 1}, headers=h).json()
        client.post(f"/v1/episodes/{episode['episode']}/outcome", json={"outcome": ok}, headers=h)
    applied = client.post("/v1/govern", json={"apply": True}, headers=h).json()["applied"]
    assert [e["action"] for e in applied] == ["deprecate"]
    assert client.get("/v1/memories/nope", headers=h).status_code == 404
    store.add("Water boils at 100 C.", id="water", namespace="secret-tenant")
    store.set_standing("water", "re-verify", reason="check", namespace="secret-tenant")
    got = samples(client)
    route = (("method", "POST"), ("route", "/v1/recall"))
    assert got[("memworth_request_seconds_count", route)] == 20
    assert got[("memworth_outcomes_total", (("outcome", "failure"), ("source", "explicit")))] == 20
    assert got[("memworth_governance_actions_total", (("action", "deprecate"),))] == 1
    assert got[("memworth_errors_total", (("status", "404"), ("type", "UnknownMemoryError")))] == 1
    assert got[("memworth_verification_queue", ())] == 1
    text = client.get("/metrics").text
    assert "secret-tenant" not in text and "private-id" not in text and "nope" not in text  # no tenant data
    assert (
        "memworth_request_seconds_count",
        (("method", "GET"), ("route", "/v1/memories/{memory_id}")),
    ) in got  # as the OpenAPI document names it
