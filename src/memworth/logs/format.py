"""The retrieval log format: one row per retrieved item of an episode.

Columns (``required`` marks the ones every log must have)::

    episode_id   required  text (or integer): one recall, its outcome and its items
    memory_id    required  text (or integer): the retrieved document or memory
    outcome      required  success/failure: true/false, 'success'/'failure', 1/0/-1
    timestamp    required  seconds since the epoch, or a date-time (ISO 8601 text or a timestamp type)
    score        optional  retrieval score (>= 0): credit proportional to it (--credit score)
    weight       optional  credit weight given by the caller (>= 0; --credit given)
    source       optional  who reported the outcome (default 'explicit')
    confidence   optional  how far to trust the outcome, in (0, 1] (default 1)
    namespace    optional  tenant (default 'default')
    context      optional  context label (task type, query cluster)

Every row of one episode must carry the same outcome. Logs that name the columns
differently are read through a :class:`ColumnMap`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from memworth.errors import ValidationError

__all__ = ["COLUMNS", "OUTCOME_WORDS", "Column", "ColumnMap"]


@dataclass(frozen=True)
class Column:
    """One column of the log format: its name, kind and whether a log must have it."""

    name: str
    kind: str
    required: bool
    meaning: str


COLUMNS: tuple[Column, ...] = (
    Column("episode_id", "text", True, "one recall, its outcome and its items"),
    Column("memory_id", "text", True, "the retrieved document or memory"),
    Column("outcome", "outcome", True, "success or failure of the episode"),
    Column("timestamp", "time", True, "when the outcome was recorded"),
    Column("score", "number", False, "retrieval score, for score-proportional credit"),
    Column("weight", "number", False, "credit weight given by the caller"),
    Column("source", "text", False, "who reported the outcome"),
    Column("confidence", "number", False, "trust in the outcome, in (0, 1]"),
    Column("namespace", "text", False, "tenant"),
    Column("context", "text", False, "context label"),
)
"""The columns of the log format, in the order :func:`memworth.logs.export` writes them."""

NAMES = tuple(c.name for c in COLUMNS)

OUTCOME_WORDS = {"success": True, "failure": False, "true": True, "false": False, "1": True, "0": False, "-1": False}
"""Outcome spellings a log may use (:func:`memworth.outcome.as_outcome`'s, as text)."""


@dataclass(frozen=True)
class ColumnMap:
    """Which column of a log holds each column of the format (for logs named differently).

    Examples
    --------
    >>> m = ColumnMap.parse(["episode_id=trace", "memory_id=doc"])
    >>> m.source("episode_id"), m.source("outcome")
    ('trace', 'outcome')
    >>> ColumnMap.parse(["episode=trace"])
    Traceback (most recent call last):
    ...
    memworth.errors.ValidationError: column: unknown column 'episode' in 'episode=trace'; the format's columns are episode_id, memory_id, outcome, timestamp, score, weight, source, confidence, namespace, context
    """

    renames: tuple[tuple[str, str], ...] = ()

    @classmethod
    def parse(cls, pairs: Iterable[str]) -> ColumnMap:
        """Read ``FORMAT=LOG`` pairs (``--column episode_id=trace_id``)."""
        out: dict[str, str] = {}
        for pair in pairs:
            name, sep, theirs = str(pair).partition("=")
            if not sep or not name.strip() or not theirs.strip():
                raise ValidationError("column", f"must be FORMAT_NAME=LOG_NAME, got {pair!r}")
            name = name.strip()
            if name not in NAMES:
                raise ValidationError(
                    "column", f"unknown column {name!r} in {pair!r}; the format's columns are {', '.join(NAMES)}"
                )
            if name in out:
                raise ValidationError("column", f"{name!r} is mapped twice")
            out[name] = theirs.strip()
        return cls(tuple(sorted(out.items())))

    def source(self, name: str) -> str:
        """The log's name for the format's column ``name``."""
        return dict(self.renames).get(name, name)
