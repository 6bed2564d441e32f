"""The keyword leg on PostgreSQL beside the SQLite leg, on SciFact (BEIR), same chunks on both.

    .venv/bin/python benchmarks/pg_keyword_scifact.py [--split train] [--dsn postgresql://…] [--out NAME]

Each SciFact document is published as one chunk (its abstract, with its title as the chunk's
context line, as ingest would write it) into a SQLite collection and into a PostgreSQL collection,
through the stores' own ``publish``; then every query of the split runs as a one-shot keyword search
(``mode = "keyword"``: the FTS plan, its tiers and rescoring) on each. No embedder is involved, so
the figures isolate the keyword leg: FTS5 + bm25 on SQLite, tsvector + ts_rank_cd on PostgreSQL.

Without ``--dsn`` a private PostgreSQL with pgvector is started from the ``pgserver`` package (the
test extra) in a temporary folder and stopped at the end. Prints nDCG@10, Recall@10, Recall@100 and
MRR@10 with bootstrap 95% intervals and writes benchmarks/results/<out>.json.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._common import SCIFACT, table, write_json  # noqa: E402


def _config(work: Path, store: str):
    from ragweedd.config import load_config

    return load_config(text=f"""
data_dir = "{work / 'data'}"
state_dir = "{work / 'state'}"
cache_dir = "{work / 'cache'}"
store = "{store}"
log_level = "warning"
search_cache_size = 0
[embed]
model = "hash:64"
""", env={})


def _publish_all(services, ds) -> int:
    rag = services.stores.open_rag("scifact")
    try:
        if rag.document_count() == len(ds.corpus):
            return 0
        for doc_id, (title, text) in ds.corpus.items():
            body = text or title or doc_id
            rag.publish(md5=hashlib.md5(doc_id.encode()).hexdigest(), source_file=f"/scifact/{doc_id}.txt",
                        rel_path=f"{doc_id}.txt", kind="text", extractor="text", ocr_type=None, title=title or None,
                        size_bytes=len(body), chunks=[{"chunk_idx": 0, "text": body, "context": title or "",
                                                       "meta": {"char_start": 0, "char_end": len(body)}}],
                        vectors={}, embedders={})
        return len(ds.corpus)
    finally:
        rag.close()


def _runs(services, ds, qids: list[str]) -> tuple[dict[str, list[str]], float]:
    runs: dict[str, list[str]] = {}
    t0 = time.perf_counter()
    for q in qids:
        res = services.search(ds.queries[q], ["scifact"], 100, mode="keyword")
        hits = res["results"] if isinstance(res, dict) else res.results
        runs[q] = [Path(h["source_file"] if isinstance(h, dict) else h.source_file).stem for h in hits]
    return runs, (time.perf_counter() - t0) * 1000 / max(1, len(qids))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=str(SCIFACT))
    ap.add_argument("--split", default="train")
    ap.add_argument("--dsn", help="a PostgreSQL database with pgvector (default: a private pgserver)")
    ap.add_argument("--out", default="pg_keyword_scifact")
    a = ap.parse_args(argv)

    from ragweedd.eval import beir
    from ragweedd.eval.metrics import summarise
    from ragweedd.services import open_oneshot

    ds = beir.load(a.data, a.split)
    qids = sorted(ds.qrels, key=lambda q: (len(q), q))
    work = Path(tempfile.mkdtemp(prefix="rwpgk"))
    server = None
    dsn = a.dsn
    if dsn is None:
        import pgserver

        work.chmod(0o755)  # as root, pgserver runs the server as its own user
        server = pgserver.get_server(work / "pg", cleanup_mode="delete")
        dsn = server.get_uri()
    out: dict = {"split": a.split, "queries": len(qids), "documents": len(ds.corpus), "backends": {}}
    try:
        for name, store in (("sqlite", "sqlite"), ("postgresql", dsn)):
            services = open_oneshot(_config(work / name, store))
            try:
                t0 = time.perf_counter()
                n = _publish_all(services, ds)
                load_s = time.perf_counter() - t0
                runs, ms = _runs(services, ds, qids)
            finally:
                services.close()
            out["backends"][name] = {"metrics": summarise(runs, {q: ds.qrels[q] for q in qids}),
                                     "publish_s": round(load_s, 1), "published": n, "ms_per_query": round(ms, 2)}
            print(f"{name}: published {n} in {load_s:.1f} s, {ms:.1f} ms per query", file=sys.stderr, flush=True)
    finally:
        if server is not None:
            server.cleanup()
        shutil.rmtree(work, ignore_errors=True)
    cols = ["run", "ndcg@10", "recall@10", "recall@100", "mrr@10", "ms/query"]
    rows = [{"run": f"keyword on {name}", **{c: _ci(r["metrics"][c]) for c in cols[1:5]}, "ms/query": r["ms_per_query"]}
            for name, r in out["backends"].items()]
    print(f"SciFact {a.split}: {len(qids)} queries, {len(ds.corpus)} documents, one chunk each")
    print(table(rows, cols))
    print(f"wrote {write_json(a.out, out)}")
    return 0


def _ci(m: dict) -> str:
    return f"{m['mean']:.4f} [{m['lo']:.3f},{m['hi']:.3f}]"


if __name__ == "__main__":
    raise SystemExit(main())
