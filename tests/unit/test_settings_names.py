"""Settings refuse what they do not know: an unknown ``LEASEHOLD_*`` name
stops every process with one line and the closest match; a short secret key
and a SQLite path in a folder that does not exist are refused."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from leasehold import settings as settings_module
from leasehold.settings import check_names, settings_from_env
from store import open_store
from store.errors import ValidationError
from webapp import create_app
from webapp.config import ConfigError, load_web_settings

REPO = Path(__file__).resolve().parents[2]
TYPO_LINE = "unknown setting LEASEHOLD_STORE_ULR (did you mean LEASEHOLD_STORE_URL?)"


def test_a_misspelled_name_is_refused_with_the_closest_match() -> None:
    with pytest.raises(ConfigError) as caught:
        settings_from_env({"LEASEHOLD_STORE_ULR": "redis://127.0.0.1:6379/0"})
    assert str(caught.value) == TYPO_LINE
    with pytest.raises(ConfigError, match=r"LEASEHOLD_API_TOKEN \(did you mean LEASEHOLD_API_TOKENS\?\)"):
        check_names({"LEASEHOLD_API_TOKEN": "t:operator"})
    with pytest.raises(ConfigError, match=r"LEASEHOLD_LEASE_TTLL \(did you mean LEASEHOLD_LEASE_TTL\?\)"):
        check_names({"LEASEHOLD_LEASE_TTLL": "5"})
    with pytest.raises(ConfigError, match=r"^unknown setting LEASEHOLD_ZZZZZZZZZZZZ$"):
        check_names({"LEASEHOLD_ZZZZZZZZZZZZ": "1"})


def test_every_setting_web_and_gunicorn_name_and_the_test_switches_pass() -> None:
    names = {name: "x" for name in settings_module.known_names()}
    names |= {"LEASEHOLD_TEST_PG_URL": "x", "LEASEHOLD_SOAK_JOBS": "1", "LEASEHOLD_FORCE_THROWAWAY": "1"}
    names |= {"LEASEHOLDER": "x", "_LEASEHOLD_WORKER_CONFIG": "{}", "PATH": "/bin"}
    check_names(names)
    assert {
        "LEASEHOLD_SECRET_KEY",
        "LEASEHOLD_WEB_BIND",
        "LEASEHOLD_STORE_URL",
    } <= settings_module.known_names()


def test_the_known_names_come_from_the_settings_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """A setting added to the model is known at once (no second list to keep)."""
    with pytest.raises(ConfigError):
        check_names({"LEASEHOLD_NEW_KNOB": "1"})
    monkeypatch.setitem(settings_module.DEFAULTS, "NEW_KNOB", 1)
    check_names({"LEASEHOLD_NEW_KNOB": "1"})
    monkeypatch.setitem(settings_module.WEB_DEFAULTS, "OTHER_KNOB", 1)
    check_names({"LEASEHOLD_OTHER_KNOB": "1"})


def test_the_web_app_refuses_an_unknown_name(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("LEASEHOLD_STORE_ULR", "redis://127.0.0.1:6379/0")
    with pytest.raises(ConfigError, match="LEASEHOLD_STORE_ULR"):
        create_app({"TESTING": True, "STORE_URL": f"sqlite:///{tmp_path}/jobs.db"})


def _run(code: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("LEASEHOLD_")}
    return subprocess.run(
        [sys.executable, *code],
        env={**clean, "PYTHONPATH": str(REPO), **env},
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    "code",
    [
        ["-m", "leasehold.cli", "stats"],
        ["-m", "leasehold.cli", "worker", "--burst"],
        ["-m", "leasehold.cli", "hash-password", "--password", "p"],
        ["-c", "import leasehold.wsgi"],
        ["-c", "import webapp.gunicorn_conf"],
    ],
    ids=["cli", "worker", "hash-password", "web", "gunicorn-config"],
)
def test_every_process_stops_with_one_line(code: list[str], tmp_path: Path) -> None:
    done = _run(code, LEASEHOLD_STORE_ULR="redis://x", LEASEHOLD_SECRET_KEY="k" * 32)
    assert done.returncode == 1, done.stdout
    assert done.stderr.strip().splitlines() == [f"Error: {TYPO_LINE}"]
    assert not (REPO / "instance" / "x").exists()


def test_a_short_secret_key_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"^LEASEHOLD_SECRET_KEY must be at least 32 characters, got 5"):
        load_web_settings({"SECRET_KEY": "short"})
    assert load_web_settings({"SECRET_KEY": "k" * 32}).secret_key == "k" * 32
    done = _run(["-c", "import leasehold.wsgi"], LEASEHOLD_SECRET_KEY="short")
    assert done.returncode == 1
    assert done.stderr.startswith("Error: LEASEHOLD_SECRET_KEY must be at least 32 characters")


def test_a_sqlite_path_in_a_missing_folder_is_refused_not_created(tmp_path: Path) -> None:
    missing = tmp_path / "nonexistent" / "dir"
    with pytest.raises(ValidationError, match="does not exist"):
        open_store(f"sqlite:///{missing}/x.db")
    assert not (tmp_path / "nonexistent").exists()


def test_every_variable_the_gunicorn_config_reads_is_known() -> None:
    import re

    text = (REPO / "webapp" / "gunicorn_conf.py").read_text()
    read = set(re.findall(r"\"(LEASEHOLD_[A-Z_]+)\"", text))
    assert read and read <= settings_module.known_names()
