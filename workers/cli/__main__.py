"""``python -m workers.cli``: the ``leasehold`` command without the console script."""

from workers.cli import main

main()
