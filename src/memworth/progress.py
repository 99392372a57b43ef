"""Progress bars on long work (import, replay, govern, log scoring): tqdm when asked for and installed, else none.

Every long method takes ``progress``: ``False`` (the default: the library prints nothing),
``True`` (a bar on stderr, gone when the work ends) or a file object to draw the bar on
(its final count stays there). tqdm comes with the
``experiments`` extra; without it there is no bar, and the work is the same. The CLI
verbs ask for a bar when stderr is a terminal and ``--quiet`` is not given.

Examples
--------
>>> import io
>>> out = io.StringIO()
>>> with bar(3, "memories", out) as b:
...     b.update(3)
>>> "3/3" in out.getvalue()
True
>>> with bar(3, "memories", False) as b:
...     b.update(1)
>>> bar(3, "memories", "yes")
Traceback (most recent call last):
...
memworth.errors.ValidationError: progress: must be True, False or a file object to draw the bar on, got 'yes'
"""

from __future__ import annotations

import sys
from typing import IO, Any, Protocol

from memworth.errors import ValidationError

__all__ = ["Bar", "Progress", "bar", "check", "on_terminal"]

Progress = bool | IO[str] | None
"""What a long method's ``progress`` takes: False / None (no bar), True (stderr) or a file object."""


class Bar(Protocol):
    """What the work sees of a bar: ``update(k)`` after ``k`` more steps, ``close()`` at the end."""

    def update(self, k: int = 1) -> Any: ...

    def close(self) -> None: ...

    def __enter__(self) -> Any: ...

    def __exit__(self, *exc: Any) -> Any: ...


class _NoBar:
    def update(self, k: int = 1) -> None:
        pass

    def close(self) -> None:
        pass

    def __enter__(self) -> _NoBar:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


def on_terminal(quiet: bool) -> bool:
    """Whether a CLI verb shows its bar: stderr is a terminal and ``--quiet`` was not given."""
    return not quiet and sys.stderr.isatty()


def check(progress: object) -> Progress:
    """``progress`` if a long method may take it, else a ValidationError naming it (checked
    before any work, so a bad value changes nothing)."""
    if progress is None or isinstance(progress, bool) or callable(getattr(progress, "write", None)):
        return progress  # type: ignore[return-value]
    raise ValidationError("progress", f"must be True, False or a file object to draw the bar on, got {progress!r}")


def bar(total: int, what: str, progress: Progress) -> Bar:
    """A bar over ``total`` steps of ``what``, drawn as ``progress`` asks (see the module's docstring)."""
    if progress is None or progress is False:
        return _NoBar()
    check(progress)
    try:
        from tqdm import tqdm
    except ImportError:  # tqdm comes with the experiments extra; without it, no bar
        return _NoBar()
    out = sys.stderr if progress is True else progress
    # On a terminal the bar goes when the work ends; on a file the final count stays, as a record.
    return tqdm(total=total, desc=what, file=out, leave=progress is not True, dynamic_ncols=progress is True)
