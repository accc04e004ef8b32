"""Times as the stores keep them (epoch seconds) and as the API shows them."""

from __future__ import annotations

from datetime import UTC, datetime


def ts(value: float | None) -> datetime | None:
    """Epoch seconds (store form) to an aware UTC datetime."""
    return None if value is None else datetime.fromtimestamp(value, UTC)


def iso(value: datetime | None) -> str | None:
    """ISO 8601 UTC with a ``Z``, millisecond precision (API form)."""
    if value is None:
        return None
    return value.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
