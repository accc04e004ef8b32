"""The worker side loads no web code (GitHub issue 13, point 4): importing the
worker, its process pool and the ``leasehold`` CLI in a fresh interpreter
loads no ``flask*`` or ``webapp*`` module."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

PROBE = """
import json, sys
import workers.worker, workers.pool, workers.cli, workers.settings, store.recovery
print(json.dumps(sorted(sys.modules)))
"""


def test_worker_pool_and_cli_import_no_flask_and_no_webapp() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=REPO, capture_output=True, text=True, timeout=60, check=True
    )
    loaded = json.loads(done.stdout)
    assert "workers.cli" in loaded and "workers.worker" in loaded
    web = [m for m in loaded if m.split(".")[0].startswith(("flask", "webapp"))]
    assert web == []
