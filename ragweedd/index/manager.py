"""The vector indexes of one collection, one per vector space: the primary plus optional 384/1024-d
passes (DESIGN §3, §7). Every method takes the space name (``PRIMARY``, "384", "1024").

The store keeps a change log (seq, op, label); each index file records the last seq it contains
(``applied_seq``). At start the manager loads every index it is told about, or starts an empty one
and reports why (``status``: "new", "corrupt", "dim_mismatch"); ``plan()`` tells the caller whether
to replay the log after ``applied_seq`` or rebuild from the database (an index newer than the log,
or older than the oldest change still logged, e.g. an old file put back). Changes go in through
``apply``; flushes are debounced by a background thread (after ``index_flush_quiet_s`` without
changes, at least every ``index_flush_max_s`` while dirty) and ``close()`` flushes.

Rebuilds and compactions build the new graph beside the old one: searches keep using the old graph,
changes applied meanwhile are recorded and replayed onto the new one before it is swapped in.
"""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

import numpy as np

from ragweedd.errors import CorruptIndexError, InvalidVectorError
from ragweedd.index.hnsw import HnswIndex
from ragweedd.logging import get_logger
from ragweedd.store.types import PRIMARY

if TYPE_CHECKING:
    from collections.abc import Callable

    import numpy.typing as npt

    from ragweedd.config import Config

log = get_logger(__name__)


def file_suffix(space: str) -> str:
    """Index files of the primary space are data_level0.bin, ...; an extra pass's carry its name:
    data_level0_384.bin."""
    return "" if space == PRIMARY else f"_{space}"


class IndexManager:
    def __init__(self, directory: str | os.PathLike, dims: dict[str, int], *, config: Config | None = None,
                 flush_quiet_s: float | None = None, flush_max_s: float | None = None,
                 exact_below: int | None = None, compact_pct: float | None = None, M: int = 16,
                 ef_construction: int = 200, seed: int = 1234, start_flusher: bool = True) -> None:
        def pick(value: Any, attr: str, default: Any) -> Any:
            if value is not None:
                return value
            return getattr(config, attr, default) if config is not None else default

        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.flush_quiet_s = float(pick(flush_quiet_s, "index_flush_quiet_s", 5.0))
        self.flush_max_s = float(pick(flush_max_s, "index_flush_max_s", 60.0))
        self.exact_below = int(pick(exact_below, "hnsw_exact_below", 20000))
        self.compact_pct = float(pick(compact_pct, "index_compact_tombstone_pct", 20.0))
        self.M, self.ef_construction, self.seed = M, ef_construction, seed
        self.dims = dict(dims)
        self.indexes: dict[str, HnswIndex] = {}
        self.applied_seq: dict[str, int] = {}
        self.status: dict[str, str] = {}
        self.last_flush: dict[str, float] = {}  # seconds the last flush took, by space
        self.flushed_at: dict[str, float] = {}  # wall time of the last flush, by space
        self._lock = threading.RLock()  # orders apply / swap / snapshot
        self._pending: dict[str, list] = {}  # changes seen while a rebuild of that suffix runs
        self._dirty: set[str] = set()
        self._cv = threading.Condition()
        self._first_dirty = 0.0
        self._last_change = 0.0
        self._stop = False
        self._abandoned = False  # set by abandon(): nothing more is written to these files
        self._pool = ThreadPoolExecutor(max_workers=max(len(self.dims), 1), thread_name_prefix="ann")
        for suffix, dim in self.dims.items():
            self._load(suffix, dim)
        self._thread = None
        if start_flusher:
            self._thread = threading.Thread(target=self._flusher, name="index-flush", daemon=True)
            self._thread.start()

    # --- loading --------------------------------------------------------------------------------
    def _new(self, dim: int) -> HnswIndex:
        return HnswIndex(dim, M=self.M, ef_construction=self.ef_construction, seed=self.seed)

    def _load(self, suffix: str, dim: int) -> None:
        try:
            idx, seq = HnswIndex.load(self.directory, file_suffix(suffix))
            if idx.dim != dim:
                log.warning("index_dim_mismatch", directory=str(self.directory), suffix=suffix, file_dim=idx.dim,
                            want_dim=dim, hint="the embedder changed; the index is rebuilt")
                idx, seq, state = self._new(dim), 0, "dim_mismatch"
            else:
                state = "ok"
        except FileNotFoundError:
            idx, seq, state = self._new(dim), 0, "new"
        except CorruptIndexError as e:
            log.warning("index_corrupt", directory=str(self.directory), suffix=suffix, error=e.message,
                        hint="rebuilding it from the database")
            idx, seq, state = self._new(dim), 0, "corrupt"
        self.indexes[suffix], self.applied_seq[suffix], self.status[suffix] = idx, seq, state

    def plan(self, suffix: str, log_max_seq: int, log_min_seq: int | None = None) -> str:
        """'ok', 'replay' (apply the log after applied_seq) or 'rebuild' (from the database).

        log_min_seq is the oldest seq the change log still holds (None = the log is complete)."""
        seq = self.applied_seq[suffix]
        if self.status[suffix] in ("corrupt", "dim_mismatch"):
            return "rebuild"
        if seq > log_max_seq:
            return "rebuild"  # the index has changes the database does not: the database was restored
        if seq == log_max_seq:
            return "ok"
        if log_min_seq is not None and seq + 1 < log_min_seq:
            return "rebuild"  # an old file was put back and the log no longer reaches back to it
        return "replay"

    # --- changes --------------------------------------------------------------------------------
    def apply(self, suffix: str, changes: Iterable[tuple]) -> int:
        """Apply (seq, op, label, vector) in order; op is 'add' or 'delete' (vector None).
        Changes at or below applied_seq are skipped, so replaying an overlapping range is safe.
        Returns how many were applied."""
        done = 0
        with self._lock:
            idx = self.indexes[suffix]
            seq0 = self.applied_seq[suffix]
            run_op: str | None = None
            run_lab: list[int] = []
            run_vec: list[Any] = []
            top = seq0
            for ch in changes:
                seq, op, label = int(ch[0]), ch[1], int(ch[2])
                if seq <= seq0:
                    continue
                if op not in ("add", "delete"):
                    raise InvalidVectorError(f"change {seq}: op must be 'add' or 'delete', got {op!r}")
                if op != run_op:
                    self._flush_run(suffix, idx, run_op, run_lab, run_vec)
                    run_op, run_lab, run_vec = op, [], []
                run_lab.append(label)
                if op == "add":
                    run_vec.append(ch[3])
                top = max(top, seq)
                done += 1
            self._flush_run(suffix, idx, run_op, run_lab, run_vec)
            self.applied_seq[suffix] = top
        if done:
            self.note_change(suffix)
        return done

    def _flush_run(self, suffix: str, idx: HnswIndex, op: str | None, labels: list[int],
                   vectors: list[Any] | None) -> None:
        if not labels:
            return
        lab = np.asarray(labels, np.int64)
        if op == "add":
            vec = np.asarray(vectors, np.float32).reshape(len(labels), -1)
            idx.add(lab, vec)
        else:
            idx.delete(lab)
        if suffix in self._pending:
            self._pending[suffix].append((op, lab, vec if op == "add" else None))

    def add(self, suffix: str, labels: list[int], vectors: list[Any] | None, seq: int) -> None:
        """Bulk form of apply: every label added with one seq (the last change it covers)."""
        with self._lock:
            idx = self.indexes[suffix]
            self._flush_run(suffix, idx, "add", list(np.asarray(labels).ravel()), vectors)
            self.applied_seq[suffix] = max(self.applied_seq[suffix], int(seq))
        self.note_change(suffix)

    def delete(self, suffix: str, labels: list[int], seq: int) -> None:
        with self._lock:
            self._flush_run(suffix, self.indexes[suffix], "delete", list(np.asarray(labels).ravel()), None)
            self.applied_seq[suffix] = max(self.applied_seq[suffix], int(seq))
        self.note_change(suffix)

    def set_entry_points(self, labels: list[int], stats: dict | None = None) -> None:
        """Cluster-analysis entry points; used by every dimension's index (they share labels)."""
        with self._lock:
            for idx in self.indexes.values():
                idx.set_entry_labels(labels)
                if stats is not None:
                    idx.meta["cluster_stats"] = stats
        for suffix in self.indexes:
            self.note_change(suffix)

    # --- rebuild / compaction -------------------------------------------------------------------
    def rebuild(self, suffix: str, batches: Iterable[tuple], applied_seq: int) -> HnswIndex:
        """Build the index of ``suffix`` from (labels, vectors) batches read from the database at
        ``applied_seq``; changes applied meanwhile are replayed onto it; then swap and flush."""
        dim = self.dims[suffix]

        def build() -> HnswIndex:
            new = self._new(dim)
            for labels, vectors in batches:
                new.add(labels, vectors)
            return new

        return self._swap(suffix, build, applied_seq)

    def maybe_compact(self) -> list[str]:
        """Compact the indexes whose tombstones passed index_compact_tombstone_pct."""
        done = []
        for suffix, idx in list(self.indexes.items()):
            if idx.needs_compaction(self.compact_pct):
                self._swap(suffix, idx.compact, None)
                done.append(suffix)
        return done

    def _swap(self, suffix: str, build: Callable[[], HnswIndex], applied_seq: int | None) -> HnswIndex:
        with self._lock:
            self._pending[suffix] = []
            old = self.indexes[suffix]
        try:
            new = build()
            with self._lock:
                for op, lab, vec in self._pending[suffix]:
                    new.add(lab, vec) if op == "add" else new.delete(lab)
                new.set_entry_labels(old.entry_labels)
                new.meta = {**old.meta, **new.meta}
                self.indexes[suffix] = new
                if applied_seq is not None:
                    self.applied_seq[suffix] = max(int(applied_seq), self.applied_seq[suffix])
                self.status[suffix] = "ok"
        finally:
            with self._lock:
                self._pending.pop(suffix, None)
        self.flush([suffix])
        return new

    def rebuilding(self, suffix: str) -> bool:
        """True while a rebuild or compaction of ``suffix`` runs beside the live graph."""
        return suffix in self._pending

    # --- search ---------------------------------------------------------------------------------
    def search(self, queries: dict[str, np.ndarray], k: int = 64, ef: int = 512,
               entry_points: npt.ArrayLike | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Search each suffix with its own query vector in parallel; keep the best score per label."""
        def one(item: tuple[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
            suffix, q = item
            idx = self.indexes[suffix]
            if len(idx) < self.exact_below:
                return idx.search_exact(q, k)
            return idx.search(q, k, ef, entry_points)

        items = [(s, q) for s, q in queries.items() if s in self.indexes]
        unknown = set(queries) - set(self.indexes)
        if unknown:
            raise InvalidVectorError(f"no index for pass(es) {sorted(unknown)}; loaded: {sorted(self.indexes)}")
        results = list(self._pool.map(one, items)) if len(items) > 1 else [one(i) for i in items]
        best: dict[int, float] = {}
        for labels, scores in results:
            for lab, sc in zip(labels.tolist(), scores.tolist()):
                if lab >= 0 and sc > best.get(lab, -np.inf):
                    best[lab] = sc
        ranked = sorted(best.items(), key=lambda x: (-x[1], x[0]))[:k]
        return (np.array([r[0] for r in ranked], np.int64), np.array([r[1] for r in ranked], np.float32))

    # --- flushing -------------------------------------------------------------------------------
    def note_change(self, suffix: str | None = None) -> None:
        with self._cv:
            now = time.monotonic()
            if not self._dirty:
                self._first_dirty = now
            self._dirty.update([suffix] if suffix else self.indexes)
            self._last_change = now
            self._cv.notify_all()

    @property
    def dirty(self) -> bool:
        return bool(self._dirty)

    def flush(self, suffixes: Iterable[str] | None = None) -> None:
        """Write the given (default: dirty) indexes now."""
        with self._cv:
            todo = set(self._dirty if suffixes is None else suffixes)
            self._dirty -= todo
        for suffix in sorted(todo):
            try:
                with self._lock:
                    idx, seq = self.indexes[suffix], self.applied_seq[suffix]
                    snap = idx.snapshot()
                from ragweedd.index.fileformat import directory_lock, write_index

                t0 = time.monotonic()
                with directory_lock(self.directory):
                    if self._abandoned:  # abandoned while it snapshotted: its files may be gone already
                        return
                    write_index(self.directory, snap, seq, file_suffix(suffix))
                self.last_flush[suffix] = time.monotonic() - t0
                self.flushed_at[suffix] = time.time()
                log.debug("index_flushed", directory=str(self.directory), suffix=suffix, applied_seq=seq,
                          vectors=snap.live, seconds=round(self.last_flush[suffix], 3))
            except BaseException:
                with self._cv:
                    self._dirty.add(suffix)  # try again at the next tick
                raise

    def _flusher(self) -> None:
        while True:
            with self._cv:
                while not self._stop:
                    if not self._dirty:
                        self._cv.wait()
                        continue
                    due = min(self._last_change + self.flush_quiet_s, self._first_dirty + self.flush_max_s)
                    wait = due - time.monotonic()
                    if wait <= 0:
                        break
                    self._cv.wait(wait)
                if self._stop:
                    return
                self._first_dirty = time.monotonic()
            try:
                self.flush()
            except Exception as e:  # noqa: BLE001 - a full disk must not kill the flusher; the next tick retries
                log.error("index_flush_failed", directory=str(self.directory), error=str(e))
                with self._cv:
                    self._cv.wait(min(self.flush_quiet_s, 5.0) or 1.0)

    def abandon(self) -> None:
        """Stop the flusher without waiting for it or writing anything more: the files keep what
        they hold (a flush under way completes, consistent). For a stop that must not wait for a
        thread still applying changes; the next start replays them from the change log."""
        with self._cv:
            self._stop = True
            # a write already under way finishes (files removed meanwhile wait for it: they take
            # the directory's lock); none starts after this
            self._abandoned = True
            self._cv.notify_all()

    def close(self, *, flush: bool = True) -> None:
        """Stop the flusher and write what is dirty (``flush=False``: a reader that caught up in
        memory leaves the files to their one writer)."""
        with self._cv:
            self._stop = True
            self._cv.notify_all()
        if self._thread is not None:
            self._thread.join()
        if self._dirty and flush:
            self.flush()
        self._pool.shutdown(wait=True)

    def __enter__(self) -> IndexManager:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
