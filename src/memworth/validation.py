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
    >>> deep: object = "leaf"
    >>> for _ in range(40):
    ...     deep = {"a": deep}
    >>> check_metadata_shape(deep)
    Traceback (most recent call last):
    ...
    memworth.errors.ValidationError: metadata: nests deeper than 32 levels of objects and lists (at metadata.a.a.a...); the limit is 32
    """
    pending: list[tuple[Any, int, tuple[object, ...]]] = [(value, 1, ())]
    while pending:
        item, level, path = pending.pop()
        if isinstance(item, dict):
            children: list[tuple[object, Any]] = list(item.items())
        elif isinstance(item, (list, tuple)):
            children = list(enumerate(item))
        else:
            continue
        if level > MAX_METADATA_DEPTH:
            raise ValidationError(
                field,
                f"nests deeper than {MAX_METADATA_DEPTH} levels of objects and lists (at {_where(field, path)});"
                f" the limit is {MAX_METADATA_DEPTH}",
            )
        pending += [(child, level + 1, (*path, key)) for key, child in children if isinstance(child, (dict, list, tuple))]


def _where(field: str, path: tuple[object, ...]) -> str:
    """``field.a.b[0]...``: the first three steps to the place that is too deep."""
    steps = "".join(f"[{p}]" if isinstance(p, int) else f".{str(p)[:40]}" for p in path[:3])
    return f"{field}{steps}" + ("..." if len(path) > 3 else "")
