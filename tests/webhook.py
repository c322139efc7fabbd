"""A webhook receiver on 127.0.0.1 for alert tests: it records every JSON body POSTed to it."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any


@contextmanager
def webhook_server(path: str = "/alerts") -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """Yield ``(url, received)``; ``received`` fills with the decoded bodies."""
    received: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            received.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}{path}", received
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
