"""API keys: each bound to one namespace, stored only as a SHA-256 hash in the store's meta table.

A key is 32 random bytes (URL-safe text, prefixed ``mw_``); with that much entropy a
plain SHA-256 is the right hash (a slow password hash buys nothing). The key itself is
shown once, when created, and never stored.

A key has a name (a label, unique or not within its namespace), may be read-only (it
reads, and is refused any change with 403) and may expire. :func:`list_keys` shows what
the store keeps of each, never the key or its hash; each key gets a public ``id`` (a
hash of the hash: it cannot sign in) that tells apart keys of the same name.
:func:`authenticate` is the one check every face runs on a request's key.

Examples
--------
>>> from memworth import HashingEncoder, MemoryStore
>>> store = MemoryStore.open("memory://", encoder=HashingEncoder())
>>> key = create_key(store, "team", "ci", read_only=True)
>>> [(k.name, k.namespace, k.read_only, k.state(0.0)) for k in list_keys(store)]
[('ci', 'team', True, 'active')]
>>> authenticate(store, f"Bearer {key}", None, write=True)
Traceback (most recent call last):
...
memworth.errors.ReadOnlyError: Authorization: API key 'ci' is read-only: it may read (GET) but not change anything
>>> revoke(store, "team", name="ci").name
'ci'
>>> revoke(store, "team", name="ci")
Traceback (most recent call last):
...
memworth.errors.ConflictError: API key 'ci' (namespace 'team') was revoked already, at ...
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import secrets
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from memworth.errors import AuthError, ConflictError, NotFoundError, ReadOnlyError, ValidationError
from memworth.store import MemoryStore
from memworth.validation import check_flag, check_name

__all__ = [
    "KeyInfo",
    "authenticate",
    "check_key",
    "create_key",
    "expiry",
    "key_hash",
    "key_info",
    "key_record",
    "list_keys",
    "lookup_key",
    "presented",
    "revoke",
    "revoke_key",
    "stored_key",
]

PREFIX = "apikey:"
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def _public_id(digest: str) -> str:
    return hashlib.sha256(f"memworth key id {digest}".encode()).hexdigest()[:12]


def iso(t: float) -> str:
    """``t`` (seconds since the epoch) as an ISO 8601 UTC time, to the second."""
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class KeyInfo:
    """What the store keeps of an API key: never the key, never its hash."""

    id: str
    name: str
    namespace: str
    created: float
    expires: float | None
    read_only: bool
    revoked: float | None
    """When it was revoked (seconds since the epoch; 0.0 for a key revoked before this was kept), or None."""
    admin: bool = False
    """Whether it may change the store's settings (``PUT /v1/config``), which every namespace works under."""

    def state(self, now: float) -> Literal["active", "revoked", "expired"]:
        if self.revoked is not None:
            return "revoked"
        return "expired" if self.expires is not None and now >= self.expires else "active"

    def row(self, now: float | None = None) -> dict[str, Any]:
        """The key as the faces show it (times as ISO 8601 UTC)."""
        return {
            "id": self.id,
            "name": self.name,
            "namespace": self.namespace,
            "created": iso(self.created),
            "expires": None if self.expires is None else iso(self.expires),
            "read_only": self.read_only,
            "admin": self.admin,
            "revoked": None if self.revoked is None else iso(self.revoked),
            "state": self.state(time.time() if now is None else now),
        }


def _info(digest: str, raw: str) -> KeyInfo:
    r = json.loads(raw)
    revoked = r.get("revoked")
    when = None if revoked in (False, None) else (0.0 if revoked is True else float(revoked))
    expires = r.get("expires")
    return KeyInfo(
        id=_public_id(digest),
        name=str(r["name"]),
        namespace=str(r["namespace"]),
        created=float(r["created"]),
        expires=None if expires is None else float(expires),
        read_only=bool(r.get("read_only", False)),
        revoked=when,
        admin=r.get("admin") is True,
    )


def expiry(
    expires_in: str | float | None = None, expires_at: str | None = None, now: float | None = None
) -> float | None:
    """When a key made now expires (seconds since the epoch), from a duration or a time, or None (never).

    ``expires_in`` is seconds (``3600``) or a number with a unit: ``90s``, ``45m``, ``12h``,
    ``30d``. ``expires_at`` is an ISO 8601 time with its time zone (``2027-01-01T00:00:00Z``).

    >>> expiry("30d", now=0.0), expiry(3600, now=0.0), expiry(expires_at="1970-01-02T00:00:00+00:00", now=0.0)
    (2592000.0, 3600.0, 86400.0)
    >>> expiry("soon")
    Traceback (most recent call last):
    ...
    memworth.errors.ValidationError: expires_in: must be seconds or a number with a unit s, m, h or d (e.g. 30d), got 'soon'
    """
    now = time.time() if now is None else now
    if expires_in is not None and expires_at is not None:
        raise ValidationError("expires_in", "give expires_in or expires_at, not both")
    if expires_in is not None:
        if isinstance(expires_in, bool) or not isinstance(expires_in, (str, int, float)):
            raise ValidationError("expires_in", f"must be seconds or a duration such as 30d, got {expires_in!r}")
        if isinstance(expires_in, str):
            found = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*", expires_in)
            if found is None:
                raise ValidationError(
                    "expires_in",
                    f"must be seconds or a number with a unit s, m, h or d (e.g. 30d), got {expires_in!r}",
                )
            seconds = float(found.group(1)) * _UNITS[found.group(2) or "s"]
        else:
            seconds = float(expires_in)
        if not math.isfinite(seconds) or seconds <= 0:
            raise ValidationError("expires_in", f"must be a positive duration, got {expires_in!r}")
        return now + seconds
    if expires_at is not None:
        try:
            at = datetime.fromisoformat(expires_at.replace("Z", "+00:00"))
        except (ValueError, AttributeError):
            raise ValidationError(
                "expires_at", f"must be an ISO 8601 time such as 2027-01-01T00:00:00Z, got {expires_at!r}"
            ) from None
        if at.tzinfo is None:
            raise ValidationError("expires_at", f"needs a time zone (e.g. Z or +02:00), got {expires_at!r}")
        if at.timestamp() <= now:
            raise ValidationError("expires_at", f"is in the past ({expires_at})")
        return at.timestamp()
    return None


def create_key(
    store: MemoryStore,
    namespace: str,
    name: str,
    *,
    read_only: bool = False,
    expires: float | None = None,
    admin: bool = False,
) -> str:
    """Create a key for ``namespace``; returns the key (the only time it is visible).

    ``read_only``: the key may read but not change anything. ``expires``: when it stops
    working (seconds since the epoch, see :func:`expiry`), or None for never. ``admin``:
    the key may also change the store's settings (``PUT /v1/config``), which every
    namespace works under (any key may read them); an admin key cannot be read-only.
    """
    check_name(namespace, "namespace")
    if not isinstance(name, str) or not name.strip() or len(name) > 200:
        raise ValidationError("name", "must be a non-empty label of at most 200 characters")
    check_flag(read_only, "read_only")
    check_flag(admin, "admin")
    if admin and read_only:
        raise ValidationError("admin", "an admin key changes settings: it cannot be read-only")
    if expires is not None and (isinstance(expires, bool) or not isinstance(expires, (int, float))):
        raise ValidationError("expires", f"must be seconds since the epoch, got {expires!r}")
    if expires is not None and (not math.isfinite(expires) or expires <= time.time()):
        raise ValidationError("expires", f"must be a time in the future, got {expires!r}")
    key = "mw_" + secrets.token_urlsafe(32)
    record = {
        "namespace": namespace,
        "name": name,
        "created": time.time(),
        "revoked": None,
        "read_only": read_only,
        "expires": None if expires is None else float(expires),
        "admin": admin,
    }
    store.backend.set_meta(PREFIX + _digest(key), json.dumps(record))
    return key


def list_keys(store: MemoryStore, namespace: str | None = None) -> list[KeyInfo]:
    """Every key of ``namespace`` (of every namespace if None), oldest first; revoked and expired ones too."""
    found = [_info(k[len(PREFIX) :], v) for k, v in store.backend.meta_items(PREFIX)]
    return sorted((k for k in found if namespace is None or k.namespace == namespace), key=lambda k: (k.created, k.id))


_PARSED: dict[tuple[str, str], KeyInfo] = {}
"""Keys read lately, parsed: (hash, stored record) -> KeyInfo. The record is read from the
store on every request all the same and is part of the entry's name, so a key revoked by any
process (its record rewritten) misses here and stops working at once; what this saves is
the parse (JSON, the public id's second hash) of a record seen before."""

_PARSED_MAX = 4096


def _parsed(digest: str, raw: str) -> KeyInfo:
    found = _PARSED.get((digest, raw))
    if found is None:
        found = _info(digest, raw)
        if len(_PARSED) >= _PARSED_MAX:
            _PARSED.clear()  # simple bound: the next requests parse their keys again
        _PARSED[(digest, raw)] = found
    return found


def _find(store: MemoryStore, key: str) -> tuple[str, KeyInfo] | None:
    digest = key_hash(key)
    info = stored_key(store, digest)
    return None if info is None else (digest, info)


def key_info(store: MemoryStore, key: str) -> KeyInfo | None:
    """What the store keeps of ``key`` (revoked or expired too), or None if it never handed it out."""
    found = _find(store, key)
    return None if found is None else found[1]


def authenticate(
    store: MemoryStore, authorization: str | None, x_api_key: str | None, *, write: bool, now: float | None = None
) -> KeyInfo:
    """The key a request carries, checked: the request's ``Authorization`` (``Bearer <key>``) and
    ``X-API-Key`` headers may carry one key, or the same key twice.

    An ``Authorization`` of another scheme (``Basic``, for a proxy in front) carries no key.
    Raises :class:`AuthError` (401) naming the header and the reason: no key, two different
    keys, an unknown, revoked or expired key; and :class:`ReadOnlyError` (403) when ``write``
    and the key is read-only. The steps, for a face that runs them apart: :func:`presented`,
    :func:`stored_key`, :func:`check_key`.
    """
    field, key = presented(authorization, x_api_key)
    info = stored_key(store, key_hash(key))
    if info is None:
        raise AuthError(field, "unknown API key")
    return check_key(info, field, write=write, now=now)


def key_hash(key: str) -> str:
    """The hash the store keeps a key under ("" for text that is no key memworth hands out:
    no key is stored under it)."""
    if not isinstance(key, str) or not key.startswith("mw_") or len(key) > 100:
        return ""
    return _digest(key)


def stored_key(store: MemoryStore, digest: str) -> KeyInfo | None:
    """What the store keeps now of the key with hash ``digest`` (read from the store, revoked or
    expired too), or None."""
    raw = store.backend.get_meta(PREFIX + digest) if digest else None
    return None if raw is None else _parsed(digest, raw)


def check_key(info: KeyInfo, field: str, *, write: bool, now: float | None = None) -> KeyInfo:
    """``info`` if the key may be used now (and, with ``write``, change something); else
    :class:`AuthError` (revoked, expired) or :class:`ReadOnlyError` naming ``field``."""
    now = time.time() if now is None else now
    state = info.state(now)
    if state == "revoked":
        raise AuthError(
            field, f"API key {info.name!r} was revoked" + (f" at {iso(info.revoked)}" if info.revoked else "")
        )
    if state == "expired" and info.expires is not None:
        raise AuthError(field, f"API key {info.name!r} expired at {iso(info.expires)}")
    if write and info.read_only:
        raise ReadOnlyError(field, f"API key {info.name!r} is read-only: it may read (GET) but not change anything")
    return info


def presented(authorization: str | None, x_api_key: str | None) -> tuple[str, str]:
    """The one key a request's headers carry and the header it came in, ``(field, key)``;
    :class:`AuthError` for none, or two different ones. Reads no store."""
    given: list[tuple[str, str]] = []
    if x_api_key is not None:
        given.append(("X-API-Key", x_api_key.strip()))
    scheme = None
    if authorization is not None:
        scheme, _, credentials = authorization.strip().partition(" ")
        if scheme.lower() == "bearer":
            given.append(("Authorization", credentials.strip()))
    given = [(field, key) for field, key in given if key]  # an empty header carries no key
    if not given:
        other = "" if scheme is None or scheme.lower() == "bearer" else f" (Authorization uses the {scheme} scheme)"
        raise AuthError(
            "Authorization", f"an API key is required: 'Authorization: Bearer <key>' or 'X-API-Key: <key>'{other}"
        )
    if len({k for _, k in given}) > 1:
        raise AuthError("X-API-Key", "differs from the key in Authorization: send one key (or the same key in both)")
    return given[-1]


def key_record(store: MemoryStore, key: str) -> dict[str, Any] | None:
    """What the store keeps of a valid key (unrevoked, unexpired): ``namespace``, ``name``,
    ``created``, ``read_only``, ``expires``; or None. The faces name the key in the audit log
    of the changes it makes."""
    found = _find(store, key)
    if found is None or found[1].state(time.time()) != "active":
        return None
    info = found[1]
    return {
        "namespace": info.namespace,
        "name": info.name,
        "created": info.created,
        "read_only": info.read_only,
        "expires": info.expires,
    }


def lookup_key(store: MemoryStore, key: str) -> str | None:
    """The namespace a valid key (unrevoked, unexpired) is bound to, or None."""
    record = key_record(store, key)
    return None if record is None else str(record["namespace"])


def _revoke(store: MemoryStore, digest: str, info: KeyInfo) -> KeyInfo:
    if info.revoked is not None:
        when = f", at {iso(info.revoked)}" if info.revoked else ""
        raise ConflictError(f"API key {info.name!r} (namespace {info.namespace!r}) was revoked already{when}")
    raw = store.backend.get_meta(PREFIX + digest)
    record = json.loads(raw or "{}")
    record["revoked"] = time.time()
    store.backend.set_meta(PREFIX + digest, json.dumps(record))
    return _info(digest, json.dumps(record))


def revoke(store: MemoryStore, namespace: str, *, name: str | None = None, key_id: str | None = None) -> KeyInfo:
    """Revoke the key of ``namespace`` named ``name`` (or whose public ``key_id`` it is); returns it, revoked.

    Raises :class:`NotFoundError` if there is none, :class:`ValidationError` if the name is
    ambiguous (several keys of the namespace carry it: revoke by ``key_id``) and
    :class:`ConflictError` if it was revoked already.
    """
    check_name(namespace, "namespace")
    if (name is None) == (key_id is None):
        raise ValidationError("name", "give the key's name or its id, one of the two")
    matches = [
        (k[len(PREFIX) :], v)
        for k, v in store.backend.meta_items(PREFIX)
        if (info := _info(k[len(PREFIX) :], v)).namespace == namespace
        and (info.name == name if key_id is None else info.id == key_id)
    ]
    what = f"name {name!r}" if key_id is None else f"id {key_id!r}"
    if not matches:
        raise NotFoundError(f"no API key with {what} in namespace {namespace!r}")
    if len(matches) > 1:
        live = [(d, v) for d, v in matches if _info(d, v).revoked is None]
        if not live:
            raise ConflictError(
                f"the {len(matches)} API keys with {what} in namespace {namespace!r} were revoked already"
            )
        if len(live) > 1:
            ids = ", ".join(_info(d, v).id for d, v in matches)
            raise ValidationError(
                "name",
                f"{len(matches)} keys of namespace {namespace!r} are named {name!r} (ids {ids}): revoke one by its id",
            )
        matches = live
    digest, raw = matches[0]
    return _revoke(store, digest, _info(digest, raw))


def revoke_key(store: MemoryStore, key: str) -> bool:
    """Revoke a key by the key itself; returns whether it existed (:class:`ConflictError` if it was revoked already)."""
    found = _find(store, key)
    if found is None:
        return False
    _revoke(store, *found)
    return True
