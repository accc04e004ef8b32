"""gunicorn.conf.py: defaults, environment overrides, no credentials in the access log."""

from __future__ import annotations

import re
import runpy
from pathlib import Path
from typing import Any

import pytest

CONF = Path(__file__).resolve().parents[2] / "gunicorn.conf.py"
VARS = (
    "LEASEHOLD_WEB_BIND",
    "LEASEHOLD_WEB_WORKERS",
    "LEASEHOLD_WEB_THREADS",
    "LEASEHOLD_WEB_TIMEOUT",
    "LEASEHOLD_FORWARDED_ALLOW_IPS",
    "LEASEHOLD_WEB_ACCESSLOG",
)


def load(monkeypatch: pytest.MonkeyPatch, **env: str) -> dict[str, Any]:
    for name in VARS:
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return runpy.run_path(str(CONF))


def test_defaults_are_safe(monkeypatch: pytest.MonkeyPatch) -> None:
    conf = load(monkeypatch)
    assert conf["bind"] == ["127.0.0.1:8000"]
    assert 1 <= conf["workers"] <= 8
    assert conf["threads"] == 4
    assert conf["worker_class"] == "gthread"
    assert conf["forwarded_allow_ips"] == ""  # no proxy trusted unless named
    assert conf["preload_app"] is False
    assert conf["accesslog"] == "-"


def test_environment_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    conf = load(
        monkeypatch,
        LEASEHOLD_WEB_BIND="0.0.0.0:9000",
        LEASEHOLD_WEB_WORKERS="3",
        LEASEHOLD_WEB_THREADS="2",
        LEASEHOLD_WEB_TIMEOUT="60",
        LEASEHOLD_FORWARDED_ALLOW_IPS="10.0.0.5",
        LEASEHOLD_WEB_ACCESSLOG="off",
    )
    assert conf["bind"] == ["0.0.0.0:9000"]
    assert (conf["workers"], conf["threads"], conf["timeout"]) == (3, 2, 60)
    assert conf["forwarded_allow_ips"] == "10.0.0.5"
    assert conf["accesslog"] is None


@pytest.mark.parametrize(
    ("name", "value"), [("LEASEHOLD_WEB_WORKERS", "many"), ("LEASEHOLD_WEB_THREADS", "0")]
)
def test_bad_values_stop_the_start_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    with pytest.raises(SystemExit, match=name):
        load(monkeypatch, **{name: value})


def test_access_log_records_no_request_headers(monkeypatch: pytest.MonkeyPatch) -> None:
    fmt = load(monkeypatch)["access_log_format"]
    assert not re.search(r"%\(\{[^}]*\}i\)", fmt)  # no %({header}i) atom at all
    assert "%(u)s" not in fmt
