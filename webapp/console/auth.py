"""Console logins: users from LEASEHOLD_USERS, session login, roles, throttling.

LEASEHOLD_USERS is ``name:password-hash:role,...``. A werkzeug hash contains
colons itself (``scrypt:32768:8:1$salt$hex``), so an entry is split at its
first and last colon. Roles: ``viewer`` (reads) and ``operator`` (reads and
acts). Hashes are made with ``leasehold hash-password``.

The session (Flask's signed cookie) holds the user's name, a fingerprint of
their password hash (changing the password ends their sessions) and the login
time; the user and role are looked up again on every request, so removing a
user or changing a role takes effect at once.

In a host app (the ``Leasehold`` extension with ``authorize=``) the host's
login decides instead: its hook returns ``(role, name)`` or None on every
request, and the console's own login, logout and session keys are unused.

Login throttling counts failed logins in the store (see LoginThrottle), so
every gunicorn worker shares one allowance, under three limits: per (user,
client address), per user from any address (an attacker rotating addresses,
or forging X-Forwarded-For behind too many trusted proxies, still meets it),
and for every failed login together (each costs a password hash, so the CPU
an attack can burn is bounded). Behind a proxy the client address is right
only with LEASEHOLD_TRUSTED_PROXIES set to the number of proxies (ProxyFix);
otherwise every client shares the proxy's address and one user's lock-out is
everyone's.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import wraps
from typing import Any

from flask import Flask, abort, current_app, g, request, session
from werkzeug.security import check_password_hash, generate_password_hash

from store.base import JobStore
from store.spec import MAX_OPERATOR_NAME_LEN
from webapp.config import ConfigError, WebSettings

ROLES = ("viewer", "operator")
#: Failed logins allowed per (username, address) within THROTTLE_WINDOW_S seconds.
THROTTLE_ATTEMPTS = 5
THROTTLE_WINDOW_S = 300.0
#: Failed logins allowed per username, from any address, within USER_THROTTLE_WINDOW_S seconds.
USER_THROTTLE_ATTEMPTS = 20
USER_THROTTLE_WINDOW_S = 900.0
#: Failed logins allowed in all, any user and address, within GLOBAL_THROTTLE_WINDOW_S
#: seconds: at most this many password hashes (scrypt, tens of ms each) a window for failures.
GLOBAL_THROTTLE_ATTEMPTS = 100
GLOBAL_THROTTLE_WINDOW_S = 60.0


@dataclass(frozen=True, slots=True)
class User:
    name: str
    password_hash: str
    role: str

    @property
    def is_operator(self) -> bool:
        return self.role == "operator"

    @property
    def fingerprint(self) -> str:
        """A short digest of the password hash; sessions carry it."""
        return hashlib.sha256(self.password_hash.encode()).hexdigest()[:16]


def parse_users(raw: str) -> dict[str, User]:
    """Users from LEASEHOLD_USERS. Raises ConfigError naming the variable and
    the entry (never the hash)."""
    users: dict[str, User] = {}
    for index, entry in enumerate(e.strip() for e in (raw or "").split(",")):
        if not entry:
            continue
        name, _, rest = entry.partition(":")
        password_hash, _, role = rest.rpartition(":")
        where = f"LEASEHOLD_USERS entry {index + 1} ({name or '?'})"
        if not name.strip() or not password_hash:
            raise ConfigError(f"{where} must be name:password-hash:role")
        if role not in ROLES:
            raise ConfigError(f"{where} has role {role!r}; expected viewer or operator")
        if len(name.strip()) > MAX_OPERATOR_NAME_LEN:
            raise ConfigError(f"{where} has a name longer than {MAX_OPERATOR_NAME_LEN} characters")
        if name in users:
            raise ConfigError(f"{where} repeats the user name")
        users[name.strip()] = User(name.strip(), password_hash, role)
    return users


@dataclass(frozen=True, slots=True)
class Limit:
    """At most ``attempts`` failures within a window of ``window_s`` seconds
    opened by the first; ``key`` makes the counter's key from (user, address)."""

    key: Callable[[str, str], str]
    attempts: int
    window_s: float


#: The limits every login attempt is checked against, the first the one a success clears.
LIMITS = (
    Limit(lambda name, address: "login:" + json.dumps([name, address]), THROTTLE_ATTEMPTS, THROTTLE_WINDOW_S),
    Limit(lambda name, _: "login-user:" + json.dumps(name), USER_THROTTLE_ATTEMPTS, USER_THROTTLE_WINDOW_S),
    Limit(lambda _name, _address: "login-all", GLOBAL_THROTTLE_ATTEMPTS, GLOBAL_THROTTLE_WINDOW_S),
)


class LoginThrottle:
    """Failed logins counted in the store (``JobStore.record_failure``), so
    every gunicorn worker and every host process shares one count, under
    each of ``limits`` (default LIMITS: per user and address, per user, in
    all): once a limit's failures reach its attempts, logins it covers are
    refused until its window closes. A success clears the first limit's
    count only (the others close with their windows, so a login between an
    attacker's guesses does not reset their allowance). ``store`` gives the
    store at call time."""

    def __init__(self, store: Callable[[], JobStore], limits: tuple[Limit, ...] = LIMITS) -> None:
        self.store = store
        self.limits = limits

    def retry_after(self, key: tuple[str, str]) -> float:
        """Seconds until ``key`` (user, address) may try again (0 when it may now)."""
        store, wait = self.store(), 0.0
        for limit in self.limits:
            n, left = store.failure_count(limit.key(*key))
            if n >= limit.attempts:
                wait = max(wait, left)
        return wait

    def failed(self, key: tuple[str, str]) -> None:
        store = self.store()
        for limit in self.limits:
            store.record_failure(limit.key(*key), limit.window_s)

    def succeeded(self, key: tuple[str, str]) -> None:
        self.store().clear_failures(self.limits[0].key(*key))


#: Checked against when the user does not exist, so both paths cost the same:
#: made with the method and cost of the configured users' hashes (werkzeug's
#: ``method:params$salt$hash``; its default, scrypt, when there is none), so
#: an unknown name costs what a known one does. Built once a method.
@functools.cache
def dummy_hash(method: str | None = None) -> str:
    if method is None:
        return generate_password_hash("leasehold-no-such-user")
    return generate_password_hash("leasehold-no-such-user", method=method)


def hash_method(password_hash: str) -> str | None:
    """The ``method:params`` head of a werkzeug hash (None for another shape)."""
    head, sep, _ = password_hash.partition("$")
    return head if sep and head else None


def _dummy(method: str | None) -> str:
    try:
        return dummy_hash(method)
    except ValueError:  # a method werkzeug does not make (an older release's)
        return dummy_hash()


def users() -> dict[str, User]:
    return current_app.extensions["leasehold.console.users"]


def throttle() -> LoginThrottle:
    return current_app.extensions["leasehold.console.throttle"]


def authenticate(name: str, password: str) -> User | None:
    """The user if ``password`` is theirs; constant work when the name is unknown."""
    known = users()
    user = known.get(name)
    if user is None:
        method = next((hash_method(u.password_hash) for u in known.values()), None)
        ok = check_password_hash(_dummy(method), password)
    else:
        ok = check_password_hash(user.password_hash, password)
    return user if user and ok else None


#: The session keys of the console's own login (a host's other keys are left alone).
SESSION_KEYS = ("user", "fp", "at")


def log_in(user: User) -> None:
    log_out()
    session.pop("csrf_token", None)  # a new CSRF token for the new login
    session.permanent = True
    session["user"] = user.name
    session["fp"] = user.fingerprint
    session["at"] = int(time.time())


def log_out() -> None:
    for key in SESSION_KEYS:
        session.pop(key, None)


def hook() -> Callable[[], tuple[str, str] | None] | None:
    """The host's authorization hook, or None for the console's own logins."""
    return current_app.extensions.get("leasehold.console.authorize")


def _from_hook(authorize: Callable[[], tuple[str, str] | None]) -> User | None:
    answer = authorize()
    if answer is None:
        return None
    role, name = answer
    if role not in ROLES or not str(name).strip():
        current_app.logger.warning(
            "leasehold: authorize hook returned role %r; expected viewer or operator", role
        )
        return None
    return User(str(name).strip()[:MAX_OPERATOR_NAME_LEN], "", role)


def current_user() -> User | None:
    """The logged-in user of this request (cached on ``g``), or None: from the
    host's hook when there is one, else from the console's session."""
    if "console_user" in g:
        return g.console_user
    authorize = hook()
    if authorize is not None:
        user = _from_hook(authorize)
    else:
        user = users().get(session.get("user", ""))
        if user is not None and not hmac.compare_digest(session.get("fp", ""), user.fingerprint):
            user = None
    g.console_user = user
    return user


def operator_required(view: Callable[..., Any]) -> Callable[..., Any]:
    """403 unless the logged-in user is an operator (checked server-side)."""

    @wraps(view)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        user = current_user()
        if user is None or not user.is_operator:
            abort(403, "Only operators can do this.")
        return view(*args, **kwargs)

    return wrapper


def init_app(app: Flask, web: WebSettings, authorize: Any = None) -> None:
    """Users, throttle and the host's hook (``authorize``, or None). Raises
    ConfigError for a malformed LEASEHOLD_USERS."""
    if authorize is not None and not callable(authorize):
        raise TypeError("authorize must be a callable returning (role, name) or None")
    app.extensions["leasehold.console.users"] = parse_users(web.users)
    app.extensions["leasehold.console.throttle"] = LoginThrottle(lambda: app.extensions["leasehold"])
    app.extensions["leasehold.console.authorize"] = authorize


def client_key(name: str) -> tuple[str, str]:
    """The throttle key of a login attempt: (username, client address; the
    real client's behind LEASEHOLD_TRUSTED_PROXIES proxies)."""
    return (name[:200], request.remote_addr or "?")
