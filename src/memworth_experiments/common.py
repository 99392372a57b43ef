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


@dataclass
class Row:
    """One reported number: ours beside the paper's."""

    name: str
    metric: str
    paper: float | None
    ours: float
    std: float
    tolerance: float | None = None
    note: str = ""

    @property
    def ok(self) -> bool | None:
        if self.paper is None or self.tolerance is None:
            return None
        return abs(self.ours - self.paper) <= self.tolerance + 1e-12

    def as_dict(self) -> dict[str, Any]:
        return asdict(self) | {"ok": self.ok}


@dataclass
class Result:
    """An experiment's output: reported rows, raw per-seed records, and how to draw it."""

    experiment: str
    rows: list[Row]
    raw: list[dict[str, Any]]
    settings: dict[str, Any]
    notes: list[str] = field(default_factory=list)


def mean_std(values: Sequence[float]) -> tuple[float, float]:
    arr = np.asarray(values, dtype=float)
    return float(arr.mean()), float(arr.std(ddof=1)) if arr.size > 1 else 0.0


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
    if isinstance(x, (np.floating, np.integer)):
        return x.item()
    if isinstance(x, float) and math.isnan(x):
        return None
    raise TypeError(f"not JSON serialisable: {type(x).__name__}")


def format_table(result: Result) -> str:
    """Our numbers beside the paper's, one line per row."""
    head = f"{'name':<44} {'metric':<16} {'paper':>8} {'ours':>8} {'std':>7} {'tol':>6}  check"
    lines = [head, "-" * len(head)]
    for r in result.rows:
        paper = "-" if r.paper is None else f"{r.paper:8.3f}"
        tol = "-" if r.tolerance is None else f"{r.tolerance:6.3f}"
        check = {True: "ok", False: "MISS", None: ""}[r.ok]
        lines.append(f"{r.name:<44} {r.metric:<16} {paper:>8} {r.ours:8.3f} {r.std:7.3f} {tol:>6}  {check}")
        if r.note:
            lines.append(f"    ({r.note})")
    return "\n".join(lines)


def read_raw(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))
