"""The sentences of the retrieved passages that best answer a question, with their exact place.

Every sentence of every passage (``sentences.split_sentences``) is scored by

    score = SEM_WEIGHT * cosine(question, sentence) + (1 - SEM_WEIGHT) * keyword(question, sentence)

where the cosine comes from the collection's embedder (all sentences in one batched call) and
``keyword`` is the share of the question's IDF mass the sentence holds: stemmed question words
(stop words dropped) weighted by their IDF over the candidate sentences themselves, so a word every
passage repeats counts little. A passage scores as its best sentence; passages below
``KEEP_RATIO`` x the best passage's score are not answers (docs/answers.md has the measurement that
chose the ratio). Without an embedder the score is the keyword part alone.

A quote is ``{text, span, lines, page_label, uri, score}``: ``text`` is exactly the document's text at
``span`` (the passage's own span moved by the sentence's offset; both in the extracted text's
coordinates), ``lines`` are counted from the passage's first line as editors count them, and a quote
in a passage that runs over two pages gets its own page when the passage's page joins or another
retrieved passage of the same document pin where the page turns, else the passage's page range.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence
from urllib.parse import quote as pct

from ragweedd.answer.sentences import split_sentences
from ragweedd.embed.long import embed_texts
from ragweedd.errors import EmbedderError
from ragweedd.keyterms import terms, unspaced_in
from ragweedd.logging import get_logger
from ragweedd.periods import spell_periods
from ragweedd.statements import headed_statements, named_statements

if TYPE_CHECKING:
    import numpy as np

log = get_logger(__name__)

SEM_WEIGHT = 0.5
KEEP_RATIO = 0.6  # passages whose best sentence scores below this share of the best one's are dropped
RANK_PRIOR = 0.1  # the search's first passage counts 10% more, its second 5%, ... (``kept``)
# How much the search's own relevance (``rel_score``, 1 for its best hit) weighs in the order and
# the keep rule of the passages: the search saw what one sentence cannot (the company and the year
# a question names, both legs, the statement); a passage the search ranks at rel r counts
# (1 - REL_WEIGHT + REL_WEIGHT * r) of its sentences' score.
REL_WEIGHT = 0.5
# A passage whose best sentence scores below this answers nothing, whatever the others score; with
# none above it the answer says the documents do not answer (docs/answers.md has the measurement).
ANSWER_FLOOR = 0.25
# The floor holds for the embedder it was measured with: other models' cosines run on other scales
# (some far lower for texts that do match), so with them only the relative rule applies.
FLOOR_EMBEDDERS = ("local:all-minilm-l6-v2",)


def answer_floor(embedder: Any) -> float:
    """The absolute floor for answers scored with ``embedder`` (0: none)."""
    return ANSWER_FLOOR if str(getattr(embedder, "id", "") or "").startswith(FLOOR_EMBEDDERS) else 0.0
# Which lines of a table's passage are quoted leans on their words: a short row of figures reads
# alike to the embedder whatever its label ("Total current assets" and "Property, plant and
# equipment, net" against a question on net PP&E), and the table's title line alike to any question
# on the statement, while a row's label says which row it is.
ROW_SEM_WEIGHT = 0.25
QUOTE_RATIO = 0.75  # within a kept passage, sentences this close to its best are quoted as well
QUOTES_PER_SOURCE = 3
MIN_WORDS = 3  # shorter pieces (headings, "1.", table rules) are quoted only when nothing else is there
MAX_SENTENCES = 400  # the embedding batch of one answer is bounded whatever top_k asks for

_WORD = re.compile(r"\w+", re.UNICODE)
_STOP = frozenset("""
a an the and or but if then else of to in on at by for with from into onto over under about as is are
was were be been being am do does did doing done have has had having i me my we our you your he him his
she her it its they them their this that these those what which who whom whose when where why how
can could should would will shall may might must not no nor so than too very just also there here
any all some each every more most other such only own same both few much many out up down off again
""".split())


def words(text: str) -> list[str]:
    """Lower-cased, stemmed content words; a period such as "FY2015" counts as "fiscal" and "2015".
    A run of a script written without spaces (Chinese, Japanese, Thai) gives its character bigrams,
    as the keyword index does (keyterms.terms): one "word" per run would match nothing."""
    out = []
    for w in _WORD.findall(spell_periods(text.lower())):
        if w in _STOP:
            continue
        if unspaced_in(w):
            out.extend(terms(w))
        else:
            out.append(_stem(w))
    return out


def word_count(text: str) -> int:
    """Words of ``text``, a run without spaces counted as its characters over two (about its words)."""
    return sum(max(1, len(w) // 2) if unspaced_in(w) else 1 for w in _WORD.findall(text))


def statement_terms(kinds: set[str]) -> set[str]:
    """One term per financial statement, which no word of a text can be."""
    return {f"statement:{k}" for k in kinds}


def _stem(w: str) -> str:
    # A light suffix stripper rather than the index's porter stemmer (store/sqlite/fts_reader.py): the keep
    # ratio was measured with it, and porter listed one more wrong passage on the paragraph set.
    if len(w) <= 3:
        return w
    for suf, rep in (("ies", "y"), ("sses", "ss"), ("ing", ""), ("edly", ""), ("ed", ""), ("ly", ""),
                     ("es", ""), ("s", "")):
        if w.endswith(suf) and len(w) - len(suf) >= 3:
            if (suf == "s" and w.endswith(("ss", "us", "is"))) or (suf == "ed" and w.endswith("eed")):
                return w  # "glass", "virus", "speed" keep their ending
            return w[: len(w) - len(suf)] + rep
    return w


@dataclass
class Sentence:
    hit: int  # index into the hits
    start: int  # offsets into the hit's text
    end: int
    terms: set[str] = field(default_factory=set)
    words: int = 0
    partial: bool = False  # cut by the passage's start or end
    lead: int = -1  # where its quote starts when the piece before it must come along (see _lead)
    sim: float = 0.0
    keyword: float = 0.0
    score: float = 0.0
    own: set[str] = field(default_factory=set)  # its own words, without its passage's title and heading
    row: bool = False  # in a table's passage: a row ("Label | Header: value | ...") or its title
    title: bool = False  # a table's title line, which names what its rows are and answers nothing
    pick: float = 0.0  # the score on its own words: which sentences of one passage are quoted


def candidates(hits: Sequence[dict]) -> list[Sentence]:
    out: list[Sentence] = []
    for i, h in enumerate(hits):
        text = h.get("text") or ""
        mine = []
        spans = split_sentences(text)
        # what the passage is under names the subject its sentences leave out: a table's rows carry
        # their table's title ("Zephyr Tools statement of operations"), prose its section heading
        heading = " ".join(str(h.get(k) or "") for k in ("table_title", "section"))
        around = set(words(heading)) | statement_terms(headed_statements(heading))
        # a table's chunks (and a sheet's) are cut between whole rows (chunker.table_spans), so a
        # row at either end of one is whole, however it ends ("Property, plant and equipment, net | 2018:
        # 12,645" as a balance sheet's last row in the passage)
        rows = h.get("table") is not None or h.get("sheet") is not None or bool(h.get("rows"))
        titled = set(words(str(h.get("table_title") or ""))) | {"sheet"}
        for k, (a, b) in enumerate(spans):
            seg = text[a:b]
            partial = not rows and ((k == 0 and _starts_mid_sentence(h, text, a)) or
                                    (k == len(spans) - 1 and k > 0 and _ends_mid_sentence(text, a, b)))
            lead = _lead(text, spans, k) if not partial else -1
            # a row is told by its own words: the title line it brings along (the company's
            # name) would make the row under the title the best of every question on the table
            own = set(words(text[lead if lead >= 0 and not rows else a:b]))
            # a line of a table's passage that only repeats its title answers nothing a row does not
            title = rows and "|" not in seg and set(words(seg)) <= titled
            mine.append(Sentence(i, a, b, own | around, word_count(seg), partial, lead, own=own,
                                 row=rows, title=title))
        full = [c for c in mine if c.words >= MIN_WORDS and not c.partial and not c.title]
        out.extend(full or mine)
    return out[:MAX_SENTENCES]


# A sentence that opens by pointing back ("This group ...", "It ...") names its subject before it.
_BACKREF = re.compile(r"(?:This|These|That|Those|It|Its|They|Their|Such|Both|Here|There)\b(?!-)")
LEAD_WORDS = 8  # a line above at most this long, without closing punctuation, is a heading or a term
BACKREF_WORDS = 40  # the sentence a back-reference needs is brought along up to this length


def _lead(text: str, spans: list[tuple[int, int]], k: int) -> int:
    """Where a quote of sentence ``k`` starts when it cannot stand alone, else -1: at the line
    directly above it when that is a heading or a definition list's term ("libvirt" above "Access
    to the system libvirt daemon is controlled by this group."), or at the sentence before it in
    the same paragraph when it opens by pointing back to it ("This ...", "It ..."). A title above a
    blank line is left out: the sentences below it name their subject or point back to it."""
    if k == 0:
        return -1
    a = spans[k][0]
    pa, pb = spans[k - 1]
    between, prev = text[pb:a], text[pa:pb]
    n = len(_WORD.findall(prev))
    breaks = _breaks(between)
    if breaks == 1 and 1 <= n <= LEAD_WORDS and not re.search(r"[.!?;,]['\"”’)\]]*$", prev):
        if "|" not in prev and "\t" not in prev:  # a table row is no heading
            return pa
    if breaks <= 1 and _BACKREF.match(text, a) and n <= BACKREF_WORDS and re.search(r"[.!?]['\"”’)\]]*$", prev):
        return pa
    return -1


_OPENS = re.compile(r"[A-Z\u00C0-\u00DE\u0391-\u03A9\u0410-\u042F•*#>\-–(\[\"“'‘]|\d+[.)]\s|$")


def _starts_mid_sentence(hit: dict, text: str, a: int) -> bool:
    """A passage after the first of its document that opens with a lower-case word, a bare number
    or closing punctuation began inside a sentence ("6 Notes, the ...", '"Board"), each ...')."""
    if not hit.get("chunk_idx") or text[:a].strip():
        return False
    # a letter of a script without case (Chinese, Arabic, Hindi) cannot tell: it counts as a start
    c = text[a:a + 1]
    return not (_OPENS.match(text, a) or not c.isascii() and (c.isupper() or c.isalpha() and not c.islower()))


def _ends_mid_sentence(text: str, a: int, b: int) -> bool:
    """The last piece of a passage that stops without a sentence's end, where the chunk was cut."""
    return not text[b:].strip() and not re.search(r"[.!?…:;)\]\"”'’。！？؟।」』）]\s*$", text[a:b])


def score(query: str, hits: Sequence[dict], cands: list[Sentence], embedder: Any = None) -> None:
    """Fill ``sim``, ``keyword`` and ``score`` of every candidate."""
    if not cands:
        return
    # a question that names a statement ("the balance sheet") is answered by its rows, whose
    # table title may name it otherwise ("Statements of Financial Position")
    qterms = set(words(query)) | statement_terms(named_statements(query))
    n = len(cands)
    df = {t: sum(1 for c in cands if t in c.terms) for t in qterms}
    idf = {t: math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5)) for t in qterms}
    mass = sum(idf.values())
    for c in cands:
        c.keyword = sum(idf[t] for t in qterms & c.terms) / mass if mass else 0.0
    sims = _similarities(query, hits, cands, embedder) if embedder is not None else None
    for k, c in enumerate(cands):
        own = sum(idf[t] for t in qterms & c.own) / mass if mass else 0.0
        if sims is None:
            c.score, c.pick = c.keyword, own
        else:
            c.sim = max(0.0, float(sims[k]))
            c.score = SEM_WEIGHT * c.sim + (1 - SEM_WEIGHT) * c.keyword
            w = ROW_SEM_WEIGHT if c.row else SEM_WEIGHT
            c.pick = w * c.sim + (1 - w) * own


def _similarities(query: str, hits: Sequence[dict], cands: list[Sentence], embedder: Any) -> np.ndarray | None:
    texts = [query.lower()] + [(hits[c.hit].get("text") or "")[c.start:c.end] for c in cands]
    try:
        vecs = embed_texts(embedder, texts)
    except EmbedderError as e:
        # the answer still stands on keywords; the search that found these passages already worked
        log.warning("quote_embedding_failed", error=str(e))
        return None
    return vecs[1:] @ vecs[0]


def rank_passages(query: str, hits: Sequence[dict], embedder: Any = None) -> tuple[list[float], list[Sentence]]:
    """(each hit's score = its best sentence's, the scored candidates)."""
    cands = candidates(hits)
    score(query, hits, cands, embedder)
    best = [0.0] * len(hits)
    for c in cands:
        best[c.hit] = max(best[c.hit], c.score)
    return best, cands


def kept(scores: Sequence[float], ratio: float = KEEP_RATIO, rels: Sequence[float | None] | None = None) -> list[int]:
    """Indices of the passages within ``ratio`` of the best, best first. ``scores`` are in the
    search's order, and that order counts a little (RANK_PRIOR): the search weighed what the
    sentences cannot show (both legs, the year a file is named for, the statement a question
    names), so of passages the sentences score about alike the search's first comes first.
    ``rels``, the search's relevance of each (``rel_score``), weighs as REL_WEIGHT says."""
    if not scores:
        return []
    if rels is not None and REL_WEIGHT:
        scores = [s * (1 - REL_WEIGHT + REL_WEIGHT * (1.0 if r is None else max(0.0, min(1.0, r))))
                  for s, r in zip(scores, rels)]
    top = max(scores)
    order = sorted(range(len(scores)), key=lambda i: -scores[i] * (1 + RANK_PRIOR / (1 + i)))
    # nothing scored at all (no shared word, no embedder): the retrieval order stands, all kept
    return [i for i in order if scores[i] >= ratio * top]


def quotes_for(i: int, hits: Sequence[dict], cands: list[Sentence], *, limit: int = QUOTES_PER_SOURCE,
               ratio: float = QUOTE_RATIO, skip: set[tuple] | None = None) -> list[dict]:
    """The quotes of hit ``i``: its best sentence and those close to it, in reading order;
    ``skip`` holds (doc_id, (start, end)) of document spans already quoted."""
    # the passage's title and heading are every sentence's: its sentences are told apart on their own words
    mine = sorted((c for c in cands if c.hit == i and not (skip and _overlaps(_key(hits[i], c), skip))),
                  key=lambda c: -c.pick)
    if not mine:
        return []
    top = mine[0].pick
    chosen = [c for c in mine[:limit] if c.pick >= ratio * top or c is mine[0]]
    out, end = [], -1
    for c in sorted(chosen, key=lambda c: c.start):
        # the piece a quote brings along is left out when the quote before already holds it
        out.append(make_quote(hits[i], c, hits, lead=c.lead >= 0 and c.lead >= end))
        end = c.end
    return out


def attach(query: str, hits: list[dict], embedder: Any = None) -> list[dict]:
    """Copies of ``hits`` each carrying ``quotes`` and ``quote`` (its best sentence), for sources
    an LLM answer cites: every passage keeps its place, only the quotes are added."""
    _, cands = rank_passages(query, hits, embedder)
    out = []
    for i, h in enumerate(hits):
        qs = quotes_for(i, hits, cands, limit=1)
        out.append({**h, "quotes": qs, "quote": qs[0] if qs else None})
    return out


def _overlaps(key: tuple | None, skip: set[tuple]) -> bool:
    """Whether a document span is (mostly) one already quoted: overlapping passages split the same
    sentence at different places, so the spans differ while the sentence is the same."""
    if key is None:
        return False
    doc, (a, b) = key
    for d, (x, y) in skip:
        if d == doc and min(b, y) - max(a, x) >= 0.5 * min(b - a, y - x):
            return True
    return False


def _key(hit: dict, c: Sentence) -> tuple | None:
    span = hit.get("span") or [None]
    if not isinstance(span[0], int):
        return None
    return hit.get("doc_id"), (span[0] + c.start, span[0] + c.end)


# --------------------------------------------------------------------------- place of a quote
def make_quote(hit: dict, c: Sentence, hits: Sequence[dict] = (), *, lead: bool = True) -> dict:
    text = hit.get("text") or ""
    span = hit.get("span") or [None, None]
    base = span[0] if isinstance(span[0], int) else None
    start = c.lead if lead and c.lead >= 0 else c.start
    q_span = [base + start, base + c.end] if base is not None else None
    lines = _lines_of(hit, text, start, c.end)
    page = _page_of(hit, q_span, hits, c.start)
    return {"text": text[start:c.end], "lead": c.start - start, "span": q_span, "lines": lines,
            "page_label": page if page is not None else hit.get("page_label"),
            "uri": _uri(hit, page, lines), "score": round(c.score, 4)}


def _breaks(seg: str) -> int:
    # as the chunker counts lines: "\n", "\r\n" and a lone "\r" each end one
    return seg.count("\n") + seg.count("\r") - seg.count("\r\n")


def _lines_of(hit: dict, text: str, a: int, b: int) -> list[int] | None:
    lines = hit.get("lines")
    if not lines:
        return None
    # a sentence starts and ends on a visible character, so neither cut splits a "\r\n"
    first = lines[0] + _breaks(text[:a])
    last = lines[0] + _breaks(text[:b - 1])
    return [min(first, lines[-1]), min(last, lines[-1])]


_PAGE_JOIN = re.compile(r"\n[ \t]*\n")


def _page_of(hit: dict, span: list[int] | None, hits: Sequence[dict], offset: int = 0) -> str | None:
    """The page of a quote when it can be told: the passage's only page; in a passage over several
    pages, the page its blank lines tell (PDF pages are joined by a blank line, so a passage over
    k pages with k - 1 blank lines turns a page at each, and a sentence never crosses one), else
    the page another retrieved passage of the document proves the span lies on."""
    pages = hit.get("pages") or []
    if len(pages) == 1:
        return str(pages[0])
    if len(pages) < 2:
        return None
    text = hit.get("text") or ""
    turns = [m.start() for m in _PAGE_JOIN.finditer(text)]
    if len(turns) == len(pages) - 1:
        return str(pages[sum(1 for t in turns if t < offset)])
    if span is None:
        return None
    lo, hi = pages[0], pages[-1]
    for other in hits:
        o_pages, o_span = other.get("pages") or [], other.get("span") or [None, None]
        if (other is hit or other.get("doc_id") != hit.get("doc_id") or not o_pages
                or not isinstance(o_span[0], int) or not isinstance(o_span[1], int)):
            continue
        # text in a passage that ends on page p is on page <= p; text after one that starts on p is >= p
        if span[1] <= o_span[1]:
            hi = min(hi, max(o_pages))
        if span[0] >= o_span[0]:
            lo = max(lo, min(o_pages))
    if lo == hi:
        return str(lo)
    return f"{lo}-{hi}" if lo < hi else None


def _uri(hit: dict, page: str | None, lines: list[int] | None) -> str:
    """The hit's uri with the fragment narrowed to the quote (page or lines); a time range stays the
    passage's (a sentence has no time of its own)."""
    uri = hit.get("uri") or ""
    if not uri or hit.get("t_start") is not None:
        return uri
    base, _, frag = uri.partition("#")
    if page is not None and "-" not in page:
        return f"{base}#page={page}"
    if hit.get("pages"):
        return uri
    anchor = ""
    if lines:
        anchor = f"L{lines[0]}" if lines[0] == lines[-1] else f"L{lines[0]}-L{lines[-1]}"
    if frag.startswith("member="):
        member = frag.split("&", 1)[0]
        return f"{base}#{member}" + (f"&{anchor}" if anchor else "")
    if hit.get("member"):
        return f"{base}#member={pct(hit['member'])}" + (f"&{anchor}" if anchor else "")
    return f"{base}#{anchor}" if anchor else base
