"""A local HTTP server for `evalsuite download` tests: serves bytes by path, honours (or ignores) Range, can cut a
transfer short once, and logs every request with the bytes it sent, so a test can count what a resume fetched."""

import hashlib
import http.server
import sys
import threading
from dataclasses import dataclass, field


@dataclass
class Sent:
    path: str
    range: str | None
    status: int
    body_bytes: int


@dataclass
class Served:
    files: dict = field(default_factory=dict)  # URL path, with its query where one was given -> bytes
    honour_range: bool = True
    cut_after: dict = field(default_factory=dict)  # path -> bytes to send before closing, once
    no_length: set = field(default_factory=set)  # paths sent without Content-Length (closed-delimited)
    content_types: dict = field(default_factory=dict)
    refuse: dict = field(default_factory=dict)  # path -> an HTTP error status to answer instead
    log: list = field(default_factory=list)
    base: str = ""

    def add(self, path: str, data: bytes, content_type: str = "application/octet-stream") -> dict:
        """Serve `data` at `path`; returns its size and digests, as a source table would publish them."""
        self.files[path] = data
        self.content_types[path] = content_type
        return {"size": len(data), "sha256": hashlib.sha256(data).hexdigest(),
                "md5": hashlib.md5(data).hexdigest()}

    def body_bytes(self, path: str) -> int:
        return sum(sent.body_bytes for sent in self.log if sent.path == path)

    def requests(self, path: str) -> list:
        return [sent for sent in self.log if sent.path == path]


def _handler(served: Served):
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"  # one request per connection: closing it ends the body early

        def log_message(self, *args):  # quiet
            pass

        def do_GET(self):  # the http.server hook
            path = self.path if self.path in served.files else self.path.split("?", 1)[0]
            data = served.files.get(path)
            requested = self.headers.get("Range")
            if data is None or path in served.refuse:
                status = served.refuse.get(path, 404)
                self.send_error(status)
                served.log.append(Sent(path, requested, status, 0))
                return
            start = 0
            if requested and served.honour_range:
                start = int(requested.split("=", 1)[1].split("-", 1)[0])
                if start >= len(data):
                    self.send_response(416)
                    self.send_header("Content-Range", f"bytes */{len(data)}")
                    self.end_headers()
                    served.log.append(Sent(path, requested, 416, 0))
                    return
                self.send_response(206)
                self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
            else:
                self.send_response(200)
            body = data[start:]
            self.send_header("Content-Type", served.content_types.get(path, "application/octet-stream"))
            self.send_header("ETag", '"' + hashlib.md5(data).hexdigest() + '"')
            if path not in served.no_length:
                self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if path in served.cut_after:
                body = body[:served.cut_after.pop(path)]
            # Logged before the body goes out: a client that has read it all may return (and a test read the log)
            # before this thread would get to a line after the write.
            served.log.append(Sent(path, requested, 206 if start else 200, len(body)))
            self.wfile.write(body)
            self.wfile.flush()

    return Handler


class _QuietServer(http.server.ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        # A client that refuses a download closes the socket mid-body; socketserver would print the BrokenPipe to
        # sys.stderr, which an in-process CLI test has redirected to the stderr it checks for one line.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class FileServer:
    """`with FileServer() as served:` a ThreadingHTTPServer on 127.0.0.1, port 0, in a daemon thread."""

    def __enter__(self) -> Served:
        self.served = Served()
        self.server = _QuietServer(("127.0.0.1", 0), _handler(self.served))
        self.served.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()
        return self.served

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


def url_path(url: str, query: bool = False) -> str:
    """The path (and with `query`, the query) a --mirror request for a source URL asks the server for."""
    rest = "/" + url.split("://", 1)[1].split("/", 1)[1]
    return rest if query else rest.split("?", 1)[0]
