"""The dashboard's routes: sign in and out, the four pages (memories, a memory, governance,
settings), and the changes (approve, undo, resolve, pin, and on a memory's page: edit,
status, standing, erase).

Each page route finds the viewer, reads its page data on the viewer's store object of the
app's pool, under its lock (:mod:`memworth.server.dashboard.pages`) and writes it out
(:mod:`memworth.server.dashboard.render`). A change is a POST, checked for its origin and
CSRF token, answered with a redirect (POST-redirect-GET) whose page announces the change.
"""

import hmac
from collections.abc import Callable
from importlib import resources
from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response

from memworth.errors import AuthError, ConflictError, StoreError
from memworth.server import long_calls
from memworth.server.answers import with_answer
from memworth.server.dashboard import pages, render, settings_html
from memworth.server.dashboard.forms import Form, from_another_site, safe_next, with_notice
from memworth.server.dashboard.markup import ROOT, memory_url
from memworth.server.dashboard.responses import Refused, error_pages, html_page, login_page
from memworth.server.dashboard.sessions import COOKIE, SESSION_SECONDS, Sessions, Viewer
from memworth.server.keys import authenticate
from memworth.server.pool import StorePool
from memworth.store import MemoryStore
from memworth.store.records import AuditEntry

__all__ = ["dashboard_router"]


def dashboard_router(pool: StorePool) -> APIRouter:
    """The dashboard's routes over the store objects of ``pool`` (a call runs on the viewer's
    tenant's object, under its lock: :meth:`StorePool.run`)."""
    call = pool.run
    router = APIRouter(prefix=ROOT, include_in_schema=False)

    def changed(namespace: str, change: Callable[[MemoryStore], AuditEntry], to: Callable[[AuditEntry], str]) -> Response:
        """A change made through a form, answered by a redirect to ``to(its audit entry)`` with the
        entry as the notice; the redirect is built inside the change's transaction, so a change
        whose answer fails is not kept (:func:`memworth.server.answers.with_answer`)."""
        return call(
            namespace,
            lambda s: with_answer(s, change, lambda entry: RedirectResponse(with_notice(to(entry), entry.seq), 303)),
        )
    sessions = Sessions()
    css = resources.files("memworth.server").joinpath("static/dashboard.css").read_text(encoding="utf-8")

    def viewer(request: Request) -> Viewer:
        """Who asks: by API key in a header, else by session cookie; refused (sign in) when neither is valid."""
        header_key = request.headers.get("x-api-key")
        authorization = request.headers.get("authorization")
        if authorization is not None and not authorization.strip().lower().startswith("bearer "):
            authorization = None  # another scheme (Basic, for a proxy in front) carries no key
        csrf: str | None = None
        if header_key is None and authorization is None:
            session = sessions.find(request.cookies.get(COOKIE, ""))
            if session is not None:
                header_key, csrf = session.key, session.csrf
        target = quote(request.url.path, safe="/") + (f"?{request.url.query}" if request.url.query else "")
        if request.method != "GET":
            target = ROOT
        if header_key is None and authorization is None:  # nobody has tried to sign in: no error to show
            raise Refused(401, "Sign in", "", login_next=safe_next(target))
        try:
            info = call(None, lambda s: authenticate(s, authorization, header_key, write=False))
        except AuthError as exc:
            raise Refused(401, "Sign in", exc.reason, login_next=safe_next(target)) from None
        return Viewer(info.namespace, csrf, info.name, info.read_only)

    def changer(request: Request, form: dict[str, str] | None) -> tuple[Viewer, dict[str, str]]:
        """The viewer of a POST that may change something, after the origin and CSRF checks."""
        if from_another_site(request):
            raise Refused(403, "Forbidden", "a form from another site may not change this store")
        if form is None:
            raise Refused(400, "Bad request", "expected a URL-encoded form")
        who = viewer(request)
        if who.csrf is not None and not hmac.compare_digest(form.get("csrf", "").encode(), who.csrf.encode()):
            raise Refused(403, "Forbidden", "the form's CSRF token does not match this session; reload the page")
        if who.read_only and request.url.path != f"{ROOT}/logout":
            raise Refused(
                403, "Forbidden", f"API key {who.key_name!r} is read-only: it may look but not change anything"
            )
        return who, form

    def notice(request: Request, namespace: str) -> str:
        seq = request.query_params.get("notice", "")
        return render.notice(
            call(namespace, lambda s: pages.notice_entry(s, namespace, seq)) if seq.isdigit() else None
        )

    @router.get("/static/dashboard.css")
    def stylesheet() -> Response:
        return Response(css, media_type="text/css", headers={"Cache-Control": "max-age=3600"})

    @router.get("/login")
    def login_form(request: Request) -> Response:
        return login_page(safe_next(request.query_params.get("next")), status=200)

    @router.post("/login")
    @error_pages
    def login(request: Request, form: Form) -> Response:
        if from_another_site(request):
            raise Refused(403, "Forbidden", "a form from another site may not sign in here")
        fields = form or {}
        target = safe_next(fields.get("next"))
        key = fields.get("key", "").strip()
        if not key:
            return login_page(target, "give an API key")
        try:
            call(None, lambda s: authenticate(s, None, key, write=False))
        except AuthError as exc:
            return login_page(target, exc.reason)
        sid = sessions.open(key)
        response = RedirectResponse(target, status_code=303)
        secure = request.url.scheme == "https"
        response.set_cookie(
            COOKIE, sid, max_age=SESSION_SECONDS, path=ROOT, httponly=True, samesite="strict", secure=secure
        )
        return response

    @router.post("/logout")
    @error_pages
    def logout(request: Request, form: Form) -> Response:
        changer(request, form)
        sessions.close(request.cookies.get(COOKIE, ""))
        response = RedirectResponse(f"{ROOT}/login", status_code=303)
        response.delete_cookie(COOKIE, path=ROOT)
        return response

    @router.get("")
    @error_pages
    def memories(request: Request) -> Response:
        who = viewer(request)
        q = request.query_params
        status, context, klass = q.get("status") or None, q.get("context") or None, q.get("class") or None
        sort, order, page = q.get("sort") or "worth", q.get("order") or "desc", q.get("page") or "1"
        problem = pages.query_problem(status, klass, sort, order, page)
        if problem is not None:
            raise Refused(422, "Invalid request", problem)
        data = call(
            who.namespace,
            lambda s: pages.memories_page(
                s,
                who.namespace,
                status=status,
                context=context,
                value_class=klass,
                sort=sort,
                order=order,
                page=int(page),
            ),
        )
        return html_page(render.memories(data, who, notice(request, who.namespace)))

    @router.get("/governance")
    @error_pages
    def governance(request: Request) -> Response:
        who = viewer(request)
        data = pool.long(who.namespace, pages.governance_page, then=long_calls.rescan)  # a govern: a long call
        return html_page(render.governance(data, who, notice(request, who.namespace)))

    @router.get("/settings")
    @error_pages
    def settings(request: Request) -> Response:
        who = viewer(request)
        data = call(who.namespace, pages.settings_page)
        return html_page(settings_html.settings(data, who))

    @router.post("/governance/approve")
    @error_pages
    def approve(request: Request, form: Form) -> Response:
        who, fields = changer(request, form)
        memory_id, action = fields.get("memory_id", ""), fields.get("action", "")
        try:
            return changed(
                who.namespace,
                lambda s: s.approve(memory_id, action, actor=who.actor, namespace=who.namespace),
                lambda entry: safe_next(fields.get("next") or f"{ROOT}/governance"),
            )
        except StoreError as exc:  # rate-limited, or changed meanwhile
            raise Refused(exc.status, "Not applied", str(exc)) from None  # 409 changed, 429 rate limit

    @router.post("/queue/resolve")
    @error_pages
    def resolve(request: Request, form: Form) -> Response:
        who, fields = changer(request, form)
        memory_id, verdict = fields.get("memory_id", ""), fields.get("verdict", "")
        reason = fields.get("reason") or "resolved in the dashboard"
        # what the form leaves empty is not given; the rest goes to the one library call, which
        # refuses (422, naming the field) what the verdict would not use: a new id with Confirmed
        text, new_id, status = (fields.get(name) or None for name in ("text", "new_id", "status"))
        try:
            return changed(
                who.namespace,
                lambda s: s.resolve(
                    memory_id,
                    verdict,
                    reason=reason,
                    text=text,
                    new_id=new_id,
                    status=status,
                    actor=who.actor,
                    namespace=who.namespace,
                ),
                lambda entry: f"{ROOT}/governance",
            )
        except ConflictError as exc:  # not awaiting verification (resolved meanwhile)
            raise Refused(409, "Not resolved", str(exc)) from None

    @router.post("/pin")
    @error_pages
    def pin(request: Request, form: Form) -> Response:
        return _pin_or_unpin(request, form, "pin")

    @router.post("/unpin")
    @error_pages
    def unpin(request: Request, form: Form) -> Response:
        return _pin_or_unpin(request, form, "unpin")

    def _pin_or_unpin(request: Request, form: Form, verb: str) -> Response:
        who, fields = changer(request, form)
        memory_id, reason = fields.get("memory_id", ""), fields.get("reason") or f"{verb}ned in the dashboard"
        return changed(
            who.namespace,
            lambda s: (s.pin if verb == "pin" else s.unpin)(
                memory_id, reason=reason, actor=who.actor, namespace=who.namespace
            ),
            lambda entry: memory_url(memory_id),
        )

    @router.post("/delete")
    @error_pages
    def delete(request: Request, form: Form) -> Response:
        """Erase a memory for good (its tombstone is the notice); back to the memories."""
        who, fields = changer(request, form)
        memory_id, reason = fields.get("memory_id", ""), fields.get("reason", "")
        if fields.get("confirm") != memory_id:
            raise Refused(422, "Not erased", "type the memory's id to confirm that it is to be erased for good")
        return changed(
            who.namespace,
            lambda s: s.delete(memory_id, reason=reason, actor=who.actor, namespace=who.namespace),
            lambda entry: ROOT,
        )

    @router.post("/edit")
    @error_pages
    def edit(request: Request, form: Form) -> Response:
        """Replace a memory's text (a new version); on to the new version's page."""
        who, fields = changer(request, form)
        memory_id, reason, text = fields.get("memory_id", ""), fields.get("reason", ""), fields.get("text", "")
        try:
            return changed(
                who.namespace,
                lambda s: s.edit(memory_id, text, reason=reason, actor=who.actor, namespace=who.namespace),
                lambda entry: memory_url(entry.settings["replaced_by"]),
            )
        except ConflictError as exc:  # archived meanwhile (replaced already)
            raise Refused(409, "Not edited", str(exc)) from None

    @router.post("/set")
    @error_pages
    def set_field(request: Request, form: Form) -> Response:
        """Set a memory's status or standing by hand (the form's ``field``)."""
        who, fields = changer(request, form)
        memory_id, reason, field, value = (fields.get(k, "") for k in ("memory_id", "reason", "field", "value"))
        if field not in ("status", "standing"):
            raise Refused(422, "Invalid request", f"field must be status or standing, got {field!r}")
        try:
            return changed(
                who.namespace,
                lambda s: (s.set_status if field == "status" else s.set_standing)(
                    memory_id, value, reason=reason, actor=who.actor, namespace=who.namespace
                ),
                lambda entry: memory_url(memory_id),
            )
        except StoreError as exc:  # changed meanwhile
            raise Refused(exc.status, "Not changed", str(exc)) from None

    @router.post("/audit/{seq}/undo")
    @error_pages
    def undo(seq: str, request: Request, form: Form) -> Response:
        who, fields = changer(request, form)
        if not seq.isdigit():
            raise Refused(404, "Not found", f"no audit entry {seq!r}")
        try:
            return changed(
                who.namespace,
                lambda s: s.restore(
                    int(seq), reason="undone in the dashboard", actor=who.actor, namespace=who.namespace
                ),
                lambda entry: safe_next(fields.get("next") or f"{ROOT}/governance"),
            )
        except StoreError as exc:  # the memory changed since that entry
            raise Refused(exc.status, "Not undone", str(exc)) from None

    @router.get("/memory")
    @error_pages
    def memory_by_query(request: Request) -> Response:
        """A memory's page by ``?id=``: the address of the ids ``.`` and ``..``, which browsers
        drop from a path (:func:`memworth.server.dashboard.markup.memory_url`); any id works."""
        memory_id = request.query_params.get("id")
        if memory_id is None:
            raise Refused(422, "Invalid request", "id: give the memory's id, /dashboard/memory?id=...")
        return memory(memory_id, request)

    @router.get("/memories/{memory_id:path}")
    @error_pages
    def memory(memory_id: str, request: Request) -> Response:
        who = viewer(request)
        number = request.query_params.get("outcomes") or "1"
        if not number.isdigit() or int(number) < 1 or len(number) > 9:
            raise Refused(422, "Invalid request", f"outcomes must be a page number from 1, got {number!r}")
        data = call(who.namespace, lambda s: pages.memory_page(s, memory_id, who.namespace))
        return html_page(render.memory(data, who, notice(request, who.namespace), int(number)))

    @router.get("/{rest:path}")
    @error_pages
    def not_found(rest: str, request: Request) -> Response:
        if rest == "":
            return RedirectResponse(ROOT, status_code=308)
        raise Refused(404, "Not found", f"no dashboard page at {request.url.path}")

    return router
