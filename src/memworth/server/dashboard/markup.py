"""The small pieces every dashboard page is written with: escaped text, times, numbers and links.

Examples
--------
>>> esc('<b class="x">')
'&lt;b class=&quot;x&quot;&gt;'
>>> memory_url("notes/2024 café")
'/dashboard/memories/notes%2F2024%20caf%C3%A9'
>>> memory_url(".."), with_query(memory_url(".."), outcomes=2)
('/dashboard/memory?id=..', '/dashboard/memory?id=..&outcomes=2')
>>> num(0.25), num(1.0), num(3)
('0.25', '1', '3')
"""

import html
import time
from urllib.parse import quote, urlencode

from memworth.server.ids import id_path

__all__ = ["ROOT", "SNIPPET", "esc", "memory_url", "num", "snippet", "when", "with_query"]

ROOT = "/dashboard"
SNIPPET = 90  # characters of a memory's text shown in a table


def esc(value: object) -> str:
    """``value`` as HTML text, every markup character escaped."""
    return html.escape(str(value), quote=True)


def snippet(text: str) -> str:
    """The first :data:`SNIPPET` characters of ``text``, escaped (an ellipsis marks a cut)."""
    return esc(text if len(text) <= SNIPPET else text[: SNIPPET - 1] + "…")


def when(at: float) -> str:
    """Seconds since the epoch as a UTC date and time."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(at))


def num(value: object) -> str:
    """A governance number: a float to at most three decimals, anything else as it is."""
    return f"{value:.3f}".rstrip("0").rstrip(".") if isinstance(value, float) else str(value)


def memory_url(memory_id: str) -> str:
    """The address of a memory's page: one percent-encoded path segment (``/`` as ``%2F``), or,
    for the ids ``.`` and ``..``, which browsers drop from a path as dot segments even encoded,
    the same page by query string (``/dashboard/memory?id=..``)."""
    if memory_id in (".", ".."):
        return f"{ROOT}/memory?id={quote(memory_id, safe='')}"
    return f"{ROOT}/memories/{id_path(memory_id)}"


def with_query(url: str, **params: object) -> str:
    """``url`` with ``params`` added to its query string."""
    return f"{url}{'&' if '?' in url else '?'}{urlencode(params)}"
