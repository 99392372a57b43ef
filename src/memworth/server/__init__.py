"""The HTTP face of a store: a FastAPI app whose routes mirror the store's verbs (extra ``server``).

``create_app`` and the key functions are imported when first used, so a worker process that
runs the server's long calls (:mod:`memworth.server.processes`) starts without FastAPI.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memworth.server.app import create_app
    from memworth.server.keys import create_key, revoke_key

__all__ = ["create_app", "create_key", "revoke_key"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from memworth.server.app import create_app

        return create_app
    if name in ("create_key", "revoke_key"):
        from memworth.server import keys

        return getattr(keys, name)
    raise AttributeError(f"module 'memworth.server' has no attribute {name!r}")
