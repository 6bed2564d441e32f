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
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import Any, Callable, Iterable

from ragweedd.logging import get_logger
from ragweedd.watch.debounce import Debouncer
from ragweedd.watch.ignore import is_ignored, walk_files

log = get_logger("ragweedd.watch")


class _Handler:
    """A watchdog event handler for one root of one collection."""

    def __init__(self, watcher: "Watcher", collection: str, root: str, ignore: tuple[str, ...]) -> None:
        self.w, self.collection, self.root, self.ignore = watcher, collection, root, ignore

    def _rel(self, path: str) -> str | None:
        if not path or not (path == self.root or path.startswith(self.root + os.sep)):
            return None
        return os.path.relpath(path, self.root)

    def _wanted(self, path: str) -> bool:
        rel = self._rel(path)
        return rel is not None and rel != "." and not is_ignored(rel, self.ignore)

    def _upsert_files_under(self, folder: str) -> None:
        for f in walk_files(Path(folder), ()):
            if self._wanted(str(f)):
                self.w.debouncer.upsert(self.collection, str(f), self.root)

    def dispatch(self, event) -> None:
        try:
            self._dispatch(event)
        except Exception as e:  # a watcher thread must never die on one odd event
            log.error("watch_event_error", collection=self.collection, event=repr(event), error=str(e))

    def _dispatch(self, event) -> None:
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
            if self._rel(src) is not None:
                d.delete(self.collection, src, self.root)
        elif etype in ("created", "modified", "closed"):
            if self._wanted(src):
                d.upsert(self.collection, src, self.root)


class _OverflowLog(logging.Handler):
    def __init__(self, callback: Callable[[], None]) -> None:
        super().__init__(logging.WARNING)
        self.callback = callback

    def emit(self, record: logging.LogRecord) -> None:
        if "overflow" in record.getMessage().lower():
            self.callback()


class Watcher:
    """Owns the observers. ``known_under(collection, prefix)`` lists indexed paths below a folder;
    ``on_root_event`` is called when a root itself is deleted or moved."""

    def __init__(self, debouncer: Debouncer, *, known_under: Callable[[str, str], list[str]],
                 is_known: Callable[[str, str], bool], on_root_event: Callable[[str, str], None],
                 on_overflow: Callable[[], None], native_observer: Callable[[], Any] | None = None) -> None:
        self.debouncer = debouncer
        self._make_native = native_observer  # watchdog's inotify Observer unless given
        self.known_under, self.is_known, self.on_root_event = known_under, is_known, on_root_event
        self._native = None
        self._polling = None
        self._watches: dict[tuple[str, str], tuple[object, object]] = {}  # (collection, root) -> (observer, watch)
        self.degraded: dict[tuple[str, str], str] = {}
        self._lock = threading.Lock()
        self._overflow = _OverflowLog(on_overflow)
        for name in ("watchdog.observers.inotify", "watchdog.observers.inotify_c"):
            logging.getLogger(name).addHandler(self._overflow)

    def _observer(self, polling: bool):
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
        """Start watching; returns 'native' or 'polling'."""
        key = (collection, root)
        with self._lock:
            if key in self._watches:
                return "polling" if key in self.degraded else "native"
            handler = _Handler(self, collection, root, tuple(ignore))
            try:
                obs = self._observer(False)
                w = obs.schedule(handler, root, recursive=True)
                self.degraded.pop(key, None)
                mode = "native"
            except OSError as e:
                obs = self._observer(True)
                w = obs.schedule(handler, root, recursive=True)
                self.degraded[key] = f"watch of {root} failed ({e.strerror or e}); polling every 5 s instead"
                log.warning("watch_degraded", collection=collection, root=root, error=str(e),
                            hint="raise fs.inotify.max_user_watches (sysctl) to watch natively")
                mode = "polling"
            self._watches[key] = (obs, w)
            return mode

    def unwatch(self, collection: str, root: str) -> None:
        with self._lock:
            ow = self._watches.pop((collection, root), None)
            self.degraded.pop((collection, root), None)
        if ow is not None:
            try:
                ow[0].unschedule(ow[1])
            except (KeyError, OSError, ValueError):
                pass

    def watching(self, collection: str, root: str) -> bool:
        return (collection, root) in self._watches

    def stop(self) -> None:
        for name in ("watchdog.observers.inotify", "watchdog.observers.inotify_c"):
            logging.getLogger(name).removeHandler(self._overflow)
        for obs in (self._native, self._polling):
            if obs is not None:
                obs.stop()
        for obs in (self._native, self._polling):
            if obs is not None:
                obs.join(5)
