"""A progress bar on stderr for long scoring runs: tqdm when asked for and installed, else nothing."""

from __future__ import annotations

from typing import Any

__all__ = ["bar"]


class _NoBar:
    def update(self, k: int) -> None:
        pass

    def close(self) -> None:
        pass


def bar(total: int, what: str, show: bool) -> Any:
    """A bar over ``total`` steps named ``what`` (``update(k)``, ``close()``); silent unless ``show``.

    Examples
    --------
    >>> b = bar(3, "files", show=False)
    >>> b.update(1); b.close()
    """
    if not show:
        return _NoBar()
    try:
        from tqdm import tqdm
    except ImportError:  # pragma: no cover - tqdm comes with the experiments extra
        return _NoBar()
    return tqdm(total=total, desc=what, leave=False)
