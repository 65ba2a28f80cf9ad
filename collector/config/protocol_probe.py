"""Whether an OTLP/gRPC export endpoint speaks gRPC at all: one HTTP/2 greeting, sent when
``check`` runs and when the daemon starts.

The export protocol is gRPC unless ``[export] protocol`` says otherwise, and a backend's
OTLP/HTTP port (Phoenix's 6006, MLflow's 5000, a collector's 4318) is an easy mistake for it:
every forwarded request and score then fails with gRPC's own text ("Trying to connect an http1.x
server"). gRPC is HTTP/2 from the first byte, so a plaintext gRPC client opens with the
HTTP/2 connection preface. A gRPC server answers it with its SETTINGS frame; an HTTP/1.x
server takes ``PRI * HTTP/2.0`` for a request and answers with a status line
(``HTTP/1.1 400 Bad Request``, ``505 HTTP Version Not Supported``): that answer is
`http1_answer`'s finding. Anything else (no answer, a refused or timed-out connection, an
``https://`` endpoint, which would need TLS first) proves nothing and is not reported: a
backend that is down at start may come up later, and the daemon keeps the data meanwhile.
"""

from __future__ import annotations

import socket
import threading

from collector.config.checks import endpoint_host_port

__all__ = ["PROBE_TIMEOUT_S", "grpc_endpoint_problem", "preface_answer"]

PROBE_TIMEOUT_S = 1.0
"""How long the probe waits to connect, and then for the first bytes of the answer."""

_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
_EMPTY_SETTINGS = b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"  # length 0, type SETTINGS, no flags, stream 0
_TLS_RECORDS = (0x15, 0x16)  # a TLS alert or handshake record: a TLS server read the preface as garbage


def preface_answer(endpoint: str, timeout_s: float = PROBE_TIMEOUT_S) -> bytes | None:
    """The first bytes ``endpoint`` (``http://HOST:PORT`` or ``HOST:PORT``) answers to the HTTP/2
    preface a plaintext gRPC client opens with; None when it cannot be reached or says nothing
    within ``timeout_s``, and for ``https://`` endpoints (TLS comes first there).

    Example:
        >>> preface_answer("https://backend:4317") is None, preface_answer("127.0.0.1:1") is None
        (True, True)
    """
    if endpoint.startswith("https://"):
        return None
    host, _, port = endpoint_host_port(endpoint).rpartition(":")
    if not port.isdigit():
        return None
    answers: list[bytes | None] = []
    # In a thread, waited for a bounded time: resolving the host name is not bound by the socket's
    # timeout, and a resolver that hangs must not hold up `check` or the daemon's start.
    asker = threading.Thread(target=lambda: answers.append(_ask(host.strip("[]"), int(port), timeout_s)),
                             name="tracescore-protocol-probe", daemon=True)
    asker.start()
    asker.join(3 * timeout_s)
    return answers[0] if answers else None


def _ask(host: str, port: int, timeout_s: float) -> bytes | None:
    """Connect, send the preface and an empty SETTINGS frame, and read the first answer."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as sock:
            sock.settimeout(timeout_s)
            sock.sendall(_PREFACE + _EMPTY_SETTINGS)
            return sock.recv(256) or None
    except (OSError, UnicodeError):
        return None


def _is_http2(answer: bytes) -> bool:
    """Whether ``answer`` opens with an HTTP/2 frame on stream 0 (a server's SETTINGS or GOAWAY)."""
    return len(answer) >= 9 and answer[3] in (0x04, 0x07) and answer[5:9] == b"\x00\x00\x00\x00"


def grpc_endpoint_problem(endpoint: str, protocol: str, timeout_s: float = PROBE_TIMEOUT_S) -> str | None:
    """What is wrong with exporting over ``protocol`` to ``endpoint``, with the fix, when the
    endpoint (gRPC expected) answers the HTTP/2 preface with anything but HTTP/2: an HTTP/1
    server (its status line, or whatever it sent), or a TLS server reached as ``http://``.
    None when it answers HTTP/2, nothing, or cannot be reached (see the module docstring).

    Example:
        >>> grpc_endpoint_problem("http://127.0.0.1:1", "grpc") is None
        True
        >>> grpc_endpoint_problem("http://127.0.0.1:1", "http/protobuf") is None
        True
    """
    if protocol != "grpc" or not endpoint:
        return None
    answer = preface_answer(endpoint, timeout_s)
    if answer is None or _is_http2(answer):
        return None
    if answer[0] in _TLS_RECORDS:
        return (f"{endpoint} answers with TLS, and a gRPC endpoint without https:// is spoken to in plaintext: "
                f"write it as https://{endpoint_host_port(endpoint)}")
    said = answer.split(b"\r\n", 1)[0].split(b"\n", 1)[0][:60].decode("latin-1")
    return (f"{endpoint} answers HTTP/1 ({said!r}), not gRPC, and [export] protocol is \"grpc\" (the default): "
            "every forwarded span and score would fail there. If this is the backend's OTLP/HTTP port, set "
            "[export] protocol = \"http/protobuf\" (or OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf); else point "
            "the endpoint at its OTLP/gRPC port (Phoenix, Jaeger and collectors: 4317)")
