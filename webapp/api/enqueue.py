"""Enqueueing from an HTTP request: idempotency and the 202 answer.

Shared by ``POST /api/jobs``, ``POST /api/batches`` (``request_spec``: the
handler catalogue applied the same way) and the async endpoints.
"""

from __future__ import annotations

import dataclasses
import re

from flask import Response, request, url_for

from leasehold import hooks
from leasehold.hooks import TRACE_HEADERS
from store.base import StoreSettings
from store.catalogue import Catalogue
from store.models import MAX_IDEMPOTENCY_KEY_LEN, Job, JobSpec
from webapp.api.encoding import IDEMPOTENCY_HEADER, json_response
from webapp.api.errors import APIError
from webapp.api.schemas import EnqueueRequest
from webapp.api.state import api_state, job_store

_KEY = re.compile(r"^[\x21-\x7e][\x20-\x7e]*$")


def handler_catalogue() -> Catalogue:
    """The app's view of the store's handler catalogue (made on first use;
    it caches a read for ``store.catalogue.CACHE_S``). The web app loads no
    handler module: defaults come from what the live workers publish."""
    state = api_state()
    if state.catalogue is None:
        state.catalogue = Catalogue(job_store())
    return state.catalogue


#: The JobSpec fields an enqueue body sets (every field of EnqueueRequest).
_FIELDS = tuple(EnqueueRequest.model_fields)


def request_spec(body: EnqueueRequest, key: str | None = None) -> JobSpec:
    """The JobSpec of a ``POST /api/jobs`` body (a batch's jobs and callback
    too): ``depends_on`` as id strings, ``key`` its Idempotency-Key, and the
    options the body leaves out (queue, max_retries, timeout_s) the handler's
    defaults from the catalogue the live workers publish. Raises
    ValidationError naming ``name`` for a handler that catalogue does not
    know, once it knows any."""
    fields = {name: getattr(body, name) for name in _FIELDS}
    if body.depends_on is not None:
        fields["depends_on"] = tuple(i.lower() for i in body.depends_on)
    spec = JobSpec(idempotency_key=key, **fields)
    return handler_catalogue().with_defaults(spec, body.model_fields_set)


def idempotency_key() -> str | None:
    """The request's Idempotency-Key (printable ASCII, at most 200 characters),
    or None. Raises APIError 422 naming the header."""
    raw = request.headers.get(IDEMPOTENCY_HEADER)
    if raw is None:
        return None
    key = raw.strip()
    if not key or len(key) > MAX_IDEMPOTENCY_KEY_LEN or not _KEY.match(key):
        raise APIError(
            422,
            f"{IDEMPOTENCY_HEADER}: must be 1-{MAX_IDEMPOTENCY_KEY_LEN} printable ASCII characters",
            IDEMPOTENCY_HEADER,
        )
    return key


#: A job id that stands for every id when the Location prefix is worked out.
_ANY_ID = "00000000-0000-0000-0000-000000000000"


def job_location(job_id: str) -> str:
    """``url_for("api.get_job", job_id=job_id)``: the prefix is built by
    ``url_for`` once per script root and cached (a job id, a UUID, needs no quoting)."""
    paths = api_state().job_paths
    root = request.root_path
    prefix = paths.get(root)
    if prefix is None:
        prefix = paths[root] = url_for("api.get_job", job_id=_ANY_ID).removesuffix(_ANY_ID)
    return prefix + job_id


def same_request(job: Job, spec: JobSpec, defaults: StoreSettings) -> bool:
    """True when ``spec`` would make the job ``job`` already is: the rule that
    tells a replay from an Idempotency-Key reused for a different request.

    No fingerprint of the first body is kept; the job itself is compared:
    name, queue, payload, priority, max_retries and timeout (an omitted one as
    the store's default), lease TTL, and an async endpoint's route and query
    parameters. Not compared, because the job does not keep them: ``delay_s``,
    ``unique_key``/``unique_for``, and the stored request headers (a client's
    retry may carry a new ``X-Request-Id``)."""
    max_retries = defaults.max_retries if spec.max_retries is None else spec.max_retries
    timeout_s = defaults.job_timeout_s if spec.timeout_s is None else spec.timeout_s
    return (
        (job.name, job.queue, job.payload, job.priority)
        == (spec.name, spec.queue, spec.payload, spec.priority)
        and (job.max_retries, job.timeout_seconds, job.lease_ttl_seconds)
        == (max_retries, timeout_s, spec.lease_ttl_s)
        and (job.route_params, job.query_params) == (spec.route_params, spec.query_params)
    )


def enqueue_response(spec: JobSpec) -> Response:
    """Enqueue ``spec``: 202 with the new job and ``Location``.

    Idempotency-Key (draft-ietf-httpapi-idempotency-key-header): a replay of
    the request that made a job (``same_request``) answers as the first did,
    202 with that job and its ``Location``, and writes nothing; the key reused
    for a different request is 422. A unique job (``unique_key``/``unique_for``)
    whose key is held: 200 with the job holding it, whatever its payload.
    A W3C ``traceparent`` (and ``tracestate``) header of the request is kept
    in the job's headers, so the run continues the caller's trace. A new job
    is announced with the ``job_enqueued`` signal."""
    store = job_store()
    trace = {name: request.headers[name] for name in TRACE_HEADERS if name in request.headers}
    if trace:
        spec = dataclasses.replace(spec, headers={**(spec.headers or {}), **trace})
    job, created = store.enqueue_idempotent(spec)
    if created:
        hooks.announce_enqueued([job])
    by_idempotency = spec.idempotency_key is not None and job.idempotency_key == spec.idempotency_key
    if not created and by_idempotency and not same_request(job, spec, store.settings):
        raise APIError(
            422,
            f"{IDEMPOTENCY_HEADER} was already used for a different request (job {job.id})",
            IDEMPOTENCY_HEADER,
        )
    response = json_response(job.to_json(), 202 if created or by_idempotency else 200)
    response.headers["Location"] = job_location(job.id)
    return response
