"""The upgrade world's machinery: its tasks and recipes, the two environments, the worker, the outcome table.

* :func:`load_tasks` reads ``worlds/upgrade_code/*.toml``: programming tasks (a signature,
  phrasings of the request, a test that draws fresh inputs from a seed) and the recipes
  that answer them (function bodies).
* :func:`build_env` makes a virtual environment with pinned NumPy and pandas from PyPI
  wheels (``pip download --only-binary=:all:`` then an offline install from those wheels),
  cached under ``~/.cache/memworth/upgrade-envs/<name>``, and says how much it downloaded.
* :class:`Worker` is one persistent process inside an environment
  (:mod:`memworth_experiments.upgrade_worker`): a recipe and its test run there with a
  time limit; a hang or a crash is an ordinary failure and the worker is restarted.
* :func:`outcome_table` runs every recipe against its task's test on every input seed in
  every environment: the only source of outcomes (episodes read it) and of ground truth.
"""

from __future__ import annotations

import hashlib
import json
import os
import select
import shutil
import subprocess
import time
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from memworth import ValidationError
from memworth.errors import UnavailableError

WORKER = Path(__file__).with_name("upgrade_worker.py")
ERAS = ("old", "new", "buggy")
"""How the author wrote a recipe: an idiom of the old libraries, one of both eras, or a bug
in both. Labels for reading the results only; the experiment never uses them."""


@dataclass(frozen=True)
class Recipe:
    """One memory: a function answering a task, written in some era's idiom."""

    id: str
    task: str
    era: str
    code: str
    """The whole function: the task's signature and the recipe's body."""
    text: str
    """What the store holds and embeds: the task's title, then the code."""


@dataclass(frozen=True)
class Task:
    """A programming task: the function to write, phrasings of the request, and its test."""

    id: str
    title: str
    name: str
    signature: str
    requests: tuple[str, ...]
    test: str
    recipes: tuple[Recipe, ...] = field(default=())


def _indent(body: str) -> str:
    return "".join(f"    {line}" if line.strip() else line for line in body.strip("\n").splitlines(keepends=True))


def load_tasks() -> list[Task]:
    """Every task of ``worlds/upgrade_code/*.toml`` with its recipes, in file order (files sorted)."""
    folder = resources.files("memworth_experiments").joinpath("worlds", "upgrade_code")
    tasks: list[Task] = []
    for entry in sorted((e for e in folder.iterdir() if e.name.endswith(".toml")), key=lambda e: e.name):
        data = tomllib.loads(entry.read_text())
        for t in data["tasks"]:
            where = f"{entry.name}: task {t.get('id')!r}"
            name = t["signature"].split("(", 1)[0]
            recipes = []
            for r in t["recipes"]:
                if r["era"] not in ERAS:
                    raise ValidationError("era", f"{where}: recipe {r['id']!r} has era {r['era']!r}, not one of {ERAS}")
                code = f"def {t['signature']}:\n{_indent(r['code'])}\n"
                recipes.append(Recipe(f"{t['id']}/{r['id']}", t["id"], r["era"], code, f"{t['title']}\n{code}"))
            if len(t["requests"]) < 2 or not recipes:
                raise ValidationError("tasks", f"{where}: needs at least two requests and one recipe")
            tasks.append(
                Task(t["id"], t["title"], name, t["signature"], tuple(t["requests"]), t["test"], tuple(recipes))
            )
    ids = [r.id for t in tasks for r in t.recipes] + [t.id for t in tasks]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise ValidationError("tasks", f"ids used twice: {', '.join(dupes)}")
    return tasks


def world_digest(tasks: list[Task]) -> str:
    """A hash of every task's test and every recipe: a cached outcome table is valid for one digest."""
    h = hashlib.sha256()
    for t in tasks:
        h.update(t.test.encode())
        for r in t.recipes:
            h.update(r.id.encode() + r.code.encode())
    return h.hexdigest()[:16]


def cache_root() -> Path:
    """Where environments and outcome tables are kept: ``$MEMWORTH_CACHE`` or ``~/.cache/memworth``."""
    return Path(os.environ.get("MEMWORTH_CACHE", Path.home() / ".cache" / "memworth")) / "upgrade-envs"


@dataclass(frozen=True)
class Env:
    """A built environment: its folder, its interpreter, what it holds and what building it cost."""

    name: str
    path: Path
    python: Path
    versions: dict[str, str]
    wheel_bytes: int
    built_now: bool
    seconds: float


def env_name(pins: dict[str, str]) -> str:
    """The folder name of an environment: ``numpy-1.26.4_pandas-1.5.3``."""
    return "_".join(f"{p}-{v}" for p, v in sorted(pins.items()))


def _pip(python: Path, *args: str) -> None:
    done = subprocess.run(
        [str(python), "-m", "pip", "--disable-pip-version-check", "-q", *args], capture_output=True, text=True
    )
    if done.returncode:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise UnavailableError(f"pip {args[0]} failed for the upgrade world's environment: {' | '.join(tail)}")


def build_env(pins: dict[str, str], interpreter: str, root: Path | None = None) -> Env:
    """A virtual environment holding exactly ``pins`` (package -> version), from PyPI wheels only; cached.

    The wheels are downloaded first (``pip download --only-binary=:all:``, their size is
    the download reported), then installed offline from that folder. A finished
    environment has a ``memworth-env.json``; one without it is rebuilt from scratch.
    Raises :class:`memworth.errors.UnavailableError` when the interpreter is missing or
    pip fails (no network, no wheel for this platform): the experiment cannot run then.
    """
    root = cache_root() if root is None else root
    path = root / env_name(pins)
    marker = path / "memworth-env.json"
    python = path / "bin" / "python"
    if marker.exists() and python.exists():
        info = json.loads(marker.read_text())
        return Env(path.name, path, python, info["versions"], int(info["wheel_bytes"]), False, 0.0)
    found = shutil.which(interpreter)
    if found is None:
        raise UnavailableError(f"the upgrade world needs {interpreter} to build its environments; it is not on PATH")
    started = time.perf_counter()
    shutil.rmtree(path, ignore_errors=True)
    root.mkdir(parents=True, exist_ok=True)
    made = subprocess.run([found, "-m", "venv", str(path)], capture_output=True, text=True)
    if made.returncode:
        raise UnavailableError(f"{interpreter} -m venv {path} failed: {made.stderr.strip()[-300:]}")
    wheels = path / "wheels"
    specs = [f"{p}=={v}" for p, v in sorted(pins.items())]
    _pip(python, "download", "--only-binary=:all:", "--dest", str(wheels), *specs)
    _pip(python, "install", "--no-index", "--find-links", str(wheels), *specs)
    wheel_bytes = sum(f.stat().st_size for f in wheels.iterdir())
    worker = Worker(python)
    versions = worker.versions
    worker.close()
    for package, version in pins.items():
        if versions.get(package) != version:
            raise UnavailableError(f"environment {path.name} imports {package} {versions.get(package)}, not {version}")
    marker.write_text(json.dumps({"versions": versions, "wheel_bytes": wheel_bytes, "pins": pins}, indent=1))
    return Env(path.name, path, python, versions, wheel_bytes, True, time.perf_counter() - started)


class Worker:
    """A persistent process running recipes inside one environment, with a time limit per call.

    A call that does not answer within ``timeout`` seconds, or a worker that dies, is an
    ordinary failure (``"Timeout: ..."`` or ``"WorkerCrash: ..."``); the worker is then
    killed and started again (``restarts`` counts it). Use as a context manager or call
    :meth:`close`.
    """

    def __init__(self, python: Path, timeout: float = 10.0) -> None:
        self.python = python
        self.timeout = timeout
        self.restarts = 0
        self.calls = 0
        self.versions: dict[str, str] = {}
        self._proc: subprocess.Popen[str] | None = None
        self._start()

    def _start(self) -> None:
        self._proc = subprocess.Popen(
            [str(self.python), "-I", str(WORKER)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            # one thread per worker: the recipes are tiny, and the machine is shared
            env=os.environ | {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"},
            bufsize=1,
        )
        line = self._read(60.0)
        if not line:
            self._kill()
            raise UnavailableError(f"the recipe worker in {self.python.parent.parent} did not start")
        ready = json.loads(line)
        self.versions = {"numpy": ready["numpy"], "pandas": ready["pandas"], "python": ready["python"]}

    def _read(self, timeout: float) -> str | None:
        """The worker's next line; None if it said nothing within ``timeout`` seconds."""
        proc = self._proc
        assert proc is not None and proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], timeout)
        if not ready:
            return None
        return proc.stdout.readline()  # "" at end of file: the worker died

    def _kill(self) -> None:
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait()
            self._release()

    def _release(self) -> None:
        """Close the pipes of the (ended) worker."""
        assert self._proc is not None
        for pipe in (self._proc.stdin, self._proc.stdout):
            if pipe is not None:
                try:
                    pipe.close()
                except OSError:  # the worker died with data in the pipe: nothing to flush to
                    pass
        self._proc = None

    def run(self, code: str, name: str, test: str, seed: int) -> tuple[bool, str]:
        """Run recipe ``code`` (a function called ``name``) against ``test`` on input seed ``seed``."""
        proc = self._proc
        assert proc is not None and proc.stdin is not None
        self.calls += 1
        request = json.dumps({"code": code, "name": name, "test": test, "seed": seed})
        try:
            proc.stdin.write(request + "\n")
            proc.stdin.flush()
            line = self._read(self.timeout)
        except OSError:  # a broken pipe: the worker died
            line = ""
        if not line:
            crashed = line == ""
            self._kill()
            self.restarts += 1
            self._start()
            if crashed:
                return False, "WorkerCrash: the recipe ended the worker process"
            return False, f"Timeout: no answer within {self.timeout:g} s"
        answer = json.loads(line)
        return bool(answer["ok"]), str(answer.get("error", ""))

    def close(self) -> None:
        """End the worker: close its input, wait for it (killing it after 5 s), close its pipes."""
        if self._proc is None:
            return
        if self._proc.stdin is not None:
            try:
                self._proc.stdin.close()
            except OSError:
                pass
        try:
            self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._release()

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass
class OutcomeTable:
    """Every recipe's outcome on every input seed in every environment, from real runs."""

    envs: dict[str, dict[str, str]]
    """Environment role (``before``, ``after``) -> the versions it imports."""
    seeds: int
    outcomes: dict[str, dict[str, list[list[Any]]]]
    """Recipe id -> environment role -> per input seed ``[ok, error]``."""
    seconds: float = 0.0
    calls: int = 0
    restarts: int = 0
    cached: bool = False

    def ok(self, recipe: str, env: str, seed: int) -> bool:
        return bool(self.outcomes[recipe][env][seed][0])

    def passes(self, recipe: str, env: str) -> bool:
        """Passed its task's test on every input seed in ``env``."""
        return all(ok for ok, _ in self.outcomes[recipe][env])

    def first_error(self, recipe: str, env: str) -> str:
        return next((err for ok, err in self.outcomes[recipe][env] if not ok), "")


def outcome_table(tasks: list[Task], envs: dict[str, Env], seeds: int, timeout: float = 10.0) -> OutcomeTable:
    """Run every recipe on input seeds ``0..seeds-1`` in every environment.

    Cached on disk under a key made of the recipes, the tests, the worker's code, the
    environments' versions, ``seeds`` and ``timeout``: change any and it runs again.
    """
    key = hashlib.sha256(
        json.dumps(
            [world_digest(tasks), WORKER.read_text(), {r: e.versions for r, e in envs.items()}, seeds, timeout]
        ).encode()
    ).hexdigest()[:16]
    path = cache_root() / f"outcomes-{key}.json"
    if path.exists():
        data = json.loads(path.read_text())
        return OutcomeTable(
            data["envs"], data["seeds"], data["outcomes"], data["seconds"], data["calls"], data["restarts"], True
        )
    started = time.perf_counter()
    outcomes: dict[str, dict[str, list[list[Any]]]] = {r.id: {} for t in tasks for r in t.recipes}
    calls = restarts = 0
    for role, env in envs.items():
        with Worker(env.python, timeout) as worker:
            for t in tasks:
                for r in t.recipes:
                    outcomes[r.id][role] = [list(worker.run(r.code, t.name, t.test, s)) for s in range(seeds)]
            calls += worker.calls
            restarts += worker.restarts
    table = OutcomeTable(
        {r: e.versions for r, e in envs.items()}, seeds, outcomes, time.perf_counter() - started, calls, restarts
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(table.__dict__ | {"cached": False}))
    tmp.replace(path)
    return table
