"""What a database error means to a caller of the SQL store, decided by its
exception class and SQLSTATE (never by its text alone):

* an outage (the store could not answer; retrying is safe and may work):
  ``OperationalError`` and ``InterfaceError`` (a lost connection, SQLite's
  "database is locked", a deadlock still there after the retries), a
  connection SQLAlchemy invalidated, and the SQLSTATE classes 08
  (connection exception), 53 (insufficient resources), 57 (operator
  intervention: a shutdown, a statement timeout) and 58 (system error)
  -> ``StoreUnavailable`` (HTTP 503; workers retry); a read cut by the
  statement timeout -> ``StoreTimeout``, a StoreUnavailable naming the limit;
* a value the database will not hold (SQLSTATE class 22, data exception:
  a NUL in text or JSONB, a string longer than its column; psycopg's own
  ``DataError`` has no SQLSTATE) -> ``ValidationError`` (HTTP 422; the
  recorder acks one by one and the rest of its batch is saved);
* anything else (``IntegrityError``, which callers catch; a
  ``ProgrammingError``: a bug) is raised as it is: retrying would fail the
  same way, so it is no outage.
"""

from __future__ import annotations

from sqlalchemy.exc import DataError, DBAPIError, InterfaceError, OperationalError

from store.errors import StoreTimeout, StoreUnavailable, ValidationError

#: SQLSTATE classes of an outage (see the module docstring).
OUTAGE_CLASSES = frozenset({"08", "53", "57", "58"})
#: SQLSTATE class of a data exception.
DATA_CLASS = "22"
#: SQLSTATE of a statement cut by ``statement_timeout`` (query_canceled).
STATEMENT_TIMEOUT = "57014"


def sqlstate(exc: DBAPIError) -> str | None:
    """The SQLSTATE of the driver's error (psycopg), or None (SQLite, or an
    error psycopg raised itself before sending anything)."""
    code = getattr(exc.orig, "sqlstate", None)
    return code if isinstance(code, str) else None


def _first_line(exc: DBAPIError) -> str:
    return (str(exc.orig).strip().splitlines() or ["no detail"])[0]


def translate(exc: DBAPIError, statement_timeout_s: float | None = None) -> Exception:
    """The error to raise for ``exc`` (see the module docstring): a
    StoreUnavailable, a ValidationError (field ``data``), or ``exc`` itself.
    ``statement_timeout_s`` names the read timeout in the message of a
    statement it cut."""
    code = sqlstate(exc)
    if code == STATEMENT_TIMEOUT:
        limit = f" within {statement_timeout_s:g} s" if statement_timeout_s else " in time"
        return StoreTimeout(
            f"the job store did not answer{limit} (statement timeout, LEASEHOLD_PG_STATEMENT_TIMEOUT): "
            "the read was cancelled; narrow the filter or try again"
        )
    if isinstance(exc, DataError) or (code is not None and code.startswith(DATA_CLASS)):
        return ValidationError("data", f"the database refused a value: {_first_line(exc)}")
    if (
        exc.connection_invalidated
        or isinstance(exc, OperationalError | InterfaceError)
        or (code is not None and code[:2] in OUTAGE_CLASSES)
    ):
        return StoreUnavailable(f"SQL store unavailable: {_first_line(exc)}")
    return exc


__all__ = ["OUTAGE_CLASSES", "sqlstate", "translate"]
