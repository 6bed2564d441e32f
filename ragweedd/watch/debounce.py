"""Per-path debounce and coalescing of watcher events (DESIGN §4).

Every (collection, path) has at most one pending entry: two collections whose roots overlap (the
same folder, or one inside the other) each get their own event for a shared file. An upsert
(create, modify, move target) is emitted once the path has been quiet for ``debounce_s`` *and* its
(size, mtime_ns) is the same as at the last event: a file still being written is looked at again
instead of read half-done. A delete is held
for ``max(delete_hold_s, debounce_s)``; if the path reappears meanwhile (editor save patterns: vim's
backup rename, JetBrains' ``___jb_old___`` dance, Office's temp-and-rename) the delete turns into
one modify.

One thread sleeps on a condition until the earliest deadline: nothing polls while nothing happens.
That thread must outlive any one event: a sink that raises loses only that batch (logged; the
next reconciliation scan finds those files again). Names that are not UTF-8 pass like any other
(store/pathnames.py stores them).
"""

from __future__ import annotations

import heapq
import os
import threading
import time
from dataclasses import dataclass
from typing import Callable

from ragweedd.logging import get_logger

log = get_logger("ragweedd.watch")
Item = tuple[str, str, str, "str | None"]  # (collection, path, op, root) as JobQueue.put_many takes
RECHECK_S = 0.25


@dataclass
class _Pending:
    collection: str
    root: str | None
    op: str
    deadline: float
    stat: tuple[int, int] | None


def _stat(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns


class Debouncer:
    def __init__(self, sink: Callable[[list[Item]], object], *, debounce_s: float, delete_hold_s: float) -> None:
        self.sink = sink
        self.debounce_s = debounce_s
        self.delete_hold_s = max(delete_hold_s, debounce_s)
        self._pending: dict[tuple[str, str], _Pending] = {}  # (collection, path) -> its event
        self._heap: list[tuple[float, tuple[str, str]]] = []
        self._cond = threading.Condition()
        self._stop = False
        self._thread = threading.Thread(target=self._run, name="ragweedd-debounce", daemon=True)
        # Events taken off _pending and being handed to the sink (queued as jobs, skipped rows
        # written): still held here until the sink returns, so status never sees them nowhere.
        self._handing = 0
        self.last_error: str | None = None  # the sink's last failure, for status
        # Events the sink could not take since the owner last looked (``take_dropped``): their
        # files need a reconciliation scan once the sink's store answers again.
        self.dropped = 0

    def start(self) -> "Debouncer":
        self._thread.start()
        return self

    def stop(self, flush: bool = False) -> None:
        with self._cond:
            self._stop = True
            items = [(p.collection, path, p.op, p.root) for (_, path), p in self._pending.items()] if flush else []
            self._pending.clear()
            self._cond.notify_all()
        self._thread.join(5)
        if items:
            self.sink(items)

    def __len__(self) -> int:
        """Events held: waiting for their path to settle, or being handed to the sink."""
        with self._cond:
            return len(self._pending) + self._handing

    # --- events ------------------------------------------------------------------------------
    def upsert(self, collection: str, path: str, root: str | None = None) -> None:
        self._put(collection, path, "upsert", root, self.debounce_s, _stat(path))

    def delete(self, collection: str, path: str, root: str | None = None) -> None:
        with self._cond:
            cur = self._pending.get((collection, path))
        # A delete right after a create of a path never indexed is still a delete: the queue's
        # worker finds no row and does nothing.
        self._put(collection, path, "delete", root, self.delete_hold_s, None if cur is None else cur.stat)

    def take_dropped(self) -> int:
        """The events dropped since the last call; the caller has a scan find their files, so the
        failure is no longer news for status either."""
        with self._cond:
            n, self.dropped = self.dropped, 0
            if n:
                self.last_error = None
        return n

    def alive(self) -> bool:
        return self._thread.is_alive()

    def _put(self, collection: str, path: str, op: str, root: str | None, wait: float,
             st: tuple[int, int] | None) -> None:
        deadline = time.monotonic() + wait
        key = (collection, path)
        with self._cond:
            p = self._pending.get(key)
            if p is None:
                self._pending[key] = _Pending(collection, root, op, deadline, st)
            else:
                p.op, p.deadline, p.stat = op, deadline, st
                p.root = root or p.root
            heapq.heappush(self._heap, (deadline, key))
            if self._heap[0][1] == key:
                self._cond.notify()

    # --- the timer thread ------------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            due: list[Item] = []
            with self._cond:
                if self._stop:
                    return
                now = time.monotonic()
                while self._heap and self._heap[0][0] <= now:
                    deadline, key = heapq.heappop(self._heap)
                    path = key[1]
                    p = self._pending.get(key)
                    if p is None or p.deadline != deadline:
                        continue  # superseded by a later event for the path
                    if p.op == "upsert":
                        st = _stat(path)
                        if st is not None and st != p.stat:
                            # Changed since the last look: still being written; look again shortly.
                            p.stat, p.deadline = st, now + min(RECHECK_S, max(self.debounce_s, 0.05))
                            heapq.heappush(self._heap, (p.deadline, key))
                            continue
                    del self._pending[key]
                    due.append((p.collection, path, p.op, p.root))
                if not due:
                    wait = (self._heap[0][0] - now) if self._heap else None
                    self._cond.wait(wait)
                    continue
                self._handing = len(due)  # in the same hold as their removal from _pending
            try:
                self.sink(due)
                self.last_error = None
            except Exception as e:  # noqa: BLE001 - the sink's failure is counted and shown; the debouncer thread goes on
                with self._cond:
                    self.dropped += len(due)
                self.last_error = f"{type(e).__name__}: {e}"
                log.error("debounce_sink_failed", events=len(due), error=self.last_error,
                          action="these events are dropped; a reconciliation scan finds the files (at once "
                                 "when the daemon sees its store answer again)")
            finally:
                with self._cond:
                    self._handing = 0
