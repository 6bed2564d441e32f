"""A PDF page's lines with their boxes and type, table rows kept on one line, and the headings of a
document: its outline (bookmarks) where it has one, a layout heuristic where it has not.

**Lines.** pdfium's plain text (``get_text_range``) is the reading order we keep: it follows the
content stream and so keeps the columns of a two-column page apart. Its character indices are the
text page's, one to one, so a line's geometry costs a few ctypes calls, not one per character: the
loose box (font ascent to descent, so its height follows the type size) of the line's first and
last character, and, only when the headings come from the layout, the font name and weight of its
first letter.

**Table rows.** pdfium ends a line wherever the content stream moves to a new text object on the
same baseline in some producers' tables (and between the words of some cover pages), so a row's
label and its figures, or a header cell's words, land on lines of their own. Two *consecutive*
lines whose vertical extents overlap by at least half the smaller height, the second starting to
the right of where the first ends, are one row: they are joined on one line, with a single space
when the gap is a word space (under 0.6 of the line height) and a tab when it is a column gap.
A footnote mark set smaller and raised ("7,628 (1) (4,553)"), where pdfium starts a line at the mark
and another at the figure after it, joins the row too (under 0.8 of its height, its bottom inside
the row's extent), and the row keeps its first line's extent so the figure after the mark follows.
The tab marks "here was a column" for the reader of a chunk; it is whitespace to the tokenisers and
to ``text_quality``. Only consecutive lines are joined: rebuilding whole pages by baseline would
interleave the columns of a two-column page, and pdfium already keeps most rows (dot leaders
included) on one line.

**Tables.** A line of pdfium's text whose characters drop to a lower line (a table's rows set in
one text object, given without line breaks) is first cut there (pdf_tables.baseline_pieces).
The lines of each page are then read for tables (pdf_tables.py): a line keeps, in
``segs``, where each piece joined into it starts among pdfium's characters, so the words of a row
can be measured where it matters (the gap before its figures, the figures' right edges).

**Dot leaders** (four or more dots, spaced or not) become a single tab in the page text, the
column gap they draw; the lines keep them for the heading test (a line with leaders is a contents
entry or a row label, never a heading).

**Headings from the layout** (no usable outline). The body size is the line height that carries
the most characters. A heading is a line of at most 14 words (30 for "Item 7. ..."), mostly
letters, without a tab, dot leaders or a final period, comma, semicolon or colon, starting with a
capital, digit or quote (not a bullet or bracket), not a contents entry ending in a page number
and not followed by a line of figures (a row label), that is

- set at least 1.15x the body size, or
- bold where the body is not (font name with Bold/Black/Heavy/Semibold/Demi, or weight >= 600), or
- ALL CAPS (four letters or more) and followed on its page by a line of prose (six words or more).

Lines whose text (digits ignored) recurs on 30 % or more of the pages are running headers and
footers, never headings; a contents page (five or more lines, a quarter of its lines, of text
ending in a page number) gives none but an "Item" line. Levels: "PART I"-style lines are level 0
and "Item 7."-style lines level 1 (SEC filings, most of what this indexer reads, rarely have an
outline); the other headings follow by style: larger type first, then bold capitals, bold,
capitals. Consecutive heading lines of one style on one page are one heading that wrapped (up to
three lines, the first of five words or more, 24 words in all). A heading that ends in
"and/of/the..." or leaves a bracket open is prose, not a heading. Larger or bold type shared (same
face and size) by the line before or after, when that line is no heading, is a paragraph set in
that type (a release whose body is its tables' small type), not a heading.

**Never a heading**, whatever its type (cover pages and tables set these in bold or large type, and
a chunk's label must name the section it is in): an address, a date or period ("Three Months Ended
December 31, 2022"), an SEC cover page's sentences and captions ("Pursuant to Section 13 or
15(d) ..."), a person's name over a job-title or contact line (a contacts block, a signature), a
table row with two figures or more, a line that goes on from the one before ("OF OPERATIONS").

**Outline placement.** A bookmark goes to its title's line, else a short line holding its words in
order ("GAAP Balance Sheet" at "U.S. GAAP Condensed Consolidated Balance Sheets"); one not found
sits at its page's start only as the page's first bookmark. An outline with fewer than half of its
bookmarks found on their pages is not used: the layout's headings are (outline_trusted).
"""

from __future__ import annotations

import ctypes
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ragweedd.extract.base import Region
from ragweedd.extract.pdf_tables import PageTable, baseline_pieces, find_tables, word_reader
from ragweedd.extract.tables import RawTable

# pdfium marks a hyphen it decided is a line-break hyphen with U+FFFE and returns Symbol-font
# bullets in the private-use area; lines end in CRLF (the CR is dropped).
PDFIUM_FIXES = str.maketrans({"\ufffe": "-", "\uf0b7": "•", "\uf0a7": "▪", "\uf020": " ", "\r": None})
# The same, keeping the CR: the page is translated once and its indices still match pdfium's.
_FIXES_SAME_LENGTH = str.maketrans({"\ufffe": "-", "\uf0b7": "•", "\uf0a7": "▪", "\uf020": " "})

MAX_OUTLINE = 2000  # bookmarks read at most (a looping or generated outline must not stall a file)
MAX_OUTLINE_DEPTH = 12
MAX_HEADINGS = 5000
OUTLINE_LINE_WORDS = 20  # a line longer than this holding a bookmark's words is prose, not its heading
OUTLINE_FOUND_SHARE = 0.5  # of the bookmarks found on their pages, for the outline to be used
HEADING_SIZE_RATIO = 1.15
MAX_HEADING_WORDS = 14
MAX_NUMBERED_WORDS = 30  # "Item 7. Management's Discussion and Analysis of ..." runs long
MAX_WRAPPED_WORDS = 24
_MAX_HEADING_CHARS = 300  # 30 words
REPEATED_SHARE = 0.3  # text on this share of pages is a running header/footer
ROW_OVERLAP = 0.5
SUPERSCRIPT_SIZE = 0.8
WORD_GAP = 0.6  # gap under this many line heights is a word space, else a column gap (tab)

_BOLD = re.compile(r"bold|black|heavy|semibold|demi", re.I)
_LEADERS = re.compile(r"(?:\.\s?){4,}|_{4,}")
# A run of four or more leader dots (". . . ." too) with the blanks around it, within one line.
_LEADER_RUN = re.compile(r"[ \t]*(?:[.·][ \t]?){4,}[ \t]*")
_PART = re.compile(r"^part\s+[ivx\d]+\b\.?", re.I)
# "Item 7." / "ITEM 7 - ..." / "Item 7 Management's ...", not "Item 8 of this report" (a wrapped sentence)
_ITEM = re.compile(r"^item\s+\d+[a-z]?(?:\s*[.:\-–—]|\s+(?-i:[A-Z])|$)", re.I)
_TOC_ENTRY = re.compile(r"\D\s+\d{1,3}$")
_NUMBERED = re.compile(r"^(?:item|note|part|section|article|schedule|exhibit)\s+\d+[a-z]?$", re.I)
# a line ending like this goes on in the next one: a wrapped heading's first line, or prose
_DANGLING = re.compile(r"\b(?:and|or|of|the|a|an|to|in|for|with|on|by|as|at|from)$", re.I)
_QUOTES = str.maketrans("’‘“”", "''\"\"")


@dataclass
class Line:
    text: str  # with PDFIUM_FIXES applied
    start: int  # offset in the page's rebuilt text
    left: float = 0.0
    right: float = 0.0
    bottom: float = 0.0
    top: float = 0.0
    size: float = 0.0  # loose-box height of the first character (follows the type size)
    bold: bool = False
    font: str = ""  # name of the first letter's font (read with the type)
    # (offset in ``text``, pdfium character index) where each piece joined into the line starts
    segs: list[tuple[int, int]] = field(default_factory=list)

    @property
    def height(self) -> float:
        return self.top - self.bottom


@dataclass
class PageLayout:
    text: str
    lines: list[Line] = field(default_factory=list)
    rows_joined: int = 0
    tables: list[PageTable] = field(default_factory=list)  # first and last line of each, in order


@dataclass(frozen=True)
class Heading:
    page: int  # 0-based
    offset: int  # in that page's text
    level: int
    title: str


def read_page(textpage: Any, raw: Any, with_fonts: bool) -> PageLayout:
    """The page's text with table rows joined, and its lines (geometry; type when ``with_fonts``)."""
    text = textpage.get_text_range()
    if len(text) != textpage.count_chars():  # the index mapping does not hold: keep pdfium's text
        return PageLayout(collapse_leaders(text.translate(PDFIUM_FIXES)))
    box = raw.FS_RECTF()
    buf = ctypes.create_string_buffer(96)
    flags = ctypes.c_int()

    def loose(i: int) -> tuple[float, float, float, float]:
        if not raw.FPDFText_GetLooseCharBox(textpage, i, box):
            return 0.0, 0.0, 0.0, 0.0
        return box.left, box.right, box.bottom, box.top

    raw_lines: list[Line] = []
    pos = 0
    for whole in text.translate(_FIXES_SAME_LENGTH).split("\n"):
        for part, at in baseline_pieces(whole, pos, loose):
            stripped = part.strip()
            if not stripped:
                continue
            first = at + len(part) - len(part.lstrip())
            last = at + len(part.rstrip()) - 1
            l0, r0, b0, t0 = loose(first)
            l1, r1, b1, t1 = loose(last)
            ln = Line(part.rstrip(), 0, min(l0, l1), max(r0, r1), min(b0, b1),
                      max(t0, t1), t0 - b0, segs=[(0, at)])
            if with_fonts:
                k = first + next((j for j, c in enumerate(stripped) if c.isalnum()), 0)
                weight = raw.FPDFText_GetFontWeight(textpage, k)
                n = raw.FPDFText_GetFontInfo(textpage, k, buf, len(buf), ctypes.byref(flags))
                name = buf.value.decode("latin-1", "replace") if 0 < n <= len(buf) else ""
                ln.font = name
                ln.bold = weight >= 600 or bool(_BOLD.search(name))
            raw_lines.append(ln)
        pos += len(whole) + 1
    out: list[Line] = []
    joined = 0
    for ln in raw_lines:
        prev = out[-1] if out else None
        if prev is not None and (_same_row(prev, ln) or _superscript(prev, ln)):
            gap = ln.left - prev.right
            sep = " " if gap < WORD_GAP * max(prev.height, ln.height) else "\t"
            lead = len(ln.text) - len(ln.text.lstrip())
            prev.segs.append((len(prev.text) + len(sep), ln.segs[0][1] + lead))
            prev.text = prev.text + sep + ln.text.lstrip()
            prev.right = ln.right
            # the row keeps the vertical extent of its first line, so the figure after a raised
            # footnote mark ("(1)") still joins it
            joined += 1
            continue
        out.append(ln)
    try:
        tables = find_tables(out, word_reader(out, loose))
    except Exception:  # noqa: BLE001 - tables are a reading aid: a page they trip over keeps its text
        tables = []
    pieces = []
    pos = 0
    for ln in out:
        # ``ln.text`` keeps its leaders for the heading test; the page text has them as a tab.
        t = collapse_leaders(ln.text)
        ln.start = pos
        pieces.append(t)
        pos += len(t) + 1
    return PageLayout("\n".join(pieces), out, joined, tables)



def table_spans(page: PageLayout) -> list[tuple[int, int, RawTable]]:
    """Where each table of the page is in its text: (start, end, table)."""
    out = []
    for t in page.tables:
        last = page.lines[t.last]
        out.append((page.lines[t.first].start, last.start + len(collapse_leaders(last.text)), t.table))
    return out


def collapse_leaders(text: str) -> str:
    """Dot leaders become one tab, the column gap they stand for: "Cash ....... $ 876" -> "Cash\t$ 876".

    Financial tables and contents pages run every row's label to its figures on leaders of a
    hundred dots or more. Kept, they filled a chunk's character budget (a balance sheet page took
    ten chunks of three rows each) and, one token per dot, most of what the embedder reads of it.
    """
    if "...." not in text and ". . ." not in text and "····" not in text:
        return text
    return "\n".join(_LEADER_RUN.sub("\t", line).rstrip() for line in text.split("\n"))


def _same_row(a: Line, b: Line) -> bool:
    ha, hb = a.height, b.height
    if ha <= 0 or hb <= 0:
        return False
    overlap = min(a.top, b.top) - max(a.bottom, b.bottom)
    return overlap >= ROW_OVERLAP * min(ha, hb) and b.left >= a.right - 0.25 * min(ha, hb)


def _superscript(a: Line, b: Line) -> bool:
    """A footnote mark in smaller type raised above the line, to the right of it (pdfium starts a
    new line at it, and another at the figure after it)."""
    return (0 < b.height < SUPERSCRIPT_SIZE * a.height and a.bottom <= b.bottom < a.top
            and b.left >= a.right - 0.25 * b.height)


# ---- outline -------------------------------------------------------------------------------------


def outline_entries(doc: Any) -> list[tuple[int, int, str]]:
    """(level, page index, title) of the document's bookmarks that point at a page, in order."""
    out: list[tuple[int, int, str]] = []
    try:
        for bm in doc.get_toc(max_depth=MAX_OUTLINE_DEPTH):
            if len(out) >= MAX_OUTLINE:
                break
            title = " ".join((bm.get_title() or "").split())
            dest = bm.get_dest()
            page = dest.get_index() if dest is not None else None
            if title and page is not None and 0 <= page < len(doc):
                out.append((int(bm.level), page, title))
    except Exception:  # noqa: BLE001 - an outline is decoration: a broken one means "no outline"
        return []
    return out


def _word_stems(text: str) -> list[str]:
    """Lower-case words with a plural "s" cut ("Sheets" -> "sheet"): outline titles abbreviate."""
    return [w[:-1] if len(w) > 3 and w.endswith("s") else w
            for w in re.findall(r"[0-9a-z]+", text.translate(_QUOTES).lower())]


def _line_with_words(title: str, hay: str, at: int) -> int | None:
    """Offset of the first line at or after ``at`` (of at most OUTLINE_LINE_WORDS words) that holds
    the title's words in order, others between them: the bookmark "GAAP Balance Sheet" over the
    line "U.S. GAAP Condensed Consolidated Balance Sheets (Unaudited)"."""
    want = _word_stems(title)
    if not want:
        return None
    pos = hay.rfind("\n", 0, at) + 1
    for line in hay[pos:].split("\n"):
        have = _word_stems(line)
        if pos >= at and len(have) <= OUTLINE_LINE_WORDS:
            it = iter(have)
            if all(any(h == w for h in it) for w in want):
                return pos + len(line) - len(line.lstrip())
        pos += len(line) + 1
    return None


def place_outline(entries: list[tuple[int, int, str]], texts: list[str]) -> tuple[list[Heading], int]:
    """Each bookmark at its title on its page (whitespace, case, quote style and a final period
    aside), at or after the previous bookmark of that page: a line that is the title, else a line
    that starts with it, else a short line holding its words in order (an abbreviated title),
    else the title anywhere (body text often names a section before its heading: "see Part I,
    Item 1A"). A bookmark not found on its page sits at the page's start when it is the first of
    its page (a page whose heading is drawn, or worded otherwise); a later one of the same page is
    left out: where it begins is unknown, and at the page's start it would take the place of the
    page's real first section (an earnings release whose bookmarks "Cash Flows", "Balance Sheet",
    "Pro Forma Statement of Income" all point at one page labelled its balance sheet with the
    last). Returns the headings and how many bookmarks were found in their page's text."""
    out = []
    last: dict[int, int] = {}
    found = 0
    for level, page, title in entries:
        words = title.translate(_QUOTES).rstrip(".:").split()
        at = last.get(page, 0)
        off: int | None = None
        if words:
            pat = r"\s+".join(map(re.escape, words))
            hay = texts[page].translate(_QUOTES)
            for form in (rf"^[ \t]*{pat}[ \t.:]*$", rf"^[ \t]*{pat}"):
                m = re.compile(form, re.I | re.M).search(hay, at)
                if m:
                    off = m.start() + len(m.group()) - len(m.group().lstrip())
                    break
            if off is None:
                off = _line_with_words(title, hay, at)
            if off is None:
                m = re.compile(pat, re.I).search(hay, at)
                off = m.start() if m else None
        if off is None:
            if page in last:
                continue
            off = 0
        else:
            found += 1
        last[page] = off
        out.append(Heading(page, off, level, title))
    return out, found


def outline_trusted(entries: list[tuple[int, int, str]], found: int) -> bool:
    """An outline whose titles are mostly not on the pages they point at (a release whose
    bookmarks "Narrative", "Cautionary Statements" point one page off) labels text with sections
    it is not in: the layout's headings are used instead."""
    return len(entries) >= 2 and found >= OUTLINE_FOUND_SHARE * len(entries)


# ---- layout heuristic ------------------------------------------------------------------------------


def _norm(text: str) -> str:
    return re.sub(r"\d+", "#", " ".join(text.lower().split()))


def _shape_ok(text: str) -> bool:
    """A line that could be a heading by its text alone."""
    t = text.strip()
    words = t.split()
    numbered = bool(_PART.match(t) or _ITEM.match(t))
    if not words or len(words) > (MAX_NUMBERED_WORDS if numbered else MAX_HEADING_WORDS):
        return False
    if "\t" in t or _LEADERS.search(t) or not (t[0].isalnum() or t[0] in "'\"‘“"):
        return False
    if (t[-1] in ".,;:" and not numbered) or t[0].islower():
        return False
    return _wordy(t) and not (_TOC_ENTRY.search(t) and not _NUMBERED.match(t))


_MONTH = (r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|"
          r"oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?")
# A line that names a date or a period is a dateline or a table's column head ("Three Months Ended
# December 31, 2022 2021"), not a section.
_DATE_LINE = re.compile(rf"\b{_MONTH}\s+\d{{1,2}}\s*,\s*\d{{4}}\b|\b\d{{1,2}}/\d{{1,2}}/\d{{2,4}}\b|"
                        r"\b(?:three|six|nine|twelve|thirteen|twenty-six|thirty-nine|fifty-two|fifty-three|\d{1,2})"
                        r"\s+(?:months|weeks)\s+ended\b|\b(?:fiscal\s+)?(?:years?|quarters?|periods?)\s+ended\b", re.I)
# A street address ("330 West 34th Street", "700 Anderson Hill Road"), a ZIP code after a state or
# a city ("New York, New York 10001", "D.C. 20549"), a post box.
_ADDRESS = re.compile(r"\b\d+[a-z-]*\s+(?:[\w.'’-]+\s+){0,4}(?:street|st\.|avenue|ave\.|road|rd\.|boulevard|blvd\.?|"
                      r"drive|parkway|pkwy\.?|lane|highway|hwy\.?|plaza|suite)(?:\W|$)|"
                      r"(?:\b[A-Z]{2}|\b[A-Z][a-z]+|D\.\s?C\.)\s*,?\s+\d{5}(?:-\d{4})?$|\bp\.\s?o\.\s+box\b", re.I)
# What an SEC filing's cover page says around its headings: the form's sentences and captions.
_COVER = re.compile(r"pursuant to (?:section|rule)|securities exchange act|commission file|washington,?\s+d\.?\s?c\b|"
                    r"exact name of (?:the )?registrant|title of each class|i\.r\.s\.|irs employer|"
                    r"registrant.s telephone|state or other jurisdiction|date of report|check the appropriate box|"
                    r"indicate by check mark|zip code", re.I)
# A line starting with one of these goes on from the line before ("OF OPERATIONS"); "To Our
# Shareholders", "In-Process Research", "At a Glance" may be headings.
_CONTINUES = re.compile(r"^(?:of|and|or|nor|than|that|which|whose)\s", re.I)
# Capitalised words or initials only: the shape of a person's name ("SARAH ROGERS", "John A.
# Smith"), or of several side by side in a contacts block; it is names, not a heading, over a job
# title or contact line, or under "/s/".
_NAME_WORD = r"(?:[A-Z][a-z'’-]+|[A-Z][A-Z'’-]+|[A-Z]\.)"
_NAME = re.compile(rf"^{_NAME_WORD}(?:\s+{_NAME_WORD},?){{1,11}}$")
# A figure of a table row: "1,066", "(7)", "4.5%"; a year ("2023") is not one, and a line's first
# word is not counted (the number of "Note 3").
_FIGURE = re.compile(r"^\(?-?\$?(?:\d{1,3}(?:,\d{3})+|\d+\.\d+|\d{1,3}|\d{5,})%?\)?%?$")
_JOB_OR_CONTACT = re.compile(r"\b(?:officer|president|director|secretary|treasurer|controller|chairman|chair|counsel|"
                             r"manager|partner|head of|investor relations|media relations|communications)\b|@|"
                             r"\(?\d{3}\)?[\s.-]\d{3}[\s.-]\d{4}", re.I)
_SIGNED = re.compile(r"^\s*(?:/s/|by:|name:)", re.I)
MAX_JOB_WORDS = 10


def _not_a_heading(t: str) -> bool:
    """Lines that look like headings by their type but are a cover page's parts or a table's: an
    address, a date or period, the form's boilerplate, a bracket left open, a row with its figures
    ("Adjusted Free Cash Flow 803 834")."""
    if _PART.match(t) or _ITEM.match(t):
        return bool(_COVER.search(t))
    figures = sum(1 for w in t.split()[1:] if _FIGURE.match(w))
    return bool(_DATE_LINE.search(t) or _ADDRESS.search(t) or _COVER.search(t) or t.count("[") != t.count("]")
                or figures >= 2)


def _signature_name(lines: list[Line], i: int) -> bool:
    """Line ``i`` is a person's name: name-shaped, over a short job-title or contact line, or under
    a signature mark."""
    if not _NAME.match(lines[i].text.strip()):
        return False
    nxt = lines[i + 1].text if i + 1 < len(lines) else ""
    prev = lines[i - 1].text if i > 0 else ""
    # a contacts block sets names side by side, their titles on the line below
    most = max(MAX_JOB_WORDS, 3 * len(lines[i].text.split()))
    return bool((nxt and len(nxt.split()) <= most and _JOB_OR_CONTACT.search(nxt)) or _SIGNED.match(prev))


def _wordy(t: str, share: float = 0.7) -> bool:
    letters = sum(map(str.isalpha, t))
    return letters >= 2 and letters >= share * sum(map(str.isalnum, t))


def _toc_page(page: PageLayout) -> bool:
    """A contents page: many lines of text that end in a page number."""
    n = sum(1 for ln in page.lines if _TOC_ENTRY.search(ln.text) and _wordy(ln.text, 0.6))
    return n >= 5 and n >= 0.25 * len(page.lines)


def _caps(text: str) -> bool:
    letters = [c for c in text if c.isalpha()]
    return len(letters) >= 4 and all(c.isupper() for c in letters)


def _prose(line: Line) -> bool:
    t = line.text
    return len(t.split()) >= 6 and "\t" not in t and not _LEADERS.search(t)


def layout_headings(pages: list[PageLayout]) -> list[Heading]:  # noqa: C901 - the heading rules in the order they are tried; each is a line or two
    lines = [(p, ln) for p, page in enumerate(pages) for ln in page.lines]
    if not lines:
        return []
    weight: Counter[float] = Counter()
    bold_chars = chars = 0
    for _, ln in lines:
        weight[round(ln.size * 2) / 2] += len(ln.text)
    body = weight.most_common(1)[0][0]
    for _, ln in lines:
        if abs(ln.size - body) <= 0.5:
            chars += len(ln.text)
            bold_chars += len(ln.text) if ln.bold else 0
    body_bold = bold_chars > chars / 2
    n_pages = sum(1 for p in pages if p.lines)
    seen: Counter[str] = Counter()
    if n_pages >= 3:
        for page in pages:
            # only a short line can be a heading, so only short lines need counting
            seen.update({_norm(ln.text) for ln in page.lines if len(ln.text) <= _MAX_HEADING_CHARS})
    repeated = {t for t, c in seen.items() if c >= max(2, REPEATED_SHARE * n_pages)}

    # (page, line index, style) of each heading line; style = (size step, bold, caps)
    found: list[tuple[int, int, tuple[float, bool, bool]]] = []
    for p, page in enumerate(pages):
        # a contents page gives no headings but an "Item 7." over the contents of its own section
        toc = _toc_page(page)
        for i, ln in enumerate(page.lines):
            if not _shape_ok(ln.text) or _norm(ln.text) in repeated or (toc and not _ITEM.match(ln.text)):
                continue
            if _not_a_heading(ln.text.strip()) or _signature_name(page.lines, i):
                continue
            big = body > 0 and ln.size >= HEADING_SIZE_RATIO * body
            bold = ln.bold and not body_bold
            caps = _caps(ln.text)
            if not (big or bold or caps):
                continue
            nxt = page.lines[i + 1] if i + 1 < len(page.lines) else None
            if nxt is not None and not _wordy(nxt.text, 0.3):
                continue  # a row label over its figures, not a heading
            if not (big or bold):
                nxt = next((x for x in page.lines[i + 1:i + 3] if not _caps(x.text)), None)
                if nxt is None or not _prose(nxt):
                    continue
            size = round(ln.size * 2) / 2 if big else 0.0
            found.append((p, i, (size, bold, caps)))
    styles = sorted({s for _, _, s in found}, key=lambda s: (-s[0], not s[1], not s[2]))
    rank = {s: 2 + k for k, s in enumerate(styles)}
    heads = {(p, i): style for p, i, style in found}
    out: list[Heading] = []
    k = 0
    while k < len(found) and len(out) < MAX_HEADINGS:
        p, i, style = found[k]
        parts = [pages[p].lines[i].text.strip()]
        # a heading that wrapped: the next lines of its page in the same style, when this one is
        # long enough to have wrapped and the next does not start a heading of its own
        while (k + 1 < len(found) and len(parts) < 3 and found[k + 1][0] == p
               and found[k + 1][1] == i + len(parts) and found[k + 1][2] == style
               and len(parts[-1].split()) >= 5 and not _PART.match(parts[0]) and not parts[-1].endswith(".")):
            # (a line ending in a period is a whole heading: "Item 9.01 Financial Statements and Exhibits.")
            more = pages[p].lines[found[k + 1][1]].text.strip()
            if _PART.match(more) or _ITEM.match(more) or len(" ".join(parts + [more]).split()) > MAX_WRAPPED_WORDS:
                break
            parts.append(more)
            k += 1
        k += 1
        title = " ".join(" ".join(parts).split())
        if _DANGLING.search(title) or title.count("(") != title.count(")") or _CONTINUES.match(title):
            # a line that goes on in prose, a lead-in cut inside its brackets, or a line that goes
            # on from the one before (a wrapped heading's second line is taken with its first)
            continue
        if (style[0] or style[1]) and not (_PART.match(title) or _ITEM.match(title)):
            # Larger or bold type that the line before or after shares, without being a heading
            # itself, is a paragraph set that way (a release whose body is its tables' small type),
            # and so is the rest of that run of lines.
            on_page = pages[p].lines
            j = i + len(parts)
            if ((i > 0 and (p, i - 1) not in heads and _same_type(on_page[i - 1], on_page[i]))
                    or (j < len(on_page) and heads.get((p, j)) in (None, style)
                        and _same_type(on_page[j], on_page[i]))):
                while k < len(found) and found[k][0] == p and found[k][2] == style and found[k][1] == j:
                    k, j = k + 1, j + 1
                continue
        level = 0 if _PART.match(title) else 1 if _ITEM.match(title) else rank[style]
        out.append(Heading(p, pages[p].lines[i].start, level, title))
    return out


def _same_type(a: Line, b: Line) -> bool:
    """One face at one size: a bold heading over a bold-italic lead-in sentence is not a run."""
    return abs(a.size - b.size) <= 0.5 and a.font == b.font


# ---- regions and title ---------------------------------------------------------------------------


def section_regions(placed: list[tuple[int, Heading]], length: int) -> list[Region]:
    """Regions ``{"section", "section_path"}`` from each heading's offset in the document text to
    the next heading's; a heading deeper than the one before nests under it, one at the same or a
    higher level closes the open ones down to its level. Headings at one offset (bookmarks of one
    page whose titles were not found) keep the last as the region and the others in its path."""
    out: list[Region] = []
    stack: list[Heading] = []
    order = sorted(range(len(placed)), key=lambda k: (placed[k][0], k))
    for n, k in enumerate(order):
        at, h = placed[k]
        while stack and stack[-1].level >= h.level:
            stack.pop()
        stack.append(h)
        end = placed[order[n + 1]][0] if n + 1 < len(order) else length
        if end > at:
            out.append(Region(at, end, {"section": h.title, "section_path": [s.title for s in stack]}))
    return out


# Titles producers write that name nothing: a converter's "Microsoft Word - x.docx", an EDGAR
# accession number, a file name, a placeholder.
_JUNK_TITLE = re.compile(r"^(?:microsoft \w+ - .*|[\d\s\-_./]+|.*\.(?:docx?|pdf|rtf|odt|html?|txt|indd|xlsx?|pptx?)"
                         r"|document|untitled.*|title|none|null|unknown|slide \d+)$", re.I)
# Headings no reader would call the document's title: contents, cover-page boilerplate of filings,
# a street address ("702 S.W. 8th Street"; a line may start with a year).
_GENERIC_HEADING = re.compile(r"^(?:cover(?: page)?|(?:table of )?contents|index|toc|united states|"
                              r"securities and exchange commission|washington,? d\.?c\..*|form [\w-]+|"
                              r"documents incorporated by reference|(?:special note regarding )?forward-looking "
                              r"statements|for the (?:fiscal year|quarterly period|transition period)\b.*|"
                              r"commission file number.*|.*telephone number.*|securities registered pursuant.*|"
                              r"document parts into which incorporated|(?!\d{4}\s)\d+\S* .*|.*\$.*)$", re.I)
# An SEC filing's cover page names the registrant on the line above this caption.
_REGISTRANT = re.compile(r"^[ \t]*(\S[^\n]{1,80}?)[ \t]*\n[ \t]*\(?exact name of (?:the )?registrant", re.I | re.M)
TITLE_PAGES = 3  # a title is a heading of the first pages
_NAME_CAPTION = re.compile(r"\(?exact name of (?:the )?registrant", re.I)


def usable_title(meta_title: str | None, headings: list[Heading], first_pages: str = "") -> str | None:
    """The metadata title unless it is empty or junk; else the registrant a filing's cover page
    names (in ``first_pages``, the text of the first pages); else the first heading of the highest
    level on the first pages that is not boilerplate ("Cover Page", "FORM 10-K") or a Part/Item."""
    t = " ".join((meta_title or "").split())
    if t and not _JUNK_TITLE.match(t):
        return t
    m = _REGISTRANT.search(first_pages)
    if m and _wordy(m.group(1)) and not _GENERIC_HEADING.match(m.group(1).strip()):
        return " ".join(m.group(1).split())
    if _NAME_CAPTION.search(first_pages):
        # a filing whose name is a logo: the bold lines of its first pages are its state, its
        # address, a statement ("Delaware", "consolidated balance sheet"), never its name
        return None
    near = [h for h in headings if h.page < TITLE_PAGES and not _GENERIC_HEADING.match(h.title)
            and not _PART.match(h.title) and not _ITEM.match(h.title) and 1 <= len(h.title.split()) <= 15
            and h.title.count("(") == h.title.count(")")]
    top = min((h.level for h in near), default=None)
    return next((h.title for h in near if h.level == top), None)
