"""``memworth score`` and ``memworth import``: the log commands (``export --format`` is in the store's).

Registered by :mod:`memworth.cli`; DuckDB and pyarrow are imported only when a command
runs, so the CLI works without the ``logs`` extra and says how to get it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memworth.errors import MemworthError, ValidationError
from memworth.outputs import file_to_write, folder_to_write
from memworth.progress import on_terminal

if TYPE_CHECKING:
    from memworth.governance import GovernancePolicy

__all__ = ["export_command", "register"]


def _reading_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("logs", nargs="+", metavar="LOG", help="log files (Parquet, JSON lines or CSV)")
    p.add_argument(
        "--format",
        dest="log_format",
        choices=["parquet", "jsonl", "csv"],
        help="format of every LOG (default: from each file's suffix)",
    )
    p.add_argument(
        "--column",
        action="append",
        default=[],
        metavar="NAME=THEIRS",
        help="the log's name for a column of the format, e.g. --column episode_id=trace_id (repeatable)",
    )
    p.add_argument(
        "--credit",
        choices=["uniform", "score", "given"],
        default="uniform",
        help="how an outcome splits among the episode's items: 1/k, by score, by weight (default uniform)",
    )
    p.add_argument("--w-min", type=float, default=0.0, help="floor on an item's credit (default 0)")


def register(commands: Any) -> None:
    """Add ``score`` and ``import`` to the ``memworth`` CLI."""
    p = commands.add_parser(
        "score",
        help="worth, intervals, class, change alarm and proposal of every memory in retrieval logs",
        description="Score every memory in retrieval logs with DuckDB (or Spark): counts, worth, intervals, class, "
        "change alarm, sequential deprecation and the proposal with its reason.",
    )
    _reading_args(p)
    p.add_argument(
        "--engine",
        choices=["duckdb", "spark"],
        default="duckdb",
        help="where the sums run: duckdb (embedded, default) or spark (pip install 'memworth[spark]')",
    )
    p.add_argument(
        "--spark-master",
        help="Spark master for --engine spark, e.g. local[2] or spark://host:7077 (default: spark-submit's, else local[*])",
    )
    p.add_argument("--out", type=Path, help="directory for worth.parquet, worth.csv and report.png")
    p.add_argument("--state", type=Path, help="state file: keeps counts and the episode log; reads only new files")
    p.add_argument(
        "--half-life", type=float, default=100.0, help="half-life of decayed worth, in episodes (default 100)"
    )
    p.add_argument("--level", type=float, default=0.95, help="level of the Beta and Wilson intervals (default 0.95)")
    p.add_argument(
        "--settings",
        type=Path,
        help="a JSON file of governance settings: what `memworth config show --json` prints for a store (its "
        "settings.governance part is read), or a governance part alone; the proposals then follow that store's "
        "rules. --min-evidence, --deprecation and --no-change-detection, when given, override it",
    )
    p.add_argument("--min-evidence", type=float, help="V_min in retrievals (default 10)")
    p.add_argument(
        "--deprecation",
        choices=["fixed", "sequential"],
        help="deprecation rule the proposals use (default fixed)",
    )
    p.add_argument("--no-change-detection", action="store_true", help="skip the change-point alarm")
    p.add_argument("--memory-limit", help="cap on DuckDB's memory, e.g. 4GB (past it, it works on disk)")
    p.add_argument("--no-figure", action="store_true", help="do not draw report.png")
    p.add_argument("--quiet", action="store_true", help="no progress bar, no summary")
    p.add_argument("--json", action="store_true", help="print the rows as JSON instead of the summary")
    p.set_defaults(handler=_score)
    q = commands.add_parser(
        "import",
        help="load retrieval logs into a store (episodes, outcomes, counters)",
        description="Load retrieval logs into a store: memories known by id (unknown ids become external "
        "memories), one episode and outcome per episode_id, counters from the same credit.",
    )
    _reading_args(q)
    q.add_argument("--quiet", action="store_true", help="no progress bar")
    from memworth.store_cli import _common, _with_store

    _common(q)
    q.set_defaults(handler=_with_store(_import))


def _settings(args: argparse.Namespace) -> Any:
    try:
        from memworth.governance import GovernancePolicy
        from memworth.logs.format import ColumnMap
        from memworth.logs.score import ScoreSettings
        from memworth.logs.state import Counting
    except ImportError as exc:  # pragma: no cover - only without the extra
        raise MemworthError(f"the log commands need DuckDB and pyarrow ({exc}): pip install 'memworth[logs]'") from None
    policy = _policy(getattr(args, "settings", None))
    flags = {
        "min_evidence": getattr(args, "min_evidence", None),
        "deprecation": getattr(args, "deprecation", None),
        "change_detection": False if getattr(args, "no_change_detection", False) else None,
    }
    given = {name: value for name, value in flags.items() if value is not None}
    if given:  # a flat name wins over its part's value
        policy = GovernancePolicy.from_settings({**policy.settings(), **given})
    counting = Counting(args.credit, args.w_min, getattr(args, "half_life", 100.0))
    return ScoreSettings(counting, policy, getattr(args, "level", 0.95), ColumnMap.parse(args.column), args.log_format)


def _policy(path: Path | None) -> GovernancePolicy:
    """The governance policy a ``--settings`` file gives (the defaults without one): the JSON of
    ``memworth config show --json``, its ``settings`` object, or a governance part alone."""
    from memworth.governance import GovernancePolicy

    if path is None:
        return GovernancePolicy()
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ValidationError("settings", f"cannot read {str(path)!r}: {exc.strerror or exc}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValidationError("settings", f"{str(path)!r} is not JSON: {exc}") from None
    for part in ("settings", "governance"):  # config show's output, then a store's settings object
        if isinstance(data, dict) and isinstance(data.get(part), dict):
            data = data[part]
    if not isinstance(data, dict):
        raise ValidationError("settings", f"{str(path)!r} must hold a JSON object of governance settings")
    return GovernancePolicy.from_settings(data)


def _score(args: argparse.Namespace) -> int:
    settings = _settings(args)
    from memworth.logs.report import draw_figure, print_summary, write_tables
    from memworth.logs.score import score_files

    progress = on_terminal(args.quiet)
    # Where the results go is checked before the logs are read: a run refused for it writes nothing.
    if args.out is not None:
        folder_to_write(args.out, "out")
    if args.state is not None:
        file_to_write(args.state, "state")
    if args.engine == "spark":
        for flag, given in (("state", args.state), ("memory_limit", args.memory_limit)):
            if given is not None:
                raise ValidationError(
                    flag,
                    f"--{flag.replace('_', '-')} is for --engine duckdb only; --engine spark scores the given logs "
                    "from scratch and Spark manages its own memory",
                )
        from memworth.spark import score_files as score_on_spark

        scored = score_on_spark(args.logs, settings, master=args.spark_master)
    else:
        if args.spark_master is not None:
            raise ValidationError("spark_master", "--spark-master is for --engine spark only")
        scored = score_files(args.logs, settings, state=args.state, progress=progress, memory_limit=args.memory_limit)
    written: list[Path] = []
    if args.out is not None:
        written = write_tables(scored.table, args.out)
        if not args.no_figure:
            written.append(draw_figure(scored.table, args.out / "report.png"))
    if args.json:
        print(json.dumps(scored.table.to_pylist(), indent=1))
    elif not args.quiet:
        skipped = f", {len(scored.files_skipped)} skipped (in the state)" if scored.files_skipped else ""
        print(
            f"read {len(scored.files_read)} file(s){skipped}: {scored.rows_read} rows, {scored.episodes_added} new episodes"
        )
        print_summary(scored.table)
        for path in written:
            print(f"wrote {path}")
    return 0


def _import(store: Any, args: argparse.Namespace) -> int:
    settings = _settings(args)
    from memworth.logs.store_io import import_log

    added, episodes, rows = import_log(store.backend, args.logs, settings, progress=on_terminal(args.quiet))
    print(f"imported {rows} rows: {episodes} episodes with outcomes, {added} new memories")
    return 0


def export_command(store: Any, args: argparse.Namespace) -> int:
    """``memworth export --format parquet|jsonl|csv --out FILE``: the store's log in the log format."""
    if args.out is None:
        raise MemworthError("export --format needs --out FILE")
    from memworth.logs.store_io import export_log

    rows = export_log(store.backend, args.out, args.format, args.namespace)
    print(f"wrote {rows} rows to {args.out}", file=sys.stderr)
    return 0
