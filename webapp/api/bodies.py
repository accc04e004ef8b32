"""Reading a JSON request body before any schema sees it.

Order of checks, each answered in the error envelope:

1. size: ``MAX_CONTENT_LENGTH`` (1 MiB by default) -> 413, before reading;
2. media type: a non-empty body must be ``application/json`` (or ``+json``) -> 415;
3. syntax: strict JSON (orjson: no NaN/Infinity, no lone surrogates,
   integers within 64 bits) -> 400;
4. shape: nesting deeper than MAX_JSON_DEPTH, an array longer than
   MAX_JSON_ITEMS, an object with more than MAX_JSON_ITEMS keys, or a NUL
   character in any string -> 422 naming the field.

NUL characters are refused because PostgreSQL can store them neither in
text nor in JSONB; refusing them here keeps a bad request from becoming a
store error halfway through.
"""

from __future__ import annotations

from typing import Any, TypeVar

import orjson
from flask import request
from pydantic import BaseModel
from pydantic import ValidationError as PydanticValidationError

from webapp.api.errors import APIError, field_of, from_pydantic

ModelT = TypeVar("ModelT", bound=BaseModel)

#: Deepest nesting of arrays/objects accepted in a body (the body itself is 1).
MAX_JSON_DEPTH = 32
#: Most items in one array, or keys in one object, anywhere in a body.
MAX_JSON_ITEMS = 10_000


def check_shape(value: Any, max_depth: int = MAX_JSON_DEPTH, max_items: int = MAX_JSON_ITEMS) -> None:
    """Walk ``value`` (parsed JSON) without recursion. Raises APIError 422
    naming the path of the first value that is too deep, too long, or holds
    a NUL character."""
    stack: list[tuple[Any, tuple[int | str, ...], int]] = [(value, (), 0)]
    while stack:
        node, path, depth = stack.pop()
        if isinstance(node, str):
            if "\x00" in node:
                raise APIError(
                    422,
                    f"{field_of(path) or 'body'}: NUL characters are not allowed",
                    field_of(path) or "body",
                )
            continue
        if not isinstance(node, dict | list):
            continue
        depth += 1
        field = field_of(path) or "body"
        if depth > max_depth:
            raise APIError(422, f"{field}: nested deeper than {max_depth} levels", field)
        if len(node) > max_items:
            raise APIError(422, f"{field}: more than {max_items} items", field)
        if isinstance(node, dict):
            for key, item in node.items():
                if "\x00" in key:
                    raise APIError(422, f"{field}: NUL characters are not allowed in keys", field)
                stack.append((item, (*path, key), depth))
        else:
            stack.extend((item, (*path, i), depth) for i, item in enumerate(node))


def parse_json(raw: bytes) -> Any:
    """Strict JSON, shape-checked. Raises APIError 400 or 422."""
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        if "depth limit" in str(exc):
            raise APIError(422, f"body: nested deeper than {MAX_JSON_DEPTH} levels", "body") from None
        raise APIError(400, f"malformed JSON: {exc}") from None
    check_shape(value)
    return value


def is_json_mimetype(mimetype: str) -> bool:
    return mimetype == "application/json" or (
        mimetype.startswith("application/") and mimetype.endswith("+json")
    )


#: Where the parsed body of the current request is kept (WSGI environ key).
_PARSED = "leasehold.api.body"


def read_json_body() -> Any:
    """The current request's JSON body after the checks above; None when empty.
    Parsed once per request: later calls (a view after the blueprint's hook)
    answer the same value.

    Raises APIError 413 (via werkzeug's RequestEntityTooLarge), 415, 400 or 422."""
    environ = request.environ
    if _PARSED in environ:
        return environ[_PARSED]
    raw = request.get_data(cache=True)  # raises RequestEntityTooLarge past MAX_CONTENT_LENGTH
    if not raw.strip():
        value = None
    elif not is_json_mimetype(request.mimetype):
        raise APIError(415, "the request body must be JSON (Content-Type: application/json)")
    else:
        value = parse_json(raw)
    environ[_PARSED] = value
    return value


def validated_body(model: type[ModelT]) -> ModelT:
    """The current request's body (``read_json_body``) validated by ``model``;
    an absent body or a JSON ``null`` as ``{}``, so a required field is named.
    Raises APIError 422 naming the first invalid field (``errors.from_pydantic``),
    ``body`` for a body that is not an object, and what read_json_body raises."""
    body = read_json_body()
    if body is None:
        body = {}
    if not isinstance(body, dict):
        raise APIError(422, "body: must be a JSON object (or null)", "body")
    try:
        return model.model_validate(body)
    except PydanticValidationError as exc:
        raise from_pydantic(exc) from None
