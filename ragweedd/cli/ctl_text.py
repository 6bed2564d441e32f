"""What ragweedctl writes on a terminal: daemon text made safe to print, a hit's place, sources
with their quotes, and the status lines (``status`` and ``status --watch``). Standard library only,
like ragweedctl itself.
"""

from __future__ import annotations

import json
import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ragweedd.contract import IngestProgress, VectorProgress


_UNSAFE = None


def _unsafe_re():
    global _UNSAFE
    if _UNSAFE is None:
        import re  # argparse has imported it already

        # C0 and C1 controls (ESC, BEL, CSI, OSC...), DEL, bidi overrides, lone surrogates
        # (undecodable bytes of a file name): what a terminal would act on or cannot print.
        _UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
    return _UNSAFE


def _esc(m) -> str:
    c = m.group()
    named = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}.get(c)
    return named or (f"\\x{ord(c):02x}" if ord(c) < 256 else f"\\u{ord(c):04x}")


def safe(value: object) -> str:
    """Text from the daemon (names, paths, messages) as a terminal should show it: every control
    character escaped as ``\\x1b``, newlines too, as git and ls do, so a crafted file name cannot
    set the window title (OSC 0), clear the screen (ED) or write the clipboard (OSC 52)."""
    return _unsafe_re().sub(_esc, str(value))


def safe_text(value: object) -> str:
    """Like ``safe`` but keeps newlines and tabs: answer text and passages."""
    return "\n".join("\t".join(safe(p) for p in line.split("\t")) for line in str(value).split("\n"))


class SafeWriter:
    """Human output: everything written is passed through ``safe_text``; a net under the explicit
    ``safe()`` of names, for whatever else reaches the terminal."""

    def __init__(self, out) -> None:
        self.out = out

    def write(self, text: str) -> int:
        return self.out.write(safe_text(text))

    def flush(self) -> None:
        self.out.flush()

    def isatty(self) -> bool:
        return bool(getattr(self.out, "isatty", lambda: False)())


def _where(h: dict) -> str:
    """collection/path under its root (subfolders kept: two notes.md of one collection differ), then
    the place: member, page, section, time, lines or characters."""
    name = (h.get("source_rel_path") or h.get("filename")
            or os.path.basename(str(h.get("source_file") or "")))
    bits = [f"{safe(h.get('collection', '?'))}/{safe(name)}"]
    if h.get("member"):
        bits.append(f"!{safe(h['member'])}")
    if h.get("page_label"):
        bits.append(f" p.{safe(h['page_label'])}")
    if h.get("section"):
        bits.append(f" §{safe(h['section'])}")
    if h.get("t_start") is not None:
        bits.append(f" @{_mmss(h['t_start'])}-{_mmss(h.get('t_end') or h['t_start'])}")
    elif h.get("lines"):
        bits.append(f" {_lines(h['lines'])}")
    elif h.get("span"):
        bits.append(f" chars {h['span'][0]}-{h['span'][1]}")
    return "".join(bits)


def _lines(lines: list) -> str:
    first, last = lines[0], lines[-1]
    return f"line {safe(first)}" if first == last else f"lines {safe(first)}-{safe(last)}"


def _mmss(t: float) -> str:
    t = int(t)
    return f"{t // 60}:{t % 60:02d}"


def _print_sources(sources: list[dict], out) -> None:
    if not sources:
        return
    out.write("\nSources:\n")
    for n, h in enumerate(sources, 1):
        score = h.get("score")
        out.write(f"[{n}] {_where(h)}  score {score:.3f}\n" if isinstance(score, (int, float))
                  else f"[{n}] {_where(h)}\n")
        # the uri opens the cited place (page, lines, time, member), where the path opens only the file
        if h.get("uri") or h.get("source_file"):
            out.write(f"    {safe(h.get('uri') or h['source_file'])}\n")
        print_quotes(h, out)


QUOTE_CHARS = 300  # of one quote on a terminal; --json has it whole


def print_quotes(source: dict, out) -> None:
    """The sentences an answer quotes from a source, each with the uri that opens it (``#L14``,
    ``#page=4``), under the source they come from."""
    for q in source.get("quotes") or ([source["quote"]] if source.get("quote") else []):
        text = " ".join(str(q.get("text", "")).split())
        if len(text) > QUOTE_CHARS:
            text = text[:QUOTE_CHARS].rsplit(" ", 1)[0] + " …"
        out.write(f"    > {safe(text)}\n")
        if q.get("uri"):
            out.write(f"      {safe(q['uri'])}\n")


def _print_json(data, out) -> None:
    out.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def ingest_line(ing: IngestProgress, eta_ok: bool = True) -> str:
    """"ingest: 120/3000 files, 4.1 files/s, 35.2 chunks/s, about 11 min left"; while no batch
    runs, what comes before one ("ingest: scanning 'notes' (12,000 files seen)", "ingest: 40 file
    changes settling"); "idle" only when the daemon says nothing is left (``busy_with`` empty).

    No ETA before a file of this batch has finished (the rate may still be the last batch's), nor
    when ``eta_ok`` is false (status --watch: not yet 3 s of its own samples)."""
    since = f"{ing['done_since_start']} files since start, {ing['failed_since_start']} failed"
    if not ing["total"] and not ing["running"]:
        before = pre_ingest(ing)
        if before:
            return f"ingest: {before}"
        if ing.get("busy_with"):  # files all read; their vectors or the index are still on the way
            return f"ingest: all files read ({since}), not idle yet: {'; '.join(ing['busy_with'])}"
        return f"ingest: idle ({since})"
    eta = ing["eta_s"] if eta_ok and ing["done"] >= 1 else None
    left = ", estimating time left" if eta is None else f", about {_duration(eta)} left"
    more = pre_ingest(ing)
    return (f"ingest: {ing['done']}/{ing['total']} files, {ing['files_per_s']:.1f} files/s, "
            f"{ing['chunks_per_s']:.1f} chunks/s{left}" + (f"; {more}" if more else ""))


def pre_ingest(ing: IngestProgress) -> str:
    """The work that comes before the queue, in words: scans and settling file change events
    (empty when there is none, or the daemon is older than these fields)."""
    parts = []
    for sc in ing.get("scans") or []:
        name, seen = safe(sc["collection"]), sc["files_seen"]
        if sc["state"] == "walking":
            parts.append(f"scanning '{name}' ({seen:,} files seen)")
        elif sc["state"] == "recording":
            parts.append(f"recording the scan of '{name}' ({seen:,} files seen)")
        else:
            parts.append(f"scan of '{name}' about to start")
    n = ing.get("settling") or 0
    if n:
        parts.append(f"{n:,} file change{'s' if n != 1 else ''} settling")
    return "; ".join(parts)


VECTORS_NOTE = " (keyword search finds them already)"


def vectors_line(v: VectorProgress, eta_ok: bool = True, width: int | None = None) -> str:
    """"vectors: 80/120 files, 2300 chunks waiting, 35.0 chunks/s, about 1 min left (keyword search
    finds them already)": the numbers first; the note only when it fits in ``width``."""
    if not v["pending_chunks"]:
        return f"vectors: all {v['files_with_vectors']} files ({v['vectors_since_start']} vectors since start)"
    eta = v["eta_s"] if eta_ok and v["chunks_per_s"] > 0 else None
    left = ", estimating time left" if eta is None else f", about {_duration(eta)} left"
    line = (f"vectors: {v['files_with_vectors']}/{v['files_searchable']} files, {v['pending_chunks']} chunks "
            f"waiting, {v['chunks_per_s']:.1f} chunks/s{left}")
    return line + VECTORS_NOTE if width is None or len(line) + len(VECTORS_NOTE) <= width else line


def _duration(s: float) -> str:
    s = int(round(s))
    if s < 90:
        return f"{s} s"
    if s < 5400:
        return f"{round(s / 60)} min"
    return f"{s // 3600} h {s // 60 % 60:02d} min"
