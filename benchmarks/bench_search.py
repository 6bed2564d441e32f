"""End-to-end hybrid search latency (benchmarks/query.py search).

The collection: N chunks of ~1,000 characters (a 256-token MiniLM chunk) recombined from SciFact
sentences, published through RagDB.publish (metadata, FTS5 rows, vectors, change log: the real
schema), 50 chunks per document. Stored vectors are random unit vectors of MiniLM's 384
dimensions: exact search costs the same whatever the values, and embedding 100k chunks with MiniLM
takes hours on this machine. Queries are SciFact claims embedded by the real local MiniLM at search
time, so the query-embedding cost is real.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from pathlib import Path

from fts_corpus import RESULTS, chunks

from ragweedd.store.backends import open_data_dir


def build(path: Path, n: int, dim: int = 384) -> Path:
    import numpy as np

    from ragweedd.store.sqlite.rag_db import RagDB

    done = path.with_suffix(".done")
    if done.exists():
        return path
    for p in (path, Path(str(path) + "-wal"), Path(str(path) + "-shm")):
        p.unlink(missing_ok=True)
    rag = RagDB(path, "bench")
    rng = np.random.default_rng(5)
    it = chunks(n, seed=11, target_chars=1000)
    t0 = time.monotonic()
    per_doc = 50
    for d in range(n // per_doc):
        part = [next(it) for _ in range(per_doc)]
        vecs = rng.standard_normal((per_doc, dim)).astype(np.float32)
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        rag.publish(md5=f"{d:032x}", source_file=f"/bench/doc{d}.txt", rel_path=f"doc{d}.txt", kind="text",
                    extractor="bench", ocr_type=None, title=None, size_bytes=50_000,
                    chunks=[{"chunk_idx": i, "text": t, "meta": {"char_start": 0, "char_end": len(t)}}
                            for i, (_, t) in enumerate(part)],
                    vectors={"primary": [v.tobytes() for v in vecs]}, embedders={"primary": ("bench-random", dim)})
        if d % 200 == 0:
            print(f"  {d * per_doc} chunks, {time.monotonic() - t0:.0f} s", flush=True)
    rag.close()
    done.write_text("ok")
    return path


def search(args) -> dict:
    from query import claims, pct

    from ragweedd.config import load_config
    from ragweedd.embed.factory import make_embedder
    from ragweedd.paths import Paths
    from ragweedd.services import open_oneshot

    base = RESULTS / f"search_{args.chunks // 1000}k"
    data = base / "data"
    build(data / "collections" / "bench" / "rag.sqlite3", args.chunks)
    cfg = load_config(text=f'data_dir="{data}"\nstate_dir="{base}/state"\ncache_dir="{base}/cache"\n'
                           'log_level="warning"\nsearch_cache_size = 0\n', env={})  # every query searched
    paths = Paths.from_config(cfg).ensure()
    if not (paths.collection_dir("bench") / "header.bin").exists():
        # A collection this size is searched through its HNSW files, as after `ragweedd ingest`
        # or in the daemon; build them once (cached with the collection).
        from ragweedd.index.sync import IndexSync

        t_build = time.perf_counter()
        sync = IndexSync(cfg, paths, 384, stores=open_data_dir(paths))
        sync.sync("bench")
        sync.close()
        print(f"built the HNSW index of {args.chunks} vectors in {time.perf_counter() - t_build:.1f} s")
    emb = make_embedder(cfg.embed_model, cfg)
    qs = claims(args.queries, seed=9)
    rows: dict[str, list[float]] = {"total": [], "embed": [], "vector": [], "fts": [], "merge": []}
    services = open_oneshot(cfg, embedder=emb)  # searched as `ragweedd search` does
    try:
        s = services.searcher(["bench"])
        for q in qs[:5]:  # model load, matrix load, page cache
            s.search(q + " warm", limit=10)
        for q in qs:
            t = time.perf_counter()
            res = s.search(q, limit=10)
            rows["total"].append((time.perf_counter() - t) * 1000)
            for k in ("embed", "vector", "fts", "merge"):
                rows[k].append(res["retrieval_meta"]["timings_ms"].get(k, 0.0))
    finally:
        services.close()
    out = {"chunks": args.chunks, "queries": len(qs), "embedder": emb.id, "load_avg": os.getloadavg(), "ms": {}}
    print(f"hybrid search over {args.chunks} chunks, {len(qs)} SciFact claims, top_k {cfg.top_k} (ms); "
          f"load average {out['load_avg'][0]:.1f}")
    print(f"{'stage':<8s} {'p50':>8s} {'p90':>8s} {'p99':>8s} {'mean':>8s}")
    for k, xs in rows.items():
        r = {"p50": pct(xs, 50), "p90": pct(xs, 90), "p99": pct(xs, 99), "mean": statistics.mean(xs)}
        out["ms"][k] = r
        print(f"{k:<8s} {r['p50']:8.2f} {r['p90']:8.2f} {r['p99']:8.2f} {r['mean']:8.2f}")
    (RESULTS / f"query_search_{args.chunks // 1000}k.json").write_text(json.dumps(out, indent=1))
    return out
