"""WSGI entry point for gunicorn (``leasehold.wsgi:app``, what ``leasehold web`` serves)
and for ``flask --app leasehold.wsgi``: the standalone web app with the
``leasehold`` commands registered on its Flask CLI.

A bad ``LEASEHOLD_*`` setting stops the process with one line naming the
variable (``Error: LEASEHOLD_LEASE_TTL must be ...``), not a traceback.
"""

import sys

from leasehold.cli.flask import create_cli_app
from store.errors import ValidationError
from webapp.config import ConfigError

try:
    app = create_cli_app()
except (ConfigError, ValidationError) as exc:
    sys.exit(f"Error: {exc}")
