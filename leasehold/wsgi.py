"""WSGI entry point for gunicorn (``leasehold.wsgi:app``, what ``leasehold web`` serves)
and for ``flask --app leasehold.wsgi``: the standalone web app with the
``leasehold`` commands registered on its Flask CLI.

A bad ``LEASEHOLD_*`` setting stops the process with one line naming the
variable (``Error: LEASEHOLD_LEASE_TTL must be ...``), not a traceback; so
does a store without this release's schema (``... has no Leasehold schema:
run leasehold db upgrade``). A store that cannot be reached yet does not stop
it (the app answers 503 until it can). Under ``flask --app wsgi`` the schema
is checked by each command instead, so ``db upgrade`` can create it.
"""

import os
import sys

from leasehold.cli.flask import create_cli_app
from store.errors import StoreUnavailable, ValidationError
from store.schema_version import SchemaMismatch, check_schema
from webapp.config import ConfigError

try:
    app = create_cli_app()
except (ConfigError, ValidationError) as exc:
    sys.exit(f"Error: {exc}")

if os.environ.get("FLASK_RUN_FROM_CLI") != "true":
    try:
        check_schema(app.extensions["leasehold"], app.extensions["leasehold.settings"].store_url)
    except SchemaMismatch as exc:
        app.extensions["leasehold"].close()
        print(f"Error: {exc}", file=sys.stderr)
        # Under gunicorn, exit as a worker that failed to boot (3): the master
        # stops instead of starting the worker again and again.
        sys.exit(3 if "gunicorn.arbiter" in sys.modules else 1)
    except StoreUnavailable:
        pass
