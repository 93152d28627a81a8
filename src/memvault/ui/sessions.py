"""Logins and sessions of the review UI, in memory only (a restart logs everyone out).

``memvault ui`` prints a URL with a one-time login token (256 random bits): its first use
makes a session and spends it. ``/ui/`` of ``memvault serve`` logs in with an API key: the
session keeps the key's id, never its secret. A session is a random 256-bit id in an HttpOnly,
SameSite=Strict cookie, with its own CSRF token (every POST must carry it) and the plans
(previews awaiting a confirmation) made in it. Sessions end after :data:`IDLE_SECONDS` without
a request, or :data:`MAX_SECONDS` after login.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from .. import crypto

__all__ = ["Session", "Sessions", "LoginToken", "Plan", "new_secret", "IDLE_SECONDS", "MAX_SECONDS"]

#: A session unused this long is gone.
IDLE_SECONDS = 2 * 3600.0
#: A session older than this is gone, used or not.
MAX_SECONDS = 12 * 3600.0
#: Sessions kept at most (the least recently used goes first), logged in and waiting for a login
#: apart (requests that never log in cannot push a login out).
MAX_SESSIONS = 256
#: Plans a session keeps (the oldest goes first), and how long one stays valid.
MAX_PLANS = 16
PLAN_SECONDS = 15 * 60.0


def new_secret() -> str:
    """256 random bits as 64 hexadecimal digits."""
    return crypto.random_bytes(32).hex()


def same(a: str, b: str) -> bool:
    """Constant-time comparison of two secrets given as text."""
    return crypto.consteq(a.encode("utf-8", "replace"), b.encode("utf-8", "replace"))


@dataclass
class Plan:
    """A preview waiting for its confirmation: what it is (``kind``, ``target``), the library's
    dry-run result to hand back as ``expect`` (or the job computing it), the word the operator
    must type (redaction), and when it was made."""

    id: str
    kind: str
    target: dict[str, str]
    made: float
    store_id: str
    word: str = ""
    job: Any = None
    result: Any = None


@dataclass
class Session:
    """One logged-in browser."""

    id: str
    csrf: str
    made: float
    seen: float
    #: Under ``serve``: the API key's id (its rights are read again at each request).
    key_id: str = ""
    plans: dict[str, Plan] = field(default_factory=dict)

    def add_plan(self, plan: Plan) -> None:
        """Keep ``plan`` (the oldest goes beyond :data:`MAX_PLANS`)."""
        self.plans[plan.id] = plan
        while len(self.plans) > MAX_PLANS:
            self.plans.pop(next(iter(self.plans)))

    def plan(self, plan_id: str, kind: str, store_id: str) -> Plan | None:
        """The live plan ``plan_id`` of ``kind`` on ``store_id`` (None: unknown, expired, other)."""
        plan = self.plans.get(plan_id)
        if plan is None or plan.kind != kind or plan.store_id != store_id:
            return None
        if time.time() - plan.made > PLAN_SECONDS:
            self.plans.pop(plan_id, None)
            return None
        return plan


class Sessions:
    """The sessions of one UI process; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_id: dict[str, Session] = {}
        self._waiting: dict[str, Session] = {}

    def new(self, key_id: str = "", *, waiting: bool = False) -> Session:
        """A new session; ``waiting``: one that only waits for a login (its own pool). The least
        recently used of a pool goes beyond :data:`MAX_SESSIONS`."""
        now = time.time()
        session = Session(new_secret(), new_secret(), now, now, key_id)
        with self._lock:
            pool = self._waiting if waiting else self._by_id
            pool[session.id] = session
            while len(pool) > MAX_SESSIONS:
                oldest = min(pool.values(), key=lambda s: s.seen)
                del pool[oldest.id]
        return session

    def get(self, session_id: str | None) -> Session | None:
        """The live session with this id (None: none, or it expired)."""
        if not session_id or len(session_id) != 64:
            return None
        now = time.time()
        with self._lock:
            pool = self._by_id if session_id in self._by_id else self._waiting
            session = pool.get(session_id)
            if session is None:
                return None
            if now - session.seen > IDLE_SECONDS or now - session.made > MAX_SECONDS:
                del pool[session_id]
                return None
            session.seen = now
            return session

    def drop(self, session_id: str) -> None:
        """End a session."""
        with self._lock:
            self._by_id.pop(session_id, None)
            self._waiting.pop(session_id, None)


class LoginToken:
    """The one-time token of ``memvault ui``'s URL: :meth:`spend` accepts it once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._value: str | None = new_secret()

    @property
    def value(self) -> str:
        """The token (before it is spent), for the printed URL."""
        if self._value is None:
            raise RuntimeError("the login token was spent")
        return self._value

    def spend(self, offered: str) -> bool:
        """Whether ``offered`` is the token; if it is, it can never be used again."""
        with self._lock:
            if self._value is None or not same(offered, self._value):
                return False
            self._value = None
            return True
