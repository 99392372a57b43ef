"""How the dashboard answers: HTML pages with its security headers, and refusals as pages with their status.

A page that cannot be shown is an HTML page with its 4xx status, never a traceback: a
route raises :class:`Refused` (or a memworth error, whose status is the API's), and
:func:`error_pages` turns it into that page.
"""

import functools
from collections.abc import Callable
from typing import ParamSpec

from fastapi.responses import HTMLResponse, Response

from memworth.errors import MemworthError
from memworth.server.dashboard import render

__all__ = ["SECURITY_HEADERS", "Refused", "error_pages", "html_page", "login_page", "status_of"]

SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",  # "no-referrer" would make browsers send "Origin: null"
    "Cache-Control": "no-store",
}
TITLES = {
    404: "Not found",
    409: "Conflict",
    422: "Invalid request",
    429: "Too many changes",
    500: "Store error",
    503: "Store unavailable",
}

P = ParamSpec("P")


class Refused(Exception):
    """A page that cannot be shown: its status, a title and why (``login_next``: sign in, then go there)."""

    def __init__(self, status: int, title: str, reason: str, login_next: str | None = None) -> None:
        super().__init__(reason)
        self.status, self.title, self.reason, self.login_next = status, title, reason, login_next


def html_page(body: str, status: int = 200) -> HTMLResponse:
    """``body`` (a whole HTML document) with the dashboard's security headers."""
    return HTMLResponse(body, status_code=status, headers=SECURITY_HEADERS)


def login_page(next_path: str, problem: str | None = None, status: int = 401) -> HTMLResponse:
    """The sign-in page, going to ``next_path`` once signed in."""
    return html_page(render.login(next_path, problem), status)


def refusal_page(exc: Refused) -> HTMLResponse:
    """The page of a refusal: the sign-in page when signing in would help, else why, with its status."""
    if exc.login_next is not None:
        return login_page(exc.login_next, exc.reason or None)
    return html_page(render.refusal(exc.status, exc.title, exc.reason), exc.status)


def status_of(exc: MemworthError) -> tuple[int, str]:
    """The HTTP status the API gives ``exc``, and a title for its page."""
    return exc.status, TITLES.get(exc.status, "Refused")


def error_pages(fn: Callable[P, Response]) -> Callable[P, Response]:
    """Answer a refusal or a memworth error raised by ``fn`` with an HTML page and its status."""

    @functools.wraps(fn)
    def page(*args: P.args, **kwargs: P.kwargs) -> Response:
        try:
            return fn(*args, **kwargs)
        except Refused as exc:
            return refusal_page(exc)
        except MemworthError as exc:
            status, title = status_of(exc)
            return refusal_page(Refused(status, title, str(exc)))

    return page
