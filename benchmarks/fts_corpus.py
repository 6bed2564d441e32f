"""Synthetic-from-real-text corpora for the query benchmarks (nothing here ships in the package).

SciFact abstracts are split into sentences, and sentences are recombined at random (fixed seed)
into chunks of ~1,500 characters: the words, their frequencies and co-occurrences are real
scientific English, the number of chunks is whatever the benchmark needs. The databases are
cached under benchmarks/results/ (gitignored) because building 500k chunks takes minutes.
"""

from __future__ import annotations

import json
import random
import re
import sqlite3
import sys
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
SCIFACT = Path("/work/shared/eval/scifact")
XQUAD_ZH = Path("/work/shared/eval/xquad/zh")  # Chinese: sentences end in 。！？ without a space
_SENT = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9])|(?<=[。！？])")


def sentences(corpus_dir: Path = SCIFACT) -> list[str]:
    out: list[str] = []
    with open(corpus_dir / "corpus.jsonl", encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            out.extend(s.strip() for s in _SENT.split(d.get("text", "")) if len(s.strip()) > 20)
    return out


def chunks(n: int, seed: int = 7, target_chars: int = 1500, corpus_dir: Path = SCIFACT):
    sents = sentences(corpus_dir)
    rng = random.Random(seed)
    for i in range(n):
        parts, size = [], 0
        while size < target_chars:
            s = sents[rng.randrange(len(sents))]
            parts.append(s)
            size += len(s) + 1
        yield i + 1, " ".join(parts)[: target_chars + 200]


def build_fts(path: Path, n: int, *, log=print, corpus_dir: Path = SCIFACT, lang: str = "en") -> Path:
    """An FTS5 table with the rag.sqlite3 schema holding n synthetic chunks, written as a collection
    writes them (store/sqlite/rag_keywords.py: the index form in ``lang``)."""
    from ragweedd.store.sqlite import rag_keywords

    if path.exists():
        return path
    tmp = path.with_suffix(".tmp")
    tmp.unlink(missing_ok=True)
    conn = sqlite3.connect(tmp, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=OFF")
    conn.execute(rag_keywords.FTS_DDL)
    conn.execute(rag_keywords.LANGUAGES_DDL)
    # every keyword match leaves out the id ranges of documents in transit (store/sqlite/rag_hidden.py)
    conn.execute("CREATE TABLE hidden_chunks (lo INTEGER NOT NULL, hi INTEGER NOT NULL, md5 TEXT NOT NULL,"
                 " state TEXT NOT NULL, owner TEXT)")
    t0 = time.monotonic()
    batch: list[tuple] = []
    for rowid, text in chunks(n, corpus_dir=corpus_dir, target_chars=1500 if lang != "zh" else 500):
        batch.append((rowid, f"bench:{rowid}", text, f"/bench/doc{rowid // 4}.txt", ""))
        if len(batch) == 5000:
            conn.execute("BEGIN")
            rag_keywords.insert_rows(conn, batch, lang=lang)
            conn.execute("COMMIT")
            batch.clear()
            if rowid % 50000 == 0:
                log(f"  {rowid} chunks, {time.monotonic() - t0:.0f} s")
    if batch:
        conn.execute("BEGIN")
        rag_keywords.insert_rows(conn, batch, lang=lang)
        conn.execute("COMMIT")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    tmp.rename(path)
    Path(str(tmp) + "-wal").unlink(missing_ok=True)
    Path(str(tmp) + "-shm").unlink(missing_ok=True)
    return path


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 500_000
    RESULTS.mkdir(parents=True, exist_ok=True)
    p = build_fts(RESULTS / f"fts2_{n // 1000}k.sqlite3", n)
    print("built", p, p.stat().st_size // 2**20, "MiB")
