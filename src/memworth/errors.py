"""Every error memworth raises, in one tree.

::

    MemworthError                        root: ``except MemworthError`` catches them all (400)
    ├── ValidationError(ValueError)      bad input; names the field and the reason (422)
    │   └── OutcomeError                 an outcome that is not success / failure
    ├── NotFoundError(KeyError)          an id nobody handed out (404)
    │   ├── UnknownMemoryError           a memory id the tracker or store has never seen
    │   │   └── ErasedMemoryError        a memory that was erased (only its tombstone is left)
    │   ├── UnknownEpisodeError          an episode id the store never handed out
    │   └── UnknownEntryError            an audit entry that does not exist
    ├── AuthError                        a missing, unknown, revoked or expired API key (401)
    │   ├── ReadOnlyError                a read-only API key asked to change something (403)
    │   └── NotAdminError                a key that is not an admin key asked to change settings (403)
    ├── ConflictError                    the request is at odds with the store's state (409)
    │   ├── DuplicateError(ValueError)   a memory id or an episode's outcome that exists already
    │   ├── SettingsConflictError        other writers kept new settings versions each time; nothing was written
    │   └── ChangedError(StoreError)     the memory changed since it was read; nothing was written
    └── StoreError                       the database, its schema or the store's settings (500)
        ├── UnavailableError             the database or the hot tier cannot be reached (503)
        ├── RateLimitError               a rate limit or quota holds the change back (429)
        ├── ChangedError                 (also a ConflictError, above)
        └── SettingsError                the store is not set up for what was asked (409)

Each error also inherits the matching built-in, so ``except ValueError`` keeps working
for callers that do not know memworth, and carries its HTTP status on the class
(``status``): every face maps errors to statuses by reading it, in one place.

Every error pickles whole (its class, message and fields such as ``field`` and
``reason``), so one raised in another process (the server's worker processes,
:mod:`memworth.server.processes`) is raised again here as itself.

Examples
--------
>>> from memworth.errors import RateLimitError, StoreError
>>> err = RateLimitError("rate limit: 3 promote/demote changes in the last 24 h")
>>> isinstance(err, StoreError), err.status
(True, 429)
"""

from __future__ import annotations

__all__ = [
    "AuthError",
    "ChangedError",
    "ConflictError",
    "DuplicateError",
    "ErasedMemoryError",
    "MemworthError",
    "NotAdminError",
    "NotFoundError",
    "OutcomeError",
    "RateLimitError",
    "ReadOnlyError",
    "SettingsConflictError",
    "SettingsError",
    "StoreError",
    "TransactionError",
    "UnavailableError",
    "UnknownEntryError",
    "UnknownEpisodeError",
    "UnknownMemoryError",
    "ValidationError",
]


def _rebuilt(cls: type[MemworthError], args: tuple[object, ...], fields: dict[str, object]) -> MemworthError:
    """An error of class ``cls`` with ``args`` and ``fields`` as pickled, without calling its
    ``__init__`` (whose parameters differ from ``args`` in most classes)."""
    err = cls.__new__(cls, *args)
    err.args = args
    err.__dict__.update(fields)
    return err


class MemworthError(Exception):
    """Root of every error memworth raises.

    Examples
    --------
    >>> import pickle
    >>> err = pickle.loads(pickle.dumps(ValidationError("k", "must be at least 1")))
    >>> type(err).__name__, err.field, err.reason, str(err)
    ('ValidationError', 'k', 'must be at least 1', 'k: must be at least 1')
    """

    status = 400
    """The HTTP status every face answers this error with."""

    def __reduce__(self) -> tuple[object, ...]:
        # Exception's own reduce calls ``cls(*self.args)``, which fails for the classes whose
        # __init__ takes (field, reason) or adds fields: rebuild from the fields instead.
        return (_rebuilt, (type(self), self.args, dict(self.__dict__)))


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
    >>> err.field, err.reason, err.status
    ('weights', 'must not be negative', 422)
    """

    status = 422

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


class OutcomeError(ValidationError):
    """An outcome that is neither success nor failure."""


class NotFoundError(MemworthError, KeyError):
    """Something asked for by id that does not exist (in this namespace)."""

    status = 404

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else "not found"


class UnknownMemoryError(NotFoundError):
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


class ErasedMemoryError(UnknownMemoryError):
    """A memory that was erased: its text, embedding and metadata are gone; the audit
    entry ``seq`` (its tombstone) says who erased it, when and why.

    Examples
    --------
    >>> str(ErasedMemoryError("m42", 7))
    "memory 'm42' was erased (audit entry 7): its text, embedding and metadata are gone"
    """

    def __init__(self, memory_id: object, seq: int) -> None:
        super().__init__(memory_id)
        self.seq = seq

    def __str__(self) -> str:
        return (
            f"memory {self.memory_id!r} was erased (audit entry {self.seq}): its text, embedding and metadata are gone"
        )


class UnknownEpisodeError(NotFoundError):
    """An episode id the store has never handed out (or one from another namespace);
    ``field`` names the item of a batch it came in (``outcomes[3].episode``), when it did.

    Examples
    --------
    >>> str(UnknownEpisodeError("e9", "outcomes[3].episode"))
    "unknown episode id: 'e9' (outcomes[3].episode)"
    """

    def __init__(self, episode_id: object, field: str | None = None) -> None:
        super().__init__(episode_id)
        self.episode_id = episode_id
        self.field = field

    def __str__(self) -> str:
        where = "" if self.field is None else f" ({self.field})"
        return f"unknown episode id: {self.episode_id!r}{where}"


class UnknownEntryError(NotFoundError):
    """An audit entry (by its sequence number) that the namespace does not hold."""

    def __init__(self, seq: object, namespace: str) -> None:
        super().__init__(seq)
        self.seq = seq
        self.namespace = namespace

    def __str__(self) -> str:
        return f"no audit entry {self.seq!r} in namespace {self.namespace!r}"


class AuthError(MemworthError):
    """A request whose API key is missing, unknown, revoked or expired, or that carries two
    different keys; ``field`` names the header and ``reason`` says which (HTTP answers 401
    with ``WWW-Authenticate: Bearer``).

    Examples
    --------
    >>> err = AuthError("Authorization", "API key 'ci' expired at 2026-01-01T00:00:00Z")
    >>> err.status, str(err)
    (401, "Authorization: API key 'ci' expired at 2026-01-01T00:00:00Z")
    """

    status = 401
    http_type = "Unauthorized"
    """The ``type`` the HTTP error body gives it (the HTTP status's name, as clients know it)."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


class ReadOnlyError(AuthError):
    """A read-only API key asked to change something; nothing was changed."""

    status = 403
    http_type = "Forbidden"


class NotAdminError(AuthError):
    """A key that is not an admin key asked to change the store's settings; nothing was changed."""

    status = 403
    http_type = "Forbidden"


class ConflictError(MemworthError):
    """The request is at odds with what the store holds now."""

    status = 409


class SettingsConflictError(ConflictError):
    """A new version of a store's settings could not be kept: each time it was about to be
    written, another store object (another process) had kept a newer one first. Nothing
    was written; the settings in force are the newest kept ones."""


class DuplicateError(ConflictError, ValueError):
    """Something that must be unique already exists: a memory id, an episode's outcome."""


class StoreError(MemworthError):
    """A store could not do what was asked (its database, its schema, its settings)."""

    status = 500


class UnavailableError(StoreError):
    """The database (or the Redis hot tier) cannot be reached now; try again later."""

    status = 503


class RateLimitError(StoreError):
    """A rate limit or a quota holds the change back; nothing was written."""

    status = 429


class ChangedError(StoreError, ConflictError):
    """The memory changed since it was read (by someone else, or by an earlier call);
    nothing was written."""

    status = 409


class SettingsError(StoreError):
    """The store is not set up for what was asked (no hot tier, another encoder)."""

    status = 409


class TransactionError(StoreError):
    """A transaction (:meth:`memworth.MemoryStore.transaction`) was opened on a store object
    that has one open: they do not nest, and a store object takes one at a time (a bug in
    the caller, hence 500); nothing was changed by the refused one."""
