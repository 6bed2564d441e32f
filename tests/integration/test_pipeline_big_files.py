"""Big and pathological files (hostile-input pass, "big files hold the only worker").

* A file over its size cap is skipped from its stat with the reason (never read).
* A large text file is read, chunked and published piece by piece: the chunks are exactly those of
  the whole text in memory, and memory stays flat whatever the file's size.
* An extractor killed at its wall time fails for good for that content: the same bytes are not
  extracted again (not by the queue's retries, not by a later event); new content is.
"""

from __future__ import annotations

import os
import random
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from ragweedd.chunk.chunker import ChunkParams, chunk_document
from ragweedd.config import load_config
from ragweedd.embed.hashing import HashEmbedder
from ragweedd.extract.base import ExtractSettings
from ragweedd.extract.text import TextExtractor
from ragweedd.ingest.pipeline import Pipeline, in_process_extract
from ragweedd.ingest.worker import make_extract
from ragweedd.paths import Paths
from ragweedd.store.backends import open_data_dir
from ragweedd.store.sqlite.job_queue import JobQueue

ROOT = Path(__file__).resolve().parents[2]


def _pipe(tmp_path, extra: str = "", extract=None, chunk: int = 64):
    cfg = load_config(text=f"chunk_size = {chunk}\n{extra}\n[embed]\nmodel = 'hash:64'\n", env={})
    paths = Paths.resolve(str(tmp_path / "data"), str(tmp_path / "state"), str(tmp_path / "cache"))
    return cfg, paths, Pipeline(cfg, paths, HashEmbedder(64), extract=extract, stores=open_data_dir(paths))


def _words(rng: random.Random, n: int) -> str:
    vocab = ["alpha", "beta", "gamma", "délta", "epsilon", "zeta", "ηta", "theta", "iota", "kappa"]
    return " ".join(rng.choice(vocab) for _ in range(n))


def _markdown(size: int, seed: int = 3) -> str:
    """Markdown with ATX and setext headings, fences, CRLF and LF lines, multi-byte characters."""
    rng = random.Random(seed)
    parts, n, k = [], 0, 0
    while n < size:
        k += 1
        r = rng.random()
        if r < 0.05:
            block = f"# Heading {k}\n"
        elif r < 0.08:
            block = f"Setext {k}\r\n======\r\n"
        elif r < 0.09:
            block = "```\n# not a heading\n```\n"
        else:
            block = _words(rng, rng.randint(5, 60)) + rng.choice([". ", ".\n", "!\r\n", "? ", "\n\n"])
        parts.append(block)
        n += len(block.encode())
    return "".join(parts)


def test_files_over_their_cap_are_skipped_from_the_stat_with_the_reason(tmp_path):
    calls: list[str] = []

    def extract(path, settings):
        calls.append(str(path))
        return in_process_extract(path, settings)

    cfg, paths, pipe = _pipe(tmp_path, "ingest_max_text_mb = 1\ningest_max_file_mb = 2", extract)
    docs = tmp_path / "docs"
    docs.mkdir()
    big_txt = docs / "huge.log"
    big_txt.write_text(("x" * 99 + "\n") * 11_000)  # 1.05 MiB of text
    big_html = docs / "page.html"
    big_html.write_text("<p>" + "y " * 600_000 + "</p>")
    big_pdf = docs / "scan.pdf"
    big_pdf.write_bytes(b"%PDF-1.4\n" + b"0" * (2 * 2**20 + 10))
    small_pdf_ok = docs / "ok.txt"
    small_pdf_ok.write_text("a small note that is indexed. " * 20)
    try:
        for p, key in ((big_txt, "ingest_max_text_mb (1 MiB)"), (big_html, "ingest_max_text_mb (1 MiB)"),
                       (big_pdf, "ingest_max_file_mb (2 MiB)")):
            out = pipe.ingest_file("c", p, docs)
            assert out.status == "skipped", out
            row = pipe.db.live_file("c", str(p))
            assert row["extract_status"] == "skipped"
            assert f"larger than {key}" in row["error"] and "raise ingest_max" in row["error"], row["error"]
        assert calls == []  # never read, copied or extracted
        assert pipe.ingest_file("c", small_pdf_ok, docs).status == "indexed"
    finally:
        pipe.close()


def test_extracted_text_over_the_cap_is_skipped(tmp_path):
    """A small file whose extracted text is larger than the cap (here: JSON pretty-printed to more
    than 1 MiB) never reaches the chunker."""
    cfg, paths, pipe = _pipe(tmp_path, "ingest_max_text_mb = 1")
    docs = tmp_path / "docs"
    docs.mkdir()
    f = docs / "data.json"
    f.write_text("[" + ",".join(["[[[[1]]]]"] * 90_000) + "]")  # 0.8 MiB in, about 5 MiB pretty-printed
    try:
        out = pipe.ingest_file("c", f, docs)
        assert out.status == "skipped", out
        assert "extracted text" in out.error and "larger than ingest_max_text_mb (1 MiB)" in out.error
        assert str(f) in out.error and "read-" not in out.error  # names the user's file, not the copy
    finally:
        pipe.close()


@pytest.mark.parametrize("piece", [1, 7, 4096, 1 << 20])
def test_streamed_chunks_are_the_chunks_of_the_whole_text(tmp_path, piece):
    from ragweedd.chunk.chunker import iter_chunks
    from ragweedd.extract.text import TextStream, iter_text_pieces

    f = tmp_path / "notes.md"
    f.write_bytes(_markdown(60_000 if piece < 100 else 600_000).encode())
    params = ChunkParams(64, 1024, 512, 50)
    whole = chunk_document(TextExtractor().extract(f, ExtractSettings()), params)
    stream = TextStream(f)
    pieces = list(iter_text_pieces(f, piece))
    dropped: dict[str, int] = {}
    streamed = list(iter_chunks(pieces, stream.kind, stream.regions, params, dropped))
    assert len(whole.chunks) > 50
    assert streamed == whole.chunks
    assert dropped == whole.dropped
    assert any("section" in c["meta"] for c in streamed)
    assert all(c["meta"]["line_start"] <= c["meta"]["line_end"] for c in streamed)  # the lines agree too


def test_large_text_file_is_published_piece_by_piece_with_the_same_chunks(tmp_path):
    from ragweedd.extract.text import STREAM_ABOVE_BYTES

    cfg, paths, pipe = _pipe(tmp_path, chunk=256)
    docs = tmp_path / "docs"
    docs.mkdir()
    f = docs / "big.md"
    f.write_bytes(_markdown(STREAM_ABOVE_BYTES + 300_000, seed=9).encode())
    assert f.stat().st_size > STREAM_ABOVE_BYTES
    expected = chunk_document(TextExtractor().extract(f, ExtractSettings()), pipe.params).chunks
    try:
        out = pipe.ingest_file("c", f, docs)
        assert out.status == "indexed" and out.chunks == len(expected), out
        assert out.embedded == len({c["text_hash"] for c in expected})
    finally:
        pipe.close()
    with sqlite3.connect(paths.rag_db("c")) as c:
        rows = c.execute(
            "SELECT e.chunk_idx, t.string_value, s.int_value, x.int_value, h.string_value, l1.int_value,"
            " l2.int_value FROM embeddings e"
            " JOIN embedding_metadata t ON t.id = e.id AND t.key = 'chroma:document'"
            " JOIN embedding_metadata s ON s.id = e.id AND s.key = 'char_start'"
            " JOIN embedding_metadata x ON x.id = e.id AND x.key = 'char_end'"
            " LEFT JOIN embedding_metadata h ON h.id = e.id AND h.key = 'section'"
            " LEFT JOIN embedding_metadata l1 ON l1.id = e.id AND l1.key = 'line_start'"
            " LEFT JOIN embedding_metadata l2 ON l2.id = e.id AND l2.key = 'line_end' ORDER BY e.chunk_idx").fetchall()
        n_doc, n_vec = c.execute("SELECT (SELECT chunks FROM documents), (SELECT count(*) FROM vectors)").fetchone()
    assert [tuple(r) for r in rows] == [
        (e["chunk_idx"], e["text"], e["meta"]["char_start"], e["meta"]["char_end"], e["meta"].get("section"),
         e["meta"]["line_start"], e["meta"]["line_end"])
        for e in expected]
    assert n_doc == n_vec == len(expected)


_RSS_SCRIPT = textwrap.dedent("""
    import resource, sys
    from pathlib import Path
    from ragweedd.config import load_config
    from ragweedd.embed.hashing import HashEmbedder
    from ragweedd.ingest.pipeline import Pipeline
    from ragweedd.paths import Paths
    from ragweedd.store.backends import open_data_dir
    base, f = Path(sys.argv[1]), Path(sys.argv[2])
    cfg = load_config(text="chunk_size = 2048\\n[embed]\\nmodel = 'hash:64'\\nbatch_size = 64\\n", env={})
    paths = Paths.resolve(str(base / "data"), str(base / "state"), str(base / "cache"))
    pipe = Pipeline(cfg, paths, HashEmbedder(64), stores=open_data_dir(paths))
    pipe.ingest_file("c", base / "warm.txt", base)  # imports and first allocations out of the way
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    out = pipe.ingest_file("c", f, f.parent)
    grew = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    print(out.status, out.chunks, round(grew, 1))
""")


def test_large_text_file_is_ingested_in_bounded_memory(tmp_path):
    """Peak RSS grows by a few MiB for a 24 MiB text file (reading it whole, as before, grew it by
    the file's size several times over: bytes, text, chunks and vectors all at once)."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (tmp_path / "warm.txt").write_text("warm up text. " * 100)
    f = docs / "big.txt"
    rng = random.Random(5)
    line = (_words(rng, 200) + ".\n").encode()
    with open(f, "wb") as out:
        for _ in range((24 << 20) // len(line)):
            out.write(line)
    r = subprocess.run([sys.executable, "-c", _RSS_SCRIPT, str(tmp_path), str(f)], capture_output=True, text=True,
                       timeout=120, cwd=str(ROOT), env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr[-3000:]
    status, chunks, grew = r.stdout.split()[-3:]
    assert status == "indexed" and int(chunks) > 3000
    print(f"peak RSS grew by {grew} MiB for a 24 MiB file")
    assert float(grew) < 40, f"peak RSS grew by {grew} MiB"


def _nested_html(path: Path, depth: int = 50_000, tail: str = "") -> None:
    # selectolax takes quadratic time on deep nesting: 50,000 levels take about 10 s
    path.write_text("<html><body>" + "<div>" * depth + "deep" + "</div>" * depth + tail + "</body></html>")


def test_wall_time_kill_fails_for_good_until_the_content_changes(tmp_path):
    cfg = load_config(text="extract_timeout_s = 1.5\nextract_max_tries = 3\n[embed]\nmodel = 'hash:64'\n", env={})
    paths = Paths.resolve(str(tmp_path / "data"), str(tmp_path / "state"), str(tmp_path / "cache"))
    sandboxed = make_extract(cfg)
    runs: list[float] = []

    def extract(path, settings):
        t0 = time.monotonic()
        try:
            return sandboxed(path, settings)
        finally:
            runs.append(time.monotonic() - t0)

    pipe = Pipeline(cfg, paths, HashEmbedder(64), extract=extract, stores=open_data_dir(paths))
    queue = JobQueue(paths.ingest_db, max_tries=cfg.extract_max_tries)
    docs = tmp_path / "docs"
    docs.mkdir()
    f = docs / "deep.html"
    _nested_html(f)
    try:
        queue.put("c", str(f), "upsert", str(docs))
        job = queue.claim(0)
        out = pipe.ingest_file("c", f, docs)
        assert out.status == "failed" and "killed after 1.5 s wall time" in out.error, out
        assert out.retryable is False
        assert queue.fail(job, out.error, retryable=out.retryable) is False  # not retried by the queue
        assert queue.depth() == {"failed": 1}
        assert len(runs) == 1

        # Another event for the same bytes (a touch, a restart's scan): not extracted again.
        os.utime(f, None)
        out = pipe.ingest_file("c", f, docs)
        assert out.status == "failed" and "wall time" in out.error
        assert len(runs) == 1 and out.seconds < 1.0
        assert pipe.db.live_file("c", str(f))["extract_status"] == "failed"

        # New content is tried again (and here it parses: shallow enough)
        _nested_html(f, depth=50, tail="<p>now a readable page about herons and egrets</p>")
        out = pipe.ingest_file("c", f, docs)
        assert out.status == "indexed", out
        assert len(runs) == 2
    finally:
        queue.close()
        pipe.close()
