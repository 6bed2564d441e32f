"""The daemon's running parts, built by ``ragweedd.services.open_daemon`` (the composition root).

Started in this order and stopped in reverse, every thread joined and every connection closed:

    live indexes (index sync thread) -> embedding stage -> ingest workers -> debouncer -> watcher ->
    scan and root-check threads -> start-up scan -> APScheduler jobs

The HTTP API (ragweedd/daemon.py) talks to it only through ``ragweedd.engine.DaemonEngine``.
"""

from __future__ import annotations

import shutil
import threading
import time
from typing import TYPE_CHECKING, Any, Callable

from ragweedd.errors import RagweedError
from ragweedd.logging import get_logger

if TYPE_CHECKING:
    from ragweedd.ingest_line import DaemonLine
    from ragweedd.services import Services

log = get_logger("ragweedd.daemon")
ROOT_CHECK_S = 5.0  # how often roots are stat-ed to notice an unmount or a return (one stat each)


class Core:
    def __init__(self, services: Services, line: DaemonLine, passes: Any, *, migration: Any = None) -> None:
        """Runs ``line``, the ingest line the composition root built on the parts of ``services``
        (what the faces use: the same stores, embedder and index); ``passes``: the extra embedding
        passes. The core binds the line's events to itself and starts and stops its stages."""
        self.services = services
        self.line = line
        cfg, paths = services.cfg, services.paths
        self.cfg, self.paths = cfg, paths
        self.embedder, self.index = services.embedder, line.index
        # What a collection's vectors are recorded as made by: the model and its input format.
        self.index_embedder_id = line.index_embedder_id
        self.started_at = time.time()
        self.passes = passes  # extra embedding passes
        # The queue, the ingest state and the chunks: the data directory's files, or a database
        # server's shared with the other machines' daemons (``server``, which has more to do).
        self.stores = self.services.stores
        self.server = self.stores.shared
        from ragweedd.store.served_rot import ServedRot

        # A read that meets a chunk text changed on disk since it was indexed leaves it out and has
        # the integrity check, and so the live repair, run now instead of hours later.
        self.rot = ServedRot(lambda: self.jobs.run_now("integrity_check") if self.jobs is not None else None)
        self.stores.on_rot = self.rot
        self.queue: Any = line.queue
        self.debouncer = line.debouncer
        self.collections = line.collections
        self.vectorizer = line.vectorizer
        self.workers = line.workers
        self._scan_wanted: set[str] = set()
        # Scans the scan thread has taken and not finished (walking, or queueing what they found):
        # a name leaves _scan_wanted for here in one hold of _scan_cv, so status always sees it.
        self._scanning: set[str] = set()
        # The integrity check found damage only the start-up repair mends: busy until this core is
        # replaced by the repaired one (whose start-up scan then re-queues the files).
        self.repair_due = False
        self._unscanned: set[str] = set()  # scans that failed with the database server away
        self._scan_cv = threading.Condition()
        self._stopping = False
        self.reindexed: dict[str, str] = {}  # collection -> embedder id it was built with before
        # the line's events reach the scan thread's state, which exists from here on
        line.events.root_event = self._root_event
        line.events.overflow = self._overflow
        line.events.rescan = lambda names: self.scan_async(*names)
        self.reader = self._open_ingest(readonly=True)  # listings and status: never writes
        if self.server is not None:
            self.queue.serves = lambda: list(self.collections.items)
            self.collections.check_add = self._check_shared_embedder
        self._reader_lock = threading.Lock()
        for name in list(self.collections.items):
            self._reindex_if_embedder_changed(name)
        # A change of embed.model under way (ragweedd/ingest/model_swap.py): ``embedder`` is then the
        # old model, which serves until the daemon calls ``on_migrated`` and switches.
        self.migration = migration
        self.on_migrated: Callable[[], None] | None = None
        line.events.migrated = self._migrated
        self.jobs: Any = None
        self.last_integrity: dict[str, Any] | None = None
        self.repaired: dict[str, Any] = {}  # what the start-up check repaired (ragweedd/store/sqlite/repair.py)
        # Called (from the scheduler's thread) when the integrity check finds damage only the
        # start-up repair can mend; the daemon then replaces this core (ragweedd/daemon.py).
        self.on_damage: Callable[[dict[str, Any]], None] | None = None
        self._scanner = threading.Thread(target=self._scan_loop, name="ragweedd-scan", daemon=True)
        self._roots = threading.Thread(target=self._roots_loop, name="ragweedd-roots", daemon=True)
        self._roots_stop = threading.Event()
        self._retry = threading.Thread(target=self._retry_model_loop, name="ragweedd-model-retry", daemon=True)
        self._started = False

    def _open_ingest(self, readonly: bool = False) -> Any:
        return self.stores.open_ingest(readonly=readonly)

    # --- life cycle --------------------------------------------------------------------------------
    def start(self, *, scheduler: bool = True) -> None:
        from ragweedd.jobs.scheduler import Jobs

        self._started = True
        self.index.start(list(self.collections.items))
        self.vectorizer.start()
        self.workers.start()
        self.debouncer.start()
        self.collections.start()
        self._scanner.start()
        self._roots.start()
        if self.migration is not None and self.migration.blocked:
            self._retry.start()
        self.scan_async(*self.collections.items)  # start-up reconciliation
        self.jobs = Jobs(self.cfg, reanalyze=self.reanalyze_all, integrity=self.integrity_check,
                         scan=lambda: self.scan_async(*self.collections.items))
        if scheduler:
            self.jobs.start()

    def stop(self) -> None:
        """Stop every thread this started and close every connection it opened (also when it was
        built but never started)."""
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
        self.vectorizer.stop(timeout_s=30)
        for t in (self._scanner, self._roots, self._retry):
            if t.is_alive():
                t.join(30)
        self.index.close()  # applies nothing new; flushes every dirty index
        self.services.close()
        m = self.migration
        if m is not None and m.owned and hasattr(m.embedder, "close"):
            m.embedder.close()  # the new model; the old one that served is closed with the services
        self.collections.close()
        with self._reader_lock:
            self.reader.close()
        self.queue.close()
        log.info("daemon_stopped", seconds=round(time.monotonic() - t0, 3))

    # --- scans -------------------------------------------------------------------------------------
    def scan_async(self, *names: str) -> None:
        with self._scan_cv:
            self._scan_wanted.update(names)
            self._scan_cv.notify()

    def scan_pending(self, name: str) -> bool:
        """A scan of ``name`` is wanted or under way (its jobs may not be queued yet)."""
        with self._scan_cv:
            return name in self._scan_wanted or name in self._scanning

    def scans(self) -> list[dict[str, Any]]:
        """Scans wanted or under way, for status: collection, state ('waiting', 'walking' or
        'recording': queueing what it found and writing the rows of skipped files), files seen."""
        with self._scan_cv:
            wanted, running = set(self._scan_wanted), set(self._scanning)
            unscanned = set(self._unscanned)
        progress = dict(self.collections.scan_progress)
        out = []
        for name in sorted(wanted | running | unscanned):
            p = progress.get(name) if name in running else None
            out.append({"collection": name, "state": p["state"] if p else "waiting",
                        "files_seen": int(p["files_seen"]) if p else 0})
        return out

    def _scan_loop(self) -> None:
        from ragweedd.ingest.priority import lower_priority

        lower_priority(self.cfg.ingest_nice)
        while True:
            with self._scan_cv:
                while not self._scan_wanted and not self._stopping:
                    self._scan_cv.wait()
                if self._stopping:
                    return
                todo, self._scan_wanted = self._scan_wanted, set()
                self._scanning = set(todo)
            for name in sorted(todo):
                try:
                    if name in self.collections.items:
                        self.collections.scan(name)
                except Exception as e:  # noqa: BLE001 - a scan that fails is logged and retried; the scan thread goes on
                    log.error("scan_failed", collection=name, error=str(e))
                    if self.server is not None:
                        with self._scan_cv:
                            self._unscanned.add(name)  # scanned again once the database answers
                finally:
                    with self._scan_cv:
                        self._scanning.discard(name)

    def _overflow(self, names: list[str]) -> None:
        # Called on watchdog's inotify thread: only a scan request. Requests coalesce in
        # _scan_wanted, so a storm of overflows costs one pending scan per collection.
        log.warning("watch_overflow", collections=names, action="reconciliation scan of these collections")
        self.scan_async(*names)

    def _root_event(self) -> None:
        self.scan_async(*self.collections.check_roots())

    def _roots_loop(self) -> None:
        while not self._roots_stop.wait(ROOT_CHECK_S):
            try:
                back = self.collections.check_roots()
                back += self.collections.watcher.check()  # dead observer threads, overflowing roots
                back += self._store_back()
                if self.server is not None:
                    self.server.keep_claim()  # a dropped connection loses the claimer's lock: take it again now
                if back:
                    self.scan_async(*back)
            except Exception as e:  # noqa: BLE001 - the root check runs on a timer thread that must outlive any failure
                log.error("root_check_failed", error=str(e))

    def _store_back(self) -> list[str]:
        """After file change events were dropped because the database server could not be reached
        (the debouncer's sink failed): once one cheap query answers, every collection is scanned,
        so the changes made meanwhile are indexed now rather than at the hourly scan."""
        if self.server is None or not (self.debouncer.dropped or self._unscanned):
            return []
        try:
            self.stores.indexed_collections()
        except Exception:  # noqa: BLE001 - still away: asked again at the next check
            return []
        names = list(self.collections.items)
        with self._scan_cv:  # wanted before they stop counting as unscanned: status sees no gap
            self._scan_wanted.update(names)
            self._scan_cv.notify()
            self._unscanned.clear()
        log.info("store_reachable_again", dropped_events=self.debouncer.take_dropped(),
                 action="reconciliation scan of every collection")
        return names

    def thread_problems(self) -> list[str]:
        """Why the daemon is degraded by a thread of its own that is no longer running (each one
        catches what one file or event can raise, so this is the last line: never a silent stop)."""
        with self._scan_cv:
            if not self._started or self._stopping:
                return []
        threads = [("debouncer (file change events are no longer queued)", self.debouncer.alive()),
                   ("scanner (reconciliation scans no longer run)", self._scanner.is_alive()),
                   ("root checker (unmounted or returning folders are not noticed)", self._roots.is_alive())]
        workers = getattr(self.workers, "_threads", [])
        if workers and not any(t.is_alive() for t in workers):
            threads.append(("ingest workers (nothing is indexed)", False))
        threads.append(("embedding (new chunks get no vectors; keyword search still finds them)",
                        self.vectorizer.alive()))
        alive = getattr(self.index, "alive", None)
        if alive is not None and not alive():
            threads.append(("index sync (searches use the stored vectors exactly)", False))
        out = [f"the {what} thread stopped; restart ragweedd and report the error in its log"
               for what, alive in threads if not alive]
        blocked = sorted(self.vectorizer.blocked.items())
        out.extend(f"collection '{n}' gets no vectors here: {why}" for n, why in blocked)
        # Threads that are restarted after a failure say so while the failure is recent.
        for sup in (getattr(self.workers, "supervisor", None), getattr(self.index, "supervisor", None),
                    self.vectorizer.supervisor):
            problem = sup.problem() if sup is not None else None
            if problem:
                out.append(problem)
        return out

    # --- jobs --------------------------------------------------------------------------------------
    def integrity_check(self) -> dict[str, Any]:
        self.index.wait_idle(60)
        res = self.stores.integrity_check(list(self.collections.items), self.index.count)
        for name in res["mended"]:
            self.vectorizer.notify(name)  # chunks put back in the embedding queue
        self.scan_async(*res["mended"])  # the files it forgot are ingested again
        self.last_integrity = {**res, "at": time.time()}
        if not res["ok"]:
            log.warning("integrity_problems", result=res)
        if res["repair"] and self.on_damage is not None:
            self.repair_due = True  # status: busy from now until the repaired core takes over
            self.on_damage(res)
        return {"ok": res["ok"], "repair": res["repair"]}

    def reanalyze_all(self) -> dict[str, Any]:
        return {name: self.reanalyze(name) for name in list(self.collections.items)}

    def reanalyze(self, name: str) -> dict[str, Any]:
        """Cluster analysis over the collection's chunks -> entry points of its index."""
        import numpy as np

        from ragweedd.index.clusters import analyse

        stores = self.services.stores
        if self.server is not None or not stores.has_rag(name):
            return {"chunks": 0}  # pgvector's index has no entry points to set
        rag = stores.open_rag(name, readonly=True)
        try:
            rows = [r for r in rag.entropy_rows() if r[1] is not None and r[2] is not None]
        finally:
            rag.close()
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
        rag = self.services.stores.open_rag(name)
        try:
            return rag.rebuild_fts()
        finally:
            rag.close()

    def remove_collection(self, name: str) -> dict[str, Any]:
        res = self.collections.remove(name)
        self.vectorizer.forget(name)
        self.workers.forget(name)
        if self.server is not None and self.stores.has_rag(name):
            # shared by every machine: only this machine's paths leave it (docs/postgres.md)
            rag: Any = self.stores.open_rag(name)
            try:
                rag.forget_source()
            finally:
                rag.close()

        def remove_files() -> None:
            self.services.forget_collection(name)
            shutil.rmtree(self.paths.collection_dir(name), ignore_errors=True)

        # the files go while the index sync is kept off the collection: a late change notice
        # then finds no database instead of opening a new index over the files being removed
        self.index.drop(name, then=remove_files)
        return res

    def _migrated(self) -> None:
        if self.on_migrated is not None:
            self.on_migrated()

    def _retry_model_loop(self) -> None:
        """A change of embed.model blocked at the start (ragweedd/ingest/model_swap.py ``blocked``):
        try the new model every embed.retry_s; once it loads, hand it to the daemon, which starts a
        core with it (the move then starts, or goes on where it stopped)."""
        from ragweedd.embed.factory import make_embedder
        from ragweedd.ingest.model_swap import waiting_problem

        m = self.migration
        assert m is not None
        while not self._roots_stop.wait(self.cfg.embed_retry_s):
            try:
                model = make_embedder(self.cfg.embed_model, self.cfg)
                int(model.dim), model.id  # an Ollama model's server is first asked here
            except Exception as e:  # noqa: BLE001 - whatever stops the new model: status says it, tried again
                problem = waiting_problem(self.cfg, m, e)
                if problem != m.problem:
                    log.warning("model_swap_still_blocked", model=self.cfg.embed_model, problem=problem)
                    m.problem = problem
                continue
            if self._roots_stop.is_set():  # stopping meanwhile: nobody takes it over
                if hasattr(model, "close"):
                    model.close()
                return
            m.embedder, m.owned, m.reloaded = model, True, True
            log.info("model_swap_unblocked", model=self.cfg.embed_model, embedder=model.id)
            self._migrated()
            return

    def _reindex_if_embedder_changed(self, name: str) -> None:
        """A collection's vectors all come from one embedder. When ``embed.model`` names another one
        (or the default changed on upgrade), old and new vectors must not mix: the collection's
        derived data (rag.sqlite3, index files, ingest rows) is dropped and the start-up scan
        ingests every file again with the configured embedder. The embed cache is keyed by
        embedder id and kept, so switching back re-uses the old vectors without embedding."""

        stored = self._stored_embedder(name)
        if stored is None or stored == self.index_embedder_id:
            return
        if self.server is not None:
            # the vectors are every machine's: one daemon must not drop them for its own model
            raise self._mismatch(name, stored)
        log.warning("collection_reindexing", collection=name, embedded_with=stored, configured=self.index_embedder_id,
                    reason="embed.model or chunk_context changed; the collection is indexed again from its files")
        self.collections.forget_files(name)
        shutil.rmtree(self.paths.collection_dir(name), ignore_errors=True)
        self.reindexed[name] = stored

    def _mismatch(self, name: str, stored: str, kind: type[RagweedError] | None = None) -> RagweedError:
        """Why this daemon cannot serve a shared collection embedded with ``stored`` (a
        ConfigError at start; a RequestError when the collection is added at run time)."""
        from ragweedd.errors import ConfigError

        return (kind or ConfigError)(
            f"collection '{name}' in the shared database was embedded with {stored}, but "
            f"{self.cfg.source or 'the config'} makes this machine embed with {self.index_embedder_id}",
            hint="every machine must use the same [embed] model and chunk_context for a shared collection: set "
                 "them back; or, to move it to this model, stop every machine's ragweedd, set the model on "
                 f"each, run `ragweedd reembed -c {name}` once, then start them (docs/postgres.md)")

    def _check_shared_embedder(self, name: str) -> None:
        """A collection added at run time that the shared database already holds must have been
        embedded with this machine's model (else its vectors would be refused, and nothing of it
        embedded here)."""
        stored = self._stored_embedder(name)
        if stored is not None and stored != self.index_embedder_id:
            from ragweedd.errors import RequestError

            raise self._mismatch(name, stored, RequestError)

    def _stored_embedder(self, name: str) -> str | None:
        from ragweedd.store.types import PRIMARY

        stores = self.services.stores
        if not stores.has_rag(name):
            return None
        rag = stores.open_rag(name, readonly=True)
        try:
            known = rag.embedder(PRIMARY)
        finally:
            rag.close()
        return known[0] if known else None

    # --- reads for the faces (blocking: called from worker threads) ---------------------------------
    def read(self, fn: Callable[[Any], Any]) -> Any:
        """Run ``fn(ingest_db reader)`` on the daemon's read-only ingest connection."""
        with self._reader_lock:
            return fn(self.reader)
