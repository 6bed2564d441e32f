"""``ragweedd run``: the daemon (DESIGN §4, §7, §10; issue 6).

Pieces, started in this order and stopped in reverse:

    lock file (fcntl.flock, one daemon per state dir) -> token (0600) -> embedder -> job queue
    -> ingest workers -> index sync -> debouncer + watcher (per collection root) -> start-up scan
    -> APScheduler jobs -> HTTP API (port file written once it listens)

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
import threading
import time
from pathlib import Path

from ragweedd.errors import AlreadyRunningError, DaemonError
from ragweedd.logging import get_logger
from ragweedd.paths import Paths

log = get_logger("ragweedd.daemon")
ROOT_CHECK_S = 5.0  # how often roots are stat-ed to notice an unmount or a return (one stat each)


class InstanceLock:
    """fcntl.flock on $STATE/ragweedd.lock; the kernel drops it when the process dies, so a
    crashed daemon never leaves a stale lock behind."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
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
                f"another ragweedd is already running (pid {other}) with the lock file {self.path}",
                hint="stop it first (ragweedctl status shows it), or give this one another state_dir") from None
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


class Core:
    """Everything but the HTTP server; usable from tests and benchmarks in-process as well."""

    def __init__(self, cfg, paths: Paths, embedder) -> None:
        from ragweedd.ingest.index_sync import IndexSync
        from ragweedd.ingest.queue import JobQueue
        from ragweedd.ingest.worker import Workers
        from ragweedd.watch.debounce import Debouncer
        from ragweedd.watch.collections import Collections
        from ragweedd.watch.watcher import Watcher

        self.cfg, self.paths, self.embedder = cfg, paths, embedder
        self.started_at = time.time()
        self._local = threading.local()  # per-thread Searcher, see search()
        self.queue = JobQueue(paths.ingest_db, max_tries=cfg.extract_max_tries)
        self.debouncer = Debouncer(self.queue.put_many, debounce_s=cfg.debounce_s, delete_hold_s=cfg.delete_hold_s)
        self._scan_wanted: set[str] = set()
        self._scan_cv = threading.Condition()
        self._stopping = False
        self.reindexed: dict[str, str] = {}  # collection -> embedder id it was built with before
        self.collections = Collections(cfg, paths, self.queue, self.debouncer, lambda c: Watcher(
            self.debouncer, known_under=c.known_under, is_known=c.is_known,
            on_root_event=lambda coll, root: self._root_event(), on_overflow=self._overflow))
        for name in list(self.collections.items):
            self._reindex_if_embedder_changed(name)
        self.index = IndexSync(cfg, paths, embedder.dim)
        self.workers = Workers(cfg, paths, self.queue, embedder, resolve=self.collections.resolve,
                               on_changes=self.index.notify,
                               on_root_missing=self.collections.on_root_missing)
        self.jobs = None
        self.last_integrity: dict | None = None
        self._scanner = threading.Thread(target=self._scan_loop, name="ragweedd-scan", daemon=True)
        self._roots = threading.Thread(target=self._roots_loop, name="ragweedd-roots", daemon=True)
        self._roots_stop = threading.Event()

    # --- life cycle --------------------------------------------------------------------------------
    def start(self, *, scheduler: bool = True) -> None:
        from ragweedd.jobs.scheduler import Jobs

        self.index.start(list(self.collections.items))
        self.workers.start()
        self.debouncer.start()
        self.collections.start()
        self._scanner.start()
        self._roots.start()
        self.scan_async(*self.collections.items)  # start-up reconciliation
        self.jobs = Jobs(self.cfg, reanalyze=self.reanalyze_all, integrity=self.integrity_check,
                         scan=lambda: self.scan_async(*self.collections.items))
        if scheduler:
            self.jobs.start()

    def stop(self) -> None:
        t0 = time.monotonic()
        with self._scan_cv:
            self._stopping = True
            self._scan_cv.notify_all()
        self._roots_stop.set()
        if self.jobs is not None:
            self.jobs.stop()
        self.collections.watcher.stop()
        self.debouncer.stop(flush=True)  # events still held become durable jobs
        self.workers.stop(timeout_s=30)
        self.index.close()  # applies nothing new; flushes every dirty index
        self.collections.close()
        self.queue.close()
        log.info("daemon_stopped", seconds=round(time.monotonic() - t0, 3),
                 queued=None)

    # --- scans -------------------------------------------------------------------------------------
    def scan_async(self, *names: str) -> None:
        with self._scan_cv:
            self._scan_wanted.update(names)
            self._scan_cv.notify()

    def _scan_loop(self) -> None:
        from ragweedd.ingest.worker import lower_priority

        lower_priority(self.cfg.ingest_nice)
        while True:
            with self._scan_cv:
                while not self._scan_wanted and not self._stopping:
                    self._scan_cv.wait()
                if self._stopping:
                    return
                todo, self._scan_wanted = self._scan_wanted, set()
            for name in sorted(todo):
                if name in self.collections.items:
                    try:
                        self.collections.scan(name)
                    except Exception as e:
                        log.error("scan_failed", collection=name, error=str(e))

    def _overflow(self) -> None:
        log.warning("watch_overflow", action="reconciliation scan of every collection")
        self.scan_async(*self.collections.items)

    def _root_event(self) -> None:
        self.scan_async(*self.collections.check_roots())

    def _roots_loop(self) -> None:
        while not self._roots_stop.wait(ROOT_CHECK_S):
            try:
                back = self.collections.check_roots()
                if back:
                    self.scan_async(*back)
            except Exception as e:
                log.error("root_check_failed", error=str(e))

    # --- jobs --------------------------------------------------------------------------------------
    def integrity_check(self) -> dict:
        from ragweedd.jobs.integrity import integrity_check

        self.index.wait_idle(60)
        res = integrity_check(self.paths, list(self.collections.items), self.index.count)
        self.last_integrity = {**res, "at": time.time()}
        if not res["ok"]:
            log.warning("integrity_problems", result=res)
        return {"ok": res["ok"]}

    def reanalyze_all(self) -> dict:
        out = {}
        for name in list(self.collections.items):
            out[name] = self.reanalyze(name)
        return out

    def reanalyze(self, name: str) -> dict:
        """Cluster analysis over the collection's chunks -> entry points of its index."""
        import numpy as np

        from ragweedd.index.clusters import analyse
        from ragweedd.store.rag_db import RagDB

        db = self.paths.rag_db(name)
        if not Path(db).exists():
            return {"chunks": 0}
        rag = RagDB(db, name, readonly=True)
        try:
            rows = rag.conn.execute(
                "SELECT e.id, (SELECT float_value FROM embedding_metadata WHERE id=e.id AND key='text_entropy'),"
                " (SELECT int_value FROM embedding_metadata WHERE id=e.id AND key='word_count') FROM embeddings e"
            ).fetchall()
        finally:
            rag.close()
        rows = [r for r in rows if r[1] is not None and r[2] is not None]
        if not rows:
            return {"chunks": 0}
        res = analyse(np.array([r[0] for r in rows]), np.array([r[1] for r in rows], dtype=float),
                      np.array([r[2] for r in rows], dtype=float))
        self.index.wait_idle(60)
        m = self.index.managers.get(name)
        if m is not None:
            m.set_entry_points(res.entry_labels, getattr(res, "stats", None))
        return {"chunks": len(rows), "entry_points": int(len(res.entry_labels))}

    def rebuild_fts(self, name: str) -> int:
        from ragweedd.store.rag_db import RagDB, fts_rebuild

        rag = RagDB(self.paths.rag_db(name), name)
        try:
            return fts_rebuild(rag.conn)
        finally:
            rag.close()

    def remove_collection(self, name: str) -> dict:
        import shutil

        res = self.collections.remove(name)
        self.index.drop(name)
        shutil.rmtree(self.paths.collection_dir(name), ignore_errors=True)
        return res

    # --- search ------------------------------------------------------------------------------------
    def search(self, query: str, names: list[str], k: int, filters: dict) -> dict:
        """Hybrid search (DESIGN §8). Each API worker thread keeps its own Searcher (connections,
        IDF caches, WordNet handles), rebuilt when the set of searchable collections changes."""
        from ragweedd.query.filters import Filters

        f = Filters.make(collections=names, path_glob=filters.get("path_glob"),
                         file_types=[filters["file_type"]] if filters.get("file_type") else None,
                         doc_ids=[filters["doc_id"]] if filters.get("doc_id") else None)
        return self._searcher(names).search(query, filters=f, limit=k)

    def _searcher(self, names: list[str]):
        from ragweedd.query.hybrid import Searcher

        key = tuple(sorted(n for n in self.collections.items if Path(self.paths.rag_db(n)).exists()))
        held = getattr(self._local, "searcher", None)
        if held is not None and held[0] == key and set(names) <= set(key):
            return held[1]
        if held is not None:
            held[1].close()
        s = Searcher(self.cfg, self.paths, self.embedder, collections=list(key))
        self._local.searcher = (key, s)
        return s

    def _reindex_if_embedder_changed(self, name: str) -> None:
        """A collection's vectors all come from one embedder. When ``embed.model`` names another one
        (or the default changed on upgrade), old and new vectors must not mix: the collection's
        derived data (rag.sqlite3, index files, ingest rows) is dropped and the start-up scan
        ingests every file again with the configured embedder. The embed cache is keyed by
        embedder id and kept, so switching back re-uses the old vectors without embedding."""
        import shutil

        stored = self._stored_embedder(name)
        if stored is None or stored == self.embedder.id:
            return
        log.warning("collection_reindexing", collection=name, embedded_with=stored, configured=self.embedder.id,
                    reason="embed.model changed; the collection is indexed again from its files")
        self.collections.forget_files(name)
        shutil.rmtree(self.paths.collection_dir(name), ignore_errors=True)
        self.reindexed[name] = stored

    def _stored_embedder(self, name: str) -> str | None:
        from ragweedd.store.rag_db import PRIMARY, RagDB

        db = self.paths.rag_db(name)
        if not Path(db).exists():
            return None
        rag = RagDB(db, name, readonly=True)
        try:
            known = rag.embedder(PRIMARY)
        finally:
            rag.close()
        return known[0] if known else None

    # --- status ------------------------------------------------------------------------------------
    def status(self) -> dict:
        from ragweedd import __version__

        depth = self.queue.depth()
        by_state: dict[str, int] = {}
        for r in self.collections.conn.execute(
                "SELECT extract_status, count(*) FROM ingest_files WHERE superseded=0 GROUP BY 1"):
            by_state[r[0]] = r[1]
        degraded = list(self.collections.watcher.degraded.values())
        cols = [self.collections.describe(n) for n in sorted(self.collections.items)]
        for c in cols:
            if not c["available"]:
                degraded.append(f"collection '{c['name']}' is unavailable: a root folder is missing or an empty "
                                f"mount point; nothing is deleted until it returns")
        for name, before in self.reindexed.items():
            d = self.queue.depth(name)
            if d.get("queued", 0) + d.get("running", 0) or name in self._scan_wanted:
                degraded.append(f"collection '{name}' is being indexed again: it was embedded with {before} and "
                                f"embed.model is now {self.embedder.id}; its search results fill up as files "
                                f"are re-ingested")
        for key in ("multi_embed_384", "multi_embed_1024"):
            if getattr(self.cfg, key):
                # The index layer has the extra passes (data_level0_384.bin, ...); ingest does not
                # compute them yet, so say so instead of pretending.
                degraded.append(f"{key} = {getattr(self.cfg, key)!r} is set, but extra embedding passes are "
                                f"not computed by this version; only the primary embedder is used")
        queued = depth.get("queued", 0) + depth.get("running", 0) + len(self.debouncer)
        return {
            "version": __version__, "pid": os.getpid(), "uptime_s": round(time.time() - self.started_at, 1),
            "collections": cols, "files_by_state": by_state,
            "queue_depth": depth.get("queued", 0) + depth.get("running", 0),
            "queue": {**depth, "debouncing": len(self.debouncer)},
            "failed_jobs": self.queue.failed(20),
            "ingest": {**self.workers.progress.snapshot(queued), "running": self.workers.busy > 0,
                       "workers": self.cfg.ingest_workers, "priority": self.workers.priority},
            "embedder": {"id": self.embedder.id, "dim": self.embedder.dim},
            "index_sizes": {n: v.get("vectors") for n, v in self.index.status().items()},
            "index": self.index.status(),
            "next_jobs": [{"name": k, "at": v} for k, v in (self.jobs.next_runs() if self.jobs else {}).items()],
            "last_jobs": self.jobs.last if self.jobs else {},
            "integrity": self.last_integrity,
            "degraded": degraded, "missing_tools": [],
        }


def run_daemon(cfg, allow_remote: bool = False) -> int:
    """Run until SIGTERM/SIGINT; returns the exit code."""
    from ragweedd.api.server import ensure_token

    from ragweedd.index.numba_env import setup_for

    paths = Paths.from_config(cfg).ensure()
    setup_for(paths)  # before anything imports numba
    lock = InstanceLock(paths.lock_file)
    lock.acquire()
    core = None
    try:
        token = ensure_token(paths.token_file)
        from ragweedd.embed.factory import make_embedder

        embedder = make_embedder(cfg.embed_model, cfg)
        core = Core(cfg, paths, embedder)
        core.start()
        log.info("daemon_started", pid=os.getpid(), collections=sorted(core.collections.items),
                 embedder=embedder.id, data_dir=str(paths.data), state_dir=str(paths.state))
        asyncio.run(_serve(core, cfg, paths, token, allow_remote or cfg.allow_remote_bind))
        return 0
    finally:
        if core is not None:
            core.stop()
        lock.release()


async def _serve(core: Core, cfg, paths: Paths, token: str, allow_remote: bool) -> None:
    from ragweedd.api.server import ApiServer
    from ragweedd.engine import DaemonEngine

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    server = ApiServer(DaemonEngine(core), token=token, listen=cfg.listen, allow_remote=allow_remote,
                       port_file=paths.port_file, max_body_bytes=cfg.max_body_mb * 2**20,
                       max_concurrent_answers=cfg.max_concurrent_answers)
    try:
        await server.start()
    except DaemonError:
        raise
    try:
        await stop.wait()
        log.info("daemon_stopping", reason="signal")
    finally:
        await server.stop()
