"""One validation module: every face refuses a bad value with the same field and the same words.

The checks live once, in :mod:`memworth.validation`; the store, the sidecar, the API keys
and the LangGraph adapter call them. These tests give each face the same bad values and
compare what it says with what the check says.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from memworth import HashingEncoder, MemoryStore, Sidecar, ValidationError
from memworth.server.keys import create_key
from memworth.validation import (
    MAX_K,
    MAX_TEXT,
    check_k,
    check_labels,
    check_memory_id,
    check_metadata,
    check_name,
    check_text,
)


@pytest.fixture
def store() -> Iterator[MemoryStore]:
    s = MemoryStore.open("memory://", encoder=HashingEncoder(), exploration=0.0, seed=0)
    s.add("Prague is the capital of the Czech Republic.", id="prague")
    yield s
    s.close()


def refusal(call: Callable[[], object]) -> tuple[str, str]:
    """The field and reason of the ValidationError ``call`` raises."""
    with pytest.raises(ValidationError) as caught:
        call()
    return caught.value.field, caught.value.reason


BAD_NAMESPACES = ["", "a b", "x" * 65, 7, None, "ns/1"]


@pytest.mark.parametrize("namespace", BAD_NAMESPACES)
def test_a_bad_namespace_is_refused_alike_by_the_store_the_sidecar_and_the_keys(
    store: MemoryStore, namespace: object
) -> None:
    expected = refusal(lambda: check_name(namespace, "namespace"))
    assert expected[0] == "namespace"
    sidecar = Sidecar(store)
    faces: list[Callable[[], object]] = [
        lambda: store.add("text", namespace=namespace),  # type: ignore[arg-type]
        lambda: store.recall("capital", namespace=namespace),  # type: ignore[arg-type]
        lambda: store.list(namespace=namespace),  # type: ignore[arg-type]
        lambda: store.govern(namespace=namespace),  # type: ignore[arg-type]
        lambda: sidecar.register(["a"], namespace=namespace),  # type: ignore[arg-type]
        lambda: sidecar.retrieved(["a"], namespace=namespace),  # type: ignore[arg-type]
        lambda: create_key(store, namespace, "ci"),  # type: ignore[arg-type]
    ]
    for face in faces:
        assert refusal(face) == expected


@pytest.mark.parametrize("k", [0, MAX_K + 1, True, 2.0, "4", None])
def test_a_bad_k_is_refused_alike_by_recall_and_the_sidecar(store: MemoryStore, k: object) -> None:
    expected = refusal(lambda: check_k(k))
    assert refusal(lambda: store.recall("capital", k=k)) == expected  # type: ignore[arg-type]
    assert refusal(lambda: Sidecar(store).retrieve(["prague"], k=k)) == expected  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (" ", "must not be empty"),
        (3, "must be a string, got int"),
        ("a\x00b", "must not contain NUL characters (\\x00)"),
        ("\ud800", "must be valid UTF-8 text; it holds a lone surrogate"),
        ("x" * (MAX_TEXT + 1), f"is {MAX_TEXT + 1} characters; the limit is {MAX_TEXT}"),
    ],
)
def test_a_bad_text_is_refused_with_its_reason_by_the_check_add_and_recall(
    store: MemoryStore, value: object, reason: str
) -> None:
    assert refusal(lambda: check_text(value, "text")) == ("text", reason)
    assert refusal(lambda: store.add(value)) == ("text", reason)  # type: ignore[arg-type]
    assert refusal(lambda: store.recall(value)) == ("query", reason)  # type: ignore[arg-type]


def test_ids_labels_and_metadata_are_refused_alike_by_the_check_and_the_store(store: MemoryStore) -> None:
    assert refusal(lambda: store.get(" x")) == refusal(lambda: check_memory_id(" x"))
    assert refusal(lambda: store.add("t", contexts="python")) == refusal(  # type: ignore[arg-type]
        lambda: check_labels("python", "contexts")
    )
    assert refusal(lambda: store.add("t", metadata={"tags": {"a"}})) == refusal(
        lambda: check_metadata({"tags": {"a"}})
    )
    sidecar = Sidecar(store)
    assert refusal(lambda: sidecar.register(["a"], metadata=[1])) == refusal(  # type: ignore[arg-type]
        lambda: check_metadata([1])
    )


def test_accepted_values_come_back_as_the_checks_promise() -> None:
    assert check_labels(["b", "a", "b"], "contexts") == ("b", "a")
    assert check_metadata(None) == {}
    data = {"a": [1, {"b": "c"}]}
    copy = check_metadata(data)
    assert copy == data and copy is not data and copy["a"] is not data["a"]
    assert check_memory_id("notes/2024 café") == "notes/2024 café"
    assert check_k(MAX_K) == MAX_K


def test_the_store_module_still_exports_the_limits_and_names_it_did() -> None:
    import memworth.store.store as module
    import memworth.validation as validation

    assert module.MAX_TEXT is validation.MAX_TEXT and module.MAX_K is validation.MAX_K
    assert module.MAX_METADATA is validation.MAX_METADATA
    for name in module.__all__:
        assert hasattr(module, name), name
