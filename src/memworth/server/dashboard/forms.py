"""What a dashboard POST brings: its URL-encoded form, where it came from, where to go next.

Examples
--------
>>> safe_next("/dashboard/governance"), safe_next("https://evil.example/"), safe_next("/dashboardx")
('/dashboard/governance', '/dashboard', '/dashboard')
>>> with_notice("/dashboard?class=low", 7)
'/dashboard?class=low&notice=7'
"""

from typing import Annotated
from urllib.parse import parse_qsl, urlsplit

from fastapi import Depends, Request

from memworth.server.dashboard.markup import ROOT

__all__ = ["Form", "from_another_site", "read_form", "safe_next", "with_notice"]

MAX_FIELDS = 20


async def read_form(request: Request) -> dict[str, str] | None:
    """The fields of a URL-encoded form (first value of each; none for an empty body), or None when it is not one."""
    body = await request.body()
    if not body:
        return {}
    if request.headers.get("content-type", "").split(";")[0].strip().lower() != "application/x-www-form-urlencoded":
        return None
    try:
        pairs = parse_qsl(body.decode("utf-8"), keep_blank_values=True, max_num_fields=MAX_FIELDS)
    except (UnicodeDecodeError, ValueError):
        return None
    fields: dict[str, str] = {}
    for name, value in pairs:
        fields.setdefault(name, value)
    return fields


Form = Annotated[dict[str, str] | None, Depends(read_form)]


def from_another_site(request: Request) -> bool:
    """Whether the request says it comes from another origin than the host it was sent to."""
    origin = request.headers.get("origin")
    return origin is not None and urlsplit(origin).netloc != request.headers.get("host")


def safe_next(value: str | None) -> str:
    """A redirect target inside the dashboard (anything else: the dashboard's front page)."""
    if not value or not value.isascii() or not value.isprintable() or "\\" in value or " " in value:
        return ROOT
    if not (value == ROOT or value.startswith((ROOT + "/", ROOT + "?"))):
        return ROOT
    return value


def with_notice(target: str, seq: int) -> str:
    """``target`` with the audit entry ``seq`` to announce on arrival."""
    return f"{target}{'&' if '?' in target else '?'}notice={seq}"
