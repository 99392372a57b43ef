"""What every experiment shares: configs, Spearman rho, result rows, output files."""

from __future__ import annotations

import csv
import json
import math
import tomllib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from memworth import ValidationError

PAPER_EXPERIMENTS = ("exp1", "exp2", "exp3", "exp4", "exp5")
"""The paper's five experiments, in its order."""


def _beyond_the_paper() -> tuple[str, ...]:
    """Experiments that go past the paper: every other ``configs/<name>.toml``, sorted."""
    configs = resources.files("memworth_experiments").joinpath("configs")
    names = (entry.name.removesuffix(".toml") for entry in configs.iterdir() if entry.name.endswith(".toml"))
    return tuple(sorted(n for n in names if n not in PAPER_EXPERIMENTS))


BEYOND_EXPERIMENTS = _beyond_the_paper()
EXPERIMENTS = PAPER_EXPERIMENTS + BEYOND_EXPERIMENTS


def load_config(name: str) -> dict[str, Any]:
    """The settings of experiment ``name`` from ``configs/<name>.toml``."""
    if name not in EXPERIMENTS:
        raise ValidationError("experiment", f"unknown experiment {name!r}; choose one of {', '.join(EXPERIMENTS)}")
    text = resources.files("memworth_experiments").joinpath("configs", f"{name}.toml").read_text()
    return tomllib.loads(text) | {"_text": text}


def load_world(name: str) -> dict[str, Any]:
    """An agent world (tasks and memories) from ``worlds/<name>.toml``, not an experiment of its own."""
    try:
        text = resources.files("memworth_experiments").joinpath("worlds", f"{name}.toml").read_text()
    except FileNotFoundError:
        raise ValidationError("world", f"unknown agent world {name!r}") from None
    return tomllib.loads(text) | {"_text": text}


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman rho with average ranks for ties; 0.0 when either side is constant.

    A constant estimate (the no-update baseline) has no ranking at all, so its rank
    correlation is undefined; the paper reports it as 0.00 and so do we.
    """
    from scipy.stats import rankdata

    rx, ry = rankdata(x), rankdata(y)
    if np.ptp(rx) == 0 or np.ptp(ry) == 0:
        return 0.0
    return float(np.corrcoef(rx, ry)[0, 1])


STATUSES = (
    "matched",
    "matched after documented tuning",
    "contradicted by the paper itself",
    "missed",
    "not checked",
)
"""What a check of a paper number can say (``Row.status``); "not checked" is a number the
paper prints that we report without a tolerance, with the reason in the row's note."""


@dataclass
class Row:
    """One reported number: ours beside the paper's, and how the two are compared.

    ``paper`` is the paper's printed value; a number the paper prints as a range
    ("0.895-0.899") goes in ``paper_range`` instead, as printed, and ours matches when it
    lies in the range widened by ``tolerance`` on each side. ``source`` says where the
    paper prints it; ``tuning`` names a setting of ours chosen to match this number;
    ``contradiction`` says why the paper's own definitions rule its number out (such a
    row is reported, never checked). ``known_miss`` gives the reason for a miss we expect
    and document (the row still says "missed"; ``--check`` does not fail on it).
    ``variant`` names a setting other than the reproduction's own (a tuned setting at a
    neutral value): such rows measure the tuning and are counted apart in the summary.

    Examples
    --------
    >>> Row("uniform", "rho@10000", 0.89, 0.892, 0.02, 0.03, source="Table 1").compares
    '|ours - 0.89| <= 0.03'
    >>> r = Row("softmax", "rho@10000", None, 0.886, 0.02, 0.005, paper_range=(0.895, 0.899))
    >>> r.compares, r.ok, r.status
    ('ours in [0.895, 0.899] widened by 0.005 each side', False, 'missed')
    >>> Row("x", "m", 0.5, 0.51, 0.0, 0.03, tuning="coupling 0.12 chosen to match").status
    'matched after documented tuning'
    """

    name: str
    metric: str
    paper: float | None
    ours: float
    std: float
    tolerance: float | None = None
    note: str = ""
    paper_range: tuple[float, float] | None = None
    source: str = ""
    tuning: str = ""
    contradiction: str = ""
    known_miss: str = ""
    variant: str = ""

    @property
    def has_paper_number(self) -> bool:
        return self.paper is not None or self.paper_range is not None

    @property
    def ok(self) -> bool | None:
        if self.contradiction or self.tolerance is None or not self.has_paper_number:
            return None
        if self.paper_range is not None:
            low, high = self.paper_range
        elif self.paper is not None:
            low = high = self.paper
        else:
            return None
        return bool(low - self.tolerance - 1e-12 <= self.ours <= high + self.tolerance + 1e-12)

    @property
    def compares(self) -> str:
        """The check in words: what ours is compared with, and how."""
        if self.contradiction:
            return "not compared: the paper's definitions rule its number out"
        if not self.has_paper_number:
            return "-"
        if self.tolerance is None:
            return "reported, no tolerance"
        if self.paper_range is not None:
            low, high = self.paper_range
            return f"ours in [{low:g}, {high:g}] widened by {self.tolerance:g} each side"
        return f"|ours - {self.paper:g}| <= {self.tolerance:g}"

    @property
    def status(self) -> str | None:
        """One of :data:`STATUSES` for a paper number; None for a row without one."""
        if self.contradiction:
            return "contradicted by the paper itself"
        if not self.has_paper_number:
            return None
        ok = self.ok
        if ok is None:
            return "not checked"
        if not ok:
            return "missed"
        return "matched after documented tuning" if self.tuning else "matched"

    @property
    def paper_text(self) -> str:
        """The paper's number as printed: a value, a range, or '-'."""
        if self.paper_range is not None:
            return f"{self.paper_range[0]:g}-{self.paper_range[1]:g}"
        return "-" if self.paper is None else f"{self.paper:g}"

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        if self.paper_range is not None:
            d["paper_range"] = list(self.paper_range)
        return d | {"ok": self.ok, "status": self.status, "compares": self.compares}


def unexpected_misses(rows: Sequence[Row]) -> list[Row]:
    """Rows that miss the paper's number without a documented reason (``--check`` fails on these)."""
    return [r for r in rows if r.ok is False and not r.known_miss]


@dataclass
class Result:
    """An experiment's output: reported rows, raw per-seed records, and how to draw it."""

    experiment: str
    rows: list[Row]
    raw: list[dict[str, Any]]
    settings: dict[str, Any]
    notes: list[str] = field(default_factory=list)


@dataclass
class GuardWatch:
    """What the holdout guard did over one governed run (issue 14: report it on every world).

    Feed it every :class:`memworth.store.GovernanceReport` with :meth:`see`. ``running``: the
    store has a holdout share, so the guard can fire at all (without one, govern's report
    carries no reading); ``first``: the episode of the first govern at which it fired (0:
    never); ``rollbacks``: what it proposed to roll back then, as ``memory:action`` (the
    action the rollback undoes, from the proposal's reason); ``held``: governs at which it
    stood fired, so that nothing was applied.

    Examples
    --------
    >>> w = GuardWatch()
    >>> w.row()
    {'guard_running': 0, 'guard_fired_at': 0, 'guard_held': 0, 'guard_rollbacks': ''}
    """

    running: bool = False
    first: int = 0
    rollbacks: list[str] = field(default_factory=list)
    held: int = 0

    def see(self, episode: int, report: Any) -> None:
        """Take the report of the govern at ``episode``."""
        guard = report.guard
        if guard is None:
            return
        self.running = True
        if not guard.fired:
            return
        self.held += 1
        if not self.first:
            self.first = episode
            self.rollbacks = [
                f"{p.memory_id}:{_undone(p.reason)}" for p in report.proposals if p.action == "rollback"
            ]

    def row(self) -> dict[str, Any]:
        """The raw CSV's columns."""
        return {
            "guard_running": int(self.running),
            "guard_fired_at": self.first,
            "guard_held": self.held,
            "guard_rollbacks": ";".join(self.rollbacks),
        }


def _undone(reason: str) -> str:
    """The action a rollback proposal undoes, from its reason (``... undoes audit entry 12 (suppress)``)."""
    head, sep, tail = reason.rpartition("(")
    return tail.rstrip(")") if sep and "undoes audit entry" in head else "?"


def guard_note(label: str, rows: Sequence[dict[str, Any]]) -> str:
    """One line on the holdout guard over a set of runs (``rows`` carry :meth:`GuardWatch.row`'s columns).

    Examples
    --------
    >>> guard_note("agent", [{"seed": 0, "guard_running": 0, "guard_fired_at": 0, "guard_held": 0,
    ...                       "guard_rollbacks": ""}])
    'agent: the holdout guard did not run (no holdout share: it needs one to compare against)'
    >>> guard_note("agent", [{"seed": 3, "guard_running": 1, "guard_fired_at": 275, "guard_held": 2,
    ...                       "guard_rollbacks": "m1:suppress"}])
    'agent: the holdout guard fired in 1 of 1 seeds: seed 3 at episode 275 (held 2 governs; proposed rolling back m1:suppress)'
    """
    running = [r for r in rows if int(r.get("guard_running", 0) or 0)]
    if not running:
        return f"{label}: the holdout guard did not run (no holdout share: it needs one to compare against)"
    fired = [r for r in running if int(r.get("guard_fired_at", 0) or 0)]
    text = f"{label}: the holdout guard fired in {len(fired)} of {len(running)} seeds"
    parts = []
    for r in fired:
        back = str(r.get("guard_rollbacks") or "")
        what = f"proposed rolling back {back.replace(';', ', ')}" if back else "nothing to roll back"
        parts.append(f"seed {r['seed']} at episode {r['guard_fired_at']} (held {r['guard_held']} governs; {what})")
    return text + (": " + "; ".join(parts) if parts else "")


def mean_std(values: Sequence[float]) -> tuple[float, float]:
    arr = np.asarray(values, dtype=float)
    return float(arr.mean()), float(arr.std(ddof=1)) if arr.size > 1 else 0.0


def tolerance_at(cfg: dict[str, Any], episode: int, paper_episode: int) -> float | None:
    """The run's tolerance when ``episode`` is the one the paper reports, else None.

    A run cut short (``--episodes 2000``) is not compared with numbers the paper gives
    at episode 10,000; its rows are reported without a check.
    """
    return cfg["_tolerance"] if episode == paper_episode else None


def paired_interval(differences: Sequence[float], level: float = 0.95) -> tuple[float, float, float]:
    """Mean of paired per-seed differences and its t interval: ``(mean, low, high)``.

    Examples
    --------
    >>> m, low, high = paired_interval([0.01, 0.02, 0.03])
    >>> round(m, 3), round(low, 3), round(high, 3)
    (0.02, -0.005, 0.045)
    """
    from scipy.stats import t

    arr = np.asarray(differences, dtype=float)
    if arr.size < 2:
        raise ValidationError("differences", f"a paired interval needs at least 2 seeds, got {arr.size}")
    mean = float(arr.mean())
    half = float(t.ppf(0.5 + level / 2, arr.size - 1) * arr.std(ddof=1) / np.sqrt(arr.size))
    return mean, mean - half, mean + half


def progress(iterable: Iterable[Any], total: int, desc: str, enabled: bool) -> Iterator[Any]:
    """A tqdm progress bar on stderr (silent when ``enabled`` is false)."""
    from tqdm import tqdm

    yield from tqdm(iterable, total=total, desc=desc, disable=not enabled, leave=False, unit="seed")


def write_outputs(result: Result, out: Path, config_text: str) -> dict[str, Path]:
    """Write results.json, raw.csv and config.toml into ``out``; return their paths."""
    out.mkdir(parents=True, exist_ok=True)
    paths = {"results": out / "results.json", "raw": out / "raw.csv", "config": out / "config.toml"}
    payload = {
        "experiment": result.experiment,
        "settings": result.settings,
        "rows": [r.as_dict() for r in result.rows],
        "notes": result.notes,
    }
    paths["results"].write_text(json.dumps(payload, indent=2, default=_jsonable) + "\n")
    if result.raw:
        fields = list(result.raw[0])
        with paths["raw"].open("w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=fields)
            writer.writeheader()
            writer.writerows(result.raw)
    paths["config"].write_text(config_text)
    return paths


def _jsonable(x: Any) -> Any:
    if isinstance(x, (np.floating, np.integer, np.bool_)):
        return x.item()
    if isinstance(x, float) and math.isnan(x):
        return None
    raise TypeError(f"not JSON serialisable: {type(x).__name__}")


def format_table(result: Result) -> str:
    """Our numbers beside the paper's, one line per row, with the check's status."""
    head = f"{'name':<44} {'metric':<16} {'paper':>11} {'ours':>8} {'std':>7} {'tol':>6}  status"
    lines = [head, "-" * len(head)]
    for r in result.rows:
        tol = "-" if r.tolerance is None else f"{r.tolerance:6.3f}"
        check = r.status or {True: "ok", False: "MISS", None: ""}[r.ok]
        lines.append(f"{r.name:<44} {r.metric:<16} {r.paper_text:>11} {r.ours:8.3f} {r.std:7.3f} {tol:>6}  {check}")
        extra = "; ".join(
            x
            for x in (
                r.note,
                f"source: {r.source}" if r.source else "",
                f"check: {r.compares}" if r.has_paper_number else "",
                f"tuned: {r.tuning}" if r.tuning else "",
                f"contradiction: {r.contradiction}" if r.contradiction else "",
                f"documented miss: {r.known_miss}" if r.known_miss and r.ok is False else "",
            )
            if x
        )
        if extra:
            lines.append(f"    ({extra})")
    return "\n".join(lines)


def summary_table(results: Sequence[Result]) -> str:
    """Every paper number of ``results`` in one table, with its status and its check.

    Rows of a variant setting (``Row.variant``) follow in a section of their own and are
    not in the counts: they measure a tuning, not the reproduction.
    """
    head = f"{'exp':<5} {'name':<40} {'metric':<14} {'paper':>11} {'ours':>8}  {'status':<33} source / check"
    sections: dict[bool, list[str]] = {False: [], True: []}
    counts = dict.fromkeys(STATUSES, 0)
    for result in results:
        for r in result.rows:
            if r.status is None:
                continue
            if not r.variant:
                counts[r.status] += 1
            lines = sections[bool(r.variant)]
            lines.append(
                f"{result.experiment:<5} {r.name[:40]:<40} {r.metric[:14]:<14} {r.paper_text:>11} {r.ours:8.3f}  "
                f"{r.status:<33} {r.source or '?'}; {r.compares}"
            )
            why = r.contradiction or r.tuning or (r.known_miss if r.ok is False and not r.variant else "")
            if why:
                lines.append(f"{'':<5} {'':<40} {'':<14} {'':>11} {'':>8}  {'':<33} ({why})")
    out = [head, "-" * len(head), *sections[False]]
    out.append(", ".join(f"{n} {s}" for s, n in counts.items()))
    if sections[True]:
        out += ["", "Tuned settings at a neutral value (not counted above):", head, "-" * len(head), *sections[True]]
    return "\n".join(out)


def write_summary(results: Sequence[Result], path: Path) -> None:
    """Every paper number of ``results`` with its status and check, as JSON (``summary.json``)."""
    rows = [
        {"experiment": result.experiment, **r.as_dict()}
        for result in results
        for r in result.rows
        if r.status is not None
    ]
    counts = {s: sum(1 for r in rows if r["status"] == s and not r["variant"]) for s in STATUSES}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"counts": counts, "rows": rows}, indent=2, default=_jsonable) + "\n")


def read_raw(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))
