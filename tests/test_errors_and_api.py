"""The public surface: the error tree, __all__, docstrings, and what `import memworth` loads."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys

import pytest

import memworth
from memworth import MemworthError, OutcomeError, UnknownMemoryError, ValidationError, as_outcome, decay_factor


def test_error_tree() -> None:
    assert issubclass(ValidationError, MemworthError) and issubclass(ValidationError, ValueError)
    assert issubclass(OutcomeError, ValidationError)
    assert issubclass(UnknownMemoryError, MemworthError) and issubclass(UnknownMemoryError, KeyError)
    assert not issubclass(UnknownMemoryError, ValueError)
    assert not issubclass(ValidationError, KeyError)


def test_validation_error_fields() -> None:
    err = ValidationError("weights", "must not be negative")
    assert (err.field, err.reason) == ("weights", "must not be negative")
    assert str(err) == "weights: must not be negative"


def test_unknown_memory_error_str_is_not_keyerror_quoting() -> None:
    err = UnknownMemoryError(("doc", 3))
    assert err.memory_id == ("doc", 3)
    assert str(err) == "unknown memory id: ('doc', 3)"


@pytest.mark.parametrize(
    ("value", "expected"),
    [(True, True), (False, False), ("success", True), ("failure", False), (1, True), (0, False), (-1, False)],
)
def test_as_outcome(value: object, expected: bool) -> None:
    assert as_outcome(value) is expected


@pytest.mark.parametrize("value", [2, -2, 0.5, 1.0, None, "yes", "SUCCESS", [1]])
def test_as_outcome_refuses(value: object) -> None:
    with pytest.raises(OutcomeError) as info:
        as_outcome(value)
    assert info.value.field == "success"
    with pytest.raises(OutcomeError) as info:
        as_outcome(value, field="outcome")
    assert info.value.field == "outcome"


def test_decay_factor() -> None:
    assert decay_factor(0, 50) == 1.0
    assert decay_factor(50, 50) == 0.5
    assert decay_factor(100, 50) == 0.25
    assert list(decay_factor([0, 10, 20], 10)) == [1.0, 0.5, 0.25]


def test_all_is_sorted_and_unique() -> None:
    assert memworth.__all__ == sorted(memworth.__all__)
    assert len(set(memworth.__all__)) == len(memworth.__all__)


def test_every_name_in_all_is_importable() -> None:
    namespace: dict[str, object] = {}
    exec(f"from memworth import {', '.join(memworth.__all__)}", namespace)
    for name in memworth.__all__:
        assert namespace[name] is getattr(memworth, name)


def test_every_public_class_and_function_has_a_docstring() -> None:
    missing = []
    for name in memworth.__all__:
        obj = getattr(memworth, name)
        if (inspect.isclass(obj) or inspect.isfunction(obj)) and not (inspect.getdoc(obj) or "").strip():
            missing.append(name)
    assert missing == []


def test_version() -> None:
    from importlib.metadata import version

    assert memworth.__version__ == version("memworth")


def _modules_after(code: str) -> list[str]:
    """Which of scipy, matplotlib, tqdm, memworth_experiments a fresh interpreter has loaded after ``code``."""
    probe = (
        f"import sys, json, memworth; {code}; "
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules} "
        "& {'scipy', 'matplotlib', 'memworth_experiments', 'tqdm'})))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def test_import_memworth_stays_light() -> None:
    assert _modules_after("pass") == []


def test_using_a_bound_imports_scipy_lazily() -> None:
    assert _modules_after("memworth.BetaBound().value(memworth.Counts(1.0, 1.0, 2.0))") == ["scipy"]


def test_the_public_surface_is_exactly_all() -> None:
    """httpx's check: what ``dir(memworth)`` shows as public is ``__all__``, no more, no less,
    whatever other names (kept importable for older code) were looked up before."""
    import memworth.signals.coretrieval  # a submodule is not a public name

    assert memworth.AlarmSplitter is memworth.signals.coretrieval.AlarmSplitter  # a former name still resolves
    helpers = {"TYPE_CHECKING", "Any", "annotations", "importlib"}
    shown = {
        n
        for n in dir(memworth)
        if not n.startswith("_") and n not in helpers and not inspect.ismodule(getattr(memworth, n))
    }
    assert shown == set(memworth.__all__) - {"__version__"}
    assert 30 <= len(memworth.__all__) <= 36
    for name in ("GovernancePolicy", "MemoryReport", "NotFoundError", "ConflictError"):
        assert name in memworth.__all__
