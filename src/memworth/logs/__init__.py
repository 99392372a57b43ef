"""Memory Worth from retrieval logs: the log format, reading it, scoring it with DuckDB.

Install with ``pip install 'memworth[logs]'`` (DuckDB and pyarrow). ``memworth score``
is the command; :func:`score_files` is what it calls.
"""

from memworth.logs.format import COLUMNS, Column, ColumnMap
from memworth.logs.score import ScoreSettings, score_files

__all__ = ["COLUMNS", "Column", "ColumnMap", "ScoreSettings", "score_files"]
