"""The wheel's package list (pyproject.toml) names every package of the
checkout, so a new subpackage cannot silently be left out of ``make dist``."""

from __future__ import annotations

import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TOP = ("leasehold", "store", "workers", "webapp")
#: Folders mapped into the webapp package in the wheel (top-level in the checkout).
MAPPED = {"webapp.templates": "templates", "webapp.static": "static"}


def _setuptools() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]


def test_every_package_folder_is_listed() -> None:
    on_disk = {
        ".".join(folder.relative_to(REPO).parts)
        for top in TOP
        for folder in [REPO / top, *(REPO / top).rglob("*")]
        if folder.is_dir()
        and folder.name != "__pycache__"
        and any(f.suffix in (".py", ".lua", ".mako") for f in folder.iterdir())
        and not (folder.name == "lib" and folder.parent.name == "lua")  # lua/lib: data of store.redis.lua
    }
    listed = set(_setuptools()["packages"])
    assert on_disk | set(MAPPED) == listed


def test_templates_and_static_are_mapped_into_webapp_with_every_file() -> None:
    setuptools = _setuptools()
    assert setuptools["package-dir"] == MAPPED
    for package, folder in MAPPED.items():
        globs = setuptools["package-data"][package]
        files = [f for f in (REPO / folder).rglob("*") if f.is_file()]
        assert files
        for f in files:
            assert any(f.relative_to(REPO / folder).match(g) for g in globs), f"{f} is not in the wheel"
