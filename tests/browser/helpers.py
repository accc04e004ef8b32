"""Helpers of the browser tests: the live server's address, a watched page,
logging in and screenshots (fixtures are in conftest.py)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from playwright.sync_api import Page

from tests.backends import StoreHandle
from tests.web.console_fixtures import PASSWORD

REPO = Path(__file__).resolve().parents[2]
SCREENSHOTS = REPO / "test-artifacts" / "screenshots"
#: Generous bounded waits (ms): other suites may share this machine's two cores.
WAIT_MS = 30_000


@dataclass
class LiveServer:
    url: str
    handle: StoreHandle


class Watched:
    """A page with what it did recorded: dialogs, requests, console errors."""

    def __init__(self, page: Page) -> None:
        self.page = page
        self.dialogs: list[str] = []
        self.requests: list[str] = []
        self.errors: list[str] = []
        page.on("request", lambda r: self.requests.append(r.url))
        page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: self.errors.append(str(e)))

    def csp_violations(self) -> list[str]:
        return [e for e in self.errors if "Content Security Policy" in e or "Refused to" in e]


def log_in(page: Page, server: LiveServer, name: str, next_path: str = "/") -> None:
    page.goto(f"{server.url}/login?next={next_path}")
    page.fill("#username", name)
    page.fill("#password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{server.url}{next_path}")


def screenshot(page: Page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)
