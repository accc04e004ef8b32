"""Bearer-token authentication for the API: deny by default.

Tokens come from ``LEASEHOLD_API_TOKENS`` as ``token:role[:name],...`` with
roles ``viewer`` (reads) and ``operator`` (reads and acts). The optional
name is what job events record (``operator:<name>``); without it the role is
recorded. Only SHA-256 digests of the tokens are kept in memory, and a
presented token is compared with ``hmac.compare_digest`` against every
configured digest (no early exit, equal-length inputs), so neither timing
nor length tells a caller how close a guess was.

Every request to a protected route needs ``Authorization: Bearer <token>``:
GET and HEAD need a viewer or operator token, every other method an operator
token. The check runs in ``before_request``, so a new route is protected the
moment it is added; only routes named in ``anonymous`` skip it. Console
sessions are not accepted here: the API takes bearer tokens only.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import re
from collections.abc import Iterable
from dataclasses import dataclass

from flask import g, request

from webapp.api.errors import APIError
from webapp.config import ConfigError

#: Methods a viewer may use; any other method needs an operator.
READ_METHODS = frozenset({"GET", "HEAD"})
_NAME = re.compile(r"^[A-Za-z0-9_.@-]{1,64}$")
_TOKEN = re.compile(r"^[\x21-\x7e]+$")  # visible ASCII, no spaces (':' and ',' are separators)


class Role(enum.IntEnum):
    """What a token may do; a higher role may do everything a lower one may."""

    viewer = 1
    operator = 2


@dataclass(frozen=True, slots=True)
class ApiToken:
    """A configured token: its SHA-256 digest, role, and the name events record."""

    digest: bytes
    role: Role
    name: str | None

    @property
    def actor(self) -> str:
        """What job events record for this token's actions: ``operator:<name or role>``."""
        return f"operator:{self.name or self.role.name}"


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


def parse_api_tokens(raw: str | None) -> tuple[ApiToken, ...]:
    """Parse ``token:role[:name],...``. Empty means no token (every request is refused).

    Raises ConfigError naming LEASEHOLD_API_TOKENS for an empty token, an
    unknown role, a bad name, or a token listed twice. The message never
    contains a token."""
    tokens: list[ApiToken] = []
    seen: set[bytes] = set()
    for position, item in enumerate(str(raw or "").split(","), start=1):
        item = item.strip()
        if not item:
            continue
        parts = item.split(":")
        if len(parts) not in (2, 3):
            raise ConfigError(f"LEASEHOLD_API_TOKENS entry {position} must be token:role or token:role:name")
        token, role_name = parts[0].strip(), parts[1].strip()
        name = parts[2].strip() if len(parts) == 3 else None
        if not token or not _TOKEN.match(token):
            raise ConfigError(f"LEASEHOLD_API_TOKENS entry {position} has an empty or non-printable token")
        try:
            role = Role[role_name]
        except KeyError:
            raise ConfigError(
                f"LEASEHOLD_API_TOKENS entry {position} has unknown role {role_name!r} "
                "(roles: viewer, operator)"
            ) from None
        if name is not None and not _NAME.match(name):
            raise ConfigError(
                f"LEASEHOLD_API_TOKENS entry {position} has a bad name (1-64 of A-Z a-z 0-9 _ . @ -)"
            )
        digest = _digest(token)
        if digest in seen:
            raise ConfigError(f"LEASEHOLD_API_TOKENS entry {position} repeats a token")
        seen.add(digest)
        tokens.append(ApiToken(digest, role, name))
    return tuple(tokens)


def find_token(presented: str, tokens: Iterable[ApiToken]) -> ApiToken | None:
    """The configured token equal to ``presented``, comparing against all of them."""
    digest = _digest(presented)
    found = None
    for token in tokens:
        if hmac.compare_digest(digest, token.digest):
            found = token
    return found


def _challenge(error: str | None = None) -> dict[str, str]:
    value = 'Bearer realm="leasehold"'
    if error:
        value += f', error="{error}"'
    return {"WWW-Authenticate": value}


def authenticate(tokens: Iterable[ApiToken]) -> ApiToken:
    """The token of the current request. Raises APIError 401."""
    header = request.headers.get("Authorization", "")
    scheme, _, credentials = header.partition(" ")
    if not header:
        raise APIError(
            401, "authentication required: send Authorization: Bearer <token>", headers=_challenge()
        )
    if scheme.lower() != "bearer" or not credentials.strip():
        raise APIError(401, "only bearer tokens are accepted", headers=_challenge("invalid_request"))
    token = find_token(credentials.strip(), tokens)
    if token is None:
        raise APIError(401, "invalid token", headers=_challenge("invalid_token"))
    return token


def authorize(tokens: Iterable[ApiToken], method: str) -> ApiToken:
    """Authenticate, then check the role the method needs. Raises APIError
    401 or 403. The token is kept on ``flask.g.api_token`` for the view."""
    token = authenticate(tokens)
    needed = Role.viewer if method in READ_METHODS else Role.operator
    if token.role < needed:
        raise APIError(403, f"an {needed.name} token is required for {method} requests")
    g.api_token = token
    return token


def current_token() -> ApiToken:
    """The token the current request was authorised with (set by ``authorize``)."""
    token = g.get("api_token")
    if token is None:  # pragma: no cover - a view reached without the hook is a bug
        raise RuntimeError("no authorised API token on this request")
    return token
