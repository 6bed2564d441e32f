"""Tables as rows that say what they hold: the shape every table extractor hands on.

A table read from any format (HTML ``<table>``, a docx ``w:tbl`` through mammoth's HTML, an odt
``table:table``; a PDF table finder can fill the same ``RawTable``) is laid out on a grid (merged
cells, colspan/rowspan, fill every slot they cover), its header rows and row-label column are found,
and each body row becomes one line that carries its label and, for each cell, the column header it
sits under::

    Net cash provided by operating activities | Year ended December 31 2015: 1,469.5 | ... 2014: 1,287.5

so a row stays readable, and findable, in whatever chunk it lands. The table's title (its caption,
a title row spanning the table, the short paragraph or heading just before it) and its units ("in
millions", a units note in the corner cell) become ``title``. ``lines`` keeps the source row
number (1-based, header rows counted) of each line, which the chunker turns into "rows a-b".

A "table" of one row or one column is page layout, not data: its cells come out one a line, as
plain text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ragweedd.errors import ExtractionError
from ragweedd.extract.base import Region
from ragweedd.extract.text_builder import TextBuilder

MAX_COLSPAN = 1000  # what browsers clamp colspan to; a bigger span is a broken file
# Slots a table's grid may fill (rows x columns, spans counted): past it (a hostile file's 10,000
# rows of colspan=1000) the cells are read as plain lines, in order, instead of laid out.
MAX_SLOTS = 4_000_000
MAX_HEADER_ROWS = 4
TITLE_MAX_CHARS = 200
TITLE_MAX_WORDS = 24
ROW_SEP = " | "
# Where a table stands in a text laid out before its tables are (office.py): a private-use
# character no document's visible text is made of, then the table's index.
TABLE_MARK = "\ue000table"

_NUMBER = re.compile(r"^[(\[]?[-−–+]?\s*[$€£¥]?\s*[(]?[-−–+]?\d[\d,.\s]*\)?\s*(%|x|bps|pts)?\)?\*?$", re.I)
_YEAR = re.compile(r"^(?:(?:fy|fiscal|year|cy)\s*)?'?(?:19|20)\d\d[a-z]?$", re.I)
UNITS = re.compile(r"\b(?:in|\$|usd|eur|€|£)\s*(?:thousands|millions|billions|000s?)\b|\(\s*(?:\$|€|£)?\s*000s?\s*\)"
                   r"|\(\s*(?:in\s+)?(?:us\$|\$|€|£|usd|eur)\s*(?:millions?|billions?|thousands?|m|mn|bn|k)\s*\)"
                   r"|\b(?:thousands|millions|billions) of (?:dollars|euros|pounds|shares|units)\b", re.I)
_SIGNS_BEFORE = {"$", "€", "£", "¥", "US$", "C$", "A$"}
_SIGNS_AFTER = {")", "%", ")%", "%)", "pts", "bps", "x"}


@dataclass
class Cell:
    text: str
    colspan: int = 1
    rowspan: int = 1  # 0: to the end of the table (HTML's rowspan="0")
    header: bool = False  # <th>, a docx header row, an odt table:table-header-rows row


@dataclass
class RawTable:
    rows: list[list[Cell]]
    caption: str = ""  # an explicit caption (<caption>)
    before: str = ""  # the paragraph or heading just before the table, a title when it reads as one
    head_rows: int = 0  # leading rows the markup marks as header rows (thead, tblHeader)


@dataclass
class LaidOut:
    title: str = ""  # the whole title: caption or paragraph before, title rows, units
    title_line: str = ""  # the part of the title the document's text does not already hold
    before: str = ""  # the paragraph before the table, when it is (part of) the title
    lines: list[tuple[int, str]] = field(default_factory=list)  # (source row, line)
    data: bool = True  # False: a layout table, its lines are plain text (row numbers meaningless)


def clean(text: str) -> str:
    return " ".join(text.split())


def is_number(text: str) -> bool:
    return bool(text) and bool(_NUMBER.match(text)) and not _YEAR.match(text)


def _yearish(text: str) -> bool:
    return bool(_YEAR.match(text))


def title_like(text: str) -> bool:
    """A paragraph that may name the table after it: short, not a sentence (a units note or a
    "Table 3: ..." caption may end in a period)."""
    t = clean(text)
    if not t or len(t) > TITLE_MAX_CHARS or len(t.split()) > TITLE_MAX_WORDS:
        return False
    if re.match(r"^(table|exhibit|schedule|figure)\s+[\w.-]+\b", t, re.I) or UNITS.search(t):
        return True
    return not t.endswith((".", "!", "?", ";", ","))


class _TooBig(ExtractionError):
    """A table whose spans would fill more than MAX_SLOTS slots: laid out cell by cell instead."""


def _grid(rows: list[list[Cell]]) -> tuple[list[list[int | None]], list[Cell], list[tuple[int, int]]]:
    """Slots of the table: grid[r][c] is the index (into ``cells``) of the cell covering it, or
    None. ``origin[i]`` is (row, column) of cell i's top-left slot. Raises _TooBig past MAX_SLOTS."""
    n = len(rows)
    # the slots every span would fill, counted before any is filled: a grid past the cap is not built
    slots = sum(max(1, min(c.colspan, MAX_COLSPAN)) * (n - r if c.rowspan <= 0 else min(c.rowspan, n - r))
                for r, row in enumerate(rows) for c in row)
    if slots > MAX_SLOTS:
        raise _TooBig(f"a table of {slots:,} slots, over the {MAX_SLOTS:,} a grid is built for")
    cells: list[Cell] = []
    origin: list[tuple[int, int]] = []
    grid: list[list[int | None]] = [[] for _ in range(n)]
    for r, row in enumerate(rows):
        c = 0
        for cell in row:
            line = grid[r]
            while c < len(line) and line[c] is not None:
                c += 1
            span = max(1, min(cell.colspan, MAX_COLSPAN))
            down = n - r if cell.rowspan <= 0 else min(cell.rowspan, n - r)
            i = len(cells)
            cells.append(cell)
            origin.append((r, c))
            for rr in range(r, r + down):
                g = grid[rr]
                if len(g) < c + span:
                    g.extend([None] * (c + span - len(g)))
                for cc in range(c, c + span):
                    if g[cc] is None:
                        g[cc] = i
            c += span
    width = max((len(g) for g in grid), default=0)
    for g in grid:
        g.extend([None] * (width - len(g)))
    return grid, cells, origin


def _text_at(grid: list[list[int | None]], cells: list[Cell], r: int, c: int) -> str:
    i = grid[r][c]
    return cells[i].text if i is not None else ""


def _headerish(texts: list[str]) -> bool:
    """A row that can be a header: some text, and no figure that is not a year."""
    return any(texts) and not any(is_number(t) for t in texts)


def _header_rows(grid: list[list[int | None]], cells: list[Cell], origin: list[tuple[int, int]], head_rows: int) -> int:
    """How many leading rows are column headers: those the markup marks (thead, th, a docx header
    row), then, as long as they read as headers, rows without figures (years aside) that continue
    the header above (a span reaching into them, a spanning cell above, an empty label cell)."""
    n = len(grid)
    width = len(grid[0]) if grid else 0
    h = min(max(head_rows, 0), n - 1)
    while h < n - 1:
        own = [cells[i] for i in dict.fromkeys(grid[h]) if i is not None and origin[i][0] == h]
        if own and all(c.header or not c.text for c in own) and any(c.header for c in own):
            h += 1
        else:
            break
    marked = h
    body_numbers = any(is_number(_text_at(grid, cells, r, c)) for r in range(1, n) for c in range(width))
    if width < 3 and not body_numbers and not marked:
        return 0  # two columns of text: name/value pairs, no header to tell
    while h < min(n - 1, MAX_HEADER_ROWS):
        texts = [_text_at(grid, cells, h, c) for c in range(width)]
        if not _headerish(texts):
            break
        if h > 0:
            above = [grid[h - 1][c] for c in range(width)]
            spans_down = any(i is not None and i == grid[h][c] for c, i in enumerate(above))
            spans_across = any(cells[i].colspan > 1 for i in above if i is not None)
            if not (spans_down or spans_across or not texts[0]):
                break
        h += 1
    if h > max(marked, 1) and not any(any(is_number(_text_at(grid, cells, r, c)) for c in range(width))
                                      for r in range(h, n)):
        # no figures below: one header row at most (a list of names is not all header)
        h = max(marked, 1)
    return h


def _title_rows(grid: list[list[int | None]], cells: list[Cell], origin: list[tuple[int, int]]) -> int:
    """Leading rows that hold one cell only, starting at the first column and spanning the table,
    or alone in its row above a header-like row: the table's name or units, not column headers."""
    t = 0
    width = len(grid[0]) if grid else 0
    while t < min(len(grid) - 2, 2) and width > 1:
        ids = [i for i in dict.fromkeys(grid[t]) if i is not None and cells[i].text]
        if len(ids) != 1 or origin[ids[0]][1] != 0:
            break
        i = ids[0]
        whole = all(x == i for x in grid[t])
        alone = all(x == i or x is None or not cells[x].text for x in grid[t])
        nxt = [_text_at(grid, cells, t + 1, c) for c in range(width)]
        if not (whole or (alone and _headerish(nxt[1:]) and not is_number(cells[i].text))):
            break
        t += 1
    return t


def _merge_signs(parts: list[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    """Filings set "$", "%" and a closing ")" in cells of their own: join them to their figure."""
    out: list[tuple[int, int, str]] = []
    carry = ""
    for a, b, t in parts:
        if t in _SIGNS_BEFORE:
            carry += t
            continue
        if t in _SIGNS_AFTER and out:
            pa, pb, pt = out[-1]
            out[-1] = (pa, pb, pt + t)
            continue
        out.append((a, b, f"{carry}{t}" if carry else t))
        carry = ""
    if carry:
        out.append((len(out), len(out), carry))
    return out


def lay_out(table: RawTable) -> LaidOut:
    rows = [[Cell(clean(c.text), c.colspan, c.rowspan, c.header) for c in row] for row in table.rows]
    try:
        grid, cells, origin = _grid(rows)
    except _TooBig:
        return LaidOut(lines=[(r + 1, c.text) for r, row in enumerate(rows) for c in row if c.text], data=False)
    width = len(grid[0]) if grid else 0
    if not any(c.text for c in cells):
        return LaidOut(data=False)
    filled_rows = [r for r in range(len(grid)) if any(_text_at(grid, cells, r, c) for c in range(width))]
    filled_cols = [c for c in range(width) if any(_text_at(grid, cells, r, c) for r in range(len(grid)))]
    if len(filled_rows) < 2 or len(filled_cols) < 2:
        seen: set[int] = set()
        plain = []
        for r in range(len(grid)):
            for i in grid[r]:
                if i is not None and i not in seen and cells[i].text:
                    seen.add(i)
                    plain.append((r + 1, cells[i].text))
        return LaidOut(lines=plain, data=False)
    # spacer columns (empty in every row) say nothing and would only split header spans
    grid = [[g[c] for c in filled_cols] for g in grid]
    width = len(filled_cols)
    origin = _origins(grid, len(cells))
    t = _title_rows(grid, cells, origin)
    title_parts = [cells[i].text for r in range(t) for i in dict.fromkeys(grid[r]) if i is not None and cells[i].text]
    sub = grid[t:]
    h = _header_rows(sub, cells, origin_shift(origin, t), table.head_rows - t if table.head_rows > t else 0)
    body = range(t + h, len(grid))
    label_col = _label_column(grid, cells, body)
    headers = _column_headers(grid, cells, range(t, t + h), width)
    corner = headers[0] if label_col and h else ""
    if corner and UNITS.search(corner):
        title_parts.append(corner)
    own_title = " — ".join(dict.fromkeys(p for p in [table.caption, *title_parts] if p))
    before = clean(table.before) if title_like(table.before) and not table.caption else ""
    title = " — ".join(p for p in (before, own_title) if p)
    if before and not UNITS.search(title) and table.before and UNITS.search(table.before):
        title = f"{title} ({UNITS.search(table.before).group(0)})"  # type: ignore[union-attr]
    out = LaidOut(title=title, title_line=own_title, before=before)
    for r in body:
        line = _row_line(grid, cells, r, headers if h else None, label_col)
        if line:
            out.lines.append((r + 1, line))
    if not out.lines and h:
        # a table of headers only: its header rows are all it says
        for r in range(t, t + h):
            line = _row_line(grid, cells, r, None, label_col)
            if line:
                out.lines.append((r + 1, line))
    return out


def _column_headers(grid: list[list[int | None]], cells: list[Cell], rows: range, width: int) -> list[str]:
    """Each column's header: the texts of its header rows, top down, each once."""
    headers: list[str] = []
    for c in range(width):
        parts: list[str] = []
        for r in rows:
            txt = _text_at(grid, cells, r, c)
            if txt and txt not in parts:
                parts.append(txt)
        headers.append(" ".join(parts))
    return headers


@dataclass
class SheetColumns:
    """How the rows of a run of spreadsheet rows read: the first ``body`` rows are the run's title
    and column headers, the rest one line each (``sheet_row_line``)."""

    body: int
    title: str
    headers: list[str] | None
    label_col: bool


def sheet_columns(rows: list[list[str]]) -> SheetColumns:
    """The title rows, header rows and row labels of a run of spreadsheet rows, judged from its
    first rows (a sheet can hold a million rows; its headers are at its top). A sheet has no
    merge markup a streaming reader sees, so a header cell followed by empty cells heads them as
    the sheet shows it ("Fiscal year" over its three years)."""
    width = max((len(r) for r in rows), default=0)
    if len(rows) < 2 or width < 2:
        return SheetColumns(0, "", None, False)
    first_figures = next((i for i, r in enumerate(rows) if any(is_number(clean(t)) for t in r)), len(rows))
    table: list[list[Cell]] = []
    for i, r in enumerate(rows):
        texts = [clean(t) for t in r] + [""] * (width - len(r))
        if i < min(first_figures, MAX_HEADER_ROWS + 2):
            table.append(_spread_right(texts))
        else:
            table.append([Cell(t) for t in texts])
    grid, cells, origin = _grid(table)
    t = _title_rows(grid, cells, origin)
    h = _header_rows(grid[t:], cells, origin_shift(origin, t), 0)
    label_col = _label_column(grid, cells, range(t + h, len(grid)))
    title = " — ".join(dict.fromkeys(cells[i].text for r in range(t) for i in dict.fromkeys(grid[r])
                                     if i is not None and cells[i].text))
    headers = _column_headers(grid, cells, range(t, t + h), width) if h else None
    if headers and label_col and headers[0] and UNITS.search(headers[0]):
        title = " — ".join(p for p in (title, headers[0]) if p)
    return SheetColumns(t + h, title, headers, label_col)


def _spread_right(texts: list[str]) -> list[Cell]:
    out: list[Cell] = []
    for c, text in enumerate(texts):
        if not text and c > 1 and out[-1].text:
            out[-1].colspan += 1  # the row label column (0) never heads the columns after it
        else:
            out.append(Cell(text))
    return out


def sheet_row_line(values: list[str], cols: SheetColumns) -> str:
    """One spreadsheet row as a line that says its label and, for each value, its column's header."""
    cells = [Cell(clean(v)) for v in values]
    if cols.headers is None and not cols.label_col:
        return "\t".join(c.text for c in cells)
    return _row_line([list(range(len(cells)))], cells, 0, cols.headers, cols.label_col)


def _origins(grid: list[list[int | None]], n: int) -> list[tuple[int, int]]:
    """(row, column) of each cell's first slot in ``grid`` (a cell no slot holds any more: -1, -1)."""
    out = [(-1, -1)] * n
    for r, g in enumerate(grid):
        for c, i in enumerate(g):
            if i is not None and out[i][0] < 0:
                out[i] = (r, c)
    return out


def origin_shift(origin: list[tuple[int, int]], t: int) -> list[tuple[int, int]]:
    return [(r - t, c) for r, c in origin]


def _label_column(grid: list[list[int | None]], cells: list[Cell], body: range) -> bool:
    """The first column names the rows when most of its cells are words, not figures."""
    texts = [_text_at(grid, cells, r, 0) for r in body]
    texts = [t for t in texts if t]
    if not texts:
        return False
    words = sum(1 for t in texts if not is_number(t) and not _yearish(t))
    return words * 5 >= len(texts) * 3


def _row_line(grid: list[list[int | None]], cells: list[Cell], r: int, headers: list[str] | None,
              label_col: bool) -> str:
    width = len(grid[r])
    parts: list[tuple[int, int, str]] = []  # (first column, last column, text) of each cell once
    c = 0
    while c < width:
        i = grid[r][c]
        e = c
        while e + 1 < width and grid[r][e + 1] == i:
            e += 1
        if i is not None and cells[i].text:
            parts.append((c, e, cells[i].text))
        c = e + 1
    if not parts:
        return ""
    parts = _merge_signs(parts)
    label = ""
    if label_col and parts[0][0] == 0:
        label = parts.pop(0)[2]
    bits = [label] if label else []
    for a, b, text in parts:
        head = ""
        if headers is not None and a < len(headers):
            spanned = list(dict.fromkeys(x for x in headers[a:b + 1] if x))
            head = " / ".join(spanned)
        bits.append(f"{head}: {text}" if head and head != text else text)
    return ROW_SEP.join(bits)


def flat_text(laid: LaidOut) -> str:
    """A laid-out table as one run of text (a table inside a table's cell)."""
    lines = [laid.title_line] if laid.title_line else []
    return "; ".join(lines + [line for _, line in laid.lines])


class RowRuns:
    """Lines of source rows, one line a row, added to ``tb`` in regions ``{**meta, "row_start",
    "row_end"}`` of consecutive rows, so the chunker can count the rows a chunk holds exactly. A
    region ends where a row number is skipped, or after ``max_rows`` rows (0: no bound)."""

    def __init__(self, tb: TextBuilder, meta: dict[str, Any], sep: str = "\n", max_rows: int = 0) -> None:
        self.tb, self.meta, self.sep, self.max_rows = tb, meta, sep, max_rows
        self.lines: list[str] = []
        self.first = self.last = 0

    def add(self, row: int, line: str) -> None:
        if self.lines and row != self.last + 1:
            self.flush()
        if not self.lines:
            self.first = row
        self.lines.append(line)
        self.last = row
        if self.max_rows and len(self.lines) >= self.max_rows:
            self.flush()

    def flush(self) -> None:
        if self.lines:
            self.tb.add("\n".join(self.lines), {**self.meta, "row_start": self.first, "row_end": self.last},
                        sep=self.sep)
            self.lines.clear()


def add_table(tb: TextBuilder, number: int, laid: LaidOut, sep: str = "\n") -> None:
    """Append table ``number`` (1-based, its place among the document's tables) to ``tb``: its
    title line (when the text before does not hold it) and one line a row, with the regions the
    chunker reads: ``{"table", "table_title"}`` over the whole table (and the paragraph before it
    when that is its title), which keeps it out of the text around it, and ``{..., "row_start",
    "row_end"}`` over each run of consecutive source rows (one line a row, so the rows a chunk
    holds can be counted exactly). A layout table (one row or one column) is plain lines."""
    if not laid.data:
        for _, line in laid.lines:
            tb.add(line, None, sep=sep)
        return
    if not laid.lines and not laid.title_line:
        return
    meta: dict[str, Any] = {"table": number}
    if laid.title:
        meta["table_title"] = laid.title
    start = tb.length + (len(sep) if tb.length else 0)
    if laid.before and clean(tb.tail_line()) == laid.before:
        # the paragraph that names the table goes with it: the table's first chunk holds its title
        start = tb.length - len(tb.tail_line())
    if laid.title_line:
        tb.add(laid.title_line, None, sep=sep)
    runs = RowRuns(tb, meta, sep)
    for row, line in laid.lines:
        runs.add(row, line)
    runs.flush()
    tb.regions.append(Region(start, tb.length, meta))
