"""Enqueueing in an application's SQLAlchemy session (``session=db.session``).

``enqueue``, ``Handler.enqueue``, ``Handler.enqueue_many``, ``batch`` and
``chain`` take ``session=``: a SQLAlchemy ``Session`` (or a
``scoped_session`` such as Flask-SQLAlchemy's ``db.session``) whose
transaction the enqueue belongs to.

* SQL stores (SQLite, PostgreSQL: ``store.transactions.JoinsTransactions``):
  the job is written at once on the session's connection, inside its open
  transaction (``session.connection()``, store/sql/joined.py). Commit and it
  exists (PostgreSQL delivers the workers' NOTIFY at that commit); roll back
  and nothing of it remains. Exactly once, with the application's rows.
* Redis: the enqueue is held by the session and sent after the session's
  transaction commits (SQLAlchemy's ``after_commit`` event), never after a
  rollback. The call returns a ``Pending`` whose ``result`` is filled in at
  commit. A process that dies between its commit and that enqueue loses
  the job: at most once. Use a SQL store where a job must exist exactly
  when the application's rows do.

Held work belongs to the transaction the session is in at the call: a
SAVEPOINT (``session.begin_nested()``) that rolls back drops what was
enqueued inside it, one that commits hands it to the enclosing transaction,
and only the outermost commit runs it. The ``job_enqueued`` signal follows
the same rule on every store: it is sent after the commit, never after a
rollback.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from leasehold import hooks
from store.base import JobStore
from store.errors import ValidationError
from store.models import Job
from store.transactions import JoinsTransactions

T = TypeVar("T")

log = logging.getLogger(__name__)

#: ``Session.info`` key of the work held until the session's transaction commits.
_HELD = "leasehold.after_commit"
#: ``Session.info`` key of the work of a committed transaction, run once it has ended.
_READY = "leasehold.ready"
#: ``Session.info`` key set once the session's events are listened to.
_LISTENING = "leasehold.listening"


@dataclass
class Pending(Generic[T]):
    """An enqueue held until the session commits (Redis store). ``result``:
    the Job (a list of Jobs, a Batch) once written after the commit, None
    before and after a rollback; ``error``: what writing it raised."""

    result: T | None = None
    error: BaseException | None = None

    @property
    def done(self) -> bool:
        """True once the held enqueue ran (written, or failed with ``error``)."""
        return self.result is not None or self.error is not None


#: An enqueue: its answer (a Job, Jobs, a Batch) and the jobs it created.
Write = Callable[[], "tuple[T, list[Job]]"]


def in_session(
    store: JobStore,
    session: Any,
    write: Write[T],
    check: Callable[[], object] | None = None,
    then: Callable[[T], object] | None = None,
) -> T | Pending[T]:
    """Run ``write`` (an enqueue on ``store``) as part of ``session``'s
    transaction; the ``job_enqueued`` signal of the jobs it created is sent
    after that transaction commits. SQL stores: ``write`` runs now on the
    session's connection; returns its answer. Other stores: ``check``
    (validation) runs now, ``write`` after the commit; returns the
    ``Pending``. Raises ValidationError (field ``session``) when ``session``
    is not a SQLAlchemy session, or is bound to another database than a SQL
    store's; what ``write`` (``check``) raises. ``then`` (eager mode: run the
    job) is called with the answer after the commit, after the signal."""
    session = _session_of(session)
    if isinstance(store, JoinsTransactions):
        with store.joined(session.connection()):
            answer, created = write()
        _hold(session, lambda: _after(created, answer, then))
        return answer
    if check is not None:
        check()
    pending: Pending[T] = Pending()

    def run() -> None:
        try:
            pending.result, created = write()
        except Exception as exc:
            pending.error = exc
            raise
        _after(created, pending.result, then)

    _hold(session, run)
    return pending


def _after(created: list[Job], answer: T, then: Callable[[T], object] | None) -> None:
    _announce(created)
    if then is not None:
        then(answer)


def _announce(jobs: list[Job]) -> None:
    hooks.announce_enqueued(jobs)


def _session_of(session: Any) -> Any:
    """The Session a ``scoped_session`` stands for, or ``session`` itself.
    Raises ValidationError naming ``session`` for anything else."""
    from sqlalchemy.orm import Session, scoped_session  # only when a session is given

    if isinstance(session, scoped_session):
        session = session()
    if not isinstance(session, Session):
        raise ValidationError("session", "must be a SQLAlchemy Session, e.g. Flask-SQLAlchemy's db.session")
    return session


def _hold(session: Any, action: Callable[[], None]) -> None:
    """Keep ``action`` with the session's current transaction (its innermost
    SAVEPOINT, else the outermost, begun now if none is)."""
    if not session.info.get(_LISTENING):
        from sqlalchemy import event

        event.listen(session, "after_commit", _committed)
        event.listen(session, "after_transaction_end", _ended)
        session.info[_LISTENING] = True
    tx = session.get_nested_transaction() or session.get_transaction() or session.begin()
    session.info.setdefault(_HELD, []).append((tx, action))


def _committed(session: Any) -> None:
    """A SAVEPOINT's commit hands its held work to the enclosing
    transaction; the outermost commit makes all of it ready to run when that
    transaction has ended (``_ended``: the session is usable again by then)."""
    nested = session.get_nested_transaction()
    held = session.info.get(_HELD, [])
    if nested is not None:
        session.info[_HELD] = [(nested.parent if tx is nested else tx, a) for tx, a in held]
        return
    session.info[_HELD] = []
    session.info[_READY] = [action for _, action in held]


def _ended(session: Any, transaction: Any) -> None:
    """A transaction ended: what is still held for it was rolled back and is
    dropped. When the outermost one ended committed, every ready action
    runs, in order, each even when one before it failed; each failure is
    logged and the first is raised (out of ``session.commit()``: the
    application's rows are committed, that job is not)."""
    held = session.info.get(_HELD)
    if held:
        session.info[_HELD] = [(tx, a) for tx, a in held if tx is not transaction]
    if transaction.parent is not None or not session.info.get(_READY):
        return
    ready, session.info[_READY] = session.info[_READY], []
    first: Exception | None = None
    for action in ready:
        try:
            action()
        except Exception as exc:
            log.error(
                "an enqueue held until the session's commit failed; the job was not enqueued", exc_info=exc
            )
            first = first or exc
    if first is not None:
        raise first


__all__ = ["Pending", "in_session"]
