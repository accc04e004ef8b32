"""Leasehold workers: the handler API, worker processes and their CLI.

Handler modules import from here::

    from workers import handler, JobContext, PermanentError
"""

from workers.handlers import JobContext, PermanentError, handler

__all__ = ["JobContext", "PermanentError", "handler"]
