"""The real-PDF run of benchmarks/ingest.py: a real daemon, a folder of PDFs dropped into its watched
folder, status polled every half second.

Reported: seconds until every file is keyword-searchable (its chunks published), seconds until
every vector is written, files/s, pages/s and chunks/s over the whole run, the embedder's own
chunks/s on a sample of the same chunk inputs (context line and text, as ingest embeds them; the
daemon is stopped by then, so nothing else runs), and the ratio of the two rates.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import table, write_json

ROOT = Path(__file__).resolve().parents[1]


def _get(port: int, token: str, path: str) -> dict:
    import urllib.request

    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


def _pages(pdfs: list[Path]) -> int:
    import pypdfium2 as pdfium

    n = 0
    for p in pdfs:
        d = pdfium.PdfDocument(str(p))
        n += len(d)
        d.close()
    return n


def _embed_rate(cfg_file: Path, rag: Path, sample: int) -> dict:
    from ragweedd.chunk.context import embed_input
    from ragweedd.config import load_config
    from ragweedd.embed.factory import make_embedder
    from ragweedd.embed.long import embed_texts

    c = sqlite3.connect(f"file:{rag}?mode=ro", uri=True)
    try:
        rows = c.execute(
            "SELECT t.string_value, x.string_value FROM embeddings e"
            " JOIN embedding_metadata t ON t.id = e.id AND t.key = 'chroma:document'"
            " LEFT JOIN embedding_metadata x ON x.id = e.id AND x.key = 'context'").fetchall()
    finally:
        c.close()
    random.Random(7).shuffle(rows)
    texts = [embed_input(t or "", x) for t, x in rows[:sample]]
    cfg = load_config(cfg_file, env={})
    emb = make_embedder(cfg.embed_model, cfg)
    embed_texts(emb, texts[:32], batch_size=cfg.embed_batch_size)  # warm up
    t0 = time.perf_counter()
    embed_texts(emb, texts, batch_size=cfg.embed_batch_size)
    dt = time.perf_counter() - t0
    return {"chunks": len(texts), "seconds": round(dt, 1), "chunks_per_s": round(len(texts) / dt, 2)}


def _vectors(s: dict) -> dict:
    """status' vectors figures; a daemon from before they existed published a file with its
    vectors, so every indexed file had them."""
    if "vectors" in s:
        return s["vectors"]
    n = s["files_by_state"].get("indexed", 0)
    return {"files_searchable": n, "files_with_vectors": n, "pending_chunks": 0, "running": False}


def run_pdfs(src: Path, model: str, workdir: Path | None, sample: int, extra: str, out: str = "ingest_pdfs") -> None:
    pdfs = sorted(p for p in src.iterdir() if p.suffix.lower() == ".pdf")
    work = workdir or Path(tempfile.mkdtemp(prefix="ragweed-bench-pdfs-"))
    if work.exists():
        shutil.rmtree(work)
    watched = work / "watched"
    watched.mkdir(parents=True)
    cfg_file = work / "ragweedd.toml"
    cfg_file.write_text(f'listen = "127.0.0.1:0"\ndata_dir = "{work / "data"}"\nstate_dir = "{work / "state"}"\n'
                        f'cache_dir = "{work / "cache"}"\n{extra}\n[embed]\nmodel = "{model}"\n'
                        f'[collections.fb]\npaths = ["{watched}"]\n')
    log = open(work / "daemon.log", "wb")
    # BENCH_DAEMON_ROOT runs another checkout's daemon (the code before a change) with this script
    root = Path(os.environ.get("BENCH_DAEMON_ROOT", ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "ragweedd", "--config", str(cfg_file), "run"], cwd=root,
                            stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "RAGWEED_LOG_LEVEL": "info"})
    try:
        port_file = work / "state" / "port"
        deadline = time.time() + 120
        while not port_file.exists() and time.time() < deadline:
            time.sleep(0.2)
        time.sleep(0.5)
        port, token = int(json.loads(port_file.read_text())["port"]), (work / "state" / "token").read_text().strip()
        while True:
            try:
                s = _get(port, token, "/v1/status")
                if not s["queue_depth"] and not s["ingest"]["running"]:
                    break
            except OSError:
                pass
            time.sleep(0.5)
        t0 = time.monotonic()
        for p in pdfs:
            shutil.copyfile(p, watched / p.name)
        t_kw = t_vec = None
        timeline = []
        while True:
            s = _get(port, token, "/v1/status")
            v, now = _vectors(s), time.monotonic() - t0
            timeline.append((round(now, 1), v["files_searchable"], v["files_with_vectors"], v["pending_chunks"]))
            settled = s["files_by_state"].get("indexed", 0) + s["files_by_state"].get("failed", 0) + \
                s["files_by_state"].get("skipped", 0)
            if t_kw is None and v["files_searchable"] >= len(pdfs):
                t_kw = now
            # status.idle where the daemon has it (scans and settling events included)
            if settled >= len(pdfs) and s.get("idle", not s["queue_depth"] and not v["pending_chunks"]
                                              and not v["running"]):
                t_vec = now
                break
            time.sleep(0.5)
        states = s["files_by_state"]
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(120)
        log.close()
    rag = work / "data" / "collections" / "fb" / "rag.sqlite3"
    c = sqlite3.connect(f"file:{rag}?mode=ro", uri=True)
    chunks = c.execute("SELECT count(*) FROM embeddings").fetchone()[0]
    c.close()
    pages = _pages(pdfs)
    alone = _embed_rate(cfg_file, rag, sample)
    rate = chunks / t_vec
    row = {"files": len(pdfs), "pages": pages, "chunks": chunks, "files_by_state": json.dumps(states),
           "all_keyword_searchable_s": round(t_kw, 1) if t_kw is not None else None,
           "all_vectors_s": round(t_vec, 1), "files_per_s": round(len(pdfs) / t_vec, 3),
           "pages_per_s": round(pages / t_vec, 2), "chunks_per_s": round(rate, 2),
           "embedder_only_chunks_per_s": alone["chunks_per_s"], "ratio": round(rate / alone["chunks_per_s"], 3)}
    print(table([row], [k for k in row if k != "files_by_state"]))
    print(f"files by state: {states}; workdir {work}")
    print("wrote", write_json(out, {**row, "model": model, "extra": extra, "embedder_only": alone,
                                              "timeline": timeline[::10], "workdir": str(work)}))
