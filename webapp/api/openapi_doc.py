"""What spectree cannot say in ``/openapi.json``, added to the generated document.

spectree documents request models, response models and status codes. This
module adds, once, after generation (``ApiState.openapi``):

- the ``Idempotency-Key`` request header of every enqueueing operation, and
  the ``Location`` header of its 200 and 202 answers;
- ``Location`` on every 202 (every 202 of this API names what it started);
- ``WWW-Authenticate`` on 401 and ``Retry-After`` on 503;
- request bodies that may be omitted or ``null`` (spectree marks every body required);
- what a 422 means where it is more than a bad field: ``cursor`` with ``before``,
  a queue name on the limits routes, an Idempotency-Key reused;
- the answers spectree leaves without a body: ``GET /api/jobs/<id>`` is the
  job JSON by default (an application may reshape it, so it is not checked
  against JobOut), ``/metrics`` is Prometheus text, ``/openapi.json`` this
  document.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from store.flow_rules import MAX_LIMIT, MAX_PERIOD_S
from store.models import MAX_IDEMPOTENCY_KEY_LEN
from store.spec import MAX_QUEUE_LEN
from webapp.api.encoding import IDEMPOTENCY_HEADER

IDEMPOTENCY_PARAMETER: dict[str, Any] = {
    "name": IDEMPOTENCY_HEADER,
    "in": "header",
    "required": False,
    "description": (
        "draft-ietf-httpapi-idempotency-key-header: a replay of the request that made a job "
        "answers 202 with that job and its Location and writes nothing; the key reused for a "
        "different request (name, queue, payload, priority, max_retries, timeout_s, lease_ttl_s, "
        "route or query parameters) answers 422. Keys live as long as their job."
    ),
    "schema": {
        "type": "string",
        "minLength": 1,
        "maxLength": MAX_IDEMPOTENCY_KEY_LEN,
        "pattern": r"^[\x21-\x7e][\x20-\x7e]*$",
    },
}
LOCATION = {
    "description": "URL of the job (or operation) this answer is about",
    "schema": {"type": "string", "format": "uri-reference"},
}
WWW_AUTHENTICATE = {"description": "Bearer", "schema": {"type": "string"}}
RETRY_AFTER = {"description": "seconds to wait before retrying", "schema": {"type": "integer"}}

#: Bodies of answers spectree documents without one, by operationId and status.
BODIES: dict[tuple[str, str], dict[str, Any]] = {
    ("get_job", "200"): {
        "application/json": {"schema": {"$ref": "#/components/schemas/JobOut"}},
    },
    ("prometheus_metrics", "200"): {"text/plain; version=0.0.4": {"schema": {"type": "string"}}},
    ("openapi", "200"): {"application/json": {"schema": {"type": "object"}}},
}


#: Operations whose JSON body may be left out or be ``null`` (every field has a default).
OPTIONAL_BODIES = frozenset({"requeue_job", "run_purge"})

#: What a 422 means, by operationId, where it is more than "a field is invalid".
UNPROCESSABLE: dict[str, str] = {
    "list_jobs": "a filter or cursor is invalid, or `cursor` and `before` are given together "
    "(page one way at a time)",
    "set_limits": "the queue name (as enqueue takes it: 1 to 100 characters, no NUL) or a limit is "
    "invalid; `field` names it",
    "get_limits": "the queue name is not one enqueue takes (1 to 100 characters, no NUL)",
}
#: The 422 of an operation that enqueues (the Idempotency-Key's reuse included).
UNPROCESSABLE_ENQUEUE = (
    "a field is invalid (`field` names it), or the Idempotency-Key was already used for a "
    "different request (`field` is Idempotency-Key; nothing is written)"
)

#: Fields of a job body a batch's job may not carry (its dependencies are the batch's own).
BATCH_JOB_EXCLUDED = ("depends_on", "on_parent_failure")


#: Text a store accepts: no NUL (PostgreSQL's text and JSONB cannot hold it; store/spec.py).
NUL_FREE = {"type": "string", "pattern": "^[^\\x00]*$"}
#: A job's payload: any JSON whose strings and keys hold no NUL.
JSON_VALUE = {
    "description": "any JSON value; no string or key may contain NUL",
    "anyOf": [
        NUL_FREE,
        {"type": "number"},
        {"type": "boolean"},
        {"type": "null"},
        {"type": "array", "items": {"$ref": "#/components/schemas/JsonValue"}},
        {
            "type": "object",
            "propertyNames": NUL_FREE,
            "additionalProperties": {"$ref": "#/components/schemas/JsonValue"},
        },
    ],
}


def limits_body() -> dict[str, Any]:
    """The request body of ``PUT /api/queues/<queue>/limits``, read by hand by
    its view (store.flow_rules.parse_limits): each key sets a limit, null clears it,
    a key left out keeps it."""
    count = {"anyOf": [{"type": "integer", "minimum": 1, "maximum": MAX_LIMIT}, {"type": "null"}]}
    rate = {
        "anyOf": [
            {
                "type": "object",
                "additionalProperties": False,
                "required": ["limit", "period_s"],
                "properties": {
                    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT},
                    "period_s": {"type": "number", "minimum": 0.001, "maximum": MAX_PERIOD_S},
                },
            },
            {"type": "null"},
        ]
    }
    schema = {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "concurrency": count,
            "per_key_concurrency": count,
            "rate": rate,
            "per_key_rate": rate,
        },
    }
    return {"required": True, "content": {"application/json": {"schema": schema}}}


#: A queue name as enqueue takes it (store/spec.py check_queue_name): 1..MAX_QUEUE_LEN
#: characters, not blank, no NUL.
QUEUE_NAME = {
    "type": "string",
    "minLength": 1,
    "maxLength": MAX_QUEUE_LEN,
    "pattern": "^[^\\x00]*[^\\s\\x00][^\\x00]*$",
}


def batch_body(doc: dict[str, Any]) -> dict[str, Any]:
    """The request body of ``POST /api/batches``, read by hand by its view:
    ``{"jobs": [job bodies without dependencies], "callback": job body | null}``."""
    job = dict(doc["components"]["schemas"]["EnqueueRequest"])
    job["properties"] = {k: v for k, v in job.get("properties", {}).items() if k not in BATCH_JOB_EXCLUDED}
    job["required"] = [k for k in job.get("required", []) if k not in BATCH_JOB_EXCLUDED]
    schema = {
        "type": "object",
        "additionalProperties": False,
        "required": ["jobs"],
        "properties": {
            "jobs": {"type": "array", "minItems": 1, "items": job},
            "callback": {"anyOf": [{"$ref": "#/components/schemas/EnqueueRequest"}, {"type": "null"}]},
        },
    }
    return {"required": True, "content": {"application/json": {"schema": schema}}}


def operations(doc: dict[str, Any]) -> Iterable[dict[str, Any]]:
    """Every operation object of ``doc``."""
    for item in doc.get("paths", {}).values():
        yield from (op for op in item.values() if isinstance(op, dict) and "responses" in op)


def finish(doc: dict[str, Any], enqueue_operations: Iterable[str]) -> dict[str, Any]:
    """Add the headers and bodies above to ``doc`` (in place; idempotent)."""
    enqueuing = set(enqueue_operations)
    schemas = doc.setdefault("components", {}).setdefault("schemas", {})
    schemas["JsonValue"] = JSON_VALUE
    enqueue = schemas.get("EnqueueRequest", {}).get("properties", {})
    if "payload" in enqueue:
        enqueue["payload"] = {**enqueue["payload"], "anyOf": [{"$ref": "#/components/schemas/JsonValue"}]}
    for op in operations(doc):
        op_id = op.get("operationId", "")
        responses = op["responses"]
        if op_id in OPTIONAL_BODIES and "requestBody" in op:
            op["requestBody"]["required"] = False
            for media in op["requestBody"].get("content", {}).values():
                schema = media.get("schema", {})
                if "anyOf" not in schema:
                    media["schema"] = {"anyOf": [schema, {"type": "null"}]}
        if op_id == "create_batch" and "requestBody" not in op:
            op["requestBody"] = batch_body(doc)
        if op_id == "set_limits" and "requestBody" not in op:
            op["requestBody"] = limits_body()
        for param in op.get("parameters", []):
            if param.get("in") == "path" and param.get("name") == "queue":
                param["schema"] = dict(QUEUE_NAME)
        if op_id in enqueuing:
            params = op.setdefault("parameters", [])
            if not any(p.get("name") == IDEMPOTENCY_HEADER for p in params):
                params.append(IDEMPOTENCY_PARAMETER)
        if "422" in responses:
            meaning = UNPROCESSABLE_ENQUEUE if op_id in enqueuing else UNPROCESSABLE.get(op_id)
            if meaning:
                responses["422"]["description"] = meaning
        for code, response in responses.items():
            headers = response.setdefault("headers", {})
            if code == "202" or (code == "200" and op_id in enqueuing):
                headers["Location"] = LOCATION
            elif code == "401":
                headers["WWW-Authenticate"] = WWW_AUTHENTICATE
            elif code == "503" and "ErrorResponse" in str(response.get("content")):
                headers["Retry-After"] = RETRY_AFTER
            if not headers:
                del response["headers"]
            body = BODIES.get((op_id, code))
            if body is not None and "content" not in response:
                response["content"] = body
    return doc
