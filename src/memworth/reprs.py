"""HTML tables for notebooks: what Jupyter shows for a memory, a recall, a report or a proposal.

Each object's ``_repr_html_`` calls :func:`table` with its own rows; every value is escaped
(``html.escape``), so a memory's text cannot inject markup into the notebook. Standard
library only: the core stays light.

Examples
--------
>>> print(table(["id", "worth"], [["cz", 0.25], ["<b>", None]]))
<table class="memworth"><thead><tr><th>id</th><th>worth</th></tr></thead><tbody><tr><td>cz</td><td>0.25</td></tr><tr><td>&lt;b&gt;</td><td></td></tr></tbody></table>
"""

from __future__ import annotations

import html
from collections.abc import Sequence

__all__ = ["cell", "table"]

SNIPPET = 120
"""Characters of a text shown in a cell (the rest is cut, with an ellipsis)."""


def cell(value: object) -> str:
    """One value as escaped cell text: floats to at most three decimals, ``None`` blank, long text cut."""
    if value is None:
        return ""
    if isinstance(value, float):
        text = f"{value:.3f}".rstrip("0").rstrip(".") if value == value else "nan"
    else:
        text = str(value)
    if len(text) > SNIPPET:
        text = text[: SNIPPET - 1] + "…"
    return html.escape(text)


def table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """An HTML table with ``header`` and one row per item of ``rows``, every value escaped."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{cell(v)}</td>" for v in row) + "</tr>" for row in rows)
    return f'<table class="memworth"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'
