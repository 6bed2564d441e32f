"""Cost of the databases' check at start (ragweedd/store/sqlite/repair.py) and of the integrity job
(ragweedd/store/sqlite/integrity_check.py) on a large collection.

Copies a data directory (default: the one ``benchmarks/bench_search.py`` builds for 100k chunks,
benchmarks/results/search_100k) to a scratch dir, then times the start-up check (first run: it
also backfills chunk hashes an older version did not store; second run: the steady state) and the
integrity job, from a cold and a warm page cache where possible. Prints a table and writes JSON
(default benchmarks/results/startup_check.json).

    .venv/bin/python benchmarks/startup_check.py [--data benchmarks/results/search_100k/data]
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import peak_rss_mb, table, write_json  # noqa: E402


def _chunks(data: Path) -> dict[str, int]:
    out = {}
    for db in sorted((data / "collections").glob("*/rag.sqlite3")):
        c = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            out[db.parent.name] = c.execute("SELECT count(*) FROM embeddings").fetchone()[0]
        finally:
            c.close()
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=str(Path(__file__).parent / "results" / "search_100k" / "data"))
    ap.add_argument("--out", default="startup_check")
    a = ap.parse_args()
    from ragweedd.store.sqlite.checks import collection_counts, quick_check
    from ragweedd.store.sqlite.rag_db import RagDB

    src = Path(a.data)
    if not (src / "ingest_db.sqlite3").exists():
        print(f"no data dir at {src}: build one with benchmarks/bench_search.py first", file=sys.stderr)
        return 2
    rows: list[dict] = []

    def timed(step: str, fn) -> None:
        t0 = time.perf_counter()
        result = fn()
        rows.append({"step": step, "seconds": round(time.perf_counter() - t0, 2), "result": str(result)[:40]})

    # The steps of the start-up check and of the integrity job, one by one on every collection (the
    # benchmark's collections are written straight into rag.sqlite3, so the ingest -> rag agreement
    # step would remove them all; it is one indexed read of each table).
    with tempfile.TemporaryDirectory(prefix="ragweed-startup-check-") as tmp:
        data = Path(tmp) / "data"
        shutil.copytree(src, data, symlinks=False)
        size_mb = sum(p.stat().st_size for p in data.rglob("*") if p.is_file()) / 2**20
        chunks = _chunks(data)
        timed("ingest_db quick_check", lambda: quick_check(data / "ingest_db.sqlite3", recover=True) or "ok")
        for name in chunks:
            db = data / "collections" / name / "rag.sqlite3"
            timed(f"{name}: quick_check", lambda db=db: quick_check(db, recover=True) or "ok")
            timed(f"{name}: counts + FTS integrity-check", lambda db=db: collection_counts(db))
            rag = RagDB(db, name)
            try:
                timed(f"{name}: chunk hashes (first run, backfill)",
                      lambda rag=rag: len(rag.chunk_text_mismatches(backfill=True)))
                timed(f"{name}: chunk hashes (steady)", lambda rag=rag: len(rag.chunk_text_mismatches()))
            finally:
                rag.close()
    total = round(sum(r["seconds"] for r in rows if "first run" not in r["step"]), 2)
    rows.append({"step": "total, steady (start-up check = integrity job)", "seconds": total, "result": ""})
    print(f"data dir copy: {size_mb:.0f} MB, chunks: {chunks}")
    print(table(rows, ["step", "seconds", "result"]))
    out = write_json(a.out, {"chunks": chunks, "size_mb": round(size_mb, 1), "rows": rows,
                             "peak_rss_mb": peak_rss_mb()})
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
