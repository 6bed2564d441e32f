"""How the keyword and vector legs are best merged: every fusion variant on SciFact train and
FinanceBench dev, from one collection of each leg's candidates per query.

    .venv/bin/python benchmarks/fusion.py --scifact-workdir W1 --financebench-workdir W2 [--out fusion]

W1 is a folder ``benchmarks/scifact.py --workdir W1`` (or ``ragweedd eval beir --workdir``) has
ingested SciFact into; W2 one ``benchmarks/financebench.py --workdir W2`` has ingested the filings
into. Per query the real code collects the dense leg (the primary space, 300 deep), the keyword leg
(query/fts_plan.py, 300 deep), the stored cosine of every keyword candidate and the BM25 of every
dense candidate (query/bm25.py); each variant then ranks those candidates with the real fusion
(query/merge.py: fuse) and is scored: SciFact nDCG@10 by best chunk per document, FinanceBench
document and page hit@5 after the per-file cap and dedup (merge.finish), as the search serves.

Variants: RRF (equal, weighted), convex (over the keyword leg's own list, and with every candidate's
BM25), zscore at several weights, per-leg depth, RM3-style expansion of the keyword leg, Rocchio
feedback on the query vector, and a document-level bonus for further matching chunks of a file.
Prints a table, writes JSON.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._common import SCIFACT, table, write_json  # noqa: E402

FINANCEBENCH = SCIFACT.parent / "financebench"
DEPTH = 300


def collect(services, collection: str, queries: list[tuple[str, str]]) -> dict[str, Any]:
    """{qid: legs} through the real keyword plan, vector search and BM25 scorer."""
    import numpy as np

    from ragweedd.embed.long import embed_texts
    from ragweedd.query.fts_plan import keyword_leg
    from ragweedd.query.vectors import vectors_of

    s = services.searcher([collection])
    c = s.collections[0]
    out = {}
    for qid, text in queries:
        kw, meta, plan = keyword_leg(c.fts, text, c.idf, services.cfg, DEPTH, wordnet=s.wordnet,
                                  synonym_status=s.wordnet_status)
        qv = np.asarray(embed_texts(s.embedder, [text.lower()])[0], dtype=np.float32)
        dense = s.vectors.search(c.rag, qv, DEPTH)
        have = {i for i, _ in dense}
        vecs = vectors_of(c.rag, [i for i, _ in kw if i not in have])
        sims = {i: float(v @ qv) for i, v in vecs.items()}
        kwids = {i for i, _ in kw}
        bm25 = {} if plan.skipped else plan.scorer(c.fts).score_rows(c.fts, [i for i, _ in dense if i not in kwids])
        out[qid] = {"dense": dense, "keyword": kw, "sims": sims, "bm25": bm25, "qvec": qv,
                    "keyword_rm3": rm3(c, kw, meta, plan)}
    return {"legs": out, "searcher": s, "collection": c}


def rm3(c, kw: list[tuple[int, float]], meta: dict, plan, feedback: int = 10, terms: int = 10,
        query_weight: int = 3) -> list[tuple[int, float]]:
    """RM3-style expansion of the keyword leg: the terms that weigh most in the top ``feedback``
    keyword hits (each hit's term frequencies over its length, weighted by its share of the best
    score; terms in more than a tenth of the chunks left out) join the query's OR, whose own terms
    are repeated ``query_weight`` times (FTS5's bm25() sums over the expression's terms, so a repeat
    is a weight)."""
    from ragweedd.store.sqlite.fts_reader import STEMMER
    from ragweedd.store.types import AnyOf, Terms

    tiers = meta.get("tiers") or []
    if plan.skipped or not kw or not tiers:
        return kw
    n = max(plan.n_docs, 1)
    own = {t for w in plan.words for t in STEMMER.terms(w.word)}
    top = kw[:feedback]
    texts = c.rag.briefs([i for i, _ in top])
    weights: dict[str, float] = {}
    for i, score in top:
        toks = STEMMER.terms(texts[i][2]) if i in texts else ()
        for t in set(toks):
            if t not in own and not t.isdigit() and len(t) > 2:
                weights[t] = weights.get(t, 0.0) + toks.count(t) / len(toks) * score / top[0][1]
    chosen = [t for t, _ in sorted(weights.items(), key=lambda x: -x[1])[:50]
              if 0 < c.fts.df_term(t) <= n / 10][:terms]
    if not chosen:
        return kw
    own_terms = tuple(s for s, _ in plan.or_terms())
    return c.fts.match(AnyOf(own_terms * query_weight + tuple(Terms((t,)) for t in chosen)), DEPTH)


def fused(legs: dict, params, *, dense_depth: int = 64, kw_depth: int = 128, full: bool = True,
          qvec=None, ctx=None) -> list[tuple[int, float]]:
    from ragweedd.query.merge import Candidate, fuse

    cands: dict[int, Candidate] = {}
    dense = legs["dense"][:dense_depth]
    sims = dict(legs["sims"])
    if qvec is not None:  # Rocchio: the dense leg searched again with the moved vector
        dense = ctx["searcher"].vectors.search(ctx["collection"].rag, qvec, dense_depth)
        sims = ctx["cos"](qvec)
    for i, sim in dense:
        cands[i] = Candidate("c", i, sim=sim, in_dense=True)
    for i, b in legs["keyword"][:kw_depth]:
        cand = cands.setdefault(i, Candidate("c", i, sim=sims.get(i)))
        cand.bm25, cand.in_keyword = b, True
    if full:
        for i, cand in cands.items():
            if cand.bm25 is None and legs["bm25"].get(i):
                cand.bm25 = legs["bm25"][i]
    fuse(list(cands.values()), mode="hybrid", params=params)
    return sorted(((i, c.score) for i, c in cands.items()), key=lambda x: -x[1])


def doc_bonus(ranked: list[tuple[int, float]], doc_of: Callable[[int], str], bonus: float) -> list[tuple[int, float]]:
    """A file's chunks each get ``bonus`` x (the file's next two best scores' sum over its best)."""
    by: dict[str, list[float]] = {}
    for i, s in ranked:
        by.setdefault(doc_of(i), []).append(s)
    extra = {}
    for d, ss in by.items():
        top = ss[0] if ss[0] else 1.0
        extra[d] = bonus * abs(top) * sum(x / top for x in ss[1:3]) if len(ss) > 1 else 0.0
    return sorted(((i, s + extra[doc_of(i)]) for i, s in ranked), key=lambda x: -x[1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scifact-workdir", required=True)
    ap.add_argument("--financebench-workdir", required=True)
    ap.add_argument("--out", default="fusion")
    a = ap.parse_args(argv)

    import numpy as np

    from ragweedd.cli.common import make_embedder
    from ragweedd.config import load_config
    from ragweedd.eval import beir
    from ragweedd.eval.metrics import summarise
    from ragweedd.eval.questions import load as load_questions
    from ragweedd.eval.questions import ranks
    from ragweedd.query.merge import FusionParams, finish
    from ragweedd.query.vectors import vectors_of
    from ragweedd.services import open_oneshot

    base = load_config(text="", env={})
    emb = make_embedder(base)
    # SciFact, in the eval's scratch collection
    ds = beir.load(SCIFACT, "train")
    sw = Path(a.scifact_workdir)
    scfg = beir.with_overrides(base, data_dir=str(sw / "data"), state_dir=str(sw / "state"),
                               cache_dir=str(sw / "cache"))
    sf_services = open_oneshot(scfg, embedder=emb)
    sf = collect(sf_services, "eval", [(q, ds.queries[q]) for q in sorted(ds.qrels)])
    names = {beir.file_name(d): d for d in ds.corpus}
    sf_hits = sf["collection"].rag.hits(sorted({i for x in sf["legs"].values() for i, _ in x["dense"] + x["keyword"]}))
    sf_doc = {i: names.get(h["filename"], "") for i, h in sf_hits.items()}
    # FinanceBench, in financebench.py's collection
    fw = Path(a.financebench_workdir)
    fcfg = load_config(fw / "ragweedd.toml", env={})
    fb_services = open_oneshot(fcfg, embedder=emb)
    questions = load_questions(FINANCEBENCH / "questions.jsonl")
    fb = collect(fb_services, "fb", [(q.id, q.query) for q in questions])
    hit_cache: dict[int, dict] = {}

    def cos_fn(ctx):
        def cos(qv):
            ids = sorted({i for x in ctx["legs"].values() for i, _ in x["keyword"]})
            missing = [i for i in ids if i not in ctx.setdefault("vecs", {})]
            ctx["vecs"].update(vectors_of(ctx["collection"].rag, missing))
            return {i: float(v @ qv) for i, v in ctx["vecs"].items()}
        return cos

    sf["cos"], fb["cos"] = cos_fn(sf), cos_fn(fb)

    def rocchio(ctx, legs, params, weight=0.3, n=5):
        first = fused(legs, params)
        vecs = vectors_of(ctx["collection"].rag, [i for i, _ in first[:n]])
        qv = legs["qvec"] + weight * np.mean(list(vecs.values()), axis=0)
        return fused(legs, params, qvec=qv / np.linalg.norm(qv), ctx=ctx)

    def score_sf(rank: Callable[[dict, Any], list]) -> float:
        runs = {}
        for q, legs in sf["legs"].items():
            seen: list[str] = []
            for i, _ in rank(legs, sf):
                d = sf_doc.get(i) or sf_hits.get(i, {}).get("filename") or ""
                if d and d not in seen:
                    seen.append(d)
            runs[q] = seen[:100]
        return summarise(runs, {q: ds.qrels[q] for q in runs}, samples=200)["ndcg@10"]["mean"]

    def score_fb(rank: Callable[[dict, Any], list]) -> tuple[float, float]:
        d5 = p5 = paged = 0
        for q in questions:
            ranked = rank(fb["legs"][q.id], fb)[:400]
            need = [i for i, _ in ranked if i not in hit_cache]
            hit_cache.update(fb["collection"].rag.hits(need) if need else {})
            hs = [dict(hit_cache[i], score=s) for i, s in ranked if i in hit_cache]
            out, _ = finish(hs, max_per_file=base.max_chunks_per_file, min_score=0.0, limit=10, keep_pct=100)
            doc, page = ranks(q, out)
            d5 += bool(doc and doc <= 5)
            if q.has_pages:
                paged += 1
                p5 += bool(page and page <= 5)
        return d5 / len(questions), p5 / max(paged, 1)

    def p(fusion, **kw):
        return dataclasses.replace(FusionParams.of(base, fusion), **kw)

    def fb_doc(i):
        return hit_cache.get(i, {}).get("source_file", "")

    variants: list[tuple[str, Callable[[dict, Any], list]]] = [
        ("dense only", lambda legs, ctx: legs["dense"]),
        ("keyword only", lambda legs, ctx: legs["keyword"]),
        ("keyword only, RM3 expansion", lambda legs, ctx: legs["keyword_rm3"]),
        ("rrf, equal weights", lambda legs, ctx: fused(legs, p("rrf"), full=False)),
        ("rrf, keyword weight 0.5", lambda legs, ctx: fused(legs, p("rrf", rrf_keyword_weight=0.5), full=False)),
        ("rrf, keyword weight 2", lambda legs, ctx: fused(legs, p("rrf", rrf_keyword_weight=2.0), full=False)),
        ("boost (+fts_weight)", lambda legs, ctx: fused(legs, p("boost"), full=False)),
    ]
    for w in (0.6, 0.7, 0.8, 0.9):
        variants.append((f"convex {w}, keyword leg's list",
                         lambda legs, ctx, w=w: fused(legs, p("convex", dense_weight=w), full=False)))
    variants.append(("convex 0.7, every candidate's BM25",
                     lambda legs, ctx: fused(legs, p("convex", dense_weight=0.7))))
    for w in (0.5, 0.55, 0.6):
        variants.append((f"zscore {w}", lambda legs, ctx, w=w: fused(legs, p("zscore", dense_weight=w))))
    variants += [
        ("zscore 0.55, keyword depth 64", lambda legs, ctx: fused(legs, p("zscore"), kw_depth=64)),
        ("zscore 0.55, doc bonus 0.1", lambda legs, ctx: doc_bonus(
            fused(legs, p("zscore")), (lambda i: sf_doc.get(i, "")) if ctx is sf else fb_doc, 0.1)),
        ("zscore 0.55, RM3 keyword leg", lambda legs, ctx: fused({**legs, "keyword": legs["keyword_rm3"]},
                                                                 p("zscore"))),
        ("convex 0.7 + Rocchio", lambda legs, ctx: rocchio(ctx, legs, p("convex", dense_weight=0.7))),
        ("zscore 0.55 + Rocchio (default)", lambda legs, ctx: rocchio(ctx, legs, p("zscore"))),
    ]
    rows = []
    for name, rank in variants:
        ndcg = score_sf(rank)
        d5, p5 = score_fb(rank)
        rows.append({"variant": name, "scifact ndcg@10": round(ndcg, 4), "fb doc@5": round(d5, 3),
                     "fb page@5": round(p5, 3)})
        print(f"{name}: {rows[-1]}", file=sys.stderr, flush=True)
    sf_services.close()
    fb_services.close()
    print(f"SciFact train ({len(sf['legs'])} queries), FinanceBench dev ({len(questions)} questions); "
          f"{emb.id}; candidates: dense {DEPTH} / keyword {DEPTH} collected, fused from the configured depths")
    print(table(rows, ["variant", "scifact ndcg@10", "fb doc@5", "fb page@5"]))
    print(f"wrote {write_json(a.out, {'variants': rows})}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
