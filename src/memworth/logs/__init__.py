"""Memory Worth from retrieval logs: the log format, reading it, scoring it with DuckDB.

Install with ``pip install 'memworth[logs]'`` (DuckDB and pyarrow). ``memworth score``
is the command; :func:`score_files` is what it calls. The names below load at first use,
so registering the commands costs the CLI nothing.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memworth.logs.format import COLUMNS, Column, ColumnMap
    from memworth.logs.score import ScoreSettings, score_files

__all__ = ["COLUMNS", "Column", "ColumnMap", "ScoreSettings", "score_files"]

_HOME = {
    "COLUMNS": "memworth.logs.format",
    "Column": "memworth.logs.format",
    "ColumnMap": "memworth.logs.format",
    "ScoreSettings": "memworth.logs.score",
    "score_files": "memworth.logs.score",
}


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'memworth.logs' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value
