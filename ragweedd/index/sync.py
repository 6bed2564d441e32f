"""Keeps each collection's vector index in step with its change log (DESIGN §3 durability rule).

The ingest workers write chunks, vectors and ``changes`` rows in one SQLite transaction and then
call ``notify(collection)`` (the ``on_changes`` hook). One background thread reads the changes after
the index's ``applied_seq`` and applies them through the IndexManager, whose own thread flushes the
files debounced (``index_flush_quiet_s`` / ``index_flush_max_s``) and on close. At start each index
is loaded and either replayed from its ``applied_seq`` or rebuilt from the stored vectors when it
is missing, corrupt or ahead of the database. Nothing here polls: the thread sleeps until notified.

It is also the daemon's ``IndexLookup`` (ragweedd/index/protocol.py): searches reach the live
indexes through ``index_for``.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Callable, Iterable, Iterator

from ragweedd.contract import IndexInfo, iso
from ragweedd.errors import Interrupted, NotCreatedYetError, NotFoundError
from ragweedd.index.managed import ManagedIndex
from ragweedd.index.passes import prepare_pass, sync_pass
from ragweedd.index.vector_rows import as_rows
from ragweedd.index.warm import compiling as kernels_compiling
from ragweedd.logging import get_logger
from ragweedd.store.types import PRIMARY
from ragweedd.supervise import Supervisor

if TYPE_CHECKING:
    import numpy as np

    from ragweedd.config import Config
    from ragweedd.index.manager import IndexManager
    from ragweedd.paths import Paths
    from ragweedd.store.protocols import RagStore, StoreBackend

log = get_logger("ragweedd.index")
APPLY_BATCH = 5000
CLOSE_WAIT_S = 2.0
IDLE_STOP_S = 0.2  # how long an idle sync thread takes to see the stop, with room to spare


class _Stopping(Interrupted):
    """The daemon stops: a rebuild under way is left (the next start rebuilds again)."""

    def __init__(self, collection: str) -> None:
        super().__init__(f"the index of '{collection}' was left part-built because the daemon is stopping; "
                         "the next start builds it again")


class _Dropped(NotFoundError):
    """The collection is being removed: its sync ends between two batches."""

    def __init__(self, collection: str) -> None:
        super().__init__(f"collection '{collection}' is being removed; its index is no longer kept in step")


class IndexSync:
    def __init__(self, cfg: Config, paths: Paths, dim: int, pass_dims: dict[str, int] | None = None, *,
                 stores: StoreBackend) -> None:
        """``stores``: the data directory's stores whose change logs the index files follow."""
        self.cfg, self.paths, self.dim = cfg, paths, dim
        self.stores = stores
        self.pass_dims = dict(pass_dims or {})  # the working extra passes (ragweedd/index/passes.py)
        self.managers: dict[str, IndexManager] = {}
        self.errors: dict[str, str] = {}
        self._dirty: set[str] = set()
        self._cv = threading.Condition()
        self._stop = False
        self._idle = threading.Event()
        self._idle.set()
        self._lock = threading.Lock()
        self._doing: set[str] = set()  # what the sync thread is applying now
        self._syncing: str | None = None  # the one collection sync() is in (guarded by _cv)
        self._dropping: set[str] = set()  # collections drop() is removing: not synced meanwhile
        self.supervisor = Supervisor("index sync", "the live vector index lags the stored chunks")
        self._thread = threading.Thread(target=lambda: self.supervisor.run(self._run, after_failure=self._again),
                                        name="ragweedd-index-sync", daemon=True)

    def start(self, collections: Iterable[str]) -> None:
        with self._cv:
            self._dirty.update(collections)
            if self._dirty:
                self._idle.clear()  # catching up from the change log first: not idle before that
        self._thread.start()

    def notify(self, collection: str) -> None:
        with self._cv:
            self._dirty.add(collection)
            self._idle.clear()
            self._cv.notify()

    def alive(self) -> bool:
        return self._thread.is_alive()

    def wait_idle(self, timeout_s: float | None = None) -> bool:
        return self._idle.wait(timeout_s)

    def index_for(self, rag: RagStore) -> ManagedIndex | None:
        m = self.managers.get(rag.collection)
        return None if m is None else ManagedIndex(m)

    def pass_index_for(self, rag: RagStore, space: str) -> ManagedIndex | None:
        m = self.managers.get(rag.collection)
        return ManagedIndex(m, space) if m is not None and space in m.indexes else None

    def count(self, collection: str) -> int | None:
        m = self.managers.get(collection)
        return None if m is None else len(m.indexes[PRIMARY])

    def status(self) -> dict[str, IndexInfo]:
        out: dict[str, IndexInfo] = {}
        for name, m in list(self.managers.items()):
            out[name] = {"vectors": len(m.indexes[PRIMARY]), "applied_seq": m.applied_seq[PRIMARY],
                         "state": m.status[PRIMARY], "dirty": m.dirty, "error": self.errors.get(name),
                         "last_flush": iso(m.flushed_at.get(PRIMARY))}
        for name, err in list(self.errors.items()):
            if name not in out:
                out[name] = {"vectors": None, "applied_seq": None, "state": "failed", "dirty": False,
                             "error": err, "last_flush": None}
        return out

    def close(self) -> None:
        """Stop the sync thread and flush every dirty index. The thread stops between two batches
        of changes; when it is still busy after ``CLOSE_WAIT_S`` (a batch of a large file's
        vectors, numba compiling its kernels on first use with a new cache directory) nothing is
        flushed: the files keep their older ``applied_seq`` and the next start replays the change
        log from there (or rebuilds from the stored vectors), so a stop never waits for it."""
        with self._cv:
            self._stop = True
            self._cv.notify_all()
        self.supervisor.stop()
        if self._thread.is_alive():
            # while the start's warm-up compiles the kernels, a busy sync thread is waiting for the
            # compiler, which will not be done in CLOSE_WAIT_S: an idle one still stops in time
            self._thread.join(IDLE_STOP_S if kernels_compiling() else CLOSE_WAIT_S)
        if self._thread.is_alive():
            log.info("index_flush_skipped", collections=sorted(self.managers),
                     reason="the index sync is still applying changes; the next start replays them")
            with self._lock:
                for m in self.managers.values():
                    m.abandon()  # no flusher left behind writes these files (a core replaced in-process)
                self.managers.clear()
            return
        with self._lock:
            for name, m in self.managers.items():
                try:
                    m.close()  # flushes what is dirty
                except Exception as e:  # noqa: BLE001 - closing goes on to the other collections' indexes
                    log.error("index_close_failed", collection=name, error=str(e))
            self.managers.clear()

    def drop(self, collection: str, then: Callable[[], None] | None = None) -> None:
        """Forget a removed collection's index, and run ``then`` (removing its files) before the
        sync thread may touch the collection again. The sync thread is never in the middle of
        applying changes to the index closed here: a sync of it under way ends at its next batch,
        and is waited for. Nothing is flushed: the files are about to go."""
        with self._cv:
            self._dropping.add(collection)
            self._dirty.discard(collection)
            while self._syncing == collection:
                self._cv.wait()
        try:
            with self._lock:
                m = self.managers.pop(collection, None)
            self.errors.pop(collection, None)
            if m is not None:
                m.close(flush=False)
            if then is not None:
                then()
        finally:
            with self._cv:
                self._dropping.discard(collection)

    # --- the sync thread ---------------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            with self._cv:
                while not self._dirty and not self._stop:
                    self._idle.set()
                    self._cv.wait()
                if self._stop:
                    self._idle.set()
                    return
                todo, self._dirty = self._dirty, set()
                self._doing = todo
            for name in sorted(todo):
                if self._stop:
                    break
                with self._cv:
                    if name in self._dropping:
                        continue
                    self._syncing = name
                try:
                    self.sync(name)
                    self.errors.pop(name, None)
                except _Dropped:
                    pass  # drop() closes its index
                except _Stopping:
                    # its graph is part-built: never flushed over the files the next start reads
                    with self._lock:
                        m = self.managers.pop(name, None)
                    if m is not None:
                        m.close(flush=False)
                    break
                except Exception as e:  # a broken collection must not stop the others' indexes
                    self.errors[name] = f"{type(e).__name__}: {e}"
                    log.error("index_sync_failed", collection=name, error=str(e), exc_info=True)
                finally:
                    with self._cv:
                        self._syncing = None
                        self._cv.notify_all()

    def _again(self, e: BaseException) -> None:
        # After the loop failed: what it was applying, and every index it holds, is synced again on
        # the restart (a notify that came meanwhile is already in _dirty).
        with self._cv:
            self._dirty.update(self._doing)
            self._dirty.update(self.managers)

    def _manager(self, name: str, rag: RagStore) -> tuple[IndexManager, bool]:
        m = self.managers.get(name)
        if m is not None:
            return m, False
        from ragweedd.index.manager import IndexManager

        m = IndexManager(self.paths.collection_dir(name), {PRIMARY: self.dim, **self.pass_dims}, config=self.cfg)
        max_seq = rag.max_seq()
        min_seq = rag.min_seq()
        plan = m.plan(PRIMARY, max_seq, min_seq)
        if plan == "rebuild" and m.status[PRIMARY] == "ok":
            # A file the log no longer reaches (an old file put back, or the vectors of the model
            # a collection moved away from): its graph may hold vectors the database does not, so
            # searches never see it; until the rebuild is swapped in they rank the stored vectors.
            m.indexes[PRIMARY] = m._new(self.dim)
            m.status[PRIMARY] = "stale"
        with self._lock:
            self.managers[name] = m
        if plan == "rebuild" or (m.status[PRIMARY] == "new" and max_seq > 0):
            ahead = m.applied_seq[PRIMARY] > max_seq
            log.info("index_rebuild", collection=name, reason="ahead of the change log" if ahead else m.status[PRIMARY],
                     applied_seq=m.applied_seq[PRIMARY], log_seq=max_seq)
            if ahead:
                # The database lost its newest changes (a -wal deleted or damaged after a crash) and
                # its log numbers them again from max_seq + 1. The rebuilt index holds exactly the
                # log up to max_seq: keeping the old, higher applied_seq would skip the next changes
                # for good.
                m.applied_seq[PRIMARY] = max_seq
            m.rebuild(PRIMARY, self._batches(rag), max_seq)
        for space in self.pass_dims:
            prepare_pass(m, rag, space)
        return m, True

    def _batches(self, rag: RagStore) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        for ids, blobs in rag.iter_vectors(PRIMARY):
            if self._stop:
                raise _Stopping(rag.collection)
            if rag.collection in self._dropping:
                raise _Dropped(rag.collection)
            yield as_rows(ids, blobs)

    def sync(self, name: str) -> int:
        """Apply every logged change newer than the index; returns how many were applied."""
        import numpy as np

        if not self.stores.has_rag(name):
            return 0
        try:
            rag = self.stores.open_rag(name, readonly=True)
        except NotCreatedYetError:
            return 0  # its writer is creating it; the change that follows notifies this again
        try:
            m, _ = self._manager(name, rag)
            total = 0
            while not self._stop:  # stopping: the rest is replayed at the next start
                if name in self._dropping:
                    raise _Dropped(name)
                seq0 = m.applied_seq[PRIMARY]
                changes = rag.changes_batch_after(seq0, APPLY_BATCH)
                if not changes:
                    return total + sum(sync_pass(m, rag, space) for space in self.pass_dims)
                vecs = rag.vectors_for([c[2] for c in changes if c[1] == "add"])
                items = []
                for seq, op, cid in changes:
                    if op == "add":
                        blob = vecs.get(cid)
                        # Added and deleted again before we got here: its later delete follows; a
                        # delete of an unknown label is a no-op that still advances applied_seq.
                        items.append((seq, "add", cid, np.frombuffer(blob, dtype=np.float32)) if blob
                                     else (seq, "delete", cid))
                    else:
                        items.append((seq, "delete", cid))
                total += m.apply(PRIMARY, items)
            return total
        finally:
            rag.close()
