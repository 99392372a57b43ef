"""Two statements over clean Parquet logs: the counts of a run that keeps nothing, checked as they are summed.

A run without ``--state`` that reads no episode log afterwards (no window test, no change
detection, :func:`memworth.logs.streams.reads_log`) and splits credit uniformly needs
only each memory's sums. :func:`fast_counts` gets them in the bare ``GROUP BY``'s own
plan (DuckDB runs its window as an aggregate over episodes joined back to the rows), in
two SQL statements. The first scans the files with every value mapped and checked
(:func:`memworth.logs.read.insert_checked`'s own expressions) and groups the rows into a
table of episodes (size, first timestamp, first (file, row), outcome, confidence, whether
anything is wrong: a bad value, rows that disagree); a log with anything wrong stops
there. The second scans the ids again, joins each row to its episode and sums per memory
into a temporary table the run is scored from; a duplicate (episode, memory) row rides
along as a flag.

Two things only a few rows need are done for those rows only:

* Numbering the episodes in time order, which the decayed sums need: an episode
  :data:`memworth.logs.state.DECAY_HORIZON` half-lives or more before its namespace's
  newest adds exactly 0.0 to them, so only the newest :func:`recent_episodes` of a
  namespace (and any tied with the oldest of those on time) are numbered; the others add
  nothing, as the checked path's 0.0 terms add nothing.
* The duplicate check: each episode's memory ids are hashed into a few 64-bit bitmaps
  (:data:`_BITMAPS`, six bits of the hash each); k rows setting k distinct bits in any of
  them have k distinct ids, so the episode has no duplicate. Only the rows of the other
  episodes (about 2% of episodes of 8 items, all of an episode with a duplicate) are
  checked exactly: each memory lists their episode ids, and a repeat is a duplicate row.

Only a clean log is counted here. Anything else (a flag raised, a scan error, logs that
are not Parquet files of one schema) returns ``None`` and the run takes the checked path
(:func:`memworth.logs.read.read_logs`, :func:`memworth.logs.state.ingest`), which names
the file, row and column of the first problem exactly as it always has. Nothing is
written to the state tables before the flags are read, so a fallback starts clean.

The sums are the ones :func:`memworth.logs.state.ingest` makes, expression for
expression: credit ``1.0 / k`` times the episode's confidence, decayed by
:func:`memworth.logs.state.decay_term` of the episode's distance from its namespace's
newest, the episodes ordered by (first timestamp, first file, first row).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from memworth.credit import check_w_min
from memworth.errors import ValidationError
from memworth.logs.format import COLUMNS, ColumnMap
from memworth.logs.read import EPISODE_KEY, LogError, _describe, _mapping, _select, first_row, format_of
from memworth.logs.state import DECAY_HORIZON, decay_term

__all__ = ["SUMMED", "fast_counts", "recent_episodes"]

SUMMED = "fast_counts"
"""The temporary table :func:`fast_counts` leaves each memory's sums in (``counts``' columns)."""

_ROW_COLUMNS = (
    "file, row, episode_id, memory_id, success, ts, score, weight, source, confidence, namespace, context, bad"
)
"""The columns :func:`memworth.logs.read._select` gives, in its order (those of ``incoming``)."""

_VIRTUAL = frozenset({"file_row_number", "filename"})

_ROWS = 2**40
"""Rows per file the episode order key ``file * _ROWS + row`` holds (a file with more is checked path)."""

_BITMAPS = 4
"""Bitmaps of an episode's hashed memory ids that may show its ids distinct (six bits of the hash each)."""

_MOST_RECENT = 999_999
"""Most newest episodes a namespace's cutoff is found among (``max(ets, n)`` holds n values, and
DuckDB refuses n of a million or more); past it (a half-life over about 925 episodes) every
episode is numbered."""


def recent_episodes(half_life: float) -> int | None:
    """How many of a namespace's newest episodes can add more than 0.0 to a decayed sum, with room
    to spare (``None``: too many to pick out; number them all).

    An episode ``d`` episodes before the newest adds ``decay_term(d)``, exactly 0.0 once ``d`` is
    :data:`memworth.logs.state.DECAY_HORIZON` half-lives.

    Examples
    --------
    >>> recent_episodes(100.0), recent_episodes(0.05), recent_episodes(1e6), recent_episodes(1e306)
    (108002, 56, None, None)
    """
    span = DECAY_HORIZON * float(half_life)
    if not span <= _MOST_RECENT:  # (also a span past the largest float, which ceil cannot take)
        return None
    count = math.ceil(span) + 2
    return count if count <= _MOST_RECENT else None


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
    :func:`memworth.logs.read.check_episodes` asks) or one is unusable; a column a log lacks
    is one default value. The outcome and whether the row is usable are one small integer
    ``o`` (2: unusable, else 1 success, 0 failure), so two aggregates ask both."""
    names = [c for c in ("confidence", "source", "context") if c in present]
    parts = ["max(o) = 2", "min(o) <> max(o)"] + [f"coalesce(min({c}) <> max({c}), false)" for c in names]
    if "context" in present:  # a context beside none also disagrees
        parts.append("(count(context) > 0 AND count(context) < count(*))")
    return "(" + " OR ".join(parts) + ")"


def fast_counts(
    con: Any, files: Sequence[str], columns: ColumnMap, fmt: str | None, half_life: float, w_min: float
) -> tuple[int, int] | None:
    """Sum clean Parquet ``files`` into the temporary table :data:`SUMMED` of ``con``; return (rows, episodes).

    :data:`SUMMED` has the columns of the state table ``counts`` (and one more); the run
    scores from it (:func:`memworth.logs.score.score_state`) rather than copying it into
    ``counts``, whose primary key made the copy 5-6 s at a million memories. ``None``: the
    logs are not Parquet files of one schema, or something in them is wrong; nothing is
    left in ``con`` (``counts`` is untouched) and the caller takes the checked path, which
    names it.
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
    # Logs without a namespace column have every row in 'default': the ids alone key episodes
    # and memories, and the group-bys and the join skip a constant second key.
    one = "namespace" not in present
    namespace = "'default' AS namespace" if one else "namespace"
    recent = recent_episodes(hl)
    # The M-th newest first timestamp of each namespace with more than M episodes (the others
    # are numbered whole). max(ets, M) holds M values per namespace from the start, so it is
    # run only where the namespace has that many: at most as many values as episodes in all.
    clock = (
        "SELECT NULL::VARCHAR AS namespace, NULL::DOUBLE AS cutoff WHERE false"
        if recent is None
        else f"""SELECT e.namespace, list_min(max(e.ets, {recent})) AS cutoff FROM fast_episodes e
                 JOIN (SELECT namespace FROM fast_episodes GROUP BY namespace HAVING count(*) > {recent}) USING (namespace)
                 GROUP BY e.namespace"""
    )
    distinct = " OR ".join(  # k distinct bits: k distinct memory ids (equal ids hash alike)
        f"bit_count(bit_or(1::UBIGINT << ((h >> {6 * i}) & 63))) = count(*)" for i in range(_BITMAPS)
    )
    term = decay_term("r.d", hl)  # null (adds nothing) for an episode not numbered: its term is 0.0
    try:
        con.execute(  # the episodes, and whether anything is wrong: read before anything is summed
            f"""
            CREATE OR REPLACE TEMP TABLE fast_episodes AS
            SELECT {namespace}, episode_id, count(*) AS k, min(ts) AS ets, min(file::BIGINT * {_ROWS} + row) AS first,
                   min(o) = 1 AS success, {"min(confidence)" if "confidence" in present else "1.0"} AS confidence,
                   {_clash(present)} AS wrong, ({distinct}) AS certain
            FROM (SELECT *, hash(memory_id) AS h,
                         CASE WHEN coalesce(bad OR file IS NULL OR row >= {_ROWS}, true) THEN 2 WHEN success THEN 1 ELSE 0 END AS o
                  FROM {rows}) GROUP BY {"episode_id" if one else EPISODE_KEY}
            """
        )
        wrong, k_max, episodes = first_row(con, "SELECT bool_or(wrong), max(k), count(*) FROM fast_episodes")
        if wrong is not False:  # something is wrong (or nothing was read): the checked path says what
            con.execute("DROP TABLE fast_episodes")
            return None
        try:
            check_w_min(w_min, int(k_max))
        except ValidationError:  # the checked path says it, after any duplicate row it finds first
            con.execute("DROP TABLE fast_episodes")
            return None
        # Each row joined to its episode's credit (1/k x confidence, as the checked path multiplies
        # them), outcome and distance from the newest (numbered episodes only), summed per memory.
        # What each sum adds is worked out once per episode (null: adds nothing, as a FILTER
        # leaves it out), so the rows carry values, not conditions.
        con.execute(
            f"""
            CREATE OR REPLACE TEMP TABLE fast_counts AS
            WITH clock AS ({clock}),
            recent AS (
                SELECT e.namespace, e.episode_id,
                       count(*) OVER (PARTITION BY e.namespace)
                       - row_number() OVER (PARTITION BY e.namespace ORDER BY e.ets, e.first) AS d
                FROM fast_episodes e LEFT JOIN clock c ON e.namespace = c.namespace
                WHERE c.cutoff IS NULL OR e.ets >= c.cutoff
            ),
            credited AS (
                SELECT e.namespace, e.episode_id, (1.0 / e.k) * e.confidence AS credit, e.success, e.certain,
                       {term} AS term
                FROM fast_episodes e LEFT JOIN recent r ON r.namespace = e.namespace AND r.episode_id = e.episode_id
            ),
            placed AS (
                SELECT namespace, episode_id,
                       CASE WHEN success THEN credit END AS s, CASE WHEN NOT success THEN credit END AS f,
                       CASE WHEN success THEN credit * term END AS ds, CASE WHEN NOT success THEN credit * term END AS df,
                       term AS dn, CASE WHEN NOT certain THEN episode_id END AS unsure
                FROM credited
            )
            SELECT {"'default' AS namespace" if one else "x.namespace"}, x.memory_id,
                   coalesce(fsum(p.s), 0) AS success, coalesce(fsum(p.f), 0) AS failure, count(*)::DOUBLE AS n,
                   coalesce(fsum(p.ds), 0) AS decayed_success, coalesce(fsum(p.df), 0) AS decayed_failure,
                   coalesce(fsum(p.dn), 0) AS decayed_n,
                   list(p.unsure) FILTER (WHERE p.unsure IS NOT NULL) AS unsure
            FROM (SELECT namespace, episode_id, memory_id FROM {rows}) AS x
            JOIN placed p ON p.episode_id = x.episode_id {"" if one else "AND p.namespace = x.namespace"}
            GROUP BY {"" if one else "x.namespace, "}x.memory_id
            """
        )
        con.execute("DROP TABLE fast_episodes")
        repeated, n_rows = first_row(
            con, "SELECT bool_or(coalesce(len(list_distinct(unsure)) <> len(unsure), false)), sum(n) FROM fast_counts"
        )
    except duckdb.Error:
        con.execute("DROP TABLE IF EXISTS fast_episodes")
        con.execute("DROP TABLE IF EXISTS fast_counts")
        return None
    if repeated:  # a duplicate (episode, memory) row: the checked path names it
        con.execute("DROP TABLE fast_counts")
        return None
    return int(n_rows), int(episodes)
