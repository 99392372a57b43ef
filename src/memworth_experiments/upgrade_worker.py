"""The recipe worker of the upgrade world: runs inside a built environment, never imported by memworth.

Started once per environment as ``<venv>/bin/python upgrade_worker.py`` (standard library,
NumPy and pandas only), it answers one JSON request per line on stdin with one JSON line
on the stdout it was started with:

* request ``{"code": ..., "name": ..., "test": ..., "seed": ...}``: define the recipe
  (``code``, a function called ``name``) and the task's test (``test``, a function
  ``check(solve, rng)``) in two fresh namespaces, then call ``check(recipe, rng)`` with
  ``rng = numpy.random.default_rng(seed)``: the test draws its own inputs and raises if the
  answer is wrong;
* answer ``{"ok": true}`` or ``{"ok": false, "error": "<ExceptionType>: <message>"}``.

Its address space is capped at 4 GiB, so a recipe that allocates too much fails with a
MemoryError instead of taking the machine down. The first line it writes is ``{"ready": true, "numpy": ..., "pandas": ..., "python": ...}``.
Whatever a recipe prints goes to /dev/null (the protocol keeps its own copy of stdout);
warnings are silenced (a deprecation warning is not a failure); pandas options a recipe
sets are set back after each call. A recipe that hangs or kills the process is the parent's
business (:class:`memworth_experiments.upgrade_env.Worker` kills and restarts it).
"""

from __future__ import annotations

import io
import json
import os
import sys
import warnings

MEMORY_LIMIT = 4 * 1024**3
"""Bytes of address space the worker may use: a recipe that asks for more gets a MemoryError."""


def main() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    sink = os.open(os.devnull, os.O_WRONLY)
    os.dup2(sink, 1)
    sys.stdout = open(os.devnull, "w")
    import numpy as np
    import pandas as pd  # type: ignore[import-untyped,unused-ignore]
    from pandas._config import config as pd_config  # type: ignore[import-untyped,unused-ignore]

    options = {}
    for key in list(pd_config._registered_options):
        try:
            options[key] = pd.get_option(key)
        except Exception:  # an option that cannot be read back is not one a recipe could change either
            continue
    ready = {"ready": True, "numpy": np.__version__, "pandas": pd.__version__, "python": sys.version.split()[0]}
    protocol.write(json.dumps(ready) + "\n")
    for line in sys.stdin:
        request = json.loads(line)
        answer: dict[str, object] = {"ok": True}
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                tests: dict[str, object] = {"np": np, "pd": pd, "io": io}
                recipe: dict[str, object] = {"np": np, "pd": pd, "io": io}
                exec(compile(request["test"], "<test>", "exec"), tests)
                exec(compile(request["code"], "<recipe>", "exec"), recipe)
                tests["check"](recipe[request["name"]], np.random.default_rng(request["seed"]))  # type: ignore[operator]
        except BaseException as exc:  # a recipe's SystemExit or KeyboardInterrupt is its failure too
            answer = {"ok": False, "error": f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"}
        finally:
            _restore(pd, options)
        protocol.write(json.dumps(answer) + "\n")


def _restore(pd: object, options: dict[str, object]) -> None:
    """Set back every pandas option a recipe changed (``reset_option("all")`` would import matplotlib)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for key, value in options.items():
            try:
                if pd.get_option(key) != value:  # type: ignore[attr-defined]
                    pd.set_option(key, value)  # type: ignore[attr-defined]
            except Exception:
                continue


if __name__ == "__main__":
    main()
