"""Every check of a caller's input, in one place: texts, names, ids, labels, metadata, ``k``.

Each ``check_*`` function returns the value it accepts (unchanged, or as the type it
promises) and refuses anything else with :class:`memworth.errors.ValidationError` naming
the field and the reason, before anything is written. The store, the sidecar, the HTTP
and MCP servers, the API keys and the adapters all call these, so a value is refused
the same way, with the same words, whichever face it came through.

Texts are checked to be storable by every backend: no NUL (PostgreSQL's text type has
none) and no lone surrogate (not UTF-8).

A memory's metadata is a JSON object of the caller's choosing, at most
:data:`MAX_METADATA` bytes as JSON and at most :data:`MAX_METADATA_DEPTH` levels of
objects and lists deep. Without a depth limit, a value nested a few hundred levels deep
was stored and then could not be answered: the HTTP app's serialiser stops at 255
levels, so every later ``GET /v1/memories`` of that namespace failed with a 500, and
Python's ``json`` stops at its recursion limit (about 1,000 levels) with a
``RecursionError``. 32 levels is far beyond any real record (a tag list inside a source
inside a memory is 3) and far below both. The depth walk is iterative (no recursion,
whatever the depth) and stops at the first container past the limit, so a value that
refers to itself is refused too.

Examples
--------
>>> check_name("team-a", "namespace")
'team-a'
>>> check_labels(["python", "python", "lists"], "contexts")
('python', 'lists')
>>> check_text("  ", "query")
Traceback (most recent call last):
...
memworth.errors.ValidationError: query: must not be empty
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import numpy as np

from memworth.errors import ValidationError

__all__ = [
    "MAX_ACTOR",
    "MAX_K",
    "MAX_METADATA",
    "MAX_METADATA_DEPTH",
    "MAX_PAGE",
    "MAX_REASON",
    "MAX_TEXT",
    "MAX_TTL",
    "check_actor",
    "check_confidence",
    "check_context",
    "check_k",
    "check_labels",
    "check_limit",
    "check_memory_id",
    "check_metadata",
    "check_metadata_shape",
    "check_name",
    "check_reason",
    "check_storable",
    "check_store_settings",
    "check_text",
    "check_ttl",
    "check_verifier",
]

MAX_TEXT = 32_768
"""Longest memory text or query, in characters."""
MAX_REASON = 2_000
"""Longest reason a caller gives for a change (a status, a verdict, a pin, a restore, an
erasure): a sentence or a paragraph, kept in the audit log. One limit for every face: the
Python API, the CLI, HTTP (a body field, or the ``reason`` query of ``DELETE``, which must
fit in a URL) and MCP all refuse a longer one with this check's words. The notes the store
adds to a reason (``confirmed:``, ``(undoes entry 7: suppress)``) are not counted."""
MAX_METADATA = 65_536
"""Largest metadata, as JSON bytes."""
MAX_K = 100
"""Most memories one recall may return."""

_NAME = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")


def check_storable(value: str, field_name: str) -> str:
    """Refuse text no backend keeps faithfully: NUL (PostgreSQL's text type has none) and lone surrogates (not UTF-8).

    Examples
    --------
    >>> check_storable("café", "text")
    'café'
    >>> check_storable("a\\x00b", "text")
    Traceback (most recent call last):
    ...
    memworth.errors.ValidationError: text: must not contain NUL characters (\\x00)
    """
    if "\x00" in value:
        raise ValidationError(field_name, "must not contain NUL characters (\\x00)")
    if value.isascii():  # no surrogate possible: skip the encoding below
        return value
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValidationError(field_name, "must be valid UTF-8 text; it holds a lone surrogate") from None
    return value


def check_text(value: object, field_name: str) -> str:
    """``value`` as a memory text, query or reason: a non-blank, storable string of at most :data:`MAX_TEXT` characters.

    Parameters
    ----------
    value
        What the caller gave.
    field_name
        The name the :class:`ValidationError` gives for ``value``.

    Examples
    --------
    >>> check_text("Prague is the capital of the Czech Republic.", "text")
    'Prague is the capital of the Czech Republic.'
    >>> check_text(42, "text")
    Traceback (most recent call last):
    ...
    memworth.errors.ValidationError: text: must be a string, got int
    """
    if not isinstance(value, str):
        raise ValidationError(field_name, f"must be a string, got {type(value).__name__}")
    if not value.strip():
        raise ValidationError(field_name, "must not be empty")
    if len(value) > MAX_TEXT:
        raise ValidationError(field_name, f"is {len(value)} characters; the limit is {MAX_TEXT}")
    return check_storable(value, field_name)


def check_reason(value: object, field_name: str = "reason") -> str:
    """``value`` as the reason a caller gives for a change: a non-blank, storable string of at
    most :data:`MAX_REASON` characters (every face calls this, so each refuses the same way).

    Examples
    --------
    >>> check_reason("false alarm")
    'false alarm'
    >>> check_reason("x" * 2001)
    Traceback (most recent call last):
    ...
    memworth.errors.ValidationError: reason: is 2001 characters; the limit is 2000
    """
    if isinstance(value, str) and len(value) > MAX_REASON and value.strip():
        raise ValidationError(field_name, f"is {len(value)} characters; the limit is {MAX_REASON}")
    return check_text(value, field_name)


def check_name(value: object, field_name: str) -> str:
    """``value`` as a name (a namespace, a source): 1-64 letters, digits, ``_ . : -``.

    Examples
    --------
    >>> check_name("default", "namespace")
    'default'
    >>> check_name("a b", "namespace")
    Traceback (most recent call last):
    ...
    memworth.errors.ValidationError: namespace: must be 1-64 characters of letters, digits, _ . : -, got 'a b'
    """
    if not isinstance(value, str) or not _NAME.match(value):
        raise ValidationError(field_name, f"must be 1-64 characters of letters, digits, _ . : -, got {value!r}")
    return value


def check_memory_id(value: object, field_name: str = "id") -> str:
    """``value`` as an id (of a memory, an episode): a storable string of 1-200 characters without edge spaces.

    Examples
    --------
    >>> check_memory_id("notes/2024 café")
    'notes/2024 café'
    >>> check_memory_id(" x", "episode_id")
    Traceback (most recent call last):
    ...
    memworth.errors.ValidationError: episode_id: must be a non-empty string of at most 200 characters without edge spaces, got ' x'
    """
    if not isinstance(value, str) or not value or len(value) > 200 or value != value.strip():
        raise ValidationError(
            field_name, f"must be a non-empty string of at most 200 characters without edge spaces, got {value!r}"
        )
    return check_storable(value, field_name)


def check_labels(value: object, field_name: str) -> tuple[str, ...]:
    """``value`` as labels (contexts, provenance ids): a list of storable strings of 1-200
    characters, duplicates dropped in order; ``None`` is no labels.

    Examples
    --------
    >>> check_labels(None, "contexts")
    ()
    >>> check_labels("python", "contexts")
    Traceback (most recent call last):
    ...
    memworth.errors.ValidationError: contexts: must be a list of strings, got str
    """
    if value is None:
        return ()
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        raise ValidationError(field_name, f"must be a list of strings, got {type(value).__name__}")
    out = []
    for v in value:
        if not isinstance(v, str) or not v or len(v) > 200:
            raise ValidationError(field_name, f"entries must be non-empty strings of at most 200 characters, got {v!r}")
        out.append(check_storable(v, field_name))
    return tuple(dict.fromkeys(out))


def check_metadata(value: object) -> dict[str, Any]:
    """``value`` as a memory's metadata: a JSON object (``None``: empty) of at most
    :data:`MAX_METADATA` bytes and :data:`MAX_METADATA_DEPTH` levels, every key and
    string storable; returned as a fresh copy (the JSON round trip).

    Examples
    --------
    >>> check_metadata({"source": "wiki", "tags": ["geo"]})
    {'source': 'wiki', 'tags': ['geo']}
    >>> check_metadata({"tags": {"geo"}})
    Traceback (most recent call last):
    ...
    memworth.errors.ValidationError: metadata: must be JSON-serialisable: Object of type set is not JSON serializable
    """
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise ValidationError("metadata", "must be a JSON object (a dict with string keys)")
    check_metadata_shape(value, "metadata")  # depth first: json.dumps recurses, and a 500 waits deeper
    try:
        text = json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValidationError("metadata", f"must be JSON-serialisable: {exc}") from None
    if len(text.encode()) > MAX_METADATA:
        raise ValidationError("metadata", f"is {len(text.encode())} bytes as JSON; the limit is {MAX_METADATA}")
    data = dict(json.loads(text))
    pending: list[Any] = [data]
    while pending:  # every key and string inside, at any depth
        item = pending.pop()
        if isinstance(item, str):
            check_storable(item, "metadata")
        elif isinstance(item, dict):
            pending += [*item, *item.values()]
        elif isinstance(item, list):
            pending += item
    return data


MAX_TTL = 100 * 365.25 * 86400
"""Longest time to live a memory or a namespace may be given: 100 years, in seconds."""


def check_ttl(value: object, field_name: str = "ttl") -> float | None:
    """``value`` as a time to live: None (never expires) or a number of seconds in (0, :data:`MAX_TTL`].

    Examples
    --------
    >>> check_ttl(3600)
    3600.0
    >>> check_ttl("3600")
    Traceback (most recent call last):
    ...
    memworth.errors.ValidationError: ttl: must be a number of seconds in (0, 3155760000], or None, got '3600'
    """
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or not 0 < value <= MAX_TTL
    ):
        raise ValidationError(field_name, f"must be a number of seconds in (0, {MAX_TTL:.0f}], or None, got {value!r}")
    return float(value)


MAX_PAGE = 1000
"""Most items one page of a list (memories, audit entries, outcomes) holds."""


def check_limit(value: object) -> int:
    """``value`` as a page size: an integer from 1 to :data:`MAX_PAGE`.

    Examples
    --------
    >>> check_limit(50)
    50
    >>> check_limit("2")
    Traceback (most recent call last):
    ...
    memworth.errors.ValidationError: limit: must be an integer from 1 to 1000, got '2'
    """
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_PAGE:
        raise ValidationError("limit", f"must be an integer from 1 to {MAX_PAGE}, got {value!r}")
    return value


MAX_ACTOR = 400
"""Longest actor label: a person's or service's name, and the API key it came through."""


def check_actor(value: object) -> str | None:
    """``value`` as who made a change (a person, a service): None, or a storable string of
    1-:data:`MAX_ACTOR` characters without edge spaces.

    Examples
    --------
    >>> check_actor("alice@example.com (api key agent-7)")
    'alice@example.com (api key agent-7)'
    """
    if value is None:
        return None
    if not isinstance(value, str) or not value or len(value) > MAX_ACTOR or value != value.strip():
        raise ValidationError(
            "actor", f"must be a non-empty string of at most {MAX_ACTOR} characters without edge spaces, got {value!r}"
        )
    return check_storable(value, "actor")


def check_confidence(value: object) -> float:
    """``value`` as an outcome's confidence: a number in (0, 1].

    Examples
    --------
    >>> check_confidence(1)
    1.0
    >>> check_confidence(0)
    Traceback (most recent call last):
    ...
    memworth.errors.ValidationError: confidence: must be a number in (0, 1], got 0
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or not 0 < value <= 1:
        raise ValidationError("confidence", f"must be a number in (0, 1], got {value!r}")
    return float(value)


def check_k(k: object) -> int:
    """``k``, how many to pick: an integer from 1 to :data:`MAX_K`.

    Examples
    --------
    >>> check_k(4)
    4
    >>> check_k(0)
    Traceback (most recent call last):
    ...
    memworth.errors.ValidationError: k: must be an integer from 1 to 100, got 0
    """
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
        raise ValidationError("k", f"must be an integer from 1 to {MAX_K}, got {k!r}")
    return k


def check_context(context: object) -> None:
    """``context``: None, or one valid context label (as :func:`check_labels` takes them)."""
    if context is not None:
        check_labels([context], "context")


def check_store_settings(clock: object, seed: object) -> None:
    """Refuse, when a store is made, a clock or seed that would otherwise fail at the first recall.

    (Every other setting is checked by :class:`memworth.settings.Settings`.)
    """
    if not callable(clock):
        raise ValidationError("clock", f"must be a function returning seconds since the epoch, got {clock!r}")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0):
        raise ValidationError("seed", f"must be a non-negative integer or None, got {seed!r}")


def check_verifier(verifier: object) -> None:
    """Refuse a store's ``verifier`` that is not a function of a report (or None)."""
    if verifier is not None and not callable(verifier):
        raise ValidationError("verifier", f"must be a function of a MemoryReport, got {type(verifier).__name__}")


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


def check_flag(value: object, field_name: str) -> bool:
    """``value`` as a yes/no switch: ``True`` or ``False`` only (``"no"``, ``1`` or ``None``
    would otherwise pass for one of them).

    Examples
    --------
    >>> check_flag(False, "apply")
    False
    >>> check_flag("no", "apply")
    Traceback (most recent call last):
    ...
    memworth.errors.ValidationError: apply: must be true or false, got 'no'
    """
    if not isinstance(value, bool):
        raise ValidationError(field_name, f"must be true or false, got {value!r}")
    return value
