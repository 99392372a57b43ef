"""Signed-in browsers: a random session id in a cookie stands for an API key kept on the server.

Each session has its own CSRF token, which every form of its pages carries, and expires
after :data:`SESSION_SECONDS`; at most :data:`MAX_SESSIONS` are kept (the oldest go first).

Examples
--------
>>> sessions = Sessions()
>>> sid = sessions.open("mw_key")
>>> sessions.find(sid).key
'mw_key'
>>> sessions.close(sid)
>>> sessions.find(sid) is None
True
"""

import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["COOKIE", "MAX_SESSIONS", "SESSION_SECONDS", "Session", "Sessions", "Viewer"]

COOKIE = "memworth_session"
SESSION_SECONDS = 8 * 3600
MAX_SESSIONS = 1000


@dataclass
class Session:
    """The API key a browser signed in with, its CSRF token and when it expires (seconds since the epoch)."""

    key: str
    csrf: str
    expires: float


@dataclass(frozen=True)
class Viewer:
    """Who looks at a page: the namespace of their key, and the CSRF token their forms carry."""

    namespace: str
    csrf: str | None  # None: signed in by header, which no other site can make a browser send
    key_name: str | None = None  # the name of the key: the audit log names it for the changes made here
    read_only: bool = False  # a read-only key: its pages show, its forms are refused

    @property
    def actor(self) -> str:
        """Who the audit log says made a change in the dashboard."""
        return "dashboard" if self.key_name is None else f"dashboard (api key {self.key_name})"


class Sessions:
    """The sessions of one dashboard, by session id; safe to use from many threads.

    Parameters
    ----------
    limit
        Most sessions kept; opening one more ends the one closest to expiring.
    clock
        Seconds since the epoch (a parameter so that tests can move time).
    """

    def __init__(self, limit: int = MAX_SESSIONS, clock: Callable[[], float] = time.time) -> None:
        self.limit = limit
        self.clock = clock
        self._by_id: dict[str, Session] = {}
        self._lock = threading.Lock()

    def find(self, sid: str) -> Session | None:
        """The session ``sid`` names, unless it is unknown or expired."""
        with self._lock:
            session = self._by_id.get(sid)
        if session is not None and session.expires < self.clock():
            return None
        return session

    def open(self, key: str) -> str:
        """A new session for ``key`` (expired ones, and the oldest past the limit, go); returns its id."""
        sid, now = secrets.token_urlsafe(32), self.clock()
        with self._lock:
            for old in [s for s, v in self._by_id.items() if v.expires < now]:
                del self._by_id[old]
            while len(self._by_id) >= self.limit:
                del self._by_id[min(self._by_id, key=lambda s: self._by_id[s].expires)]
            self._by_id[sid] = Session(key, secrets.token_urlsafe(32), now + SESSION_SECONDS)
        return sid

    def close(self, sid: str) -> None:
        """End session ``sid`` (nothing happens for an unknown id)."""
        with self._lock:
            self._by_id.pop(sid, None)
