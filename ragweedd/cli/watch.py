"""``ragweedctl status --watch``: ingest progress, refreshed until Ctrl-C (or ``--count`` refreshes).

On a terminal the same few lines are redrawn in place: an ingest bar (done/total files, rate, ETA,
as the daemon measures them), the vectors line and the queue. Anywhere else (a pipe, a log) each
refresh is one plain line with a time stamp, and with ``--json`` one JSON status object per line.
"""

from __future__ import annotations

import json
import signal
import threading
import time

from ragweedd.cli.progress import ETA_MIN_S, _width, clock, render

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: ragweedctl starts without importing typing
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable

    from ragweedd.cli.ctl_http import Client
    from ragweedd.cli.ctl_text import Writer
    from ragweedd.contract import VectorProgress

DEFAULT_INTERVAL_S = 2.0


class Settling:
    """Whether a daemon-measured ETA rests on enough data to be shown: this watch has seen the
    count for ``ETA_MIN_S`` seconds and it has moved (a new batch, whose count starts again, starts
    the wait again). The daemon's rate of a fresh batch rests on one file or on the last batch."""

    def __init__(self, now: Callable[[], float] = time.monotonic) -> None:
        self.now = now
        self.first: dict[str, tuple[float, int]] = {}

    def ok(self, key: str, count: int) -> bool:
        t = self.now()
        first = self.first.get(key)
        if first is None or count < first[1]:
            self.first[key] = first = (t, count)
        return t - first[0] >= ETA_MIN_S and count > first[1]


def lines(s: dict, width: int, settling: Settling | None = None) -> list[str]:
    from ragweedd.cli.ctl_text import ingest_line

    ing = s["ingest"]
    q = s["queue"]
    v = s["vectors"]
    ing_ok = settling.ok("ingest", ing["done"]) if settling else True
    vec_ok = settling.ok("vectors", v["vectors_since_start"]) if settling else True
    eta_s = ing["eta_s"] if ing_ok and ing["done"] >= 1 else None
    first = (render("ingest", ing["done"], ing["total"], ing["files_per_s"], eta_s, width)
             if ing["total"] or ing["running"] else ingest_line(ing))
    queue = (f"queue: {q['queued']} queued, {q['running']} running, {q['debouncing']} settling"
             + (f", {q['failed']} failed" if q["failed"] else ""))
    return [first[:width], _vectors(v, vec_ok, width)[:width], queue[:width]]


def _vectors(v: VectorProgress, eta_ok: bool, width: int) -> str:
    """The vectors line laid out as the ingest bar's numbers (they fit in 80 columns even when
    large), the note after them only when it fits."""
    from ragweedd.cli.ctl_text import VECTORS_NOTE, vectors_line

    if not v["pending_chunks"]:
        return vectors_line(v)
    rate = v["chunks_per_s"]
    eta_s = v["eta_s"] if eta_ok and rate > 0 else None
    line = (f"vectors: {v['files_with_vectors']}/{v['files_searchable']} files  {v['pending_chunks']} chunks left  "
            f"{rate:.1f} chunks/s  ETA {'…' if eta_s is None else clock(eta_s)}")
    return line + VECTORS_NOTE if len(line) + len(VECTORS_NOTE) <= width else line


def watch(c: Client, a: argparse.Namespace, out: Writer, tty: bool) -> int:
    """Poll /v1/status every ``a.interval`` seconds; return 0 on Ctrl-C or after ``a.count`` refreshes."""
    from ragweedd.cli.ctl_text import ingest_line, vectors_line

    drawn = 0
    n = 0
    settling = Settling()
    # Ctrl-C sets a flag the loop reads between refreshes: a KeyboardInterrupt raised wherever the
    # signal lands can land in a generator being finalised, where Python prints it and goes on, and
    # the watch then ran on after Ctrl-C. A second Ctrl-C interrupts at once (a daemon that hangs).
    stop = threading.Event()

    def on_sigint(signum: int, frame: object) -> None:
        stop.set()
        signal.signal(signal.SIGINT, signal.default_int_handler)

    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        while not stop.is_set():
            s = c.call("GET", "/v1/status")
            n += 1
            if a.json:
                out.write(json.dumps(s, ensure_ascii=False) + "\n")
            elif tty:
                shown = lines(s, _width(out) - 1, settling)
                # back to the first line drawn last time, then overwrite every line
                out.write((f"\x1b[{drawn}F" if drawn else "") + "".join(f"\x1b[K{x}\n" for x in shown))
                drawn = len(shown)
            else:
                ing_ok = settling.ok("ingest", s["ingest"]["done"])
                vec_ok = settling.ok("vectors", s["vectors"]["vectors_since_start"])
                out.write(f"{time.strftime('%H:%M:%S')} {ingest_line(s['ingest'], ing_ok)}; "
                          f"{vectors_line(s['vectors'], vec_ok)}\n")
            out.flush()
            if a.count is not None and n >= a.count:
                return 0
            stop.wait(a.interval)
        return 0
    except KeyboardInterrupt:
        return 0
    finally:
        signal.signal(signal.SIGINT, previous)
