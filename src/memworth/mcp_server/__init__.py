"""``memworth mcp``: the memory store over the Model Context Protocol (official ``mcp`` SDK).

One process serves one store and one namespace, over stdio (an agent host launches it)
or streamable HTTP. Five tools mirror the HTTP API (:mod:`memworth.server.app`):

``remember``               store a memory (text, metadata, context labels, provenance)
``recall``                 the best memories for a query, and the episode that logs them
``report_outcome``         success or failure of a recalled episode: credits its memories
``worth``                  a memory's worth, interval, evidence, class, status, standing
``governance_proposals``   what governance would change, with the numbers; applies nothing

and a resource, ``memworth://memories/{memory_id}``, reads one memory as JSON. The id goes
in the URI percent-encoded as one segment (:func:`memory_uri`: ``/`` as ``%2F``, ``%`` as
``%25``, a space as ``%20``, Unicode as its UTF-8 bytes); the server decodes it once, reads
an unencoded ``/`` as part of the id, and refuses one that is not UTF-8 once decoded.

Every memworth error, and every argument the tool schemas refuse, comes back as a tool
error (``isError``) whose text is ``<ErrorType>: <field>: <reason>``, never a traceback;
a refused call writes nothing. The store is not thread-safe and the SDK runs tools on
worker threads, so every store call holds one lock, as in the HTTP API.

The parts: ``server`` builds the server (its tools and resource), ``views`` are what the
tools return, ``command`` is the ``memworth mcp`` command (transports, signals).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memworth.mcp_server.command import register

if TYPE_CHECKING:
    from memworth.mcp_server.server import create_server, memory_uri

__all__ = ["create_server", "memory_uri", "register"]


def __getattr__(name: str) -> Any:
    """Import the server module (and the MCP SDK) at first use of its names.

    ``register`` is light: the ``memworth`` CLI loads it to list ``mcp`` beside the other
    commands, and must not pay the SDK's import (about half a second) for ``--help``.
    """
    if name in ("create_server", "memory_uri"):
        from memworth.mcp_server import server

        return getattr(server, name)
    raise AttributeError(f"module 'memworth.mcp_server' has no attribute {name!r}")
