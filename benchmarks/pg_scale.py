"""Scale figures of the PostgreSQL + pgvector store beside the SQLite store (a benchmark, not a
timed test).

    .venv/bin/python benchmarks/pg_scale.py [--chunks 1000000] [--dim 384] [--backends pg,sqlite]
                                            [--fill bulk|publish] [--ef N]
                                            [--dsn postgresql://…] [--out NAME]

Synthetic collection: clustered unit vectors (64 clusters, Gaussian spread) and generated text
(words drawn per cluster from a 5,000-word vocabulary), 10 chunks per document, documents under
100 folders. Every document goes through the store's ``publish``: one transaction per document.

PostgreSQL:

* fill: two processes (two sources) publish the first 97% of the collection at once. With
  ``--fill bulk`` (the default) the HNSW index is dropped first and built once after the fill, by
  the store's own definition (``CREATE INDEX``, pgvector's in-memory build): publishing a million
  chunks one by one with the index maintained takes hours on a small machine. ``--fill publish``
  keeps the index maintained throughout;
* then, on top of that, with the index maintained: one process publishes 1% (the one-process
  rate), and then two processes publish the last 2% at once (the two-process rate): both measured
  at about the same collection size, since an HNSW insert costs more as the graph grows. The
  processes are started before the clock starts; the two-process rate is chunks over first start
  to last finish. The CPU used by each ingesting process and by its server backend, by the rest of
  the server, and by the whole machine (other tenants included: the machine may be shared) is read
  from /proc while they run;
* search latency p50/p99 over 200 queries near random chunks, through the searches' own entry
  (query/vectors.py ``VectorSearch``, ef = config ``hnsw_ef`` unless ``--ef``): unfiltered (the HNSW
  index), and with a path filter (the chunks of one folder, about 1%, ranked exactly);
* database size.

SQLite (one writer per database, so no two-process figure): one process publishes the whole
collection, then the HNSW index files are built from the change log as the daemon builds them at
its start (``IndexSync``), and searched as a one-shot command searches (``DiskIndexes`` +
``VectorSearch``; a path filter ranks the allowed chunks exactly). Sizes: rag.sqlite3 and its -wal,
and the index files.

Without ``--dsn`` a private PostgreSQL 16 with pgvector is started from ``pgserver`` (the test
extra) in a temporary folder with ``shared_buffers`` = 4GB and ``max_wal_size`` = 8GB (the rest its
defaults: synchronous_commit on) and deleted at the end. Writes benchmarks/results/<out>.json.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._common import table, write_json  # noqa: E402
from ragweedd.store.backends import open_data_dir  # noqa: E402

CHUNKS_PER_DOC = 10
FOLDERS = 100
PG_SETTINGS = {"shared_buffers": "4GB", "max_wal_size": "8GB"}
BUILD_MEM = "6GB"  # maintenance_work_mem of the bulk fill's index build: the graph built in memory


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


def _publish_all(rag, first_doc: int, n_docs: int, dim: int) -> None:
    from ragweedd.store.types import PRIMARY

    for md5, path, texts, vecs in _docs(first_doc, n_docs, dim):
        rag.publish(md5=md5, source_file=path, rel_path=path.rsplit("/", 1)[-1], kind="text", extractor="text",
                    ocr_type=None, title=None, size_bytes=sum(map(len, texts)),
                    chunks=[{"chunk_idx": i, "text": t, "meta": {"char_start": 0, "char_end": len(t)}}
                            for i, t in enumerate(texts)],
                    vectors={PRIMARY: vecs}, embedders={PRIMARY: ("synthetic", dim)})


def _pg_worker(dsn: str, source: str, first_doc: int, n_docs: int, dim: int, go, times) -> None:
    from ragweedd.store.postgres.backend import PgBackend

    rag = PgBackend(dsn, source=source).open_rag("bench")
    backend = rag.db.conn.info.backend_pid
    next(_docs(first_doc, 1, dim))  # numpy loaded before the clock starts
    times.put(("ready", backend))
    go.wait()
    t0, c0, b0 = time.time(), time.process_time(), _proc_cpu(backend)
    try:
        _publish_all(rag, first_doc, n_docs, dim)
        # read before closing: the backend ends with the connection
        times.put(("done", t0, time.time(), time.process_time() - c0, _proc_cpu(backend) - b0))
    finally:
        rag.close()


def _proc_cpu(pid: int) -> float:
    """CPU seconds (user + system) a process has used so far; 0 when it is gone."""
    try:
        f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def _machine_busy() -> tuple[float, float]:
    """(busy, total) CPU jiffies of the whole machine, all tenants, from /proc/stat."""
    v = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = v[3] + v[4]
    return sum(v) - idle, sum(v)


def _server_cpu(postmaster: int) -> float:
    """CPU seconds of the whole server so far: the postmaster, its ended children (autovacuum
    workers, ended backends) and its live ones (backends, WAL writer, checkpointer, ...)."""
    try:
        f = Path(f"/proc/{postmaster}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    total = sum(int(x) for x in f[11:15]) / os.sysconf("SC_CLK_TCK")
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                g = (d / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(g[1]) == postmaster:
                total += (int(g[11]) + int(g[12])) / os.sysconf("SC_CLK_TCK")
    return total


def _pg_ingest(dsn: str, parts: list[tuple[str, int, int]], dim: int) -> dict:
    """Publish ``parts`` ((source, first_doc, n_docs)) in one process each, all at once; their rate,
    and where the CPU went while they ran: the ingesting processes, their server backends, the
    rest of the server, and the machine as a whole (other tenants included)."""
    ctx = mp.get_context("spawn")
    go, times = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_pg_worker, args=(dsn, s, f, n, dim, go, times)) for s, f, n in parts]
    for p in procs:
        p.start()
    backends = [times.get(timeout=600)[1] for _ in procs]
    postmaster = int(Path(f"/proc/{backends[0]}/stat").read_text().rsplit(")", 1)[1].split()[1])
    srv0, busy0, load0 = _server_cpu(postmaster), _machine_busy(), os.getloadavg()[0]
    w0 = time.time()
    go.set()
    done = [times.get() for _ in procs]
    w1 = time.time()
    srv1, busy1 = _server_cpu(postmaster), _machine_busy()
    for p in procs:
        p.join()
    if any(p.exitcode for p in procs):
        raise SystemExit("an ingesting process failed")
    chunks = sum(n for _s, _f, n in parts) * CHUNKS_PER_DOC
    wall = max(d[2] for d in done) - min(d[1] for d in done)
    span = w1 - w0
    py = [round(d[3] / span, 2) for d in done]
    be = [round(d[4] / span, 2) for d in done]
    busy = (busy1[0] - busy0[0]) / max(1, busy1[1] - busy0[1])
    return {"chunks": chunks, "seconds": round(wall, 1), "chunks_per_s": round(chunks / wall, 1),
            "cores_python": py, "cores_server_backends": be,
            "cores_server_other": round((srv1 - srv0) / span - sum(be), 2),
            "machine_busy_pct": round(100 * busy, 1),
            "cores_other_tenants": round(busy * (os.cpu_count() or 1) - (srv1 - srv0) / span - sum(py), 2),
            "load_avg_1min_start_end": [round(load0, 2), round(os.getloadavg()[0], 2)]}


def _queries(n_docs: int, dim: int):
    import numpy as np

    rng = np.random.default_rng(1)
    out = []
    for d in rng.integers(0, n_docs, size=200):
        _m, _p, _t, vs = next(_docs(int(d), 1, dim))
        q = np.frombuffer(vs[0], dtype=np.float32) + 0.1 * rng.normal(size=dim).astype(np.float32)
        out.append(q / np.linalg.norm(q))
    return out


def _pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def _search_figures(vs, rag, queries, n_docs: int) -> dict:
    """p50/p99 of VectorSearch.search, unfiltered and with a one-folder path filter."""
    import hashlib

    out: dict = {}
    in_folder = [hashlib.md5(f"doc{d}".encode()).hexdigest() for d in range(7, n_docs, FOLDERS)]
    folder = sorted(rag.chunk_ids_of_documents(in_folder))
    for name, allowed in (("unfiltered", None), ("path_filter", folder)):
        for q in queries[:5]:  # an index loaded, pages in the cache
            vs.search(rag, q, 10, allowed=allowed)
        times = []
        for q in queries:
            t = time.perf_counter()
            vs.search(rag, q, 10, allowed=allowed)
            times.append((time.perf_counter() - t) * 1000)
        out[f"search_{name}_ms"] = {"p50": round(_pct(times, 50), 2), "p99": round(_pct(times, 99), 2)}
    out["path_filter_chunks"] = len(folder)
    return out


def run_pg(dsn: str | None, n_docs: int, dim: int, cfg, work: Path, bulk: bool) -> dict:
    from ragweedd.query.vectors import VectorSearch
    from ragweedd.store.postgres.backend import PgBackend
    from ragweedd.store.types import PRIMARY

    server = None
    out: dict = {}
    if dsn is None:
        import pgserver

        server = pgserver.get_server(work / "pg", cleanup_mode="stop")
        server.psql("".join(f"ALTER SYSTEM SET {k} = '{v}';\n" for k, v in PG_SETTINGS.items()))
        server.cleanup()  # stopped; started again below with the settings
        server = pgserver.get_server(work / "pg", cleanup_mode="delete")
        dsn = server.get_uri()
        out["server_settings"] = dict(PG_SETTINGS)
    try:
        solo = max(2, n_docs // 100)
        duo = 2 * solo
        fill = n_docs - solo - duo
        half = fill // 2
        backend = PgBackend(dsn, source="fill-a")
        rag = backend.open_rag("bench")
        if bulk:
            # The fill as a bulk load: the HNSW index dropped while it runs and built once after,
            # by the store's own definition of it (pg_rag.py _ensure_hnsw).
            rag.set_embedder("synthetic", dim)
            rag.db.run(f"DROP INDEX vectors_hnsw_{rag.collection_id}_{PRIMARY}_{dim}")
        out["fill"] = _pg_ingest(dsn, [("fill-a", 0, half), ("fill-b", half, fill - half)], dim)
        out["fill"]["hnsw_index"] = "built after" if bulk else "maintained"
        print(f"pg fill: {out['fill']}", file=sys.stderr, flush=True)
        if bulk:
            t = time.perf_counter()
            with rag.db.tx() as c:
                c.execute(f"SET LOCAL maintenance_work_mem = '{BUILD_MEM}'")
                rag._ensure_hnsw(c, PRIMARY, dim)
            out["fill"]["hnsw_index_build_seconds"] = round(time.perf_counter() - t, 1)
            print(f"pg index build: {out['fill']['hnsw_index_build_seconds']} s", file=sys.stderr, flush=True)
        rag.close()
        backend.close()
        out["one_process"] = _pg_ingest(dsn, [("one", fill, solo)], dim)
        print(f"pg one process: {out['one_process']}", file=sys.stderr, flush=True)
        h = duo // 2
        out["two_processes"] = _pg_ingest(dsn, [("two-a", fill + solo, h), ("two-b", fill + solo + h, duo - h)], dim)
        print(f"pg two processes: {out['two_processes']}", file=sys.stderr, flush=True)
        out["ingest_one_process_chunks_per_s"] = out["one_process"]["chunks_per_s"]
        out["ingest_two_processes_chunks_per_s"] = out["two_processes"]["chunks_per_s"]
        out["second_process_adds_pct"] = round(100 * (out["two_processes"]["chunks_per_s"]
                                                      / out["one_process"]["chunks_per_s"] - 1), 1)
        backend = PgBackend(dsn, source="fill-a")
        rag = backend.open_rag("bench", readonly=True)
        vs = VectorSearch(cfg, None)
        try:
            out.update(_search_figures(vs, rag, _queries(n_docs, dim), n_docs))
            out["database_bytes"] = backend.database_size()
            # the filtered search's plan rests on the statistics autovacuum keeps (never ANALYZEd here)
            st = rag.db.one("SELECT n_live_tup, n_mod_since_analyze, last_autoanalyze::text AS at"
                            " FROM pg_stat_user_tables WHERE relname = 'vectors'")
            out["vectors_table_stats"] = st
        finally:
            vs.close()
            rag.close()
            backend.close()
    finally:
        if server is not None:
            server.cleanup()
    return out


def run_sqlite(n_docs: int, dim: int, cfg, work: Path) -> dict:
    from ragweedd.index.managed import DiskIndexes
    from ragweedd.index.sync import IndexSync
    from ragweedd.paths import Paths
    from ragweedd.query.vectors import VectorSearch
    from ragweedd.store.sqlite.backend import SqliteBackend

    paths = Paths.from_config(cfg).ensure()
    backend = SqliteBackend(paths)
    rag = backend.open_rag("bench")
    busy0, load0 = _machine_busy(), os.getloadavg()[0]
    t0 = time.perf_counter()
    try:
        _publish_all(rag, 0, n_docs, dim)
    finally:
        rag.close()
    t_pub = time.perf_counter() - t0
    print(f"sqlite publish: {n_docs * CHUNKS_PER_DOC} chunks in {t_pub:.1f} s", file=sys.stderr, flush=True)
    t1 = time.perf_counter()
    sync = IndexSync(cfg, paths, dim, stores=open_data_dir(paths))
    try:
        sync.sync("bench")  # a first build from the whole log, then the files flushed on close
    finally:
        sync.close()
    t_idx = time.perf_counter() - t1
    busy1 = _machine_busy()
    print(f"sqlite index build: {t_idx:.1f} s", file=sys.stderr, flush=True)
    n = n_docs * CHUNKS_PER_DOC
    out: dict = {"publish_chunks_per_s": round(n / t_pub, 1), "publish_seconds": round(t_pub, 1),
                 "index_build_chunks_per_s": round(n / t_idx, 1), "index_build_seconds": round(t_idx, 1),
                 "ingest_one_process_chunks_per_s": round(n / (t_pub + t_idx), 1),
                 "ingest_two_processes_chunks_per_s": None,
                 "machine_busy_pct": round(100 * (busy1[0] - busy0[0]) / max(1, busy1[1] - busy0[1]), 1),
                 "load_avg_1min_start_end": [round(load0, 2), round(os.getloadavg()[0], 2)]}
    rag = backend.open_rag("bench", readonly=True)
    indexes = DiskIndexes(cfg, paths)
    vs = VectorSearch(cfg, indexes)
    try:
        out.update(_search_figures(vs, rag, _queries(n_docs, dim), n_docs))
    finally:
        vs.close()
        indexes.close()
        rag.close()
    db = Path(paths.rag_db("bench"))
    out["database_bytes"] = sum(p.stat().st_size for p in db.parent.glob(db.name + "*"))
    out["index_files_bytes"] = sum(p.stat().st_size for p in paths.collection_dir("bench").iterdir()
                                   if p.is_file() and not p.name.startswith(db.name))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--chunks", type=int, default=1_000_000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--ef", type=int, help="search beam width (default: config hnsw_ef)")
    ap.add_argument("--backends", default="pg,sqlite")
    ap.add_argument("--dsn")
    ap.add_argument("--fill", choices=("bulk", "publish"), default="bulk",
                    help="PostgreSQL fill: HNSW index built after (bulk) or maintained (publish)")
    ap.add_argument("--out", default="pg_scale")
    a = ap.parse_args(argv)

    from ragweedd.config import load_config

    n_docs = max(50, a.chunks // CHUNKS_PER_DOC)
    work = Path(tempfile.mkdtemp(prefix="rwpgs"))
    work.chmod(0o755)
    text = f'data_dir="{work}/data"\nstate_dir="{work}/state"\ncache_dir="{work}/cache"\nlog_level="warning"\n'
    if a.ef:
        text += f"hnsw_ef = {a.ef}\n"
    cfg = load_config(text=text, env={})
    out: dict = {"chunks": n_docs * CHUNKS_PER_DOC, "dim": a.dim, "ef": cfg.hnsw_ef,
                 "load_avg_at_start": [round(x, 2) for x in os.getloadavg()]}
    backends = a.backends.split(",")
    try:
        if "pg" in backends:
            out["postgresql"] = run_pg(a.dsn, n_docs, a.dim, cfg, work, a.fill == "bulk")
            write_json(a.out, out)
        if "sqlite" in backends:
            out["sqlite"] = run_sqlite(n_docs, a.dim, cfg, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    out["load_avg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    figures = ["ingest_one_process_chunks_per_s", "ingest_two_processes_chunks_per_s", "second_process_adds_pct",
               "publish_chunks_per_s", "index_build_chunks_per_s", "search_unfiltered_ms", "search_path_filter_ms",
               "path_filter_chunks", "database_bytes", "index_files_bytes"]
    rows = [{"figure": f, **{b: out.get(k, {}).get(f) for b, k in (("PostgreSQL", "postgresql"),
                                                                    ("SQLite", "sqlite"))}} for f in figures]
    print(table(rows, ["figure", "PostgreSQL", "SQLite"]))
    print(f"wrote {write_json(a.out, out)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
