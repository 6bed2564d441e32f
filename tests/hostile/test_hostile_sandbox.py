"""The extraction sandbox against parsers that hang, eat memory, spin the CPU, crash or scribble on
stdout: each is killed (or caught) in bounded time and reported with the right error and reason."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from ragweedd.errors import ExtractionError, ExtractionSkipped, SandboxLimitError  # noqa: E402
from ragweedd.extract.base import ExtractSettings  # noqa: E402
from ragweedd.ingest.sandbox import extract_sandboxed  # noqa: E402

HERE = Path(__file__).resolve().parent


@pytest.fixture
def evil(monkeypatch, tmp_path):
    from ragweedd.extract import registry

    # the parsers are registered as extractor plugins here and, through the request, in the child
    monkeypatch.syspath_prepend(str(HERE))
    monkeypatch.setenv("PYTHONPATH", str(HERE) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    monkeypatch.setattr(registry, "_plugins", ())
    monkeypatch.setattr(registry, "_plugin_specs", ())
    monkeypatch.setattr(registry, "_by_ext", None)
    registry.register(["evil_extractors:EXTRACTORS"])

    def make(ext: str) -> Path:
        p = tmp_path / f"victim{ext}"
        p.write_text("anything")
        return p

    return make


def test_hung_parser_is_killed_at_wall_time(evil):
    t0 = time.monotonic()
    with pytest.raises(SandboxLimitError) as ei:
        extract_sandboxed(evil(".hang"), ExtractSettings(), timeout_s=2, cpu_s=60, memory_mb=512)
    took = time.monotonic() - t0
    assert 2 <= took < 6
    assert "killed after 2 s wall time" in str(ei.value)
    # a parser that ran out of time on this content would again: failed for good, not retried
    assert ei.value.retryable is False and ei.value.limit == "wall"


def test_memory_bomb_is_stopped_at_the_memory_cap(evil):
    t0 = time.monotonic()
    with pytest.raises(SandboxLimitError) as ei:
        extract_sandboxed(evil(".membomb"), ExtractSettings(), timeout_s=30, cpu_s=60, memory_mb=300)
    assert time.monotonic() - t0 < 15
    assert "memory" in str(ei.value) and "300 MB" in str(ei.value)
    assert ei.value.retryable is False
    # killed by the RSS watch or by RLIMIT_AS (2 x cap): either way it never grew past the address cap
    assert ei.value.peak_rss_mb < 2 * 300 + 100


def test_cpu_spin_is_killed_at_cpu_cap(evil):
    t0 = time.monotonic()
    with pytest.raises(SandboxLimitError) as ei:
        extract_sandboxed(evil(".cpuspin"), ExtractSettings(), timeout_s=30, cpu_s=1, memory_mb=512)
    assert time.monotonic() - t0 < 12
    assert "CPU" in str(ei.value)
    assert ei.value.retryable is False and ei.value.limit == "cpu"


def test_aborting_parser_is_a_failed_extraction_with_the_signal(evil):
    with pytest.raises(ExtractionError) as ei:
        extract_sandboxed(evil(".abort"), ExtractSettings(), timeout_s=30, cpu_s=30, memory_mb=512)
    assert not isinstance(ei.value, SandboxLimitError)
    assert "SIGABRT" in str(ei.value)


def test_python_exception_in_parser_comes_back_as_extraction_error(evil):
    with pytest.raises(ExtractionError) as ei:
        extract_sandboxed(evil(".crashes"), ExtractSettings(), timeout_s=30, cpu_s=30, memory_mb=512)
    assert "extractor crashed: KeyError" in str(ei.value)


def test_error_class_message_and_hint_survive_the_process_boundary(evil):
    with pytest.raises(ExtractionSkipped) as ei:
        extract_sandboxed(evil(".skips"), ExtractSettings(), timeout_s=30, cpu_s=30, memory_mb=512)
    assert ei.value.message.endswith("nothing to see") and ei.value.hint == "by design"


def test_stdout_noise_does_not_corrupt_the_reply(evil):
    doc = extract_sandboxed(evil(".noisy"), ExtractSettings(), timeout_s=30, cpu_s=30, memory_mb=512)
    assert doc.text == "quiet answer"
    assert doc.stats["peak_rss_mb"] > 0


def test_child_start_up_does_not_import_heavy_modules(evil):
    doc = extract_sandboxed(evil(".modules"), ExtractSettings(), timeout_s=30, cpu_s=30, memory_mb=512)
    assert doc.text == "loaded: none"
    assert doc.stats["wall_s"] < 5


def test_unknown_extension_is_skipped_not_failed(tmp_path):
    p = tmp_path / "thing.qqq"
    p.write_bytes(b"\x00\x01")
    with pytest.raises(ExtractionSkipped, match="unsupported file type"):
        extract_sandboxed(p, ExtractSettings(), timeout_s=30, cpu_s=30, memory_mb=512)


def test_missing_file_is_an_error_naming_it(tmp_path):
    with pytest.raises(ExtractionError, match="gone.txt"):
        extract_sandboxed(tmp_path / "gone.txt", ExtractSettings(), timeout_s=30, cpu_s=30, memory_mb=512)


def test_large_pdf_in_sandbox_reports_pages_and_bounded_peak_memory(tmp_path):
    from tests.conftest_extract import make_fixtures

    pdf = make_fixtures.make_big_pdf(tmp_path / "big.pdf", pages=60)
    doc = extract_sandboxed(pdf, ExtractSettings(), timeout_s=120, cpu_s=120, memory_mb=512)
    print(f"\n60-page PDF ({pdf.stat().st_size} bytes): {len(doc.text)} chars, "
          f"child peak RSS {doc.stats['peak_rss_mb']} MB, {doc.stats['wall_s']} s")
    assert [r.meta["page"] for r in doc.regions] == list(range(1, 61))
    assert doc.kind == "pdf" and "radiocarbon" in doc.text
    assert 10 < doc.stats["peak_rss_mb"] < 300


def test_peak_rss_is_the_childs_not_the_parents(tmp_path):
    """A big parent (the daemon with its index loaded) must not inflate the child's figure."""
    ballast = bytearray(400 << 20)
    for i in range(0, len(ballast), 4096):
        ballast[i] = 1
    p = tmp_path / "small.txt"
    p.write_text("a small note about parsnips\n")
    doc = extract_sandboxed(p, ExtractSettings(), timeout_s=30, cpu_s=30, memory_mb=512)
    del ballast
    assert doc.text.startswith("a small note")
    assert doc.stats["peak_rss_mb"] < 200
