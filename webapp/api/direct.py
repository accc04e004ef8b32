"""Enqueue routes served without spectree's per-request wrapper.

spectree's ``validate`` decorator does two jobs: it records a route's
models for ``/openapi.json``, and at every request it validates the request
(parsing the body a second time, with the standard library, after
``bodies.read_json_body``; building dicts of every header and cookie) and
then re-parses and re-validates the response it is about to send. On the
enqueue routes (``POST /api/jobs``, async endpoints) that request-time work
cost more than the rest of the API's work together, so ``direct`` keeps the
decorator for the document and serves the plain view:

* the request body is validated by the view itself, from the body parsed
  once (``bodies.validated_body``: the same model, the same 422 naming the
  field as spectree's hook gives);
* the response is not re-validated: an enqueue route answers
  ``Job.to_json()`` of the job the store returns, whose shape the tests check
  against ``JobOut`` (tests/web/test_api_direct.py), not a body a view builds.

Every other route keeps spectree's validation of requests and responses.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any


def direct(documented: Callable[..., Any], view: Callable[..., Any]) -> Callable[..., Any]:
    """A view function that calls ``view`` and carries ``documented`` (the
    spectree wrapper of ``view``) as its ``__wrapped__``, where spectree looks
    for a route's models and responses when it builds the document."""

    @functools.wraps(documented)
    def serve(*args: Any, **kwargs: Any) -> Any:
        return view(*args, **kwargs)

    return serve
