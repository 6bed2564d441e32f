"""A loopback server that misbehaves on purpose, for ragweedctl's tests (issue 12, items 17-19).

``HostileServer(reply, token=...)``: every connection's request is read (head and Content-Length
body) and recorded in ``received``; ``reply(sock, request_bytes)`` then does whatever the test wants
(send garbage, trickle bytes, never answer). With ``token`` given, the server answers ragweedctl's
``/v1/health?challenge=`` correctly, as a daemon that knows the token would, so the hostile reply
reaches the request that carries the token; without it the server cannot prove anything.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import socket
import threading
from typing import Callable

Reply = Callable[[socket.socket, bytes], None]


def send_json(sock: socket.socket, obj, status: int = 200) -> None:
    body = json.dumps(obj).encode()
    sock.sendall(f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
                 "Connection: close\r\n\r\n".encode() + body)


class HostileServer:
    def __init__(self, reply: Reply, *, token: str | None = None) -> None:
        self.reply, self.token = reply, token
        self.received: list[bytes] = []
        self.connections = 0
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True, name="hostile-server")

    def __enter__(self) -> "HostileServer":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        try:  # close() alone does not wake a thread blocked in accept() on Linux; shutdown() does
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        self._thread.join(5)

    def write_files(self, state_dir, token: str, pid: int | None = None) -> None:
        """The port file (pid: this process, which holds the listening socket) and token file."""
        import os

        info = {"host": "127.0.0.1", "port": self.port, "pid": os.getpid() if pid is None else pid}
        (state_dir / "port").write_text(json.dumps(info))
        (state_dir / "token").write_text(token)

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(30)
            data = b""
            try:
                while b"\r\n\r\n" not in data:
                    piece = conn.recv(65536)
                    if not piece:
                        return
                    data += piece
                head, _, body = data.partition(b"\r\n\r\n")
                m = re.search(rb"(?i)content-length:\s*(\d+)", head)
                while m and len(body) < int(m.group(1)):
                    body += conn.recv(65536)
                self.received.append(head + b"\r\n\r\n" + body)
                challenge = re.match(rb"GET /v1/health\?challenge=([A-Za-z0-9_-]+) ", head)
                if challenge and self.token:
                    msg = f"ragweedd-health\n{self.port}\n{challenge.group(1).decode()}".encode()
                    proof = hmac.new(self.token.encode(), msg, hashlib.sha256).hexdigest()
                    send_json(conn, {"ok": True, "version": "0", "proof": proof})
                    return
                self.reply(conn, head)
            except OSError:
                return
