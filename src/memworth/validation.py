"""How deep a caller's JSON value (a memory's metadata) may nest.

A memory's metadata is a JSON object of the caller's choosing. Its size in bytes is
limited where it is stored (``memworth.store.store.MAX_METADATA``); this module limits
its nesting: at most :data:`MAX_METADATA_DEPTH` levels of objects and lists, one inside
another. Without a limit, a value nested a few hundred levels deep was stored and then
could not be answered: the HTTP app's serialiser stops at 255 levels, so every later
``GET /v1/memories`` of that namespace failed with a 500, and Python's ``json`` stops
at its recursion limit (about 1,000 levels) with a ``RecursionError``. 32 levels is
far beyond any real record (a tag list inside a source inside a memory is 3) and far
below both.

The walk is iterative (no recursion, whatever the depth) and stops at the first
container past the limit, so a value that refers to itself is refused too.
"""

from __future__ import annotations

from typing import Any

from memworth.errors import ValidationError

__all__ = ["MAX_METADATA_DEPTH", "check_metadata_shape"]

MAX_METADATA_DEPTH = 32
"""Most levels of objects and lists, one inside another, that metadata may have (the
top-level object is level 1)."""

_CONTAINERS = (dict, list, tuple)


def check_metadata_shape(value: object, field: str = "metadata") -> None:
    """Refuse ``value`` if its objects and lists nest deeper than :data:`MAX_METADATA_DEPTH`.

    Parameters
    ----------
    value
        A JSON-like value: dicts, lists and tuples are containers, anything else a leaf
        (whether leaves are valid JSON is the caller's check).
    field
        The name the :class:`ValidationError` gives for ``value``.

    Raises
    ------
    ValidationError
        Naming ``field``, when a container sits at level ``MAX_METADATA_DEPTH + 1``.

    Examples
    --------
    >>> check_metadata_shape({"source": {"tags": ["a", "b"]}})  # 3 levels
    >>> check_metadata_shape("a leaf")  # 0 levels
    >>> deep: object = "leaf"
    >>> for _ in range(40):
    ...     deep = {"a": deep}
    >>> check_metadata_shape(deep)
    Traceback (most recent call last):
    ...
    memworth.errors.ValidationError: metadata: nests deeper than 32 levels of objects and lists (at metadata.a.a.a...); the limit is 32
    """
    if not isinstance(value, _CONTAINERS):
        return
    pending: list[tuple[Any, int]] = [(value, 1)]  # containers only
    while pending:
        item, level = pending.pop()
        if level > MAX_METADATA_DEPTH:
            raise ValidationError(
                field,
                f"nests deeper than {MAX_METADATA_DEPTH} levels of objects and lists"
                f" (at {_where(field, _path_past_limit(value))}); the limit is {MAX_METADATA_DEPTH}",
            )
        children = item.values() if isinstance(item, dict) else item
        pending += [(child, level + 1) for child in children if isinstance(child, _CONTAINERS)]


def _path_past_limit(value: Any) -> tuple[object, ...]:
    """Keys and indexes to a container past the limit (searched again only to name it in the error)."""
    pending: list[tuple[Any, tuple[object, ...]]] = [(value, ())]
    while pending:
        item, path = pending.pop()
        if len(path) >= MAX_METADATA_DEPTH:
            return path
        pairs = item.items() if isinstance(item, dict) else enumerate(item)
        pending += [(child, (*path, key)) for key, child in pairs if isinstance(child, _CONTAINERS)]
    return ()


def _where(field: str, path: tuple[object, ...]) -> str:
    """``field.a.b[0]...``: the first three steps to the place that is too deep."""
    steps = "".join(f"[{p}]" if isinstance(p, int) else f".{str(p)[:40]}" for p in path[:3])
    return f"{field}{steps}" + ("..." if len(path) > 3 else "")
