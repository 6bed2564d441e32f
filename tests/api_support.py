"""Helpers for the API and ragweedctl tests: a real FakeEngine-backed server on a free loopback
port with a real token file and port file, and clients that can send any bytes."""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
from dataclasses import dataclass
from pathlib import Path

from fake_engine import FakeEngine
from ragweedd.api.server import ThreadedServer, ensure_token


@dataclass
class Api:
    server: ThreadedServer
    engine: FakeEngine
    token: str
    state_dir: Path

    @property
    def port(self) -> int:
        return self.server.port

    def request(self, method: str, path: str, body=None, *, headers: dict | None = None,
                token: str | None | bool = True, raw: bytes | None = None, timeout: float = 10):
        """(status, headers, parsed body or bytes). token=True sends the right token, a string
        sends that, None/False sends none."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        h = {}
        if token is True:
            h["Authorization"] = f"Bearer {self.token}"
        elif token:
            h["Authorization"] = f"Bearer {token}"
        data = raw
        if body is not None:
            data = json.dumps(body).encode()
            h["Content-Type"] = "application/json"
        h.update(headers or {})
        conn.request(method, path, body=data, headers=h)
        resp = conn.getresponse()
        payload = resp.read()
        conn.close()
        if resp.getheader("Content-Type", "").startswith("application/json"):
            return resp.status, dict(resp.getheaders()), json.loads(payload)
        return resp.status, dict(resp.getheaders()), payload


@contextlib.contextmanager
def running_api(tmp_path: Path, engine: FakeEngine | None = None, **kwargs):
    state = tmp_path / "state"
    token = ensure_token(state / "token")
    engine = engine or FakeEngine()
    with ThreadedServer(engine, token=token, port_file=state / "port", **kwargs) as srv:
        yield Api(srv, engine, token, state)


def raw_http(port: int, request: bytes, timeout: float = 5.0) -> tuple[int, bytes]:
    """Send exactly these bytes (odd Host headers etc.); returns (status, whole response)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(request)
        chunks = []
        while True:
            try:
                b = s.recv(65536)
            except (ConnectionResetError, socket.timeout):
                break
            if not b:
                break
            chunks.append(b)
    data = b"".join(chunks)
    status = int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/") else 0
    return status, data


def body_json(response: bytes) -> dict:
    """Body of a raw Content-Length JSON response."""
    return json.loads(response.split(b"\r\n\r\n", 1)[1])
