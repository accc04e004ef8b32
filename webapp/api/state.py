"""Per-app state of the API, kept in ``app.extensions["leasehold.api"]``.

Nothing here is process-global: each app built by ``create_app`` has its own
tokens, OpenAPI generator, metrics registry and job status response.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from flask import Flask, current_app
from prometheus_client import CollectorRegistry
from spectree import SpecTree

from store.base import JobStore
from store.models import Job
from webapp.api.auth import ApiToken

#: Shapes ``GET /api/jobs/<id>``: takes the job, returns what a Flask view may
#: return (a Response, a dict, or ``(body, status[, headers])``).
StatusResponseFactory = Callable[[Job], Any]

EXTENSION = "leasehold.api"


@dataclass(slots=True)
class ApiState:
    tokens: tuple[ApiToken, ...]
    spec: SpecTree
    metrics: CollectorRegistry
    status_response: StatusResponseFactory | None = None
    #: Endpoint names of the async endpoints registered on the app.
    async_endpoints: set[str] = field(default_factory=set)
    #: operationIds of the routes that enqueue (documented with Idempotency-Key and Location).
    enqueue_operations: set[str] = field(default_factory=set)
    #: ``Location`` prefix of a job (``…/api/jobs/``) by script root (``enqueue.job_location``).
    job_paths: dict[str, str] = field(default_factory=dict)
    #: The handler catalogue enqueues read their defaults from (``enqueue.handler_catalogue``).
    catalogue: Any = None
    _doc_finished: bool = False
    #: Serialises the first generation of the OpenAPI document (spectree builds
    #: it lazily and mutates its model table while doing so).
    spec_lock: threading.Lock = field(default_factory=threading.Lock)

    def openapi(self) -> dict[str, Any]:
        """The OpenAPI document, generated once (after the app's routes are final)."""
        from webapp.api.openapi_doc import finish  # imports enqueue, which imports this module

        with self.spec_lock:
            doc = self.spec.spec
            if not self._doc_finished:
                finish(doc, self.enqueue_operations)
                self._doc_finished = True
            return doc


def api_state(app: Flask | None = None) -> ApiState:
    """The API state of ``app`` (default: the current app). Raises RuntimeError
    if the API was not initialised on it."""
    target = app or current_app
    try:
        return target.extensions[EXTENSION]
    except KeyError:
        raise RuntimeError("the Leasehold API is not initialised on this app (webapp.api.init_app)") from None


def job_store() -> JobStore:
    """The current app's store (opened once per process by create_app)."""
    return current_app.extensions["leasehold"]
