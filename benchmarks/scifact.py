"""SciFact (BEIR) retrieval quality: ragweedd's three modes beside plain BM25 (bm25s).

    .venv/bin/python benchmarks/scifact.py [--split train] [--workdir W] [--extra 'fusion = "rrf"'] [--out NAME]

ragweedd: ``ragweedd eval beir`` (each abstract a text file through the real ingest pipeline,
chunked, embedded by the configured embedder, searched dense / keyword / hybrid with the
configuration's settings; a document scores as its best chunk). ``--extra`` adds top-level config
lines, e.g. a fusion to compare; the ingested scratch collection is kept in ``--workdir`` (default:
under the cache dir) and reused.

Baseline, in the same run: bm25s with PyStemmer's English stemmer over title + abstract of every
document, every query word kept (no stopword list), BM25 as bm25s scores it (Lucene IDF,
k1 = 1.5, b = 0.75). Needs the bench extra (``pip install -e '.[bench]'``).

Prints a table (nDCG@10, Recall@10, Recall@100, MRR@10 with bootstrap 95% intervals) and writes
JSON to benchmarks/results/<out>.json. The dataset is read in place, never copied.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._common import SCIFACT, table, write_json  # noqa: E402


def bm25s_run(directory: Path, split: str, qids: list[str]) -> dict:
    import bm25s
    import Stemmer

    from ragweedd.eval.beir import load
    from ragweedd.eval.metrics import summarise

    ds = load(directory, split)
    ids = list(ds.corpus)
    texts = [f"{t} {x}" for t, x in (ds.corpus[i] for i in ids)]
    stemmer = Stemmer.Stemmer("english")
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(texts, stopwords=None, stemmer=stemmer, show_progress=False), show_progress=False)
    runs = {}
    for q in qids:
        res, _ = retriever.retrieve(bm25s.tokenize([ds.queries[q]], stopwords=None, stemmer=stemmer,
                                                   show_progress=False), k=100, show_progress=False)
        runs[q] = [ids[i] for i in res[0]]
    return {"metrics": summarise(runs, {q: ds.qrels[q] for q in qids})}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=str(SCIFACT))
    ap.add_argument("--split", default="train")
    ap.add_argument("--workdir", help="scratch folder of the ingested corpus (kept and reused)")
    ap.add_argument("--extra", default="", help="more top-level config lines")
    ap.add_argument("--out", default="scifact")
    a = ap.parse_args(argv)

    from ragweedd.cli.common import make_embedder
    from ragweedd.config import load_config
    from ragweedd.eval import beir

    cfg = load_config(text=a.extra, env={})
    res = beir.run(a.data, cfg, make_embedder(cfg), split=a.split, workdir=Path(a.workdir) if a.workdir else None,
                   progress=lambda m: print(m, file=sys.stderr, flush=True))
    qids = sorted(beir.load(a.data, a.split).qrels, key=lambda q: (len(q), q))
    res["bm25s"] = bm25s_run(Path(a.data), a.split, qids)
    cols = ["run", "ndcg@10", "recall@10", "recall@100", "mrr@10"]
    rows = [{"run": f"ragweedd {mode}", **{c: _ci(r["metrics"][c]) for c in cols[1:]}}
            for mode, r in res["modes"].items()]
    rows.append({"run": "bm25s (baseline)", **{c: _ci(res["bm25s"]["metrics"][c]) for c in cols[1:]}})
    print(f"SciFact {a.split}: {res['queries']} queries, {res['documents']} documents, {res['chunks']} chunks; "
          f"{res['embedder']}; fusion {res['fusion']}" + (f"; extra: {a.extra!r}" if a.extra else ""))
    print(table(rows, cols))
    res["extra"] = a.extra
    print(f"wrote {write_json(a.out, res)}")
    return 0


def _ci(m: dict) -> str:
    return f"{m['mean']:.4f} [{m['lo']:.3f},{m['hi']:.3f}]"


if __name__ == "__main__":
    raise SystemExit(main())
