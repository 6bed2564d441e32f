"""What ragweedctl writes on a terminal: daemon text made safe to print, a hit's place, sources
with their quotes, and the status lines (``status`` and ``status --watch``). Standard library only,
like ragweedctl itself.
"""

from __future__ import annotations

import json
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    import re
    from typing import Protocol, TextIO

    from ragweedd.contract import IngestProgress, VectorProgress

    class Writer(Protocol):
        """Where a command writes: a text stream, or SafeWriter over one."""

        def write(self, text: str, /) -> int: ...

        def flush(self) -> None: ...

        def isatty(self) -> bool: ...


_UNSAFE = None


def _unsafe_re() -> re.Pattern[str]:
    global _UNSAFE
    if _UNSAFE is None:
        import re  # argparse has imported it already

        # C0 and C1 controls (ESC, BEL, CSI, OSC...), DEL, bidi overrides, lone surrogates
        # (undecodable bytes of a file name): what a terminal would act on or cannot print.
        _UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
    return _UNSAFE


def _esc(m: re.Match[str]) -> str:
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

    def __init__(self, out: Writer) -> None:
        self.out = out

    def write(self, text: str) -> int:
        return self.out.write(safe_text(text))

    def flush(self) -> None:
        self.out.flush()

    def isatty(self) -> bool:
        return bool(getattr(self.out, "isatty", lambda: False)())


def place(h: dict) -> str:
    """Where in the file a hit or source is, in words: member, page, sheet or table and rows, time,
    section, lines ("in a.txt, p. 4, § Results, lines 3-9"). Character offsets are for programs (``--json``);
    a place without any of these is the file itself."""
    bits = []
    if h.get("member"):
        bits.append(f"in {safe(h['member'])}")
    if h.get("page_label"):
        bits.append(f"p. {safe(h['page_label'])}")
    if h.get("sheet"):
        bits.append(f"sheet {safe(h['sheet'])}")
    if isinstance(h.get("table"), int):  # "table 2, rows 4-9": the document's second table
        bits.append(f"table {h['table']}")
    if rows_text(h.get("rows")):  # a CSV has rows and no sheet
        bits.append(safe(rows_text(h.get("rows"))))
    if h.get("t_start") is not None:
        bits.append(f"{_mmss(h['t_start'])}-{_mmss(h.get('t_end') or h['t_start'])}")
    if h.get("section"):
        bits.append(f"§ {safe(h['section'])}")
    if h.get("lines") and h.get("t_start") is None:
        bits.append(_lines(h["lines"]))
    return ", ".join(bits)


def _name(h: dict) -> str:
    """collection/path under its root (subfolders kept: two notes.md of one collection differ)."""
    name = (h.get("source_rel_path") or h.get("filename")
            or os.path.basename(str(h.get("source_file") or "")))
    return f"{safe(h.get('collection', '?'))}/{safe(name)}"


def _where(h: dict) -> str:
    """"notes/cats.md  § Cats, lines 1-3": the file, then its place."""
    where = place(h)
    return _name(h) + (f"  {where}" if where else "")


def rows_text(rows: list | None) -> str:
    """A spreadsheet's 1-based rows: "row 4" or "rows 4-9"; "" when the hit has none."""
    if not rows or rows[0] is None:
        return ""
    last = rows[-1] if rows[-1] is not None else rows[0]
    return f"row {rows[0]}" if last == rows[0] else f"rows {rows[0]}-{last}"


def _lines(lines: list) -> str:
    first, last = lines[0], lines[-1]
    return f"line {safe(first)}" if first == last else f"lines {safe(first)}-{safe(last)}"


def _mmss(t: float) -> str:
    t = int(t)
    return f"{t // 3600:d}:{t // 60 % 60:02d}:{t % 60:02d}" if t >= 3600 else f"{t // 60:d}:{t % 60:02d}"


# How well a result matches, in words, from its rel_score: its score placed between the lowest
# (0.0) and the best (1.0) result of the same search (query/merge.py). A label says how a result
# stands among the others found, not whether any of them answers the question.
STRONG, PARTIAL = 0.67, 0.33


def strength(h: dict) -> str | None:
    """"strong" (rel_score >= 0.67), "partial" (>= 0.33) or "weak"; None without a score (a tree-mode
    source, which the LLM chose)."""
    rel = h.get("rel_score")
    if h.get("score") is None or not isinstance(rel, (int, float)):
        return None
    return "strong" if rel >= STRONG else "partial" if rel >= PARTIAL else "weak"


def by_score(items: list[dict]) -> list[dict]:
    """Best first; items without a score keep their order after the scored ones."""
    def key(ih: tuple[int, dict]) -> tuple[int, float, int]:
        i, h = ih
        sc = h.get("score")
        return (0, -sc, i) if isinstance(sc, (int, float)) else (1, 0.0, i)

    return [h for _, h in sorted(enumerate(items), key=key)]


def use_color(out: Writer) -> bool:
    """Bold on a terminal, unless NO_COLOR is set (no-color.org) or the terminal is dumb."""
    return (bool(getattr(out, "isatty", lambda: False)()) and not os.environ.get("NO_COLOR")
            and os.environ.get("TERM") != "dumb")


BOLD, NORMAL = "\x1b[1m", "\x1b[22m"
SNIPPET_CHARS = 300  # a hit without a snippet (an older daemon, an old history entry): its text's start


def marked_snippet(h: dict, color: bool) -> str:
    """The hit's snippet made safe to print, its matched words in bold when ``color``."""
    snippet = h.get("snippet")
    marks = h.get("snippet_marks") or []
    if not isinstance(snippet, str):
        text = " ".join(str(h.get("text", "")).split())
        snippet = text if len(text) <= SNIPPET_CHARS else text[:SNIPPET_CHARS].rsplit(" ", 1)[0] + " …"
        marks = []
    pairs = []
    for m in marks if color and isinstance(marks, list) else []:
        try:
            pairs.append((int(m[0]), int(m[1])))
        except (TypeError, ValueError, IndexError, KeyError):
            continue  # the daemon's marks are not trusted more than its text
    out, at = [], 0
    for start, end in sorted(pairs):
        if not at <= start < end <= len(snippet):
            continue
        out += [safe(snippet[at:start]), BOLD, safe(snippet[start:end]), NORMAL]
        at = end
    out.append(safe(snippet[at:]))
    return "".join(out)


def print_hit_list(hits: list[dict], out: Writer, color: bool) -> None:
    """Search results as people read them, best first: number, strength, file and place, the uri
    that opens the place, the snippet with the query's words in bold (on a terminal)."""
    if not hits:
        out.write("no results\n")
        return
    # the snippet is made safe piece by piece; written past SafeWriter, which would escape the bold
    raw = out.out if isinstance(out, SafeWriter) else out
    for n, h in enumerate(by_score(hits), 1):
        label = strength(h)
        out.write(f"[{n}] " + (f"{label:<8s}" if label else "") + f"{_where(h)}\n")
        if h.get("uri"):
            out.write(f"    {safe(h['uri'])}\n")
        out.flush()
        raw.write(f"    {marked_snippet(h, color)}\n")


def _print_sources(sources: list[dict], out: Writer) -> None:
    """An answer's numbered sources, best first (each keeps the [N] the answer cites it by), with
    how well each matched, the uri that opens its place and the sentences quoted from it."""
    if not sources:
        return
    out.write("\nSources:\n")
    numbered = [{**h, "n": h.get("n") or i} for i, h in enumerate(sources, 1)]
    for h in by_score(numbered):
        print_source(h, out)


def print_source(h: dict, out: Writer) -> None:
    """``[N] strong  notes/cats.md  § Cats, lines 1-3``, its uri, then its quotes."""
    label = strength(h)
    out.write(f"[{safe(h.get('n'))}] " + (f"{label:<8s}" if label else "") + f"{_where(h)}\n")
    # the uri opens the cited place (page, lines, time, member), where the path opens only the file
    if h.get("uri") or h.get("source_file"):
        out.write(f"    {safe(h.get('uri') or h['source_file'])}\n")
    print_quotes(h, out)


QUOTE_CHARS = 300  # of one quote on a terminal; --json has it whole


def print_quotes(source: dict, out: Writer) -> None:
    """The sentences an answer quotes from a source, each with the uri that opens it (``#L14``,
    ``#page=4``), under the source they come from."""
    for q in source.get("quotes") or ([source["quote"]] if source.get("quote") else []):
        text = " ".join(str(q.get("text", "")).split())
        if len(text) > QUOTE_CHARS:
            text = text[:QUOTE_CHARS].rsplit(" ", 1)[0] + " …"
        out.write(f"    > {safe(text)}\n")
        if q.get("uri"):
            out.write(f"      {safe(q['uri'])}\n")


def _print_json(data: object, out: Writer) -> None:
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


def say_rewrite(rw: dict | None, err: TextIO | None = None) -> None:
    """On stderr, before the answer: the query a follow-up was searched as, never hidden."""
    err = err or sys.stderr
    if not isinstance(rw, dict) or rw.get("method") == "none":
        return
    if rw.get("rewritten"):
        how = f"rewritten by {rw['llm']['provider']}" if rw.get("llm") else \
            "carried from the earlier turns: " + ", ".join(safe(w) for w in rw.get("carried") or [])
        err.write(f"searched for: {safe(rw.get('query'))}  ({how})\n")
    elif rw.get("llm", {}).get("error"):
        err.write(f"note: {safe(rw.get('reason'))}\n")
    if rw.get("filters_carried"):
        shown = ", ".join(f"{k} {safe(v)}" for k, v in (rw.get("filters") or {}).items())
        err.write(f"filters of the earlier turn: {shown}\n")


def say_turn(done: dict, err: TextIO | None = None) -> None:
    """On stderr, after the answer: which conversation and turn it is, and how to follow it up."""
    err = err or sys.stderr
    if done.get("conversation_id"):
        err.write(f"conversation {safe(done['conversation_id'])}, turn {safe(done.get('turn'))} "
                  f"(follow up with: ragweedctl ask -f QUESTION)\n")


def print_tree(rec: dict, out: Writer) -> None:
    """What a tree-mode answer read: the documents chosen, the sections opened with their pages, or
    why it fell back to ordinary retrieval. Shared by ``ragweedd ask`` and ``ragweedctl ask``."""
    tree = rec.get("tree")
    if not tree:
        return
    if tree.get("fallback"):
        fb = tree["fallback"]
        out.write(f"\nTree mode fell back to ordinary retrieval at the {fb.get('stage')} step: "
                  f"{safe(clip(fb.get('reason', '')))}\n")
        return
    docs = ", ".join(safe(d.get("title") or d.get("source_file") or "") for d in tree.get("documents") or [])
    out.write(f"\nTree mode: {len(tree.get('documents') or [])} of {tree.get('candidates', '?')} documents "
              f"chosen ({docs}); sections opened:\n")
    for s in tree.get("sections") or []:
        pages = s.get("pages")
        where = "" if not pages else f"  (p. {pages[0]})" if pages[0] == pages[1] else f"  (pp. {pages[0]}-{pages[1]})"
        cut = s.get("chunks_left_out") or 0
        read = "" if not cut else f"; read {s.get('chunks_read')} of {s.get('chunks')} chunks, the rest did not fit"
        out.write(f"  {s.get('id')} {safe(' > '.join(s.get('path') or [s.get('title', '')]))}{where}{read}\n")


CLAIM_CHARS = 160


def clip(text: str, n: int = CLAIM_CHARS) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[:n].rsplit(" ", 1)[0] + " …"


def print_citation_checks(rec: dict, out: Writer) -> None:
    """The verdict of the citation check (ragweedd/answer/verify.py): a count, then every claim
    whose cited source does not hold it, marked UNSUPPORTED, with what the source lacks and the
    source's closest sentence. Shared by ``ragweedd ask`` and ``ragweedctl ask``."""
    summary = rec.get("citations_verified")
    checks = rec.get("citation_checks") or []
    if not summary or not checks:
        return
    bad = [c for c in checks if not c.get("supported")]
    how = "terms and an entailment model" if summary.get("method") == "terms+llm" else "terms"
    out.write(f"\nCitation check ({how}): {len(checks) - len(bad)} of {len(checks)} citations supported"
              + ("." if not bad else f", {len(bad)} UNSUPPORTED:") + "\n")
    for c in bad:
        out.write(f"  UNSUPPORTED [{c.get('n')}] {safe(clip(c.get('claim', '')))}\n")
        why = [m for m in c.get("missing") or []][:8]
        if why:
            out.write(f"      not in source {c.get('n')}: {safe(', '.join(why))}\n")
        elif c.get("no_source"):
            out.write(f"      there is no source {c.get('n')}: the answer cites a number it was not given\n")
        elif c.get("entailed") is False:
            out.write(f"      the entailment model says source {c.get('n')} does not support it\n")
        best = c.get("source_sentence") or {}
        if best.get("text"):  # its character offsets are in --json
            out.write(f"      closest in [{c.get('n')}]: {safe(clip(best['text']))}\n")
    err = (summary.get("entailment") or {}).get("error")
    if err:
        out.write(f"(the entailment check failed, terms only: {safe(clip(err, 200))})\n")
