"""``ragweedd run``: the daemon (DESIGN §4, §7, §10).

Pieces, started in this order and stopped in reverse:

    lock files (fcntl.flock: one daemon per state dir, one writing process per data dir) -> token
    (0600) -> the daemon's services (ragweedd/services.py builds them, ragweedd/daemon_core.py runs
    them) -> HTTP API (port file written once it listens)

SIGTERM / SIGINT stop it cleanly: the API closes, events still being debounced are written to the
durable queue, running jobs finish (bounded), the indexes are flushed, the lock is released. Jobs
not yet run stay in the queue for the next start. After ``kill -9`` the next start recovers the
same way: queue rows left ``running`` are re-queued and the start-up scan enqueues whatever
changed or was left unfinished.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import signal
from pathlib import Path

from ragweedd.errors import AlreadyRunningError
from ragweedd.logging import get_logger
from ragweedd.paths import PRIVATE_UMASK, Paths

log = get_logger("ragweedd.daemon")


class InstanceLock:
    """fcntl.flock on $STATE/ragweedd.lock; the kernel drops it when the process dies, so a
    crashed daemon never leaves a stale lock behind."""

    def __init__(self, path: Path, *, what: str = "is already running",
                 hint: str = "stop it first (ragweedctl status shows it), or give this one another state_dir") -> None:
        self.path = Path(path)
        self.what, self.hint = what, hint
        self.fd: int | None = None

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                other = os.read(fd, 64).decode(errors="replace").strip() or "unknown"
            finally:
                os.close(fd)
            raise AlreadyRunningError(
                f"another ragweedd (pid {other}) {self.what}: lock file {self.path}", hint=self.hint) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self.fd = fd

    def release(self) -> None:
        if self.fd is not None:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_UN)
            finally:
                os.close(self.fd)
                self.fd = None


def data_writer_lock(paths: Paths) -> InstanceLock:
    """One writing process per data directory: the daemon holds it while it runs, a one-shot
    ``ragweedd ingest`` while it writes. SQLite would serialise two processes' writes, but two
    writers of the same collection would each flush their own copy of the index files."""
    return InstanceLock(paths.data / "writer.lock", what="writes this data directory",
                        hint="the running daemon ingests its collections' folders itself: put the files there, "
                             "or use ragweedctl add / upload / scan; or stop it (ragweedctl status shows it) first")


def run_daemon(cfg, allow_remote: bool = False, *, embedder=None, extract=None, watcher_factory=None) -> int:
    """Run until SIGTERM/SIGINT; returns the exit code. ``embedder``, ``extract`` and
    ``watcher_factory`` replace the configured parts (see ragweedd.services.open_daemon)."""
    from ragweedd.api.server import ensure_token
    from ragweedd.jobs.repair import check_and_repair
    from ragweedd.services import open_daemon

    # Everything the daemon creates (databases and their -wal/-shm, index files, port file, uploads,
    # scratch) is private whatever umask it was started with; what an older version left looser
    # is tightened here, before anything is opened.
    os.umask(PRIVATE_UMASK)
    paths = Paths.from_config(cfg).ensure()
    tightened = paths.secure()
    if tightened:
        log.warning("permissions_tightened", count=len(tightened), examples=tightened[:5],
                    reason="data, state and cache dirs are 0700 and their files 0600")
    lock = InstanceLock(paths.lock_file)
    lock.acquire()
    writer = data_writer_lock(paths)
    core = None
    try:
        writer.acquire()
        token = ensure_token(paths.token_file)
        repairs = check_and_repair(paths, sorted(cfg.collections))
        core = open_daemon(cfg, embedder=embedder, extract=extract, watcher_factory=watcher_factory)
        core.repaired = repairs  # status shows it (degraded while those collections are re-ingested)
        core.start()
        log.info("daemon_started", pid=os.getpid(), collections=sorted(core.collections.items),
                 embedder=core.embedder.id, data_dir=str(paths.data), state_dir=str(paths.state))
        asyncio.run(_serve(core, cfg, paths, token, allow_remote or cfg.allow_remote_bind))
        return 0
    finally:
        if core is not None:
            core.stop()
        writer.release()
        lock.release()


async def _serve(core, cfg, paths: Paths, token: str, allow_remote: bool) -> None:
    from ragweedd.api.server import ApiServer
    from ragweedd.engine import DaemonEngine

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    server = ApiServer(DaemonEngine(core), token=token, listen=cfg.listen, allow_remote=allow_remote,
                       port_file=paths.port_file, max_body_bytes=cfg.max_body_mb * 2**20,
                       max_concurrent_answers=cfg.max_concurrent_answers, idle_timeout=cfg.http_idle_timeout_s,
                       body_timeout=cfg.http_body_timeout_s, write_timeout=cfg.http_write_timeout_s)
    await server.start()
    try:
        await stop.wait()
        log.info("daemon_stopping", reason="signal")
    finally:
        await server.stop()
