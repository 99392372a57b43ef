"""The HTTP face of a store: a FastAPI app whose routes mirror the store's verbs (extra ``server``)."""

from memworth.server.app import create_app
from memworth.server.keys import create_key, revoke_key

__all__ = ["create_app", "create_key", "revoke_key"]
