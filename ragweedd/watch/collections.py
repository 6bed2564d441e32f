"""The daemon's collections: their roots, watches, availability and reconciliation scans.

Collections come from the config file plus those added through the API (persisted in the
``daemon_collections`` table of ingest_db). Each root is watched while it exists; a root that
disappears (unmounted, renamed away, deleted) is unwatched and its collection reported unavailable,
nothing is deleted; when it returns it is watched again and scanned.

Scans and watcher events queue only the files that need the pipeline, and queue them first; files
skipped from their stat (empty, or a type no extractor reads) get their rows written here in
batches, without a job each (watch/skipped.py says why and how that stays exact).
"""

from __future__ import annotations

import functools
import os
import stat
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from ragweedd.config import CollectionConfig
from ragweedd.errors import ConfigError, NotFoundError, RequestError
from ragweedd.files.roots import root_state
from ragweedd.files.skip_rules import skipped_file
from ragweedd.logging import get_logger
from ragweedd.paths import deepest_root, default_config_file, valid_collection_name, within
from ragweedd.store.protocols import IngestStore
from ragweedd.store.types import SkippedFile
from ragweedd.watch import skipped
from ragweedd.watch.reconcile import scan

if TYPE_CHECKING:
    from ragweedd.config import Config
    from ragweedd.paths import Paths
    from ragweedd.store.protocols import JobStore
    from ragweedd.watch.debounce import Debouncer
    from ragweedd.watch.watcher import Watcher

log = get_logger("ragweedd.watch")
RUNNING_WAIT_S = 60.0  # how long a removal waits for a running ingest job of the collection


# Kernel and device trees: endless or changing files, loops and devices whose reads block. The
# filesystem root holds them all (and the whole machine: watching it exhausts the watches and the
# watcher's walk of it fails), so it is refused too. $HOME is allowed (docs/watching.md).
SYSTEM_TREES = ("/proc", "/sys", "/dev", "/run")


def _system_root(path: str) -> str | None:
    """What ``path`` (resolved) is, when it is the filesystem root or inside a kernel/device tree."""
    if path == os.sep:
        return "the filesystem root"
    for t in SYSTEM_TREES:
        if path == t or path.startswith(t + os.sep):
            return f"inside the system tree {t}"
    return None


CollectionsDB = IngestStore  # the ingest state, as the collections use it

@dataclass
class CollectionState:
    conf: CollectionConfig
    from_config: bool
    # root -> 'ok' | 'missing' | 'empty_mount' | 'deleted' (see Collections._root_state)
    roots: dict[str, str] = field(default_factory=dict)
    last_scan: dict | None = None

    @property
    def available(self) -> bool:
        return all(s in ("ok", "deleted") for s in self.roots.values())


class Collections:
    def __init__(self, cfg: Config, paths: Paths, queue: JobStore, debouncer: Debouncer,
                 watcher_factory: Callable[[Collections], Watcher],
                 open_db: Callable[[], CollectionsDB]) -> None:
        """``open_db``: opens a connection to the ingest state (the daemon gives its backend's)."""
        self.cfg, self.paths, self.queue, self.debouncer = cfg, paths, queue, debouncer
        opener = open_db
        # Lookups, describe() and writes share one connection, each holding _lock for one short
        # statement. A scan reads through a connection of its own and holds no lock of theirs
        # while it walks the disk (minutes on a large folder; a listing must not wait for it).
        self.db = opener()
        self._scan_db = opener()
        # Skipped rows for watcher events are written through a connection of their own, so the
        # watcher's lookups (self.db) and a long scan (_scan_db) never wait for each other.
        self._event_db = opener()
        self._lock = threading.RLock()
        self._scan_lock = threading.Lock()
        self._event_lock = threading.Lock()
        self._life = threading.Lock()  # a scan's enqueue vs. the removal of its collection
        # The scan under way: collection -> {"state": "walking" | "recording", "files_seen": n};
        # set until its jobs are queued and its skipped rows written (status counts it as work).
        self.scan_progress: dict[str, dict] = {}
        # refuses a collection the store cannot take from this daemon (a shared one of another model)
        self.check_add: Callable[[str], None] | None = None
        self.watcher = watcher_factory(self)
        self.items: dict[str, CollectionState] = {}
        for name, c in cfg.collections.items():
            self.items[name] = CollectionState(c, True)
        for name, roots, ignore, topic in self.db.run_time_collections():
            if name not in self.items:
                self.items[name] = CollectionState(CollectionConfig(name, tuple(roots), tuple(ignore), topic), False)
        self.own = own_dirs(cfg, paths)
        for name, st in self.items.items():
            for root in st.conf.paths:
                inside = self._inside_own(root)
                if inside and st.from_config:
                    raise ConfigError(f"collection '{name}' in {cfg.source}: folder {root} is inside the daemon's own "
                                      f"directory {inside}", hint="choose a folder outside ragweedd's config, data, "
                                      "state and cache directories")
                if inside:
                    log.error("collection_root_refused", collection=name, root=root, own_dir=inside,
                              action="not watched or scanned; remove the collection and add another folder")

    def _inside_own(self, root: str) -> str | None:
        """The daemon directory that ``root`` is, or lies inside, if any."""
        r = os.path.realpath(root)
        for d in self.own:
            if r == d or r.startswith(d.rstrip(os.sep) + os.sep):
                return d
        return None

    def ignore_of(self, name: str, root: str | None = None) -> tuple[str, ...]:
        """The collection's ignore patterns plus the daemon's own directories and config file
        below its roots, as literal ("/...") patterns: a collection on $HOME must never index the
        daemon's databases (a re-index loop: every ingest writes there) or config.toml (API keys)."""
        st = self.items[name]
        roots = [root] if root is not None else list(st.conf.paths)
        extra: list[str] = []
        for rt in roots:
            r = os.path.realpath(rt)
            for d in self.own:
                if within(d, r, strictly=True):
                    extra.append("/" + os.path.relpath(d, r))
        return tuple(st.conf.ignore) + tuple(dict.fromkeys(extra))

    def close(self) -> None:
        self.watcher.stop()
        with self._lock:
            self.db.close()
        with self._scan_lock:
            self._scan_db.close()
        with self._event_lock:
            self._event_db.close()

    # --- lookup ----------------------------------------------------------------------------------
    def get(self, name: str) -> CollectionState:
        st = self.items.get(name)
        if st is None:
            raise NotFoundError(f"collection '{name}' does not exist", action="list_collections")
        return st

    def upload_dir(self, name: str) -> str:
        return str(self.paths.managed_uploads / name)

    def roots_of(self, name: str) -> list[str]:
        st = self.items.get(name)
        if st is None:
            return []
        up = self.upload_dir(name)
        return [*st.conf.paths, up] if os.path.isdir(up) else list(st.conf.paths)

    def resolve(self, name: str) -> tuple[list[str], tuple[str, ...], bool] | None:
        """(roots, ignore, available) for the ingest workers, or None for an unknown collection."""
        st = self.items.get(name)
        if st is None:
            return None
        return self.roots_of(name), self.ignore_of(name), st.available

    def known_under(self, collection: str, prefix: str) -> list[str]:
        with self._lock:
            return self.db.live_paths_under(collection, prefix)

    def is_known(self, collection: str, path: str) -> bool:
        with self._lock:
            return self.db.is_live(collection, path)

    # --- watching and availability -----------------------------------------------------------------
    def start(self) -> None:
        for name in list(self.items):
            self._watch_collection(name)

    def _watch_collection(self, name: str) -> None:
        st = self.items[name]
        for root in st.conf.paths:
            state = self._root_state(name, root)
            st.roots[root] = state
            if self._inside_own(root):
                st.roots[root] = "missing"  # refused (logged in __init__): never watched or scanned
                continue
            if state == "ok" and os.path.isdir(root):
                self.watcher.watch(name, root, self.ignore_of(name, root))
            elif state == "ok":
                log.info("collection_file_root", collection=name, root=root,
                         action="kept in step by the reconciliation scans, not watched")
            elif state == "deleted":
                log.info("collection_root_deleted", collection=name, root=root,
                         action="what it held is removed from the index by the scan")
            else:
                log.warning("collection_root_unavailable", collection=name, root=root, state=state,
                            action="nothing is deleted; watching resumes when the folder returns")

    def check_roots(self) -> list[str]:
        """Notice roots that vanished or returned (cheap: one stat per root). Returns the names of
        collections that need a scan because a root came back."""
        rescan = []
        for name, st in list(self.items.items()):
            for root in st.conf.paths:
                if self._inside_own(root):
                    continue
                new = self._root_state(name, root)
                old = st.roots.get(root)
                if new == old:
                    continue
                st.roots[root] = new
                if new == "deleted":
                    log.info("collection_root_deleted", collection=name, root=root,
                             action="what it held is removed from the index by the scan")
                    self.watcher.unwatch(name, root)
                    rescan.append(name)
                elif new == "ok":
                    log.info("collection_root_back", collection=name, root=root)
                    self.watcher.unwatch(name, root)
                    if os.path.isdir(root):
                        self.watcher.watch(name, root, self.ignore_of(name, root))
                    rescan.append(name)
                else:
                    log.warning("collection_root_unavailable", collection=name, root=root, state=new,
                                action="nothing is deleted; watching resumes when the folder returns")
                    self.watcher.unwatch(name, root)
        return rescan

    def _root_state(self, name: str, root: str) -> str:
        """root_state, except that a root gone from a folder that is still there, when it was a
        file the collection indexed, is 'deleted': the user removed it, so it leaves the index and
        the collection stays available. A folder root that vanished may be a disk not mounted or a
        folder renamed away: it stays 'missing' and what it held is kept."""
        state = root_state(root)
        if state != "missing" or root_state(os.path.dirname(root.rstrip(os.sep)) or os.sep) != "ok":
            return state
        with self._lock:
            if self.db.held_file(name, root):
                return "deleted"
        return state

    def on_root_missing(self, collection: str, root: str) -> None:
        st = self.items.get(collection)
        if st is not None and st.roots.get(root) == "ok":
            self.check_roots()

    # --- scans -----------------------------------------------------------------------------------
    def scan(self, name: str) -> dict:
        st = self.get(name)
        roots = self.roots_of(name)
        skip = [r for r, s in st.roots.items() if s not in ("ok", "deleted")]
        gone = lambda: self.items.get(name) is not st  # noqa: E731 - removed (or re-added) meanwhile
        with self._scan_lock:
            self.scan_progress[name] = {"state": "walking", "files_seen": 0}
            try:
                return self._scan(name, st, roots, skip, gone)
            finally:
                self.scan_progress.pop(name, None)

    def _scan(self, name: str, st: CollectionState, roots: list[str], skip: list[str],
              gone: Callable[[], bool]) -> dict:
        def walked(n: int) -> None:
            self.scan_progress[name] = {"state": "walking", "files_seen": n}

        res = scan(self._scan_db, name, roots, self.ignore_of(name), skip_roots=skip, cancelled=gone,
                   cfg=self.cfg, progress=walked)
        # what it found is being queued, and the rows of skipped files written (status: busy)
        self.scan_progress[name] = {"state": "recording", "files_seen": res.files_seen}
        root_of = {p: deepest_root(p, roots) for p in res.upserts + res.deletes}
        with self._life:
            if gone():
                # The collection was removed during the walk: its scan is cancelled, nothing queued.
                log.info("scan_cancelled", collection=name, reason="collection removed")
                return {**res.summary(), "at": time.time(), "cancelled": True}
            self.queue.put_many([(name, p, "upsert", root_of[p]) for p in res.upserts]
                                + [(name, p, "delete", root_of[p]) for p in res.deletes])
        self._settle_skipped(self._scan_db, name, gone,
                             [f._replace(root=deepest_root(f.path, roots)) for f in res.skipped],
                             [(p, deepest_root(p, roots)) for p in res.skipped_gone])
        st.last_scan = {**res.summary(), "at": time.time()}
        log.info("scan_done", **res.summary())
        return st.last_scan

    def _settle_skipped(self, db: IngestStore, name: str, gone: Callable[[], bool], files: list[SkippedFile],
                        vanished: list[tuple[str, str | None]]) -> None:
        """Write skipped rows, and mark deleted those of skipped files that are gone, in batches,
        each while the collection cannot be removed (a removal drops its rows after the batch, or
        the batch never runs); queue what only the pipeline may settle."""
        def write_allowed(write: Callable[[], Any]) -> Any:
            with self._life:
                return None if gone() else write()

        late: list[tuple[str, str, str, str | None]] = []
        if files:
            _, held = skipped.record(db, name, files, write_allowed=write_allowed)
            late += [(name, f.path, "upsert", f.root) for f in held]
        if vanished:
            _, back = skipped.forget(db, name, vanished, write_allowed=write_allowed)
            late += [(name, p, op, root) for p, root, op in back]
        if late:
            self.queue.put_many(late)

    def take_events(self, items: list[tuple[str, str, str, str | None]]) -> None:
        """The debouncer's sink, settling events as a scan does: an upsert of a file skipped from its
        stat becomes its row, a delete of a path that is gone marks its row deleted when that row
        is a skip; every other event is a job, queued before those rows are written."""
        jobs: list[tuple[str, str, str, str | None]] = []
        skips: dict[str, list[SkippedFile]] = {}
        vanished: dict[str, list[tuple[str, str | None]]] = {}
        roots: dict[str, list[str]] = {}
        state: dict[str, str] = {}
        for item in items:
            name, path, op, _ = item
            f = None
            root = None
            if name in self.items:
                rs = roots.get(name)
                if rs is None:
                    rs = roots[name] = self.roots_of(name)
                root = deepest_root(path, rs)
                if root is not None and state.setdefault(root, root_state(root)) != "ok":
                    root = None  # nothing is settled under a root that is not there: the worker decides
            if root is not None and op == "upsert":
                try:
                    f = skipped_file(path, root, os.lstat(path))
                except OSError:
                    f = None
                if f is not None:
                    skips.setdefault(name, []).append(f)
                    continue
            elif root is not None and op == "delete" and not os.path.lexists(path):
                # Only a skipped row is settled here; forget_skipped hands any other back.
                vanished.setdefault(name, []).append((path, root))
                continue
            jobs.append(item)
        self.queue.put_many(jobs)
        for name in {**skips, **vanished}:
            st = self.items.get(name)
            if st is None:
                continue  # removed meanwhile: its jobs would have been dropped too
            with self._event_lock:
                self._settle_skipped(self._event_db, name, functools.partial(self._replaced, name, st),
                                     skips.get(name, []), vanished.get(name, []))

    def _replaced(self, name: str, st: CollectionState) -> bool:
        """The collection ``st`` was removed (or removed and added again) since it was looked up."""
        return self.items.get(name) is not st

    def scan_all(self) -> list[dict]:
        out = []
        for name in list(self.items):
            try:
                out.append(self.scan(name))
            except Exception as e:  # noqa: BLE001 - one collection's scan failing must not stop the others
                log.error("scan_failed", collection=name, error=str(e))
        return out

    # --- run-time collections ----------------------------------------------------------------------
    def add(self, name: str, paths: list[str], ignore: list[str] | None = None, topic: str = "") -> dict:
        if not valid_collection_name(name):
            raise RequestError(f"collection name {name!r} is not allowed",
                               hint="use letters, digits, '_', '-', '.' (at most 64 characters)")
        if name in self.items:
            raise RequestError(f"collection '{name}' already exists", action="collection_name_taken", name=name)
        if not paths:
            raise RequestError(f"collection '{name}' needs at least one folder in 'paths'")
        if self.check_add is not None:
            self.check_add(name)
        roots = []
        for p in paths:
            r = os.path.realpath(os.path.expanduser(p))
            if not os.path.isdir(r):
                raise RequestError(f"'{p}' is not a folder", hint="give existing folders as the collection's paths")
            system = _system_root(r)
            if system:
                raise RequestError(f"'{p}' is {system}: it cannot be a collection's folder",
                                   hint="give the folder that holds your documents (docs/watching.md)")
            inside = self._inside_own(r)
            if inside:
                raise RequestError(f"'{p}' is inside ragweedd's own directory {inside} (its databases, state or "
                                   f"config)", hint="give a folder outside ragweedd's config, data, state and "
                                   "cache directories; to index a file, upload it or copy it elsewhere")
            roots.append(r)
        conf = CollectionConfig(name, tuple(roots), tuple(ignore or ()), topic or "")
        with self._lock:
            self.db.save_collection(name, roots, conf.ignore, conf.topic)
        # Copy on write: readers iterate self.items without a lock (status, listings, the
        # searchers' collection names); a dict they hold is never changed under them.
        self.items = {**self.items, name: CollectionState(conf, False)}
        self._watch_collection(name)
        log.info("collection_added", collection=name, paths=roots)
        return self.describe(name)

    def remove(self, name: str) -> dict:
        st = self.get(name)
        if st.from_config:
            raise RequestError(f"collection '{name}' is declared in the config file {self.cfg.source}",
                               hint=f"delete its [collections.{name}] table there and restart ragweedd")
        with self._life:  # a scan of it enqueues before this or not at all
            self.items = {k: v for k, v in self.items.items() if k != name}
        for root in st.conf.paths:
            self.watcher.unwatch(name, root)
        # A worker may be ingesting one of its files: let it finish (workers skip the jobs of a
        # collection that no longer resolves), so no row is written after the rows are dropped.
        end = time.monotonic() + RUNNING_WAIT_S
        while self.queue.depth(name).get("running") and time.monotonic() < end:
            time.sleep(0.05)
        with self._lock:
            self.db.forget_removed_collection(name)
        log.info("collection_removed", collection=name)
        return {"name": name, "removed": True}

    def forget_files(self, name: str, also_collection: bool = False) -> None:
        """Drop what ingest knows of the collection's files (and its queued jobs), so the next scan
        ingests every file as new. The user's files are never touched; the caller removes the
        collection's rag.sqlite3 and index files."""
        self.queue.drop_collection(name)
        with self._lock:
            self.db.forget_collection_files(name, also_collection=also_collection)

    def describe(self, name: str) -> dict:
        st = self.get(name)
        with self._lock:
            docs = self.db.done_count(name)
        return {"name": name, "paths": list(st.conf.paths), "ignore": list(st.conf.ignore), "topic": st.conf.topic,
                "documents": docs, "available": st.available,
                "roots": [{"path": r, "state": st.roots.get(r, "unknown"),
                           "watch": self.watcher.mode(name, r)}
                          for r in st.conf.paths],
                "from_config": st.from_config, "last_scan": st.last_scan}


def own_dirs(cfg: Config, paths: Paths) -> list[str]:
    """The daemon's own directories and config file (real paths): never part of any collection."""

    out = [paths.data, paths.state, paths.cache, default_config_file().parent, *own_log_files()]
    if getattr(cfg, "source", None):
        out.append(cfg.source)
    return list(dict.fromkeys(os.path.realpath(str(p)) for p in out))


def own_log_files() -> list[str]:
    """The files this process's stdout and stderr go to (``ragweedd run > ROOT/daemon.log``, a
    nohup.out): inside a watched folder each log line would change the file and its ingest would
    write more lines, for ever. Read where the system tells (/proc on Linux); elsewhere none."""

    found = []
    for fd in (1, 2):
        try:
            if stat.S_ISREG(os.fstat(fd).st_mode):
                found.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            continue
    return [p for p in found if os.path.isabs(p)]
