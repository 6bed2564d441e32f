"""Hybrid search (DESIGN §8): query embedding + vector search per collection, the FTS5 plan in
parallel, merge, filters, and ``retrieval_meta`` for every search.

``Searcher`` holds what is worth keeping between searches (collection handles, a reading connection
per collection for the keyword plan, IDF caches, WordNet); the daemon keeps one.
"""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Callable, Iterable, cast

from ragweedd import keyterms
from ragweedd.config import Config
from ragweedd.contract import Hit, RetrievalMeta, SearchResult
from ragweedd.embed.base import dense_languages
from ragweedd.embed.long import embed_texts
from ragweedd.errors import NotFoundError, RequestError
from ragweedd.logging import get_logger
from ragweedd.query.filters import Filters
from ragweedd.query.fts_plan import keyword_leg, known_item_rows, query_language
from ragweedd.query.hyde import HyDE, hyde_vector
from ragweedd.query.idf import IdfCache
from ragweedd.query.merge import FUSIONS, Candidate, FusionParams, finish, fuse
from ragweedd.query.named import rank_named
from ragweedd.query.semantic_cache import SemanticCache
from ragweedd.query.vectors import VectorSearch, vectors_of
from ragweedd.query.wordnet import open_wordnet, wordnet_status
from ragweedd.statements import headed_statements
from ragweedd.store.protocols import IdfCacheStore, KeywordReader, RagStore, StoreBackend

if TYPE_CHECKING:
    from collections.abc import Mapping

    import numpy as np

    from ragweedd.embed.base import Embedder
    from ragweedd.paths import Paths
    from ragweedd.query.fts_plan import Plan

log = get_logger("ragweedd.query")

MODES = ("hybrid", "dense", "keyword")


class _Collection:
    def __init__(self, rag: RagStore, fts: KeywordReader, cache: IdfCacheStore | None) -> None:
        self.rag = rag
        self.name = rag.collection
        # The keyword plan reads on its own connection so it can run beside the vector search; the
        # IDF cache's validity checks run on the keyword thread too, so they use it, never rag's.
        self.fts = fts
        self.fts_lock = threading.Lock()
        self.idf = IdfCache(rag.collection, self.fts, n_docs=self.fts.chunk_count, seq=self.fts.max_seq,
                            cache=cache, changes_since=self.fts.change_counts_after, version=self.fts.version)

    def close(self) -> None:
        self.fts.close()
        self.rag.close()


class Searcher:
    """Searches the collections of ``stores`` with ``vectors``, the process's shared VectorSearch
    (the daemon's live indexes, or a one-shot command's index files on disk): both are opened,
    and closed, by whoever built this (ragweedd/services.py)."""

    def __init__(self, cfg: Config, paths: Paths, embedder: Embedder, *, collections: Iterable[str] | None = None,
                 vectors: VectorSearch, stores: StoreBackend,
                 cache: SemanticCache | None = None, hyde: HyDE | None = None) -> None:
        """``cache``: the semantic search cache shared by the searchers of one Services (none for a
        one-shot search: it searches once). ``hyde``: the adaptive HyDE stage (query/hyde.py)."""
        self.vectors = vectors
        self.cfg = cfg
        self.paths = paths
        self.embedder = embedder
        self.cache = cache
        self.hyde = hyde
        self.stores = stores
        self.idf_cache = _open_cache(self.stores)
        opened = open_collections(self.stores, list(collections) if collections else None)
        self.collections = [_Collection(r, self.stores.open_keyword_reader(r.collection), self.idf_cache)
                            for r in opened]
        self.wordnet_status = wordnet_status(cfg)
        self.wordnet = open_wordnet(cfg)
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="fts")
        self._qvecs: dict[str, Any] = {}  # the eval asks the same query in several modes

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        for c in self.collections:
            c.close()
        if self.idf_cache is not None:
            self.idf_cache.close()

    def __enter__(self) -> "Searcher":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def search(self, query: str, *, filters: Filters | None = None, limit: int = 10, mode: str = "hybrid",  # noqa: C901 - the search line's stages in their order; the steps are methods below
               fusion: str | None = None, top_k: int | None = None,
               loop: asyncio.AbstractEventLoop | None = None) -> SearchResult:
        """{"results": [hit, ...], "retrieval_meta": {...}}. ``loop``: the event loop the search was
        started from, where the HyDE call runs (query/hyde.py)."""
        if mode not in MODES:
            raise RequestError(f"search mode {mode!r} is unknown", hint="use one of " + ", ".join(MODES))
        if not isinstance(query, str) or not query.strip():
            raise RequestError("the search query is empty", hint="give some words to search for")
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise RequestError(f"the number of results must be a whole number >= 1, not {limit!r}")
        cfg = self.cfg
        filters = filters or Filters()
        fusion = fusion or cfg.fusion
        if fusion not in FUSIONS:
            raise RequestError(f"fusion {fusion!r} is unknown", hint="use one of " + ", ".join(FUSIONS))
        depth = max(top_k or cfg.top_k, 1)
        # The keyword leg looks deeper than the vector leg: its extra candidates are cheap and
        # measured to help (docs/retrieval.md); an explicit top_k (the eval) sets both.
        fts_depth = max(top_k or cfg.fts_top_k, 1)
        t0 = time.perf_counter()
        cols = [c for c in self.collections if not filters.collections or c.name in filters.collections]
        if filters.collections:
            unknown = set(filters.collections) - {c.name for c in self.collections}
            if unknown:
                raise NotFoundError(f"collection(s) {', '.join(sorted(unknown))} not open in this search",
                                    action="list_collections")
        cache_key = versions = None
        if self.cache is not None:
            # filter lists are sets: their order changes nothing (cols keep the searcher's order)
            as_sets = sorted((k, sorted(v) if isinstance(v, list) else v) for k, v in filters.as_dict().items())
            cache_key = (mode, fusion, tuple(sorted(c.name for c in cols)), repr(as_sets), limit, depth, fts_depth)
            # read before the search runs: a write meanwhile leaves the entry older than the data
            versions = {c.name: c.rag.search_version() for c in cols}
            qvec0 = self._query_vector(query) if mode != "keyword" else None
            hit, cache_meta = self.cache.lookup(cache_key, versions, query, qvec0)
            if hit is not None:
                hit["retrieval_meta"].update(query=query, cache=cache_meta, filters=filters.as_dict(),
                                             timings_ms={"cache": _ms(t0), "total": _ms(t0)})
                hyde = hit["retrieval_meta"].get("hyde")
                if hyde:  # nothing was called this time: the stored search's cost is kept apart
                    hit["retrieval_meta"]["hyde"] = {**{k: v for k, v in hyde.items() if k in ("used", "gate",
                                                        "best_score", "best_score_after", "provider", "model")},
                                                     "calls": 0, "input_tokens": 0, "output_tokens": 0, "ms": 0,
                                                     "cached_from": hyde}
                return hit
        allowed = {c.name: filters.allowed_ids(c.rag) for c in cols}
        timings: dict[str, float] = {"filters": _ms(t0)}
        use_fts = mode in ("hybrid", "keyword") and cfg.fts_enabled
        fts_future = None
        if use_fts:
            fts_future = self._pool.submit(self._keyword, cols, query, fts_depth, allowed)
        cands: dict[tuple[str, int], Candidate] = {}
        qvec = None
        hyde_meta: dict[str, Any] | None = None
        if mode in ("hybrid", "dense"):
            # the primary and every extra embedding pass, best similarity per chunk (query/vectors.py)
            qvec, dense = self.vectors.dense_leg([c.rag for c in cols], query, self.embedder, depth, allowed,
                                                 timings, self._qvecs)
            if self.hyde is not None:
                qvec, dense, hyde_meta = self._hyde(cols, query, qvec, dense, depth, allowed, timings, loop)
            for (name, cid), sim in dense.items():
                cands[(name, cid)] = Candidate(name, cid, sim=sim, in_dense=True)
        fts_meta: dict[str, Any] = {}
        plans: dict[str, Any] = {}
        if fts_future is not None:
            kw, fts_meta, plans, timings["fts"], known = fts_future.result()
            for name, hits in kw.items():
                for cid, score in hits:
                    c = cands.get((name, cid))
                    if c is None:
                        c = cands[(name, cid)] = Candidate(name, cid)
                    c.bm25 = score
                    c.in_keyword = True
            for name, ids in known.items():
                for cid in ids:
                    c = cands.get((name, cid))
                    if c is None:  # outside the keyword leg's page: its BM25 is worked out below
                        c = cands[(name, cid)] = Candidate(name, cid)
                    c.known_item = True
        elif mode != "dense":
            fts_meta = {"skipped": "fts_enabled = false"}
        t = time.perf_counter()
        vectors_read: dict[tuple[str, int], Any] = {}
        if qvec is not None:
            self._fill_similarity(cols, cands, qvec, vectors_read)
        if mode == "hybrid" and fusion in ("zscore", "convex") and plans:
            self._fill_keyword_scores(cols, cands, plans)
            timings["keyword_scores"] = _ms(t)
        elif plans:  # only the known items the keyword leg's page left out lack their BM25
            self._fill_keyword_scores(cols, cands, plans, {k for k, c in cands.items() if c.known_item})
        language = self._language(cols, query, plans) if mode == "hybrid" or use_fts else ""
        # which languages the dense leg reads (passes are only looked at when it ran)
        dense_langs = dense_languages(cfg, self.embedder, self.vectors.passes.working()) if mode == "hybrid" else None
        dense_blind = mode == "hybrid" and not keyterms.covered(language, dense_langs)
        params = FusionParams.of(cfg, fusion, dense_blind=dense_blind)
        fuse(list(cands.values()), mode=mode, params=params)
        feedback = None
        if mode == "hybrid" and qvec is not None and cfg.dense_feedback > 0 and fusion in ("zscore", "convex"):
            feedback = self._dense_feedback(cols, cands, qvec, depth, allowed, plans, fusion, vectors_read)
            if feedback is not None:
                fuse(list(cands.values()), mode=mode, params=params)
        briefs = self._briefs(cols, cands)
        named = None
        if mode == "hybrid":
            named = rank_named(query, briefs, self._headings(cols), self._statement_chunks(cols, allowed))
        ranked, counts = finish(briefs, max_per_file=cfg.max_chunks_per_file,
                                min_score=cfg.min_score, limit=limit, keep_pct=cfg.pre_annotate_keep)
        results = self._full_hits(cols, ranked)
        timings["merge"] = _ms(t)
        timings["total"] = _ms(t0)
        meta: RetrievalMeta = {
            "query": query, "mode": mode, "fusion": fusion if mode == "hybrid" else None,
            "language": language or None,
            "dense_languages": sorted(dense_langs) if dense_langs is not None else "*", "dense_blind": dense_blind,
            "collections": [c.name for c in cols], "filters": filters.as_dict(), "top_k": depth,
            "fts_top_k": fts_depth if use_fts else None,
            "counts": {"dense": sum(1 for c in cands.values() if c.in_dense),
                       "keyword": sum(1 for c in cands.values() if c.in_keyword),
                       "known_items": sum(1 for c in cands.values() if c.known_item), **counts},
            "tier": {name: m.get("tier") for name, m in fts_meta.items()} if use_fts else None,
            "fts": fts_meta, "synonyms": self.wordnet_status, "timings_ms": timings,
            "dense_feedback": feedback, "named": named, "cache": None,
        }
        if hyde_meta is not None:
            meta["hyde"] = hyde_meta
        out: SearchResult = {"results": results, "retrieval_meta": meta}
        if self.cache is not None and versions is not None:
            # a search that fell back from a failed HyDE call is not kept: the next one tries again
            keep = not (hyde_meta or {}).get("error")
            meta["cache"] = {**cache_meta, "stored": keep}
            if keep:
                self.cache.store(cache_key, versions, query,
                                 self._qvecs.get(query.lower()) if mode != "keyword" else None, out)
        return out

    def word_stats(self, words: list[str], collections: list[str] | None = None) -> tuple[dict[str, int], int]:
        """How many chunks hold each word (through the keyword index and its IDF cache), summed
        over ``collections`` (every one searched when None), and how many chunks they have: what
        the follow-up rules (query/followup.py) weigh a word by."""
        dfs = dict.fromkeys(words, 0)
        n = 0
        for c in self.collections:
            if collections and c.name not in collections:
                continue
            with c.fts_lock:
                # the index holds terms: each word in its index form, read in the collection's language
                lang = query_language(" ".join(words), c.fts) if words else ""
                forms = {w: keyterms.index_form(w, lang) for w in words}
                got = c.idf.df([f for f in dict.fromkeys(forms.values()) if f]) if words else {}
                n += c.idf.n_docs
            for w, f in forms.items():
                dfs[w] = dfs.get(w, 0) + int(got.get(f, 0))
        return dfs, n

    def _query_vector(self, query: str) -> Any:
        """The primary embedder's vector of the query, kept where the dense leg looks for it."""

        key = query.lower()
        qvec = self._qvecs.get(key)
        if qvec is None:
            qvec = embed_texts(self.embedder, [key])[0]
            if len(self._qvecs) > 256:
                self._qvecs.clear()
            self._qvecs[key] = qvec
        return qvec

    def _hyde(self, cols: list[_Collection], query: str, qvec: np.ndarray, dense: dict[tuple[str, int], float],
              depth: int, allowed: Mapping[str, set[int] | None], timings: dict[str, float],
              loop: asyncio.AbstractEventLoop | None,
              ) -> tuple[np.ndarray, dict[tuple[str, int], float], dict[str, Any]]:
        """The dense leg again from the query's vector averaged with hypothetical passages', when
        the best cosine found is under the gate; otherwise (or when the LLM fails) as it was."""

        hy = self.hyde
        assert hy is not None
        best = max(dense.values()) if dense else None
        meta: dict[str, Any] = {"used": False, "gate": hy.gate,
                                "best_score": round(best, 6) if best is not None else None,
                                "provider": hy.provider, "model": hy.model}
        if best is not None and best >= hy.gate:
            return qvec, dense, meta
        t = time.perf_counter()
        out = hy.write(query, loop)
        meta.update(passages=len(out.passages), calls=out.calls, input_tokens=out.input_tokens,
                    output_tokens=out.output_tokens, ms=out.ms)
        if out.error is not None:
            log.warning("hyde_fallback", error=out.error, code=out.error_code)
            meta.update(error=out.error, error_code=out.error_code)
            timings["hyde"] = _ms(t)
            return qvec, dense, meta
        try:
            moved = hyde_vector(qvec, list(embed_texts(self.embedder, [p.lower() for p in out.passages])))
        except Exception as e:  # noqa: BLE001 - HyDE never fails the search
            meta.update(error=f"embedding the HyDE passages failed: {e}"[:300], error_code="embedder")
            timings["hyde"] = _ms(t)
            return qvec, dense, meta
        found: dict[tuple[str, int], float] = {}
        for c in cols:
            for cid, sim in self.vectors.search(c.rag, moved, depth, allowed=allowed[c.name]):
                found[(c.name, cid)] = sim
        meta["used"] = True
        meta["best_score_after"] = round(max(found.values()), 6) if found else None
        timings["hyde"] = _ms(t)
        return moved, found, meta

    def _keyword(self, cols: list[_Collection], query: str, depth: int,
                 allowed: Mapping[str, set[int] | None]) -> tuple[dict[str, list[tuple[int, float]]], dict[str, Any],
                 dict[str, Plan], float, dict[str, list[int]]]:
        t = time.perf_counter()
        out: dict[str, list[tuple[int, float]]] = {}
        metas: dict[str, Any] = {}
        plans: dict[str, Any] = {}
        known: dict[str, list[int]] = {}
        for c in cols:
            with c.fts_lock:
                hits, m, plan = keyword_leg(c.fts, query, c.idf, self.cfg, depth, wordnet=self.wordnet,
                                            synonym_status=self.wordnet_status, allowed=allowed[c.name])
                known[c.name] = known_item_rows(c.fts, plan, allowed[c.name])
            out[c.name] = hits
            metas[c.name] = m
            if not plan.skipped:
                plans[c.name] = plan
        return out, metas, plans, _ms(t), known

    @staticmethod
    def _language(cols: list[_Collection], query: str, plans: dict[str, Any]) -> str:
        """The language the query is read as: the keyword plan's (of the first collection that has
        one), else chosen among the languages of the collections' chunks."""
        for c in cols:
            plan = plans.get(c.name)
            if plan is not None:
                return str(plan.language)
        langs: dict[str, int] = {}
        for c in cols:
            with c.fts_lock:
                for lang, n in c.fts.languages().items():
                    langs[lang] = langs.get(lang, 0) + n
        return keyterms.detect(query, langs)

    def _fill_keyword_scores(self, cols: list[_Collection], cands: dict[tuple[str, int], Candidate],
                             plans: dict[str, Plan], only: set | None = None) -> None:
        """BM25 of the query's words for the chunks only the vector search found, so score
        fusion weighs every candidate on both legs (a chunk without any of the words keeps none);
        ``only``: just these candidates (known items the keyword leg's page left out)."""
        for c in cols:
            plan = plans.get(c.name)
            missing = [cid for (name, cid), cand in cands.items()
                       if name == c.name and cand.bm25 is None and not cand.words_scored
                       and (only is None or (name, cid) in only)]
            if plan is None or not missing:
                continue
            with c.fts_lock:
                scores = plan.scorer(c.fts).score_rows(c.fts, missing)
            for cid in missing:
                cand = cands[(c.name, cid)]
                cand.words_scored = True
                if scores.get(cid, 0.0) > 0:
                    cand.bm25 = scores[cid]

    def _dense_feedback(self, cols: list[_Collection], cands: dict[tuple[str, int], Candidate], qvec: np.ndarray,
                        depth: int, allowed: Mapping[str, set[int] | None], plans: dict[str, Plan], fusion: str,
                        vectors_read: dict) -> dict[str, Any] | None:
        """Rocchio on the query vector: it moves toward the mean stored vector of the first
        ``dense_feedback`` fused results (weight ``dense_feedback_weight``), the primary space is
        searched again with it, and every candidate's cosine becomes its cosine with the moved
        vector; first-round vector hits that only the old vector found leave. Measured +0.004
        nDCG@10 on SciFact train and +0.025 page hit@5 on FinanceBench dev (docs/retrieval.md)."""
        import numpy as np

        t = time.perf_counter()
        top = sorted(cands.values(), key=lambda c: -c.score)[:self.cfg.dense_feedback]
        q = np.asarray(qvec, dtype=np.float32)
        vecs = []
        for c in cols:
            ids = [x.chunk_id for x in top if x.collection == c.name]
            vecs += [v for v in vectors_of(c.rag, ids).values() if v.shape == q.shape] if ids else []
        if not vecs:
            return None
        moved = q + self.cfg.dense_feedback_weight * np.mean(vecs, axis=0)
        moved /= float(np.linalg.norm(moved)) or 1.0
        found: dict[tuple[str, int], float] = {}
        for c in cols:
            for cid, sim in self.vectors.search(c.rag, moved, depth, allowed=allowed[c.name]):
                found[(c.name, cid)] = sim
        for key in [k for k, cand in cands.items() if not (cand.in_keyword or cand.known_item) and k not in found]:
            del cands[key]
        for cand in cands.values():
            cand.sim, cand.in_dense, cand.dense_rank = None, False, None
        for (name, cid), sim in found.items():
            cand = cands.setdefault((name, cid), Candidate(name, cid))
            cand.sim, cand.in_dense = sim, True
        self._fill_similarity(cols, cands, moved, vectors_read)
        if fusion in ("zscore", "convex") and plans:
            self._fill_keyword_scores(cols, cands, plans)
        return {"results": len(top), "vectors": len(vecs), "weight": self.cfg.dense_feedback_weight,
                "ms": _ms(t)}

    def _fill_similarity(self, cols: list[_Collection], cands: dict[tuple[str, int], Candidate], qvec: np.ndarray,
                         seen: dict | None = None) -> None:
        """Cosines from stored vectors for the candidates the vector search did not score;
        ``seen`` keeps the vectors read, for the feedback round of the same search."""
        import numpy as np

        seen = {} if seen is None else seen
        q = np.asarray(qvec, dtype=np.float32)
        for c in cols:
            missing = [cid for (name, cid), cand in cands.items() if name == c.name and cand.sim is None]
            if not missing:
                continue
            unread = [cid for cid in missing if (c.name, cid) not in seen]
            if unread:
                vecs = vectors_of(c.rag, unread)
                seen.update(((c.name, cid), vecs.get(cid)) for cid in unread)
            for cid in missing:
                v = seen[(c.name, cid)]
                # a chunk whose vector is still pending has no cosine: the fusion treats it as unknown
                cands[(c.name, cid)].sim = float(v @ q) if v is not None and v.shape == q.shape else None

    def _briefs(self, cols: list[_Collection], cands: dict[tuple[str, int], Candidate]) -> list[dict[str, Any]]:
        """Every candidate with its scores and what ranking needs (file, text), one row each; the
        full hit (metadata, uri) is read only for what ranking returns (``_full_hits``)."""
        out = []
        for c in cols:
            ids = [cid for (name, cid) in cands if name == c.name]
            briefs = c.rag.briefs(ids)
            missing = [cid for cid in ids if cid not in briefs]
            full = c.rag.hits(missing) if missing else {}
            for cid in ids:
                b = briefs.get(cid)
                h: dict[str, Any] | None = {"embedding_id": cid, "collection": c.name, "doc_id": b[0],
                                            "source_file": b[1], "text": b[2], "pages": b[3]} \
                    if b is not None else full.get(cid)
                if h is None:  # deleted between retrieval and now
                    continue
                cand = cands[(c.name, cid)]
                h.update(score=cand.score, sim=cand.sim, bm25=cand.bm25, fts=cand.in_keyword,
                         dense_rank=cand.dense_rank, fts_rank=cand.fts_rank, known_item=cand.known_item)
                out.append(h)
        return out

    @staticmethod
    def _headings(cols: list[_Collection]) -> Callable[[str, list[int]], dict[int, str]]:
        by_name = {c.name: c for c in cols}

        def headings(name: str, ids: list[int]) -> dict[int, str]:
            return by_name[name].rag.headings(ids)
        return headings

    @staticmethod
    def _statement_chunks(cols: list[_Collection],
                          allowed: Mapping[str, set[int] | None]) -> Callable[[str, str, set[str]],
                          list[dict[str, Any]]]:
        by_name = {c.name: c for c in cols}

        def statement_chunks(name: str, doc_id: str, kinds: set[str]) -> list[dict[str, Any]]:
            ids = by_name[name].rag.chunk_ids_of(doc_id)
            keep = allowed.get(name)
            if keep is not None:
                ids = [i for i in ids if i in keep]
            heads = by_name[name].rag.headings(ids)
            ids = [i for i in ids if headed_statements(heads.get(i, "")) & kinds]
            briefs = by_name[name].rag.briefs(ids)
            return [{"embedding_id": i, "collection": name, "doc_id": briefs[i][0], "source_file": briefs[i][1],
                     "text": briefs[i][2], "pages": briefs[i][3]} for i in ids if i in briefs]
        return statement_chunks

    def _full_hits(self, cols: list[_Collection], results: list[dict[str, Any]]) -> list[Hit]:
        by_col: dict[str, list[int]] = {}
        for h in results:
            by_col.setdefault(h["collection"], []).append(h["embedding_id"])
        full: dict[tuple[str, int], dict[str, Any]] = {}
        for c in cols:
            if c.name in by_col:
                full.update(((c.name, cid), h) for cid, h in c.rag.hits(by_col[c.name]).items())
        out: list[Hit] = []
        for h in results:
            f = full.get((h["collection"], h["embedding_id"]))
            if f is None:  # deleted between ranking and now
                continue
            for k in ("score", "rel_score", "sim", "bm25", "fts", "dense_rank", "fts_rank", "rank", "annotate"):
                f[k] = h[k]
            # the store's place fields (store/rows.hit_fields) and the ranking just set make a Hit;
            # the API's response checks hold every search to that shape
            out.append(cast(Hit, f))
        return out

def _ms(t: float) -> float:
    return round((time.perf_counter() - t) * 1000, 3)


def _open_cache(stores: StoreBackend) -> IdfCacheStore | None:
    """The persistent IDF cache, with a short busy timeout: the cache must never make a search
    wait behind an ingest transaction."""
    try:
        return stores.open_idf_cache(timeout_s=0.05)
    except Exception as e:  # noqa: BLE001 - a search works without the cache
        log.info("idf_cache_off", error=str(e))
        return None


def open_collections(stores: StoreBackend, names: list[str] | None) -> list[RagStore]:
    """The named collections (every indexed one for None), opened; NotFoundError for one that has
    no index yet."""
    if names is None:
        names = stores.indexed_collections()
    out = []
    for n in names:
        if not stores.has_rag(n):
            raise NotFoundError(f"collection '{n}' has no index yet",
                                hint="ingest into it first: ragweedd ingest PATH --collection " + n)
        out.append(stores.open_rag(n))
    return out
