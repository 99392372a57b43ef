"""Start-up of the ``memworth`` command and of ``import memworth``, each in a fresh process.

Each contender is one process, started and waited for: its wall time includes the
interpreter's own start-up, so every figure is set beside a bare ``python -c pass``
started the same way, taking turns: what memworth adds. The processes get this process's
environment without ``PYTHONDONTWRITEBYTECODE``, so (as for an installed package) the
untimed warm-up run leaves compiled bytecode for the timed ones. The store command lists
a SQLite store of 100 memories written with the hashing encoder: it needs no model (a
command that embeds adds the model's load, ``memworth bench --only embed``). The issue's
targets: ``--version`` and ``--help`` under 0.3 s, a store command under 0.8 s.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from memworth_bench.common import Section, Settings, Task, interleave, mid, ratio, section, spread

NAME = "startup"
TITLE = "Start-up: the memworth command and import memworth"

TARGETS = {"memworth --version": 0.3, "memworth --help": 0.3, "memworth list (store of 100)": 0.8}
"""Seconds the issue allows, by contender."""


def _command() -> list[str]:
    """The ``memworth`` script beside this interpreter, as a user runs it, else ``python -m memworth.cli``."""
    script = Path(sys.executable).with_name("memworth")
    return [str(script)] if script.exists() else [sys.executable, "-m", "memworth.cli"]


def _timer(argv: Sequence[str], env: dict[str, str]) -> Callable[[], float]:
    def run() -> float:
        start = time.perf_counter()
        subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)
        return time.perf_counter() - start

    return run


def _store(workdir: Path) -> str:
    from memworth import HashingEncoder, MemoryStore

    path = workdir / "startup.db"
    path.unlink(missing_ok=True)
    url = f"sqlite:///{path}"
    with MemoryStore.open(url, encoder=HashingEncoder()) as store:
        store.add_many([{"id": f"m{i}", "text": f"memory number {i} about topic {i % 7}"} for i in range(100)])
    return url


def measure(repeats: int, workdir: Path) -> Section:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    memworth = _command()
    argvs = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "python -c 'import memworth'": [sys.executable, "-c", "import memworth"],
        "memworth --version": [*memworth, "--version"],
        "memworth --help": [*memworth, "--help"],
        "memworth list (store of 100)": [*memworth, "list", "--store", _store(workdir)],
    }
    secs = interleave({name: _timer(argv, env) for name, argv in argvs.items()}, repeats)
    bare = secs["python -c pass"]
    ms = lambda x: f"{x * 1000:.0f}"  # noqa: E731
    rows = []
    for name, values in secs.items():
        target = TARGETS.get(name)
        rows.append([name, mid(spread(values), ms), "" if target is None else f"< {target * 1000:.0f}"])
    return section(
        "startup",
        f"Start-up, {repeats} runs each, taking turns",
        ["process", "wall time, ms: median (min-max)", "target, ms"],
        rows,
        ratios=[ratio(f"{name} / python -c pass", secs[name], bare, "wall time") for name in argvs if name in TARGETS],
        notes=[f"the command: {' '.join(memworth)}"],
        data={"seconds": {name: spread(values) for name, values in secs.items()}, "targets_s": TARGETS},
    )


def plan(settings: Settings) -> list[Task]:
    repeats = settings.pick(10, 20, smoke=2)
    return [Task("startup", f"Start-up, {repeats} runs each", lambda: measure(repeats, settings.workdir))]
