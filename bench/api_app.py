"""The Leasehold app bench/api_enqueue.py serves: ``wsgi.py``'s app plus one async endpoint.

    gunicorn -c gunicorn.conf.py bench.api_app:app

The standalone app (``leasehold.wsgi.app``: the JSON API and the console, from the
``LEASEHOLD_*`` environment) with ``POST /orders/<int:order_id>/invoice``
mapped to the job ``make-invoice`` on queue ``billing`` (the example of
``webapp.api.async_endpoints``), so the bench measures both ways of enqueueing
over HTTP: ``POST /api/jobs`` and an async endpoint.
"""

from __future__ import annotations

from leasehold.wsgi import app
from webapp.api import async_endpoint

async_endpoint(app, "/orders/<int:order_id>/invoice", "make-invoice", queue="billing")

__all__ = ["app"]
