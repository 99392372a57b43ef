"""The settings page's HTML: the settings in force by part, and the versions the store kept.

Read-only: settings change through ``PUT /v1/config`` with an admin key, ``memworth config
set`` or a TOML file; the page says so. Every value and name goes through
:func:`~memworth.server.dashboard.markup.esc` (a source's name, an actor's name are text
someone typed).
"""

import json

from memworth.server.dashboard.markup import esc, when
from memworth.server.dashboard.pages import SettingsPage
from memworth.server.dashboard.render import layout
from memworth.server.dashboard.sessions import Viewer

__all__ = ["settings"]


def settings(page: SettingsPage, viewer: Viewer) -> str:
    """The settings page: one table per part, then the history of versions (newest first)."""
    kept = f"version {page.version}" if page.version else "the defaults (no version kept yet)"
    body = (
        f'<p id="version">In force: {esc(kept)}. The settings are the whole store\'s, for every namespace. '
        "Change them with <code>memworth config set PART.SETTING=VALUE</code> or "
        "<code>PUT /v1/config</code> with an admin key; a store object follows a new version within a second.</p>"
    )
    for part, rows in page.parts:
        body += (
            f'<h2 id="part-{esc(part)}">{esc(part)}</h2><table class="settings" data-part="{esc(part)}">'
            "<thead><tr><th>setting</th><th>value</th></tr></thead><tbody>"
        )
        for name, value in rows:
            body += (
                f'<tr data-setting="{esc(part)}.{esc(name)}"><td>{esc(name)}</td>'
                f"<td><code>{esc(_shown(value))}</code></td></tr>"
            )
        body += "</tbody></table>"
    body += "<h2>History</h2>"
    if not page.history:
        body += '<p id="no-history">No version kept: the store runs on the defaults.</p>'
        return layout("Settings", body, viewer)
    body += (
        '<table id="history"><thead><tr><th>version</th><th>when (UTC)</th><th>who</th><th>changed</th></tr>'
        "</thead><tbody>"
    )
    for v in page.history:
        at = v.get("at")
        changed = ", ".join(esc(name) for name in v.get("changed") or []) or "(first version)"
        body += (
            f'<tr data-version="{esc(v.get("version"))}"><td>{esc(v.get("version"))}</td>'
            f"<td>{esc(when(at)) if isinstance(at, (int, float)) else 'before settings were kept'}</td>"
            f"<td>{esc(v.get('actor'))}</td><td>{changed}</td></tr>"
        )
    body += "</tbody></table>"
    return layout("Settings", body, viewer)


def _shown(value: object) -> str:
    """A setting's value as JSON text (an object's ``type`` and fields included)."""
    return json.dumps(value, sort_keys=False, ensure_ascii=False)
