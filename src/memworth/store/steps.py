"""Store calls written once, run by a sync or an async driver (sans-IO at the store's level).

A store method on the hot path (add, get, list, recall, record) is written as a generator
of *steps*: it yields each backend call it needs (:class:`Call`) and gets the answer back,
and it yields CPU-heavy or blocking work (:class:`Blocking`) to be done outside the event
loop. Everything between two steps is pure computation on the store object.

* :func:`run` drives the steps with the sync backend: the sync store's methods are
  ``run(self._x_steps(...), self.backend)``, so sync behaviour is the same code;
* :mod:`memworth.aio` drives the same steps on an event loop: each backend call
  is awaited natively (psycopg's async pool, through the PostgreSQL backend's plans,
  :mod:`memworth.store.plans`), each blocking step runs in a worker thread.

So every rule of recall and recording exists once, and both drivers make the same calls in
the same order with the same arguments: their answers are equal bit for bit.

Examples
--------
>>> from memworth.store.memory import MemoryBackend
>>> def steps():
...     value = yield Call("get_meta", ("greeting",))
...     doubled = yield Blocking(str.upper, ("hello",))
...     return value, doubled
>>> run(steps(), MemoryBackend("memory://"))
(None, 'HELLO')
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

__all__ = ["Blocking", "Call", "Step", "Steps", "run"]

R = TypeVar("R")


@dataclass(frozen=True)
class Call:
    """One backend call: ``backend.<name>(*args, **kwargs)``."""

    name: str
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Blocking:
    """Work that must not run on an event loop (a long CPU part, a sync client such as Redis,
    a whole sync store method): ``fn(*args, **kwargs)``."""

    fn: Callable[..., Any]
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)


Step = Call | Blocking
Steps = Generator[Step, Any, R]
"""A store call as steps: yields :class:`Call` and :class:`Blocking`, returns its answer."""


def run(steps: Steps[R], backend: Any) -> R:
    """Drive ``steps`` with a sync backend: each call made on ``backend``, each blocking step
    made here; an error a step raises is raised inside the steps, where it was asked for."""
    try:
        step = next(steps)
        while True:
            try:
                if isinstance(step, Call):
                    answer = getattr(backend, step.name)(*step.args, **step.kwargs)
                else:
                    answer = step.fn(*step.args, **step.kwargs)
            except Exception as exc:
                step = steps.throw(exc)
            else:
                step = steps.send(answer)
    except StopIteration as stop:
        return stop.value
