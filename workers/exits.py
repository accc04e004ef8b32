"""Exit codes of a worker process, and of ``worker --processes N`` (the
supervisor), so scripts and service managers can tell them apart.

A service manager should not restart a worker that exited with EXIT_STOPPED:
an operator asked it to stop (the shipped systemd unit says
``RestartPreventExitStatus=5``).
"""

from __future__ import annotations

EXIT_OK = 0
#: Second SIGTERM/SIGINT: left at once; the leases expire on their own.
EXIT_FORCED = 1
#: Every slot held by a run the worker gave up on: replace this process.
EXIT_SLOTS_LOST = 3
#: The process pool broke: replace this process.
EXIT_POOL_BROKEN = 4
#: An operator's ``stop`` command (console, API): the worker finished or
#: released its jobs and left. A supervisor does not replace it, and exits
#: with this code itself once every one of its workers was stopped this way.
EXIT_STOPPED = 5
#: The worker stopped with jobs it claimed still InProgress under its lease
#: in the store: their ack, nack or release could not be written (the store
#: was unavailable). It names them in its last log line; their leases expire
#: and recovery runs them again. Never 0: a deploy script's burst run must
#: not read it as "the queue is drained".
EXIT_UNRECORDED = 6
