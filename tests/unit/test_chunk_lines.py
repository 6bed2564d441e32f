"""Line numbers of chunks (``line_start``/``line_end``): the lines an editor shows for the file on
disk, counted over the streamed pieces exactly as over the whole text, and only where the text is
the file's own."""

from __future__ import annotations

import random
from pathlib import Path

from ragweedd.chunk.chunker import ChunkParams, chunk_document, iter_chunks
from ragweedd.extract.base import ExtractedDoc, ExtractSettings, Region, own_lines
from ragweedd.extract.registry import extract_file
from ragweedd.extract.text import TextExtractor, TextStream, iter_text_pieces

SMALL = ChunkParams(chunk_tokens=8, pdf_tokens=8, av_tokens=8, overlap_pct=25, entropy_min=0.0, entropy_max=99.0)


def editor_line(text: str, pos: int) -> int:
    """The 1-based line of character ``pos`` of ``text``, split as an editor splits ("\r\n", "\r",
    "\n"; not form feed or U+2028)."""
    head = text[:pos]
    if head.endswith("\r") and text[pos:pos + 1] == "\n":  # pos is the "\n" of a "\r\n"
        head = head[:-1]
    return 1 + head.replace("\r\n", "\n").replace("\r", "\n").count("\n")


def chunks_of(path: Path, params: ChunkParams = SMALL) -> list[dict]:
    return chunk_document(TextExtractor().extract(path, ExtractSettings()), params).chunks


def check_against_disk(path: Path, chunks: list[dict], codec: str = "utf-8-sig") -> None:
    """Each chunk's lines are those of its first and last character in the file as decoded here,
    independently of the extractor (a BOM is no character, each line break stays as it is)."""
    text = path.read_bytes().decode(codec)
    assert chunks
    for c in chunks:
        m = c["meta"]
        assert text[m["char_start"]:m["char_end"]] == c["text"]
        assert m["line_start"] == editor_line(text, m["char_start"]), c
        assert m["line_end"] == editor_line(text, m["char_end"] - 1), c


def test_lf_file_lines_match_the_file(tmp_path):
    # distinct words, so each word's line on disk is unambiguous
    lines = [f"w{i}a w{i}b w{i}c." for i in range(40)]
    f = tmp_path / "notes.md"
    f.write_text("\n".join(lines))  # no trailing newline
    chunks = chunks_of(f)
    check_against_disk(f, chunks)
    assert chunks[-1]["meta"]["line_end"] == 40
    assert any(c["meta"]["line_end"] > c["meta"]["line_start"] for c in chunks)


def test_crlf_and_bom_count_as_an_editor_does(tmp_path):
    lines = [f"w{i}a w{i}b w{i}c." for i in range(30)]
    f = tmp_path / "dos.txt"
    f.write_bytes(b"\xef\xbb\xbf" + "\r\n".join(lines).encode() + b"\r\n")
    chunks = chunks_of(f)
    assert "\r\n" in TextExtractor().extract(f, ExtractSettings()).text  # the pairs are there to count once
    check_against_disk(f, chunks)
    assert chunks[-1]["meta"]["line_end"] == 30


def test_utf16_and_lone_cr(tmp_path):
    f = tmp_path / "mac.txt"
    f.write_bytes("\r".join(f"w{i}a w{i}b." for i in range(25)).encode("utf-16"))
    chunks = chunks_of(f)
    check_against_disk(f, chunks, "utf-16")
    assert chunks[0]["meta"]["line_start"] == 1 and chunks[-1]["meta"]["line_end"] == 25


def test_chunk_after_leading_blank_lines_starts_on_its_first_word(tmp_path):
    f = tmp_path / "blank.md"
    f.write_text("\n\n\n   \n\nfirst words here.\nsecond line\n")
    (c,) = chunks_of(f, ChunkParams(chunk_tokens=100, pdf_tokens=100, av_tokens=100, overlap_pct=0))
    assert c["meta"]["line_start"] == 6 and c["meta"]["line_end"] == 7


def test_streamed_pieces_give_the_lines_of_the_whole_text(tmp_path):
    rng = random.Random(7)
    words = ["alpha", "beta.", "gamma", "\n", "\r\n", "\r", "\n\n", "  ", "\u2028", "é"]
    f = tmp_path / "big.txt"
    f.write_bytes(" ".join(rng.choice(words) for _ in range(6000)).encode())
    whole = chunks_of(f)
    stream = TextStream(f)
    assert stream.lines_exact
    # pieces of 97 bytes cut "\r\n" pairs and multi-byte characters apart
    pieces = list(iter_text_pieces(f, piece_bytes=97))
    assert len(pieces) > 100
    streamed = list(iter_chunks(pieces, stream.kind, stream.regions, SMALL, {}))
    assert [c["meta"] for c in streamed] == [c["meta"] for c in whole]
    assert whole[-1]["meta"]["line_end"] > 1000


def test_random_texts_against_a_plain_count():
    rng = random.Random(3)
    words = ["alpha", "beta.", "x", "\n", "\r\n", "\r", "\n\n", "  ", "\x0c"]

    for _ in range(150):
        text = " ".join(rng.choice(words) for _ in range(rng.randint(1, 300)))
        params = ChunkParams(chunk_tokens=rng.randint(1, 20), pdf_tokens=8, av_tokens=8,
                             overlap_pct=rng.choice([0, 10, 50]), entropy_min=0.0, entropy_max=99.0)
        cuts = sorted(rng.sample(range(1, len(text)), min(6, len(text) - 1)))
        pieces = [text[a:b] for a, b in zip([0] + cuts, cuts + [len(text)])]
        one = list(iter_chunks([text], "text", [own_lines(len(text))], params, {}))
        assert list(iter_chunks(pieces, "text", [own_lines(len(text))], params, {})) == one
        for c in one:
            m = c["meta"]
            assert m["line_start"] == editor_line(text, m["char_start"])
            assert m["line_end"] == editor_line(text, m["char_end"] - 1)


def test_no_lines_without_a_line_region():
    doc = ExtractedDoc(text="one two three.\nfour five six.\n" * 20, kind="text",
                       regions=[Region(0, 10, {"section": "S"})])
    assert not doc.lines_exact
    assert all("line_start" not in c["meta"] for c in chunk_document(doc, SMALL).chunks)


def test_a_line_region_inside_a_larger_text_counts_from_its_own_start():
    """An archive member: its text starts after a header and the previous member, at its line 1."""
    head = "File: a.md\n"
    member = "m0a m0b.\nm1a m1b.\nm2a m2b.\n"
    text = "x\n" * 50 + head + member
    start = text.index(member)
    doc = ExtractedDoc(text=text, regions=[Region(start, len(text), {"line": 1, "member": "a.md"})])
    chunks = chunk_document(doc, ChunkParams(chunk_tokens=3, pdf_tokens=3, av_tokens=3, overlap_pct=0,
                                             entropy_min=0.0, entropy_max=99.0)).chunks
    inside = [c for c in chunks if c["meta"]["char_start"] >= start]
    assert inside and all(c["meta"]["line_start"] == int(c["text"][1]) + 1 for c in inside)
    assert all("line_start" not in c["meta"] for c in chunks if c["meta"]["char_start"] < start - len(head))


def test_only_untransformed_text_is_marked(tmp_path):
    (tmp_path / "a.html").write_text("<html><body><p>Hello\nworld</p></body></html>")
    (tmp_path / "a.json").write_text('{"a": 1}')
    (tmp_path / "a.py").write_text("x = 1\n")
    (tmp_path / "a.csv").write_text("a,b\n1,2\n")
    s = ExtractSettings()
    assert extract_file(tmp_path / "a.py", s).lines_exact
    for name in ("a.html", "a.json", "a.csv"):
        assert not extract_file(tmp_path / name, s).lines_exact, name
