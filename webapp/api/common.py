"""Helpers every API view uses: the validated request part and the job answer."""

from __future__ import annotations

from typing import Any

from flask import Response, request
from pydantic import BaseModel
from pydantic import ValidationError as PydanticValidationError

from webapp.api.encoding import json_response
from webapp.api.errors import from_pydantic

__all__ = ["context_of", "job_json", "json_response"]


def context_of(part: str, model: type[BaseModel]) -> Any:
    """The validated request part from spectree, or the model's defaults when
    spectree skipped it (an empty form-encoded body)."""
    value = getattr(getattr(request, "context", None), part, None)
    if value is None:
        try:
            value = model.model_validate({})
        except PydanticValidationError as exc:  # a required field
            raise from_pydantic(exc) from None
    return value


def job_json(job: Any, status: int = 200) -> Response:
    return json_response(job.to_json(), status)
