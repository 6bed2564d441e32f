"""Every real filing of the FinanceBench dev folder goes through the PDF extractor: none fails, the
page count is poppler's, and no page whose text layer poppler reads is OCR'd or left out.

The filings are not part of the repository (public SEC documents kept with the evaluation data,
never copied here). They are found where the benchmarks look for evaluation data: the folder named
by RAGWEED_FINANCEBENCH, else ../shared/eval/financebench beside the checkout. A clean clone without
that folder skips this test (like the benchmarks, it has nothing to read); setting
RAGWEED_FINANCEBENCH to a folder that does not hold the filings fails it, so a run that means to
check them cannot skip by accident.
"""

from __future__ import annotations

import multiprocessing
import os
import re
import subprocess
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

from ragweedd.extract.base import ExtractSettings  # noqa: E402
from ragweedd.extract.registry import extract_file  # noqa: E402
from ragweedd.extract.text_quality import assess  # noqa: E402
from tests.tools import require_tool  # noqa: E402

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
FOLDER = Path(os.environ.get("RAGWEED_FINANCEBENCH", ROOT.parent / "shared" / "eval" / "financebench")) / "docs"


def _filings() -> list[Path]:
    files = sorted(FOLDER.glob("*.pdf")) if FOLDER.is_dir() else []
    if not files:
        msg = f"no FinanceBench filings in {FOLDER}"
        if os.environ.get("RAGWEED_FINANCEBENCH"):
            pytest.fail(msg + " (RAGWEED_FINANCEBENCH is set)")
        pytest.skip(msg + " (set RAGWEED_FINANCEBENCH to the folder holding docs/)")
    return files


def _poppler_pages(pdfinfo: str, pdftotext: str, path: Path) -> tuple[int, list[str]] | None:
    info = subprocess.run([pdfinfo, str(path)], capture_output=True, text=True, timeout=120).stdout
    m = re.search(r"^Pages:\s+(\d+)", info, re.M)
    if m is None:
        return None
    pages = int(m.group(1))
    text = subprocess.run([pdftotext, "-q", str(path), "-"], capture_output=True, timeout=300).stdout
    return pages, text.decode("utf-8", "replace").split("\f")[:pages]


def _check(path: Path, pdfinfo: str, pdftotext: str) -> tuple[int, list[str]]:
    """(pages read, problems) for one filing."""
    poppler = _poppler_pages(pdfinfo, pdftotext, path)
    if poppler is None:
        return 0, [f"{path.name}: pdfinfo cannot read it either: not a filing this test can judge"]
    n_poppler, poppler_text = poppler
    try:
        # OCR off: what would be OCR'd is counted in stats["pages_need_ocr"] without running tesseract.
        doc = extract_file(path, ExtractSettings(ocr_enabled=False))
    except Exception as e:  # noqa: BLE001 - every failure is reported, not just the first
        return 0, [f"{path.name}: {type(e).__name__}: {e}"]
    problems = []
    if doc.stats["pages"] != n_poppler:
        problems.append(f"{path.name}: {doc.stats['pages']} pages, pdfinfo says {n_poppler}")
    kept = {r.meta["page"] for r in doc.regions if "page" in r.meta}  # section regions carry no page
    verdicts = [assess(t).verdict for t in poppler_text]
    lost = [i + 1 for i, v in enumerate(verdicts) if v == "ok" and i + 1 not in kept]
    if lost:
        problems.append(f"{path.name}: {len(lost)} pages poppler reads are left out: {lost[:10]}")
    # Only pages without a text layer may want OCR (AMERICANWATERWORKS_2021_10K has 3 scanned pages).
    no_layer = verdicts.count("missing")
    if doc.stats.get("pages_need_ocr", 0) > no_layer:
        problems.append(f"{path.name}: {doc.stats['pages_need_ocr']} pages would be OCR'd, "
                        f"only {no_layer} have no text layer for poppler")
    return doc.stats["pages"], problems


def test_every_filing_is_read_with_poppler_page_count_and_no_text_page_ocrd():
    pdfinfo, pdftotext = require_tool("pdfinfo"), require_tool("pdftotext")
    files = _filings()
    # One process per core (pdfium is not thread-safe): about 45 CPU seconds for the 6,794 pages.
    # Spawned, not forked: a child forked from a test process that runs threads (pytest-xdist's
    # worker does) can start with a lock held by a thread that does not exist in it, and hang.
    with ProcessPoolExecutor(max_workers=min(4, os.cpu_count() or 1),
                             mp_context=multiprocessing.get_context("spawn")) as pool:
        results = list(pool.map(_check, files, [pdfinfo] * len(files), [pdftotext] * len(files)))
    problems = [p for _, ps in results for p in ps]
    assert not problems, "\n".join(problems)
    assert sum(n for n, _ in results) > 0
