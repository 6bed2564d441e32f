"""ANN benchmark: ragweedd's numba HNSW side by side with hnswlib and faiss (DESIGN §7).

    .venv/bin/pip install -e '.[bench]'            # hnswlib, faiss-cpu (optional; skipped if missing)
    .venv/bin/python benchmarks/ann.py             # 100k x 384, both datasets, ~15-25 min on 2 cores
    .venv/bin/python benchmarks/ann.py --n 20000 --datasets clustered     # quick look

Datasets: "clustered" (synthetic Gaussian clusters on the unit sphere) and "scifact" (SciFact titles,
sentences and consecutive sentence pairs embedded with the real MiniLM; the SciFact queries are the
queries). Vectors are cached in benchmarks/results/. Everything runs single-threaded (numba, hnswlib,
faiss) with M=16, ef_construction=200. Reported per engine: build vectors/s, recall@10 against exact
search and queries/s at each ef (batch call; for ragweedd also one Python call per query), size on
disk, load and flush time; for ragweedd also recall with the cluster-analysis entry points, and the
p99 search latency while a second thread inserts the whole set. Prints a table, writes JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "benchmarks" / "results"
SCIFACT = Path(os.environ.get("SCIFACT_DIR", ROOT.parent / "shared" / "eval" / "scifact"))
EFS = (16, 32, 64, 128, 256, 512)
# Timings are process CPU seconds by default: every engine runs single-threaded, and on a shared
# machine CPU time is what stays comparable between runs; --wall switches to wall-clock time.
now = time.process_time
K = 10


def unit(x):
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def clustered(n, nq, dim=384, centers=1000, seed=7):
    rng = np.random.default_rng(seed)
    c = rng.standard_normal((centers, dim)).astype(np.float32)
    spread = rng.uniform(0.5, 1.5, centers).astype(np.float32)

    def draw(m):
        which = rng.integers(0, centers, m)
        return unit(c[which] + spread[which, None] * rng.standard_normal((m, dim)).astype(np.float32)), which

    x, wx = draw(n)
    q, _ = draw(nq)
    # entropy / word count that follow the cluster, as text of one kind would
    ent = np.clip(rng.normal(3.0 + 2.0 * (wx % 7) / 7, 0.3), 0, 8)
    wc = np.maximum(1, rng.normal(10 + 5 * (wx % 11), 3)).astype(int)
    return x, q, ent, wc


def scifact_texts(n):
    units, seen = [], set()
    with open(SCIFACT / "corpus.jsonl", encoding="utf-8") as f:
        docs = [json.loads(line) for line in f]
    for d in docs:
        sents = [s.strip() for s in re.split(r"(?<=[.!?])\s+", d.get("text", "")) if len(s.strip()) > 20]
        for u in [d.get("title", "")] + sents + [a + " " + b for a, b in zip(sents, sents[1:])]:
            u = u[:1000]
            if u and u not in seen:
                seen.add(u)
                units.append(u)
    with open(SCIFACT / "queries.jsonl", encoding="utf-8") as f:
        queries = [json.loads(line)["text"] for line in f]
    return units[:n], queries


def scifact(n, nq):
    from ragweedd.chunk.entropy import shannon_entropy, word_count

    cache = RESULTS / f"scifact_minilm_{n}.npz"
    texts, queries = scifact_texts(n)
    queries = queries[:nq]
    if cache.exists():
        z = np.load(cache)
        x, q = z["x"], z["q"]
    else:
        from ragweedd.embed.local import MiniLMEmbedder

        emb = MiniLMEmbedder(threads=2, batch_size=64)
        t0 = now()
        parts = []
        for s in range(0, len(texts), 2048):
            parts.append(emb.embed_batch(texts[s:s + 2048]))
            print(f"  embedded {s + len(parts[-1])}/{len(texts)} ({now() - t0:.0f}s)", flush=True)
        x = np.concatenate(parts)
        q = emb.embed_batch([t.lower() for t in queries])
        RESULTS.mkdir(parents=True, exist_ok=True)
        np.savez(cache, x=x, q=q)
    ent = np.array([shannon_entropy(t) for t in texts])
    wc = np.array([word_count(t) for t in texts])
    return x.astype(np.float32), q.astype(np.float32), ent, wc


def ground_truth(x, q, k=K):
    sims = q @ x.T
    top = np.argpartition(-sims, k, axis=1)[:, :k]
    return top


def recall(found, gt):
    return float(np.mean([len(set(f.tolist()) & set(g.tolist())) / gt.shape[1] for f, g in zip(found, gt)]))


def dir_size(path):
    """Bytes of the index files; our generation files are hard links of the plain names, counted once."""
    return sum(p.stat().st_size for p in Path(path).iterdir() if p.is_file() and not re.search(r"\.g\d+$", p.name))


def bench_ours(x, q, gt, ent, wc, labels):
    import numba

    from ragweedd.index.clusters import analyse
    from ragweedd.index.hnsw import HnswIndex

    numba.set_num_threads(1)
    warm = HnswIndex(x.shape[1])
    warm.add(np.arange(300), x[:300])  # compile / load kernels outside the timings
    warm.search_batch(q[:2], K, 16)
    warm.search(q[0], K, 16)
    idx = HnswIndex(x.shape[1], M=16, ef_construction=200, seed=1)
    t0 = now()
    idx.add(labels, x)
    build = now() - t0
    out = {"build_s": build, "build_vps": len(x) / build, "ef": {}}
    cl = analyse(labels, ent, wc)
    for ef in EFS:
        t0 = now()
        L, _ = idx.search_batch(q, K, ef, entry_points=np.zeros(0, np.int64))
        tb = now() - t0
        t0 = now()
        for qq in q:
            idx.search(qq, K, ef, entry_points=np.zeros(0, np.int64))
        ts = now() - t0
        Le, _ = idx.search_batch(q, K, ef, entry_points=cl.entry_labels)
        out["ef"][ef] = {"recall": recall(L, gt), "qps": len(q) / tb, "qps_single_call": len(q) / ts,
                         "recall_entry_points": recall(Le, gt)}
    d = tempfile.mkdtemp(prefix="ann-ours-")
    t0 = now()
    idx.save(d, applied_seq=len(x))
    out["flush_s"] = now() - t0
    out["disk_bytes"] = dir_size(d)
    t0 = now()
    HnswIndex.load(d)
    out["load_s"] = now() - t0
    out["entry_points"] = int(cl.entry_labels.size)
    shutil.rmtree(d)
    return out


def bench_concurrent(x, q):
    """p99 latency of single searches (ef=64) while another thread inserts the whole set."""
    import numba

    from ragweedd.index.hnsw import HnswIndex

    numba.set_num_threads(1)
    idx = HnswIndex(x.shape[1], seed=2)
    idx.add(np.arange(1000), x[:1000])
    done = threading.Event()

    def insert():
        idx.add(np.arange(1000, len(x)), x[1000:])
        done.set()

    lat, i = [], 0
    t = threading.Thread(target=insert)
    t0 = time.perf_counter()
    t.start()
    while not done.is_set():
        s = time.perf_counter()
        idx.search(q[i % len(q)], K, 64)
        lat.append(time.perf_counter() - s)
        i += 1
    t.join()
    insert_s = time.perf_counter() - t0
    idle = []
    for j in range(min(len(q), 500)):
        s = time.perf_counter()
        idx.search(q[j], K, 64)
        idle.append(time.perf_counter() - s)
    lat_ms, idle_ms = np.array(lat) * 1e3, np.array(idle) * 1e3
    return {"searches_during_insert": len(lat), "insert_s": insert_s,
            "p50_ms": float(np.percentile(lat_ms, 50)), "p99_ms": float(np.percentile(lat_ms, 99)),
            "max_ms": float(lat_ms.max()), "idle_p99_ms": float(np.percentile(idle_ms, 99))}


def bench_hnswlib(x, q, gt, labels):
    try:
        import hnswlib
    except ImportError:
        return None
    p = hnswlib.Index("ip", x.shape[1])
    p.init_index(len(x), M=16, ef_construction=200, random_seed=1)
    p.set_num_threads(1)
    t0 = now()
    p.add_items(x, labels)
    build = now() - t0
    out = {"build_s": build, "build_vps": len(x) / build, "ef": {}}
    for ef in EFS:
        p.set_ef(ef)
        t0 = now()
        L, _ = p.knn_query(q, K)
        out["ef"][ef] = {"recall": recall(L, gt), "qps": len(q) / (now() - t0)}
    d = tempfile.mkdtemp(prefix="ann-hnswlib-")
    t0 = now()
    p.save_index(os.path.join(d, "i.bin"))
    out["flush_s"] = now() - t0
    out["disk_bytes"] = dir_size(d)
    t0 = now()
    p2 = hnswlib.Index("ip", x.shape[1])
    p2.load_index(os.path.join(d, "i.bin"))
    out["load_s"] = now() - t0
    shutil.rmtree(d)
    return out


def bench_faiss(x, q, gt):
    try:
        import faiss
    except ImportError:
        return None
    faiss.omp_set_num_threads(1)
    f = faiss.IndexHNSWFlat(x.shape[1], 16, faiss.METRIC_INNER_PRODUCT)
    f.hnsw.efConstruction = 200
    t0 = now()
    f.add(x)
    build = now() - t0
    out = {"build_s": build, "build_vps": len(x) / build, "ef": {}}
    for ef in EFS:
        f.hnsw.efSearch = ef
        t0 = now()
        _, L = f.search(q, K)
        out["ef"][ef] = {"recall": recall(L, gt), "qps": len(q) / (now() - t0)}
    d = tempfile.mkdtemp(prefix="ann-faiss-")
    t0 = now()
    faiss.write_index(f, os.path.join(d, "i.faiss"))
    out["flush_s"] = now() - t0
    out["disk_bytes"] = dir_size(d)
    t0 = now()
    faiss.read_index(os.path.join(d, "i.faiss"))
    out["load_s"] = now() - t0
    shutil.rmtree(d)
    return out


def at_recall(res, target=0.95):
    """(ef, qps) at the smallest ef whose recall reaches target."""
    for ef in EFS:
        r = res["ef"][ef]
        if r["recall"] >= target:
            return ef, r["qps"]
    return None, None


def table(name, ours, hl, fa):
    lines = [f"\n== {name} ==",
             f"{'ef':>5} | {'ours R@10':>9} {'ours+EP':>8} {'ours q/s':>9} {'1-call q/s':>10} | "
             f"{'hnswlib R@10':>12} {'q/s':>8} {'ratio':>6} | {'faiss R@10':>10} {'q/s':>8}"]
    for ef in EFS:
        o = ours["ef"][ef]
        h = hl["ef"][ef] if hl else None
        f = fa["ef"][ef] if fa else None
        lines.append(
            f"{ef:>5} | {o['recall']:>9.4f} {o['recall_entry_points']:>8.4f} {o['qps']:>9.0f} "
            f"{o['qps_single_call']:>10.0f} | "
            + (f"{h['recall']:>12.4f} {h['qps']:>8.0f} {o['qps'] / h['qps']:>6.2f}"
               if h else f"{'-':>12} {'-':>8} {'-':>6}")
            + " | " + (f"{f['recall']:>10.4f} {f['qps']:>8.0f}" if f else f"{'-':>10} {'-':>8}"))
    for key, label, fmt in (("build_vps", "build vectors/s", "{:.0f}"), ("disk_bytes", "size on disk MB", "{:.1f}"),
                            ("load_s", "load s", "{:.3f}"), ("flush_s", "flush s", "{:.3f}")):
        scale = 1e-6 if key == "disk_bytes" else 1
        row = f"{label:>16}: ours " + fmt.format(ours[key] * scale)
        if hl:
            row += "  hnswlib " + fmt.format(hl[key] * scale) + f"  (ratio {ours[key] / hl[key]:.2f})"
        if fa:
            row += "  faiss " + fmt.format(fa[key] * scale)
        lines.append(row)
    if hl:
        oe, oq = at_recall(ours)
        he, hq = at_recall(hl)
        if oq and hq:
            lines.append(f"  at recall>=0.95: ours ef={oe} {oq:.0f} q/s, hnswlib ef={he} {hq:.0f} q/s, "
                         f"ratio {oq / hq:.2f}")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--datasets", default="clustered,scifact")
    ap.add_argument("--no-concurrent", action="store_true")
    ap.add_argument("--out", default=str(RESULTS / "ann.json"))
    ap.add_argument("--wall", action="store_true", help="time with the wall clock instead of process CPU time")
    a = ap.parse_args(argv)
    global now
    if a.wall:
        now = time.perf_counter
    RESULTS.mkdir(parents=True, exist_ok=True)
    report = {"clock": "wall" if a.wall else "process_cpu", "n": a.n, "queries": a.queries, "k": K, "M": 16,
              "ef_construction": 200, "threads": 1, "datasets": {}}
    for name in a.datasets.split(","):
        t0 = now()
        x, q, ent, wc = clustered(a.n, a.queries) if name == "clustered" else scifact(a.n, a.queries)
        print(f"[{name}] {x.shape} vectors, {len(q)} queries ready in {now() - t0:.0f}s", flush=True)
        labels = np.arange(len(x), dtype=np.int64)
        gt = ground_truth(x, q)
        ours = bench_ours(x, q, gt, ent, wc, labels)
        print(f"[{name}] ours built at {ours['build_vps']:.0f}/s", flush=True)
        hl = bench_hnswlib(x, q, gt, labels)
        fa = bench_faiss(x, q, gt)
        entry = {"ours": ours, "hnswlib": hl, "faiss": fa}
        if not a.no_concurrent:
            entry["concurrent"] = bench_concurrent(x, q)
        report["datasets"][name] = entry
        print(table(f"{name}: {len(x)} x {x.shape[1]}, recall@{K}, 1 thread", ours, hl, fa), flush=True)
        if "concurrent" in entry:
            c = entry["concurrent"]
            print(f"  during a {len(x)}-vector insert: {c['searches_during_insert']} searches, "
                  f"p50 {c['p50_ms']:.2f} ms, "
                  f"p99 {c['p99_ms']:.2f} ms, max {c['max_ms']:.2f} ms (idle p99 {c['idle_p99_ms']:.2f} ms), "
                  f"insert {c['insert_s']:.0f}s", flush=True)
        Path(a.out).write_text(json.dumps(report, indent=1))
    print(f"\nwrote {a.out}")


if __name__ == "__main__":
    main()
