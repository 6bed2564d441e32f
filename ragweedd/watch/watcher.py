"""watchdog glue: one recursive watch per collection root, events into the Debouncer.

inotify (or the platform's native observer) is tried first; when a watch cannot be set (ENOSPC:
too many watches, or any other OSError such as a network mount) the root falls back to a
PollingObserver and is reported as degraded. watchdog rebuilds its watches itself after an inotify
queue overflow but cannot say which events were lost, so an overflow warning from watchdog's logger
triggers a reconciliation scan (``on_overflow``).

Moves: a file moved inside a root is a delete of the old path plus an upsert of the new one (the
pipeline links the new path to the indexed content, nothing is embedded). A folder moved or deleted
expands to the indexed paths below the old name (watchdog does not report the files of a folder
moved out of the tree) and the files below the new name.

A folder that appears is walked for the files already in it, and that walk is bounded: it lists
at most WALK_DEPTH levels and WALK_ENTRIES entries, and asks for a reconciliation scan of the
collection for the rest; a folder that was listed by a walk moments ago and has not changed since
is not walked again. Unbounded, a folder a thousand levels deep created one level at a time cost
a walk of the whole chain per level and stalled every other event for minutes.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable

from ragweedd.files.ignore import is_ignored, walk_files
from ragweedd.logging import get_logger
from ragweedd.watch.debounce import Debouncer

if TYPE_CHECKING:
    from watchdog.events import FileSystemEvent

# watchdog walks a folder that appears (and simulates its events) by recursion, one or more Python
# frames per level: a folder a thousand levels deep passed the default limit of 1,000 frames and
# the RecursionError ended watchdog's inotify thread, after which nothing more of any root was seen.
# Python 3.11 keeps Python-to-Python calls off the C stack, so a higher limit costs only memory
# while such a walk runs. Deeper than this, watching still fails for that root and says so.
DEEP_FOLDER_FRAMES = 20_000


def _room_for_deep_folders() -> None:
    if sys.getrecursionlimit() < DEEP_FOLDER_FRAMES:
        sys.setrecursionlimit(DEEP_FOLDER_FRAMES)


log = get_logger("ragweedd.watch")


WALK_DEPTH = 64  # levels below an appearing folder that its event walks
WALK_ENTRIES = 20_000  # entries an appearing folder's event walk lists at most
WALK_COVER_S = 5.0  # how long a walk's listing stands for folders that did not change since
WALK_HANDLED = 20_000  # folders whose appearance was handled, remembered for WALK_COVER_S
WALK_REMEMBERED = 64  # recent walks kept per handler: each event compares its folder with them
# Filesystem timestamps come from a coarse clock that may lag time.time_ns() by a tick: a folder
# changed just after a walk started can carry a stamp slightly before the start.
STAMP_SLACK_NS = 50_000_000


@dataclass
class _Walked:
    folder: str
    started_ns: int  # wall clock, comparable with st_ctime_ns
    at: float  # monotonic


class _Handler:
    """A watchdog event handler for one root of one collection."""

    def __init__(self, watcher: "Watcher", collection: str, root: str, ignore: tuple[str, ...]) -> None:
        self.w, self.collection, self.root, self.ignore = watcher, collection, root, ignore
        self._walked: list[_Walked] = []  # recent complete walks (only the dispatch thread uses it)
        self._handled: dict[str, float] = {}  # folder -> when its appearance was last handled

    def _rel(self, path: str) -> str | None:
        if not path or not (path == self.root or path.startswith(self.root + os.sep)):
            return None
        return os.path.relpath(path, self.root)

    def _wanted(self, path: str) -> bool:
        rel = self._rel(path)
        return rel is not None and rel != "." and not is_ignored(rel, self.ignore)

    def _upsert_files_under(self, folder: str) -> None:
        rel = self._rel(folder)
        if rel is None or self._repeated(folder) or self._covered(folder):
            return
        base = "" if rel == "." else rel.replace(os.sep, "/") + "/"
        started = time.time_ns()
        cut: list[str] = []
        for f in walk_files(Path(folder), self.ignore, base=base, max_depth=WALK_DEPTH, max_entries=WALK_ENTRIES,
                            cut=cut):
            if self._wanted(str(f)):
                self.w.debouncer.upsert(self.collection, str(f), self.root)
        deep = [c for c in cut if c.count(os.sep) - folder.count(os.sep) >= WALK_DEPTH]
        if len(deep) == len(cut):  # every folder above WALK_DEPTH levels was listed
            self._walked.append(_Walked(folder, started, time.monotonic()))
            del self._walked[:-WALK_REMEMBERED]
        if cut:
            self.w.walk_cut(self.collection, self.root, folder, cut, deep)

    def _repeated(self, folder: str) -> bool:
        """This folder's appearance was handled moments ago. watchdog reports a folder that appears
        again for every folder above it that appears with it (it lists each new folder's subtree), so
        a chain N levels deep can report its deepest folder N times. Every report comes after the
        folder is watched, so what was added to it since the first one has events of its own."""
        now = time.monotonic()
        last = self._handled.get(folder)
        self._handled[folder] = now
        if len(self._handled) > WALK_HANDLED:
            for k in list(self._handled)[:len(self._handled) // 2]:
                del self._handled[k]
        return last is not None and now - last < WALK_COVER_S

    def _covered(self, folder: str) -> bool:
        """A walk that started moments ago listed ``folder`` (it lies fewer than WALK_DEPTH levels
        below that walk's folder), and ``folder`` has not changed since that walk started: its
        files were found then, and what appeared in it later has events of its own. One cheap
        check per event, where walking again cost the whole subtree."""
        now = time.monotonic()
        self._walked = [w for w in self._walked if now - w.at < WALK_COVER_S]
        st = None
        for w in self._walked:
            if not (folder == w.folder or folder.startswith(w.folder + os.sep)):
                continue
            if folder.count(os.sep) - w.folder.count(os.sep) >= WALK_DEPTH:
                continue
            if st is None:
                try:
                    st = os.stat(folder, follow_symlinks=False)
                except OSError:
                    return True  # gone already: nothing to walk
            if max(st.st_ctime_ns, st.st_mtime_ns) < w.started_ns - STAMP_SLACK_NS:
                return True
        return False

    def dispatch(self, event: FileSystemEvent) -> None:
        self.w.events_seen += 1  # only watchdog's dispatch thread counts: no lock needed
        try:
            self._dispatch(event)
        except Exception as e:  # noqa: BLE001 - a watcher thread must never die on one odd event
            log.error("watch_event_error", collection=self.collection, event=repr(event), error=str(e))

    def _dispatch(self, event: FileSystemEvent) -> None:
        etype = event.event_type
        src = os.fsdecode(event.src_path) if event.src_path else ""
        dest = os.fsdecode(getattr(event, "dest_path", "") or "")
        d = self.w.debouncer
        if etype in ("opened", "closed_no_write"):
            return
        if src == self.root and etype in ("deleted", "moved"):
            self.w.on_root_event(self.collection, self.root)
            return
        if event.is_directory:
            if etype == "moved":
                # New paths first: with equal holds their upserts then reach the queue before the
                # deletes of the old paths, so each moved file is linked to its content while the
                # old path still holds it, and the content is never removed and re-added.
                if self._rel(dest) is not None:
                    self._upsert_files_under(dest)
                for p in self.w.known_under(self.collection, src):
                    d.delete(self.collection, p, self.root)
            elif etype == "deleted":
                for p in self.w.known_under(self.collection, src):
                    d.delete(self.collection, p, self.root)
            elif etype == "created" and self._rel(src) is not None:
                # A folder that appears with files already inside (moved in, untarred).
                self._upsert_files_under(src)
            return
        if etype == "moved":
            if self._wanted(dest):  # before the delete, as for folders above
                d.upsert(self.collection, dest, self.root)
            if self._wanted(src) or self.w.is_known(self.collection, src):
                d.delete(self.collection, src, self.root)
        elif etype == "deleted":
            # An ignored path only matters when it was indexed (ignored after it was): the
            # daemon's own journal files under a $HOME root delete themselves many times a second.
            if self._wanted(src) or (self._rel(src) is not None and self.w.is_known(self.collection, src)):
                d.delete(self.collection, src, self.root)
        elif etype in ("created", "modified", "closed"):
            if self._wanted(src):
                d.upsert(self.collection, src, self.root)


class _OverflowLog(logging.Handler):
    """watchdog reports an inotify overflow only in its log: once for the whole inotify instance
    ("... filesystem events were lost") and then once per recursive watch it rebuilds ("...
    reconciling recursive watches below %r", with that watch's path). The per-watch line names the
    root whose events were lost, so only that root's collections are rescanned."""

    def __init__(self, callback: Callable[[str], None]) -> None:
        super().__init__(logging.WARNING)
        self.callback = callback

    def emit(self, record: logging.LogRecord) -> None:
        msg = str(record.msg).lower()
        if "overflow" in msg and "below" in msg and record.args:
            args = record.args if isinstance(record.args, tuple) else (record.args,)
            path = args[0]
            self.callback(os.fsdecode(path) if isinstance(path, (bytes, str)) else str(path))


@dataclass
class _Entry:
    handler: _Handler
    ignore: tuple[str, ...]
    mode: str = "none"  # native | polling | none
    observer: Any = None
    watch: Any = None


OVERFLOW_LIMIT = 5  # overflows of one root within OVERFLOW_WINDOW_S before it is polled instead
OVERFLOW_WINDOW_S = 600.0
# Overflows of a root within this long of the last one counted are one burst and count once: one
# big copy (50,000 files unpacked at once) overflows inotify's queue several times in a few seconds,
# and the rescan it asks for covers them all; a root that keeps overflowing for minutes still
# reaches the limit. Without this, a single copy moved the root to polling for good.
OVERFLOW_BURST_S = 30.0


class Watcher:
    """Owns the observers. ``known_under(collection, prefix)`` lists indexed paths below a folder;
    ``on_root_event`` is called when a root itself is deleted or moved; ``on_overflow(collections)``
    when events of those collections' roots were lost.

    watchdog shares one emitter between every schedule of the same path, so two collections with
    one root share it: unwatching one removes only its handler while another still uses the root.
    ``check()`` (called every few seconds) notices an observer thread that died (e.g. on a folder
    too deep to walk) and sets its watches again, or reports them; it also moves a root that keeps
    overflowing (OVERFLOW_LIMIT bursts within OVERFLOW_WINDOW_S) to polling."""

    def __init__(self, debouncer: Debouncer, *, known_under: Callable[[str, str], list[str]],
                 is_known: Callable[[str, str], bool], on_root_event: Callable[[str, str], None],
                 on_overflow: Callable[[list[str]], None], native_observer: Callable[[], Any] | None = None,
                 on_rescan: Callable[[list[str]], None] | None = None) -> None:
        self.debouncer = debouncer
        # A scan of these collections, for files an event's walk did not reach (on_overflow if not given).
        self.on_rescan = on_rescan or on_overflow
        self._make_native = native_observer  # watchdog's inotify Observer unless given
        self.known_under, self.is_known, self.on_root_event = known_under, is_known, on_root_event
        self.on_overflow = on_overflow
        self._native: Any = None
        self._polling: Any = None
        self._watches: dict[tuple[str, str], _Entry] = {}  # (collection, root) -> its watch
        self._degraded: dict[tuple[str, str], str] = {}  # (collection, root) -> why its watch is degraded
        self._too_deep: dict[tuple[str, str, str], str] = {}  # (collection, root, folder) -> note
        # Its own lock: walk_cut runs on watchdog's dispatch thread, which holds the observer's lock,
        # while unwatch holds self._lock and takes the observer's lock (unschedule).
        self._deep_lock = threading.Lock()
        self._overflows: dict[str, list[float]] = {}  # root -> times of its recent overflows
        self._poll_wanted: set[str] = set()  # roots that overflow too often: moved to polling by check()
        self._lock = threading.RLock()
        self.events_seen = 0  # file change events handed to this watcher's handlers since start
        self._overflow = _OverflowLog(self._overflowed)
        for name in ("watchdog.observers.inotify", "watchdog.observers.inotify_c"):
            logging.getLogger(name).addHandler(self._overflow)

    def _observer(self, polling: bool) -> Any:
        _room_for_deep_folders()
        if polling:
            if self._polling is None:
                from watchdog.observers.polling import PollingObserver

                self._polling = PollingObserver(timeout=5)
                self._polling.start()
            return self._polling
        if self._native is None:
            if self._make_native is not None:
                self._native = self._make_native()
            else:
                from watchdog.observers import Observer

                self._native = Observer()
            self._native.start()
        return self._native

    def watch(self, collection: str, root: str, ignore: Iterable[str] = ()) -> str:
        """Start watching; returns 'native', 'polling' or 'none' (reported in ``degraded``)."""
        key = (collection, root)
        with self._lock:
            e = self._watches.get(key)
            if e is not None:
                return e.mode
            e = self._watches[key] = _Entry(_Handler(self, collection, root, tuple(ignore)), tuple(ignore))
            self._schedule(key, e, polling=root in self._poll_wanted)
            return e.mode

    def _schedule(self, key: tuple[str, str], e: _Entry, *, polling: bool) -> None:
        collection, root = key
        self._degraded.pop(key, None)
        if not polling:
            try:
                e.observer, e.mode = self._observer(False), "native"
                e.watch = e.observer.schedule(e.handler, root, recursive=True)
                return
            except OSError as err:
                reason = f"watch of {root} failed ({err.strerror or err}); polling every 5 s instead"
                hint = "raise fs.inotify.max_user_watches (sysctl) to watch natively"
            except Exception as err:  # noqa: BLE001 - RecursionError on a folder too deep to walk, and the like
                self._unwatchable(key, e, err)
                return
        else:
            reason = (f"watch of {root} lost events {OVERFLOW_LIMIT} times in {OVERFLOW_WINDOW_S / 60:g} min "
                      f"(inotify queue overflow); polling every 5 s instead")
            hint = "raise fs.inotify.max_queued_events (sysctl), or split the folder into smaller collections"
        try:
            e.observer, e.mode = self._observer(True), "polling"
            e.watch = e.observer.schedule(e.handler, root, recursive=True)
        except Exception as err:  # noqa: BLE001 - as above: the root is reported unwatchable, not the watcher stopped
            self._unwatchable(key, e, err)
            return
        self._degraded[key] = reason
        log.warning("watch_degraded", collection=collection, root=root, reason=reason, hint=hint)

    def _unwatchable(self, key: tuple[str, str], e: _Entry, err: BaseException) -> None:
        collection, root = key
        e.observer, e.watch, e.mode = None, None, "none"
        self._degraded[key] = (f"{root} cannot be watched ({type(err).__name__}: {err}); changes there are "
                              f"found only by the reconciliation scans (at start, hourly, POST "
                              f"/v1/collections/{collection}/scan)")
        log.error("watch_failed", collection=collection, root=root, error=f"{type(err).__name__}: {err}",
                  hint="a folder nested too deeply or unreadable below the root; move it or ignore it")

    def _release(self, e: _Entry) -> None:
        """Remove e's handler from its observer; the shared emitter stops only with its last user."""
        if e.observer is None:
            return
        shared = any(o is not e and o.observer is e.observer and o.watch == e.watch for o in self._watches.values())
        try:
            if shared:
                e.observer.remove_handler_for_watch(e.handler, e.watch)
            else:
                e.observer.unschedule(e.watch)
        except (KeyError, OSError, ValueError, RuntimeError):
            pass
        e.observer, e.watch, e.mode = None, None, "none"

    def unwatch(self, collection: str, root: str) -> None:
        with self._lock:
            e = self._watches.get((collection, root))
            if e is not None:
                self._release(e)
                del self._watches[(collection, root)]
            self._degraded.pop((collection, root), None)
            with self._deep_lock:
                for k in [k for k in self._too_deep if k[:2] == (collection, root)]:
                    del self._too_deep[k]

    @property
    def degraded(self) -> dict[tuple[str, str], str]:
        """Why watching is degraded: per (collection, root) whose watch failed or is polled, and per
        folder too deep for the walk of an appearing folder (keyed (collection, that folder))."""
        with self._deep_lock:
            out = {(c, f): note for (c, _, f), note in self._too_deep.items()}
        out.update(self._degraded)
        return out

    def walk_cut(self, collection: str, root: str, folder: str, cut: list[str], deep: list[str]) -> None:
        """The walk of an appearing folder stopped before listing ``cut``: a reconciliation scan of
        the collection finds the files there. Folders cut for their depth are reported in
        ``degraded`` until they are gone (``check``)."""
        log.warning("watch_walk_cut", collection=collection, folder=folder, unlisted=len(cut), too_deep=len(deep),
                    action="reconciliation scan of the collection")
        if deep:
            with self._deep_lock:
                if any(c == collection and (folder == f or folder.startswith(f + os.sep))
                       for c, _, f in self._too_deep):
                    deep = []  # reported already, with a folder above it
        if deep:
            with self._deep_lock:
                self._too_deep[(collection, root, folder)] = (
                    f"folder {folder} (collection '{collection}') is nested more than {WALK_DEPTH} levels deep; "
                    f"files in its folders below that depth that appear with their folder are found by "
                    f"reconciliation scans (one was started now; hourly, POST /v1/collections/{collection}/scan), "
                    f"not at once")
        self.on_rescan([collection])

    def watching(self, collection: str, root: str) -> bool:
        e = self._watches.get((collection, root))
        return e is not None and e.mode != "none"

    def mode(self, collection: str, root: str) -> str:
        e = self._watches.get((collection, root))
        return "none" if e is None else e.mode

    def in_flight(self) -> int:
        """Events watchdog has read and not yet finished handing to the handlers (waiting in its
        observers' queues, or being dispatched: a new folder's walk into the debouncer). An event
        still in the kernel's inotify buffer is not known to anyone yet."""
        n = 0
        for obs in (self._native, self._polling):
            q = getattr(obs, "event_queue", None) if obs is not None else None
            n += int(getattr(q, "unfinished_tasks", 0) or 0)
        return n

    # --- overflow and supervision ----------------------------------------------------------------
    def _overflowed(self, path: str) -> None:
        """Called on watchdog's inotify thread: only bookkeeping and a scan request here."""
        now = time.monotonic()
        with self._lock:
            names = sorted({c for (c, r) in self._watches if r == path})
            recent = [t for t in self._overflows.get(path, []) if now - t < OVERFLOW_WINDOW_S]
            if not recent or now - recent[-1] >= OVERFLOW_BURST_S:
                recent.append(now)
            self._overflows[path] = recent
            if len(recent) >= OVERFLOW_LIMIT:
                self._poll_wanted.add(path)
        if names:
            self.on_overflow(names)

    def check(self) -> list[str]:
        """Set again the watches of an observer thread that died, move roots that keep overflowing
        to polling. Returns the collections whose events may have been lost (to be scanned)."""
        lost: set[str] = set()
        redo: list[tuple[tuple[str, str], _Entry]] = []
        with self._deep_lock:
            gone = [k for k in self._too_deep if not os.path.isdir(k[2])]
            for k in gone:
                del self._too_deep[k]  # the deep folder is gone (moved or deleted)
        with self._lock:
            native_dead = self._native is not None and not _native_alive(self._native)
            polling_dead = self._polling is not None and not self._polling.is_alive()
            for key, e in list(self._watches.items()):
                if e.mode == "none":
                    continue
                dead = ((e.observer is self._native and native_dead) or (e.observer is self._polling and polling_dead)
                        or not _emitter_alive(e.observer, e.watch))
                move = key[1] in self._poll_wanted and e.mode == "native"
                if dead or move:
                    if dead:
                        log.error("watch_thread_died", collection=key[0], root=key[1],
                                  action="setting the watch again; the collection is scanned")
                    self._release(e)
                    redo.append((key, e))
                    lost.add(key[0])
            if native_dead:
                _discard_observer(self._native)
                self._native = None
            if polling_dead:
                _discard_observer(self._polling)
                self._polling = None
            for key, e in redo:
                self._schedule(key, e, polling=key[1] in self._poll_wanted)
        return sorted(lost)

    def stop(self) -> None:
        for name in ("watchdog.observers.inotify", "watchdog.observers.inotify_c"):
            logging.getLogger(name).removeHandler(self._overflow)
        for obs in (self._native, self._polling):
            if obs is not None:
                obs.stop()
        for obs in (self._native, self._polling):
            if obs is not None:
                obs.join(5)


def _emitter_alive(observer: Any, watch: Any) -> bool:
    if observer is None:
        return False
    for em in list(getattr(observer, "emitters", ())):
        if getattr(em, "watch", None) == watch:
            return bool(em.is_alive())
    return True  # an observer that does not list emitters: trust its own thread


def _native_alive(observer: Any) -> bool:
    """The native observer's thread and, on Linux, its inotify reader thread: every native watch
    shares that one reader, and an exception in it (RecursionError when a folder too deep to walk
    appears) ends them all at once. watchdog keeps the reader private (``_inotify_fd``) and has no
    public way to tell that it died."""
    if not observer.is_alive():
        return False
    fd = getattr(observer, "_inotify_fd", None)
    return fd is None or not hasattr(fd, "is_alive") or bool(fd.is_alive())


def _discard_observer(observer: Any) -> None:
    try:
        observer.stop()
    except Exception:  # noqa: BLE001 - a half-dead observer: nothing more to stop
        pass
