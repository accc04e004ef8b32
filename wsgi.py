"""WSGI entry point for gunicorn and ``flask --app wsgi`` in a checkout.

The app is ``leasehold.wsgi.app`` (what an installed Leasehold serves): a bad
``LEASEHOLD_*`` setting stops the process with one line naming the variable.
"""

from leasehold.wsgi import app

__all__ = ["app"]
