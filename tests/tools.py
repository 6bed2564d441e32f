"""External tools the tests need: skip when missing, fail instead when RAGWEED_REQUIRE_TOOLS=1 (CI)."""

from __future__ import annotations

import os
import shutil
import threading
import time

import pytest


def require_tool(name: str) -> str:
    """Path of the executable ``name``; skips the test if it is missing, or fails it when
    RAGWEED_REQUIRE_TOOLS=1 says every tool must be present."""
    path = shutil.which(name)
    if path:
        return path
    msg = f"required tool {name!r} is not installed"
    if os.environ.get("RAGWEED_REQUIRE_TOOLS") == "1":
        pytest.fail(msg + " (RAGWEED_REQUIRE_TOOLS=1)")
    pytest.skip(msg)


# The shortest deadline a wait gets. A deadline only stops a test that hangs: it is never a speed
# claim. On a busy machine a first start compiles the vector index's numba code in each test
# worker at once, and a wait a quiet machine meets in seconds took over 30 s.
MIN_DEADLINE_S = 240.0


def wait_until(pred, timeout: float, interval: float = 0.1, what: str = "condition"):
    """Poll ``pred`` until it returns something truthy (which is returned); fail after ``timeout``
    seconds (at least MIN_DEADLINE_S) naming ``what`` and the last value."""
    timeout = max(timeout, MIN_DEADLINE_S)
    end = time.monotonic() + timeout
    last = None
    while time.monotonic() < end:
        last = pred()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout} s waiting for {what} (last value {last!r})")


def folder_chain(parent: str, first: str, levels: int, pause_s: float = 0.0) -> int:
    """mkdir parent/first/d/d/... one level at a time through dir_fd (the paths get too long for
    the path API); returns an open fd of the deepest folder."""
    fd = os.open(parent, os.O_RDONLY)
    for name in [first] + ["d"] * levels:
        os.mkdir(name, dir_fd=fd)
        if pause_s:
            time.sleep(pause_s)
        nfd = os.open(name, os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = nfd
    return fd


def remove_folder_chain(parent: str, first: str) -> None:
    """Remove what folder_chain made, bottom up (shutil.rmtree recurses and fails at this depth)."""
    fds = [os.open(parent, os.O_RDONLY)]
    names = [first]
    while True:
        fds.append(os.open(names[-1], os.O_RDONLY, dir_fd=fds[-1]))
        subs = [e for e in os.listdir(fds[-1])]
        for n in subs:
            if n != "d":
                os.unlink(n, dir_fd=fds[-1])
        if "d" not in subs:
            break
        names.append("d")
    os.close(fds.pop())
    while names:
        os.rmdir(names.pop(), dir_fd=fds[-1])
        os.close(fds.pop())


class EventSink:
    """What a Debouncer hands on, collected for a test: ``(collection, path, op, root)`` items."""

    def __init__(self) -> None:
        self.items: list[tuple] = []
        self.cv = threading.Condition()

    def __call__(self, items) -> None:
        with self.cv:
            self.items.extend(items)
            self.cv.notify_all()

    def wait_for(self, want: set[tuple[str, str, str]], timeout: float = 10.0) -> set[tuple[str, str, str]]:
        """Wait until every (collection, path, op) in ``want`` was emitted; returns those seen."""
        with self.cv:
            self.cv.wait_for(lambda: want <= self._seen(), timeout)
            return self._seen()

    def wait_for_path(self, path: str, timeout: float) -> bool:
        with self.cv:
            return self.cv.wait_for(lambda: any(p == path for _, p, _, _ in self.items), timeout)

    def clear(self) -> None:
        with self.cv:
            self.items.clear()

    def _seen(self) -> set[tuple[str, str, str]]:
        return {(c, p, op) for c, p, op, _ in self.items}
