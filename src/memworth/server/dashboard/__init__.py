"""The web dashboard under ``/dashboard``: memories and their worth, one memory's history, governance.

Pages are HTML rendered on the server (no JavaScript, nothing from a CDN) and every text
a user stored is escaped. Signing in takes an API key, as the API does, and the pages
show and change only that key's namespace. The key stays on the server in a session; the
browser holds a random session id in an HttpOnly, SameSite=Strict cookie, every form
carries the session's CSRF token and a POST from another origin is refused. A change is a
POST answered with a redirect (POST-redirect-GET). A page that cannot be shown is an HTML
page with its 4xx status, never a traceback.

The parts, one module each: ``pages`` reads what each page shows from the store (no HTML,
no HTTP), ``history`` rebuilds a memory's worth over time and ``plot`` draws it, ``render``
and ``markup`` write the HTML, ``sessions`` keeps who is signed in, ``forms`` reads a POST,
``responses`` answers with a page or a refusal, ``settings_html`` writes the (read-only)
settings page, and ``routes`` ties them to the URLs.
"""

from memworth.server.dashboard.history import Point, trajectory
from memworth.server.dashboard.plot import worth_plot
from memworth.server.dashboard.routes import dashboard_router

__all__ = ["Point", "dashboard_router", "trajectory", "worth_plot"]
