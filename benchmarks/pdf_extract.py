"""PDF text extraction on a folder of real PDFs (FinanceBench dev by default): the pypdf path the
extractor used before against the pdfium path it uses now.

    .venv/bin/python benchmarks/pdf_extract.py [--folder DIR] [--limit N] [--engines pypdf,pdfium] [--out NAME]

For each engine: seconds per 100 pages (text layer only, in-process, CPU and wall; and CPU with
the rule deciding which pages to OCR), characters
extracted, files that failed, page counts that differ from poppler's `pdfinfo`, and the pages that
would be OCR'd: by the old letters-ratio rule for the pypdf path, by ``text_quality`` (and the
image check) for the pdfium path, and for the pdfium path the structure it reads on the way
(headings from the outline or the layout, table rows joined: pdf_layout.py); its time includes
reading that structure. Prints a table and writes benchmarks/results/NAME.json. CPU seconds are
the fairer comparison on a shared machine: both engines run single-threaded.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._common import table, write_json  # noqa: E402
from ragweedd.errors import ExtractionError  # noqa: E402
from ragweedd.extract import pdf_text  # noqa: E402
from ragweedd.extract.pdf import _wants_ocr  # noqa: E402
from ragweedd.extract.text_quality import assess  # noqa: E402
from ragweedd.text_stats import shannon_entropy  # noqa: E402

FINANCEBENCH = Path(os.environ.get("RAGWEED_FINANCEBENCH",
                                   ROOT.parent / "shared" / "eval" / "financebench")) / "docs"
_WORD = re.compile(r"[^\W\d_]{2,}")


def legacy_is_garbage(text: str) -> bool:
    """The rule the extractor used before text_quality (kept here only to count what it OCR'd)."""
    s = text.strip()
    if len(s) < 16:
        return True
    tokens = s.split()
    words = [t for t in tokens if _WORD.fullmatch(t.strip(".,;:!?()[]\"'"))]
    if len(words) < 3 or len(words) / max(1, len(tokens)) < 0.3:
        return True
    if sum(ch.isalpha() for ch in s) / len(s) < 0.4:
        return True
    return shannon_entropy(s) > 7.0


def pdfinfo_pages(path: Path) -> int | None:
    try:
        out = subprocess.run(["pdfinfo", str(path)], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r"^Pages:\s+(\d+)", out, re.M)
    return int(m.group(1)) if m else None


def run_engine(engine: str, path: Path) -> dict:
    t0, c0 = time.perf_counter(), time.process_time()
    try:
        out = pdf_text._read_pypdf(path) if engine == "pypdf" else pdf_text.read_pdf_text(path)
    except ExtractionError as e:
        return {"failed": str(e), "wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0}
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    c1 = time.process_time()
    if engine == "pypdf":
        ocr = [i + 1 for i, t in enumerate(out.texts) if legacy_is_garbage(t)]
    else:
        ocr = [i + 1 for i, t in enumerate(out.texts) if _wants_ocr(assess(t), out.has_image[i])]
    return {"pages": len(out.texts), "chars": sum(len(t) for t in out.texts), "wall_s": wall, "cpu_s": cpu,
            "rule_cpu_s": time.process_time() - c1, "ocr_pages": ocr, "title": out.title, "engine": out.engine,
            "headings": len(out.headings), "heading_source": out.heading_source,
            "rows_joined": out.stats.get("rows_joined", 0)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--folder", type=Path, default=FINANCEBENCH)
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--engines", default="pypdf,pdfium")
    ap.add_argument("--out", default="pdf_extract", help="name of the JSON file in benchmarks/results/")
    args = ap.parse_args()
    files = sorted(args.folder.glob("*.pdf"))[: args.limit or None]
    if not files:
        raise SystemExit(f"no PDFs in {args.folder} (set RAGWEED_FINANCEBENCH or --folder)")
    engines = args.engines.split(",")
    per_file = []
    for f in files:
        row: dict = {"file": f.name, "pdfinfo_pages": pdfinfo_pages(f)}
        for eng in engines:
            row[eng] = run_engine(eng, f)
        per_file.append(row)
        print(f.name, {e: {k: v for k, v in row[e].items() if k != "ocr_pages"} for e in engines}, flush=True)
    summary = []
    for eng in engines:
        ok = [r for r in per_file if "failed" not in r[eng]]
        pages = sum(r[eng]["pages"] for r in ok)
        wall = sum(r[eng]["wall_s"] for r in per_file)
        cpu = sum(r[eng]["cpu_s"] for r in per_file)
        summary.append({
            "engine": eng, "files": len(per_file), "failed": len(per_file) - len(ok), "pages": pages,
            "page_count_mismatch": sum(1 for r in ok if r[eng]["pages"] != r["pdfinfo_pages"]),
            "chars": sum(r[eng]["chars"] for r in ok),
            "s_per_100_pages_wall": round(100 * wall / max(1, pages), 3),
            "s_per_100_pages_cpu": round(100 * cpu / max(1, pages), 3),
            # the same plus deciding which pages to OCR (the old letters ratio / text_quality)
            "with_ocr_rule_cpu": round(100 * (cpu + sum(r[eng].get("rule_cpu_s", 0) for r in ok)) / max(1, pages), 3),
            "pages_to_ocr": sum(len(r[eng]["ocr_pages"]) for r in ok),
            "total_wall_s": round(wall, 1),
            # structure (pdfium path only; the pypdf path reads text alone): headings found, files
            # whose headings came from the outline / the layout, table rows joined
            "headings": sum(r[eng]["headings"] for r in ok),
            "outline_files": sum(1 for r in ok if r[eng]["heading_source"] == "outline"),
            "layout_files": sum(1 for r in ok if r[eng]["heading_source"] == "layout"),
            "rows_joined": sum(r[eng]["rows_joined"] for r in ok),
        })
    cols = ["engine", "files", "failed", "pages", "page_count_mismatch", "chars", "s_per_100_pages_wall",
            "s_per_100_pages_cpu", "with_ocr_rule_cpu", "pages_to_ocr", "total_wall_s", "headings", "outline_files",
            "layout_files", "rows_joined"]
    print(table(summary, cols))
    if len(summary) == 2 and summary[1]["s_per_100_pages_cpu"]:
        print(f"speed-up (CPU): {summary[0]['s_per_100_pages_cpu'] / summary[1]['s_per_100_pages_cpu']:.1f}x")
    if set(engines) == {"pypdf", "pdfium"}:
        same = sum(1 for r in per_file if "failed" not in r["pypdf"] and "failed" not in r["pdfium"]
                   and (r["pypdf"]["title"] or None) == r["pdfium"]["title"])
        print(f"titles equal in both engines: {same} of {len(per_file)}")
    write_json(args.out, {"folder": str(args.folder), "summary": summary, "files": per_file})


if __name__ == "__main__":
    main()
