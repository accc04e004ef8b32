"""The record port: the narrow contract each engine implements once so that
every record-keeping feature (locks, the worker registry, run histories, bulk
operations, schedules, counting windows) is written once, in
``store/registry.py`` and ``store/bookings.py`` (docs/architecture.md, "Stores").

A record is ``(kind, key) -> value``: ``kind`` a short name of what it is
(``worker``, ``schedule``, ``maintenance_run.retention``), ``key`` its id
within the kind, ``value`` a JSON object. It may carry a ``score`` (a float the
kind is paged and pruned by, a time as a rule) and an expiry (an expired
record reads and changes as absent). A **hold** is an expiring
compare-and-set record with a fencing token: a distributed lock.

``apply_change`` is the one statement of what a ``Change`` does; the SQL
engine runs it in a transaction, the Redis engine's ``record_change.lua``
does the same inside one function call. Pure: no I/O, no clock.
"""

from __future__ import annotations

import abc
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

#: A kind: lowercase letters, digits, ``_`` and ``.``; no ``:`` (Redis keys
#: are ``rec:<kind>:<key>``, so a kind ends where the first ``:`` is).
KIND = re.compile(r"[a-z][a-z0-9_.]{0,79}")
#: Most records one ``record_page`` or ``record_prune`` call handles.
MAX_PAGE = 10_000


def check_kind(kind: str) -> str:
    """``kind`` if it matches KIND; else ValueError (a programming error:
    kinds are constants of this package)."""
    if not KIND.fullmatch(kind):
        raise ValueError(f"record kind {kind!r} does not match {KIND.pattern}")
    return kind


@dataclass(frozen=True, slots=True)
class Record:
    """One record as read: ``value`` its fields, ``score`` or None,
    ``expires_in`` seconds of the store's clock until it expires (None: never)."""

    key: str
    value: dict[str, Any]
    score: float | None = None
    expires_in: float | None = None


@dataclass(frozen=True, slots=True)
class Change:
    """One atomic change of one record, applied in this order when its guards
    pass: ``init`` (fields of a new record only), ``stamp_new`` (set to the
    store's clock, new record only), ``set``, ``drop`` (fields removed),
    ``add`` (integers added; an absent field counts 0), ``stamp`` (set to the
    store's clock).

    Guards, checked against an existing record only: ``when`` (each field
    equals the value given; None means the field is absent) and ``rise``
    (``(field, x)``: the field is absent or <= x). ``create`` False: an absent
    record stays absent. ``score_field``: the score becomes that field's value
    after the change (else the score is kept). ``ttl_s``: a new record expires
    ``ttl_s`` seconds after the store's clock (an existing one keeps its
    expiry). ``keep``: afterwards the kind keeps only its ``keep`` records of
    highest score (a run history's length)."""

    set: Mapping[str, Any] = field(default_factory=dict)
    init: Mapping[str, Any] = field(default_factory=dict)
    drop: tuple[str, ...] = ()
    add: Mapping[str, int] = field(default_factory=dict)
    stamp: tuple[str, ...] = ()
    stamp_new: tuple[str, ...] = ()
    when: Mapping[str, Any] | None = None
    rise: tuple[str, float] | None = None
    create: bool = True
    score_field: str | None = None
    ttl_s: float | None = None
    keep: int | None = None


def guards_pass(value: Mapping[str, Any], change: Change) -> bool:
    """Whether an existing record's ``value`` lets ``change`` apply."""
    if change.when is not None and any(value.get(f) != v for f, v in change.when.items()):
        return False
    if change.rise is not None:
        name, x = change.rise
        current = value.get(name)
        if current is not None and float(current) > x:
            return False
    return True


def apply_change(current: Record | None, key: str, change: Change, now: float) -> tuple[Record | None, bool]:
    """``(record afterwards, applied)``: ``current`` is the unexpired record
    or None, ``now`` the store's clock (epoch seconds). An absent record with
    ``create`` False gives ``(None, False)``; a failed guard gives
    ``(current, False)``. The result's ``expires_in`` is relative to ``now``."""
    if current is None and not change.create:
        return None, False
    if current is not None and not guards_pass(current.value, change):
        return current, False
    value: dict[str, Any] = {} if current is None else dict(current.value)
    if current is None:
        value.update(change.init)
        value.update({f: now for f in change.stamp_new})
    value.update(change.set)
    for name in change.drop:
        value.pop(name, None)
    for name, n in change.add.items():
        value[name] = int(value.get(name) or 0) + n
    value.update({f: now for f in change.stamp})
    score = current.score if current is not None else None
    if change.score_field is not None and value.get(change.score_field) is not None:
        score = float(value[change.score_field])
    if current is None:
        expires_in = change.ttl_s
    else:
        expires_in = current.expires_in
    return Record(key, value, score, expires_in), True


@dataclass(frozen=True, slots=True)
class Hold:
    """The holder of an unexpired hold: ``expires_at`` epoch seconds of the
    store's clock; ``token`` the fencing token, +1 whenever a new holder
    takes the hold (a renewal keeps it), never reused."""

    name: str
    holder: str
    expires_at: float
    token: int


class RecordPort(abc.ABC):
    """What an engine implements for record keeping. Every method is atomic
    on its own and reads the store's clock (PostgreSQL ``statement_timestamp()``,
    Redis ``TIME``, SQLite the machine's, each plus the test clock offset).
    Raises StoreUnavailable when the engine cannot be reached."""

    @abc.abstractmethod
    def record_change(self, kind: str, key: str, change: Change) -> tuple[Record | None, bool]:
        """Apply ``change`` (see Change and ``apply_change``) to one record
        atomically; ``(record afterwards or None, applied)``."""

    @abc.abstractmethod
    def record_get(self, kind: str, key: str) -> Record | None:
        """One unexpired record, or None."""

    @abc.abstractmethod
    def record_page(self, kind: str, limit: int, *, oldest_first: bool = False) -> list[Record]:
        """Up to ``limit`` (<= MAX_PAGE) unexpired records of ``kind`` that
        have a score, highest score first (lowest with ``oldest_first``);
        equal scores by key."""

    @abc.abstractmethod
    def record_drop(self, kind: str, key: str) -> bool:
        """Remove one record; True when it was there."""

    @abc.abstractmethod
    def record_prune(self, kind: str, *, older_than_s: float | None, limit: int) -> list[str]:
        """Remove up to ``limit`` records of ``kind``, lowest score first:
        those scored below the store's clock minus ``older_than_s``, or with
        ``older_than_s`` None the expired ones (an engine whose records expire
        on their own may find none). Each is checked and removed in the same
        atomic step (one that changed meanwhile is kept). Their keys."""

    @abc.abstractmethod
    def hold(self, name: str, holder: str, ttl_s: float) -> int | None:
        """Take or renew the hold ``name`` for ``ttl_s`` seconds: when it is
        free, expired or already ``holder``'s. The fencing token afterwards,
        or None when another holder has it."""

    @abc.abstractmethod
    def unhold(self, name: str, holder: str) -> bool:
        """Release the hold if ``holder`` has it (compare-and-delete; the
        token survives for the next holder). True when it was released."""

    @abc.abstractmethod
    def held(self, name: str) -> Hold | None:
        """The hold's unexpired holder, or None."""
