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

When the scheduled integrity check finds a damaged database, the daemon repairs it without a
restart: the API answers 503 "repairing" for those seconds, the core stops, the start-up repair
(ragweedd/store/sqlite/repair.py) runs, and a new core starts and re-ingests what was lost.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from ragweedd.errors import AlreadyRunningError
from ragweedd.logging import get_logger
from ragweedd.paths import PRIVATE_UMASK, Paths

if TYPE_CHECKING:
    from ragweedd.config import Config
    from ragweedd.daemon_core import Core
    from ragweedd.embed.base import Embedder

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


def run_daemon(cfg: Config, allow_remote: bool = False, *, embedder: Embedder | None = None,
               extract: Callable | None = None, watcher_factory: Callable | None = None,
               banner_json: bool = False) -> int:
    """Run until SIGTERM/SIGINT; returns the exit code. ``embedder``, ``extract`` and
    ``watcher_factory`` replace the configured parts (see ragweedd.services.open_daemon);
    ``banner_json`` prints the start-up line as one JSON object on stdout (``ragweedd --json run``)."""
    from ragweedd.api.server import ensure_token, token_file_mode
    from ragweedd.services import open_daemon

    # Everything the daemon creates (databases and their -wal/-shm, index files, port file, uploads,
    # scratch) is private whatever umask it was started with; what an older version left looser
    # is tightened here, before anything is opened.
    os.umask(PRIVATE_UMASK)
    paths = Paths.from_config(cfg).ensure()
    token_mode = token_file_mode(paths.token_file)  # before secure() hides that others could read it
    tightened = paths.secure()
    if tightened:
        log.warning("permissions_tightened", count=len(tightened), examples=tightened[:5],
                    reason="data, state and cache dirs are 0700 and their files 0600")
    lock = InstanceLock(paths.lock_file)
    lock.acquire()
    writer = data_writer_lock(paths)
    cores: list = []  # the running core; a live repair replaces it

    def open_core(check: list[str] | None, model: Any = None) -> Any:
        """A new core; ``check``: the collections the start-up repair looks at first (None: none)."""
        core = open_daemon(cfg, embedder=model or embedder, extract=extract, watcher_factory=watcher_factory,
                           repair=check)
        cores[:] = [core]
        # status shows what was repaired (degraded while those collections are re-ingested)
        repairs = core.repaired
        notes = _repair_notes(repairs)
        if notes:
            # status keeps the record after the re-ingest is done, as the integrity report of the
            # start-up check (what it found, and what was done about it)
            core.last_integrity = {
                "ok": False, "at": time.time(), "ingest_db": list(repairs.get("ingest_db") or []),
                "history": list(repairs.get("history") or []), "repaired": notes,
                "collections": {n: {"problems": v, "damaged": True}
                                for n, v in (repairs.get("collections") or {}).items()}}
        core.start()
        return core

    def repair_live(old: Any) -> Any:
        """Stop the core, run the start-up repair, start a new core: what a restart does, without
        dropping the API. The collections added at run time are in ingest_db, which the repair
        reads, so they come back too."""
        old.stop()
        cores.clear()
        new = open_core(sorted(set(cfg.collections) | set(old.collections.items)))
        log.error("daemon_repaired_live", repairs=new.repaired)
        # the check that found the damage stays visible, with what was done about it
        new.last_integrity = {**(old.last_integrity or {}),
                              "repaired": _repair_notes(new.repaired) or ["nothing needed repair"]}
        return new

    def switch_model(old: Any) -> Any:
        """Every collection has the new embed.model's vectors: stop the core that serves the old
        model, put the new vectors in place (ragweedd/ingest/model_swap.py, at the new core's
        start) and serve with the new model."""
        m = old.migration
        model = None
        if m is not None and m.owned:
            # the new model is loaded already: the new core takes it over (fewer seconds of 503)
            m.owned, model = False, m.embedder
        old.stop()
        cores.clear()
        new = open_core(None, model)
        log.info("model_switched", embedder=new.index_embedder_id, still_moving=new.migration is not None)
        return new

    try:
        writer.acquire()
        token = ensure_token(paths.token_file, exposed=token_mode if token_mode & 0o077 else 0)
        # the stores are checked, and mended, before the core opens them; a database server keeps
        # its own files sound, and the periodic check mends the rest live
        core = open_core(sorted(cfg.collections))
        log.info("daemon_started", pid=os.getpid(), collections=sorted(core.collections.items),
                 embedder=core.embedder.id, data_dir=str(paths.data), state_dir=str(paths.state))
        _check_keys_file()
        asyncio.run(_serve(core, cfg, paths, token, allow_remote or cfg.allow_remote_bind, repair_live,
                           banner_json, switch_model))
        return 0
    finally:
        for core in cores:
            core.stop()
        writer.release()
        lock.release()


def _check_keys_file() -> None:
    """Say at start-up, not at the first answer, that the keys file cannot be used (its keys are
    never logged: only which providers it names)."""
    from ragweedd.errors import KeyFileError
    from ragweedd.keyfile import keys_file, read_keys

    try:
        keys = read_keys()
    except KeyFileError as e:
        log.warning("keys_file_unusable", problem=str(e), effect="its API keys are not used")
        return
    if keys:
        log.info("keys_file", path=str(keys_file()), providers=sorted(keys))


def config_file_of(cfg: Config) -> str | None:
    """The absolute path of the file ``cfg`` was read from (None: the built-in defaults), so that a
    one-shot command started from another directory reads the same file."""
    src = str(cfg.source)
    return None if src.startswith("<") else os.path.abspath(src)


def started_banner(host: str, port: int, as_dict: bool = False) -> Any:
    """The line a person starting the daemon by hand reads (the JSON log says the same for machines):
    where the API and the web UI are, with the port actually bound."""
    base = f"http://{f'[{host}]' if ':' in host else host}:{port}"
    if as_dict:
        return {"event": "ragweedd_ready", "api": f"{base}/v1", "web_ui": f"{base}/", "pid": os.getpid()}
    return f"ragweedd: API at {base}/v1  web UI: {base}/  (ragweedctl open signs you in)"


def _repair_notes(repairs: dict) -> list[str]:
    notes = list(repairs.get("ingest_db") or []) + list(repairs.get("history") or [])
    for more in (repairs.get("collections") or {}).values():
        notes.extend(more)
    return notes


async def _serve(core: Core, cfg: Config, paths: Paths, token: str, allow_remote: bool,
                 repair_live: Callable[[Any], Any], banner_json: bool = False,
                 switch_model: Callable[[Any], Any] | None = None) -> None:
    from ragweedd.api.server import ApiServer
    from ragweedd.engine import DaemonEngine

    stop = asyncio.Event()
    damaged = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    engine = DaemonEngine(core)

    def on_damage(res: dict) -> None:
        loop.call_soon_threadsafe(damaged.set)

    core.on_damage = on_damage
    switch = asyncio.Event()  # a change of embed.model has all its vectors (ragweedd/ingest/model_swap.py)

    def on_migrated() -> None:
        loop.call_soon_threadsafe(switch.set)

    core.on_migrated = on_migrated
    if core.migration is not None and (core.migration.ready or core.migration.reloaded):
        on_migrated()  # it finished before the callback was set: the switch is still due

    def check_now() -> None:
        # SIGUSR2: run the integrity check now (an operator who suspects damage need not wait hours)
        if engine.repairing is None and engine.core.jobs is not None:
            log.info("integrity_check_requested", reason="SIGUSR2")
            engine.core.jobs.run_now("integrity_check")

    loop.add_signal_handler(signal.SIGUSR2, check_now)  # SIGUSR1 dumps stacks

    def swap(old: Any) -> Any:
        new = repair_live(old)
        new.on_damage, new.on_migrated = on_damage, on_migrated
        if new.migration is not None and (new.migration.ready or new.migration.reloaded):
            on_migrated()
        return new

    def switch_core(old: Any) -> Any:
        assert switch_model is not None
        new = switch_model(old)
        new.on_damage, new.on_migrated = on_damage, on_migrated
        if new.migration is not None and (new.migration.ready or new.migration.reloaded):
            on_migrated()
        return new

    server = ApiServer(engine, token=token, listen=cfg.listen, allow_remote=allow_remote,
                       port_file=paths.port_file, max_body_bytes=cfg.max_body_mb * 2**20,
                       max_concurrent_answers=cfg.max_concurrent_answers, idle_timeout=cfg.http_idle_timeout_s,
                       body_timeout=cfg.http_body_timeout_s, write_timeout=cfg.http_write_timeout_s,
                       config_file=config_file_of(cfg))
    from ragweedd.api.mcp_http import add_mcp_route  # aiohttp only; the SDK loads at the first /mcp call

    add_mcp_route(server.app, allow_writes=cfg.mcp_allow_writes)
    await server.start()
    if banner_json:
        import json

        print(json.dumps(started_banner(server.host, server.port, as_dict=True)), flush=True)
    else:
        print(started_banner(server.host, server.port), file=sys.stderr, flush=True)
    try:
        while not stop.is_set():
            waits = {asyncio.ensure_future(stop.wait()), asyncio.ensure_future(damaged.wait()),
                     asyncio.ensure_future(switch.wait())}
            _, pending = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            for w in pending:
                w.cancel()
            if damaged.is_set() and not stop.is_set():
                damaged.clear()
                await engine.replace_core(swap, "a damaged database is moved aside and rebuilt from your files")
            if switch.is_set() and not stop.is_set():
                switch.clear()
                if switch_model is not None:
                    await engine.replace_core(switch_core, "switching to the new embed.model")
        log.info("daemon_stopping", reason="signal")
    finally:
        await server.stop()
