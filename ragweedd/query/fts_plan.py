"""The FTS5 plan of DESIGN §8: words -> IDF -> IC gate -> pruning -> synonyms -> two tiers.

1. The query's language is detected among the languages of the collection's chunks
   (ragweedd/keyterms.py), and its "words" are its index terms in that language, first occurrence
   kept: Snowball stems, character bigrams of scripts without spaces ("北京大学" -> 北京, 京大, 大学),
   accents folded: the form every chunk is indexed in. Each term remembers the query word it came
   from (``WordInfo.source``), which is what WordNet is asked about.
2. IDF per word from the collection's IdfCache (query/idf.py).
3. Mean IDF below FTS_MIN_QUERY_IC -> no keyword search (the reason is in the meta).
4. More than FTS_LONG_QUERY_THRESHOLD words -> only the top two thirds by IDF are kept, when
   ``fts_prune_long_queries`` is on (off by default: it cost 0.003 nDCG@10 on SciFact train).
5. Synonyms (English queries only: WordNet is English) from WordNet for words the collection does
   not contain (``synonyms_for = "absent"``, the default: synonyms of words it does contain cost
   0.017-0.03 nDCG@10 on SciFact train), or,
   with ``synonyms_for = "all"``, the original design's budget by IDF third (top
   SYNONYMS_MAX_PER_WORD, middle half of it, bottom 1; pruned words 0; a word the collection does
   not contain gets the full budget, since only its synonyms can match). Synonyms the collection
   does not contain are not used, nor are synonyms of numbers, of words in more than half the
   chunks, or one-letter/numeric synonyms.
6. Tier 1: AND of the kept words that occur at all; it is the answer when it fills the page
   (``limit`` rows). Tier 2: OR of kept words and synonyms, ranked by BM25 over the whole
   collection, which is plain BM25 whenever the postings budget below leaves no word out. The OR
   tier is the answer when it has at least MIN_TIER_HITS rows or more rows than the AND tier.

Safety: every word and synonym is reduced to alphanumeric runs and becomes a word or phrase of a
keyword query tree (store/types.py), which each backend renders itself (FTS5 quoted strings, tsquery
literals), so no operator (quotes, NEAR, *, ^, -, :, parentheses, AND/OR/NOT) can reach the index
from a query.

Speed (the OR tier): FTS5 scores every row that matches an OR, so its cost grows with the summed
document frequency of its terms (~250 ms for 6 common words at 500k chunks; measured here ~5 us per
posting under load, linear in the postings). The OR tier therefore takes its terms rarest first
while their summed df stays within FTS_OR_MAX_POSTINGS (the rarest term always goes in); the more
common terms left out are reported in the meta (MATCH itself is FtsReader.match). A row that holds
only the common words would rank low under BM25 anyway (their IDF is small), and the vector half
of hybrid search still sees it.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable

from ragweedd import keyterms
from ragweedd.config import Config
from ragweedd.logging import get_logger
from ragweedd.periods import spell_periods
from ragweedd.query.bm25 import Bm25Terms, fts5_idf
from ragweedd.query.idf import CACHE_MAX_DF_FRACTION, IdfCache, idf
from ragweedd.store.protocols import KeywordReader
from ragweedd.store.types import KeywordQuery, Terms, all_of, any_of, describe

if TYPE_CHECKING:
    from ragweedd.query.wordnet import WordNet

log = get_logger("ragweedd.query.fts")

MIN_TIER_HITS = 3
# Fewest rows the OR tier fetches when it adds the left-out words to their scores: adding them
# reorders the rows, and a short page would miss the ones that move up (measured: with a page of
# 32 rows, nDCG@10 0.673 fetching the page alone, 0.684 fetching twice it; from 128 rows on, a
# bigger fetch changes nothing).
RESCORE_MIN_ROWS = 128


def plan_words(query: str, lang: str) -> list[tuple[str, str]]:
    """(index term, the query word it comes from) of ``query`` read as language ``lang``, unique
    terms in query order; a one-word period ("FY2015") also brings the words it is written with in
    documents ("fiscal", "2015"), after the query's own."""
    query = query or ""
    texts = [query]
    spelled = spell_periods(query)
    if spelled != query:
        texts.append(spelled)
    out: dict[str, str] = {}
    for text in texts:
        for w in keyterms.words(text):
            for t in keyterms.terms(w, lang):
                out.setdefault(t, w)
    return list(out.items())


def query_words(query: str, lang: str = "en") -> list[str]:
    """The plan's words (index terms) of ``query`` read as language ``lang``."""
    return [t for t, _ in plan_words(query, lang)]


def phrase_of(text: str) -> Terms | None:
    """The word or phrase of an index form (terms joined by spaces, as ragweedd/keyterms.py makes
    them), made only of word characters (letters, digits, marks)."""
    words = keyterms.word_pattern().findall(text.lower())
    if not words:
        return None
    return Terms(tuple(words))


@dataclass
class WordInfo:
    word: str  # an index term (keyterms)
    df: int
    idf: float
    kept: bool = True
    source: str = ""  # the query word it comes from
    budget: int = 0
    synonyms: list[str] = field(default_factory=list)
    synonyms_df: list[tuple[str, int]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"word": self.word, "source": self.source or self.word, "df": self.df, "idf": round(self.idf, 4),
                "kept": self.kept, "synonym_budget": self.budget, "synonyms": self.synonyms}


@dataclass
class Plan:
    words: list[WordInfo]
    n_docs: int
    mean_idf: float
    skipped: str | None = None
    synonym_status: dict[str, Any] = field(default_factory=dict)
    language: str = ""  # the language the query was read as (keyterms.detect)
    _scorer: Bm25Terms | None = field(default=None, repr=False)

    @property
    def kept(self) -> list[WordInfo]:
        return [w for w in self.words if w.kept]

    def and_expr(self) -> KeywordQuery | None:
        parts = [p for p in (phrase_of(w.word) for w in self.kept if w.df > 0) if p is not None]
        return all_of(parts) if parts else None

    def or_terms(self) -> list[tuple[Terms, int]]:
        """(word or phrase, df) of kept words and synonyms that occur, without repeats."""
        out: dict[Terms, int] = {}
        for w in self.kept:
            if w.df > 0:
                s = phrase_of(w.word)
                if s:
                    out.setdefault(s, w.df)
            for syn, df in w.synonyms_df:
                s = phrase_of(syn)
                if s and df > 0:
                    out.setdefault(s, df)
        return list(out.items())

    def scorer(self, fts: KeywordReader) -> Bm25Terms:
        """FTS5's BM25 inputs for the plan's one-word terms (kept words and one-word synonyms that
        occur; a phrase synonym is scored only where MATCH finds it). Worked out once per plan:
        the OR tier and the fusion's scoring of vector hits both use it."""
        if self._scorer is not None:
            return self._scorer
        idf: dict[str, float] = {}
        for s, df in self.or_terms():
            if len(s.terms) == 1:
                idf.setdefault(s.terms[0], fts5_idf(df, self.n_docs))
        self._scorer = Bm25Terms(idf, fts.mean_row_tokens() if idf else 0.0)
        return self._scorer

    def meta(self) -> dict[str, Any]:
        return {"language": self.language, "words": [w.as_dict() for w in self.words], "n_docs": self.n_docs,
                "mean_idf": round(self.mean_idf, 4), "skipped": self.skipped,
                "kept": [w.word for w in self.words if w.kept],
                "dropped": [w.word for w in self.words if not w.kept],
                "synonyms": {w.source or w.word: w.synonyms for w in self.words if w.synonyms},
                "synonym_status": self.synonym_status}


def query_language(query: str, fts: KeywordReader) -> str:
    """The language ``query`` is read as in a collection: the likeliest of the languages its
    chunks are in (keyterms.detect)."""
    return keyterms.detect(query, fts.languages())


def make_plan(query: str, idf_cache: IdfCache, cfg: Config, wordnet: WordNet | None = None,
              synonym_status: dict | None = None,
              lang: str | None = None) -> Plan:
    if lang is None:
        lang = query_language(query, idf_cache.stats)
    pairs = plan_words(query, lang)
    words = [t for t, _ in pairs]
    status = synonym_status or {}
    if not words:
        return Plan([], 0, 0.0, skipped="the query has no words", synonym_status=status, language=lang)
    dfs = idf_cache.df(words)
    n = idf_cache.n_docs

    infos = [WordInfo(w, dfs[w], idf(dfs[w], n), source=src) for w, src in pairs]
    mean = sum(i.idf for i in infos) / len(infos)
    plan = Plan(infos, n, mean, synonym_status=status, language=lang)
    if n == 0:
        plan.skipped = "the collection has no keyword index rows"
        return plan
    if mean < cfg.fts_min_query_ic:
        plan.skipped = f"mean IDF {mean:.3f} < fts_min_query_ic {cfg.fts_min_query_ic}"
        log.info("fts_skipped_low_ic", query_words=len(words), mean_idf=round(mean, 3))
        return plan
    ranked = sorted(infos, key=lambda i: -i.idf)  # stable: ties keep query order
    if cfg.fts_prune_long_queries and len(infos) > cfg.fts_long_query_threshold:
        keep = math.ceil(len(infos) * 2 / 3)
        for i in ranked[keep:]:
            i.kept = False
    # WordNet is English: its synonyms of a German word would be English words, or wrong ones
    if wordnet is not None and cfg.synonyms_max_per_word > 0 and lang == "en":
        top = cfg.synonyms_max_per_word
        budgets = (top, math.ceil(top / 2), 1)
        for r, i in enumerate(ranked):
            if not i.kept or i.word.isdigit():
                i.budget = 0  # numbers: WordNet's "5" -> "v", "fin" only adds noise
            elif i.df == 0:
                i.budget = top
            elif cfg.synonyms_for == "absent":
                i.budget = 0
            elif i.df > CACHE_MAX_DF_FRACTION * n:
                i.budget = 0  # "a" -> "angstrom": synonyms of near-stopwords only add noise
            else:
                i.budget = budgets[min(2, (3 * r) // len(ranked))]
        _add_synonyms(plan, idf_cache, wordnet)
    return plan


def _add_synonyms(plan: Plan, idf_cache: IdfCache, wordnet: WordNet) -> None:
    asked: dict[str, list[tuple[str, str]]] = {}  # word -> (synonym as WordNet writes it, index form)
    for i in plan.words:
        if i.budget > 0:
            # WordNet knows words, the index holds terms: a synonym is matched by its English
            # index form ("shareholders" -> "sharehold") and shown as WordNet writes it
            asked[i.word] = [(s, f) for s in wordnet.synonyms(i.source or i.word)
                             if _usable_synonym(s) and (f := keyterms.index_form(s, "en"))]
    flat = list(dict.fromkeys(f for ss in asked.values() for _, f in ss))
    if not flat:
        return
    dfs = idf_cache.df(flat)
    query_strings = {phrase_of(w.word) for w in plan.words}
    for i in plan.words:
        for s, f in asked.get(i.word, []):
            if len(i.synonyms) >= i.budget:
                break
            if dfs.get(f, 0) > 0 and phrase_of(f) not in query_strings and (f, dfs[f]) not in i.synonyms_df:
                i.synonyms.append(s)
                i.synonyms_df.append((f, dfs[f]))


def _usable_synonym(s: str) -> bool:
    """Abbreviations and numbers from WordNet ("u.k.", "v", "5") match unrelated rows."""
    words = keyterms.words(s)
    return bool(words) and all(len(w) > 1 and not w.isdigit() for w in words)


def execute(fts: KeywordReader, plan: Plan, limit: int, *, max_postings: int,
            allowed: set[int] | None = None) -> tuple[list[tuple[int, float]], dict[str, Any]]:
    """Run the tiers; returns ([(chunk id, bm25 as a positive score)], meta)."""
    meta: dict[str, Any] = {"tier": None, "tiers": []}
    if plan.skipped:
        return [], meta

    def run(tier: int, query: KeywordQuery, want: int, extra: dict | None = None) -> list[tuple[int, float]]:
        t0 = time.perf_counter()
        # With a filter the rows outside it are dropped after MATCH, so ask for more of them.
        hits = fts.match(query, want if allowed is None else max(want * 8, 256))
        if allowed is not None:
            hits = [h for h in hits if h[0] in allowed]
        hits = hits[:want]
        meta["tiers"].append({"tier": tier, "match": describe(query), "hits": len(hits),
                              "ms": round((time.perf_counter() - t0) * 1000, 3), **(extra or {})})
        return hits

    expr = plan.and_expr()
    hits: list[tuple[int, float]] = []
    # The AND of the words holds no more rows than its rarest word: when that is under a page the
    # AND tier cannot be the answer, and its cost (FTS5 intersects every word's postings) is saved.
    rarest = min((w.df for w in plan.kept if w.df > 0), default=0)
    # With synonyms the OR tier holds terms the AND has not got, so a full AND page is not its answer.
    if expr and rarest >= limit and not any(w.synonyms for w in plan.kept):
        hits = run(1, expr, limit)
        # BM25 over the OR of the words ranks the rows holding all of them first, so a full page
        # of them is the OR tier's answer at a fraction of its cost; a partial page is not, and
        # the rows holding most of the words are what the OR tier adds.
        if len(hits) >= limit:
            meta["tier"] = 1
            return hits, meta
    terms = sorted(plan.or_terms(), key=lambda t: t[1])
    if not terms:
        meta["tier"] = 1 if hits else None
        return hits, meta
    chosen: list[KeywordQuery] = []
    left_out: list[Terms] = []
    total = 0
    for s, df in terms:
        if not chosen or total + df <= max_postings:
            chosen.append(s)
            total += df
        else:
            left_out.append(s)
    if any_of(chosen) == expr and (hits or rarest >= limit):
        meta["tier"] = 1 if hits else None  # one word and no synonyms: the OR tier is the AND tier
        return hits, meta
    # The words left out still count: the rows MATCH found get their BM25 share added (FTS5's
    # scores are sums over terms), which can reorder them, so at least RESCORE_MIN_ROWS rows are fetched.
    left_terms = [s.terms[0] for s in left_out if len(s.terms) == 1]
    or_hits = run(2, any_of(chosen), max(limit, RESCORE_MIN_ROWS) if left_terms else limit,
                  {"postings": total, "left_out_for_budget": [describe(s) for s in left_out],
                   "left_out_scored": left_terms})
    if left_terms and or_hits:
        t0 = time.perf_counter()
        extra = plan.scorer(fts).score_rows(fts, [i for i, _ in or_hits], left_terms)
        or_hits = sorted(((i, s + extra.get(i, 0.0)) for i, s in or_hits), key=lambda h: -h[1])[:limit]
        meta["tiers"][-1]["rescore_ms"] = round((time.perf_counter() - t0) * 1000, 3)
    if len(or_hits) >= MIN_TIER_HITS or len(or_hits) > len(hits):
        meta["tier"] = 2
        return or_hits, meta
    meta["tier"] = 1 if hits else None
    return hits, meta


def keyword_leg(fts: KeywordReader, query: str, idf_cache: IdfCache, cfg: Config, limit: int, *,
                wordnet: WordNet | None = None, synonym_status: dict | None = None,
                allowed: Iterable[int] | None = None) -> tuple[list[tuple[int, float]], dict[str, Any], Plan]:
    """The keyword leg of a search: (hits, meta, the plan, whose scorer can score more rows)."""
    t0 = time.perf_counter()
    limit = max(limit, MIN_TIER_HITS)  # below that no tier could ever count as having fired
    plan = make_plan(query, idf_cache, cfg, wordnet, synonym_status, lang=query_language(query, fts))
    t1 = time.perf_counter()
    hits, run_meta = execute(fts, plan, limit, max_postings=cfg.fts_or_max_postings,
                             allowed=set(allowed) if allowed is not None else None)
    t2 = time.perf_counter()
    meta = plan.meta()
    meta.update(run_meta)
    meta["timings_ms"] = {"plan": round((t1 - t0) * 1000, 3), "match": round((t2 - t1) * 1000, 3)}
    return hits, meta, plan


# A query word at most this many chunks hold marks a known-item search (an identifier, a code, a
# name): those chunks keep a place in the results whatever the vector leg thinks of them
# (query/merge.py). 3 is the default per-file cap, so one such word's chunks fit one file's places.
KNOWN_ITEM_MAX_DF = 3


def known_item_rows(fts: KeywordReader, plan: Plan, allowed: Iterable[int] | None = None) -> list[int]:
    """The chunks holding a kept query word that at most KNOWN_ITEM_MAX_DF chunks hold. The rows
    are read by MATCH, not taken from the keyword leg's page: a page of common words' matches can
    leave them out. The count is checked on the index itself (the cached df may be behind it)."""
    if plan.skipped:
        return []
    keep = set(allowed) if allowed is not None else None
    out: dict[int, None] = {}
    for w in plan.kept:
        expr = phrase_of(w.word)
        if not expr or not 0 < w.df <= KNOWN_ITEM_MAX_DF:
            continue
        rows = fts.match(expr, KNOWN_ITEM_MAX_DF + 1)
        if len(rows) > KNOWN_ITEM_MAX_DF:
            continue
        out.update((i, None) for i, _ in rows if keep is None or i in keep)
    return list(out)
