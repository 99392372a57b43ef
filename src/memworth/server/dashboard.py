"""The web dashboard under ``/dashboard``: memories and their worth, one memory's history, governance.

Pages are HTML rendered on the server (no JavaScript, nothing from a CDN) and every text
a user stored is escaped. Signing in takes an API key, as the API does, and the pages
show and change only that key's namespace. The key stays on the server in a session; the
browser holds a random session id in an HttpOnly, SameSite=Strict cookie, every form
carries the session's CSRF token and a POST from another origin is refused. A change is a
POST answered with a redirect (POST-redirect-GET). A page that cannot be shown is an HTML
page with its 4xx status, never a traceback.
"""

import functools
import hmac
import html
import json
import secrets
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Annotated, Any, ParamSpec
from urllib.parse import parse_qsl, quote, urlencode, urlsplit

import numpy as np
from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from memworth import __version__
from memworth.counts import Counts, CountsTable
from memworth.errors import MemworthError, StoreError, UnknownMemoryError, ValidationError
from memworth.estimators import RawWorth, WilsonBound
from memworth.policy import ValueClass
from memworth.server.ids import id_path
from memworth.server.keys import lookup_key
from memworth.store import Memory, MemoryStore
from memworth.store.records import STATUSES, AuditEntry
from memworth.store.store import credit_increments

__all__ = ["Point", "dashboard_router", "trajectory", "worth_plot"]

ROOT = "/dashboard"
COOKIE = "memworth_session"
SESSION_SECONDS = 8 * 3600
MAX_SESSIONS = 1000
PAGE_SIZE = 100
SNIPPET = 90
RECENT_CHANGES = 50
LATEST_OUTCOMES = 10
COLUMNS = {  # sort key -> header
    "id": "id",
    "text": "text",
    "worth": "worth",
    "interval": "interval (95%)",
    "retrievals": "retrievals",
    "evidence": "hits+ / hits-",
    "class": "class",
    "status": "status",
    "standing": "standing",
    "contexts": "contexts",
}
CLASS_RANK = {
    c.value: rank for rank, c in enumerate((ValueClass.HIGH, ValueClass.MIXED, ValueClass.UNCERTAIN, ValueClass.LOW))
}
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",  # "no-referrer" would make browsers send "Origin: null"
    "Cache-Control": "no-store",
}

P = ParamSpec("P")
Call = Callable[[Callable[[], Any]], Any]


def esc(value: object) -> str:
    """``value`` as HTML text, every markup character escaped."""
    return html.escape(str(value), quote=True)


def _snippet(text: str) -> str:
    return esc(text if len(text) <= SNIPPET else text[: SNIPPET - 1] + "…")


def _when(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(at))


def _memory_url(memory_id: str) -> str:
    # One percent-encoded segment ("/" as %2F); browsers drop "." and ".." as dot segments
    # even encoded, so those two ids have no page link that survives a browser.
    return f"{ROOT}/memories/{id_path(memory_id)}"


# -- worth over time --------------------------------------------------------------------


@dataclass(frozen=True)
class Point:
    """One outcome that credited a memory, and its worth and Wilson interval afterwards."""

    episode_id: str
    query: str
    recorded: float
    success: bool
    direct: bool  # retrieved in the episode (False: credit that reached it along provenance edges)
    credit: float
    counts: Counts
    worth: float
    lower: float
    upper: float


def trajectory(store: MemoryStore, memory_id: str, namespace: str) -> list[Point]:
    """The memory's worth after each outcome that credited it, rebuilt from the outcome log.

    The credit is the store's own (:func:`memworth.store.store.credit_increments`, with
    its provenance propagation), so the last point holds the counts ``replay`` rebuilds.

    Examples
    --------
    >>> from memworth import HashingEncoder, MemoryStore
    >>> store = MemoryStore.open("memory://", encoder=HashingEncoder(), exploration=0.0)
    >>> _ = store.add("Use list.reverse() to reverse a Python list.", id="rev")
    >>> for ok in (True, True, False):
    ...     store.record(store.recall("reverse a python list", k=1).episode, success=ok)
    >>> [round(p.worth, 3) for p in trajectory(store, "rev", "default")]
    [1.0, 1.0, 0.667]
    """
    parents: dict[str, list[str]] = {}
    if store.propagation > 0 and store.max_hops > 0:
        for src, dst, _kind in sorted(store.backend.edges(namespace)):
            parents.setdefault(src, []).append(dst)
    log = list(store.backend.outcome_log())
    wilson = WilsonBound(evidence="retrievals")
    points: list[Point] = []
    s = f = n = 0.0
    for start in range(0, len(log), 5000):
        chunk = log[start : start + 5000]
        episodes = store.backend.episodes([o.episode_id for o in chunk])
        for o in chunk:
            ep = episodes[o.episode_id]
            if ep.namespace != namespace:
                continue
            mine = [
                i
                for i in credit_increments(ep, o.success, o.confidence, parents, store.propagation, store.max_hops)
                if i.memory_id == memory_id
            ]
            if not mine:
                continue
            for i in mine:
                s, f, n = s + i.success, f + i.failure, n + i.n
            counts = Counts(s, f, n)
            lo, hi = wilson.interval(counts)
            credit = sum(i.success + i.failure for i in mine)
            direct = any(i.n > 0 for i in mine)
            worth = float(RawWorth().value(counts))
            points.append(
                Point(
                    o.episode_id, ep.query, o.recorded, o.success, direct, credit, counts, worth, float(lo), float(hi)
                )
            )
    return points


def worth_plot(
    points: Sequence[Point], theta_low: float, theta_high: float, width: int = 720, height: int = 260
) -> str:
    """An inline SVG of worth after each outcome, its 95% interval as a band, the class thresholds.

    Point 0 is the memory before any evidence (worth 0.5, interval [0, 1]).

    Examples
    --------
    >>> svg = worth_plot([], 0.4, 0.6)
    >>> svg.startswith("<svg") and "no outcomes yet" in svg
    True
    """
    left, right, top, bottom = 44, 14, 12, 40
    pw, ph = width - left - right, height - top - bottom
    worth = [0.5] + [p.worth for p in points]
    lower = [0.0] + [p.lower for p in points]
    upper = [1.0] + [p.upper for p in points]
    last = len(points)
    step = max(1, -(-last // 600))  # at most ~600 vertices, the last always kept
    idx = sorted({*range(0, last + 1, step), last})

    def x(i: int) -> float:
        return left + (i / last * pw if last else pw / 2)

    def y(v: float) -> float:
        return top + (1 - v) * ph

    out = [
        f'<svg id="trajectory" class="plot" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" role="img" aria-labelledby="trajectory-title">',
        '<title id="trajectory-title">Worth after each outcome, with its 95% Wilson interval</title>',
    ]
    for v in (0.0, 0.25, 0.5, 0.75, 1.0):
        out.append(f'<line x1="{left}" x2="{left + pw}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#e3e6ea"/>')
        out.append(f'<text x="{left - 6}" y="{y(v) + 4:.1f}" text-anchor="end" font-size="11">{v:g}</text>')
    for v, name in ((theta_low, "low"), (theta_high, "high")):
        out.append(
            f'<line x1="{left}" x2="{left + pw}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#8a94a6" '
            f'stroke-dasharray="4 4"><title>theta_{name} {v:g}</title></line>'
        )
    if not points:
        out.append(f'<text x="{left + pw / 2}" y="{top + ph / 2 - 10}" text-anchor="middle">no outcomes yet</text>')
    band = [f"{x(i):.1f},{y(upper[i]):.1f}" for i in idx] + [f"{x(i):.1f},{y(lower[i]):.1f}" for i in reversed(idx)]
    out.append(f'<polygon class="band" points="{" ".join(band)}" fill="#9ec5fe" fill-opacity="0.45"/>')
    line = " ".join(f"{x(i):.1f},{y(worth[i]):.1f}" for i in idx)
    out.append(f'<polyline class="worth" points="{line}" fill="none" stroke="#1d4ed8" stroke-width="2"/>')
    if last <= 200:
        for i, p in enumerate(points, start=1):
            colour = "#15803d" if p.success else "#b91c1c"
            fill = colour if p.direct else "#ffffff"
            how = "retrieved" if p.direct else "via provenance"
            out.append(
                f'<circle cx="{x(i):.1f}" cy="{y(p.worth):.1f}" r="3.5" fill="{fill}" stroke="{colour}">'
                f"<title>#{i} {'success' if p.success else 'failure'} ({how}), credit {p.credit:.3g}: "
                f"worth {p.worth:.3f} [{p.lower:.3f}, {p.upper:.3f}]; query {esc(p.query[:80])}</title></circle>"
            )
    for i in sorted({0, last // 2, last}):
        out.append(f'<text x="{x(i):.1f}" y="{top + ph + 16}" text-anchor="middle" font-size="11">{i}</text>')
    out.append(
        f'<text x="{left + pw / 2}" y="{height - 6}" text-anchor="middle" font-size="12">'
        "outcomes that credited this memory</text></svg>"
    )
    return "".join(out)


# -- sessions, refusals, pages ------------------------------------------------------------


@dataclass
class _Session:
    key: str
    csrf: str
    expires: float


@dataclass(frozen=True)
class _Viewer:
    namespace: str
    csrf: str | None  # None: signed in by header, which no other site can make a browser send


class _Refused(Exception):
    """A page that cannot be shown: its status, a title and why."""

    def __init__(self, status: int, title: str, reason: str, login_next: str | None = None) -> None:
        super().__init__(reason)
        self.status, self.title, self.reason, self.login_next = status, title, reason, login_next


def _html(body: str, status: int = 200) -> HTMLResponse:
    return HTMLResponse(body, status_code=status, headers=SECURITY_HEADERS)


def _layout(title: str, body: str, viewer: _Viewer | None = None) -> str:
    who = ""
    if viewer is not None:
        out = ""
        if viewer.csrf is not None:
            out = (
                f'<form method="post" action="{ROOT}/logout" class="inline">{_csrf(viewer)}'
                '<button type="submit" class="link">sign out</button></form>'
            )
        who = f'<div class="who">namespace <b id="namespace">{esc(viewer.namespace)}</b> {out}</div>'
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<title>{esc(title)} · memworth</title><link rel="stylesheet" href="{ROOT}/static/dashboard.css"></head>'
        f'<body><header><a class="brand" href="{ROOT}">memworth</a><nav><a href="{ROOT}">Memories</a>'
        f'<a href="{ROOT}/governance">Governance</a></nav>{who}</header>'
        f"<main><h1>{esc(title)}</h1>{body}</main><footer>memworth {esc(__version__)}</footer></body></html>"
    )


def _csrf(viewer: _Viewer) -> str:
    return "" if viewer.csrf is None else f'<input type="hidden" name="csrf" value="{esc(viewer.csrf)}">'


def _login_page(next_path: str, problem: str | None = None, status: int = 401) -> HTMLResponse:
    note = f'<p class="error" id="problem">{esc(problem)}</p>' if problem else ""
    body = (
        f"{note}<p>Sign in with an API key (<code>memworth keys create --namespace NAME --name LABEL</code>); "
        "the dashboard shows only that key's namespace.</p>"
        f'<form method="post" action="{ROOT}/login" class="login"><input type="hidden" name="next" '
        f'value="{esc(next_path)}"><label>API key <input type="password" name="key" id="key" autocomplete="off" '
        'required></label> <button type="submit" id="sign-in">Sign in</button></form>'
    )
    return _html(_layout("Sign in", body), status)


def _refusal_page(exc: _Refused) -> HTMLResponse:
    if exc.login_next is not None:
        return _login_page(exc.login_next, exc.reason)
    body = f'<p class="error" id="problem">{esc(exc.reason)}</p><p><a href="{ROOT}">Back to the memories</a></p>'
    return _html(_layout(f"{exc.status} {exc.title}", body), exc.status)


def _status_of(exc: MemworthError) -> tuple[int, str]:
    from memworth.server.app import STATUS

    status = next(code for cls, code in STATUS if isinstance(exc, cls))
    return status, {404: "Not found", 409: "Conflict", 422: "Invalid request", 503: "Store unavailable"}.get(
        status, "Refused"
    )


def _pages(fn: Callable[P, Response]) -> Callable[P, Response]:
    """Answer a refusal or a memworth error raised by ``fn`` with an HTML page and its status."""

    @functools.wraps(fn)
    def page(*args: P.args, **kwargs: P.kwargs) -> Response:
        try:
            return fn(*args, **kwargs)
        except _Refused as exc:
            return _refusal_page(exc)
        except MemworthError as exc:
            status, title = _status_of(exc)
            return _refusal_page(_Refused(status, title, str(exc)))

    return page


async def _form(request: Request) -> dict[str, str] | None:
    """The fields of a URL-encoded form (first value of each; none for an empty body), or None when it is not one."""
    body = await request.body()
    if not body:
        return {}
    if request.headers.get("content-type", "").split(";")[0].strip().lower() != "application/x-www-form-urlencoded":
        return None
    try:
        pairs = parse_qsl(body.decode("utf-8"), keep_blank_values=True, max_num_fields=20)
    except (UnicodeDecodeError, ValueError):
        return None
    fields: dict[str, str] = {}
    for name, value in pairs:
        fields.setdefault(name, value)
    return fields


Form = Annotated[dict[str, str] | None, Depends(_form)]


def _safe_next(value: str | None) -> str:
    """A redirect target inside the dashboard (anything else: the dashboard's front page)."""
    if not value or not value.isascii() or not value.isprintable() or "\\" in value or " " in value:
        return ROOT
    if not (value == ROOT or value.startswith((ROOT + "/", ROOT + "?"))):
        return ROOT
    return value


def _with_notice(target: str, seq: int) -> str:
    return f"{target}{'&' if '?' in target else '?'}notice={seq}"


# -- the router -------------------------------------------------------------------------------


def dashboard_router(store: MemoryStore, call: Call) -> APIRouter:
    """The dashboard's routes over ``store``; ``call`` runs a store call under the app's store lock."""
    router = APIRouter(prefix=ROOT, include_in_schema=False)
    sessions: dict[str, _Session] = {}
    sessions_lock = threading.Lock()
    css = resources.files("memworth.server").joinpath("static/dashboard.css").read_text(encoding="utf-8")

    def viewer(request: Request) -> _Viewer:
        key = request.headers.get("x-api-key")
        authorization = request.headers.get("authorization")
        if key is None and authorization is not None and authorization.startswith("Bearer "):
            key = authorization[7:].strip()
        csrf: str | None = None
        if key is None:
            with sessions_lock:
                session = sessions.get(request.cookies.get(COOKIE, ""))
                if session is not None and session.expires < time.time():
                    session = None
            if session is not None:
                key, csrf = session.key, session.csrf
        namespace = None if key is None else call(lambda: lookup_key(store, key))
        if namespace is None:
            target = quote(request.url.path, safe="/") + (f"?{request.url.query}" if request.url.query else "")
            if request.method != "GET":
                target = ROOT
            raise _Refused(401, "Sign in", "sign in with a valid API key", login_next=_safe_next(target))
        return _Viewer(str(namespace), csrf)

    def changer(request: Request, form: dict[str, str] | None) -> tuple[_Viewer, dict[str, str]]:
        """The viewer of a POST that may change something, after the origin and CSRF checks."""
        origin = request.headers.get("origin")
        if origin is not None and urlsplit(origin).netloc != request.headers.get("host"):
            raise _Refused(403, "Forbidden", "a form from another site may not change this store")
        if form is None:
            raise _Refused(400, "Bad request", "expected a URL-encoded form")
        who = viewer(request)
        if who.csrf is not None and not hmac.compare_digest(form.get("csrf", "").encode(), who.csrf.encode()):
            raise _Refused(403, "Forbidden", "the form's CSRF token does not match this session; reload the page")
        return who, form

    def notice(request: Request, namespace: str) -> str:
        raw = request.query_params.get("notice", "")
        if not raw.isdigit():
            return ""
        entry = next((e for e in call(lambda: store.audit(namespace=namespace)) if e.seq == int(raw)), None)
        if entry is None:
            return ""
        return (
            f'<p class="notice" id="notice">Audit entry {entry.seq}: {esc(entry.action)} '
            f'<a href="{_memory_url(entry.memory_id)}">{esc(entry.memory_id)}</a>, {esc(entry.field)} '
            f"{esc(entry.old)} → {esc(entry.new)}.</p>"
        )

    @router.get("/static/dashboard.css")
    def stylesheet() -> Response:
        return Response(css, media_type="text/css", headers={"Cache-Control": "max-age=3600"})

    @router.get("/login")
    def login_form(request: Request) -> Response:
        return _login_page(_safe_next(request.query_params.get("next")), status=200)

    @router.post("/login")
    @_pages
    def login(request: Request, form: Form) -> Response:
        origin = request.headers.get("origin")
        if origin is not None and urlsplit(origin).netloc != request.headers.get("host"):
            raise _Refused(403, "Forbidden", "a form from another site may not sign in here")
        fields = form or {}
        target = _safe_next(fields.get("next"))
        key = fields.get("key", "").strip()
        if not key or call(lambda: lookup_key(store, key)) is None:
            return _login_page(target, "unknown or revoked API key")
        sid, now = secrets.token_urlsafe(32), time.time()
        with sessions_lock:
            for old in [s for s, v in sessions.items() if v.expires < now]:
                del sessions[old]
            while len(sessions) >= MAX_SESSIONS:
                del sessions[min(sessions, key=lambda s: sessions[s].expires)]
            sessions[sid] = _Session(key, secrets.token_urlsafe(32), now + SESSION_SECONDS)
        response = RedirectResponse(target, status_code=303)
        secure = request.url.scheme == "https"
        response.set_cookie(
            COOKIE, sid, max_age=SESSION_SECONDS, path=ROOT, httponly=True, samesite="strict", secure=secure
        )
        return response

    @router.post("/logout")
    @_pages
    def logout(request: Request, form: Form) -> Response:
        changer(request, form)
        with sessions_lock:
            sessions.pop(request.cookies.get(COOKIE, ""), None)
        response = RedirectResponse(f"{ROOT}/login", status_code=303)
        response.delete_cookie(COOKIE, path=ROOT)
        return response

    @router.get("")
    @_pages
    def memories(request: Request) -> Response:
        who = viewer(request)
        q = request.query_params
        status, context, klass = q.get("status") or None, q.get("context") or None, q.get("class") or None
        sort, order, page = q.get("sort") or "worth", q.get("order") or "desc", q.get("page") or "1"
        if status is not None and status not in STATUSES:
            raise _Refused(422, "Invalid request", f"status must be one of {', '.join(STATUSES)}, got {status!r}")
        if klass is not None and klass not in CLASS_RANK:
            raise _Refused(422, "Invalid request", f"class must be one of {', '.join(CLASS_RANK)}, got {klass!r}")
        if sort not in COLUMNS or order not in ("asc", "desc"):
            raise _Refused(422, "Invalid request", f"sort must be one of {', '.join(COLUMNS)}, order asc or desc")
        if not page.isdigit() or int(page) < 1:
            raise _Refused(422, "Invalid request", f"page must be a positive integer, got {page!r}")
        everything = call(lambda: store.list(namespace=who.namespace))
        rows = _rows(store, everything)
        shown = [
            r
            for r in rows
            if (status is None or r.memory.status == status)
            and (context is None or context in r.memory.contexts)
            and (klass is None or r.value_class == klass)
        ]
        shown.sort(key=lambda r: r.memory.id)
        shown.sort(key=_sort_key(sort), reverse=order == "desc")
        first = (int(page) - 1) * PAGE_SIZE
        filters = {"status": status, "context": context, "class": klass}
        contexts = sorted({c for m in everything for c in m.contexts})
        body = notice(request, who.namespace) + _filter_form(filters, contexts, sort, order)
        body += _table(shown[first : first + PAGE_SIZE], filters, sort, order)
        body += _pager(len(shown), int(page), first, {**filters, "sort": sort, "order": order})
        return _html(_layout("Memories", body, who))

    @router.get("/governance")
    @_pages
    def governance(request: Request) -> Response:
        who = viewer(request)
        report = call(lambda: store.govern(apply=False, namespace=who.namespace))
        by_id = {m.id: m for m in call(lambda: store.list(namespace=who.namespace))}
        entries = call(lambda: store.audit(namespace=who.namespace))
        body = notice(request, who.namespace) + "<h2>Proposals</h2>"
        if not report.proposals:
            body += '<p id="no-proposals">Nothing to propose: every memory is where its evidence puts it.</p>'
        else:
            body += (
                '<table id="proposals"><thead><tr><th>memory</th><th>text</th><th>action</th><th>change</th>'
                "<th>reason</th><th>numbers</th><th></th></tr></thead><tbody>"
            )
            for p in report.proposals:
                text = _snippet(by_id[p.memory_id].text) if p.memory_id in by_id else ""
                numbers = ", ".join(f"{esc(k)} {esc(_num(v))}" for k, v in p.numbers.items())
                body += (
                    f'<tr data-id="{esc(p.memory_id)}"><td><a href="{_memory_url(p.memory_id)}">{esc(p.memory_id)}</a>'
                    f'</td><td>{text}</td><td><span class="action">{esc(p.action)}</span></td>'
                    f"<td>{esc(p.field)}: {esc(p.old)} → {esc(p.new)}</td><td>{esc(p.reason)}</td>"
                    f'<td class="numbers">{numbers}</td><td>{_approve_form(who, p.memory_id, p.action, "")}</td></tr>'
                )
            body += "</tbody></table>"
        body += f"<h2>Recent changes</h2>{_audit_table(who, entries[::-1][:RECENT_CHANGES], by_id, True, '')}"
        return _html(_layout("Governance", body, who))

    @router.post("/governance/approve")
    @_pages
    def approve(request: Request, form: Form) -> Response:
        who, fields = changer(request, form)
        memory_id, action = fields.get("memory_id", ""), fields.get("action", "")
        try:
            entry = call(lambda: store.approve(memory_id, action, namespace=who.namespace))
        except StoreError as exc:  # rate-limited, or changed meanwhile
            raise _Refused(409, "Not applied", str(exc)) from None
        return RedirectResponse(_with_notice(_safe_next(fields.get("next") or f"{ROOT}/governance"), entry.seq), 303)

    @router.post("/audit/{seq}/undo")
    @_pages
    def undo(seq: str, request: Request, form: Form) -> Response:
        who, fields = changer(request, form)
        if not seq.isdigit():
            raise _Refused(404, "Not found", f"no audit entry {seq!r}")
        try:
            entry = call(lambda: store.restore(int(seq), reason="undone in the dashboard", namespace=who.namespace))
        except StoreError as exc:  # the memory changed since that entry
            raise _Refused(409, "Not undone", str(exc)) from None
        return RedirectResponse(_with_notice(_safe_next(fields.get("next") or f"{ROOT}/governance"), entry.seq), 303)

    @router.get("/memories/{memory_id:path}")
    @_pages
    def memory(memory_id: str, request: Request) -> Response:
        who = viewer(request)
        try:
            m = call(lambda: store.get(memory_id, namespace=who.namespace))
        except ValidationError:  # an id that is not even valid is not found either
            raise UnknownMemoryError(memory_id) from None
        points = call(lambda: trajectory(store, m.id, who.namespace))
        recent = call(lambda: store.recent_counts(who.namespace)).get(m.id)
        proposal = store.policy.propose(m.id, m.counts, m.status, m.standing, recent)
        entries = call(lambda: store.audit(m.id, namespace=who.namespace))
        here = _memory_url(m.id)
        body = notice(request, who.namespace) + _details(store, m)
        if proposal is not None:
            body += (
                f'<div class="proposal">Governance proposes <span class="action">{esc(proposal.action)}</span> '
                f"({esc(proposal.field)}: {esc(proposal.old)} → {esc(proposal.new)}): {esc(proposal.reason)} "
                f"{_approve_form(who, m.id, proposal.action, here)}</div>"
            )
        body += "<h2>Worth over episodes</h2>" + worth_plot(points, store.taxonomy.theta_low, store.taxonomy.theta_high)
        rebuilt = points[-1].counts if points else Counts()
        if not np.allclose(
            [rebuilt.success, rebuilt.failure, rebuilt.n], [m.counts.success, m.counts.failure, m.counts.n]
        ):
            body += (
                '<p class="error">The outcome log rebuilds other counts than the live ones '
                f"({rebuilt.success:g}/{rebuilt.failure:g}/{rebuilt.n:g}); <code>memworth replay</code> tells why.</p>"
            )
        body += _episodes_table(points[-LATEST_OUTCOMES:], len(points))
        body += f"<h2>Audit trail</h2>{_audit_table(who, entries[::-1], {m.id: m}, False, here)}"
        return _html(_layout(f"Memory {m.id}", body, who))

    @router.get("/{rest:path}")
    @_pages
    def not_found(rest: str, request: Request) -> Response:
        if rest == "":
            return RedirectResponse(ROOT, status_code=308)
        raise _Refused(404, "Not found", f"no dashboard page at {request.url.path}")

    return router


# -- page parts -----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Row:
    memory: Memory
    worth: float
    lower: float
    upper: float
    value_class: str


def _rows(store: MemoryStore, memories: list[Memory]) -> list[_Row]:
    if not memories:
        return []
    table = CountsTable(
        np.array([m.counts.success for m in memories]),
        np.array([m.counts.failure for m in memories]),
        np.array([m.counts.n for m in memories]),
    )
    worth = np.asarray(RawWorth().value(table), dtype=float)
    lo, hi = (np.asarray(v, dtype=float) for v in WilsonBound(evidence="retrievals").interval(table))
    classes = store.taxonomy.classify_table(table)
    return [_Row(m, float(worth[i]), float(lo[i]), float(hi[i]), str(classes[i])) for i, m in enumerate(memories)]


def _sort_key(column: str) -> Callable[[_Row], Any]:
    keys: dict[str, Callable[[_Row], Any]] = {
        "id": lambda r: r.memory.id,
        "text": lambda r: r.memory.text.casefold(),
        "worth": lambda r: r.worth,
        "interval": lambda r: (r.lower, r.upper),
        "retrievals": lambda r: r.memory.counts.n,
        "evidence": lambda r: r.memory.counts.evidence,
        "class": lambda r: CLASS_RANK[r.value_class],
        "status": lambda r: STATUSES.index(r.memory.status) if r.memory.status in STATUSES else len(STATUSES),
        "standing": lambda r: r.memory.standing,
        "contexts": lambda r: ",".join(r.memory.contexts),
    }
    return keys[column]


def _num(value: object) -> str:
    return f"{value:.3f}".rstrip("0").rstrip(".") if isinstance(value, float) else str(value)


def _select(name: str, label: str, options: Sequence[str], chosen: str | None) -> str:
    opts = '<option value="">all</option>' + "".join(
        f'<option value="{esc(o)}"{" selected" if o == chosen else ""}>{esc(o)}</option>' for o in options
    )
    return f'<label>{esc(label)} <select name="{name}" id="filter-{name}">{opts}</select></label> '


def _filter_form(filters: dict[str, str | None], contexts: list[str], sort: str, order: str) -> str:
    return (
        f'<form method="get" action="{ROOT}" class="filters" id="filters">'
        + _select("class", "class", list(CLASS_RANK), filters["class"])
        + _select("status", "status", list(STATUSES), filters["status"])
        + _select("context", "context", contexts, filters["context"])
        + f'<input type="hidden" name="sort" value="{esc(sort)}"><input type="hidden" name="order" value="{esc(order)}">'
        f'<button type="submit" id="apply-filters">Filter</button> <a href="{ROOT}">clear</a></form>'
    )


def _query(params: dict[str, str | None]) -> str:
    return urlencode({k: v for k, v in params.items() if v})


def _bar(row: _Row) -> str:
    return (
        '<svg class="bar" width="64" height="10" viewBox="0 0 64 10" aria-hidden="true">'
        '<rect width="64" height="10" fill="#eef1f4"/>'
        f'<rect x="{row.lower * 64:.1f}" y="3" width="{max(row.upper - row.lower, 0) * 64:.1f}" height="4" '
        f'fill="#9ec5fe"/><rect x="{max(row.worth * 64 - 1, 0):.1f}" width="2" height="10" fill="#1d4ed8"/></svg>'
    )


def _table(rows: list[_Row], filters: dict[str, str | None], sort: str, order: str) -> str:
    head = ""
    for column, label in COLUMNS.items():
        flip = "asc" if column == sort and order == "desc" else "desc"
        arrow = (" ▼" if order == "desc" else " ▲") if column == sort else ""
        href = f"{ROOT}?{_query({**filters, 'sort': column, 'order': flip})}"
        head += f'<th><a href="{esc(href)}" id="sort-{column}">{esc(label)}{arrow}</a></th>'
    if not rows:
        return f'<table id="memories"><thead><tr>{head}</tr></thead></table><p id="empty">No memory matches.</p>'
    body = ""
    for r in rows:
        m, c = r.memory, r.memory.counts
        body += (
            f'<tr data-id="{esc(m.id)}"><td class="id"><a href="{_memory_url(m.id)}">{esc(m.id)}</a></td>'
            f'<td class="text">{_snippet(m.text)}</td><td class="worth">{r.worth:.3f} {_bar(r)}</td>'
            f'<td class="interval">[{r.lower:.3f}, {r.upper:.3f}]</td><td class="retrievals">{c.n:g}</td>'
            f'<td class="evidence">{c.success:.3g} / {c.failure:.3g}</td>'
            f'<td class="class"><span class="class-{esc(r.value_class)}">{esc(r.value_class)}</span></td>'
            f'<td class="status status-{esc(m.status)}">{esc(m.status)}</td><td class="standing">{esc(m.standing)}</td>'
            f'<td class="contexts">{esc(", ".join(m.contexts))}</td></tr>'
        )
    return f'<table id="memories"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _pager(total: int, page: int, first: int, params: dict[str, str | None]) -> str:
    out = f'<p class="pager" id="count">{total} memories'
    if total > PAGE_SIZE:
        out += f", showing {first + 1}-{min(first + PAGE_SIZE, total)}"
        if page > 1:
            out += f' <a href="{ROOT}?{esc(_query({**params, "page": str(page - 1)}))}">previous</a>'
        if first + PAGE_SIZE < total:
            out += f' <a href="{ROOT}?{esc(_query({**params, "page": str(page + 1)}))}">next</a>'
    return out + "</p>"


def _approve_form(viewer: _Viewer, memory_id: str, action: str, next_path: str) -> str:
    return (
        f'<form method="post" action="{ROOT}/governance/approve" class="inline">{_csrf(viewer)}'
        f'<input type="hidden" name="memory_id" value="{esc(memory_id)}">'
        f'<input type="hidden" name="action" value="{esc(action)}">'
        f'<input type="hidden" name="next" value="{esc(next_path)}">'
        f'<button type="submit" class="approve" data-id="{esc(memory_id)}">Approve {esc(action)}</button></form>'
    )


def _audit_table(
    viewer: _Viewer, entries: list[AuditEntry], memories: dict[str, Memory], link: bool, next_path: str
) -> str:
    """Audit entries (newest first) with an Undo button on each that is the last word on its field."""
    if not entries:
        return '<p class="empty-audit">No changes yet.</p>'
    latest: set[int] = set()
    seen: set[tuple[str, str]] = set()
    for e in entries:
        if (e.memory_id, e.field) not in seen:
            seen.add((e.memory_id, e.field))
            m = memories.get(e.memory_id)
            if m is not None and getattr(m, e.field) == e.new:
                latest.add(e.seq)
    rows = ""
    for e in entries:
        who = f'<a href="{_memory_url(e.memory_id)}">{esc(e.memory_id)}</a>' if link else esc(e.memory_id)
        button = ""
        if e.seq in latest:
            button = (
                f'<form method="post" action="{ROOT}/audit/{e.seq}/undo" class="inline">{_csrf(viewer)}'
                f'<input type="hidden" name="next" value="{esc(next_path)}">'
                f'<button type="submit" class="undo" data-seq="{e.seq}">Undo</button></form>'
            )
        rows += (
            f'<tr data-seq="{e.seq}"><td>{e.seq}</td><td>{_when(e.at)}</td><td>{who}</td><td>{esc(e.action)}</td>'
            f"<td>{esc(e.field)}: {esc(e.old)} → {esc(e.new)}</td><td>{esc(e.reason)}</td><td>{button}</td></tr>"
        )
    return (
        '<table class="audit"><thead><tr><th>#</th><th>when (UTC)</th><th>memory</th><th>action</th><th>change</th>'
        f"<th>reason</th><th></th></tr></thead><tbody>{rows}</tbody></table>"
    )


def _details(store: MemoryStore, m: Memory) -> str:
    c = m.counts
    klass = store.taxonomy.classify(c)
    lo, hi = WilsonBound(evidence="retrievals").interval(c)
    links = [
        name + ": " + ", ".join(f'<a href="{_memory_url(x)}">{esc(x)}</a>' for x in ids)
        for name, ids in (("derived from", m.derived_from), ("part of", m.part_of))
        if ids
    ]
    facts = [
        ("worth", f"{klass.worth:.3f}"),
        ("95% interval (Wilson)", f"[{float(lo):.3f}, {float(hi):.3f}]"),
        (
            "class",
            f'<span class="class-{esc(klass.value_class.value)}">{esc(klass.value_class.value)}</span> '
            f"({esc(klass.reason)})",
        ),
        ("evidence", f"{c.n:g} retrievals; hits+ {c.success:.4g}, hits- {c.failure:.4g}"),
        ("status", f'<span id="status">{esc(m.status)}</span>'),
        ("standing", f'<span id="standing">{esc(m.standing)}</span>'),
        ("hot tier", "eligible" if store.policy.hot(c, m.status) else "no"),
        ("contexts", esc(", ".join(m.contexts)) or "none"),
        ("provenance", "; ".join(links) or "none"),
        ("created / updated (UTC)", f"{_when(m.created)} / {_when(m.updated)}"),
    ]
    rows = "".join(f"<tr><th>{esc(k)}</th><td>{v}</td></tr>" for k, v in facts)
    metadata = f"<details><summary>metadata</summary><pre>{esc(json.dumps(m.metadata, indent=2))}</pre></details>"
    return f'<blockquote id="text">{esc(m.text)}</blockquote><table class="facts">{rows}</table>{metadata}'


def _episodes_table(points: list[Point], total: int) -> str:
    if not points:
        return ""
    rows = "".join(
        f"<tr><td>{_when(p.recorded)}</td><td>{esc(p.query[:120])}</td>"
        f'<td class="{"ok" if p.success else "fail"}">{"success" if p.success else "failure"}</td>'
        f"<td>{'retrieved' if p.direct else 'via provenance'}</td><td>{p.credit:.3g}</td>"
        f"<td>{p.worth:.3f}</td><td>[{p.lower:.3f}, {p.upper:.3f}]</td></tr>"
        for p in reversed(points)
    )
    return (
        f'<h2>Latest outcomes ({len(points)} of {total})</h2><table class="episodes"><thead><tr><th>recorded (UTC)'
        "</th><th>query</th><th>outcome</th><th>how</th><th>credit</th><th>worth after</th><th>interval</th></tr>"
        f"</thead><tbody>{rows}</tbody></table>"
    )
