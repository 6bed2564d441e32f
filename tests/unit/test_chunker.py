"""The splitter of DESIGN §6: boundary rule, overlap, coverage; the entropy filter; provenance."""

from hypothesis import given, settings
from hypothesis import strategies as st

from ragweedd.chunk.chunker import ChunkParams, chunk_document
from ragweedd.chunk.entropy import shannon_entropy, verdict
from ragweedd.chunk.splitter import chunk_chars_for, find_boundary, iter_spans
from ragweedd.extract.base import ExtractedDoc, Region


def split_spans(text: str, chunk_chars: int, overlap_chars: int) -> list[tuple[int, int]]:
    """Character spans [start, end) of the chunks of ``text``, held in memory as one piece."""
    return [(start, end) for start, end, _ in iter_spans([text], chunk_chars, overlap_chars)]


def test_cut_moves_back_to_last_sentence_end_within_200_chars():
    text = "A" * 500 + ". " + "b" * 700  # sentence end at index 500
    # window [0, 600): the '.' at 500 lies in the last 200 chars -> cut just after it
    assert find_boundary(text, 0, 600) == 501
    # window [0, 800): '.' at 500 is 300 chars before the end -> no sentence cut; no whitespace
    # within the last 50 either -> cut at the window end
    assert find_boundary(text, 0, 800) == 800


def test_cut_falls_back_to_whitespace_within_last_50_chars():
    text = "x" * 560 + " " + "y" * 600
    assert find_boundary(text, 0, 600) == 561  # whitespace at 560, within [550, 600)
    text2 = "x" * 540 + " " + "y" * 600
    assert find_boundary(text2, 0, 600) == 600  # whitespace at 540 is outside the last 50


def test_newline_question_and_exclamation_are_sentence_ends():
    for ch in "\n!?":
        text = "w" * 450 + ch + "z" * 300
        assert find_boundary(text, 0, 600) == 451


def test_next_window_starts_at_boundary_minus_overlap():
    # Hand-checked: chunk 1000, overlap 500. Sentence ends every 100 chars ("." at 99, 199, ...).
    text = ("s" * 99 + ".") * 30
    spans = split_spans(text, 1000, 500)
    assert spans[0] == (0, 1000)  # '.' at 999 is the window's last char -> cut after it
    assert spans[1] == (500, 1500)  # next start = max(0 + 1, 1000 - 500)
    assert spans[2] == (1000, 2000)
    assert spans[-1][1] == len(text)


def test_next_start_is_at_least_pos_plus_one_with_full_overlap():
    spans = split_spans("abcdefghij" * 3, 10, 9)  # overlap clamps to chunk - 1
    starts = [s for s, _ in spans]
    assert starts == sorted(set(starts)) and all(b > a for a, b in zip(starts, starts[1:]))


def test_tiny_windows_do_not_repeat_the_same_sentence_end():
    text = "Hello world. This is a test! Another sentence here? And more text follows without end"
    spans = split_spans(text, 30, 15)
    ends = [e for _, e in spans]
    assert ends == sorted(set(ends)), "every chunk ends later than the one before"
    assert spans[0] == (0, 28)


def test_per_type_sizes_at_four_chars_per_token():
    assert chunk_chars_for("text", 2048, 1024, 512) == 8192
    assert chunk_chars_for("pdf", 2048, 1024, 512) == 4096
    assert chunk_chars_for("av", 2048, 1024, 512) == 2048
    assert chunk_chars_for("pdf", 256, 1024, 512) == 1024  # min(CHUNK_SIZE, CHUNK_SIZE_PDF)


@settings(max_examples=200, deadline=None)
@given(text=st.text(alphabet=st.sampled_from("ab .!?\n\té"), min_size=0, max_size=3000),
       chunk=st.integers(min_value=1, max_value=700), pct=st.integers(min_value=0, max_value=90))
def test_chunks_cover_the_whole_text_in_order(text, chunk, pct):
    spans = split_spans(text, chunk, chunk * pct // 100)
    if not text:
        assert spans == []
        return
    assert spans[0][0] == 0 and spans[-1][1] == len(text)
    for (s1, e1), (s2, e2) in zip(spans, spans[1:]):
        assert s1 < s2, "starts strictly increase"
        assert e1 < e2, "ends strictly increase"
        assert s2 <= e1, "no gap between consecutive chunks"
    for s, e in spans:
        assert 0 < e - s <= chunk


def test_entropy_filter_thresholds():
    assert shannon_entropy("aaaa") == 0.0
    assert abs(shannon_entropy("ab") - 1.0) < 1e-9
    assert verdict(7.5, 100, entropy_max=7.0, entropy_min=0.5) == "garbage"
    assert verdict(0.2, 3, entropy_max=7.0, entropy_min=0.5) == "empty"
    assert verdict(0.2, 8, entropy_max=7.0, entropy_min=0.5) is None  # low entropy but has words
    assert verdict(4.2, 2, entropy_max=7.0, entropy_min=0.5) is None


def test_chunk_spanning_two_pages_knows_both_and_keeps_exact_span():
    p1 = "First page text. " * 40
    p2 = "Second page text. " * 40
    text = p1 + p2
    doc = ExtractedDoc(text=text, kind="pdf", regions=[Region(0, len(p1), {"page": 1}),
                                                       Region(len(p1), len(text), {"page": 2})])
    res = chunk_document(doc, ChunkParams(chunk_tokens=100, pdf_tokens=100, av_tokens=100, overlap_pct=50))
    labels = [c["meta"].get("page_label") for c in res.chunks]
    assert "1-2" in labels and labels[0] == "1" and labels[-1] == "2"
    for c in res.chunks:
        m = c["meta"]
        assert text[m["char_start"]:m["char_end"]] == c["text"]
        assert m["word_count"] == len(c["text"].split())


def test_garbage_and_empty_chunks_are_dropped_and_counted():
    import random

    rng = random.Random(1)
    garbage = "".join(chr(rng.randrange(0x4E00, 0x9FFF)) for _ in range(400))
    doc = ExtractedDoc(text=garbage, kind="text")
    res = chunk_document(doc, ChunkParams(chunk_tokens=1000, pdf_tokens=1000, av_tokens=1000, overlap_pct=0))
    assert res.chunks == [] and res.dropped == {"garbage": 1}
    res = chunk_document(ExtractedDoc(text="----------------", kind="text"),
                         ChunkParams(chunk_tokens=100, pdf_tokens=100, av_tokens=100, overlap_pct=0))
    assert res.chunks == [] and res.dropped == {"empty": 1}


def test_spreadsheet_chunks_keep_to_one_sheet_and_name_their_exact_rows(tmp_path):
    """Every chunk of a workbook (openpyxl writes it) names one sheet and the first and last rows
    its text holds, read off the rows' own labels; empty rows are skipped and numbering goes on."""
    import re

    import openpyxl

    from ragweedd.extract.base import ExtractSettings
    from ragweedd.extract.sheets import CsvExtractor, XlsxExtractor

    wb = openpyxl.Workbook()
    for k, name in enumerate(["North", "South", "East"]):
        ws = wb.active if k == 0 else wb.create_sheet(name)
        ws.title = name
        for n in range(1, 48):
            # rows 9 and 30-31 are empty in every sheet
            ws.append([None] if n in (9, 30, 31) else [f"{name}{n}", n * 7, "a steady month for the shop"])
    wb.save(tmp_path / "book.xlsx")
    small = ChunkParams(chunk_tokens=40, pdf_tokens=40, av_tokens=40, overlap_pct=30)

    def check(doc, names):
        chunks = chunk_document(doc, small).chunks
        assert len(chunks) > 3 * len(names)
        for c in chunks:
            found = re.findall(r"^([A-Z][a-z]+)(\d+) \|", c["text"], re.M)
            sheets = {s for s, _ in found} | set(re.findall(r"^# Sheet: (\w+)$", c["text"], re.M))
            assert len(sheets) == 1, c["text"]  # never two sheets in one chunk
            first, last = int(found[0][1]), int(found[-1][1])
            lines = c["text"].split("\n")
            if not re.match(r"([A-Z][a-z]+)\d+ \||# Sheet", lines[0]):
                # the chunk starts inside a row: the one before the next row, empty rows aside
                first = int(re.match(r"[A-Za-z]+(\d+)", lines[1]).group(1)) - 1
                while first in (9, 30, 31):
                    first -= 1
            elif lines[0].startswith("# Sheet"):
                first = 1
            assert (c["meta"]["row_start"], c["meta"]["row_end"]) == (first, last), (c["meta"], c["text"])
            if names[0] is not None:
                assert c["meta"]["sheet"] == sheets.pop()

    check(XlsxExtractor().extract(tmp_path / "book.xlsx", ExtractSettings()), ["North", "South", "East"])
    rows = [f"Row{n},{n * 7},a steady month for the shop" if n not in (9, 30, 31) else "," for n in range(1, 60)]
    (tmp_path / "t.csv").write_text("\n".join(rows) + "\n")
    check(CsvExtractor().extract(tmp_path / "t.csv", ExtractSettings()), [None])


def test_chinese_prose_is_not_taken_for_garbage():
    """Chinese prose has 5-7.5 bits a character (thousands of characters in use; English has ~4.4):
    a chunk of it above the alphabetic threshold (7.0) is kept (issue 31: a tenth of XQuAD's
    Chinese paragraphs had been dropped), while random Han characters (8.6 bits) still are not."""
    import random

    from ragweedd.text_stats import shannon_entropy

    rng = random.Random(2)
    common = [chr(0x4E00 + i * 97 % 20000) for i in range(170)]  # 170 characters used evenly: 7.4 bits
    prose = "，".join("".join(rng.choice(common) for _ in range(12)) for _ in range(60)) + "。"
    assert 7.0 < shannon_entropy(prose) < 8.0
    res = chunk_document(ExtractedDoc(text=prose, kind="text"),
                         ChunkParams(chunk_tokens=1000, pdf_tokens=1000, av_tokens=1000, overlap_pct=0))
    assert res.dropped == {} and "".join(c["text"] for c in res.chunks) == prose
