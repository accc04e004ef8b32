"""Opaque keyset cursors shared by every store: ``(last_updated_at, id)``."""

from __future__ import annotations

import base64

import orjson

from store.errors import ValidationError


def encode_cursor(last_updated_at: float, job_id: str) -> str:
    """Opaque keyset cursor for the row after ``(last_updated_at, id)``."""
    return base64.urlsafe_b64encode(orjson.dumps([last_updated_at, job_id])).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[float, str]:
    """Inverse of encode_cursor. Raises ValidationError("cursor") when malformed."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        at, job_id = orjson.loads(raw)
        if not isinstance(at, int | float) or not isinstance(job_id, str):
            raise TypeError
        return float(at), job_id
    except (ValueError, TypeError, orjson.JSONDecodeError):
        raise ValidationError("cursor", "malformed cursor") from None
