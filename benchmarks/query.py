"""Query speed benchmarks (DESIGN §8, issue 5).

    .venv/bin/python benchmarks/query.py keyword [--chunks 500000] [--queries 200]
    .venv/bin/python benchmarks/query.py search  [--chunks 100000] [--queries 200]

keyword: FTS5 tiers, LIMIT fts_top_k (the keyword leg's depth), on N synthetic chunks of ~1,500
chars recombined from SciFact sentences (built once with SQLite, cached in benchmarks/results/).
Queries are SciFact claims: the AND tier gets two words of each claim, the OR tier its first six
words plus WordNet synonyms. "before" is plain FTS5 (`ORDER BY bm25(fts_chunks)` over every word),
"after" is ragweedd's plan (query/fts_plan.py); plan_total is the whole plan on the whole claim,
the BM25 of the words the OR tier's budget leaves out included.

search: end-to-end hybrid search latency (query embedding with the local MiniLM included, no LLM)
over N chunks of real text with real MiniLM vectors (embedding N chunks takes a while the first
time; the collection is cached in benchmarks/results/).

Each run prints a table and writes JSON next to the cached databases.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from fts_corpus import RESULTS, SCIFACT, XQUAD_ZH, build_fts  # noqa: E402


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def claims(n: int, seed: int = 3, corpus_dir: Path = SCIFACT) -> list[str]:
    rows = [json.loads(line)["text"] for line in open(corpus_dir / "queries.jsonl", encoding="utf-8")]
    random.Random(seed).shuffle(rows)
    return rows[:n]


def timed(fn, reps: int = 1) -> float:
    t = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - t) * 1000 / reps


def keyword(args) -> dict:
    import sqlite3

    from ragweedd.config import load_config
    from ragweedd.query.fts_plan import MIN_TIER_HITS, make_plan, query_words
    from ragweedd.query.idf import IdfCache
    from ragweedd.query.wordnet import open_wordnet, wordnet_status
    from ragweedd.store.sqlite.fts_reader import FtsReader
    from ragweedd.store.sqlite.rag_keywords import fts5_match
    from ragweedd.store.types import AllOf, Terms, any_of

    # the index form of issue 31 (fts2_*: databases of the English-only form are not reused)
    zh = args.lang == "zh"
    corpus = XQUAD_ZH if zh else SCIFACT
    db = build_fts(RESULTS / f"fts2_{'zh_' if zh else ''}{args.chunks // 1000}k.sqlite3", args.chunks,
                   corpus_dir=corpus, lang=args.lang)
    with open(db, "rb") as f:  # into the page cache: measure the plans, not the disk
        while f.read(1 << 24):
            pass
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, check_same_thread=False)
    n = args.chunks
    stats = FtsReader(conn)
    cache = IdfCache("bench", stats, n_docs=lambda: n, seq=lambda: 0)
    cfg = load_config(text="")
    wn = open_wordnet(cfg)
    status = wordnet_status(cfg)
    k = cfg.fts_top_k  # the keyword leg's depth
    qs = [q for q in claims(args.queries * 2, corpus_dir=corpus) if len(query_words(q, args.lang)) >= 6][: args.queries]
    # Warm the page cache once so both plans are measured on a warm database.
    for q in qs[:20]:
        stats.match(any_of([Terms((w,)) for w in query_words(q, args.lang)[:6]]), k)

    def bm25_plain(expr):
        return conn.execute("SELECT rowid, bm25(fts_chunks) AS s FROM fts_chunks WHERE fts_chunks MATCH ? "
                            "ORDER BY s LIMIT ?", (expr, k)).fetchall()

    rows = {"and_before": [], "and_after": [], "or_before": [], "or_after": [], "plan_total": [],
            "df_vocab": [], "df_count": []}
    tiers = {1: 0, 2: 0, None: 0}
    for q in qs:
        words = query_words(q, args.lang)
        dfs = cache.df(words)
        present = [w for w in words if dfs[w] > 0]
        # AND: the two rarest words of the claim that occur (what tier 1 usually holds).
        two = sorted(present, key=lambda w: dfs[w])[:2]
        if len(two) == 2:
            expr = AllOf((Terms((two[0],)), Terms((two[1],))))
            if not args.skip_before:
                rows["and_before"].append(timed(lambda: bm25_plain(fts5_match(expr))))
            rows["and_after"].append(timed(lambda: stats.match(expr, k)))
        six = words[:6]
        before = any_of([Terms((w,)) for w in six])
        if not args.skip_before:
            rows["or_before"].append(timed(lambda: bm25_plain(fts5_match(before))))
        plan = make_plan(" ".join(six), cache, cfg, wn, status, lang=args.lang)
        terms = sorted(plan.or_terms(), key=lambda t: t[1])
        chosen, total = [], 0
        for s, df in terms:
            if not chosen or total + df <= cfg.fts_or_max_postings:
                chosen.append(s)
                total += df
        if chosen:
            after = any_of(chosen)
            rows["or_after"].append(timed(lambda: stats.match(after, k)))
        t = time.perf_counter()
        from ragweedd.query.fts_plan import execute

        p2 = make_plan(q, cache, cfg, wn, status)  # the language chosen as a search chooses it
        _, m = execute(stats, p2, k, max_postings=cfg.fts_or_max_postings)
        rows["plan_total"].append((time.perf_counter() - t) * 1000)
        tiers[m["tier"]] = tiers.get(m["tier"], 0) + 1
        w = words[0]
        term = w
        rows["df_vocab"].append(timed(lambda: stats.df_term(term), 5))
        rows["df_count"].append(timed(lambda: stats.df_match(term), 1))
    out = {"chunks": n, "queries": len(qs), "fts_or_max_postings": cfg.fts_or_max_postings,
           "min_tier_hits": MIN_TIER_HITS, "tiers_fired": {str(a): b for a, b in tiers.items()}, "ms": {}}
    print(f"keyword tiers over {n} chunks ({args.lang}), {len(qs)} queries, LIMIT {k} (ms)")
    print(f"{'case':<12s} {'n':>5s} {'p50':>8s} {'p90':>8s} {'p99':>8s} {'mean':>8s}")
    for name, xs in rows.items():
        if not xs:
            continue
        r = {"n": len(xs), "p50": pct(xs, 50), "p90": pct(xs, 90), "p99": pct(xs, 99), "mean": statistics.mean(xs)}
        out["ms"][name] = r
        print(f"{name:<12s} {r['n']:5d} {r['p50']:8.2f} {r['p90']:8.2f} {r['p99']:8.2f} {r['mean']:8.2f}")
    print("tiers fired by the full plan:", out["tiers_fired"])
    out["load_avg"] = __import__("os").getloadavg()
    print("load average", out["load_avg"])
    (RESULTS / f"query_keyword_{args.lang}_{n // 1000}k.json").write_text(json.dumps(out, indent=1))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    k = sub.add_parser("keyword")
    k.add_argument("--chunks", type=int, default=500_000)
    k.add_argument("--queries", type=int, default=200)
    k.add_argument("--skip-before", action="store_true", help="skip plain FTS5 (the slow baseline)")
    k.add_argument("--lang", choices=("en", "zh"), default="en",
                   help="en: SciFact sentences and claims; zh: XQuAD Chinese paragraphs and questions")
    s = sub.add_parser("search")
    s.add_argument("--chunks", type=int, default=100_000)
    s.add_argument("--queries", type=int, default=200)
    args = ap.parse_args(argv)
    RESULTS.mkdir(parents=True, exist_ok=True)
    if args.cmd == "keyword":
        keyword(args)
    else:
        from bench_search import search

        search(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
