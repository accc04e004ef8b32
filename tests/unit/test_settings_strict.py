"""One strict configuration: every LEASEHOLD_* value typed,
bounded, refused with one line naming it; the README's table and the
settings model list the same variables with the same defaults."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from werkzeug.security import generate_password_hash

from leasehold.settings import settings_from_env
from store.errors import ValidationError
from store.sql.engine import pg_connect_timeout_s
from webapp import create_app
from webapp.config import DEFAULTS, ConfigError, load_web_settings
from webapp.console import auth

REPO = Path(__file__).resolve().parents[2]
#: Rows of the README table not in the model: gunicorn's own variables (webapp/gunicorn_conf.py).
GUNICORN_ROW = "LEASEHOLD_WEB_*"


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("MAX_CONTENT_LENGTH", "1MB"),
        ("MAX_CONTENT_LENGTH", "0"),
        ("SECURE_COOKIES", "ture"),
        ("METRICS_SAMPLE_JOBS", "-1"),
        ("SEARCH_LIMIT", "0"),
        ("TRUSTED_PROXIES", "two"),
        ("LOG_FORMAT", "xml"),
    ],
)
def test_bad_web_values_name_their_variable(name: str, value: str) -> None:
    with pytest.raises(ConfigError, match=f"^LEASEHOLD_{name} "):
        load_web_settings({name: value})


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("LEASE_TTL", "1e9"),
        ("LEASE_TTL", "thirty"),
        ("RECOVERY_ENABLED", "ture"),
        ("MAX_RETRIES", "2.5"),
        ("RETRY_JITTER", "1.5"),
        ("PG_CONNECT_TIMEOUT", "soon"),
        ("PG_CONNECT_TIMEOUT", "0"),
        ("PG_SCHEMA", "Bad-Name"),
    ],
)
def test_bad_shared_values_name_their_variable(name: str, value: str) -> None:
    with pytest.raises(ConfigError, match=f"^LEASEHOLD_{name} "):
        settings_from_env({f"LEASEHOLD_{name}": value})


def test_timers_are_checked_together() -> None:
    with pytest.raises(
        ConfigError, match="LEASEHOLD_RECOVERY_LOCK_TTL must be >= LEASEHOLD_RECOVERY_INTERVAL"
    ):
        settings_from_env({"LEASEHOLD_RECOVERY_INTERVAL": "60", "LEASEHOLD_RECOVERY_LOCK_TTL": "30"})
    with pytest.raises(ConfigError, match="LEASEHOLD_WORKER_FORGET_AFTER"):
        settings_from_env({"LEASEHOLD_LEASE_TTL": "60", "LEASEHOLD_WORKER_FORGET_AFTER": "100"})


def test_the_store_checks_its_connect_timeout_too() -> None:
    assert pg_connect_timeout_s("") == 5
    assert pg_connect_timeout_s("12") == 12
    with pytest.raises(ValidationError, match="LEASEHOLD_PG_CONNECT_TIMEOUT"):
        pg_connect_timeout_s("5s")


def test_an_all_digit_secret_key_stays_text(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("LEASEHOLD_SECRET_KEY", "12345678901234567890123456789012")
    monkeypatch.setenv("LEASEHOLD_MAX_CONTENT_LENGTH", "2048")
    monkeypatch.setenv("LEASEHOLD_SECURE_COOKIES", "yes")
    app = create_app({"STORE_URL": f"sqlite:///{tmp_path}/jobs.db"})
    try:
        assert app.secret_key == "12345678901234567890123456789012"
        assert app.config["MAX_CONTENT_LENGTH"] == 2048
        assert app.config["SESSION_COOKIE_SECURE"] is True
    finally:
        app.extensions["leasehold"].close()


def test_a_bad_value_stops_the_web_process_with_one_line(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "LEASEHOLD_STORE_URL": f"sqlite:///{tmp_path}/jobs.db",
        "LEASEHOLD_SECRET_KEY": "x" * 32,
        "LEASEHOLD_MAX_CONTENT_LENGTH": "1MB",
    }
    done = subprocess.run(
        [sys.executable, "-c", "import leasehold.wsgi"],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "Error: LEASEHOLD_MAX_CONTENT_LENGTH must be an integer, got '1MB'"
    ]


def _readme_rows() -> dict[str, str]:
    text = (REPO / "README.md").read_text()
    rows: dict[str, str] = {}
    for line in text.splitlines():
        match = re.match(r"^\| `(LEASEHOLD_[A-Z_*]+)`[^|]*\|[^|]*\| ([^|]*) \|", line)
        if match:
            rows[match.group(1)] = match.group(2).strip()
    return rows


def _same_default(documented: str, default: object) -> bool:
    """A number or word in the README equals the model's default; text in
    parentheses or a formula documents an empty or 0 ("computed") default."""
    word = documented.strip("`")
    if isinstance(default, bool):
        return word == str(default).lower()
    if isinstance(default, int | float):
        try:
            return float(word) == float(default)
        except ValueError:
            return default == 0
    return word == default or (not default and (documented.startswith("(") or word == ""))


def test_readme_table_and_settings_model_agree() -> None:
    rows = _readme_rows()
    documented = {name for name in rows if name != GUNICORN_ROW}
    assert documented == {f"LEASEHOLD_{key}" for key in DEFAULTS}
    wrong = {
        key: (rows[f"LEASEHOLD_{key}"], value)
        for key, value in DEFAULTS.items()
        if not _same_default(rows[f"LEASEHOLD_{key}"], value)
    }
    assert wrong == {}


def test_unknown_users_cost_the_same_hash_method_as_real_ones() -> None:
    method = generate_password_hash("x").split("$", 1)[0]
    assert auth.dummy_hash().split("$", 1)[0] == method
    assert method.startswith("scrypt")


def test_an_unknown_name_is_checked_with_the_configured_users_method() -> None:
    """A deployment whose users' hashes are pbkdf2 pays pbkdf2 for an unknown
    name too (not scrypt: the difference would tell names apart)."""
    fast = generate_password_hash("pw", method="pbkdf2:sha256:1000")
    method = auth.hash_method(fast)
    assert method == "pbkdf2:sha256:1000"
    assert auth.dummy_hash(method).split("$", 1)[0] == method
    assert auth.hash_method("not-a-werkzeug-hash") is None
    assert auth._dummy("nosuch:1").split("$", 1)[0].startswith("scrypt")  # falls back, never raises
