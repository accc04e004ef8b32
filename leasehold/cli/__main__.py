"""``python -m leasehold.cli``: the ``leasehold`` command without the console script."""

from leasehold.cli import main

main()
