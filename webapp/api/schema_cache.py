"""spectree's pydantic adapter, with each model's JSON schema made once a
process. ``routes.register`` documents every route of the API on a new
SpecTree for each app, and spectree asks the adapter for the JSON schema of
each route's models every time (987 schemas, about 0.5 s an app on these
machines): a cost paid by each gunicorn worker at boot and by each app a
test makes. The API's models are fixed classes, so their schemas are too;
spectree deep-copies what the adapter returns before it changes anything
(``SpecTree._add_model``), so one copy is shared safely."""

from __future__ import annotations

import threading
from typing import Any

from spectree.model_adapter.pydantic_adapter import PydanticModelAdapter

_SCHEMAS: dict[tuple[Any, str, str], dict[str, Any]] = {}
_LOCK = threading.Lock()


class SchemaCachingAdapter(PydanticModelAdapter):
    """PydanticModelAdapter whose ``json_schema`` is computed once per
    (model, ref_template, mode) and kept for the process."""

    def json_schema(self, model: type[Any], *, ref_template: str, mode: Any = "validation") -> dict[str, Any]:
        key = (model, ref_template, mode)
        with _LOCK:
            found = _SCHEMAS.get(key)
        if found is None:
            found = super().json_schema(model, ref_template=ref_template, mode=mode)
            with _LOCK:
                found = _SCHEMAS.setdefault(key, found)
        return found
