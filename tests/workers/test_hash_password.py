"""Logins for pip users: ``leasehold hash-password`` (the hash alone on
stdout, prompts on stderr) is what the login page names."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner
from werkzeug.security import check_password_hash

from leasehold.cli import leasehold
from store.sql import migrate
from webapp import create_app


def test_hash_password_prints_the_hash_alone() -> None:
    result = CliRunner().invoke(leasehold, ["hash-password"], input="pw-1\npw-1\n", prog_name="leasehold")
    assert result.exit_code == 0, result.output
    assert "Password" in result.stderr
    [line] = result.stdout.splitlines()
    assert check_password_hash(line, "pw-1")


def test_the_login_page_names_the_leasehold_command(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    migrate(url)
    app = create_app({"TESTING": True, "SECRET_KEY": "k" * 32, "STORE_URL": url, "USERS": ""})
    try:
        page = app.test_client().get("/login").get_data(as_text=True)
    finally:
        app.extensions["leasehold"].close()
    assert "<code>leasehold hash-password</code>" in page and "flask --app" not in page
