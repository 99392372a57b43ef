"""``memworth mcp``: the command that serves a store over MCP, on stdio or streamable HTTP."""

from __future__ import annotations

import argparse
import signal
import sys
from typing import TYPE_CHECKING, Any

from memworth.errors import ValidationError
from memworth.store_cli import DEFAULT_URL, _with_store, config_arg

if TYPE_CHECKING:
    from memworth.store import MemoryStore

__all__ = ["register"]

LOOPBACK = ("127.0.0.1", "localhost", "::1")


def register(commands: Any) -> None:
    """Add the ``mcp`` command to the ``memworth`` CLI (entry point ``memworth.commands``)."""
    text = "serve the store over the Model Context Protocol (stdio or streamable HTTP)"
    p = commands.add_parser("mcp", help=text, description=text[0].upper() + text[1:] + ".")
    p.add_argument(
        "--transport",
        choices=["stdio", "streamable-http"],
        help="stdio (an agent host launches the command) or streamable-http (default stdio)",
    )
    p.add_argument("--host", help="address for streamable-http (default 127.0.0.1)")
    p.add_argument("--port", type=int, help="port for streamable-http (default 8000)")
    p.add_argument("--store", help=f"store URL (default: $MEMWORTH_STORE or {DEFAULT_URL})")
    p.add_argument("--namespace", help="the one namespace the tools see (default: default)")
    p.add_argument(
        "--encoder",
        choices=["minilm", "hashing"],
        help="encoder for a new store (default: the store's own, else all-MiniLM-L6-v2)",
    )
    p.add_argument("--redis", help="Redis URL of the hot tier (default: $MEMWORTH_REDIS; none)")
    config_arg(p, "mcp")
    p.set_defaults(handler=_with_store(_serve))


def _serve(store: MemoryStore, args: argparse.Namespace) -> int:
    if args.transport not in ("stdio", "streamable-http"):  # from a configuration file
        raise ValidationError("transport", f"must be stdio or streamable-http, got {args.transport!r}")
    if not 0 < args.port < 65536:
        raise ValidationError("--port", f"must be from 1 to 65535, got {args.port}")
    try:  # the MCP SDK: imported only when serving
        from memworth.mcp_server.server import create_server
    except ImportError as exc:
        raise ValidationError("mcp", f"needs the mcp extra: pip install 'memworth[mcp]' ({exc})") from None
    server = create_server(store, namespace=args.namespace)
    where = store.backend.url.split("@")[-1]
    # SIGTERM ends the server like end of input does: uvicorn shuts down gracefully and
    # re-raises the signal, which lands here and unwinds, so the store is closed too.
    previous = signal.signal(signal.SIGTERM, _exit_on_sigterm)
    try:
        if args.transport == "stdio":  # standard output carries the protocol: say nothing there
            print(f"memworth mcp: {where}, namespace {args.namespace!r}, on stdio", file=sys.stderr, flush=True)
            server.run("stdio")
        else:
            url = f"http://{args.host}:{args.port}/mcp"
            print(f"memworth mcp: {where}, namespace {args.namespace!r}, on {url}", file=sys.stderr, flush=True)
            if args.host not in LOOPBACK:
                print(
                    f"memworth mcp: warning: no authentication; anyone who reaches {args.host}:{args.port} "
                    f"can read and write namespace {args.namespace!r}",
                    file=sys.stderr,
                    flush=True,
                )
            server.run("streamable-http", host=args.host, port=args.port)
    except SystemExit as stop:
        if stop.code != 0:
            raise
    finally:
        signal.signal(signal.SIGTERM, previous)
    return 0


def _exit_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(0)
