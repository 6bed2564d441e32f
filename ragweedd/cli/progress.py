"""A one-line progress bar with rate and ETA, for terminals only (standard library, no dependency).

``Bar`` redraws its line on stderr with ``\\r`` when that stream is a terminal and does nothing
otherwise, so logs and pipes get no control characters. ``render`` is the pure part (what the line
says at a given width); ``RateMeter`` turns (time, done) samples into a rate and an ETA over the
last few seconds, so a slow start or a pause does not skew the estimate for the rest of the run.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from collections.abc import Callable

WINDOW_S = 10.0  # the rate is measured over this much recent time
# An ETA from the first second or from no finished item at all is wild (62 files, one done by a
# slow first file: "ETA 15:08" for a run that took 15 s): none is shown until the rate rests on
# this much time and at least one finished item.
ETA_MIN_S = 3.0
MIN_BAR = 8  # narrower than this, the bar is left out and only the numbers shown
REDRAW_S = 0.1  # at most ten redraws a second: a terminal is slow next to a fast ingest


def clock(seconds: float | None) -> str:
    """ETA as m:ss or h:mm:ss ("--" when unknown)."""
    if seconds is None or seconds != seconds or seconds < 0:  # None, NaN, negative
        return "--"
    s = int(round(seconds))
    if s >= 3600:
        return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"
    return f"{s // 60}:{s % 60:02d}"


def eta(done: int, total: int, rate: float | None) -> float | None:
    """Seconds left at ``rate`` items per second (0 when all is done, None when unknown)."""
    if total and done >= total:
        return 0.0
    if not rate or rate <= 0 or not total:
        return None
    return (total - done) / rate


def render(label: str, done: int, total: int, rate: float | None, eta_s: float | None, width: int,
           unit: str = "files") -> str:
    """``label [#####.....] done/total unit  rate unit/s  ETA m:ss``, never wider than ``width``."""
    counts = f"{done}/{total} {unit}" if total else f"{done} {unit}"
    speed = f"{rate:.1f} {unit}/s" if rate is not None else f"-- {unit}/s"
    finished = bool(total) and done >= total
    tail = f" {counts}  {speed}  ETA {clock(eta_s) if eta_s is not None or finished else '…'}"
    room = width - len(label) - len(tail) - 3  # " [" and "]"
    if total and room >= MIN_BAR:
        filled = min(room, int(room * min(done, total) / total))
        line = f"{label} [{'#' * filled}{'.' * (room - filled)}]{tail}"
    else:
        line = f"{label}{tail}"
    return line[:max(width, 0)]


class RateMeter:
    """Items per second over the last ``window`` seconds of (time, done) samples."""

    def __init__(self, window: float = WINDOW_S) -> None:
        self.window = window
        self.samples: deque[tuple[float, int]] = deque()
        self.first: tuple[float, int] = (0.0, 0)

    def add(self, t: float, done: int) -> None:
        if not self.samples:
            self.first = (t, done)
        self.samples.append((t, done))
        # keep one sample at or before the window's start, so the span covers the whole window
        while len(self.samples) > 2 and self.samples[1][0] <= t - self.window:
            self.samples.popleft()

    def settled(self, min_s: float = ETA_MIN_S) -> bool:
        """Whether the samples span ``min_s`` seconds since the first one and some item finished:
        only then is an ETA worth showing."""
        if len(self.samples) < 2:
            return False
        return self.samples[-1][0] - self.first[0] >= min_s and self.samples[-1][1] > self.first[1]

    def rate(self) -> float | None:
        if len(self.samples) < 2:
            return None
        (t0, d0), (t1, d1) = self.samples[0], self.samples[-1]
        return (d1 - d0) / (t1 - t0) if t1 > t0 else None


class Bar:
    """The progress line of a one-shot command on ``stream`` (stderr), drawn only on a terminal."""

    def __init__(self, label: str, total: int, stream: TextIO, *, unit: str = "files", enabled: bool | None = None,
                 now: Callable[[], float] = time.monotonic) -> None:
        self.label, self.total, self.stream, self.unit, self.now = label, total, stream, unit, now
        self.enabled = _isatty(stream) if enabled is None else enabled
        self.meter = RateMeter()
        self.done = 0
        self.shown = False
        self._last_draw = -1e9
        self.meter.add(now(), 0)
        self.lock = threading.RLock()  # log lines come from other threads (the embedding stage)

    def update(self, done: int, force: bool = False) -> None:
        self.done = done
        t = self.now()
        self.meter.add(t, done)
        if self.enabled and (force or t - self._last_draw >= REDRAW_S):
            self._last_draw = t
            self.draw()

    def draw(self) -> None:
        if not self.enabled:
            return
        with self.lock:
            rate = self.meter.rate()
            left = eta(self.done, self.total, rate) if self.meter.settled() or self.done >= self.total else None
            line = render(self.label, self.done, self.total, rate, left,
                          _width(self.stream) - 1, self.unit)  # one column spare: no wrap in the last one
            self.stream.write("\r\x1b[K" + line)
            self.stream.flush()
            self.shown = True

    def clear(self) -> None:
        """Wipe the line, so a message can be printed where it was (``draw`` brings it back)."""
        with self.lock:
            if self.shown:
                self.stream.write("\r\x1b[K")
                self.stream.flush()
                self.shown = False

    def log_stream(self) -> "_AroundBar":
        """A stream for the log while the bar is shown: each line is printed above the bar."""
        return _AroundBar(self)

    def close(self) -> None:
        with self.lock:
            self.clear()
            self.enabled = False  # what is logged after the end goes straight through


class _AroundBar:
    def __init__(self, bar: Bar) -> None:
        self.bar = bar

    def write(self, text: str) -> int:
        with self.bar.lock:
            self.bar.clear()
            n = self.bar.stream.write(text)
            if text.endswith("\n"):
                self.bar.draw()
        return n

    def flush(self) -> None:
        self.bar.stream.flush()

    def isatty(self) -> bool:
        return True  # the bar is only drawn on a terminal: keep the log's terminal rendering


def _isatty(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def _width(stream: object) -> int:
    """The terminal's width in columns if ``stream`` is one (any writer: a wrapper has no fileno)."""
    import os
    import shutil

    fileno = getattr(stream, "fileno", None)
    try:
        cols = os.get_terminal_size(fileno()).columns if callable(fileno) else shutil.get_terminal_size().columns
    except (ValueError, OSError):
        cols = shutil.get_terminal_size().columns
    return cols if cols > 0 else 80  # a pseudo-terminal nobody sized says 0
