"""Ingest throughput.

    .venv/bin/python benchmarks/ingest.py [--limit N] [--model local:all-minilm-l6-v2]
    .venv/bin/python benchmarks/ingest.py --pdfs ../shared/eval/financebench/docs [--workdir DIR]

Without ``--pdfs``: SciFact written out as one file per abstract, through the pipeline in-process;
prints files/s, chunks/s end to end (extract + chunk + embed + publish) and peak RSS; writes
benchmarks/results/ingest.json.

With ``--pdfs DIR``: the real daemon (benchmarks/ingest_daemon.py) on an empty watched folder into
which the PDFs of DIR are copied at once, as a user drops a folder of filings; prints how long until
every file was keyword-searchable and until every vector was written, files/s, pages/s, chunks/s,
the embedder's standalone chunks/s on the same chunk inputs, and their ratio; writes
benchmarks/results/ingest_pdfs.json. The workdir (data dir, collection "fb") can then be evaluated
with ``benchmarks/financebench.py --reuse --workdir DIR``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import SCIFACT, peak_rss_mb, table, write_json  # noqa: E402

from ragweedd.store.backends import open_data_dir


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--limit", type=int, default=0, help="first N abstracts (0 = all 5,183)")
    ap.add_argument("--model", default="local:all-minilm-l6-v2")
    ap.add_argument("--pdfs", help="a folder of PDFs: the real-daemon run described above")
    ap.add_argument("--workdir", help="with --pdfs: where the daemon keeps its data (default: a temp dir)")
    ap.add_argument("--sample", type=int, default=3000, help="with --pdfs: chunks embedded for the standalone rate")
    ap.add_argument("--extra", default="", help="with --pdfs: more config lines (e.g. 'chunk_overlap_pct = 15')")
    ap.add_argument("--out", default="ingest_pdfs", help="with --pdfs: name of the JSON in benchmarks/results")
    args = ap.parse_args()
    if args.pdfs:
        from ingest_daemon import run_pdfs

        run_pdfs(Path(args.pdfs), args.model, Path(args.workdir) if args.workdir else None, args.sample, args.extra,
                 args.out)
        return

    from ragweedd.config import load_config
    from ragweedd.embed.factory import make_embedder
    from ragweedd.ingest.pipeline import Pipeline
    from ragweedd.logging import configure
    from ragweedd.paths import Paths

    configure("warning", json=True, stream=sys.stderr)
    work = Path(tempfile.mkdtemp(prefix="ragweed-bench-ingest-"))
    docs = work / "docs"
    docs.mkdir()
    n = 0
    with open(SCIFACT / "corpus.jsonl") as f:
        for line in f:
            d = json.loads(line)
            (docs / f"{d['_id']}.txt").write_text(f"{d['title']}\n\n{d['text']}\n")
            n += 1
            if args.limit and n >= args.limit:
                break
    cfg = load_config(text=f"[embed]\nmodel = '{args.model}'\n", env={})
    paths = Paths.resolve(str(work / "data"), str(work / "state"), str(work / "cache"))
    t_load = time.perf_counter()
    emb = make_embedder(cfg.embed_model, cfg)
    emb.embed_batch(["warm up"])
    load_s = time.perf_counter() - t_load
    pipe = Pipeline(cfg, paths, emb, stores=open_data_dir(paths))
    files = sorted(docs.iterdir())
    chunks = 0
    t0 = time.perf_counter()
    for p in files:
        out = pipe.ingest_file("scifact", p, docs)
        chunks += out.chunks
    dt = time.perf_counter() - t0
    pipe.close()
    row = {"files": len(files), "chunks": chunks, "seconds": dt, "files_per_s": len(files) / dt,
           "chunks_per_s": chunks / dt, "model_load_s": load_s, "peak_rss_mb": peak_rss_mb(),
           "model": emb.id, "chunk_tokens": pipe.params.chunk_tokens}
    print(table([row], list(row)))
    print("wrote", write_json("ingest", row))


if __name__ == "__main__":
    main()
