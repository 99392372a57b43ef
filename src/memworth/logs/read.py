"""Reading retrieval logs into DuckDB, checked row by row, with the column names mapped.

Each file is scanned in place (Parquet, JSON lines or CSV; DuckDB spills to disk past
memory). Every value is checked before anything is kept: a bad one is refused with the
file, the row (1 = first data row) and the column named (:class:`LogError`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from memworth.errors import ValidationError
from memworth.logs.format import COLUMNS, OUTCOME_WORDS, ColumnMap
from memworth.progress import Progress
from memworth.progress import bar as progress_bar

__all__ = [
    "EPISODE_KEY",
    "FORMATS",
    "INCOMING",
    "LogError",
    "check_episodes",
    "first_row",
    "format_of",
    "in_namespace",
    "insert_checked",
    "read_logs",
]

FORMATS = ("parquet", "jsonl", "csv")

_SUFFIXES = {
    ".parquet": "parquet",
    ".pq": "parquet",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "jsonl",
    ".csv": "csv",
}

INCOMING = """
CREATE OR REPLACE TEMP TABLE incoming (
    file INTEGER, row BIGINT, episode_id VARCHAR, memory_id VARCHAR, success BOOLEAN, ts DOUBLE,
    score DOUBLE, weight DOUBLE, source VARCHAR, confidence DOUBLE, namespace VARCHAR, context VARCHAR,
    bad BOOLEAN
)
"""


class LogError(ValidationError):
    """A log that cannot be read: names the file, the row (``None``: the whole file) and the column.

    ``why`` is the reason alone (``reason`` also names the file and row).
    """

    def __init__(self, file: str, row: int | None, column: str, reason: str) -> None:
        where = file if row is None else f"{file}, row {row}"
        super().__init__(column, f"{where}: {reason}")
        self.file, self.row, self.column, self.why = file, row, column, reason


def first_row(con: Any, sql: str, params: Sequence[Any] | None = None) -> Any:
    """The first row of a query (``None`` if it has none), with the result read to its end."""
    rows = con.execute(sql, params).fetchall() if params is not None else con.execute(sql).fetchall()
    return rows[0] if rows else None


def format_of(path: str, given: str | None = None) -> str:
    """The format of ``path``: ``given``, else from its suffix (.parquet, .jsonl, .csv).

    Examples
    --------
    >>> format_of("logs/day-1.parquet"), format_of("a.ndjson"), format_of("x.txt", "csv")
    ('parquet', 'jsonl', 'csv')
    """
    if given is not None:
        if given not in FORMATS:
            raise ValidationError("format", f"must be one of {', '.join(FORMATS)}, got {given!r}")
        return given
    found = _SUFFIXES.get(Path(path).suffix.lower())
    if found is None:
        raise LogError(path, None, "format", "cannot tell the format from the suffix; pass --format parquet|jsonl|csv")
    return found


def _scan(path: str, fmt: str) -> str:
    quoted = "'" + path.replace("'", "''") + "'"
    if fmt == "parquet":
        return f"read_parquet({quoted})"
    if fmt == "jsonl":
        return f"read_json({quoted}, format='newline_delimited')"
    return f"read_csv({quoted}, all_varchar=true, header=true)"


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def read_logs(
    con: Any,
    files: Sequence[str],
    columns: ColumnMap,
    *,
    fmt: str | None = None,
    needs: Sequence[str] = (),
    first_file: int = 0,
    progress: Progress = False,
) -> int:
    """Read ``files`` into the temporary table ``incoming`` of ``con``, each value checked; return its row count.

    ``needs``: optional columns this run cannot do without (``score`` for score credit,
    ``weight`` for given credit). ``first_file`` numbers the files (the ``file`` column).
    The rows of each episode are checked against each other by :func:`check_episodes`,
    which :func:`memworth.logs.state.ingest` runs as it groups them into episodes.
    """
    con.execute(INCOMING)
    bar = progress_bar(len(files), "files", progress)
    at = 0
    while at < len(files):
        path = files[at]
        kind = format_of(path, fmt)
        types = _describe(con, path, kind)
        run = [path]  # the Parquet files after it with the same columns are read in the same scan
        while kind == "parquet" and at + len(run) < len(files) and _VIRTUAL.isdisjoint(types):
            nxt = files[at + len(run)]
            try:
                if format_of(nxt, fmt) != "parquet" or list(_describe(con, nxt, "parquet").items()) != list(types.items()):
                    break
            except LogError:  # refused when its turn comes, after the files before it
                break
            run.append(nxt)
        if len(run) == 1:
            insert_checked(con, path, f"as {kind}", _source(path, kind), types, columns, needs, first_file + at)
        else:
            _insert_parquet_run(con, run, types, columns, needs, first_file + at)
        at += len(run)
        bar.update(len(run))
    bar.close()
    return int(first_row(con, "SELECT count(*) FROM incoming")[0])


_VIRTUAL = frozenset({"file_row_number", "filename"})
"""Columns a multi-file Parquet scan adds (a log that has one is read file by file)."""


def _describe(con: Any, path: str, fmt: str) -> dict[str, str]:
    """The columns of the log ``path`` and their DuckDB types."""
    import duckdb

    if not Path(path).is_file():
        raise LogError(path, None, "file", "no such file")
    try:
        described = con.execute(f"DESCRIBE SELECT * FROM {_scan(path, fmt)}").fetchall()
    except duckdb.Error as exc:
        raise LogError(path, None, "file", f"cannot read it as {fmt}: {str(exc).splitlines()[0]}") from None
    return {row[0]: str(row[1]).upper() for row in described}


def _source(path: str, fmt: str) -> str:
    """The log ``path`` as a DuckDB relation with ``__row``, each row's number in the file."""
    scan = _scan(path, fmt)
    if fmt == "parquet":  # the row's own number in the file, whatever order the scan runs in
        return f"(SELECT * EXCLUDE (file_row_number), file_row_number + 1 AS __row FROM {scan[:-1]}, file_row_number = true))"
    return f"(SELECT *, row_number() OVER () AS __row FROM {scan})"  # text is read in order


def _insert_parquet_run(
    con: Any, paths: list[str], types: dict[str, str], columns: ColumnMap, needs: Sequence[str], first: int
) -> None:
    """Read Parquet files with the same columns in one scan (DuckDB reads them in parallel),
    numbered ``first``, ``first + 1``, ...; checked as :func:`insert_checked` checks one file."""
    import duckdb

    exprs, checks = _mapping(paths[0], types, columns, needs)
    listed = "[" + ", ".join("'" + p.replace("'", "''") + "'" for p in paths) + "]"
    source = (
        f"(SELECT * EXCLUDE (file_row_number, filename), file_row_number + 1 AS __row, "
        f"{first - 1} + list_position({listed}, filename) AS __file "
        f"FROM read_parquet({listed}, file_row_number = true, filename = true))"
    )
    try:
        con.execute(f"INSERT INTO incoming SELECT {_select('__file', exprs, checks)} FROM {source}")
        unnamed = first_row(con, "SELECT 1 FROM incoming WHERE file IS NULL LIMIT 1") is not None
    except duckdb.Error:
        unnamed = True
    if unnamed:  # a scan error, or a file DuckDB names otherwise than given: read them one by one
        con.execute(f"DELETE FROM incoming WHERE file IS NULL OR file >= {int(first)}")
        for offset, path in enumerate(paths):
            insert_checked(con, path, "as parquet", _source(path, "parquet"), types, columns, needs, first + offset)
        return
    numbers = ", ".join(str(first + i) for i in range(len(paths)))
    bad = first_row(con, f"SELECT min(file) FROM incoming WHERE bad AND file IN ({numbers})")[0]
    if bad is not None:
        path = paths[int(bad) - first]
        _refuse(con, path, _source(path, "parquet"), checks)


def insert_checked(
    con: Any,
    path: str,
    what: str,
    source: str,
    types: dict[str, str],
    columns: ColumnMap,
    needs: Sequence[str],
    number: int,
) -> None:
    """Check every value of ``source`` and insert its rows, in the format's columns, into ``incoming``.

    This is the one place a log's columns are mapped and its values checked; the DuckDB
    reader calls it on a scanned file, the Spark engine (:mod:`memworth.spark`) on each
    partition of a DataFrame. ``source`` is a DuckDB relation with the log's columns
    (``types``: name -> DuckDB type) plus ``__row``, the row's number; ``path`` names
    the log in errors and ``what`` says how it was read (``"as parquet"``).
    """
    import duckdb

    exprs, checks = _mapping(path, types, columns, needs)
    # One read of the file: the rows go in with whether any check failed on them; only a
    # refused file is read again, to find its first bad value and say which check it failed.
    try:
        con.execute(f"INSERT INTO incoming SELECT {_select(str(int(number)), exprs, checks)} FROM {source}")
    except duckdb.Error as exc:
        raise LogError(path, None, "file", f"cannot read it {what}: {str(exc).splitlines()[0]}") from None
    if first_row(con, f"SELECT 1 FROM incoming WHERE bad AND file = {int(number)} LIMIT 1") is not None:
        _refuse(con, path, source, checks)


def _mapping(
    path: str, types: dict[str, str], columns: ColumnMap, needs: Sequence[str]
) -> tuple[dict[str, str], list[tuple[str, str, str, str]]]:
    """Each format column's SQL over a log with columns ``types``, and the checks of its values:
    (format column, bad-row condition, raw expression, reason). A missing column is refused."""
    exprs: dict[str, str] = {}
    checks: list[tuple[str, str, str, str]] = []  # (format column, bad-row condition, raw expression, reason)
    for col in COLUMNS:
        theirs = columns.source(col.name)
        label = col.name if theirs == col.name else f"{col.name} (log column {theirs!r})"
        if theirs not in types:
            if col.required or col.name in needs:
                why = (
                    "required" if col.required else f"needed by --credit {'score' if col.name == 'score' else 'given'}"
                )
                have = ", ".join(types) or "none"
                raise LogError(path, None, label, f"column {theirs!r} is missing ({why}); the file has: {have}")
            exprs[col.name] = "NULL"
            continue
        raw, kind = _ident(theirs), types[theirs]
        # A JSON lines column whose rows mix kinds ("a" here, 5 there) is typed JSON: its text is
        # the value's own (json_extract_string), not its JSON spelling ('"a"'); an object or a
        # list (a nested column type, or such a row in a JSON column) is no single value.
        text = f"json_extract_string({raw}, '$')" if kind == "JSON" else f"CAST({raw} AS VARCHAR)"
        if col.kind != "number" and (kind.endswith("]") or kind.startswith(("STRUCT", "MAP", "UNION"))):
            checks.append((label, f"{raw} IS NOT NULL", raw, f"must be a single value, not {kind}"))
        elif kind == "JSON":
            checks.append(
                (label, f"json_type({raw}) IN ('OBJECT', 'ARRAY')", raw, "must be a single value, not a JSON object or list")
            )
        if col.kind == "text":
            value = text
            if col.required:
                checks.append((label, _blank(text, raw), raw, "is empty"))
        elif col.kind == "number":
            value = f"TRY_CAST({raw} AS DOUBLE)"
            checks.append((label, f"{raw} IS NOT NULL AND {value} IS NULL", raw, f"must be a number ({kind} given)"))
            checks.append((label, f"{value} IS NOT NULL AND NOT isfinite({value})", raw, "must be finite"))
            if col.name == "confidence":
                checks.append((label, f"{value} <= 0 OR {value} > 1", raw, "must be in (0, 1]"))
            else:
                checks.append((label, f"{value} < 0", raw, "must be >= 0"))
        elif col.kind == "outcome":
            folded = f"lower(trim({text}))"
            value = (
                "CASE "
                + " ".join(f"WHEN {folded} = '{w}' THEN {str(ok).upper()}" for w, ok in OUTCOME_WORDS.items())
                + " END"
            )
            # The two words nearly every log writes, as written, are read first: the rest (and
            # only the rest) are trimmed and lowered. A value is null exactly when the outcome
            # is missing or not one of the words, so that is the check (one expression for both).
            exact = " ".join(
                f"WHEN {text} = '{w}' THEN {str(OUTCOME_WORDS[w]).upper()}" for w in ("success", "failure")
            )
            value = f"CASE {exact} ELSE {value} END"
            checks.append(
                (
                    label,
                    f"({value}) IS NULL",
                    raw,
                    "must be success or failure (success/failure, true/false, 1/0/-1)",
                )
            )
        else:  # time: seconds since the epoch, or a date-time
            if kind.startswith(("TIMESTAMP", "DATE")):
                value = f"epoch({raw})"
            elif kind in ("VARCHAR", "JSON"):
                value = f"coalesce(TRY_CAST({text} AS DOUBLE), epoch(TRY_CAST({text} AS TIMESTAMPTZ)))"
            else:
                value = f"TRY_CAST({raw} AS DOUBLE)"
            checks.append(
                (
                    label,
                    f"{raw} IS NULL OR {value} IS NULL OR NOT isfinite({value})",
                    raw,
                    f"must be seconds since the epoch or a date-time ({kind} given)",
                )
            )
        exprs[col.name] = value
    return exprs, checks


def _blank(text: str, raw: str) -> str:
    """SQL: ``raw`` is null or ``text`` (its text) is empty once trimmed.

    ``trim`` makes a new string per row (over a second per 10M rows for the two ids); a
    text whose first byte is printable ASCII other than a space (``'!'`` to ``'~'``, as
    nearly every id begins) keeps that character, so only the others are trimmed.
    """
    return f"CASE WHEN {raw} IS NULL THEN true WHEN {text} >= '!' AND {text} < chr(127) THEN false ELSE trim({text}) = '' END"


def _select(number: str, exprs: dict[str, str], checks: list[tuple[str, str, str, str]]) -> str:
    """The columns of ``incoming`` over a log (``number``: SQL for the file's number), ``bad``
    saying whether any check failed on the row."""
    return ", ".join(
        [number, "__row"]
        + [exprs[n] for n in ("episode_id", "memory_id", "outcome", "timestamp", "score", "weight")]
        + [f"coalesce({exprs['source']}, 'explicit')", f"coalesce({exprs['confidence']}, 1.0)"]
        + [f"coalesce({exprs['namespace']}, 'default')", exprs["context"]]
        + [" OR ".join(f"coalesce({cond}, false)" for _, cond, _, _ in checks) if checks else "false"]
    )


def _refuse(con: Any, path: str, source: str, checks: list[tuple[str, str, str, str]]) -> None:
    """Raise the :class:`LogError` of the first bad value of ``source`` (the log ``path``)."""
    firsts = ", ".join(f"min(__row) FILTER (WHERE {cond})" for _, cond, _, _ in checks)
    found = first_row(con, f"SELECT {firsts} FROM {source}")
    bad = [(row, check) for row, check in zip(found, checks, strict=True) if row is not None]
    row, (label, _cond, raw, reason) = min(bad, key=lambda b: b[0])
    got = first_row(con, f"SELECT CAST({raw} AS VARCHAR) FROM {source} WHERE __row = ?", [row])[0]
    raise LogError(path, int(row), label, f"{reason}, got {got!r}")


EPISODE_KEY = "namespace, episode_id"
"""What names an episode in a log: its id within its namespace (PostgreSQL keeps one id in
two namespaces apart since schema 7), so rows agree, duplicates and credit are per this key."""


def in_namespace(namespace: str) -> str:
    """What an error message adds after an episode's id: `` in namespace 'x'``, nothing for ``default``.

    Examples
    --------
    >>> in_namespace("tenant-b"), in_namespace("default")
    (" in namespace 'tenant-b'", '')
    """
    return "" if namespace == "default" else f" in namespace {namespace!r}"


def check_episodes(con: Any, files: list[str], first_file: int, *, into: str | None = None) -> None:
    """Refuse a duplicate (episode, memory) row and an episode whose rows disagree.

    An episode is keyed by (namespace, episode_id), as a PostgreSQL store keys it: one id
    in two namespaces is two episodes (:data:`EPISODE_KEY`). One aggregate pass per
    question says whether anything is wrong; only then do window queries find the first
    offending row. ``into``: also keep the aggregate over episodes as that temporary table
    (one row per (namespace, episode_id) of ``incoming``: its ``k`` rows, the first ``ts``,
    ``file`` and ``row``, its outcome, confidence, source and context), the table
    :func:`memworth.logs.state.ingest` numbers the episodes from.
    """
    # Two values in one episode: min and max differ; the context may also be missing beside a
    # value (the other columns are never null in 'incoming': defaults filled, outcomes checked).
    differ = " OR ".join(f"min({c}) <> max({c})" for c in ("success", "confidence", "source"))
    differ += " OR coalesce(min(context) <> max(context), false) OR (count(context) > 0 AND count(context) < count(*))"
    episodes = f"""
        SELECT namespace, episode_id, count(*) AS k, min(ts) AS ts, min(file) AS file, arg_min(row, [file, row]) AS row,
               min(success) AS success, min(confidence) AS confidence,
               min(source) AS source, min(context) AS context, coalesce({differ}, false) AS clash
        FROM incoming GROUP BY {EPISODE_KEY}
    """
    if into is not None:
        con.execute(f"CREATE OR REPLACE TEMP TABLE {into} AS {episodes}")
        episodes = into
    else:
        episodes = f"({episodes})"
    dups, clashes = first_row(
        con,
        f"""
        SELECT (SELECT count(*) FROM (SELECT 1 FROM incoming GROUP BY {EPISODE_KEY}, memory_id HAVING count(*) > 1)),
               (SELECT count(*) FROM {episodes} WHERE clash)
        """,
    )
    if dups == 0 and clashes == 0:
        return
    dup = first_row(
        con,
        f"""
        SELECT file, row, episode_id, memory_id, namespace FROM (
            SELECT *, row_number() OVER (PARTITION BY {EPISODE_KEY}, memory_id ORDER BY file, row) AS k FROM incoming
        ) WHERE k = 2 ORDER BY file, row LIMIT 1
        """,
    )
    if dup is not None:
        raise LogError(
            files[dup[0] - first_file],
            int(dup[1]),
            "memory_id",
            f"memory {dup[3]!r} appears twice in episode {dup[2]!r}{in_namespace(dup[4])} (duplicate (episode, memory) row)",
        )
    for column, what in (
        ("success", "outcome"),
        ("confidence", "confidence"),
        ("source", "source"),
        ("context", "context"),
    ):
        clash = first_row(
            con,
            f"""
            SELECT file, row, episode_id, CAST({column} AS VARCHAR), CAST(first AS VARCHAR), namespace FROM (
                SELECT *, first_value({column}) OVER (PARTITION BY {EPISODE_KEY} ORDER BY file, row) AS first
                FROM incoming
            ) WHERE {column} IS DISTINCT FROM first ORDER BY file, row LIMIT 1
            """,
        )
        if clash is not None:
            raise LogError(
                files[clash[0] - first_file],
                int(clash[1]),
                what,
                f"episode {clash[2]!r}{in_namespace(clash[5])} has two different values: {clash[4]!r} earlier, {clash[3]!r} here "
                "(one episode has one outcome)",
            )
