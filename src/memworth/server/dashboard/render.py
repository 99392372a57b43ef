"""The dashboard's HTML, written from the page data of :mod:`memworth.server.dashboard.pages`.

Every page is a whole document (no JavaScript, nothing from a CDN) built around
:func:`layout`; every text a user stored goes through :func:`~memworth.server.dashboard.markup.esc`.
"""

import json
from collections.abc import Sequence
from urllib.parse import urlencode

from memworth import __version__
from memworth.server.dashboard.history import Point
from memworth.server.dashboard.markup import ROOT, esc, memory_url, num, snippet, when, with_query
from memworth.server.dashboard.pages import (
    CLASS_RANK,
    COLUMNS,
    LATEST_OUTCOMES,
    PAGE_SIZE,
    GovernancePage,
    MemoriesPage,
    MemoryPage,
    Row,
)
from memworth.server.dashboard.plot import worth_plot
from memworth.server.dashboard.sessions import Viewer
from memworth.store.records import STANDINGS, STATUSES, AuditEntry

__all__ = ["governance", "layout", "login", "memories", "memory", "notice", "refusal"]


def layout(title: str, body: str, viewer: Viewer | None = None) -> str:
    """A whole page: header with navigation (and who is signed in), ``body`` under an ``<h1>``, footer."""
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
        f'<a href="{ROOT}/governance">Governance</a><a href="{ROOT}/settings">Settings</a></nav>{who}</header>'
        f"<main><h1>{esc(title)}</h1>{body}</main><footer>memworth {esc(__version__)}</footer></body></html>"
    )


def login(next_path: str, problem: str | None = None) -> str:
    """The sign-in page; after signing in the browser goes to ``next_path``."""
    note = f'<p class="error" id="problem">{esc(problem)}</p>' if problem else ""
    body = (
        f"{note}<p>Sign in with an API key (<code>memworth keys create --namespace NAME --name LABEL</code>); "
        "the dashboard shows only that key's namespace.</p>"
        f'<form method="post" action="{ROOT}/login" class="login"><input type="hidden" name="next" '
        f'value="{esc(next_path)}"><label>API key <input type="password" name="key" id="key" autocomplete="off" '
        'required></label> <button type="submit" id="sign-in">Sign in</button></form>'
    )
    return layout("Sign in", body)


def refusal(status: int, title: str, reason: str) -> str:
    """The page of a request that was refused: its status, a title and why."""
    body = f'<p class="error" id="problem">{esc(reason)}</p><p><a href="{ROOT}">Back to the memories</a></p>'
    return layout(f"{status} {title}", body)


def notice(entry: AuditEntry | None) -> str:
    """The line that says which change a redirect just made (nothing without one)."""
    if entry is None:
        return ""
    return (
        f'<p class="notice" id="notice">Audit entry {entry.seq}: {esc(entry.action)} '
        f'<a href="{memory_url(entry.memory_id)}">{esc(entry.memory_id)}</a>, {esc(entry.field)} '
        f"{esc(entry.old)} → {esc(entry.new)}.</p>"
    )


def memories(page: MemoriesPage, viewer: Viewer, note: str) -> str:
    """The front page: filters, the table of memories and the pager."""
    body = note + _filter_form(page.filters, page.contexts, page.sort, page.order)
    body += _table(page.rows, page.filters, page.sort, page.order)
    body += _pager(page.total, page.page, page.first, {**page.filters, "sort": page.sort, "order": page.order})
    return layout("Memories", body, viewer)


def governance(page: GovernancePage, viewer: Viewer, note: str) -> str:
    """The governance page: proposals, each with its Approve button, and the recent changes."""
    body = note
    if page.guard is not None and page.guard.fired:
        body += (
            '<p id="guard" class="error" role="alert"><strong>Holdout guard:</strong> '
            f"{esc(page.guard.reason)}. Governance applies nothing until it clears; the rollbacks of "
            "its changes since it last led are proposed below.</p>"
        )
    elif page.guard is not None:
        body += f'<p id="guard">Holdout guard: {esc(page.guard.reason)}.</p>'
    body += "<h2>Proposals</h2>"
    if not page.proposals:
        body += '<p id="no-proposals">Nothing to propose: every memory is where its evidence puts it.</p>'
    else:
        body += (
            '<table id="proposals"><thead><tr><th>memory</th><th>text</th><th>action</th><th>change</th>'
            "<th>reason</th><th>numbers</th><th></th></tr></thead><tbody>"
        )
        for p in page.proposals:
            text = snippet(page.memories[p.memory_id].text) if p.memory_id in page.memories else ""
            numbers = ", ".join(f"{esc(k)} {esc(num(v))}" for k, v in p.numbers.items())
            body += (
                f'<tr data-id="{esc(p.memory_id)}"><td><a href="{memory_url(p.memory_id)}">{esc(p.memory_id)}</a>'
                f'</td><td>{text}</td><td><span class="action">{esc(p.action)}</span></td>'
                f"<td>{esc(p.field)}: {esc(p.old)} → {esc(p.new)}</td><td>{esc(p.reason)}</td>"
                f'<td class="numbers">{numbers}</td><td>{_approve_form(viewer, p.memory_id, p.action, "")}</td></tr>'
            )
        body += "</tbody></table>"
    body += _queue(page, viewer)
    body += f"<h2>Recent changes</h2>{_audit_table(viewer, page.changes, page.undoable, True, '')}"
    return layout("Governance", body, viewer)


def _queue(page: GovernancePage, viewer: Viewer) -> str:
    """The verification queue: each quarantined memory, why it was flagged, and the three verdicts."""
    body = "<h2>Awaiting verification</h2>"
    if not page.queue:
        return body + '<p id="no-queue">No memory is quarantined.</p>'
    body += (
        "<p>Recall serves these only as marked probes. Resolve each: confirmed (back to normal), stale "
        "(out of recall) or edited (new text replaces it). A verdict is audited and sticks.</p>"
        '<table id="queue"><thead><tr><th>memory</th><th>text</th><th>worth</th><th>flagged because</th>'
        "<th>probe test</th><th>verdict</th></tr></thead><tbody>"
    )
    for r in page.queue:
        flag = page.flags.get(r.id)
        why = esc(flag.reason) if flag is not None else ""
        pending = r.proposal if r.proposal is not None else r.held
        test = esc(f"{pending.action}: {pending.reason}") if pending is not None else "waiting for probe outcomes"
        form = (
            f'<form method="post" action="{ROOT}/queue/resolve" class="resolve">{_csrf(viewer)}'
            f'<input type="hidden" name="memory_id" value="{esc(r.id)}">'
            '<input type="text" name="reason" placeholder="why" required aria-label="why">'
            f'<button type="submit" name="verdict" value="confirmed" data-id="{esc(r.id)}">Confirmed</button>'
            '<select name="status" aria-label="a stale memory becomes">'
            '<option value="">suppressed (for Stale)</option><option value="deprecated">deprecated (for Stale)</option>'
            "</select>"
            f'<button type="submit" name="verdict" value="stale" data-id="{esc(r.id)}">Stale</button>'
            '<textarea name="text" rows="2" placeholder="corrected text (for Edited)" aria-label="corrected text">'
            "</textarea>"
            '<input type="text" name="new_id" maxlength="200" placeholder="new id (for Edited; optional)" '
            'aria-label="id of the new version">'
            f'<button type="submit" name="verdict" value="edited" data-id="{esc(r.id)}">Edited</button></form>'
        )
        body += (
            f'<tr data-id="{esc(r.id)}"><td><a href="{memory_url(r.id)}">{esc(r.id)}</a></td>'
            f"<td>{snippet(r.memory.text)}</td><td>{r.worth:.3f} over {r.retrievals:g}</td><td>{why}</td>"
            f"<td>{test}</td><td>{form}</td></tr>"
        )
    return body + "</tbody></table>"


def memory(page: MemoryPage, viewer: Viewer, note: str, outcomes_page: int = 1) -> str:
    """A memory's page: its facts, proposal, worth over time, its outcomes (newest first, page
    ``outcomes_page`` of :data:`LATEST_OUTCOMES` each) and audit trail."""
    m, proposal = page.memory, page.proposal
    here = memory_url(m.id)
    body = note + _details(page)
    if proposal is not None:
        body += (
            f'<div class="proposal">Governance proposes <span class="action">{esc(proposal.action)}</span> '
            f"({esc(proposal.field)}: {esc(proposal.old)} → {esc(proposal.new)}): {esc(proposal.reason)} "
            f"{_approve_form(viewer, m.id, proposal.action, here)}</div>"
        )
    body += _pin_form(page, viewer)
    body += _change_forms(page, viewer)
    body += "<h2>Worth over episodes</h2>" + worth_plot(page.points, page.theta_low, page.theta_high)
    if not page.consistent:
        rebuilt = page.rebuilt
        body += (
            '<p class="error">The outcome log rebuilds other counts than the live ones '
            f"({rebuilt.success:g}/{rebuilt.failure:g}/{rebuilt.n:g}); <code>memworth replay</code> tells why.</p>"
        )
    body += _episodes_table(page.points, outcomes_page, here)
    body += f"<h2>Audit trail</h2>{_audit_table(viewer, page.changes, page.undoable, False, here)}"
    return layout(f"Memory {m.id}", body, viewer)


# -- page parts -----------------------------------------------------------------------------


def _pin_form(page: MemoryPage, viewer: Viewer) -> str:
    """Whether a person's decision holds governance back, with Pin / Unpin."""
    m, pin = page.memory, page.pin
    if pin is None:
        state, verb, label = "Not pinned: governance may propose changes.", "pin", "Pin (keep governance away)"
    else:
        until = "until unpinned" if pin.until is None else f"until {pin.until:g} retrievals"
        held = "" if page.held is None else f" Held back: {esc(page.held.action)} ({esc(page.held.reason)})."
        state = f"Pinned by audit entry {pin.seq} ({esc(pin.action)}), {esc(until)}.{held}"
        verb, label = "unpin", "Unpin"
    return (
        f'<div class="pin" id="pin"><span>{state}</span> <form method="post" action="{ROOT}/{verb}" class="inline">'
        f'{_csrf(viewer)}<input type="hidden" name="memory_id" value="{esc(m.id)}">'
        '<input type="text" name="reason" placeholder="why" required aria-label="why">'
        f'<button type="submit" class="{verb}" data-id="{esc(m.id)}">{label}</button></form></div>'
    )


def _change_forms(page: MemoryPage, viewer: Viewer) -> str:
    """Change the memory by hand: its status, its standing, its text (a new version), or erase it."""
    m = page.memory
    hidden = f'{_csrf(viewer)}<input type="hidden" name="memory_id" value="{esc(m.id)}">'
    why = '<input type="text" name="reason" placeholder="why" required aria-label="why">'
    sets = ""
    for field, options, now in (("status", STATUSES, m.status), ("standing", STANDINGS, m.standing)):
        choices = "".join(
            f'<option value="{esc(o)}"{" selected" if o == now else ""}>{esc(o)}</option>' for o in options
        )
        sets += (
            f'<form method="post" action="{ROOT}/set" class="inline" id="set-{field}">{hidden}'
            f'<input type="hidden" name="field" value="{field}">'
            f'<label>{field} <select name="value">{choices}</select></label> {why} '
            f'<button type="submit" class="set" data-field="{field}">Set {field}</button></form>'
        )
    edit = ""
    if m.status != "archived":
        edit = (
            f'<form method="post" action="{ROOT}/edit" class="edit" id="edit">{hidden}'
            f'<label>new text<br><textarea name="text" rows="3" required>{esc(m.text)}</textarea></label><br>{why} '
            '<button type="submit" class="edit">Save as a new version</button> '
            "<small>(the new version starts with fresh counters; this one is archived with its own)</small></form>"
        )
    erase = (
        f'<form method="post" action="{ROOT}/delete" class="erase" id="erase">{hidden}{why} '
        f'<input type="text" name="confirm" placeholder="type the id to confirm" required aria-label="confirm id"> '
        '<button type="submit" class="danger">Erase for good</button> '
        "<small>(text, embedding and metadata are deleted; only a tombstone stays)</small></form>"
    )
    return f'<details class="changes" id="changes"><summary>Change this memory</summary>{sets}{edit}{erase}</details>'


def _csrf(viewer: Viewer) -> str:
    return "" if viewer.csrf is None else f'<input type="hidden" name="csrf" value="{esc(viewer.csrf)}">'


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


def _bar(row: Row) -> str:
    return (
        '<svg class="bar" width="64" height="10" viewBox="0 0 64 10" aria-hidden="true">'
        '<rect width="64" height="10" fill="#eef1f4"/>'
        f'<rect x="{row.lower * 64:.1f}" y="3" width="{max(row.upper - row.lower, 0) * 64:.1f}" height="4" '
        f'fill="#9ec5fe"/><rect x="{max(row.worth * 64 - 1, 0):.1f}" width="2" height="10" fill="#1d4ed8"/></svg>'
    )


def _table(rows: list[Row], filters: dict[str, str | None], sort: str, order: str) -> str:
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
            f'<tr data-id="{esc(m.id)}"><td class="id"><a href="{memory_url(m.id)}">{esc(m.id)}</a></td>'
            f'<td class="text">{snippet(m.text)}</td><td class="worth">{r.worth:.3f} {_bar(r)}</td>'
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


def _approve_form(viewer: Viewer, memory_id: str, action: str, next_path: str) -> str:
    return (
        f'<form method="post" action="{ROOT}/governance/approve" class="inline">{_csrf(viewer)}'
        f'<input type="hidden" name="memory_id" value="{esc(memory_id)}">'
        f'<input type="hidden" name="action" value="{esc(action)}">'
        f'<input type="hidden" name="next" value="{esc(next_path)}">'
        f'<button type="submit" class="approve" data-id="{esc(memory_id)}">Approve {esc(action)}</button></form>'
    )


def _audit_table(
    viewer: Viewer, entries: list[AuditEntry], undoable: frozenset[int], link: bool, next_path: str
) -> str:
    """Audit entries (newest first), with an Undo button on each of ``undoable``."""
    if not entries:
        return '<p class="empty-audit">No changes yet.</p>'
    rows = ""
    for e in entries:
        who = f'<a href="{memory_url(e.memory_id)}">{esc(e.memory_id)}</a>' if link else esc(e.memory_id)
        button = ""
        if e.seq in undoable:
            button = (
                f'<form method="post" action="{ROOT}/audit/{e.seq}/undo" class="inline">{_csrf(viewer)}'
                f'<input type="hidden" name="next" value="{esc(next_path)}">'
                f'<button type="submit" class="undo" data-seq="{e.seq}">Undo</button></form>'
            )
        rows += (
            f'<tr data-seq="{e.seq}"><td>{e.seq}</td><td>{when(e.at)}</td><td>{who}</td><td>{esc(e.action)}</td>'
            f"<td>{esc(e.field)}: {esc(e.old)} → {esc(e.new)}</td><td>{esc(e.reason)}</td><td>{button}</td></tr>"
        )
    return (
        '<table class="audit"><thead><tr><th>#</th><th>when (UTC)</th><th>memory</th><th>action</th><th>change</th>'
        f"<th>reason</th><th></th></tr></thead><tbody>{rows}</tbody></table>"
    )


def _details(page: MemoryPage) -> str:
    m, c, klass = page.memory, page.memory.counts, page.klass
    links = [
        name + ": " + ", ".join(f'<a href="{memory_url(x)}">{esc(x)}</a>' for x in ids)
        for name, ids in (("derived from", m.derived_from), ("part of", m.part_of))
        if ids
    ]
    facts = [
        ("worth", f"{klass.worth:.3f}"),
        ("95% interval (Wilson)", f"[{page.lower:.3f}, {page.upper:.3f}]"),
        (
            "class",
            f'<span class="class-{esc(klass.value_class.value)}">{esc(klass.value_class.value)}</span> '
            f"({esc(klass.reason)})",
        ),
        ("evidence", f"{c.n:g} retrievals; hits+ {c.success:.4g}, hits- {c.failure:.4g}"),
        ("status", f'<span id="status">{esc(m.status)}</span>'),
        ("standing", f'<span id="standing">{esc(m.standing)}</span>'),
        ("hot tier", "eligible" if page.hot else "no"),
        ("contexts", esc(", ".join(m.contexts)) or "none"),
        ("provenance", "; ".join(links) or "none"),
        ("created / updated (UTC)", f"{when(m.created)} / {when(m.updated)}"),
        ("expires (UTC)", "never" if m.expires is None else when(m.expires)),
    ]
    rows = "".join(f"<tr><th>{esc(k)}</th><td>{v}</td></tr>" for k, v in facts)
    metadata = f"<details><summary>metadata</summary><pre>{esc(json.dumps(m.metadata, indent=2))}</pre></details>"
    return f'<blockquote id="text">{esc(m.text)}</blockquote><table class="facts">{rows}</table>{metadata}'


def _episodes_table(every: list[Point], number: int, here: str) -> str:
    """Page ``number`` of the outcomes (newest first), with links to the newer and older pages."""
    total = len(every)
    if not total:
        return ""
    pages = -(-total // LATEST_OUTCOMES)
    number = min(number, pages)
    end = total - (number - 1) * LATEST_OUTCOMES
    points = every[max(0, end - LATEST_OUTCOMES) : end]
    links = []
    if number > 1:
        links.append(f'<a href="{esc(with_query(here, outcomes=number - 1))}#outcomes" rel="prev">newer</a>')
    if number < pages:
        links.append(f'<a href="{esc(with_query(here, outcomes=number + 1))}#outcomes" rel="next">older</a>')
    pager = f'<p class="pager">page {number} of {pages} {" ".join(links)}</p>'
    first, last = total - end + 1, total - end + len(points)
    rows = "".join(
        f"<tr><td>{when(p.recorded)}</td><td>{esc(p.query[:120])}</td>"
        f'<td class="{"ok" if p.success else "fail"}">{"success" if p.success else "failure"}</td>'
        f"<td>{'retrieved' if p.direct else 'via provenance'}</td><td>{p.credit:.3g}</td>"
        f"<td>{p.worth:.3f}</td><td>[{p.lower:.3f}, {p.upper:.3f}]</td></tr>"
        for p in reversed(points)
    )
    return (
        f'<h2 id="outcomes">Outcomes {first}-{last} of {total}, newest first</h2><table class="episodes"><thead><tr>'
        "<th>recorded (UTC)</th><th>query</th><th>outcome</th><th>how</th><th>credit</th><th>worth after</th>"
        f"<th>interval</th></tr></thead><tbody>{rows}</tbody></table>{pager}"
    )
