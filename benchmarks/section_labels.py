"""Section labels of PDF chunks on real filings (FinanceBench dev by default): are they headings?

    PYTHONPATH=$PWD .venv/bin/python benchmarks/section_labels.py [--folder DIR] [--limit N]
        [--files A.pdf,B.pdf] [--out NAME] [--examples N]

Each PDF is extracted (no OCR) and chunked as the pipeline does (256-token PDF windows, 50 %
overlap); nothing is embedded. A chunk's label is its ``section`` (what a hit shows as "§ ...").
The labels are judged against the PDF itself, read again here with pdfium's plain text and pypdf's
outline, not with the extractor's own heading finder (that would only measure it against itself):

- **heading line of page P**: the label, compared without case, spacing, punctuation or quote
  style, is one of page P's lines, or the start of a line, or one to three consecutive lines
  joined (a wrapped heading); or it is the title of a bookmark of the outline that points at P
  and whose words appear, in order, in one line (or two joined) of P (a bookmark "GAAP Balance
  Sheet" over the line "U.S. GAAP Condensed Consolidated Balance Sheets (Unaudited)"). A bookmark
  whose title is nowhere on the page it points at is no heading of that page.
- **bad kind** (each counted apart; a label may be several):
  ``address`` (a street number with a street word, a ZIP code after a state, "D.C. 20549",
  a P.O. box), ``name`` (two to four capitalised words or initials, no digit, none of them a
  word of headings ("Media", "Officers", "Results" ...), on a line of the PDF whose next line is a
  short job-title or contact line ("Senior Vice President ...", "Director of ...", an e-mail, a
  telephone number) or whose line before is a signature ("/s/", "By:")), ``sentence`` (more than 16 words, or six
  or more ending in a period and not an "Item 5.07."-style line), ``date`` (holds a full date,
  "May 3, 2023", or a period heading "Three Months Ended ..."), ``cover`` (SEC cover-page
  boilerplate: "Pursuant to Section 13 or 15(d)", "Securities Exchange Act", "Commission File
  Number", "Washington, D.C.", "(Exact name of registrant", "Title of each class").
- **in force** (the headline figure): the chunk has a label, the label is a heading line of a
  page from the document's first page up to the chunk's first page (the heading in force where the
  chunk starts is on its page or an earlier one), and it is of no bad kind.
- **on page**: the label is a heading line of one of the chunk's own pages, and of no bad kind.
- **later page**: the label is a heading line of no page up to the chunk's first page, but of a
  later one (a heading the chunk's text has not reached yet).

Shares are of all chunks (unlabelled chunks count as neither in force nor bad; an unlabelled chunk
is one before the document's first heading, or whose only heading is on a later page), and, for
``share_in_force_of_labelled`` and the bad kinds, of labelled chunks. Prints a table per file, a
summary and a few labels of each bad kind, and writes the counts (not the labels: they are the
filings' text) to benchmarks/results/NAME.json.

The judge is rough at its edges: a long "Item 5. Market for Registrant's Common Equity, ..."
heading counts as a sentence (over 16 words), and an exhibit's "CERTIFICATION PURSUANT TO SECTION
302 OF THE SARBANES-OXLEY ACT" as cover boilerplate, though both are headings.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._common import table, write_json  # noqa: E402
from ragweedd.chunk.chunker import ChunkParams, chunk_document  # noqa: E402
from ragweedd.extract.base import ExtractSettings  # noqa: E402
from ragweedd.extract.pdf import PdfExtractor  # noqa: E402

FINANCEBENCH = Path(os.environ.get("RAGWEED_FINANCEBENCH",
                                   ROOT.parent / "shared" / "eval" / "financebench")) / "docs"
# the pipeline's PDF chunking with the default local embedder's figures (256 tokens, 50 % overlap)
PARAMS = ChunkParams(chunk_tokens=256, pdf_tokens=256, av_tokens=256, overlap_pct=15, pdf_overlap_pct=50)
KINDS = ("address", "name", "sentence", "date", "cover")

_MONTH = r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|" \
         r"oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"
_DATE = re.compile(rf"\b{_MONTH}\s+\d{{1,2}}\s*,\s*\d{{4}}\b|\b\d{{1,2}}/\d{{1,2}}/\d{{2,4}}\b|"
                   r"\b(?:three|six|nine|twelve|fifty-two|fifty-three)\s+(?:months|weeks)\s+ended\b|"
                   r"\b(?:fiscal\s+)?years?\s+ended\b", re.I)
_STREET = re.compile(r"^\s*\d+[\w-]*\s+(?:[\w.'-]+\s+){0,5}(?:street|st\.?|avenue|ave\.?|road|rd\.?|boulevard|"
                     r"blvd\.?|drive|dr\.?|parkway|pkwy\.?|lane|ln\.?|way|place|plaza|square|highway|hwy\.?|"
                     r"circle|court|ct\.?|center|centre|suite|floor)\b", re.I)
_ZIP = re.compile(r"(?:\b[A-Z]{2}|\b[A-Z][a-z]+|D\.C\.)\s*,?\s+\d{5}(?:-\d{4})?\b|\bp\.?\s?o\.?\s+box\b", re.I)
_COVER = re.compile(r"pursuant to section|securities exchange act|commission file number|washington,?\s+d\.?\s?c\b|"
                    r"exact name of (?:the )?registrant|title of each class|i\.r\.s\. employer|"
                    r"registrant.s telephone|state or other jurisdiction|date of report", re.I)
_NUMBERED = re.compile(r"^(?:item|part|note|section|article|exhibit|schedule)\s+[\dIVX]", re.I)
_NAME_WORD = re.compile(r"^(?:[A-Z][a-z'’-]+|[A-Z][A-Z'’-]+|[A-Z]\.)$")
_JOB = re.compile(r"officer\b|president\b|director\b|secretary\b|treasurer\b|controller\b|chairman\b|"
                  r"counsel\b|manager\b|investor relations|media relations|@|\(?\d{3}\)?[\s.-]\d{3}[\s.-]\d{4}", re.I)
_SIGNED = re.compile(r"^\s*(?:/s/|by:)", re.I)
# words of headings that a capitalised two-word line ("News Media", "Executive Officers") is made of
_HEADING_WORDS = {
    "media", "news", "officers", "officer", "executive", "executives", "directors", "board", "contacts", "contact",
    "relations", "investor", "investors", "community", "results", "financial", "statements", "overview", "summary",
    "highlights", "outlook", "signatures", "signature", "exhibits", "exhibit", "notes", "revenue", "revenues",
    "segment", "segments", "operations", "business", "properties", "risk", "factors", "legal", "proceedings",
    "management", "employees", "compensation", "governance", "report", "reports", "balance", "sheet", "sheets",
    "income", "cash", "flows", "equity", "debt", "taxes", "leases", "goodwill", "guidance", "liquidity", "capital",
    "resources", "general", "other", "events", "conference", "call", "details", "about", "company", "table",
    "contents", "index", "part", "item", "note", "recent", "developments", "introduction", "background"}


def norm(s: str) -> str:
    return re.sub(r"[^0-9a-z]+", "", s.translate(str.maketrans("’‘“”", "''\"\"")).lower())


def page_lines(path: Path) -> list[list[str]]:
    """Each page's non-blank lines as pdfium's plain text has them (no row joining, leaders kept)."""
    import pypdfium2 as pdfium

    out = []
    with pdfium.PdfDocument(str(path)) as doc:
        for i in range(len(doc)):
            page = doc[i]
            tp = page.get_textpage()
            text = tp.get_text_range()
            tp.close()
            page.close()
            # pdfium ends a line with CRLF; a bare LF it puts between the words of some producers'
            # headings ("NOTE\n15\n-\nNET\nLOSS") is a space
            lines = (" ".join(ln.replace("\n", " ").split()) for ln in text.split("\r\n"))
            out.append([ln for ln in lines if ln])
    return out


def outline_titles(path: Path) -> dict[int, set[str]]:
    """Normalised bookmark titles by the page (0-based) they point at, as pypdf reads the outline."""
    out: dict[int, set[str]] = {}
    try:
        import pypdf

        reader = pypdf.PdfReader(str(path), strict=False)

        def walk(items) -> None:
            for it in items:
                if isinstance(it, list):
                    walk(it)
                    continue
                try:
                    p = reader.get_destination_page_number(it)
                except Exception:  # noqa: BLE001 - a broken bookmark points nowhere
                    continue
                if p is not None and p >= 0:
                    out.setdefault(p, set()).add(norm(str(it.title or "")))
        walk(reader.outline)
    except Exception:  # noqa: BLE001 - pypdf refuses some filings pdfium reads: no outline then
        return out
    return out


def _stem(w: str) -> str:
    return w[:-1] if len(w) > 3 and w.endswith("s") else w


def words_in_line(title: str, page: list[str]) -> bool:
    """The title's words, in order, in one line or two joined (plurals aside)."""
    want = [_stem(w) for w in re.findall(r"[0-9a-z]+", title.lower())]
    if not want:
        return False
    for i in range(len(page)):
        have = [_stem(w) for w in re.findall(r"[0-9a-z]+", " ".join(page[i:i + 2]).lower())]
        it = iter(have)
        if all(any(h == w for h in it) for w in want):
            return True
    return False


def heading_pages(label: str, lines: list[list[str]], outline: dict[int, set[str]]) -> list[int]:
    """The pages (0-based) where ``label`` is a line, the start of one, lines joined, or a bookmark
    whose words are in a line of the page."""
    want = norm(label)
    if not want:
        return []
    pages = []
    for p, page in enumerate(lines):
        if want in outline.get(p, set()) and words_in_line(label, page):
            pages.append(p)
            continue
        normed = [norm(ln) for ln in page]
        for i in range(len(normed)):
            joined = ""
            hit = False
            for j in range(i, min(i + 3, len(normed))):
                joined += normed[j]
                if joined == want or (j == i and joined.startswith(want) and len(want) >= 4):
                    hit = True
                    break
                if len(joined) >= len(want):
                    break
            if hit:
                pages.append(p)
                break
    return pages


def bad_kinds(label: str, lines: list[list[str]]) -> list[str]:
    t = " ".join(label.split())
    words = t.split()
    out = []
    if _STREET.search(t) or _ZIP.search(t):
        out.append("address")
    if (2 <= len(words) <= 4 and all(_NAME_WORD.match(w.strip(",")) for w in words)
            and not any(w.strip(",").lower() in _HEADING_WORDS for w in words)):
        want = norm(t)
        for page in lines:
            at = [i for i, ln in enumerate(page) if norm(ln) == want]
            if any((i + 1 < len(page) and len(page[i + 1].split()) <= 10 and _JOB.search(page[i + 1]))
                   or (i > 0 and _SIGNED.match(page[i - 1])) for i in at):
                out.append("name")
                break
    if len(words) > 16 or (len(words) >= 6 and t.endswith(".") and not _NUMBERED.match(t)):
        out.append("sentence")
    if _DATE.search(t):
        out.append("date")
    if _COVER.search(t):
        out.append("cover")
    return out


def measure(path: Path) -> dict:
    t0 = time.perf_counter()
    doc = PdfExtractor().extract(path, ExtractSettings(ocr_enabled=False))
    chunks = chunk_document(doc, PARAMS).chunks
    lines = page_lines(path)
    outline = outline_titles(path)
    seconds = time.perf_counter() - t0
    judged: dict[str, tuple[list[int], list[str]]] = {}
    row = {"file": path.name, "source": doc.stats.get("heading_source"), "chunks": len(chunks), "labelled": 0,
           "in_force": 0, "on_page": 0, "later_page": 0, **{k: 0 for k in KINDS}, "any_bad": 0}
    examples: dict[str, list[str]] = {k: [] for k in (*KINDS, "later_page", "not_a_heading")}
    for c in chunks:
        label = c["meta"].get("section")
        if not label:
            continue
        row["labelled"] += 1
        if label not in judged:
            judged[label] = (heading_pages(label, lines, outline), bad_kinds(label, lines))
        where, bad = judged[label]
        pages = [p - 1 for p in c["meta"].get("pages") or []]
        first = pages[0] if pages else 0
        for k in bad:
            row[k] += 1
            examples[k].append(label)
        row["any_bad"] += bool(bad)
        if not bad and any(p <= first for p in where):
            row["in_force"] += 1
        elif not bad:
            examples["not_a_heading" if not where else "later_page"].append(f"p.{first + 1}: {label}")
        if not bad and any(p in pages for p in where):
            row["on_page"] += 1
        if where and all(p > first for p in where):
            row["later_page"] += 1
    row["seconds"] = round(seconds, 1)
    row["examples"] = {k: sorted(set(v))[:8] for k, v in examples.items() if v}
    return row


def share(n: int, d: int) -> float:
    return round(n / d, 4) if d else 0.0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--folder", type=Path, default=FINANCEBENCH)
    ap.add_argument("--limit", type=int, default=0, help="the first N files (by name) only")
    ap.add_argument("--files", default="", help="comma-separated file names (instead of the whole folder)")
    ap.add_argument("--out", default="section_labels", help="name of the JSON file in benchmarks/results/")
    ap.add_argument("--examples", type=int, default=3, help="bad labels shown per kind")
    args = ap.parse_args()
    if args.files:
        files = [args.folder / f for f in args.files.split(",")]
    else:
        files = sorted(args.folder.glob("*.pdf"))[: args.limit or None]
    if not files or not all(f.is_file() for f in files):
        raise SystemExit(f"no PDFs (or a named one missing) in {args.folder} (set RAGWEED_FINANCEBENCH or --folder)")
    rows = []
    for f in files:
        r = measure(f)
        rows.append(r)
        print(f"{f.name}: {r['chunks']} chunks, in force {share(r['in_force'], r['chunks']):.3f}, "
              f"bad {r['any_bad']}, {r['seconds']} s", flush=True)
    tot = {k: sum(r[k] for r in rows) for k in ("chunks", "labelled", "in_force", "on_page", "later_page",
                                                  *KINDS, "any_bad")}
    summary = {"files": len(rows), **tot,
               "share_in_force": share(tot["in_force"], tot["chunks"]),
               "share_in_force_of_labelled": share(tot["in_force"], tot["labelled"]),
               "share_on_page": share(tot["on_page"], tot["chunks"]),
               "share_labelled": share(tot["labelled"], tot["chunks"]),
               "share_later_page": share(tot["later_page"], tot["chunks"]),
               **{f"share_{k}": share(tot[k], tot["labelled"]) for k in (*KINDS, "any_bad")}}
    per_file = [{**{k: v for k, v in r.items() if k != "examples"},
                 "in_force_share": share(r["in_force"], r["chunks"])} for r in rows]
    print(table(per_file, ["file", "source", "chunks", "labelled", "in_force_share", "on_page", "later_page",
                           *KINDS]))
    print()
    print(table([summary], ["files", "chunks", "share_labelled", "share_in_force", "share_in_force_of_labelled",
                            "share_on_page",
                            "share_later_page", "share_any_bad"]))
    print(table([summary], [f"share_{k}" for k in KINDS]))
    for k in (*KINDS, "later_page", "not_a_heading"):
        seen = sorted({e for r in rows for e in r["examples"].get(k, [])})
        if seen:
            print(f"{k}: " + " | ".join(s[:90] for s in seen[: args.examples]))
    # the labels themselves are the filings' text: printed, never written where they could be committed
    write_json(args.out, {"folder": str(args.folder), "params": vars(PARAMS), "summary": summary,
                          "files": [{k: v for k, v in r.items() if k != "examples"} for r in rows]})


if __name__ == "__main__":
    main()
