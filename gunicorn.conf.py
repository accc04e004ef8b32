"""gunicorn settings for the Leasehold web app: ``gunicorn -c gunicorn.conf.py wsgi:app``.

The settings (and the LEASEHOLD_WEB_* variables that change them) live in
``webapp/gunicorn_conf.py``, so an installed Leasehold carries them too
(``leasehold web`` runs ``gunicorn -c python:webapp.gunicorn_conf leasehold.wsgi:app``).
This file runs that module's code afresh, so both ways of starting read the
environment the same way.
"""

import runpy
from pathlib import Path

globals().update(
    {
        name: value
        for name, value in runpy.run_path(
            str(Path(__file__).resolve().parent / "webapp" / "gunicorn_conf.py")
        ).items()
        if not name.startswith("__")
    }
)
