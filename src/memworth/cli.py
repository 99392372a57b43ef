"""The ``memworth`` command: a thin shell over the library.

Commands that live outside the library (``reproduce``, from the experiments package)
register themselves through the ``memworth.commands`` entry-point group, so the library
never imports them by name. Every memworth error becomes one line on stderr and exit
code 2, here and nowhere else.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from importlib.metadata import entry_points

from memworth import __version__
from memworth.errors import MemworthError

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="memworth",
        description="Memory Worth: outcome-driven governance for agent memory stores.",
    )
    parser.add_argument("--version", action="version", version=f"memworth {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    from memworth.store_cli import register as register_store_commands

    register_store_commands(commands)
    from memworth.logs.command import register as register_log_commands

    register_log_commands(commands)
    for ep in sorted(entry_points(group="memworth.commands"), key=lambda e: e.name):
        try:
            register = ep.load()
        except ImportError as exc:  # a plugin whose optional dependencies are missing
            sub = commands.add_parser(ep.name, help=f"(unavailable: {exc})")
            sub.set_defaults(handler=_unavailable(ep.name, exc))
            continue
        register(commands)
    return parser


def _unavailable(name: str, exc: ImportError) -> object:
    def handler(args: argparse.Namespace) -> int:
        raise MemworthError(
            f"'{name}' needs optional dependencies: {exc}; install them with pip install 'memworth[all]'"
        )

    return handler


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return 0
    try:
        return int(handler(args) or 0)
    except MemworthError as exc:
        print(f"memworth: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("memworth: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
