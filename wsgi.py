"""WSGI entry point for gunicorn and ``flask --app wsgi``."""

from webapp import create_app

app = create_app()
