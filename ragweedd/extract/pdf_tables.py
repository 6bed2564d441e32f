"""Tables on a PDF page, found from the boxes of its words: the rows a statement's figures sit on,
the column each figure belongs to, the header rows above them, and the title above those.

A PDF has no table markup: a filing's statement is lines of text placed so that they look like a
table, and pdfium's text gives each row as one line ("Net income ...... $ 629,551 $ 268,395") with
the column headers elsewhere, often one text object a cell ("November 27," and "2015" on lines of
their own, in any order). Read flat, a row's figures lose the years they belong to. Here:

- **A figure row** is a line that ends in figures (numbers, "—" for none, with "$", "%" and
  brackets joined to them), set apart from the row's label by a column gap: dot leaders, a tab
  (lines pdfium split that pdf_layout joined) or a space wider than a word space, measured on the
  characters' boxes. Prose ending in a number ("... rose to 1,234") has a word space there and is
  not one. Years are labels, not figures ("2025 ..... 1,200" is a maturity schedule's row).
- **A table** is a run of figure rows that follow one another down the page, with at most a few
  label lines between them ("Cash flows from operating activities:"; a label that wrapped joins
  its row); at least two rows, and not a contents page (one column of page numbers).
- **Columns** are the right edges of the figures (figures are right-aligned), clustered.
- **Header rows** are the lines just above the first row that sit over the columns or hold a year,
  a period or a units note, grouped by baseline; each phrase goes to the column(s) it lies over,
  and a header line with one phrase only spans the table ("Years Ended" over the middle column of
  three). Label lines between the headers and the first row belong to the body.
- **The title** is up to three short lines above the headers (statement name, company, period,
  "(In thousands)"), kept with the table.

Every table becomes a ``tables.RawTable``; the caller lays it out into header-carrying rows
(tables.lay_out) in place of the lines it was read from. Text that is not found to be a table is
left as it is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from ragweedd.extract.tables import UNITS, Cell, RawTable, title_like

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ragweedd.extract.pdf_layout import Line

MAX_LABEL_GAP_LINES = 3  # label-only lines between two figure rows of one table
MAX_HEADER_LINES = 10
MAX_TITLE_LINES = 3
MAX_LABEL_WORDS = 16
MAX_PARENT_WORDS = 6
MAX_CHILD_WORDS = 2
ROW_GAP = 3.0  # line heights between two rows of one table, at most
HEADER_REACH = 7.0  # line heights above the first row where header lines may be
WORD_GAP = 0.6  # as in pdf_layout: a gap under this many line heights is a word space

_FIG = re.compile(r"^[(\[]?[-−–]?[$€£]?\(?\d[\d,]*(?:\.\d+)?\)?%?\)?\*?$")
_DASH = re.compile(r"^\(?[$€£]?[—–-]{1,2}\)?%?$")
_NIL = re.compile(r"^(?:n/?a|nm|n/?m|nmf|\*+)$", re.I)  # "*": not meaningful
_YEARISH = re.compile(r"^(?:fy|q[1-4])?'?(?:19|20)\d\d[a-z]?,?$", re.I)
_SIGN_BEFORE = {"$", "€", "£", "US$", "($", "(", "$("}
_SIGN_AFTER = {"%", ")", ")%", "%)", "pts", "bps", "x"}
# "($ million)", "(in $000)", "US$m": a units note in a table's corner
_UNITS_NOTE = re.compile(r"^\(?(?:in\s+)?(?:[$€£]|us\$|usd|eur)\s*"
                         r"(?:m|mn|bn|k|000s?|millions?|billions?|thousands?)\)?$", re.I)
_MARK = re.compile(r"^\(?\d\)?$|^\*+$")  # a footnote mark: "1", "(2)", "*"
# a label line ending so goes on in the next line ("NET INCOME ATTRIBUTABLE TO SHAREOWNERS OF")
_DANGLING = re.compile(r"(?:\b(?:and|or|of|the|to|for|in|from|by|on|with|at|as|net|less)|[,(\-–—])$", re.I)
_GLUED_SIGN = re.compile(r"^(.*[\d)%])[$€£]$")
_TOKEN = re.compile(r"[^\s]+|\t")
_DIGIT_OR_DASH = re.compile(r"[\d—–]")
_LEADER_RUN = re.compile(r"(?:[.·][ \t]?){4,}|_{4,}")
_PERIOD = re.compile(r"\b(?:19|20)\d\d\b|\b(?:months|weeks|years?|quarters?|fiscal|ended|ending|as of|"
                     r"january|february|march|april|may|june|july|august|september|october|november|december|"
                     r"jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec|q[1-4]|change|successor|predecessor|"
                     r"actual|budget|total|amount|percent|%)\b", re.I)


class Word:
    """A word and its left and right edges, read from the character boxes when first asked for
    (most lines are never asked: only a row's last words and its figures are measured)."""

    __slots__ = ("text", "_left", "_right", "_box", "_a", "_b")

    def __init__(self, text: str, left: float | None = None, right: float | None = None,
                 box: Callable[[int], tuple[float, float]] | None = None, a: int = 0, b: int = 0) -> None:
        self.text = text
        self._left, self._right, self._box, self._a, self._b = left, right, box, a, b

    @property
    def left(self) -> float:
        if self._left is None:
            self._left = self._box(self._a)[0] if self._box else 0.0
        return self._left

    @property
    def right(self) -> float:
        if self._right is None:
            self._right = self._box(self._b)[1] if self._box else 0.0
        return self._right

    def digits_right(self) -> float:
        """The right edge of the word's last digit: where a right-aligned column of figures lines
        up, whatever bracket or "%" hangs after it."""
        k = max((i for i, c in enumerate(self.text) if c.isdigit()), default=-1)
        if self._box is None or k < 0 or self._a + k >= self._b:
            return self.right
        return self._box(self._a + k)[1]

# The link back to the contents many filings print at the top of every page: it is the first line
# above a table at a page's top, and no part of the table's title.
_RUNNING_LINK = re.compile(r"^\s*(?:back to )?table of contents\b[\s.:|-]*", re.I)

@dataclass
class FigureRow:
    label: list[Word]  # the words before the figures
    cells: list[Word]  # the figures, signs joined
    anchors: list[float]  # where each figure's digits end


@dataclass
class PageTable:
    first: int  # index of the table's first line (its title, else its first header line)
    last: int  # index of its last line
    table: RawTable


def _is_figure(t: str) -> bool:
    return bool((_FIG.match(t) and not _YEARISH.match(t)) or _DASH.match(t) or _NIL.match(t)
                or t in _SIGN_BEFORE or t in _SIGN_AFTER)


def _is_number(t: str) -> bool:
    return bool(_FIG.match(t)) and not _YEARISH.match(t) and any(c.isdigit() for c in t)


def words_of(text: str, box: Callable[[int], tuple[float, float]]) -> tuple[list[Word], list[int]]:
    """The words of a line with their left and right edges (``box(offset)`` gives a character's),
    leader runs cut out; and the indices (into the words) after which a leader run or a tab was."""
    out: list[Word] = []
    breaks: list[int] = []
    cut = _LEADER_RUN.sub(lambda m: "\t" + " " * (len(m.group()) - 1), text) if (
        "...." in text or ". . ." in text or "____" in text or "····" in text) else text
    for m in _TOKEN.finditer(cut):
        if m.group() == "\t":
            if out and (not breaks or breaks[-1] != len(out) - 1):
                breaks.append(len(out) - 1)
            continue
        t, a = m.group(), m.start()
        glued = _GLUED_SIGN.match(t)
        if glued:  # "(52.8)$": the next cell's "$" with no space before it
            out.append(Word(glued.group(1), box=box, a=a, b=a + len(glued.group(1)) - 1))
            t, a = t[len(glued.group(1)):], a + len(glued.group(1))
        out.append(Word(t, box=box, a=a, b=a + len(t) - 1))
    return out, breaks


def baseline_pieces(part: str, pos: int,
                    loose: Callable[[int], tuple[float, float, float, float]]) -> list[tuple[str, int]]:
    """A line of pdfium's text cut where its characters drop to a lower line (or jump up to
    another column): some producers set a table's rows, or a paragraph, in one text object that
    pdfium gives without line breaks ("... beyond 12.6 Do not expire 163.5"). Only a line whose
    first and last characters are on different baselines is measured character by character; a
    raised footnote mark does not cut it. Returns (text, its offset in the page) pieces."""
    first = len(part) - len(part.lstrip())
    last = len(part.rstrip()) - 1
    if last <= first:
        return [(part, pos)]
    _, _, b0, t0 = loose(pos + first)
    _, _, b1, _ = loose(pos + last)
    h = t0 - b0
    if h <= 0 or abs(b0 - b1) <= 0.5 * h:
        return [(part, pos)]
    out = []
    start = 0
    base = b0
    for j in range(first + 1, last + 1):
        if part[j].isspace():
            continue
        b = loose(pos + j)[2]
        if base - b > 0.9 * h or b - base > 1.5 * h:
            out.append((part[start:j], pos + start))
            start, base = j, b
    out.append((part[start:], pos + start))
    return out


def word_reader(lines: Sequence[Line], loose: Callable[[int], tuple[float, float, float, float]]) -> Callable[[int],
                tuple[list[Word], list[int]]]:
    """``words_for(i)`` for find_tables: line i's words (pdf_layout.Line, whose ``segs`` map its
    text to pdfium's character indices), their boxes read with ``loose``, once."""
    cache: dict[int, tuple[list[Word], list[int]]] = {}

    def words_for(i: int) -> tuple[list[Word], list[int]]:
        if i not in cache:
            ln = lines[i]

            def box(off: int) -> tuple[float, float]:
                seg = ln.segs[0]
                for s in ln.segs:
                    if s[0] <= off:
                        seg = s
                b = loose(seg[1] + off - seg[0])
                return b[0], b[1]

            cache[i] = words_of(ln.text, box)
        return cache[i]

    return words_for


def figure_row(words: list[Word], breaks: list[int], height: float) -> FigureRow | None:
    """The line as a table row, when it ends in figures set apart from its label."""
    k = len(words)
    while k > 0 and _is_figure(words[k - 1].text):
        k -= 1
    # the label ends at a column gap; a footnote mark set against the label ("operations 1 $ 0.28")
    # is the label's, and so the gap may come after the first few figure-like words
    while 0 < k < len(words):
        if (k - 1) in breaks or words[k].left - words[k - 1].right >= WORD_GAP * height:
            break
        if not _MARK.match(words[k].text):
            return None
        k += 1
    figs = words[k:]
    if not any(_is_number(w.text) or _DASH.match(w.text) for w in figs):
        return None
    cells: list[Word] = []
    anchors: list[float] = []
    carry: Word | None = None
    for w in figs:
        if w.text in _SIGN_BEFORE:
            carry = Word(carry.text + w.text, carry.left, w.right) if carry else w
            continue
        if w.text in _SIGN_AFTER and cells and carry is None:
            last = cells[-1]
            cells[-1] = Word(last.text + w.text, last.left, w.right)
            continue
        anchors.append(w.digits_right())
        if carry is not None:
            w = Word(carry.text + w.text, carry.left, w.right)
            carry = None
        cells.append(w)
    if not cells:
        return None
    return FigureRow(words[:k], cells, anchors)


@dataclass
class _Col:
    left: float
    right: float
    anchor: float  # where its figures' digits end, on average


def _columns(rows: list[FigureRow], tol: float) -> list[_Col]:
    """Columns from where the figures' digits end, clustered."""
    cells = sorted(((x, c) for r in rows for x, c in zip(r.anchors, r.cells)), key=lambda xc: xc[0])
    cols: list[list[tuple[float, Word]]] = []
    for x, c in cells:
        if cols and x - cols[-1][-1][0] <= tol:
            cols[-1].append((x, c))
        else:
            cols.append([(x, c)])
    # a column of nothing but a few footnote marks ("BASIC NET INCOME PER SHARE $ 0.29 3 ...") is none
    cols = [g for g in cols if not (all(_MARK.match(c.text) for _, c in g) and 2 * len(g) < len(rows))]
    return [_Col(min(c.left for _, c in g), max(c.right for _, c in g), sum(x for x, _ in g) / len(g)) for g in cols]


def _col_of(anchor: float, cols: list[_Col]) -> int:
    return min(range(len(cols)), key=lambda k: abs(cols[k].anchor - anchor))


def _slots(cols: list[_Col], labels_end: float | None) -> list[tuple[float, float]]:
    """The x-range each column owns: halfway to its neighbours; the first one from where the
    row labels end (a header is often wider than its figures, and right-aligned with them)."""
    out = []
    for k, c in enumerate(cols):
        if k:
            a = (cols[k - 1].right + c.left) / 2
        else:
            a = c.left - ((cols[1].left - c.right) / 2 if len(cols) > 1 else c.right - c.left)
            if labels_end is not None:
                a = min(a, max(labels_end, c.left - 3 * (c.right - c.left + 10)))
        b = (c.right + cols[k + 1].left) / 2 if k + 1 < len(cols) else float("inf")
        out.append((a, b))
    return out


def _toc_like(rows: list[FigureRow], cols: list[_Col]) -> bool:
    """One column of small whole numbers: a contents page's page numbers, not a table's figures."""
    values = [c.text for r in rows for c in r.cells]
    return len(cols) == 1 and all(v.isdigit() and len(v) <= 3 for v in values)


def _label_text(words: list[Word]) -> str:
    # what a leader run leaves of its dots when it is too short to be cut out ("securities..")
    return re.sub(r"(?:\s*\.){2,}$", "", " ".join(w.text for w in words)).strip()


def find_tables(lines: Sequence[Line], words_for: Callable[[int], tuple[list[Word], list[int]]]) -> list[PageTable]:
    """The tables among a page's lines (pdf_layout.Line, in reading order); ``words_for(i)``
    gives line i's words with their boxes and column breaks."""
    n = len(lines)
    rows: list[FigureRow | None] = [None] * n
    for i, ln in enumerate(lines):
        if ln.height > 0 and _DIGIT_OR_DASH.search(ln.text[-12:]):
            w, br = words_for(i)
            rows[i] = figure_row(w, br, ln.height)
    out: list[PageTable] = []
    i = 0
    used_to = -1
    while i < n:
        if rows[i] is None:
            i += 1
            continue
        body = [i]
        last = i
        j = i + 1
        pending: list[int] = []
        while j < n:
            ln = lines[j]
            prev = lines[pending[-1] if pending else last]
            # below the line before, or on its row (a footnote mark pdfium left on a line of its own)
            flows = ln.top <= prev.top + 0.5 * ln.height and prev.bottom - ln.top < ROW_GAP * max(ln.height, 1)
            if not flows:
                break
            if rows[j] is not None:
                body.extend(pending)
                body.append(j)
                last = j
                pending = []
            elif _label_line(ln.text) and len(pending) < MAX_LABEL_GAP_LINES:
                pending.append(j)
            else:
                break
            j += 1
        figs = [rows[k] for k in body if rows[k] is not None]
        height = sorted(lines[k].height for k in body)[len(body) // 2]
        cols = _columns([r for r in figs if r is not None], 0.9 * height)
        if (cols and len(figs) >= 2 and any(_is_number(c.text) for r in figs if r is not None for c in r.cells)
                and not _toc_like([r for r in figs if r is not None], cols)):
            table = _build(lines, rows, body, cols, height, words_for, used_to)
            if table is not None:
                out.append(table)
                used_to = table.last
        i = last + 1
    return out


def _label_line(text: str) -> bool:
    t = _LEADER_RUN.sub(" ", " ".join(text.split())).strip()
    return bool(t) and len(t.split()) <= MAX_LABEL_WORDS and not t.endswith((".", ";"))


def _build(lines: Sequence[Line], rows: list[FigureRow | None], body: list[int], cols: list[_Col], height: float,  # noqa: C901 - a table's parts in reading order: title, header rows, notes, body rows
           words_for: Callable[[int], tuple[list[Word], list[int]]], floor: int) -> PageTable | None:
    first = body[0]
    top = lines[first]
    cols_left = cols[0].left
    # label lines directly above the first row ("Operating Activities"), then the header lines
    k = first - 1
    lead: list[int] = []
    while k > floor and len(lead) < 2 and _label_line(lines[k].text) and lines[k].right < cols_left \
            and not UNITS.search(lines[k].text) \
            and lines[k].bottom >= top.bottom and lines[k].bottom - top.top < ROW_GAP * height:
        lead.insert(0, k)
        k -= 1
    header: list[int] = []
    reach = (lines[lead[0]] if lead else top).top + HEADER_REACH * height
    while k > floor and len(header) < MAX_HEADER_LINES:
        ln = lines[k]
        t = " ".join(ln.text.split())
        if rows[k] is not None or not t or ln.bottom > reach or ln.bottom < top.bottom or t.endswith(".") \
                or len(t.split()) > MAX_LABEL_WORDS:
            break
        over = ln.left >= cols_left - 2 * height
        units = bool(UNITS.search(t)) and len(t.split()) <= 8
        years = sum(1 for w in t.split() if _YEARISH.match(w)) >= 2 and ln.right > cols_left
        if not (over or units or years):
            break
        header.insert(0, k)
        k -= 1
    if not header and lead:
        k += len(lead)  # no headers: the lines above were the title, not the body's labels
        lead = []
    title: list[int] = []
    above = lines[header[0]] if header else lines[(lead or [first])[0]]
    while k > floor and len(title) < MAX_TITLE_LINES:
        ln = lines[k]
        t = " ".join(ln.text.split())
        prev = lines[title[0]] if title else above
        if rows[k] is not None or not title_like(t) or ln.bottom < prev.top - 0.5 * height \
                or ln.bottom - prev.top > ROW_GAP * max(ln.height, height) or any(c.isdigit() for c in t[:1]):
            break
        title.insert(0, k)
        k -= 1
    ends = [r.label[-1].right for k2 in body if (r := rows[k2]) is not None and r.label]
    slots = _slots(cols, max(ends) + 1 if ends else None)
    width = len(cols)
    table_rows: list[list[Cell]] = []
    notes: list[str] = []
    hrows = _header_rows([lines[h] for h in header], [words_for(h)[0] for h in header], height)
    for n_row, hrow in enumerate(hrows):
        middle = (cols[0].left + cols[-1].right) / 2
        reach = (cols[-1].right - cols[0].left) / (2 * width)
        cells = _header_cells(hrow, cols, slots, width, (middle, reach), group=n_row < len(hrows) - 1)
        if cells[0].text and not any(c.text for c in cells[1:]):
            notes.append(cells[0].text)  # a line of its own over the columns: the units, the title's
        else:
            table_rows.append(cells)
    head_rows = len(table_rows)
    pending = ""  # a label line not yet given a row: its row may be the next line (a wrapped label)
    parent = ""  # a short label line ending in ":" over rows of one or two words

    def flush() -> None:
        if pending:
            table_rows.append([Cell(pending)] + [Cell("") for _ in cols])

    for label_line, own, placed in _visual_rows(lines, rows, lead + body):
        if label_line and sum(1 for w in own.split() if _YEARISH.match(w)) >= 2:
            continue  # the column headers again, over the table's next part
        if label_line:
            if pending and not pending.endswith(":") and (own[:1].islower() or _DANGLING.search(pending)):
                pending = f"{pending} {own}"
            else:
                flush()
                pending = own
            continue
        if pending and not pending.endswith(":") and (not own or own[:1].islower() or _DANGLING.search(pending)):
            own = f"{pending} {own}".strip()
        else:
            if pending.endswith(":") and len(pending.split()) <= MAX_PARENT_WORDS:
                parent = pending
            elif pending:
                parent = ""
            flush()
        pending = ""
        if parent and own and len(own.split()) <= MAX_CHILD_WORDS:
            own = f"{parent} {own}"  # "Net income per share: Diluted", not a bare "Diluted"
        elif len(own.split()) > MAX_CHILD_WORDS:
            parent = ""
        vals = [""] * width
        for a, c in placed:
            x = _col_of(a, cols)
            if _MARK.match(c.text) and abs(cols[x].anchor - a) > height:
                continue  # a footnote mark off the columns
            vals[x] = f"{vals[x]} {c.text}".strip()
        table_rows.append([Cell(own)] + [Cell(v) for v in vals])
    flush()
    before = _RUNNING_LINK.sub("", " ".join([" ".join(lines[t].text.split()) for t in title] + notes))
    start = (title or header or lead or body)[0]
    return PageTable(start, body[-1], RawTable(table_rows, before=before, head_rows=head_rows))


def _same_row(a: Line, b: Line) -> bool:
    """Line ``b`` (after ``a``) sits on ``a``'s row: their extents overlap by half the smaller
    height, or ``b`` is a smaller mark raised inside ``a``'s extent."""
    ha, hb = a.height, b.height
    if ha <= 0 or hb <= 0:
        return False
    overlap = min(a.top, b.top) - max(a.bottom, b.bottom)
    return overlap >= 0.5 * min(ha, hb) or (hb < 0.8 * ha and a.bottom <= b.bottom < a.top)


def _visual_rows(lines: Sequence[Line], rows: list[FigureRow | None],
                 order: list[int]) -> list[tuple[bool, str, list[tuple[float, Word]]]]:
    """The body's lines as the rows the reader sees: lines on one row (a label, a footnote mark,
    the figures, split by pdfium) are one. Each: (label only, label, [(anchor, figure)])."""
    groups: list[list[int]] = []
    for k in order:
        if groups and _same_row(lines[groups[-1][0]], lines[k]):
            groups[-1].append(k)
        else:
            groups.append([k])
    out = []
    for g in groups:
        label: list[str] = []
        cells: list[tuple[float, Word]] = []
        for k in g:
            r = rows[k]
            if r is None or (k != g[0] and lines[k].height < 0.8 * lines[g[0]].height):
                # a label line, or a footnote mark in smaller type
                text = _LEADER_RUN.sub(" ", " ".join(lines[k].text.split()))
                label.append(re.sub(r"(?:\s*\.){2,}$", "", text).strip())
            else:
                label.append(_label_text(r.label))
                cells.extend(zip(r.anchors, r.cells))
        out.append((not cells, " ".join(t for t in label if t), cells))
    return out


def _header_rows(lines: Sequence[Line], words: list[list[Word]], height: float) -> list[list[Word]]:
    """Header words grouped by baseline, top to bottom, each row's words left to right, the words
    of one phrase joined."""
    items = [(ln.bottom, w) for ln, ws in zip(lines, words) for w in ws]
    items.sort(key=lambda x: -x[0])
    groups: list[tuple[float, list[Word]]] = []
    for y, w in items:
        if groups and abs(groups[-1][0] - y) <= 0.5 * height:
            groups[-1][1].append(w)
        else:
            groups.append((y, [w]))
    out = []
    for _, ws in groups:
        ws.sort(key=lambda w: w.left)
        phrases: list[Word] = []
        for w in ws:
            # a year starts and ends a phrase: "June 30, 2022 June 30, 2023" heads two columns
            if (phrases and w.left - phrases[-1].right < WORD_GAP * height and not _YEARISH.match(w.text)
                    and not _YEARISH.match(phrases[-1].text.rsplit(" ", 1)[-1])):
                p = phrases[-1]
                phrases[-1] = Word(f"{p.text} {w.text}", p.left, w.right)
            else:
                phrases.append(w)
        out.append(phrases)
    return out


def _columns_under(p: Word, cols: list[_Col], labels_end: float) -> list[int]:
    """The columns a header phrase heads: those whose figures' middle it covers when it covers
    two or more, else the one it overlaps most; a phrase between columns heads the one to its
    right (figures are right-aligned, and so are their headers); one in the labels' room, none."""
    covered = [k for k, c in enumerate(cols) if p.left <= (c.left + c.right) / 2 <= p.right]
    if len(covered) >= 2:
        return covered
    over = [(min(p.right, c.right) - max(p.left, c.left), k) for k, c in enumerate(cols)]
    best = max(over)
    if best[0] > 0:
        return [best[1]]
    if p.left < labels_end:
        return []
    return [k for k, c in enumerate(cols) if c.left >= p.right][:1]


def _header_cells(phrases: list[Word], cols: list[_Col], slots: list[tuple[float, float]], width: int,
                  centred: tuple[float, float] | None = None, group: bool = False) -> list[Cell]:
    """One header line's cells: the corner (phrases in the labels' room) and a cell for each
    phrase over the column(s) it heads. ``group``: a line above the last header line, whose
    phrases ("Pension", "Other Postretirement Benefits") each head the columns nearer to them."""
    corner: list[str] = []
    spans: list[tuple[int, int, str]] = []
    middles: list[tuple[float, float]] = []  # each span's left and right edges
    for p in phrases:
        hit = _columns_under(p, cols, slots[0][0])
        if not hit or UNITS.search(p.text) or (_UNITS_NOTE.match(p.text) and not spans):
            corner.append(p.text)
        elif spans and spans[-1][1] >= hit[0]:
            a, b, t = spans[-1]
            spans[-1] = (a, max(b, hit[-1]), f"{t} {p.text}")
            middles[-1] = (middles[-1][0], p.right)
        else:
            spans.append((hit[0], hit[-1], p.text))
            middles.append((p.left, p.right))
    if group and 2 <= len(spans) < width and not any(_YEARISH.match(t.split()[-1]) for _, _, t in spans):
        centres = [(a + b) / 2 for a, b in middles]
        owner = [min(range(len(spans)), key=lambda i: abs(centres[i] - (c.left + c.right) / 2)) for c in cols]
        if owner == sorted(owner):  # contiguous groups, in order
            spans = [(owner.index(i), width - 1 - owner[::-1].index(i), t) for i, (_, _, t) in enumerate(spans)
                     if i in owner]
    if len(spans) == 1 and width > 1 and not _YEARISH.match(spans[0][2]) and centred is not None:
        # one phrase centred over a table's columns heads them all ("Years Ended" over the middle
        # one of three); off centre it heads the columns it lies over
        one = next((p for p in phrases if p.text.endswith(spans[0][2].split()[-1])), None)
        middle, reach = centred
        if one is not None and abs((one.left + one.right) / 2 - middle) <= reach:
            spans = [(0, width - 1, spans[0][2])]
    cells = [Cell(" ".join(corner), header=True)]
    at = 0
    for a, b, t in spans:
        while at < a:
            cells.append(Cell("", header=True))
            at += 1
        cells.append(Cell(t, colspan=b - a + 1, header=True))
        at = b + 1
    while at < width:
        cells.append(Cell("", header=True))
        at += 1
    return cells
