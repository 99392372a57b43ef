"""A TOML file for ``memworth serve`` and ``memworth mcp``: the store, the server and the settings.

::

    store = "sqlite:///memworth.db"   # the store URL ($MEMWORTH_STORE when left out)

    [server]                          # memworth serve
    host = "127.0.0.1"
    port = 8000
    log_level = "info"
    workers = 4                       # store objects requests run on (1 over memory://)
    processes = 1                     # worker processes for govern, replay, the queue (0 over memory://)
    redis = "redis://127.0.0.1:6379/0"

    [mcp]                             # memworth mcp
    transport = "stdio"
    namespace = "default"

    [settings.recall]                 # the store's settings (memworth.settings), by part
    exploration = 0.05
    [settings.governance]
    theta_low = 0.35

A flag on the command line wins over the file, and the file over the environment
(``$MEMWORTH_STORE``, ``$MEMWORTH_REDIS``, ``$MEMWORTH_LOG_LEVEL``, ``$MEMWORTH_WORKERS``,
``$MEMWORTH_PROCESSES``) and the
defaults. The ``settings`` tables are changes to the store's kept settings: when the server starts they
become a new version of them (recorded as made by the file), which every face then reads.

Examples
--------
>>> import tempfile, os
>>> with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as f:
...     _ = f.write('[server]\\nport = 9000\\n[settings.governance]\\ntheta_low = 0.35\\n')
>>> found = load(f.name)
>>> found.server, found.settings
({'port': 9000}, {'governance.theta_low': 0.35})
>>> os.unlink(f.name)
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memworth.errors import ValidationError
from memworth.settings import Settings

__all__ = ["ConfigFile", "load"]

SECTIONS = {
    "server": {"host": str, "port": int, "log_level": str, "redis": str, "workers": int, "processes": int},
    "mcp": {"transport": str, "host": str, "port": int, "namespace": str, "redis": str},
}
"""What each command's table may hold, with the type of each value."""


@dataclass(frozen=True)
class ConfigFile:
    """What a configuration file says: the store URL, each command's options, the settings
    to change (``{"part.setting": value}``)."""

    path: str
    store: str | None = None
    server: dict[str, Any] = field(default_factory=dict)
    mcp: dict[str, Any] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)


def load(path: str | Path) -> ConfigFile:
    """Read and check the file at ``path``; every error names the file and the entry."""
    where = str(path)
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except OSError as exc:
        raise ValidationError("config", f"cannot read {where}: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ValidationError("config", f"{where} is not valid TOML: {exc}") from None
    known = {"store", *SECTIONS, "settings"}
    for key in data:
        if key not in known:
            raise ValidationError(key, f"{where}: not a configuration entry (known: {', '.join(sorted(known))})")
    store = data.get("store")
    if store is not None and (not isinstance(store, str) or not store):
        raise ValidationError("store", f"{where}: must be a store URL, got {store!r}")
    tables: dict[str, dict[str, Any]] = {}
    for section, allowed in SECTIONS.items():
        given = data.get(section, {})
        if not isinstance(given, Mapping):
            raise ValidationError(section, f"{where}: must be a table")
        for key, value in given.items():
            kind = allowed.get(key)
            if kind is None:
                raise ValidationError(f"{section}.{key}", f"{where}: not an option (known: {', '.join(allowed)})")
            if isinstance(value, bool) or not isinstance(value, kind):
                raise ValidationError(f"{section}.{key}", f"{where}: must be a {kind.__name__}, got {value!r}")
        tables[section] = dict(given)
    changes = _dotted(data.get("settings", {}), where)
    if changes:
        try:
            Settings().changed(changes)  # checked now, so a bad file stops before anything starts
        except ValidationError as exc:
            raise ValidationError(f"settings.{exc.field}", f"{where}: {exc.reason}") from None
    return ConfigFile(where, store, tables["server"], tables["mcp"], changes)


def _dotted(settings: object, where: str) -> dict[str, Any]:
    """``[settings.part]`` tables as ``{"part.setting": value}``."""
    if not isinstance(settings, Mapping):
        raise ValidationError("settings", f"{where}: must be a table of parts ([settings.recall], ...)")
    found: dict[str, Any] = {}
    for part, values in settings.items():
        if not isinstance(values, Mapping):
            raise ValidationError(f"settings.{part}", f"{where}: must be a table of settings")
        for name, value in values.items():
            found[f"{part}.{name}"] = value
    return found
