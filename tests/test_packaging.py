"""The package as a user gets it: a wheel built with the oldest build backend the project
declares, installed into a fresh virtual environment, runs the README's first example and
is seen as typed by mypy (PEP 561: ``memworth/py.typed`` is in the wheel).

Needs the package index the machine is set up with (for the pinned setuptools, numpy and
scipy; pip's cache and the machine's local wheel index make repeats quick).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
import venv
from pathlib import Path

import numpy
import pytest
import scipy
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]


def _run(*command: str | Path, cwd: Path | None = None) -> str:
    """Run ``command`` without this test run's PYTHONPATH; its output, or a failure showing it."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MYPYPATH", "PYTHONHOME")}
    done = subprocess.run(
        [str(c) for c in command], cwd=cwd, env=env, capture_output=True, text=True, timeout=900, check=False
    )
    assert done.returncode == 0, f"{command} exited {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def _python_of_new_venv(folder: Path) -> Path:
    venv.create(folder, with_pip=True, clear=True)
    return folder / "bin" / "python"


def oldest_setuptools() -> str:
    """The lowest setuptools version ``[build-system] requires`` allows (its ``>=`` bound)."""
    with open(ROOT / "pyproject.toml", "rb") as f:
        requires = tomllib.load(f)["build-system"]["requires"]
    (setuptools,) = [Requirement(r) for r in requires if Requirement(r).name == "setuptools"]
    (lowest,) = [s.version for s in setuptools.specifier if s.operator == ">="]
    return lowest


def first_python_example(readme: str) -> str:
    """The first fenced ``python`` block of the README (a doctest session)."""
    found = re.search(r"```python\n(.*?)```", readme, flags=re.DOTALL)
    assert found is not None, "the README has no python example"
    return found.group(1)


def test_the_readme_example_is_the_tracker_session() -> None:
    example = first_python_example((ROOT / "README.md").read_text())
    assert example.startswith(">>> from memworth import Tracker") and example.count(">>>") >= 5


@pytest.mark.slow  # about 45 s: two virtual environments, four installs, one mypy run
def test_a_wheel_from_the_oldest_declared_backend_installs_types_and_runs_the_readme(tmp_path: Path) -> None:
    # The source as a clean copy: an in-tree build would leave build/ and *.egg-info behind.
    source = tmp_path / "source"
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "*.pyc")
    shutil.copytree(ROOT / "src", source / "src", ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)

    builder = _python_of_new_venv(tmp_path / "build-env")
    _run(builder, "-m", "pip", "install", "-q", f"setuptools=={oldest_setuptools()}")
    _run(builder, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", tmp_path / "dist", source)
    (wheel,) = (tmp_path / "dist").glob("memworth-*.whl")

    user = _python_of_new_venv(tmp_path / "user-env")
    _run(user, "-m", "pip", "install", "-q", "--no-deps", wheel)
    _run(user, "-m", "pip", "install", "-q", f"numpy=={numpy.__version__}", f"scipy=={scipy.__version__}")
    _run(user, "-m", "pip", "check")  # the wheel's declared dependencies are met

    example = tmp_path / "example.txt"
    example.write_text(first_python_example((ROOT / "README.md").read_text()))
    script = (
        "import doctest, importlib.resources, memworth, sys\n"
        "print(memworth.__file__)\n"
        "print(importlib.resources.files('memworth').joinpath('py.typed').is_file())\n"
        f"result = doctest.testfile({str(example)!r}, module_relative=False)\n"
        "print(result.attempted, result.failed)\n"
    )
    output = _run(user, "-c", script, cwd=tmp_path)
    where, typed, counts = output.strip().splitlines()[-3:]
    assert Path(where).is_relative_to(tmp_path / "user-env")  # the installed wheel, not this checkout
    assert typed == "True"
    attempted, failed = map(int, counts.split())
    assert attempted >= 5 and failed == 0, output

    # PEP 561: mypy treats the installed package as typed (without py.typed it skips it as
    # "missing library stubs or py.typed marker" and Tracker would be Any, so no error).
    check = "from memworth import Tracker\nt: int = Tracker()\n"
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--python-executable", str(user), "--no-incremental", "-c", check],
        cwd=tmp_path,
        env={k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MYPYPATH")},
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert "py.typed" not in done.stdout, done.stdout
    assert 'Incompatible types in assignment (expression has type "Tracker", variable has type "int")' in done.stdout
