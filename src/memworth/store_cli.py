"""``memworth add / recall / record / show / list / delete / edit / status / standing / govern / ...``.

Each command opens the store, calls the method a Python user would call, and prints the
result as text or, with ``--json``, as JSON. Errors are converted once, in ``memworth.cli``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memworth.errors import ValidationError
from memworth.outputs import file_to_write, written_whole
from memworth.progress import on_terminal

if TYPE_CHECKING:  # imported when a command runs, so `memworth --help` stays fast
    from memworth.config_file import ConfigFile
    from memworth.embed.encoders import Encoder
    from memworth.store import Memory, MemoryStore

__all__ = ["register"]

DEFAULT_URL = "sqlite:///memworth.db"


OPTIONS: dict[str, tuple[str | None, Any]] = {
    "store": ("MEMWORTH_STORE", DEFAULT_URL),
    "redis": ("MEMWORTH_REDIS", None),
    "log_level": ("MEMWORTH_LOG_LEVEL", "info"),
    "host": (None, "127.0.0.1"),
    "port": (None, 8000),
    "workers": ("MEMWORTH_WORKERS", None),
    "processes": ("MEMWORTH_PROCESSES", None),
    "transport": (None, "stdio"),
    "namespace": (None, "default"),
}
"""Options a configuration file may give (``memworth serve/mcp --config``): each one's
environment variable and default. A flag wins over the file, the file over both."""


def config_arg(p: argparse.ArgumentParser, table: str) -> None:
    """``--config FILE`` for a command that reads the file's ``table`` ([server] or [mcp])."""
    p.add_argument(
        "--config",
        default=os.environ.get("MEMWORTH_CONFIG"),
        help=f"a TOML file: store URL, [{table}] options, [settings.*] changes to the store's settings "
        "(default: $MEMWORTH_CONFIG; flags win over it)",
    )
    p.set_defaults(config_table=table)


def _resolve_options(args: argparse.Namespace) -> ConfigFile | None:
    """Fill the options the command line left out from the configuration file, the
    environment and the defaults, in that order; the file read, if any."""
    found = None
    if getattr(args, "config", None):
        from memworth.config_file import load

        found = load(args.config)
    table: dict[str, Any] = {} if found is None else getattr(found, args.config_table)
    if found is not None and found.store is not None:
        table = {"store": found.store, **table}
    for name, (env, default) in OPTIONS.items():
        if getattr(args, name, "") is not None:  # given on the command line, or not this command's
            continue
        value = table.get(name)
        if value is None and env is not None:
            value = os.environ.get(env)
        setattr(args, name, default if value is None else value)
    return found


def _common(p: argparse.ArgumentParser, namespaced: bool = True) -> None:
    """The options every store command takes; ``--namespace`` only where the command reads it
    (a store-wide command given one would silently act on every namespace)."""
    p.add_argument("--store", help=f"store URL (default: $MEMWORTH_STORE or {DEFAULT_URL})")
    if namespaced:
        p.add_argument("--namespace", default="default", help="tenant namespace (default: default)")
    p.add_argument(
        "--encoder",
        choices=["minilm", "hashing"],
        help="encoder for a new store (default: the store's own, else all-MiniLM-L6-v2)",
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of text")


def register(commands: Any) -> None:
    """Add the store commands to the ``memworth`` CLI."""
    spec: list[tuple[str, str, Callable[[argparse.ArgumentParser], None], Callable[..., int]]] = [
        ("add", "store a memory", _add_args, _add),
        ("recall", "recall memories for a query (logs an episode)", _recall_args, _recall),
        ("record", "record the outcome of a recalled episode", _record_args, _record),
        ("show", "one memory: text, counts, worth, audit trail", _show_args, _show),
        (
            "worth",
            "one memory's report: worth, interval, class, hot tier and the change governance proposes now",
            _show_args,
            _worth,
        ),
        ("list", "memories with worth, evidence and status", _list_args, _list),
        (
            "govern",
            "propose (or --apply) governance changes, or --replay the log under other settings",
            _govern_args,
            _govern,
        ),
        (
            "sources",
            "outcome sources: fixed and learned confidence, verified agreement, limits",
            lambda p: None,
            _sources,
        ),
        (
            "holdout",
            "success of governed against holdout episodes: the lift, with its interval",
            _holdout_args,
            _holdout,
        ),
        ("restore", "undo one audited change", _restore_args, _restore),
        ("queue", "memories quarantined for re-verification, awaiting a verdict", lambda p: None, _queue),
        ("resolve", "resolve a quarantined memory: confirmed, stale or edited", _resolve_args, _resolve),
        ("delete", "erase a memory for good (text, embedding, metadata); a tombstone stays", _delete_args, _delete),
        ("edit", "replace a memory's text: a new version, re-embedded; the old one archived", _edit_args, _edit),
        ("status", "set a memory's status by hand (audited)", _status_args, _status),
        ("standing", "set a memory's governance standing by hand (audited)", _standing_args, _standing),
        ("ttl", "show or set the namespace's time to live for new memories", _ttl_args, _ttl),
        ("expire", "erase the namespace's expired memories (or --list them)", _expire_args, _expire),
        ("pin", "keep governance away from a memory until it is unpinned", _pin_args, _pin),
        ("unpin", "end a memory's pin", _pin_args, _unpin),
        (
            "config",
            "show the governance policy the store keeps, or set its settings (a new version)",
            _config_args,
            _config,
        ),
        (
            "outcomes",
            "the namespace's outcome log, a page at a time, with the settings version each was credited under",
            _outcomes_args,
            _outcomes,
        ),
        ("replay", "rebuild every counter from the outcome log and compare", _replay_args, _replay),
        ("stats", "counts of memories, episodes, outcomes", lambda p: None, _stats),
        ("export", "write memories, outcomes and audit log as JSON lines", _export_args, _export),
        ("hot", "rebuild or check the Redis hot tier from the database", _hot_args, _hot),
        ("keys", "create, list or revoke API keys, each bound to a namespace", _keys_args, _keys),
        ("serve", "serve the HTTP API (FastAPI + uvicorn) over the store", _serve_args, _serve),
    ]
    store_wide = {"config", "replay", "serve"}  # settings, counters and the server are the store's, not a namespace's
    for name, help_text, add_args, handler in spec:
        p = commands.add_parser(name, help=help_text, description=help_text[0].upper() + help_text[1:] + ".")
        add_args(p)
        _common(p, namespaced=name not in store_wide)
        p.set_defaults(handler=_with_store(handler))


def _with_store(handler: Callable[[MemoryStore, argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        from memworth.embed.encoders import HashingEncoder
        from memworth.store import MemoryStore

        found = _resolve_options(args)
        encoder: Encoder | None = None
        if args.encoder == "hashing":
            encoder = HashingEncoder()
        elif args.encoder == "minilm":
            from memworth.embed.minilm import load_minilm

            encoder = load_minilm()
        settings: dict[str, Any] = {"encoder": encoder}
        if getattr(args, "redis", None):
            settings["hot_tier"] = args.redis
        with MemoryStore.open(args.store, **settings) as store:
            if found is not None and found.settings:
                store.configure(found.settings, actor=f"config file {found.path}")
            return handler(store, args)

    return run


def _emit(args: argparse.Namespace, data: Any, text: str) -> None:
    if args.json:
        print(json.dumps(data, indent=2, default=_plain))
    else:
        print(text)


def _plain(x: Any) -> Any:
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return dataclasses.asdict(x)
    if isinstance(x, tuple):
        return list(x)
    raise TypeError(f"not JSON serialisable: {type(x).__name__}")


def _memory_dict(store: MemoryStore, m: Memory) -> dict[str, Any]:
    c = m.counts
    klass = store.taxonomy.classify(c)
    return {
        "id": m.id,
        "text": m.text,
        "status": m.status,
        "standing": m.standing,
        "contexts": list(m.contexts),
        "metadata": m.metadata,
        "derived_from": list(m.derived_from),
        "part_of": list(m.part_of),
        "success": c.success,
        "failure": c.failure,
        "retrievals": c.n,
        "worth": klass.worth,
        "class": klass.value_class.value,
        "expires": m.expires,
        "expired": m.expired(store.clock()),
    }


def _memory_line(d: dict[str, Any]) -> str:
    text = d["text"] if len(d["text"]) <= 60 else d["text"][:57] + "..."
    return (
        f"{d['id']:<24} worth {d['worth']:.3f}  n {d['retrievals']:>5g}  {d['class']:<9} "
        f"{d['status']:<10} {d['standing']:<9} {text}"
    )


# -- add -------------------------------------------------------------------------------


def _add_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("text", nargs="?", help="the memory's text")
    p.add_argument(
        "--file",
        help="add many instead: a JSON-lines file ('-' for standard input), one memory per line as an object "
        "with 'text' and optionally 'id', 'metadata', 'contexts', 'derived_from', 'part_of', 'ttl'; stored in one "
        "transaction, all or none, with a progress bar on a terminal",
    )
    p.add_argument("--id", help="its id (default: a random one)")
    p.add_argument("--metadata", help="a JSON object")
    p.add_argument("--context", action="append", help="a context label (repeatable)")
    p.add_argument("--derived-from", action="append", help="id of a memory it was derived from (repeatable)")
    p.add_argument("--part-of", action="append", help="id of a memory it is part of (repeatable)")
    p.add_argument("--ttl", type=float, help="seconds to live (default: the namespace's, see ttl; else forever)")


def _add(store: MemoryStore, args: argparse.Namespace) -> int:
    if args.file is not None:
        return _add_file(store, args)
    if args.text is None:
        raise ValidationError("text", "is required (or --file with memories, one JSON object per line)")
    metadata = None
    if args.metadata is not None:
        try:
            metadata = json.loads(args.metadata)
        except json.JSONDecodeError as exc:
            raise ValidationError("--metadata", f"is not JSON: {exc.msg} at character {exc.pos}") from None
    m = store.add(
        args.text,
        id=args.id,
        namespace=args.namespace,
        metadata=metadata,
        contexts=args.context,
        derived_from=args.derived_from,
        part_of=args.part_of,
        ttl=args.ttl,
    )
    _emit(args, _memory_dict(store, m), m.id)
    return 0


def _add_file(store: MemoryStore, args: argparse.Namespace) -> int:
    """``add --file``: every line a memory, stored by one ``add_many`` call."""
    single = {
        "TEXT": args.text,
        "--id": args.id,
        "--metadata": args.metadata,
        "--context": args.context,
        "--derived-from": args.derived_from,
        "--part-of": args.part_of,
        "--ttl": args.ttl,
    }
    given = [flag for flag, value in single.items() if value is not None]
    if given:
        raise ValidationError("--file", f"takes every field from the file; drop {', '.join(given)}")
    try:
        if args.file == "-":
            lines = sys.stdin.read().splitlines()
        else:
            lines = Path(args.file).read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ValidationError("--file", f"cannot be read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ValidationError("--file", f"is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    items: list[Any] = []
    for number, line in enumerate(lines, start=1):
        if line.strip():
            try:
                items.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise ValidationError("--file", f"line {number} is not JSON: {exc.msg}") from None
    if not items:
        raise ValidationError("--file", "holds no memories")
    added = store.add_many(items, namespace=args.namespace, progress=sys.stderr.isatty())
    _emit(args, {"added": len(added), "ids": [m.id for m in added]}, f"added {len(added)} memories")
    return 0


# -- recall / record ---------------------------------------------------------------------


def _recall_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("query", help="what the agent is looking for")
    p.add_argument("-k", type=int, default=4, help="how many memories (default 4)")
    p.add_argument("--context", help="context label of this episode")
    p.add_argument(
        "--where",
        help='only matching memories, as JSON: {"metadata": {"team": "a", "priority": {"gte": 2}}, "contexts": ["api"],'
        ' "status": [...], "standing": [...]}',
    )


def _recall(store: MemoryStore, args: argparse.Namespace) -> int:
    where = None
    if args.where is not None:
        try:
            where = json.loads(args.where)
        except json.JSONDecodeError as exc:
            raise ValidationError("--where", f"is not JSON: {exc.msg} at character {exc.pos}") from None
    recall = store.recall(args.query, args.k, context=args.context, namespace=args.namespace, where=where)
    rows = [r.row() for r in recall]
    lines = [f"episode {recall.episode.id}"]
    lines += [
        f"{i + 1}. [{r['score']:.3f}] sim {r['similarity']:.3f} worth {r['worth']:.3f} "
        f"[{r['lower']:.2f}, {r['upper']:.2f}] {r['class']}{' (explored)' if r['explored'] else ''}"
        f"{' (probe: quarantined, treat with doubt)' if r['probe'] else ''}  {r['id']}: {r['text']}"
        for i, r in enumerate(rows)
    ]
    _emit(args, {"episode": recall.episode.id, "results": rows}, "\n".join(lines))
    return 0


def _record_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("episode", help="the episode id recall printed")
    p.add_argument("outcome", choices=["success", "failure"])
    p.add_argument(
        "--source",
        default="explicit",
        help="outcome source (explicit, implicit, heuristic; verified: the reference sources are checked against)",
    )
    p.add_argument("--confidence", type=float, help="override the source's confidence, in (0, 1]")
    p.add_argument(
        "--used",
        action="append",
        metavar="ID",
        help="a recalled memory the agent used (repeat for several): only those are credited; default: all recalled",
    )


def _record(store: MemoryStore, args: argparse.Namespace) -> int:
    store.record(
        args.episode,
        args.outcome,
        source=args.source,
        confidence=args.confidence,
        namespace=args.namespace,
        used=args.used,
    )
    _emit(
        args,
        {"episode": args.episode, "outcome": args.outcome, "recorded": True},
        f"recorded {args.outcome} for episode {args.episode}",
    )
    return 0


# -- reading -----------------------------------------------------------------------------


def _show_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("id", help="memory id")


def _show(store: MemoryStore, args: argparse.Namespace) -> int:
    d = _memory_dict(store, store.get(args.id, namespace=args.namespace))
    audit = store.audit(args.id, namespace=args.namespace)
    d["audit"] = [dataclasses.asdict(e) for e in audit]
    lines = [
        _memory_line(d),
        f"  text: {d['text']}",
        f"  hits+ {d['success']:.4g}  hits- {d['failure']:.4g}  retrievals {d['retrievals']:g}",
    ]
    lines += [f"  #{e.seq} {e.action}: {e.field} {e.old} -> {e.new} ({e.reason})" for e in audit]
    _emit(args, d, "\n".join(lines))
    return 0


def _worth(store: MemoryStore, args: argparse.Namespace) -> int:
    report = store.report(args.id, namespace=args.namespace).row()  # the same report HTTP and MCP give
    i, p = report["interval"], report["proposal"]
    lines = [
        f"{report['id']}: worth {report['worth']:.3f} [{i['lower']:.3f}, {i['upper']:.3f}] ({i['method']})",
        f"  class {report['class']} ({report['class_reason']})",
        f"  status {report['status']}, standing {report['standing']}, hot tier {'yes' if report['hot'] else 'no'}",
        "  proposal: none" if p is None else f"  proposal: {p['action']} ({p['reason']})",
    ]
    if report["pin"] is not None:
        pin, held = report["pin"], report["held"]
        until = "until unpinned" if pin["until"] is None else f"until {pin['until']:g} retrievals"
        lines.append(f"  pinned by audit entry #{pin['audit_seq']} ({pin['action']}) {until}")
        if held is not None:
            lines.append(f"  held back: {held['action']} ({held['reason']})")
    _emit(args, report, "\n".join(lines))
    return 0


def _config_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=["show", "set", "history"], help="show, set or list the versions")
    p.add_argument(
        "settings",
        nargs="*",
        metavar="NAME=VALUE",
        help="with set: settings to change, by dotted name (recall.exploration=0.05, "
        "governance.classes.theta_low=0.35; a name only one part has may go bare: theta_low=0.35); "
        "values are JSON, or a word",
    )
    p.add_argument("--actor", default="cli", help="who changes the settings, for their history (default: cli)")


def _config(store: MemoryStore, args: argparse.Namespace) -> int:
    if args.action == "set":
        if not args.settings:
            raise ValidationError("settings", "give at least one NAME=VALUE to set")
        changes: dict[str, Any] = {}
        for item in args.settings:
            name, sep, text = item.partition("=")
            if not sep or not name:
                raise ValidationError("settings", f"expected NAME=VALUE, got {item!r}")
            try:
                changes[name] = json.loads(text)
            except json.JSONDecodeError:
                changes[name] = text  # a word: governance.low_worth.rule=sequential
        store.configure(changes, actor=args.actor)
    if args.action == "history":
        versions = store.settings_history()
        lines = [
            f"version {v['version']}"
            + ("" if v["at"] is None else f" at {v['at']:.0f}")
            + f" by {v['actor']}: "
            + (", ".join(v["changed"]) or "first kept")
            for v in versions
        ]
        _emit(args, versions, "\n".join(lines) or "never set: the defaults are in force")
        return 0
    from memworth.settings import by_setting

    data = store.config()
    text = [f"settings version {data['version']}{' (defaults, never set)' if data['version'] == 0 else ''}"]
    text += [f"  {part}.{name} = {json.dumps(v)}" for part, name, v in by_setting(data["settings"])]
    _emit(args, data, "\n".join(text))
    return 0


def _list_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--status", help="only this status")
    p.add_argument("--context", help="only this context label")
    p.add_argument("--limit", type=int, help="one page of at most this many (prints the next page's cursor)")
    p.add_argument("--cursor", help="the page after this cursor (printed by the previous page)")


def _list(store: MemoryStore, args: argparse.Namespace) -> int:
    if args.limit is None and args.cursor is None:
        found = store.list(namespace=args.namespace, status=args.status, context=args.context)
        rows = [_memory_dict(store, m) for m in found]
        _emit(args, rows, "\n".join(_memory_line(d) for d in rows) or "(no memories)")
        return 0
    page = store.list_page(
        limit=100 if args.limit is None else args.limit,
        cursor=args.cursor,
        namespace=args.namespace,
        status=args.status,
        context=args.context,
    )
    rows = [_memory_dict(store, m) for m in page.items]
    more = "(last page)" if page.next_cursor is None else f"next page: --cursor {page.next_cursor}"
    text = "\n".join([*(_memory_line(d) for d in rows), more])
    _emit(args, {"memories": rows, "next_cursor": page.next_cursor}, text)
    return 0


# -- governance and the log --------------------------------------------------------------


def _govern_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--apply", action="store_true", help="make the proposed changes (audited)")
    p.add_argument("--quiet", action="store_true", help="no progress bar (shown only when stderr is a terminal)")
    r = p.add_argument_group("policy replay (--replay: re-run governance over the log; changes nothing)")
    r.add_argument("--replay", action="store_true", help="compare the current settings with the ones given here")
    for flag in ("theta-low", "theta-high", "min-evidence", "deprecate-below", "promote-above", "demote-below"):
        r.add_argument(f"--{flag}", type=float, help=f"the alternative's {flag.replace('-', '_')}")
    r.add_argument("--half-life", type=float, help="evidence half-life, in outcomes of the log")
    r.add_argument("--estimator", default="raw", help="raw, beta, wilson-lower or wilson-upper (default raw)")
    r.add_argument("--every", type=int, default=100, help="outcomes between replayed rounds (default 100)")


def _govern(store: MemoryStore, args: argparse.Namespace) -> int:
    if args.replay:
        return _policy_replay(store, args)
    report = store.govern(apply=args.apply, namespace=args.namespace, progress=on_terminal(args.quiet))
    lines = [f"{p.action:<9} {p.memory_id}: {p.field} {p.old} -> {p.new}; {p.reason}" for p in report.proposals]
    lines += [f"alert     {a.memory_id}: {a.reason}" for a in report.alerts]
    if report.guard is not None and report.guard.fired:
        lines.insert(0, f"GUARD     {report.guard.reason}")
    if args.apply:
        lines.append(f"applied {len(report.applied)}, skipped {len(report.skipped)}")
        lines += [f"  skipped {p.memory_id}: {why}" for p, why in report.skipped]
    _emit(args, report.row(), "\n".join(lines) or "nothing to propose")
    return 0


def _policy_replay(store: MemoryStore, args: argparse.Namespace) -> int:
    from memworth.governance.replay import ReplaySettings

    if args.apply:
        raise ValidationError("--apply", "a replay changes nothing; drop --apply or --replay")
    flags = ("theta_low", "theta_high", "min_evidence", "deprecate_below", "promote_above", "demote_below")
    changed = {name: getattr(args, name) for name in flags if getattr(args, name) is not None}
    try:
        policy = dataclasses.replace(store.policy, **changed)  # checks every setting
    except ValidationError as exc:  # name the flag the user typed, not the policy's field
        field = f"--{exc.field.replace('_', '-')}" if exc.field in flags else exc.field
        raise ValidationError(field, exc.reason) from None
    alternative = ReplaySettings("alternative", policy, args.half_life, args.estimator, args.every)
    report = store.replay_policy(alternative, namespace=args.namespace, every=args.every)
    diffs = report.differences["alternative"]
    table = report.table()
    lines = [f"{report.outcomes} outcomes replayed, a governance round every {args.every}"]
    lines.append(f"{'settings':<12} {'suppress':>8} {'deprecate':>9} {'re-verify':>9} {'promote':>7} {'demote':>6}")
    lines += [
        f"{r['settings']!s:<12} {r['suppress']:>8} {r['deprecate']:>9} {r['re-verify']:>9} {r['promote']:>7} "
        f"{r['demote']:>6}"
        for r in table
    ]
    lines.append(f"{len(diffs)} memories end differently (current -> alternative):")
    lines += [f"  {d.describe()}" for d in diffs]
    data = {
        "outcomes": report.outcomes,
        "alternative": alternative.describe(),
        "table": table,
        "differences": diffs,
    }
    _emit(args, data, "\n".join(lines))
    return 0


def _sources(store: MemoryStore, args: argparse.Namespace) -> int:
    reports = store.source_reliability(args.namespace)
    rows: list[dict[str, Any]] = [r.row() for r in reports.values()]
    lines = [f"{'source':<12} {'fixed':>5} {'verified':>8} {'agreement':>9} {'learned':>7} {'in use':>6}"]
    lines += [
        f"{r.source:<12} {r.fixed:>5.2f} {r.agreement.total:>8g} {r.agreement_rate:>9.3f} {r.learned:>7.3f} {r.in_use:>6.3f}"
        for r in reports.values()
    ]
    lines.append("learned = 2 x agreement - 1 (agreement: posterior mean against verified outcomes)")
    _emit(args, rows, "\n".join(lines))
    return 0


def _holdout_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--level", type=float, default=0.95, help="confidence level of the interval (default 0.95)")
    p.add_argument("--method", choices=["newcombe", "wald"], default="newcombe", help="interval (default newcombe)")


def _holdout(store: MemoryStore, args: argparse.Namespace) -> int:
    r = store.holdout_report(namespace=args.namespace, level=args.level, method=args.method)
    guard = store.holdout_guard(namespace=args.namespace)
    data = {
        k: (None if isinstance(v, float) and math.isnan(v) else v)
        for k, v in (dataclasses.asdict(r) | {"governed_rate": r.governed_rate, "holdout_rate": r.holdout_rate}).items()
    } | {"guard": None if guard is None else guard.row()}
    text = (
        r.describe()
        if r.holdout_n and r.governed_n
        else (
            f"no lift yet: {r.governed_n} governed and {r.holdout_n} holdout episodes with an outcome "
            + (
                f"(the store holds out {store.holdout:.0%} of episodes)"
                if store.holdout > 0
                else "(hold out a share of episodes: memworth config set holdout.share=0.1)"
            )
        )
    )
    if guard is not None:
        text += f"\nholdout guard: {guard.reason}"
    _emit(args, data, text)
    return 0


def _restore_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("seq", type=int, help="audit entry number (see show)")
    p.add_argument("--reason", default="restored by hand", help="why")
    _actor_arg(p)


def _restore(store: MemoryStore, args: argparse.Namespace) -> int:
    e = store.restore(args.seq, reason=args.reason, actor=args.actor, namespace=args.namespace)
    _emit(args, e, f"#{e.seq} {e.memory_id}: {e.field} {e.old} -> {e.new}")
    return 0


def _decision_line(e: Any) -> str:
    return f"#{e.seq} {e.memory_id}: {e.action} ({e.field} {e.old or '-'} -> {e.new})"


def _queue(store: MemoryStore, args: argparse.Namespace) -> int:
    rows = [r.row() for r in store.queue(namespace=args.namespace)]
    lines = [
        f"{r['id']:<24} worth {r['worth']:.3f} over {r['counts']['retrievals']:g} retrievals"
        + ("" if r["proposal"] is None else f"  proposal: {r['proposal']['action']} ({r['proposal']['reason']})")
        for r in rows
    ]
    _emit(args, rows, "\n".join(lines) or "no memory awaits verification")
    return 0


def _resolve_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("id", help="memory id")
    p.add_argument("verdict", choices=["confirmed", "stale", "edited"], help="what a person found")
    p.add_argument("--reason", required=True, help="why (kept in the audit log)")
    p.add_argument("--text", help="with edited: the corrected text (a new memory replaces this one)")
    p.add_argument("--new-id", help="with edited: the new memory's id (default <id>~<8 hex>)")
    p.add_argument("--status", choices=["suppressed", "deprecated"], help="with stale (default suppressed)")
    _actor_arg(p)


def _resolve(store: MemoryStore, args: argparse.Namespace) -> int:
    e = store.resolve(
        args.id,
        args.verdict,
        reason=args.reason,
        text=args.text,
        new_id=args.new_id,
        status=args.status,
        actor=args.actor,
        namespace=args.namespace,
    )
    _emit(args, e, _decision_line(e))
    return 0


# -- forgetting and changes by hand -----------------------------------------------------------


def _actor_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--actor", default=_login(), help="who makes the change, for the audit log (default: your login)")


def _login() -> str | None:
    try:
        import getpass

        return getpass.getuser()
    except (OSError, KeyError, ImportError):  # no login name (a container without a user entry)
        return None


def _delete_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("id", help="memory id")
    p.add_argument("--reason", required=True, help="why (kept in the tombstone)")
    _actor_arg(p)


def _delete(store: MemoryStore, args: argparse.Namespace) -> int:
    e = store.delete(args.id, reason=args.reason, actor=args.actor, namespace=args.namespace)
    _emit(args, e, f"#{e.seq} {e.memory_id}: erased (its text, embedding and metadata are gone)")
    return 0


def _edit_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("id", help="memory id")
    p.add_argument("text", help="the new text (a new memory replaces this one; counters start afresh)")
    p.add_argument("--reason", required=True, help="why (kept in the audit log)")
    p.add_argument("--new-id", help="the new version's id (default <id>~<8 hex>)")
    p.add_argument("--erase-old", action="store_true", help="erase the old version instead of archiving it")
    _actor_arg(p)


def _edit(store: MemoryStore, args: argparse.Namespace) -> int:
    e = store.edit(
        args.id,
        args.text,
        reason=args.reason,
        actor=args.actor,
        new_id=args.new_id,
        keep_old=not args.erase_old,
        namespace=args.namespace,
    )
    _emit(args, e, f"{_decision_line(e)}; replaced by {e.settings['replaced_by']}")
    return 0


def _status_args(p: argparse.ArgumentParser) -> None:  # the values are checked by the library (one list)
    p.add_argument("id", help="memory id")
    p.add_argument("status", help="active, suppressed, deprecated or archived")
    p.add_argument("--reason", required=True, help="why (kept in the audit log)")
    _actor_arg(p)


def _status(store: MemoryStore, args: argparse.Namespace) -> int:
    e = store.set_status(args.id, args.status, reason=args.reason, actor=args.actor, namespace=args.namespace)
    _emit(args, e, _decision_line(e))
    return 0


def _standing_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("id", help="memory id")
    p.add_argument("standing", help="normal, promoted, demoted or re-verify")
    p.add_argument("--reason", required=True, help="why (kept in the audit log)")
    _actor_arg(p)


def _standing(store: MemoryStore, args: argparse.Namespace) -> int:
    e = store.set_standing(args.id, args.standing, reason=args.reason, actor=args.actor, namespace=args.namespace)
    _emit(args, e, _decision_line(e))
    return 0


def _ttl_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("seconds", nargs="?", help="set: seconds new memories live, or 'none' (forever); omit to show")


def _ttl(store: MemoryStore, args: argparse.Namespace) -> int:
    if args.seconds is not None:
        if args.seconds.lower() == "none":
            store.set_ttl(None, namespace=args.namespace)
        else:
            try:
                seconds = float(args.seconds)
            except ValueError:
                raise ValidationError(
                    "seconds", f"must be a number of seconds or 'none', got {args.seconds!r}"
                ) from None
            store.set_ttl(seconds, namespace=args.namespace)
    ttl = store.ttl(namespace=args.namespace)
    _emit(
        args,
        {"namespace": args.namespace, "ttl": ttl},
        f"{args.namespace}: " + ("no time to live" if ttl is None else f"new memories live {ttl:g} s"),
    )
    return 0


def _expire_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--list", action="store_true", help="only list the expired memories, erase nothing")


def _expire(store: MemoryStore, args: argparse.Namespace) -> int:
    if args.list:
        rows = [_memory_dict(store, m) for m in store.expired(namespace=args.namespace)]
        _emit(args, rows, "\n".join(_memory_line(d) for d in rows) or "(no expired memories)")
        return 0
    tombs = store.purge_expired(namespace=args.namespace)
    _emit(args, tombs, "\n".join(f"#{e.seq} {e.memory_id}: expired, erased" for e in tombs) or "(nothing expired)")
    return 0


def _pin_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("id", help="memory id")
    p.add_argument("--reason", required=True, help="why (kept in the audit log)")
    _actor_arg(p)


def _pin(store: MemoryStore, args: argparse.Namespace) -> int:
    e = store.pin(args.id, reason=args.reason, actor=args.actor, namespace=args.namespace)
    _emit(args, e, _decision_line(e))
    return 0


def _unpin(store: MemoryStore, args: argparse.Namespace) -> int:
    e = store.unpin(args.id, reason=args.reason, actor=args.actor, namespace=args.namespace)
    _emit(args, e, _decision_line(e))
    return 0


def _outcomes_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--limit", type=int, default=100, help="a page of at most this many (default 100)")
    p.add_argument("--cursor", help="the page after this cursor (printed by the previous page)")


def _outcomes(store: MemoryStore, args: argparse.Namespace) -> int:
    page = store.outcome_page(limit=args.limit, cursor=args.cursor, namespace=args.namespace)
    rows = [o.row() for o in page.items]
    lines = [
        f"{r['seq']:>6}  {r['episode']}  {r['outcome']:<7}  {r['source']} x{r['confidence']:g}  "
        + (
            "settings before versions were kept"
            if r["settings_version"] is None
            else f"settings v{r['settings_version']}"
        )
        for r in rows
    ]
    more = "(last page)" if page.next_cursor is None else f"next page: --cursor {page.next_cursor}"
    _emit(args, {"outcomes": rows, "next_cursor": page.next_cursor}, "\n".join([*lines, more]))
    return 0


def _replay_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--apply", action="store_true", help="overwrite counters that differ from the log")
    p.add_argument("--quiet", action="store_true", help="no progress bar (shown only when stderr is a terminal)")


def _replay(store: MemoryStore, args: argparse.Namespace) -> int:
    r = store.replay(apply=args.apply, progress=on_terminal(args.quiet))
    data = {
        "outcomes": r.outcomes,
        "consistent": r.consistent,
        "applied": r.applied,
        "mismatches": [{"namespace": ns, "id": mid, "live": live, "log": want} for ns, mid, live, want in r.mismatches],
    }
    text = f"{r.outcomes} outcomes replayed: " + (
        "every counter matches the log"
        if r.consistent
        else f"{len(r.mismatches)} counter(s) differ" + (" (fixed)" if r.applied else "")
    )
    _emit(args, data, text)
    return 0 if r.consistent or r.applied else 1


def _stats(store: MemoryStore, args: argparse.Namespace) -> int:
    memories = store.list(namespace=args.namespace)
    by_status: dict[str, int] = {}
    by_class: dict[str, int] = {}
    for m in memories:
        by_status[m.status] = by_status.get(m.status, 0) + 1
        klass = store.taxonomy.classify(m.counts).value_class.value
        by_class[klass] = by_class.get(klass, 0) + 1
    outcomes = list(store.backend.outcome_log(args.namespace))  # this namespace's only
    data = {
        "memories": len(memories),
        "status": by_status,
        "class": by_class,
        "outcomes": len(outcomes),
        "successes": sum(o.success for o in outcomes),
        "hot_tier": len(store.hot_tier(namespace=args.namespace)),
    }
    _emit(args, data, "\n".join(f"{k}: {v}" for k, v in data.items()))
    return 0


def _export_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", type=Path, help="file to write (default: standard output)")
    p.add_argument(
        "--format",
        choices=["parquet", "jsonl", "csv"],
        help="write the outcome log in the retrieval log format (docs/logs.md) instead of the full dump",
    )


def _export(store: MemoryStore, args: argparse.Namespace) -> int:
    if args.format is not None:
        from memworth.logs.command import export_command

        return export_command(store, args)
    if args.out is not None:
        file_to_write(args.out, "out")  # before the store is read
    lines = [json.dumps({"type": "memory", **_memory_dict(store, m)}) for m in store.list(namespace=args.namespace)]
    for o, ep in store.backend.history(args.namespace):
        lines.append(json.dumps({"type": "outcome", **dataclasses.asdict(o), "episode": dataclasses.asdict(ep)}))
    lines += [json.dumps({"type": "audit", **dataclasses.asdict(e)}) for e in store.audit(namespace=args.namespace)]
    body = "\n".join(lines) + ("\n" if lines else "")
    if args.out is None:
        sys.stdout.write(body)
    else:
        with written_whole(args.out, "out") as part:
            part.write_text(body, encoding="utf-8")
        print(f"wrote {len(lines)} lines to {args.out}", file=sys.stderr)
    return 0


def _hot_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "action", choices=["rebuild", "check"], help="rebuild: rewrite Redis from the database; check: compare"
    )
    p.add_argument(
        "--redis",
        default=os.environ.get("MEMWORTH_REDIS", "redis://127.0.0.1:6379/0"),
        help="Redis URL (default: $MEMWORTH_REDIS or redis://127.0.0.1:6379/0)",
    )


def _hot(store: MemoryStore, args: argparse.Namespace) -> int:
    if args.action == "rebuild":
        count = store.rebuild_hot_tier(namespace=args.namespace)
        diff = store.check_hot_tier(namespace=args.namespace)
        data = {"rebuilt": count, **diff}
        _emit(
            args,
            data,
            f"rebuilt the hot tier from the database: {count} memories; "
            + ("Redis now matches" if not any(diff.values()) else f"still differs: {diff}"),
        )
        return 0 if not any(diff.values()) else 1
    diff = store.check_hot_tier(namespace=args.namespace)
    text = (
        "Redis matches the database"
        if not any(diff.values())
        else "; ".join(f"{k}: {', '.join(v)}" for k, v in diff.items() if v)
    )
    _emit(args, diff, text)
    return 0 if not any(diff.values()) else 1


def _keys_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=["create", "list", "revoke"])
    p.add_argument("--name", help="create: a label for the key (default: default); revoke: the key of that name")
    p.add_argument("--id", dest="key_id", help="revoke: the key of that id (as list shows it)")
    p.add_argument("--key", help="revoke: the key itself")
    p.add_argument("--read-only", action="store_true", help="create: a key that may read but not change anything")
    p.add_argument("--admin", action="store_true", help="create: the key may also change the store's settings")
    p.add_argument("--expires-in", help="create: the key stops working after this long: seconds, or 90s, 45m, 12h, 30d")
    p.add_argument("--expires-at", help="create: the key stops working at this ISO 8601 time (e.g. 2027-01-01T00:00Z)")
    p.add_argument("--all", action="store_true", help="list: the keys of every namespace, not only --namespace's")


def _keys(store: MemoryStore, args: argparse.Namespace) -> int:
    from memworth.server.keys import create_key, expiry, key_info, list_keys, revoke, revoke_key

    if args.action == "create":
        if args.key_id or args.key or args.all:
            raise ValidationError(
                "--id" if args.key_id else "--key" if args.key else "--all", "goes with revoke or list"
            )
        name = "default" if args.name is None else args.name
        expires = expiry(args.expires_in, args.expires_at)
        key = create_key(store, args.namespace, name, read_only=args.read_only, expires=expires, admin=args.admin)
        info = key_info(store, key)
        assert info is not None  # just stored
        row = info.row()
        notes = ["read-only" if info.read_only else "read-write"] + (["admin"] if info.admin else [])
        notes.append(f"expires {row['expires']}" if row["expires"] else "never expires")
        _emit(
            args,
            {"key": key, **row},
            f"{key}\n(shown once; stored only as a hash; bound to namespace {args.namespace!r}; id {info.id}; "
            + ", ".join(notes) + ")",
        )  # fmt: skip
        return 0
    if args.read_only or args.expires_in or args.expires_at or args.admin:
        flag = "--read-only" if args.read_only else "--admin" if args.admin else "--expires-in"
        raise ValidationError(flag, "goes with create")
    if args.action == "list":
        rows = [k.row() for k in list_keys(store, None if args.all else args.namespace)]
        lines = [
            f"{r['id']:<13} {r['name']:<20} {r['namespace']:<16} {r['state']:<8} "
            f"{'read-only' if r['read_only'] else 'read-write':<10} created {r['created']}  "
            f"expires {r['expires'] or 'never'}" + (f"  revoked {r['revoked']}" if r["revoked"] else "")
            for r in rows
        ]
        _emit(args, rows, "\n".join(lines) if lines else "no keys")
        return 0
    if args.key:
        if args.name or args.key_id:
            raise ValidationError("--key", "give the key, its --name or its --id: one of the three")
        if not revoke_key(store, args.key):
            raise ValidationError("--key", "no such key")
        _emit(args, {"revoked": True}, "revoked")
        return 0
    if args.name is None and args.key_id is None:
        raise ValidationError("--name", "give the key to revoke: --name, --id or --key")
    info = revoke(store, args.namespace, name=args.name, key_id=args.key_id)
    _emit(args, info.row(), f"revoked API key {info.name!r} ({info.id}) of namespace {info.namespace!r}")
    return 0


def _serve_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, help="port (default 8000)")
    p.add_argument("--redis", help="Redis URL of the hot tier (default: $MEMWORTH_REDIS; none)")
    p.add_argument(
        "--workers",
        type=int,
        help="store objects requests run on, so that tenants' calls run at once (default: $MEMWORTH_WORKERS, "
        "else 4; memory:// has 1)",
    )
    p.add_argument(
        "--processes",
        type=int,
        help="worker processes that run the long calls (govern, replay, the queue) off the server's GIL, so "
        "they do not stall other tenants (default: $MEMWORTH_PROCESSES, else 1; 0 runs them on the store "
        "objects; memory:// has 0)",
    )
    p.add_argument(
        "--switch-interval",
        type=float,
        help="the server process's GIL switch interval in seconds (sys.setswitchinterval): how long a request "
        "waits at most for another tenant's Python work (default 0.0005 with more than one worker, else Python's)",
    )
    p.add_argument(
        "--log-level",
        choices=["critical", "error", "warning", "info", "debug"],
        help="server log level; at info every request is logged (access log). Default: $MEMWORTH_LOG_LEVEL or info",
    )
    config_arg(p, "server")


def _integer(field: str, value: object) -> int:
    """``value`` (from a flag, the configuration file or the environment) as an integer, else ValidationError."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    raise ValidationError(field, f"must be an integer, got {value!r}")


def _serve(store: MemoryStore, args: argparse.Namespace) -> int:
    try:
        import uvicorn

        from memworth.server import create_app
    except ImportError as exc:
        raise ValidationError("serve", f"needs the server extra: pip install 'memworth[server]' ({exc})") from None
    if not 0 < args.port < 65536:
        raise ValidationError("port", f"must be from 1 to 65535, got {args.port}")
    if args.log_level not in ("critical", "error", "warning", "info", "debug"):  # from the environment
        raise ValidationError("log_level", f"must be critical, error, warning, info or debug, got {args.log_level!r}")
    from memworth.server.pool import SWITCH_INTERVAL, default_workers
    from memworth.server.processes import default_processes

    workers = default_workers(store.backend.url) if args.workers is None else _integer("workers", args.workers)
    processes = (
        default_processes(store.backend.url) if args.processes is None else _integer("processes", args.processes)
    )
    switch = args.switch_interval
    if switch is None and workers > 1:
        switch = SWITCH_INTERVAL
    if switch is not None and not (math.isfinite(switch) and 0 < switch <= 1):
        raise ValidationError("switch_interval", f"must be seconds above 0 and at most 1, got {switch!r}")
    app = create_app(store, workers=workers, url=args.store, processes=processes, hot_tier=args.redis or None)
    if switch is not None:
        sys.setswitchinterval(switch)  # this process is the server's: its threads are requests
    print(
        f"memworth {store.backend.url.split('@')[-1]} on http://{args.host}:{args.port} (OpenAPI at /docs), "
        f"{workers} store object{'s' if workers > 1 else ''}, "
        f"{processes} worker process{'es' if processes != 1 else ''} for long calls",
        flush=True,
    )
    uvicorn.run(
        app,
        host=args.host,
        port=args.port,
        log_level=args.log_level,
        access_log=args.log_level in ("info", "debug"),
    )
    return 0
