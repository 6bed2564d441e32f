"""The context line of a chunk (ragweedd/chunk/context.py)."""

from ragweedd.chunk.context import (
    CONTEXT_FORMAT,
    context_line,
    document_label,
    embed_input,
    index_embedder_id,
    readable_name,
    useful_title,
)


def test_file_names_made_readable():
    assert readable_name("/x/3M_2018_10K.pdf") == "3M 2018 10K"
    assert readable_name("/x/AMCOR_2022_8K_dated-2022-07-01.pdf") == "AMCOR 2022 8K dated 2022 07 01"
    assert readable_name("/x/notes.md") == "notes"
    assert readable_name("/x/.bashrc") == "bashrc"
    # numbers alone say nothing a search could use
    assert readable_name("/x/4983.txt") == "" and readable_name("/x/0000104169-18-000028.pdf") == ""


def test_titles_that_name_nothing_are_not_used():
    for junk in ("0000004962-23-000006", "Document", "untitled", "Microsoft Word - report.docx", "report.pdf",
                 "  ", None, "12"):
        assert useful_title(junk) is None, junk
    assert useful_title("Microsoft Word - F20 Annual Report") == "F20 Annual Report"
    title = "Form 8-K for Foot Locker INC filed 05/19/2022"
    assert useful_title(title) == title


def test_document_label_joins_name_and_a_title_that_says_more():
    assert document_label("/x/ADOBE_2015_10K.pdf", "ADBE 10K FY15") == "ADOBE 2015 10K · ADBE 10K FY15"
    assert document_label("/x/ADOBE_2015_10K.pdf", "0000796343-15-000031") == "ADOBE 2015 10K"
    assert document_label("/x/adobe.pdf", "Adobe") == "adobe"  # the title repeats the name
    assert document_label("/x/4983.txt", "Sourdough starters") == "Sourdough starters"
    assert document_label("/x/4983.txt", None) == ""


def test_context_line_with_section_path_and_no_repeats():
    assert context_line("3M 2018 10K", ["Item 7. MD&A", "Liquidity"]) == "3M 2018 10K › Item 7. MD&A › Liquidity"
    assert context_line("notes · Sourdough", ["Sourdough", "Feeding"]) == "notes · Sourdough › Feeding"
    assert context_line("notes", None, "Feeding") == "notes › Feeding"
    assert context_line("", None, "Feeding") == "Feeding"
    assert context_line("", None, None) == ""
    long = context_line("A" * 150, ["B" * 100])
    assert len(long) == 120 and long.startswith("A" * 69 + "…") and long.endswith("…")
    # outer sections give way to the inner ones
    deep = context_line("ADOBE 2015 10K", ["Part II.", "Item 8. Financial Statements and Supplementary Data",
                                          "Notes to Consolidated Financial Statements", "NOTE 9. INCOME TAXES"])
    assert deep == "ADOBE 2015 10K › Notes to Consolidated Financial Statements › NOTE 9. INCOME TAXES", deep


def test_embed_input_and_fingerprint():
    assert embed_input("body", "") == "body" and embed_input("body", None) == "body"
    assert embed_input("body", "Doc › Sec") == "Doc › Sec\nbody"
    assert index_embedder_id("local:m@q8", True) == f"local:m@q8+{CONTEXT_FORMAT}"
    assert index_embedder_id("local:m@q8", False) == "local:m@q8"


def test_a_name_that_is_not_utf8_gives_a_storable_label():
    name = b"caf\xe9_menu.txt".decode("utf-8", "surrogateescape")
    label = readable_name("/x/" + name)
    assert label == "caf\\xe9 menu"
    label.encode("utf-8")  # no lone surrogate: SQLite stores it


def test_a_chunk_carries_the_section_path_of_its_region():
    from ragweedd.chunk.chunker import ChunkParams, chunk_document
    from ragweedd.extract.base import ExtractedDoc, Region

    text = "Revenue grew in every segment this quarter. " * 3
    doc = ExtractedDoc(text=text, kind="pdf", regions=[
        Region(0, len(text), {"page": 4}),
        Region(0, len(text), {"section": "Results", "section_path": ["Item 7. MD&A", "Results"]})])
    [c] = chunk_document(doc, ChunkParams(256, 256, 256, 15)).chunks
    assert c["meta"]["section"] == "Results" and c["meta"]["section_path"] == ["Item 7. MD&A", "Results"]


def test_a_plain_text_note_s_first_line_is_its_title_when_it_stands_alone(tmp_path):
    from ragweedd.extract.base import ExtractSettings
    from ragweedd.extract.text import TextExtractor, TextStream, plain_title

    assert plain_title("Sourdough care\n\nFeed it daily.") == "Sourdough care"
    assert plain_title("\ufeffSourdough care\r\n\r\nFeed it daily.") == "Sourdough care"
    assert plain_title("Feed it daily.\nThen wait.\n\nMore.") is None  # no empty line after it
    assert plain_title("12\n\nbody") is None and plain_title("one line") is None
    f = tmp_path / "4983.txt"
    f.write_text("Starter hydration and rise time\n\nA wetter starter rises faster.\n")
    assert TextExtractor().extract(f, ExtractSettings()).title == "Starter hydration and rise time"
    assert TextStream(f).title == "Starter hydration and rise time"
    code = tmp_path / "x.py"
    code.write_text("import os\n\nprint(os.sep)\n")
    assert TextExtractor().extract(code, ExtractSettings()).title is None


def test_overlap_auto_is_the_embedder_s_figure():
    from ragweedd.chunk.chunker import ChunkParams
    from ragweedd.config import load_config
    from ragweedd.embed.hashing import HashEmbedder

    auto = ChunkParams.for_embedder(load_config(text="", env={}), HashEmbedder(64))
    assert (auto.overlap_for("text"), auto.overlap_for("pdf"), auto.overlap_for("av")) == (15, 50, 15)
    cfg = load_config(text="chunk_overlap_pct = 40\n", env={})
    assert ChunkParams.for_embedder(cfg, HashEmbedder(64)).overlap_for("pdf") == 40
    cfg = load_config(text="", env={"RAGWEED_CHUNK_OVERLAP_PCT": "30"})
    assert ChunkParams.for_embedder(cfg, HashEmbedder(64)).overlap_pct == 30


def test_number_or_auto_keys_read_numbers_from_the_environment():
    from ragweedd.config import load_config

    cfg = load_config(text="", env={"RAGWEED_CHUNK_SIZE": "512", "RAGWEED_INGEST_WORKERS": "3"})
    assert cfg.chunk_size == 512 and cfg.ingest_workers == 3
    assert load_config(text="", env={"RAGWEED_CHUNK_SIZE": "auto"}).chunk_size == "auto"
