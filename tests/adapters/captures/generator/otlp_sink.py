"""A minimal OTLP/HTTP sink for the Mastra capture: ``python otlp_sink.py PREFIX PORT``.

Writes every POSTed body (gunzipped, chunked transfer decoded) to ``PREFIX.<n>.<path>``.
"""

from __future__ import annotations

import gzip
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Sink(BaseHTTPRequestHandler):
    prefix = "capture"
    count = 0

    def log_message(self, *args: object) -> None:
        return

    def _body(self) -> bytes:
        if self.headers.get("transfer-encoding", "").lower() != "chunked":
            return self.rfile.read(int(self.headers.get("content-length", 0)))
        body = b""
        while size := int(self.rfile.readline().strip(), 16):
            body += self.rfile.read(size)
            self.rfile.readline()
        self.rfile.readline()
        return body

    def do_POST(self) -> None:
        body = self._body()
        if self.headers.get("content-encoding") == "gzip":
            body = gzip.decompress(body)
        Sink.count += 1
        with open(f"{Sink.prefix}.{Sink.count}.{self.path.strip('/').replace('/', '_')}", "wb") as fh:
            fh.write(body)
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.end_headers()


if __name__ == "__main__":
    Sink.prefix = sys.argv[1]
    ThreadingHTTPServer(("127.0.0.1", int(sys.argv[2])), Sink).serve_forever()
