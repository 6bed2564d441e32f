"""Scale figures of the PostgreSQL + pgvector store (a benchmark, not a timed test).

    .venv/bin/python benchmarks/pg_scale.py [--chunks 1000000] [--dim 384] [--dsn postgresql://…] [--out NAME]

Synthetic collection: clustered unit vectors (64 clusters, Gaussian spread) and generated text
(words drawn per cluster from a 5,000-word vocabulary), 10 chunks per document, documents under
100 folders. Figures:

* ingest rate (chunks/s) through ``PgRag.publish`` -- one document per transaction, with the HNSW
  index maintained as rows arrive -- with one process, then with two processes (two sources) at
  once on the next part of the collection;
* vector search latency p50/p99 over 200 queries near random chunks: unfiltered (HNSW, ef =
  ``--ef``) and with a path filter (the chunks of one folder, about 1%, ranked exactly);
* database size.

Without ``--dsn`` a private PostgreSQL with pgvector is started from ``pgserver`` (the test extra)
in a temporary folder and deleted at the end. Writes benchmarks/results/<out>.json. The SQLite
figures beside these are still to be added.
"""

from __future__ import annotations

import argparse
import shutil
import multiprocessing as mp
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._common import table, write_json  # noqa: E402

CHUNKS_PER_DOC = 10
FOLDERS = 100


def _docs(first_doc: int, n_docs: int, dim: int, seed: int = 7):
    """(md5, path, texts, vectors) of documents first_doc .. first_doc + n_docs, the same for a
    given document number whichever process makes it."""
    import hashlib

    import numpy as np

    rng0 = np.random.default_rng(seed)
    centers = rng0.normal(size=(64, dim)).astype(np.float32)
    vocab = [f"w{i}" for i in range(5000)]
    for d in range(first_doc, first_doc + n_docs):
        rng = np.random.default_rng(seed * 1_000_003 + d)
        c = int(rng.integers(64))
        vecs = centers[c] + 0.35 * rng.normal(size=(CHUNKS_PER_DOC, dim)).astype(np.float32)
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        words = rng.integers(c * 50, c * 50 + 800, size=(CHUNKS_PER_DOC, 60)) % len(vocab)
        texts = [" ".join(vocab[w] for w in row) for row in words]
        md5 = hashlib.md5(f"doc{d}".encode()).hexdigest()
        yield md5, f"/bench/f{d % FOLDERS}/doc{d}.txt", texts, [v.tobytes() for v in vecs]


def _ingest(dsn: str, source: str, first_doc: int, n_docs: int, dim: int) -> float:
    from ragweedd.store.pg_backend import PgBackend
    from ragweedd.store.rag_passes import PRIMARY

    rag = PgBackend(dsn, source=source).open_rag("bench")
    t0 = time.perf_counter()
    try:
        for md5, path, texts, vecs in _docs(first_doc, n_docs, dim):
            rag.publish(md5=md5, source_file=path, rel_path=path.rsplit("/", 1)[-1], kind="text", extractor="text",
                        ocr_type=None, title=None, size_bytes=sum(map(len, texts)),
                        chunks=[{"chunk_idx": i, "text": t, "meta": {"char_start": 0, "char_end": len(t)}}
                                for i, t in enumerate(texts)],
                        vectors={PRIMARY: vecs}, embedders={PRIMARY: ("synthetic", dim)})
    finally:
        rag.close()
    return time.perf_counter() - t0


def _pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--chunks", type=int, default=1_000_000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--ef", type=int, default=64)
    ap.add_argument("--dsn")
    ap.add_argument("--out", default="pg_scale")
    a = ap.parse_args(argv)

    import numpy as np

    n_docs = max(4, a.chunks // CHUNKS_PER_DOC)
    solo, duo = n_docs * 3 // 4, n_docs - n_docs * 3 // 4  # the last quarter by two processes at once
    work = Path(tempfile.mkdtemp(prefix="rwpgs"))
    server = None
    dsn = a.dsn
    if dsn is None:
        import pgserver

        work.chmod(0o755)
        server = pgserver.get_server(work / "pg", cleanup_mode="delete")
        dsn = server.get_uri()
    out: dict = {"chunks": n_docs * CHUNKS_PER_DOC, "dim": a.dim, "ef": a.ef}
    try:
        from ragweedd.store.pg_backend import PgBackend

        PgBackend(dsn).close()
        dt = _ingest(dsn, "one", 0, solo, a.dim)
        out["ingest_one_process_chunks_per_s"] = round(solo * CHUNKS_PER_DOC / dt, 1)
        print(f"one process: {solo * CHUNKS_PER_DOC} chunks in {dt:.1f} s", file=sys.stderr, flush=True)
        half = duo // 2
        ctx = mp.get_context("spawn")
        t0 = time.perf_counter()
        with ctx.Pool(2) as pool:
            pool.starmap(_ingest, [(dsn, "two-a", solo, half, a.dim), (dsn, "two-b", solo + half, duo - half, a.dim)])
        dt2 = time.perf_counter() - t0
        out["ingest_two_processes_chunks_per_s"] = round(duo * CHUNKS_PER_DOC / dt2, 1)
        out["second_process_adds_pct"] = round(100 * (out["ingest_two_processes_chunks_per_s"]
                                                      / out["ingest_one_process_chunks_per_s"] - 1), 1)
        print(f"two processes: {duo * CHUNKS_PER_DOC} chunks in {dt2:.1f} s", file=sys.stderr, flush=True)

        backend = PgBackend(dsn, source="one")
        rag = backend.open_rag("bench", readonly=True)
        rng = np.random.default_rng(1)
        queries = []
        for d in rng.integers(0, n_docs, size=200):
            _m, _p, _t, vs = next(_docs(int(d), 1, a.dim))
            q = np.frombuffer(vs[0], dtype=np.float32) + 0.1 * rng.normal(size=a.dim).astype(np.float32)
            queries.append(q / np.linalg.norm(q))
        in_folder = [m for p, _r, m in rag.document_paths() if p.startswith("/bench/f7/")]
        folder = sorted(rag.chunk_ids_of_documents(in_folder))
        for name, allowed in (("unfiltered", None), ("path_filter", folder)):
            times = []
            for q in queries:
                t = time.perf_counter()
                rag.nearest(q, 10, allowed=allowed, ef=a.ef)
                times.append((time.perf_counter() - t) * 1000)
            out[f"search_{name}_ms"] = {"p50": round(_pct(times, 50), 2), "p99": round(_pct(times, 99), 2)}
        out["path_filter_chunks"] = len(folder)
        out["database_bytes"] = backend.database_size()
        rag.close()
        backend.close()
    finally:
        if server is not None:
            server.cleanup()
        shutil.rmtree(work, ignore_errors=True)
    rows = [{"figure": k, "value": v} for k, v in out.items()]
    print(table(rows, ["figure", "value"]))
    print(f"wrote {write_json(a.out, out)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
