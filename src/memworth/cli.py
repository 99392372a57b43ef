"""The ``memworth`` command: a thin shell over the library.

Commands that live outside the library (``reproduce``, from the experiments package)
register themselves through the ``memworth.commands`` entry-point group, so the library
never imports them by name. Every memworth error becomes one line on stderr and exit
code 2, here and nowhere else.

Start-up is kept short: a plugin (which may import NumPy, the MCP SDK, the experiments)
is loaded only when its command runs. ``memworth --help`` lists it with the first line of
its module's docstring, read from the source without importing it. A plugin registers
the command named as its entry point; a command no entry point is named after loads them
all, so a plugin that registers other names still works.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import re
import sys
import tokenize
from collections.abc import Sequence
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path

from memworth import __version__
from memworth.errors import MemworthError

__all__ = ["build_parser", "main"]

_ALL = "*"
"""``build_parser(load=_ALL)``: load every plugin (the default: the whole parser)."""


def build_parser(load: str | None = _ALL) -> argparse.ArgumentParser:
    """The ``memworth`` parser: the store commands and the ``memworth.commands`` plugins.

    Parameters
    ----------
    load : str or None
        Which plugins to import and register: every one (the default), only the one whose
        entry point has this name, or none (``None``). A plugin not loaded is listed in
        ``--help`` under its name, with the first line of its module's docstring.

    Returns
    -------
    argparse.ArgumentParser
        The parser; each command's ``handler`` is in the parsed namespace.
    """
    return _build(load, _plugins())


def _plugins() -> list[EntryPoint]:
    """The ``memworth.commands`` entry points, by name."""
    return sorted(entry_points(group="memworth.commands"), key=lambda e: e.name)


def _build(load: str | None, plugins: Sequence[EntryPoint]) -> argparse.ArgumentParser:
    """The parser with these ``plugins``, of which ``load`` says which to import (see :func:`build_parser`)."""
    parser = argparse.ArgumentParser(
        prog="memworth",
        description="Memory Worth: outcome-driven governance for agent memory stores.",
    )
    parser.add_argument("--version", action="version", version=f"memworth {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    from memworth.store_cli import register as register_store_commands

    register_store_commands(commands)
    from memworth.logs.command import register as register_log_commands  # light: duckdb loads when a command runs

    register_log_commands(commands)
    for ep in plugins:
        if load not in (_ALL, ep.name):
            commands.add_parser(ep.name, help=_summary(ep))
            continue
        try:
            register = ep.load()
        except ImportError as exc:  # a plugin whose optional dependencies are missing
            sub = commands.add_parser(ep.name, help=f"(unavailable: {exc})")
            sub.set_defaults(handler=_unavailable(ep.name, exc))
            continue
        register(commands)
    return parser


def _summary(ep: EntryPoint) -> str:
    """The first line of the docstring of the module ``ep`` names, read without importing it.

    Importing a plugin to describe it would cost what loading it lazily saves. Without a
    readable docstring the line says how to get the command's own help.
    """
    fallback = f"see memworth {ep.name} --help"
    try:
        top, _, rest = ep.module.partition(".")
        spec = importlib.util.find_spec(top)  # finds the package; does not run it
        if spec is None or spec.origin is None:
            return fallback
        path = Path(spec.origin)
        if rest:
            path = path.parent.joinpath(*rest.split("."))
            path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
        with tokenize.open(path) as source:
            for token in tokenize.generate_tokens(source.readline):
                if token.type == tokenize.STRING:
                    first = str(ast.literal_eval(token.string)).strip().splitlines()[0]
                    return re.sub(r"^``memworth [\w-]+``:\s*", "", first).replace("``", "").rstrip(".") or fallback
                if token.type not in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE):
                    return fallback
    except (AttributeError, IndexError, OSError, SyntaxError, ValueError, ImportError):
        pass
    return fallback


def _unavailable(name: str, exc: ImportError) -> object:
    def handler(args: argparse.Namespace) -> int:
        raise MemworthError(
            f"'{name}' needs optional dependencies: {exc}; install them with pip install 'memworth[all]'"
        )

    return handler


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``memworth`` command on ``argv`` (default: the process's arguments).

    Parameters
    ----------
    argv : sequence of str, optional
        The arguments after the program name.

    Returns
    -------
    int
        The exit code: the handler's, 2 for a memworth error, 130 when interrupted.
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = _parser_for(argv)
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


def _parser_for(argv: list[str]) -> argparse.ArgumentParser:
    """The parser with only the plugin that ``argv``'s command needs loaded.

    The global options (``--help``, ``--version``) take no value, so the command is the
    first argument that is not an option. ``--version`` alone and a store command read
    no entry point. No command loads no plugin (``--help`` lists them); a plugin's
    entry-point name loads that plugin only; any other word loads every plugin, one of
    which may register it (else argparse refuses it, listing them all).
    """
    command = next((a for a in argv if not a.startswith("-")), None)
    bare = _build(None, [])
    if command in _commands(bare) or (command is None and "--version" in argv and not {"-h", "--help"} & set(argv)):
        return bare
    plugins = _plugins()
    if command in {ep.name for ep in plugins}:
        return _build(command, plugins)
    return _build(None if command is None else _ALL, plugins)


def _commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The parser's commands, by name."""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
