"""Leasehold workers: the handler API, worker processes and their CLI.

Handler modules import from here::

    from workers import handler, periodic, JobContext, PermanentError
"""

from workers.handlers import JobContext, PermanentError, handler
from workers.periodic import periodic

__all__ = ["JobContext", "PermanentError", "handler", "periodic"]
