"""WSGI entry point for gunicorn (``webapp.wsgi:app``, what ``leasehold web`` serves).

A bad ``LEASEHOLD_*`` setting stops the process with one line naming the
variable (``Error: LEASEHOLD_LEASE_TTL must be ...``), not a traceback.
"""

import sys

from store.errors import ValidationError
from webapp import create_app
from webapp.config import ConfigError

try:
    app = create_app()
except (ConfigError, ValidationError) as exc:
    sys.exit(f"Error: {exc}")
