"""``ragweedctl status --watch``: ingest progress, refreshed until Ctrl-C (or ``--count`` refreshes).

On a terminal the same few lines are redrawn in place: an ingest bar (done/total files, rate, ETA,
as the daemon measures them), the vectors line and the queue. Anywhere else (a pipe, a log) each
refresh is one plain line with a time stamp, and with ``--json`` one JSON status object per line.
"""

from __future__ import annotations

import json
import time

from ragweedd.cli.progress import _width, render

DEFAULT_INTERVAL_S = 2.0


def lines(s: dict, width: int) -> list[str]:
    from ragweedd.cli.ctl import ingest_line, vectors_line

    ing = s["ingest"]
    q = s["queue"]
    first = (render("ingest", ing["done"], ing["total"], ing["files_per_s"], ing["eta_s"], width)
             if ing["total"] or ing["running"] else ingest_line(ing))
    queue = (f"queue: {q['queued']} queued, {q['running']} running, {q['debouncing']} settling"
             + (f", {q['failed']} failed" if q["failed"] else ""))
    return [first[:width], vectors_line(s["vectors"])[:width], queue[:width]]


def watch(c, a, out, tty: bool) -> int:
    """Poll /v1/status every ``a.interval`` seconds; return 0 on Ctrl-C or after ``a.count`` refreshes."""
    from ragweedd.cli.ctl import ingest_line, vectors_line

    drawn = 0
    n = 0
    try:
        while True:
            s = c.call("GET", "/v1/status")
            n += 1
            if a.json:
                out.write(json.dumps(s, ensure_ascii=False) + "\n")
            elif tty:
                shown = lines(s, _width(out) - 1)
                # back to the first line drawn last time, then overwrite every line
                out.write((f"\x1b[{drawn}F" if drawn else "") + "".join(f"\x1b[K{x}\n" for x in shown))
                drawn = len(shown)
            else:
                out.write(f"{time.strftime('%H:%M:%S')} {ingest_line(s['ingest'])}; {vectors_line(s['vectors'])}\n")
            out.flush()
            if a.count is not None and n >= a.count:
                return 0
            time.sleep(a.interval)
    except KeyboardInterrupt:
        return 0
