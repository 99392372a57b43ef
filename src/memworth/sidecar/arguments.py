"""The sidecar's arguments, checked: candidate lists, id lists, ``k``, the query and its context.

A candidate list is what the other store proposes: ``{"id": ..., "score": ...}`` objects
(the shape HTTP takes), ``(id, score)`` pairs, or ids alone, best first, scored by their
position (:func:`rank_scores`). Every check raises :class:`memworth.ValidationError`
naming the argument, before anything is written.

Examples
--------
>>> ids, scores = candidate_scores([("doc-1", 0.8), ("doc-2", 0.7)])
>>> ids, scores.tolist()
(['doc-1', 'doc-2'], [0.8, 0.7])
>>> candidate_scores([{"id": "doc-1", "score": 0.8}, {"id": "doc-2", "score": 0.7}])[0]
['doc-1', 'doc-2']
>>> candidate_scores(["doc-1", "doc-1"])
Traceback (most recent call last):
...
memworth.errors.ValidationError: candidates: the same id appears twice
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from memworth.errors import ValidationError
from memworth.validation import check_context, check_k, check_memory_id

__all__ = [
    "MAX_CANDIDATES",
    "MAX_QUERY",
    "MAX_RETRIEVED",
    "candidate_scores",
    "check_context",
    "check_ids",
    "check_k",
    "check_query",
    "rank_scores",
]

MAX_CANDIDATES = 10_000
"""Most candidates one call may re-rank or filter."""
MAX_RETRIEVED = 1_000
"""Most ids one episode logged by :meth:`Sidecar.retrieved` may hold."""
MAX_QUERY = 32_768


def rank_scores(n: int) -> np.ndarray:
    """Similarity stand-ins for ``n`` candidates known only by their order: ``1 - i / n``.

    Examples
    --------
    >>> rank_scores(4).tolist()
    [1.0, 0.75, 0.5, 0.25]
    """
    return 1.0 - np.arange(n, dtype=float) / max(n, 1)


def check_ids(value: object, field_name: str = "ids", limit: int = MAX_CANDIDATES) -> list[str]:
    """``value`` as a list of at most ``limit`` valid memory ids, none twice."""
    if isinstance(value, (str, bytes, dict)) or not isinstance(value, Sequence):
        raise ValidationError(field_name, f"must be a list of memory ids, got {type(value).__name__}")
    if len(value) > limit:
        raise ValidationError(field_name, f"holds {len(value)} ids; the limit is {limit}")
    out = [check_memory_id(v) for v in value]
    if len(set(out)) != len(out):
        raise ValidationError(field_name, "the same id appears twice")
    return out


def candidate_scores(value: object) -> tuple[list[str], np.ndarray]:
    """``[(id, score), ...]`` or ``[id, ...]`` (scored by :func:`rank_scores`) to ids and scores."""
    if isinstance(value, (str, bytes, dict)) or not isinstance(value, Sequence):
        raise ValidationError("candidates", f"must be a list of ids or (id, score) pairs, got {type(value).__name__}")
    if value and all(isinstance(c, str) for c in value):
        ids = check_ids(value, "candidates")
        return ids, rank_scores(len(ids))
    ids, scores = [], []
    for i, c in enumerate(value):
        if isinstance(c, Mapping):  # the HTTP shape
            if set(c) != {"id", "score"}:
                raise ValidationError(f"candidates[{i}]", f"must have the keys id and score, got {sorted(map(str, c))}")
            c = (c["id"], c["score"])
        if not isinstance(c, (tuple, list)) or len(c) != 2:
            raise ValidationError(
                f"candidates[{i}]", "must be an {id, score} object or an (id, score) pair (or give only ids, in order)"
            )
        s = c[1]
        if isinstance(s, bool) or not isinstance(s, (int, float)) or not math.isfinite(s):
            raise ValidationError(f"candidates[{i}]", f"score must be a finite number, got {s!r}")
        ids.append(c[0])
        scores.append(float(s))
    return check_ids(ids, "candidates"), np.array(scores, dtype=float)


def check_query(query: object) -> str:
    """``query``: a string of at most :data:`MAX_QUERY` characters (it is logged, never embedded)."""
    if not isinstance(query, str):
        raise ValidationError("query", f"must be a string, got {type(query).__name__}")
    if len(query) > MAX_QUERY:
        raise ValidationError("query", f"is {len(query)} characters; the limit is {MAX_QUERY}")
    return query
