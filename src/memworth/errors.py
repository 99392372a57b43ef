"""Every error memworth raises, in one tree.

::

    MemworthError                      root: ``except MemworthError`` catches them all
    ├── ValidationError(ValueError)    bad input; names the field and the reason
    │   └── OutcomeError               an outcome that is not success / failure
    ├── DuplicateError(ValueError)     a memory id or an episode's outcome that exists already
    ├── UnknownMemoryError(KeyError)   an id the tracker or store has never seen
    ├── UnknownEpisodeError(KeyError)  an episode id the store never handed out
    └── StoreError                     the database, its schema or the store's settings

Each error also inherits the matching built-in, so ``except ValueError`` keeps working
for callers that do not know memworth.
"""

from __future__ import annotations

__all__ = [
    "DuplicateError",
    "MemworthError",
    "OutcomeError",
    "StoreError",
    "UnknownEpisodeError",
    "UnknownMemoryError",
    "ValidationError",
]


class MemworthError(Exception):
    """Root of every error memworth raises."""


class ValidationError(MemworthError, ValueError):
    """Bad input, refused before anything was changed.

    Parameters
    ----------
    field
        The argument (or field of a record) that is wrong.
    reason
        Why it is wrong, in words a caller can act on.

    Examples
    --------
    >>> err = ValidationError("weights", "must not be negative")
    >>> str(err)
    'weights: must not be negative'
    >>> err.field, err.reason
    ('weights', 'must not be negative')
    """

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


class OutcomeError(ValidationError):
    """An outcome that is neither success nor failure."""


class UnknownMemoryError(MemworthError, KeyError):
    """A memory id that was never recorded.

    Examples
    --------
    >>> str(UnknownMemoryError("m42"))
    "unknown memory id: 'm42'"
    """

    def __init__(self, memory_id: object) -> None:
        super().__init__(memory_id)
        self.memory_id = memory_id

    def __str__(self) -> str:
        return f"unknown memory id: {self.memory_id!r}"


class StoreError(MemworthError):
    """A store could not do what was asked (its database, its schema, its settings)."""


class DuplicateError(MemworthError, ValueError):
    """Something that must be unique already exists: a memory id, an episode's outcome."""


class UnknownEpisodeError(MemworthError, KeyError):
    """An episode id the store has never handed out (or one from another namespace)."""

    def __init__(self, episode_id: object) -> None:
        super().__init__(episode_id)
        self.episode_id = episode_id

    def __str__(self) -> str:
        return f"unknown episode id: {self.episode_id!r}"
