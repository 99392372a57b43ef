"""One statement over clean Parquet logs: the counts of a run that keeps nothing, checked as they are summed.

A run without ``--state`` that reads no episode log afterwards (no window test, no change
detection, :func:`memworth.logs.streams.reads_log`) and splits credit uniformly needs
only each memory's sums. :func:`fast_counts` gets them in one SQL statement shaped like
the bare ``GROUP BY``: the files are scanned once (in parallel) with every value mapped
and checked (:func:`memworth.logs.read.insert_checked`'s own expressions), grouped into
episodes with their memories as a list (so the sums need no join of rows with their
episode), the episodes numbered in time order, the lists unnested and summed per memory.
Whether anything is wrong rides along as a flag: a bad value, a duplicate (episode,
memory) row (the episode's list has repeats), an episode whose rows disagree.

Only a clean log is counted here. Anything else (a flag raised, a scan error, logs that
are not Parquet files of one schema) returns ``None`` and the run takes the checked path
(:func:`memworth.logs.read.read_logs`, :func:`memworth.logs.state.ingest`), which names
the file, row and column of the first problem exactly as it always has. Nothing is
written to the state tables before the flags are read, so a fallback starts clean.

The sums are the ones :func:`memworth.logs.state.ingest` makes, expression for
expression: credit ``1.0 / k`` times the episode's confidence, decayed by
``pow(2.0, -(episodes - pos) / half_life)`` with ``pos`` the episode's place in its
namespace by (first timestamp, first file, first row).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memworth.credit import check_w_min
from memworth.logs.format import COLUMNS, ColumnMap
from memworth.logs.read import EPISODE_KEY, LogError, _describe, _mapping, _select, first_row, format_of

__all__ = ["fast_counts"]

_ROW_COLUMNS = (
    "file, row, episode_id, memory_id, success, ts, score, weight, source, confidence, namespace, context, bad"
)
"""The columns :func:`memworth.logs.read._select` gives, in its order (those of ``incoming``)."""

_VIRTUAL = frozenset({"file_row_number", "filename"})


def _same_parquet(files: Sequence[str], fmt: str | None, con: Any) -> dict[str, str] | None:
    """The columns of ``files`` if all are Parquet with the same columns (one scan reads them), else ``None``."""
    types: dict[str, str] | None = None
    for path in files:
        if format_of(path, fmt) != "parquet":
            return None
        got = _describe(con, path, "parquet")
        if types is None:
            types = got
        elif list(got.items()) != list(types.items()):
            return None
    if types is None or not _VIRTUAL.isdisjoint(types):
        return None
    return types


def _clash(present: set[str]) -> str:
    """SQL over an episode's rows: true if they disagree on a column the logs have (as
    :func:`memworth.logs.read.check_episodes` asks); a column a log lacks is one default value."""
    names = ["success"] + [c for c in ("confidence", "source", "context") if c in present]
    parts = [f"coalesce(min({c}) <> max({c}), false)" for c in names]  # null: no value (a null success is a bad row)
    if "context" in present:  # a context beside none also disagrees
        parts.append("(count(context) > 0 AND count(context) < count(*))")
    return "(" + " OR ".join(parts) + ")"


def fast_counts(
    con: Any, files: Sequence[str], columns: ColumnMap, fmt: str | None, half_life: float, w_min: float
) -> tuple[int, int] | None:
    """Sum clean Parquet ``files`` into the (empty) table ``counts`` of ``con``; return (rows, episodes).

    ``None``: the logs are not Parquet files of one schema, or something in them is
    wrong; ``counts`` is untouched and the caller takes the checked path, which names it.
    Uniform credit only (the caller checks), ``half_life`` and ``w_min`` as
    :class:`memworth.logs.state.Counting` has them.
    """
    import duckdb

    try:
        types = _same_parquet(files, fmt, con)
        if types is None:
            return None
        exprs, checks = _mapping(files[0], types, columns, ())
    except LogError:
        return None
    present = {c.name for c in COLUMNS if columns.source(c.name) in types}
    listed = "[" + ", ".join("'" + p.replace("'", "''") + "'" for p in files) + "]"
    source = (
        f"(SELECT * EXCLUDE (file_row_number, filename), file_row_number + 1 AS __row, "
        f"-1 + list_position({listed}, filename) AS __file "
        f"FROM read_parquet({listed}, file_row_number = true, filename = true))"
    )
    rows = f"(SELECT {_select('__file', exprs, checks)} FROM {source}) AS r({_ROW_COLUMNS})"
    hl = float(half_life)
    try:
        con.execute(
            f"""
            CREATE OR REPLACE TEMP TABLE fast_counts AS
            WITH episode AS (
                SELECT namespace, episode_id, count(*) AS k, min(ts) AS ts, min(file) AS file, arg_min(row, [file, row]) AS row,
                       min(success) AS success, min(confidence) AS confidence, list(memory_id) AS memories,
                       bool_or(bad) OR bool_or(file IS NULL) OR {_clash(present)} AS wrong
                FROM {rows} GROUP BY {EPISODE_KEY}
            ),
            placed AS (
                SELECT *, row_number() OVER (PARTITION BY namespace ORDER BY ts, file, row) AS pos,
                       count(*) OVER (PARTITION BY namespace) AS episodes,
                       wrong OR len(list_distinct(memories)) <> k AS refused
                FROM episode
            ),
            item AS (SELECT namespace, unnest(memories) AS memory_id, 1.0 / k AS credit, success, confidence, pos,
                            episodes, k, refused FROM placed)
            SELECT namespace, memory_id,
                   sum(credit * confidence) FILTER (WHERE success) AS success,
                   sum(credit * confidence) FILTER (WHERE NOT success) AS failure,
                   count(*) AS n,
                   sum(credit * confidence * pow(2.0, -(episodes - pos) / {hl})) FILTER (WHERE success) AS decayed_success,
                   sum(credit * confidence * pow(2.0, -(episodes - pos) / {hl})) FILTER (WHERE NOT success) AS decayed_failure,
                   sum(pow(2.0, -(episodes - pos) / {hl})) AS decayed_n,
                   max(k) AS k, max(episodes) AS episodes, bool_or(refused) AS refused
            FROM item GROUP BY namespace, memory_id
            """
        )
        refused, k_max, n_rows = first_row(con, "SELECT bool_or(refused), max(k), sum(n) FROM fast_counts")
    except duckdb.Error:
        con.execute("DROP TABLE IF EXISTS fast_counts")
        return None
    if refused is not False:  # something is wrong (or nothing was read): the checked path says what
        con.execute("DROP TABLE fast_counts")
        return None
    check_w_min(w_min, int(k_max))
    episodes = int(
        first_row(con, "SELECT sum(e) FROM (SELECT max(episodes) AS e FROM fast_counts GROUP BY namespace)")[0]
    )
    con.execute(
        """
        INSERT INTO counts
        SELECT namespace, memory_id, coalesce(success, 0), coalesce(failure, 0), n,
               coalesce(decayed_success, 0), coalesce(decayed_failure, 0), decayed_n FROM fast_counts
        """
    )
    con.execute("DROP TABLE fast_counts")
    return int(n_rows), episodes
