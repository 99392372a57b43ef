"""The small pieces every dashboard page is written with: escaped text, times, numbers and links.

Examples
--------
>>> esc('<b class="x">')
'&lt;b class=&quot;x&quot;&gt;'
>>> memory_url("notes/2024 café")
'/dashboard/memories/notes%2F2024%20caf%C3%A9'
>>> num(0.25), num(1.0), num(3)
('0.25', '1', '3')
"""

import html
import time

from memworth.server.ids import id_path

__all__ = ["ROOT", "SNIPPET", "esc", "memory_url", "num", "snippet", "when"]

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
    """The path of a memory's page."""
    # One percent-encoded segment ("/" as %2F); browsers drop "." and ".." as dot segments
    # even encoded, so those two ids have no page link that survives a browser.
    return f"{ROOT}/memories/{id_path(memory_id)}"
