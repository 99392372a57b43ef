"""HTTP batch routes over ``add_many`` and ``record_many``: all or none, a refused item named by position."""

from __future__ import annotations

from fastapi.testclient import TestClient

from memworth import MemoryStore
from memworth.server import create_key


def error(r: object) -> dict:
    body = r.json()  # type: ignore[attr-defined]
    assert body["ok"] is False
    return dict(body["error"])


def test_batch_add_is_all_or_none_and_names_the_item(client: TestClient, store: MemoryStore) -> None:
    h = {"X-API-Key": create_key(store, "team", "agent")}
    items = [{"text": f"Fact number {i} about rivers.", "id": f"f{i}"} for i in range(5)]
    r = client.post("/v1/batch/memories", json={"items": items}, headers=h)
    assert r.status_code == 201, r.text
    assert [m["id"] for m in r.json()["memories"]] == [f"f{i}" for i in range(5)]
    assert len(store.list(namespace="team")) == 5
    fresh = [{"text": f"New fact {i}.", "id": f"g{i}"} for i in range(4)]
    cases = [  # (the bad item at position 2, status, field, what the reason says)
        ({"text": ""}, 422, "items.2.text", None),
        ({"text": "x", "colour": "blue"}, 422, "items.2.colour", None),
        ({"text": "x", "ttl": "60"}, 422, "items.2.ttl", None),
        ({"text": "x", "metadata": {"k": "\x00"}}, 422, "metadata", "(items[2])"),
        ({"text": "x", "derived_from": ["nowhere"]}, 404, None, "nowhere"),
        ({"text": "x", "id": "f1"}, 409, None, "f1"),
        ({"text": "x", "id": "g0"}, 422, "id", "items[0] and items[2]"),
    ]
    for bad, status, field, reason in cases:
        batch = [*fresh[:2], bad, *fresh[2:]]
        r = client.post("/v1/batch/memories", json={"items": batch}, headers=h)
        assert r.status_code == status, (bad, r.text)
        e = error(r)
        if field is not None:
            assert e["field"] == field, (bad, e)
        if reason is not None:
            assert reason in e["reason"], (bad, e)
        assert len(store.list(namespace="team")) == 5  # nothing of the batch was written
    assert client.post("/v1/batch/memories", json={"items": []}, headers=h).status_code == 422
    assert client.post("/v1/batch/memories", json={"items": items}).status_code == 401


def test_batch_outcomes_are_all_or_none_and_name_the_item(client: TestClient, store: MemoryStore) -> None:
    h = {"X-API-Key": create_key(store, "team", "agent")}
    client.post("/v1/batch/memories", json={"items": [{"text": "Rivers flow to the sea.", "id": "r"}]}, headers=h)
    episodes = [
        client.post("/v1/recall", json={"query": "rivers", "k": 1}, headers=h).json()["episode"] for _ in range(4)
    ]
    first = [{"episode": episodes[0], "outcome": "success"}, {"episode": episodes[1], "success": False}]
    r = client.post("/v1/batch/outcomes", json={"outcomes": first, "source": "implicit"}, headers=h)
    assert r.status_code == 200, r.text
    assert r.json()["recorded"] == 2 and [o["outcome"] for o in r.json()["outcomes"]] == ["success", "failure"]
    counts = store.get("r", namespace="team").counts
    assert (counts.success, counts.failure, counts.n) == (0.5, 0.5, 2)
    rest = [{"episode": episodes[2], "outcome": "success"}, {"episode": episodes[3], "outcome": "failure"}]
    cases = [  # (the bad item appended at position 2, status, field, what the reason says)
        ({"episode": episodes[2], "success": "yes"}, 422, "outcomes.2.success", None),
        ({"episode": episodes[2]}, 422, "outcomes.2", "give the outcome once"),
        ({"episode": "nope", "outcome": "success"}, 404, "outcomes[2].episode", "nope"),
        ({"episode": episodes[0], "outcome": "success"}, 409, None, "(outcomes[2])"),
        ({"episode": episodes[2], "outcome": "failure"}, 422, "outcomes[2].episode", "outcomes[0] and outcomes[2]"),
    ]
    for bad, status, field, reason in cases:
        r = client.post("/v1/batch/outcomes", json={"outcomes": [*rest, bad]}, headers=h)
        assert r.status_code == status, (bad, r.text)
        e = error(r)
        if field is not None:
            assert e["field"] == field, (bad, e)
        if reason is not None:
            assert reason in e["reason"], (bad, e)
        assert store.get("r", namespace="team").counts == counts  # nothing of the batch was written
    other = {"X-API-Key": create_key(store, "other", "agent")}
    r = client.post("/v1/batch/outcomes", json={"outcomes": rest}, headers=other)
    assert r.status_code == 404 and error(r)["field"] == "outcomes[0].episode"  # another tenant's episode
    assert client.post("/v1/batch/outcomes", json={"outcomes": rest, "source": "nobody"}, headers=h).status_code == 422
    assert client.post("/v1/batch/outcomes", json={"outcomes": rest}, headers=h).status_code == 200
    assert store.replay().consistent
