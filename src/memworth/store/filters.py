"""Recall filters: which memories a recall may consider, decided before any ranking.

``recall(query, where={...})`` keeps only the memories that match every part given:

* ``"metadata"``: ``{key: value}`` for equality, or ``{key: {"gt" | "gte" | "lt" | "lte":
  bound, ...}}`` for a range, or ``{key: {"in": [values]}}``, on top-level metadata keys. A
  memory without the key does not match. Equality is exact and typed (``1`` matches ``1``
  and ``1.0``, never ``true`` or ``"1"``); a range compares numbers with numbers and
  strings with strings (ISO dates order as text), anything else does not match.
* ``"contexts"``: labels; a memory matches when it carries at least one of them.
* ``"status"``: statuses; recall still returns only what it may (active memories, and in
  a holdout episode the ungoverned ones), so this narrows, never widens.
* ``"standing"``: standings, e.g. ``["normal", "promoted"]`` to leave demoted ones out.

The one implementation is :meth:`RecallFilter.matches`; the recall search asks for more
candidates until enough of them match or the namespace is exhausted, so a selective
filter still ranks the most similar matching memories.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from memworth.errors import ValidationError
from memworth.store.records import STANDINGS, STATUSES, Memory
from memworth.validation import check_labels, check_storable

__all__ = ["RANGE_OPERATORS", "RecallFilter"]

RANGE_OPERATORS = ("gt", "gte", "lt", "lte")
_FILTER_KEYS = ("metadata", "contexts", "status", "standing")


@dataclass(frozen=True)
class _Condition:
    """One metadata key's test: equal to one of ``values``, or within the bounds."""

    key: str
    values: tuple[Any, ...] | None = None
    bounds: tuple[tuple[str, Any], ...] = ()

    def holds(self, metadata: dict[str, Any]) -> bool:
        if self.key not in metadata:
            return False
        value = metadata[self.key]
        if self.values is not None:
            return any(_same(value, v) for v in self.values)
        return all(_compare(value, op, bound) for op, bound in self.bounds)


@dataclass(frozen=True)
class RecallFilter:
    """A checked recall filter (see the module); build it with :meth:`of`.

    Examples
    --------
    >>> from memworth.store.records import Memory
    >>> f = RecallFilter.of({"metadata": {"team": "billing", "priority": {"gte": 2}}, "contexts": ["api"]})
    >>> f.matches(Memory("a", "t", "ns", metadata={"team": "billing", "priority": 3}, contexts=("api",)))
    True
    >>> f.matches(Memory("b", "t", "ns", metadata={"team": "billing", "priority": True}, contexts=("api",)))
    False
    """

    metadata: tuple[_Condition, ...] = ()
    contexts: frozenset[str] | None = None
    status: frozenset[str] | None = None
    standing: frozenset[str] | None = None
    spec: dict[str, Any] = field(default_factory=dict, compare=False)
    """The filter as given (checked), for diagnostics."""

    @classmethod
    def of(cls, where: object) -> RecallFilter:
        """Check ``where`` (a dict, see the module) and build the filter; ValidationError naming
        the part at fault (``where.metadata.priority``) otherwise."""
        if isinstance(where, RecallFilter):
            return where
        if not isinstance(where, dict) or not where:
            raise ValidationError("where", f"must be a non-empty dict with {', '.join(_FILTER_KEYS)}, got {where!r}")
        unknown = sorted(set(where) - set(_FILTER_KEYS))
        if unknown:
            raise ValidationError(
                "where", f"unknown part(s) {', '.join(map(repr, unknown))}; known: {', '.join(_FILTER_KEYS)}"
            )
        conditions: list[_Condition] = []
        metadata = where.get("metadata")
        if metadata is not None:
            if not isinstance(metadata, dict) or not metadata:
                raise ValidationError("where.metadata", "must be a non-empty dict of key to value or range")
            conditions = [_condition(key, test) for key, test in metadata.items()]
        return cls(
            tuple(conditions),
            _labels(where.get("contexts"), "where.contexts"),
            _chosen(where.get("status"), "where.status", STATUSES),
            _chosen(where.get("standing"), "where.standing", STANDINGS),
            dict(where),
        )

    @property
    def key(self) -> str:
        """The filter as canonical JSON (equal filters, equal keys)."""
        return json.dumps(self.spec, sort_keys=True)

    def matches(self, memory: Memory) -> bool:
        """Whether ``memory`` passes every part of the filter."""
        return self.matches_state(memory.status, memory.standing) and self.matches_content(memory)

    def matches_state(self, status: str, standing: str) -> bool:
        """The status and standing part (what governance changes)."""
        if self.status is not None and status not in self.status:
            return False
        return self.standing is None or standing in self.standing

    def matches_content(self, memory: Memory) -> bool:
        """The metadata and context part (what never changes for a memory)."""
        if self.contexts is not None and self.contexts.isdisjoint(memory.contexts):
            return False
        return all(c.holds(memory.metadata) for c in self.metadata)


def _condition(key: object, test: object) -> _Condition:
    if not isinstance(key, str) or not key:
        raise ValidationError("where.metadata", f"keys must be non-empty strings, got {key!r}")
    where = f"where.metadata.{check_storable(key, 'where.metadata')}"
    if isinstance(test, dict):
        if not test:
            raise ValidationError(where, "an empty range: give gt, gte, lt, lte or in")
        if "in" in test:
            if len(test) != 1:
                raise ValidationError(where, "'in' goes alone, without range bounds")
            values = test["in"]
            if not isinstance(values, list) or not values:
                raise ValidationError(where, f"'in' must be a non-empty list of values, got {values!r}")
            return _Condition(key, tuple(_scalar(v, where) for v in values))
        bad = sorted(set(test) - set(RANGE_OPERATORS))
        if bad:
            raise ValidationError(where, f"unknown operator(s) {', '.join(map(repr, bad))}; use gt, gte, lt, lte or in")
        bounds = tuple((op, _bound(test[op], f"{where}.{op}")) for op in RANGE_OPERATORS if op in test)
        kinds = {isinstance(b, str) for _, b in bounds}
        if len(kinds) > 1:
            raise ValidationError(where, "the bounds of one range must all be numbers or all be strings")
        return _Condition(key, bounds=bounds)
    return _Condition(key, (_scalar(test, where),))


def _scalar(value: object, where: str) -> Any:
    """An equality value: a string, number, boolean or null (a list or an object is refused)."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        return check_storable(value, where)
    if isinstance(value, (int, float)) and math.isfinite(value):
        return value
    raise ValidationError(where, f"must be a string, a finite number, true, false or null, got {value!r}")


def _bound(value: object, where: str) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValidationError(where, f"a range bound must be a number or a string, got {value!r}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValidationError(where, f"a range bound must be finite, got {value!r}")
    return check_storable(value, where) if isinstance(value, str) else value


def _labels(value: object, where: str) -> frozenset[str] | None:
    if value is None:
        return None
    labels = check_labels(value, where)
    if not labels:
        raise ValidationError(where, "must name at least one label")
    return frozenset(labels)


def _chosen(value: object, where: str, allowed: tuple[str, ...]) -> frozenset[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v in allowed for v in value):
        raise ValidationError(where, f"must be a non-empty list of {', '.join(allowed)}, got {value!r}")
    return frozenset(value)


def _number(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _same(a: object, b: object) -> bool:
    """Typed equality: numbers by value, booleans only with booleans, strings with strings."""
    if _number(a) and _number(b):
        return a == b
    return type(a) is type(b) and a == b


def _compare(value: object, op: str, bound: object) -> bool:
    if not ((_number(value) and _number(bound)) or (isinstance(value, str) and isinstance(bound, str))):
        return False
    if op == "gt":
        return value > bound  # type: ignore[operator]
    if op == "gte":
        return value >= bound  # type: ignore[operator]
    if op == "lt":
        return value < bound  # type: ignore[operator]
    return value <= bound  # type: ignore[operator]
