"""Extraction of every fixture format in the sandbox: characters, chunks, time and the extractor
subprocess's peak RSS; plus the 1 GiB zip bomb and a large PDF.

    .venv/bin/python benchmarks/extract_formats.py [--big-pages 200]

Prints a table and writes benchmarks/results/extract_formats.json.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "data"))

import make_fixtures  # noqa: E402

from benchmarks._common import table, write_json  # noqa: E402
from ragweedd.chunk.chunker import ChunkParams, chunk_document  # noqa: E402
from ragweedd.config import default_config  # noqa: E402
from ragweedd.errors import ExtractionError  # noqa: E402
from ragweedd.extract.base import ExtractSettings  # noqa: E402
from ragweedd.ingest.sandbox import extract_sandboxed  # noqa: E402

CAPS = dict(timeout_s=300, cpu_s=300, memory_mb=2048)
ORDER = ["pdf", "pdf_scanned", "pdf_mixed", "docx", "odt", "txt", "md", "rst", "py", "html", "svg", "rtf", "tex",
         "wav", "mp3", "zip", "xlsx", "xls", "csv", "json", "big_pdf"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--big-pages", type=int, default=200)
    args = ap.parse_args()
    params = ChunkParams.from_config(default_config(), 2048)
    rows = []
    with tempfile.TemporaryDirectory() as d:
        out = Path(d)
        fx = make_fixtures.make_all(out / "fx")
        fx.update(make_fixtures.speech_files(out / "fx"))
        fx["big_pdf"] = make_fixtures.make_big_pdf(out / "big.pdf", args.big_pages)
        for key in ORDER:
            p = fx[key]
            t0 = time.perf_counter()
            doc = extract_sandboxed(p, ExtractSettings(), **CAPS)
            took = time.perf_counter() - t0
            chunks = chunk_document(doc, params).chunks
            rows.append({"format": key, "extractor": doc.extractor, "fixture": p.name, "bytes": p.stat().st_size,
                         "chars": len(doc.text), "regions": len(doc.regions), "chunks": len(chunks),
                         "ocr": doc.ocr_type or "", "seconds": round(took, 3),
                         "in_child_s": doc.stats.get("extract_s"), "peak_rss_mb": doc.stats["peak_rss_mb"]})
        bomb = out / "bomb.zip"
        zero = bytes(1 << 20)
        with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as z, z.open("zeros.txt", "w", force_zip64=True) as m:
            for _ in range(1024):
                m.write(zero)
        t0 = time.perf_counter()
        try:
            extract_sandboxed(bomb, ExtractSettings(), **CAPS)
            raise SystemExit("zip bomb was not refused")
        except ExtractionError as e:
            rows.append({"format": "zip bomb (1 GiB)", "extractor": "zip", "fixture": bomb.name,
                         "bytes": bomb.stat().st_size, "chars": 0, "chunks": 0, "ocr": type(e).__name__,
                         "seconds": round(time.perf_counter() - t0, 3), "peak_rss_mb": e.peak_rss_mb})
    cols = ["format", "extractor", "fixture", "bytes", "chars", "regions", "chunks", "ocr", "seconds", "in_child_s",
            "peak_rss_mb"]
    print(table(rows, cols))
    write_json("extract_formats", {"rows": rows, "chunk_params": params.__dict__})


if __name__ == "__main__":
    main()
