"""API keys: each bound to one namespace, stored only as a SHA-256 hash in the store's meta table.

A key is 32 random bytes (URL-safe text, prefixed ``mw_``); with that much entropy a
plain SHA-256 is the right hash (a slow password hash buys nothing). The key itself is
shown once, when created, and never stored.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import time
from typing import Any

from memworth.errors import ValidationError
from memworth.store import MemoryStore
from memworth.validation import check_name

__all__ = ["create_key", "key_record", "lookup_key", "revoke_key"]

PREFIX = "apikey:"


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def create_key(store: MemoryStore, namespace: str, name: str, *, admin: bool = False) -> str:
    """Create a key for ``namespace``; returns the key (the only time it is visible).

    An ``admin`` key may also change the store's settings (``PUT /v1/config``), which
    every namespace works under; any key may read them."""
    check_name(namespace, "namespace")
    if not isinstance(name, str) or not name.strip() or len(name) > 200:
        raise ValidationError("name", "must be a non-empty label of at most 200 characters")
    if not isinstance(admin, bool):
        raise ValidationError("admin", f"must be true or false, got {admin!r}")
    key = "mw_" + secrets.token_urlsafe(32)
    record = {"namespace": namespace, "name": name, "created": time.time(), "revoked": False, "admin": admin}
    store.backend.set_meta(PREFIX + _digest(key), json.dumps(record))
    return key


def lookup_key(store: MemoryStore, key: str) -> str | None:
    """The namespace a valid, unrevoked key is bound to, or None."""
    record = key_record(store, key)
    return None if record is None else str(record["namespace"])


def key_record(store: MemoryStore, key: str) -> dict[str, Any] | None:
    """What the store keeps of a valid, unrevoked key (``namespace``, ``name``, ``created``), or None;
    the faces name the key in the audit log of the changes it makes."""
    if not key.startswith("mw_") or len(key) > 100:
        return None
    raw = store.backend.get_meta(PREFIX + _digest(key))
    if raw is None:
        return None
    record = dict(json.loads(raw))
    return None if record.get("revoked") else record


def revoke_key(store: MemoryStore, key: str) -> bool:
    """Revoke a key; returns whether it existed."""
    raw = store.backend.get_meta(PREFIX + _digest(key))
    if raw is None:
        return False
    record = json.loads(raw)
    record["revoked"] = True
    store.backend.set_meta(PREFIX + _digest(key), json.dumps(record))
    return True
