"""Memory Worth from retrieval logs on Spark: the same scores as ``memworth score``, on a cluster.

``pip install 'memworth[spark]'`` (pyspark, pandas < 3, pyarrow, DuckDB). :func:`score`
takes a Spark DataFrame in the log format (:mod:`memworth.logs.format`) and returns one
row per memory with exactly the columns of the DuckDB engine
(:data:`memworth.logs.score.COLUMNS_OUT`). The work runs in three partitionings:

1. **By episode** (``repartition(episode_id)`` + ``mapInArrow``): each partition's rows
   are checked and mapped by the DuckDB reader's own function
   (:func:`memworth.logs.read.insert_checked`, run in an in-process DuckDB on the
   executor), its episodes checked (:func:`memworth.logs.read.check_episodes`: a
   duplicate (episode, memory) row, an episode whose rows disagree) and each item's
   credit split (:func:`memworth.logs.state.split_credit`). An episode is its id within
   its namespace; the rows of one id, whatever their namespaces, are all in one partition,
   so these checks are exact.
2. **By memory** (Spark aggregates): episodes are numbered in time order within their
   namespace (a window by namespace over one row per episode), and the per-memory sums
   (hits+, hits-, retrievals and their decayed forms) are ``groupBy(namespace,
   memory_id)`` sums, as the DuckDB SQL computes them.
   The window test's counts (each memory's last ``staleness_window`` retrievals) are
   the DuckDB engine's SQL text (:data:`memworth.logs.streams.RECENT_SQL`) run by Spark SQL.
3. **By namespace** (``groupBy("namespace").cogroup(...).applyInPandas``): the sequential
   parts (CUSUM with explaining away and e-BH, the e-BH test of low worth, the
   proposal) and every column read from the sums come from
   :func:`memworth.logs.score.score_namespace`, the function the DuckDB engine calls.
   One namespace's items and episodes must fit in one executor's memory.

A refused log raises :class:`memworth.logs.read.LogError` naming the file (or
``"dataframe"``), the row and the column, exactly as the DuckDB engine does.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from memworth.credit import check_w_min
from memworth.errors import MemworthError, ValidationError
from memworth.logs.read import LogError, format_of

if TYPE_CHECKING:
    from memworth.logs.score import ScoreSettings

__all__ = ["ROW", "SOURCE", "number_rows", "read_files", "score", "score_files", "session"]

SOURCE = "__file"
"""Column numbering the log a row came from (0: the first file; a bare DataFrame is log 0)."""

ROW = "__row"
"""Column numbering a row within its log (1: the first data row)."""

_PHASES = ("row", "duplicate", "success", "confidence", "source", "context", "credit")
"""Order in which the DuckDB engine reports a refused log: row checks, then episode checks, then credit."""

_CHECKED_SCHEMA = (
    "episode_id string, memory_id string, success boolean, ts double, credit double, confidence double, "
    "namespace string, context string, k long, file int, row long, "
    "err_phase int, err_column string, err_reason string, err_label string"
)


def _spark() -> Any:
    try:
        import pyspark  # noqa: F401
        from pyspark.sql import functions
    except ImportError:  # pragma: no cover - exercised only without the extra
        raise MemworthError("the Spark engine needs pyspark: pip install 'memworth[spark]'") from None
    return functions


def session(master: str | None = None, app_name: str = "memworth") -> Any:
    """The active SparkSession, or a new one (``master`` e.g. ``"local[2]"``; ``None``: from spark-submit)."""
    _spark()
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name).config("spark.ui.showConsoleProgress", "false")
    if master is not None:
        builder = builder.master(master)
        if master.startswith("local"):  # local workers run this interpreter (it has the extra installed)
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    return builder.getOrCreate()


def number_rows(df: Any, file: int) -> Any:
    """``df`` with :data:`SOURCE` = ``file`` and :data:`ROW` = 1, 2, ... in the DataFrame's own order.

    The order is Spark's partition order (for one file read by Spark: the file's order).
    Costs one counting pass; all of it runs in the JVM.
    """
    F = _spark()
    mask = (1 << 33) - 1
    tagged = df.withColumn("__mid", F.monotonically_increasing_id())
    sizes = tagged.select(F.shiftright("__mid", 33).alias("p")).groupBy("p").count().orderBy("p").collect()
    offsets: list[Any] = []
    done = 0
    for r in sizes:
        offsets += [F.lit(int(r["p"])), F.lit(done)]
        done += int(r["count"])
    offset = F.element_at(F.create_map(*offsets), F.shiftright("__mid", 33)) if offsets else F.lit(0)
    return (
        tagged.withColumn(ROW, (offset + F.col("__mid").bitwiseAND(F.lit(mask)) + 1).cast("long"))
        .withColumn(SOURCE, F.lit(file).cast("int"))
        .drop("__mid")
    )


def read_files(spark: Any, files: Sequence[str], fmt: str | None = None) -> tuple[Any, list[str]]:
    """Read log files with Spark's readers into one DataFrame with :data:`SOURCE` and :data:`ROW`.

    CSV is read as text (every column a string, as the DuckDB reader does), JSON lines
    and Parquet with their own types. Returns the DataFrame and the files' labels.
    """
    from pathlib import Path

    from pyspark.errors import PySparkException

    parts = []
    for number, path in enumerate(files):
        kind = format_of(path, fmt)
        if not Path(path).is_file():
            raise LogError(path, None, "file", "no such file")
        try:
            if kind == "parquet":
                df = spark.read.parquet(path)
            elif kind == "jsonl":
                df = spark.read.json(path)
            else:
                df = spark.read.option("header", True).option("inferSchema", False).csv(path)
        except PySparkException as exc:
            raise LogError(path, None, "file", f"cannot read it as {kind}: {str(exc).splitlines()[0]}") from None
        parts.append(number_rows(df, number))
    out = parts[0]
    for part in parts[1:]:
        out = out.unionByName(part, allowMissingColumns=True)
    return out, [str(f) for f in files]


def _empty_check(arrow_schema: Any, settings: ScoreSettings, labels: Sequence[str]) -> None:
    """Run the reader's checks on no rows with the DataFrame's columns: a missing column is refused here."""
    import duckdb
    import pyarrow as pa

    from memworth.logs.read import INCOMING, insert_checked

    con = duckdb.connect()
    try:
        con.execute(INCOMING)
        con.register("batch", pa.Table.from_batches([], schema=arrow_schema))
        types = _types(con)
        needs = [settings.counting.column] if settings.counting.column else []
        for number, label in enumerate(labels):
            insert_checked(
                con,
                label,
                "in Spark",
                f"(SELECT * EXCLUDE ({SOURCE}) FROM batch)",
                types,
                settings.columns,
                needs,
                number,
            )
    finally:
        con.close()


def _types(con: Any) -> dict[str, str]:
    return {
        str(r[0]): str(r[1]).upper()
        for r in con.execute("DESCRIBE SELECT * FROM batch").fetchall()
        if r[0] not in (SOURCE, ROW)
    }


@dataclass(frozen=True)
class _Checker:
    """What runs on each partition of episodes: check, map, split credit (the DuckDB engine's functions)."""

    settings: Any
    labels: tuple[str, ...]

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        import duckdb
        import pyarrow as pa

        from memworth.logs.read import EPISODE_KEY, INCOMING, check_episodes, insert_checked
        from memworth.logs.state import CreditError, split_credit

        out_schema = _arrow_checked_schema()
        got = list(batches)
        if not got or sum(b.num_rows for b in got) == 0:
            return
        counting = self.settings.counting
        needs = [counting.column] if counting.column else []
        con = duckdb.connect()
        con.execute("SET threads = 1")
        try:
            con.execute(INCOMING)
            con.register("batch", pa.Table.from_batches(got))
            types = _types(con)
            numbers = [int(r[0]) for r in con.execute(f"SELECT DISTINCT {SOURCE} FROM batch ORDER BY 1").fetchall()]
            try:
                for number in numbers:
                    source = f"(SELECT * EXCLUDE ({SOURCE}) FROM batch WHERE {SOURCE} = {number})"
                    insert_checked(
                        con, self.labels[number], "in Spark", source, types, self.settings.columns, needs, number
                    )
            except LogError as exc:
                yield _error(out_schema, 0, exc)
                return
            try:
                check_episodes(con, list(self.labels), 0)
            except LogError as exc:
                phase = (
                    1
                    if exc.column == "memory_id"
                    else _PHASES.index("success" if exc.column == "outcome" else exc.column)
                )
                yield _error(out_schema, phase, exc)
                return
            value = counting.column if counting.column else "NULL"
            rows = con.sql(
                f"""
                SELECT episode_id, memory_id, success, ts, CAST({value} AS DOUBLE) AS value, confidence, namespace,
                       context, count(*) OVER (PARTITION BY {EPISODE_KEY}) AS k, file, row
                FROM incoming ORDER BY {EPISODE_KEY}, file, row
                """
            ).to_arrow_table()
        finally:
            con.close()
        episode = rows.column("episode_id").to_numpy(zero_copy_only=False)
        ns = rows.column("namespace").to_numpy(zero_copy_only=False)
        starts = (
            np.flatnonzero(np.r_[True, (episode[1:] != episode[:-1]) | (ns[1:] != ns[:-1])])
            if episode.size
            else np.zeros(0, int)
        )
        values = rows.column("value").to_numpy(zero_copy_only=False).astype(float)
        k = rows.column("k").to_numpy()
        try:
            check_w_min(counting.w_min, int(k.max()))
        except ValidationError:  # refused on the driver with the log's largest k, as DuckDB does
            credit = np.full(values.size, np.nan)
        else:
            try:
                credit = split_credit(values, starts, counting)
            except CreditError as exc:
                at = exc.at
                label = self.labels[rows.column("file")[at].as_py()]
                yield _error(
                    out_schema,
                    _PHASES.index("credit"),
                    LogError(label, int(rows.column("row")[at].as_py()), str(counting.column), exc.reason),
                    file=int(rows.column("file")[at].as_py()),
                )
                return
        size = rows.num_rows
        table = pa.table(
            {
                "episode_id": rows.column("episode_id"),
                "memory_id": rows.column("memory_id"),
                "success": rows.column("success"),
                "ts": rows.column("ts"),
                "credit": pa.array(credit, type=pa.float64()),
                "confidence": rows.column("confidence"),
                "namespace": rows.column("namespace"),
                "context": rows.column("context"),
                "k": rows.column("k").cast(pa.int64()),
                "file": rows.column("file").cast(pa.int32()),
                "row": rows.column("row").cast(pa.int64()),
                "err_phase": pa.nulls(size, pa.int32()),
                "err_column": pa.nulls(size, pa.string()),
                "err_reason": pa.nulls(size, pa.string()),
                "err_label": pa.nulls(size, pa.string()),
            },
            schema=out_schema,
        )
        yield from table.to_batches(max_chunksize=65536)


def _arrow_checked_schema() -> Any:
    import pyarrow as pa

    return pa.schema(
        [
            ("episode_id", pa.string()),
            ("memory_id", pa.string()),
            ("success", pa.bool_()),
            ("ts", pa.float64()),
            ("credit", pa.float64()),
            ("confidence", pa.float64()),
            ("namespace", pa.string()),
            ("context", pa.string()),
            ("k", pa.int64()),
            ("file", pa.int32()),
            ("row", pa.int64()),
            ("err_phase", pa.int32()),
            ("err_column", pa.string()),
            ("err_reason", pa.string()),
            ("err_label", pa.string()),
        ]
    )


def _error(schema: Any, phase: int, exc: LogError, file: int | None = None) -> Any:
    """One row carrying a refusal; the driver raises the first in the DuckDB engine's order."""
    import pyarrow as pa

    values: dict[str, Any] = {name: [None] for name in schema.names}
    values |= {
        "file": [file],
        "row": [exc.row],
        "err_phase": [phase],
        "err_column": [exc.column],
        "err_reason": [exc.why],
        "err_label": [exc.file],
    }
    return pa.RecordBatch.from_pydict(values, schema=schema)


def _rows_of(items: Any) -> Any:
    """A namespace's :class:`NamespaceRows` from its items (pandas: pos, memory_id, credit, success, confidence, context)."""
    from memworth.logs.streams import NamespaceRows

    items = items.sort_values(["pos", "memory_id"], kind="stable")
    pos = items["pos"].to_numpy(dtype=np.int64)
    firsts = items.drop_duplicates("pos").sort_values("pos")
    if firsts.shape[0] and not np.array_equal(firsts["pos"].to_numpy(), np.arange(1, firsts.shape[0] + 1)):
        raise MemworthError("internal: a namespace's episodes are not numbered 1, 2, ...")  # pragma: no cover
    return NamespaceRows(
        pos=pos,
        memory_id=items["memory_id"].to_numpy(dtype=object),
        credit=items["credit"].to_numpy(dtype=float),
        success=firsts["success"].to_numpy(dtype=bool),
        confidence=firsts["confidence"].to_numpy(dtype=float),
        context=[None if c is None or c != c else str(c) for c in firsts["context"].to_numpy(dtype=object)],
    )


@dataclass(frozen=True)
class _Scorer:
    """What runs on each namespace: :func:`memworth.logs.score.score_namespace`, the DuckDB engine's function."""

    settings: Any

    def __call__(self, counts: Any, items: Any) -> Any:
        import pandas as pd

        from memworth.counts import Counts
        from memworth.logs.score import COLUMNS_OUT, COUNT_COLUMNS, score_namespace
        from memworth.logs.streams import streams_of

        if counts.shape[0] == 0:
            return pd.DataFrame({name: [] for name, _ in COLUMNS_OUT})
        namespace = str(counts["namespace"].iloc[0])
        counts = counts.sort_values("memory_id", kind="stable")
        arrays = {"memory_id": counts["memory_id"].to_numpy(dtype=object)} | {
            c: counts[c].to_numpy(dtype=float) for c in COUNT_COLUMNS
        }
        recent = {
            str(m): Counts(float(a), float(b), float(c))
            for m, a, b, c in zip(
                counts["memory_id"], counts["recent_success"], counts["recent_failure"], counts["recent_n"], strict=True
            )
        }
        policy = self.settings.policy
        rows = _rows_of(items) if policy.change.enabled else None
        got = score_namespace(self.settings, namespace, arrays, streams_of(rows, policy, recent))
        frame = pd.DataFrame({name: list(got[name]) for name, _ in COLUMNS_OUT if name != "change_point"})
        point = np.asarray(got["change_point"], dtype=np.int64)
        frame.insert(
            [n for n, _ in COLUMNS_OUT].index("change_point"),
            "change_point",
            pd.array([None if p < 0 else int(p) for p in point.tolist()], dtype="Int64"),
        )
        for name, kind in COLUMNS_OUT:
            if kind == "string":
                frame[name] = frame[name].astype(object)
        return frame


def _spark_type(kind: str) -> str:
    return {"string": "string", "double": "double", "bool": "boolean", "int64": "long"}[kind]


def score(df: Any, settings: ScoreSettings | None = None, *, labels: Sequence[str] | None = None) -> Any:
    """Score every memory of a log held in a Spark DataFrame; one row per memory, as a Spark DataFrame.

    Parameters
    ----------
    df
        A Spark DataFrame in the log format, with the column names of
        ``settings.columns`` (a :class:`memworth.logs.ColumnMap`). Rows are numbered in
        the DataFrame's order for error messages, unless it already has the columns
        :data:`SOURCE` and :data:`ROW` (as :func:`read_files` gives).
    settings
        The run's settings (:class:`memworth.logs.ScoreSettings`): credit, ``w_min``,
        half-life, governance policy, interval level. ``settings.fmt`` is not used.
    labels
        The names of the logs numbered by :data:`SOURCE` (default ``["dataframe"]``).

    Returns
    -------
    pyspark.sql.DataFrame
        The DuckDB engine's columns (:data:`memworth.logs.score.COLUMNS_OUT`), sorted by
        namespace and memory id. It is lazy; the checked rows it reads from stay cached
        (``persist``) until ``spark.catalog.clearCache()``.

    Raises
    ------
    LogError
        A value, row or episode the DuckDB reader would refuse, with the same message.
    ValidationError
        Settings out of range (credit scheme, ``w_min``, half-life, level).
    """
    return _score(df, settings, labels).scored


def _score(df: Any, settings: ScoreSettings | None = None, labels: Sequence[str] | None = None) -> _Run:
    """The run behind :func:`score`: the scored DataFrame and the intermediate ones :func:`score_files` reads."""
    F = _spark()
    from pyspark.sql import Window
    from pyspark.sql.pandas.types import to_arrow_schema

    from memworth.logs.score import COLUMNS_OUT, ScoreSettings
    from memworth.logs.streams import RECENT_SQL

    settings = settings if settings is not None else ScoreSettings()
    settings.counting.validate()
    if isinstance(settings.level, bool) or not isinstance(settings.level, (int, float)) or not 0 < settings.level < 1:
        raise ValidationError("level", f"must be a number in (0, 1), got {settings.level!r}")
    if SOURCE not in df.columns or ROW not in df.columns:
        df = number_rows(df, 0)
    names = list(labels) if labels is not None else ["dataframe"]
    _empty_check(to_arrow_schema(df.schema), settings, names)  # a missing column: refused before any work

    spark = df.sparkSession
    episode_col = settings.columns.source("episode_id")
    partitions = max(int(spark.sparkContext.defaultParallelism), 1)
    checked = (
        df.repartition(partitions, F.col(episode_col))
        .mapInArrow(_Checker(settings, tuple(names)), _CHECKED_SCHEMA)
        .persist()
    )
    try:
        first = (
            checked.filter(F.col("err_phase").isNotNull())
            .orderBy("err_phase", F.col("file").asc_nulls_first(), F.col("row").asc_nulls_first())
            .limit(1)
            .collect()
        )
        if first:
            e = first[0]
            raise LogError(
                e["err_label"], None if e["row"] is None else int(e["row"]), e["err_column"], e["err_reason"]
            )
        k_max = checked.agg(F.max("k")).collect()[0][0]
        if k_max is not None:
            check_w_min(settings.counting.w_min, int(k_max))
    except BaseException:
        checked.unpersist()
        raise

    items = checked.drop("err_phase", "err_column", "err_reason", "err_label")
    episodes = items.groupBy("namespace", "episode_id").agg(  # an episode is its id within its namespace
        F.min("ts").alias("ts"),
        F.min(F.struct("file", "row")).alias("first"),  # the first row: (file, row) together, not each apart
    ).select("namespace", "episode_id", "ts", "first.file", "first.row")
    episodes = episodes.withColumn(
        "pos", F.row_number().over(Window.partitionBy("namespace").orderBy("ts", "file", "row"))
    )
    clocks = episodes.groupBy("namespace").agg(F.max("pos").alias("episodes"))
    joined = items.join(episodes.select("namespace", "episode_id", "pos"), ["namespace", "episode_id"]).join(
        clocks, "namespace"
    )
    hl = float(settings.counting.half_life)
    mass = F.col("credit") * F.col("confidence")
    decay = F.pow(F.lit(2.0), -(F.col("episodes") - F.col("pos")) / F.lit(hl))
    ok = F.col("success")
    counts = joined.groupBy("namespace", "memory_id").agg(
        F.coalesce(F.sum(F.when(ok, mass)), F.lit(0.0)).alias("success"),
        F.coalesce(F.sum(F.when(~ok, mass)), F.lit(0.0)).alias("failure"),
        F.count(F.lit(1)).cast("double").alias("n"),
        F.coalesce(F.sum(F.when(ok, mass * decay)), F.lit(0.0)).alias("decayed_success"),
        F.coalesce(F.sum(F.when(~ok, mass * decay)), F.lit(0.0)).alias("decayed_failure"),
        F.sum(decay).alias("decayed_n"),
    )
    # The window test's counts: the DuckDB engine's SQL text, run by Spark SQL.
    recent = spark.sql(
        RECENT_SQL.format(log="{log}", window=int(settings.policy.staleness.window)),
        log=joined.select("namespace", "pos", "memory_id", "credit", "confidence", "success"),
    )
    counts = counts.join(recent, ["namespace", "memory_id"], "left")
    # Fresh column ids: both sides of the cogroup come from ``joined``, which Spark would call ambiguous.
    log = joined.select(
        *(F.col(c).alias(c) for c in ("namespace", "pos", "memory_id", "credit", "success", "confidence", "context"))
    )
    counts = counts.select(*(F.col(c).alias(c) for c in counts.columns))
    schema = ", ".join(f"{name} {_spark_type(kind)}" for name, kind in COLUMNS_OUT)
    scorer = _Scorer(settings)

    def per_namespace(counts: Any, items: Any) -> Any:  # a plain function: Spark reads its arity
        return scorer(counts, items)

    scored = (
        counts.groupBy("namespace")
        .cogroup(log.groupBy("namespace"))
        .applyInPandas(per_namespace, schema)
        .orderBy("namespace", "memory_id")
    )
    return _Run(scored, items, clocks, checked)


@dataclass
class _Run:
    scored: Any
    items: Any
    clocks: Any
    checked: Any  # the checked, credited rows, cached (persist) for the stages that read them


def score_files(files: Sequence[str], settings: ScoreSettings, *, master: str | None = None) -> Any:
    """``memworth score --engine spark``: read ``files`` with Spark, score them, collect the table.

    Returns a :class:`memworth.logs.score.Scored` like the DuckDB engine's (its table a
    pyarrow Table with the same columns). ``master``: the Spark master (``None``: the
    session's own, e.g. from ``spark-submit``; ``local[*]`` when run as plain Python).
    """
    F = _spark()
    from memworth.logs.score import Scored

    spark = session(master)
    df, labels = read_files(spark, files, settings.fmt)
    run = _score(df, settings, labels)
    try:
        table = run.scored.toArrow()
        rows = int(run.items.count())
        episodes = run.clocks.agg(F.sum("episodes")).collect()[0][0]
    finally:
        run.checked.unpersist()
    return Scored(table, list(files), [], rows, int(episodes or 0))
