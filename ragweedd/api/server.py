"""Starting the API: loopback-only binds, the token file, the port file.

``ApiServer`` runs the app on the caller's event loop (the daemon's).
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import re
import secrets
import stat
from pathlib import Path
from typing import Any

from aiohttp import web

from ragweedd.api.app import build_app
from ragweedd.api.protocol import ApiRunner
from ragweedd.api.security import STATE_KEY
from ragweedd.errors import ConfigError, DaemonError
from ragweedd.logging import get_logger
from ragweedd.procs import pid_alive, pid_holds_port

log = get_logger("ragweedd.api")

_TOKEN_RE = re.compile(r"\A[A-Za-z0-9_\-]{32,256}\Z")


# --------------------------------------------------------------------------- token
def _new_token_file(path: Path) -> str:
    token = secrets.token_urlsafe(32)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    # O_EXCL + mode 0600 at creation: the token is never readable by others, not even briefly.
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        os.write(fd, (token + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    return token


def stale_port_file(port_file: Path) -> str | None:
    """Why the port file is a crashed daemon's (None: absent, ours, or a live daemon's).

    Whoever binds that port next could receive the token from a client that trusts the file, so the
    daemon replaces the token when it finds one (``ensure_token``)."""

    try:
        info = json.loads(port_file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return "damaged"
    pid = info.get("pid") if isinstance(info, dict) else None
    port = info.get("port") if isinstance(info, dict) else None
    if not isinstance(pid, int) or pid <= 0:
        return "no pid"
    if pid == os.getpid():
        return None
    if not pid_alive(pid):
        return f"process {pid} is gone"
    if isinstance(port, int) and pid_holds_port(pid, port) is False:
        return f"process {pid} does not listen on port {port}"
    return None


def token_file_mode(path: str | os.PathLike) -> int:
    """The token file's permission bits (0 when absent or a link): read before the start-up
    tightening of the state dir sets them to 0600, so a token others could read is still known as
    leaked and replaced (``ensure_token(exposed=...)``)."""
    try:
        st = os.lstat(path)
    except OSError:
        return 0
    return 0 if stat.S_ISLNK(st.st_mode) else stat.S_IMODE(st.st_mode)


def ensure_token(path: str | os.PathLike, port_file: str | os.PathLike | None = None, *, exposed: int = 0) -> str:
    """Return the API token, creating it (random, 0600) at first start.

    A token file that others could read is treated as leaked: when we own it, it is replaced by a
    new token with mode 0600 (and a warning); when we do not, the daemon refuses to start. So is the
    token of a daemon that crashed and left its port file (``port_file``, by default the ``port``
    file beside the token): that file is removed and the token replaced.
    ``exposed``: the file's mode as it was before anything tightened it, when others could read it.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    port_path = Path(port_file) if port_file is not None else path.with_name("port")
    why = stale_port_file(port_path)
    if why is not None:
        log.warning("stale_port_file", port_file=str(port_path), reason=why,
                    action="removed; the API token is replaced, since whoever holds that port now may have seen it")
        with contextlib.suppress(FileNotFoundError):
            port_path.unlink()
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return _new_token_file(path)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISREG(st.st_mode):
        raise DaemonError(f"token file {path} is not a regular file",
                          hint="remove it; ragweedd creates a new token at start")
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        raise DaemonError(f"token file {path} belongs to another user (uid {st.st_uid})",
                          hint="remove it or fix its owner; ragweedd creates a new token at start")
    if st.st_mode & 0o077 or exposed:
        log.warning("token_file_too_open", token_file=str(path), mode=oct(exposed or st.st_mode & 0o777),
                    action="replaced with a new token, mode 0600")
        return _new_token_file(path)
    if why is not None:
        return _new_token_file(path)
    token = path.read_text(encoding="utf-8", errors="replace").strip()
    if not _TOKEN_RE.match(token):
        log.warning("token_file_invalid", token_file=str(path), action="replaced with a new token")
        return _new_token_file(path)
    return token


# --------------------------------------------------------------------------- bind / port file
def parse_listen(listen: str) -> tuple[str, int]:
    host, sep, port = listen.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) < 65536:
        raise ConfigError(f"key 'listen' has value {listen!r}; allowed: HOST:PORT, e.g. '127.0.0.1:8723'")
    return host.strip("[]"), int(port)


def is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, allow_remote: bool) -> None:
    if is_loopback(host):
        return
    if not allow_remote:
        raise ConfigError(
            f"key 'listen' asks to bind to {host!r}, which is not a loopback address",
            hint="the API is for this machine only; use 127.0.0.1, or set allow_remote_bind = true "
                 "if you really mean to expose it (the token is then the only protection)")
    log.warning("api_remote_bind", host=host,
                risk="the API is reachable from other machines; the bearer token is its only protection")


def write_port_file(path: str | os.PathLike, host: str, port: int, config: str | None = None) -> None:
    """ragweedctl reads this to find the daemon, and the one-shot ``ragweedd`` commands to use the
    configuration it runs with (``config``: its file, None for the built-in defaults). Written
    atomically so it never sees half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    connect = host if is_loopback(host) else "127.0.0.1"
    url_host = f"[{connect}]" if ":" in connect else connect
    data = {"host": connect, "port": port, "pid": os.getpid(), "url": f"http://{url_host}:{port}",
            "config": config}
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def remove_port_file(path: str | os.PathLike) -> None:
    """Remove the port file only if it is ours: a second daemon that failed to start must not
    delete the file of the one that is running."""
    path = Path(path)
    try:
        if json.loads(path.read_text(encoding="utf-8")).get("pid") == os.getpid():
            path.unlink()
    except (OSError, ValueError, AttributeError):
        pass


# --------------------------------------------------------------------------- servers
MAX_REQUEST_LINE = 65536
MAX_HEADER_FIELD = 16384
LINGER_S = 2.0


class ApiServer:
    def __init__(self, engine: Any, *, token: str, listen: str = "127.0.0.1:0", allow_remote: bool = False,
                 port_file: str | os.PathLike | None = None, max_body_bytes: int = 64 * 2**20,
                 max_concurrent_answers: int = 4, app: web.Application | None = None,
                 idle_timeout: float = 15.0, body_timeout: float = 60.0, write_timeout: float = 30.0,
                 config_file: str | None = None) -> None:
        """``config_file`` is recorded in the port file (see write_port_file). The timeouts (config
        keys http_idle_timeout_s, http_body_timeout_s, http_write_timeout_s) bound what one
        connection can hold: a request head must be complete ``idle_timeout`` after connecting or
        after the previous response, a body must have arrived ``body_timeout`` after its head, and
        a client must accept written bytes within ``write_timeout``."""
        self.host, want_port = parse_listen(listen)
        check_bind(self.host, allow_remote)
        extra = () if is_loopback(self.host) or self.host in ("0.0.0.0", "::") else (self.host,)
        self.app = app or build_app(engine, token=token, port=want_port, max_body_bytes=max_body_bytes,
                                    max_concurrent_answers=max_concurrent_answers, extra_hosts=extra)
        self.app[STATE_KEY].body_timeout = body_timeout
        self.idle_timeout, self.write_timeout = idle_timeout, write_timeout
        self.port = want_port
        self.port_file = Path(port_file) if port_file else None
        self.config_file = config_file
        self._runner: ApiRunner | None = None

    async def start(self) -> int:
        # The request line must hold every query the OpenAPI document allows (a 4,096-character
        # path_glob is up to 49 KB percent-encoded); aiohttp's default stops at 8 KB with a
        # plain-text error outside the JSON envelope.
        self._runner = ApiRunner(self.app, access_log=None, handle_signals=False,
                                 max_line_size=MAX_REQUEST_LINE, max_field_size=MAX_HEADER_FIELD,
                                 keepalive_timeout=self.idle_timeout, write_timeout=self.write_timeout,
                                 # After an early answer (413, 408) aiohttp reads and drops what is
                                 # left of the body so the client sees the answer; 10 s by default,
                                 # which a client that stopped sending would hold for nothing.
                                 lingering_time=LINGER_S)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, reuse_address=True)
        try:
            await site.start()
        except OSError as e:
            await self._runner.cleanup()
            raise DaemonError(f"cannot listen on {self.host}:{self.port}: {e.strerror}",
                              hint="another ragweedd may be running; change 'listen' or stop it") from None
        self.port = self._runner.addresses[0][1]
        self.app[STATE_KEY].set_port(self.port)
        if self.port_file:
            write_port_file(self.port_file, self.host, self.port, self.config_file)
        log.info("api_listening", host=self.host, port=self.port)
        return self.port

    async def stop(self) -> None:
        if self.port_file:
            remove_port_file(self.port_file)
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
