"""ragweedctl's connection to the daemon: finding it, proving it is the daemon, and reading its
answers without trusting them (standard library only; see ctl.py for why there is no http.client).

Before the token leaves this process:

1. the port file's pid must be a live process and, where /proc shows it (Linux), the one that holds
   the listening socket on that port: a port file left by a crash does not lead us to whoever
   binds the port next;
2. the server must prove it knows the token: ``GET /v1/health?challenge=C`` (no token) answers
   ``proof = HMAC-SHA256(token, "ragweedd-health\\n" + PORT + "\\n" + C)``, with a fresh random C per
   run and the port we connected to (so another daemon's proof cannot be relayed).

Every reply is read under one deadline for the whole request (not per read), with caps on the status
line, headers and body, strict Content-Length and chunk sizes; anything else is a CtlError with one
line that says what was wrong.
"""

from __future__ import annotations

import json
import os
import socket
import time

from ragweedd import __version__
from ragweedd.cli.exits import EXIT_ERROR, EXIT_NOT_RUNNING, EXIT_OK, EXIT_USAGE, exit_code_for
from ragweedd.errors import RagweedError, hint_for
from ragweedd.procs import pid_alive, pid_holds_port  # noqa: F401 - ragweedctl asks through here

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: ragweedctl starts without importing typing
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any

__all__ = ["EXIT_ERROR", "EXIT_NOT_RUNNING", "EXIT_OK", "EXIT_USAGE"]

MAX_STATUS_LINE = 8 * 1024
MAX_HEADER_LINE = 16 * 1024
MAX_HEADERS = 100
MAX_BODY = 64 * 2**20  # the largest JSON answer ragweedctl will hold (listings are paged)
MAX_EVENT = 16 * 2**20  # one SSE event
MAX_JSON_DEPTH = 64  # the contract's shapes nest about 6 deep


def query_string(params: dict) -> str:
    """``?a=1&b=2`` of the parameters that are set ('' when none is)."""
    from urllib.parse import urlencode  # light: no email/ssl

    items = {k: v for k, v in params.items() if v is not None}
    return ("?" + urlencode(items)) if items else ""


def path_segment(s: str) -> str:
    """``s`` as one segment of a route's path (a '/' in a name does not open another)."""
    from urllib.parse import quote

    return quote(s, safe="")


class CtlError(RagweedError):
    """An error as ragweedctl shows it: ``message`` (what went wrong), and what to do as ``hint``
    or as an ``action`` of ragweedd.errors.FIXES, which each face words itself (``say``);
    ``exit_code`` is what ragweedctl exits with; ``payload`` is the JSON error object --json prints
    (the daemon's envelope as it sent it), None for ragweedctl's own errors, whose ``code`` is then
    "usage" or "failed"."""

    def __init__(self, message: str, exit_code: int = EXIT_ERROR, payload: dict | None = None, *,
                 hint: str | None = None, action: dict | None = None) -> None:
        super().__init__(message, hint=hint)
        # as read from the daemon's envelope: hint_for ignores one of another shape
        self.action = action
        self.exit_code = exit_code
        self.payload = payload
        sent = (payload or {}).get("error")
        sent_code = sent.get("code") if isinstance(sent, dict) else None
        self.code = sent_code if isinstance(sent_code, str) else "usage" if exit_code == EXIT_USAGE else "failed"
        # str(e) is ragweedctl's line, the hint in its own words (RagweedError's is the API's)
        self.args = (self.say("ctl"),)


def not_running(detail: str) -> CtlError:
    action = {"id": "start_daemon"}
    return CtlError(f"ragweedd is not running ({detail})", EXIT_NOT_RUNNING,
                    {"error": {"code": "daemon_not_running", "message": f"ragweedd is not running ({detail})",
                               "hint": hint_for("api", action), "action": action}}, action=action)


def bad_reply(what: str) -> CtlError:
    return CtlError(f"the daemon's answer is not valid ({what}); is something other than ragweedd "
                    "listening on its port? `ragweedctl status` and the daemon log tell", EXIT_ERROR)


def parse_json(data: bytes, what: str = "body") -> dict:
    """A JSON object, or CtlError: not JSON, not an object, nested deeper than any of our shapes."""
    try:
        out = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise bad_reply(f"the {what} is not JSON") from None
    except RecursionError:
        raise bad_reply(f"the {what} nests too deeply") from None
    if not isinstance(out, dict):
        raise bad_reply(f"the {what} is JSON but not an object")
    stack: list = [(out, 1)]
    while stack:
        v, d = stack.pop()
        if d > MAX_JSON_DEPTH:
            raise bad_reply(f"the {what} nests more than {MAX_JSON_DEPTH} levels deep")
        if isinstance(v, dict):
            stack.extend((x, d + 1) for x in v.values())
        elif isinstance(v, list):
            stack.extend((x, d + 1) for x in v)
    return out


class Reader:
    """Buffered reads from a socket, all under one deadline."""

    def __init__(self, sock: socket.socket, deadline: float, timeout: float) -> None:
        self.sock, self.deadline, self.timeout = sock, deadline, timeout
        self.buf = b""
        self.eof = False

    def _fill(self) -> bool:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise CtlError(f"the daemon did not answer in full within {self.timeout:g} s (--timeout)")
        self.sock.settimeout(left)
        try:
            data = self.sock.recv(65536)
        except socket.timeout:
            raise CtlError(f"the daemon did not answer in full within {self.timeout:g} s (--timeout)") from None
        if not data:
            self.eof = True
            return False
        self.buf += data
        return True

    def line(self, cap: int, what: str) -> bytes:
        while True:
            i = self.buf.find(b"\n")
            if i >= 0:
                if i + 1 > cap:
                    break
                out, self.buf = self.buf[: i + 1], self.buf[i + 1:]
                return out
            if len(self.buf) > cap:
                break
            if not self._fill():
                raise bad_reply(f"the connection closed in the middle of the {what}")
        raise bad_reply(f"the {what} is longer than {cap} bytes")

    def exact(self, n: int, what: str) -> bytes:
        while len(self.buf) < n:
            if not self._fill():
                raise bad_reply(f"the {what} ended after {len(self.buf)} of {n} bytes")
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def some(self) -> bytes:
        if not self.buf and not self.eof:
            self._fill()
        out, self.buf = self.buf, b""
        return out


def body_chunks(r: Reader, headers: dict[str, str], cap: int) -> Iterator[bytes]:
    """The body's pieces as they arrive; never more than ``cap`` bytes in all."""
    te = headers.get("transfer-encoding", "").lower()
    total = 0
    if te:
        if te != "chunked":
            raise bad_reply(f"unsupported Transfer-Encoding {te[:40]!r}")
        while True:
            size_line = r.line(1024, "chunk size line").split(b";", 1)[0].strip()
            if not size_line or len(size_line) > 8 or not all(c in b"0123456789abcdefABCDEF" for c in size_line):
                raise bad_reply(f"bad chunk size {size_line[:20]!r}")
            size = int(size_line, 16)
            if size == 0:
                while r.line(MAX_HEADER_LINE, "trailer") not in (b"\r\n", b"\n"):
                    pass
                return
            total += size
            if total > cap:
                raise bad_reply(f"the body is larger than {cap} bytes")
            chunk = r.exact(size, "chunk")
            if r.line(2, "chunk end") not in (b"\r\n", b"\n"):
                raise bad_reply("a chunk is longer than its size says")
            yield chunk
    elif "content-length" in headers:
        raw = headers["content-length"]
        if not raw.isdigit() or not raw.isascii() or len(raw) > 18:
            raise bad_reply(f"bad Content-Length {raw[:40]!r}")
        n = int(raw)
        if n > cap:
            raise bad_reply(f"the body would be {n} bytes, more than {cap}")
        while n > 0:  # in pieces: an SSE body with a length still streams
            piece = r.exact(min(n, 65536), "body")
            n -= len(piece)
            yield piece
    else:
        while piece := r.some():
            total += len(piece)
            if total > cap:
                raise bad_reply(f"the body is larger than {cap} bytes")
            yield piece


def sse_events(chunks: Iterator[bytes]) -> Iterator[tuple[str, Any]]:
    """(event name, data object) of each Server-Sent Event."""
    buf = b""
    event, data = "message", []  # type: str, list[str]
    for chunk in chunks:
        buf += chunk
        if len(buf) > MAX_EVENT:
            raise bad_reply(f"an event is larger than {MAX_EVENT} bytes")
        while b"\n" in buf:
            line_b, buf = buf.split(b"\n", 1)
            line = line_b.rstrip(b"\r").decode("utf-8", "replace")
            if not line:
                if data:
                    yield event, parse_json("\n".join(data).encode("utf-8", "replace"), f"'{event[:40]}' event")
                event, data = "message", []
            elif line.startswith(":"):
                continue
            elif line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].lstrip())


class Client:
    def __init__(self, state_dir: str, timeout: float | None = None) -> None:
        self.state_dir = state_dir
        self.timeout = timeout  # None: the command's own default
        port_file = os.path.join(state_dir, "port")
        try:
            with open(port_file, encoding="utf-8") as f:
                raw = f.read(4096).strip()
        except FileNotFoundError:
            raise not_running(f"no port file at {port_file}") from None
        except OSError as e:
            raise CtlError(f"cannot read {port_file}: {e.strerror}") from None
        try:
            info = json.loads(raw)
            if isinstance(info, int):
                info = {"host": "127.0.0.1", "port": info}
            self.host, self.port = str(info["host"]), int(info["port"])
            pid = info.get("pid")
            self.pid = int(pid) if pid is not None else None
        except (ValueError, KeyError, TypeError, AttributeError):
            raise CtlError(f"the port file {port_file} is damaged; restart ragweedd to rewrite it") from None
        if self.pid is not None:
            stale = f"the port file {port_file} is stale"
            if self.pid <= 0 or not pid_alive(self.pid):
                raise not_running(f"{stale}: process {self.pid} is gone")
            if pid_holds_port(self.pid, self.port) is False:
                raise not_running(f"{stale}: process {self.pid} does not listen on port {self.port}")
        self.token_file = os.path.join(state_dir, "token")
        try:
            with open(self.token_file, encoding="utf-8") as f:
                self.token = f.read(1024).strip()
        except FileNotFoundError:
            raise not_running(f"no token file at {self.token_file}") from None
        except OSError as e:
            raise CtlError(f"cannot read the API token at {self.token_file}: {e.strerror}; "
                           "run ragweedctl as the user that runs ragweedd") from None
        self.verified = False

    @property
    def hostport(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    def verify(self, timeout: float) -> None:
        """The server proves it knows the token before we send it (see the module docstring)."""
        import hashlib
        import hmac
        import secrets

        challenge = secrets.token_urlsafe(24)
        status, _, chunks = self._send("GET", f"/v1/health?challenge={challenge}", None, None, False,
                                       timeout, with_token=False)
        reply = parse_json(b"".join(chunks)) if status == 200 else {}
        want = hmac.new(self.token.encode(), f"ragweedd-health\n{self.port}\n{challenge}".encode(),
                        hashlib.sha256).hexdigest()
        proof = reply.get("proof")
        if not isinstance(proof, str) or not hmac.compare_digest(proof.encode("ascii", "replace"), want.encode()):
            raise CtlError(
                f"the server on {self.hostport} did not prove it knows the API token in {self.token_file}, "
                "so the token was not sent: the token file is not the running daemon's, or another program "
                "holds the port (restart ragweedd to rewrite both files)", EXIT_ERROR,
                {"error": {"code": "unverified_server", "message": "the server did not prove it knows the token"}})
        self.verified = True

    def request(self, method: str, path: str, body: object = None, *, raw: bytes | None = None,
                stream: bool = False, timeout: float = 30.0,
                cap: int = MAX_BODY) -> tuple[int, dict[str, str], Iterator[bytes]]:
        """(status, headers, body-chunk iterator); the whole exchange ends within ``timeout``
        seconds (``--timeout`` replaces it)."""
        timeout = self.timeout if self.timeout is not None else timeout
        deadline = time.monotonic() + timeout
        if not self.verified:
            self.verify(timeout)
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        ctype = "application/octet-stream" if raw is not None else "application/json"
        return self._send(method, path, data, ctype, stream, max(0.001, deadline - time.monotonic()),
                          with_token=True, total=timeout, cap=cap)

    def _connect(self, timeout: float) -> socket.socket:
        try:
            return socket.create_connection((self.host, self.port), timeout=timeout)
        except ConnectionRefusedError:
            raise not_running(f"nothing listens on {self.host}:{self.port}; the port file is stale") from None
        except socket.timeout:
            raise CtlError(f"cannot connect to {self.hostport} within {timeout:g} s") from None
        except OSError as e:
            raise not_running(f"cannot connect to {self.host}:{self.port}: {e}") from None

    def _send(self, method: str, path: str, data: bytes | None, ctype: str | None, stream: bool,
              timeout: float, *, with_token: bool, total: float | None = None,
              cap: int = MAX_BODY) -> tuple[int, dict[str, str], Iterator[bytes]]:
        deadline = time.monotonic() + timeout
        lines = [f"{method} {path} HTTP/1.1", f"Host: {self.hostport}", f"User-Agent: ragweedctl/{__version__}",
                 "Connection: close", "Accept: " + ("text/event-stream" if stream else "application/json")]
        if with_token:
            lines.append(f"Authorization: Bearer {self.token}")
        if data is not None:
            lines += [f"Content-Type: {ctype}", f"Content-Length: {len(data)}"]
        sock = self._connect(timeout)
        r = Reader(sock, deadline, total or timeout)
        try:
            sock.settimeout(max(0.001, deadline - time.monotonic()))
            sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (data or b""))
            status_line = r.line(MAX_STATUS_LINE, "status line")
            parts = status_line.split(None, 2)
            if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not (parts[1].isdigit() and len(parts[1]) == 3):
                raise bad_reply(f"status line {status_line[:60]!r}")
            headers: dict[str, str] = {}
            for _ in range(MAX_HEADERS + 1):
                line = r.line(MAX_HEADER_LINE, "header")
                if line in (b"\r\n", b"\n"):
                    break
                k, sep, v = line.decode("latin-1").partition(":")
                k = k.strip().lower()
                if not sep or not k:
                    raise bad_reply(f"header line {line[:60]!r}")
                if k in ("content-length", "transfer-encoding") and k in headers and headers[k] != v.strip():
                    raise bad_reply(f"two different {k} headers")
                headers[k] = v.strip()
            else:
                raise bad_reply(f"more than {MAX_HEADERS} headers")
        except socket.timeout:
            sock.close()
            raise CtlError(f"the daemon did not answer within {total or timeout:g} s (--timeout)") from None
        except (ConnectionError, OSError) as e:
            sock.close()
            raise CtlError(f"connection to ragweedd failed: {e}") from None
        except CtlError:
            sock.close()
            raise
        return int(parts[1]), headers, _closing(sock, body_chunks(r, headers, MAX_EVENT * 64 if stream else cap))

    def call(self, method: str, path: str, body: object = None, *, raw: bytes | None = None,
             timeout: float = 30.0) -> Any:
        status, _, chunks = self.request(method, path, body, raw=raw, timeout=timeout)
        data = b"".join(chunks)
        out = parse_json(data) if data else {}
        if status >= 400:
            raise api_error(status, out)
        return out


def _closing(sock: socket.socket, chunks: Iterator[bytes]) -> Iterator[bytes]:
    try:
        yield from chunks
    except (ConnectionError, OSError) as e:
        raise CtlError(f"connection to ragweedd failed: {e}") from None
    finally:
        sock.close()


def api_error(status: int, out: dict) -> CtlError:
    """The daemon's error envelope as a CtlError: its message and, in ragweedctl's words, what to
    do (the status is not shown: the exit code tells, and --json prints the whole envelope)."""
    err = out.get("error") if isinstance(out, dict) else None
    err = err if isinstance(err, dict) else {}
    msg, hint = err.get("message"), err.get("hint")
    if not isinstance(msg, str) or not msg:
        msg = f"ragweedd refused the request (HTTP {status}) without saying why"
    return CtlError(msg, exit_code_for(err.get("code"), status), out if isinstance(out, dict) else None,
                    hint=hint if isinstance(hint, str) else None, action=err.get("action"))

