"""What ``import memworth`` and the ``memworth`` command load: start-up stays light.

Each check runs a fresh interpreter and reads its ``sys.modules``; times are measured by
``memworth bench --only startup``, not asserted here.
"""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path

import pytest

import memworth
from memworth.cli import _summary

SCRIPT = Path(sys.executable).with_name("memworth")

HEAVY = {
    "web": {"fastapi", "starlette", "uvicorn", "httpx"},
    "MCP": {"mcp"},
    "database": {"psycopg", "psycopg_pool", "redis"},
    "plotting": {"matplotlib"},
    "ONNX": {"onnx", "onnxruntime"},
}
"""Modules that only the command or feature that needs them may import, by kind."""

PLUGINS = {"memworth_experiments", "memworth_bench", "numpy", "mcp"}
"""What a plugin command (reproduce, demo, bench, mcp) brings; `--help` must not load it."""


def _loaded(code: str) -> set[str]:
    """The top-level packages a fresh interpreter has imported after running ``code``."""
    probe = f"{code}\nimport sys, json\nprint(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}})))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def _heavy(loaded: set[str]) -> dict[str, list[str]]:
    return {kind: sorted(names & loaded) for kind, names in HEAVY.items() if names & loaded}


def test_import_memworth_loads_no_web_mcp_database_or_plotting_module() -> None:
    loaded = _loaded("import memworth")
    assert _heavy(loaded) == {}
    assert "numpy" not in loaded  # the names load their modules at first use


def test_every_public_name_loads_no_web_mcp_database_or_plotting_module() -> None:
    loaded = _loaded("from memworth import *")
    assert "numpy" in loaded  # the names really were imported
    assert _heavy(loaded) == {}


def test_public_names_are_the_defining_modules_own_objects() -> None:
    from memworth.errors import ValidationError
    from memworth.store import MemoryStore

    assert memworth.MemoryStore is MemoryStore and memworth.ValidationError is ValidationError
    assert set(memworth.__all__) <= set(dir(memworth))
    with pytest.raises(AttributeError, match="no attribute 'Nothing'"):
        memworth.Nothing  # noqa: B018


def _cli_loads(*argv: str) -> set[str]:
    """Packages loaded by ``memworth ARGV`` run in a fresh interpreter (exit code 0 required)."""
    return _loaded(
        "from memworth.cli import main\n"
        "import contextlib, io\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try:\n"
        f"        code = main({list(argv)!r})\n"
        "    except SystemExit as stop:\n"
        "        code = stop.code\n"
        "assert code == 0, code"
    )


@pytest.mark.parametrize("argv", [["--version"], ["--help"], []])
def test_version_and_help_load_no_plugin(argv: list[str]) -> None:
    loaded = _cli_loads(*argv)
    assert loaded & PLUGINS == set() and _heavy(loaded) == {}


def test_a_store_command_loads_the_store_but_no_plugin(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'm.db'}"
    with memworth.MemoryStore.open(url, encoder=memworth.HashingEncoder()) as store:
        store.add("Use list.reverse() to reverse a Python list.", id="reverse")
    loaded = _cli_loads("list", "--store", url)
    assert "numpy" in loaded and "sqlite3" in loaded
    assert loaded & (PLUGINS - {"numpy"}) == set() and _heavy(loaded) == {}


def test_the_scripts_version_and_help() -> None:
    version = subprocess.run([str(SCRIPT), "--version"], capture_output=True, text=True, timeout=60)
    assert (version.returncode, version.stdout.strip()) == (0, f"memworth {memworth.__version__}")
    shown = subprocess.run([str(SCRIPT), "--help"], capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0 and shown.stderr == ""
    for ep in entry_points(group="memworth.commands"):  # plugins are listed, not loaded
        assert ep.name in shown.stdout and _summary(ep)[:20] in " ".join(shown.stdout.split())
    assert "list" in shown.stdout and "serve" in shown.stdout


def test_a_plugin_command_loads_its_plugin() -> None:
    shown = subprocess.run([str(SCRIPT), "reproduce", "--help"], capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0 and "--quick" in shown.stdout  # the plugin's own options
    assert "memworth_experiments" in _cli_loads("reproduce", "--help")


def test_a_plugin_is_summed_up_from_its_docstring_without_importing_it() -> None:
    ep = EntryPoint("x", "memworth.cli:main", "memworth.commands")
    assert _summary(ep) == "The memworth command: a thin shell over the library"
    package = EntryPoint("mcp", "memworth.mcp_server:register", "memworth.commands")
    assert _summary(package).startswith("the memory store over the Model Context Protocol")
    for missing in ("no_such_package.cli:register", "memworth.no_such_module:register"):
        assert _summary(EntryPoint("y", missing, "memworth.commands")) == "see memworth y --help"


def test_mcp_without_the_sdk_is_a_one_line_error(tmp_path: Path) -> None:
    """The SDK is imported when ``memworth mcp`` serves, so its absence is reported there."""
    code = (
        "import sys\n"
        "sys.modules['mcp'] = None  # as if the mcp extra were not installed\n"
        "from memworth.cli import main\n"
        f"sys.exit(main(['mcp', '--store', 'sqlite:///{tmp_path / 'm.db'}', '--encoder', 'hashing']))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL
    )
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.strip().splitlines() == [out.stderr.strip()]
    assert out.stderr.startswith("memworth: error: mcp: needs the mcp extra: pip install 'memworth[mcp]'")
