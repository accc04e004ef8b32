"""A webhook sink for the alert tests: a real HTTP server on a loopback port
in a thread, keeping every request it gets (headers and JSON body)."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Received:
    headers: dict[str, str]
    raw: bytes

    @property
    def body(self) -> dict[str, Any]:
        return json.loads(self.raw)


@dataclass
class Sink:
    """``status``: what it answers; ``delay_s``: how long it waits first
    (a slow or dead webhook); ``location``: a redirect target with a 3xx."""

    status: int = 200
    delay_s: float = 0.0
    location: str | None = None
    got: list[Received] = field(default_factory=list)
    cond: threading.Condition = field(default_factory=threading.Condition)
    url: str = ""

    def wait_for(self, n: int, timeout_s: float) -> list[Received]:
        """Wait until ``n`` requests came (at most ``timeout_s``); all of them."""
        deadline = time.monotonic() + timeout_s
        with self.cond:
            while len(self.got) < n and (left := deadline - time.monotonic()) > 0:
                self.cond.wait(left)
            return list(self.got)


def start_sink(sink: Sink) -> tuple[ThreadingHTTPServer, Sink]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            with sink.cond:
                sink.got.append(Received(dict(self.headers.items()), raw))
                sink.cond.notify_all()
            if sink.delay_s:
                time.sleep(sink.delay_s)  # the webhook is slow: the server's behaviour under test
            self.send_response(sink.status)
            if sink.location:
                self.send_header("Location", sink.location)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *_args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    sink.url = f"http://127.0.0.1:{server.server_address[1]}/hook/s3cr3t-path"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, sink
