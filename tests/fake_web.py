"""A web server in-process on 127.0.0.1 for the fetching tests: each path answers as a `Route`
says (status, headers, body; a delay before the answer; a body dripped slowly; a connection held
with no answer at all), and every request is recorded.

    with FakeWeb() as web:
        web.routes["/read.json"] = Route(body=b'{"name": "Read"}', content_type="application/json")
        web.url("/read.json")
"""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PNG = (
    b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00"
    b"\x1f\x15\xc4\x89\x00\x00\x00\rIDATx\x9cc\xf8\xcf\xc0\xf0\x1f\x00\x05\x00\x01\xff\x89\x99"
    b"=\x1d\x00\x00\x00\x00IEND\xaeB`\x82"
)
SVG = b'<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>'


@dataclass
class Route:
    status: int = 200
    body: bytes = b""
    content_type: str | None = "text/html; charset=utf-8"
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # seconds before the answer starts
    drip: float = 0.0  # seconds between the body's bytes
    hang: bool = False  # accept the request and never answer (until the server stops)
    declare_length: bool = True


class FakeWeb:
    def __init__(self) -> None:
        self.routes: dict[str, Route] = {}
        self.requests: list[tuple[str, dict[str, str]]] = []
        self._stopping = threading.Event()
        web = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                web.requests.append((self.path, dict(self.headers.items())))
                route = web.routes.get(self.path, Route(status=404, body=b"not here"))
                if route.hang:
                    web._stopping.wait(30)
                    return
                if route.delay:
                    web._stopping.wait(route.delay)
                self.send_response(route.status)
                if route.content_type is not None:
                    self.send_header("Content-Type", route.content_type)
                if route.declare_length:
                    self.send_header("Content-Length", str(len(route.body)))
                for name, value in route.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                with contextlib.suppress(OSError):
                    if route.drip:
                        for index in range(len(route.body)):
                            if web._stopping.is_set():
                                return
                            self.wfile.write(route.body[index : index + 1])
                            self.wfile.flush()
                            time.sleep(route.drip)
                    else:
                        self.wfile.write(route.body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def paths_asked(self) -> list[str]:
        return [path for path, _ in self.requests]

    def __enter__(self) -> FakeWeb:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stopping.set()
        self.server.shutdown()
        self.server.server_close()
