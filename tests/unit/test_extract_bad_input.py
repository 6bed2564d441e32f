"""Bad input never passes silently: each case ends as ExtractionSkipped or ExtractionError saying
why, never as a document with empty text (issue item 7)."""

from __future__ import annotations

import io
import json
import zipfile

import pytest

from ragweedd.errors import ArchiveLimitError, ExtractionError, ExtractionSkipped  # noqa: E402
from ragweedd.extract.base import ExtractSettings  # noqa: E402
from ragweedd.extract.registry import extract_file  # noqa: E402
from tests.conftest_extract import fx  # noqa: E402,F401
from tests.tools import require_tool  # noqa: E402

S = ExtractSettings()


def test_encrypted_pdf_is_an_error_that_says_password(fx):
    with pytest.raises(ExtractionError, match="encrypted PDF needs a password") as ei:
        extract_file(fx["pdf_encrypted"], S)
    assert not isinstance(ei.value, ExtractionSkipped) and "qpdf" in str(ei.value)
    assert ei.value.retryable is False


def test_truncated_pdf(fx):
    with pytest.raises(ExtractionError, match="not a readable PDF"):
        extract_file(fx["pdf_truncated"], S)


def test_truncated_docx(fx):
    with pytest.raises(ExtractionError, match=r"not a valid \.docx") as ei:
        extract_file(fx["docx_truncated"], S)
    assert "truncated.docx" in str(ei.value)


def test_docx_that_is_a_zip_without_document_part(tmp_path):
    p = tmp_path / "hollow.docx"
    with zipfile.ZipFile(p, "w") as z:
        z.writestr("hello.txt", "not a word document")
    with pytest.raises(ExtractionError, match="docx"):
        extract_file(p, S)


def test_invalid_utf8_is_decoded_with_replacement(fx):
    doc = extract_file(fx["invalid_utf8"], S)
    assert "au lait costs" in doc.text and "\ufffd" in doc.text


def test_bom_is_stripped(fx):
    assert extract_file(fx["bom"], S).text.startswith("Byte order mark")


def test_utf16_with_bom_is_text_not_binary(tmp_path):
    p = tmp_path / "win.txt"
    p.write_bytes("Notepad saved this as UTF-16.".encode("utf-16"))
    assert extract_file(p, S).text.startswith("Notepad saved this")


@pytest.mark.parametrize("name", ["picture.txt", "picture.md", "picture.py", "picture.csv", "picture.json",
                                  "picture.html", "picture.svg", "picture.tex"])
def test_binary_renamed_as_text_is_skipped(fx, tmp_path, name):
    p = tmp_path / name
    p.write_bytes(fx["binary_txt"].read_bytes())
    with pytest.raises(ExtractionSkipped, match="binary file"):
        extract_file(p, S)


def test_control_character_soup_is_binary(tmp_path):
    p = tmp_path / "soup.txt"
    p.write_bytes(bytes(range(1, 9)) * 200 + b"a few words")
    with pytest.raises(ExtractionSkipped, match="control characters"):
        extract_file(p, S)


@pytest.mark.parametrize("ext", [".txt", ".pdf", ".docx", ".odt", ".xlsx", ".xls", ".csv", ".json", ".html",
                                 ".svg", ".rtf", ".tex", ".zip", ".mp3", ".wav"])
def test_empty_file_is_skipped_for_every_format(tmp_path, ext):
    p = tmp_path / f"empty{ext}"
    p.write_bytes(b"")
    with pytest.raises(ExtractionSkipped, match="empty file"):
        extract_file(p, S)


def test_whitespace_only_file_is_skipped(fx):
    with pytest.raises(ExtractionSkipped, match="no text"):
        extract_file(fx["blank"], S)


def test_broken_json_says_where(fx):
    with pytest.raises(ExtractionError, match=r"line 1, column 13"):
        extract_file(fx["broken_json"], S)


def test_empty_json_document_is_skipped(tmp_path):
    p = tmp_path / "e.json"
    p.write_text("{}")
    with pytest.raises(ExtractionSkipped, match="JSON document is empty"):
        extract_file(p, S)


def test_deeply_nested_json_is_an_error_not_a_crash(tmp_path):
    p = tmp_path / "deep.json"
    p.write_text("[" * 200000 + "]" * 200000)
    with pytest.raises(ExtractionError, match="nested too deeply"):
        extract_file(p, S)


def test_svg_entity_expansion_refused(tmp_path):
    p = tmp_path / "laughs.svg"
    ents = "".join(f'<!ENTITY l{i} "&l{i - 1};&l{i - 1};&l{i - 1};&l{i - 1};">' for i in range(1, 10))
    p.write_text(f'<?xml version="1.0"?><!DOCTYPE svg [<!ENTITY l0 "lol">{ents}]>'
                 f'<svg xmlns="http://www.w3.org/2000/svg"><text>&l9;</text></svg>')
    with pytest.raises(ExtractionError, match="entities"):
        extract_file(p, S)


def test_malformed_svg(tmp_path):
    p = tmp_path / "bad.svg"
    p.write_text("<svg><text>unclosed</svg>")
    with pytest.raises(ExtractionError, match="not well-formed"):
        extract_file(p, S)


def test_rtf_that_is_not_rtf(tmp_path):
    p = tmp_path / "fake.rtf"
    p.write_text("just some words in a file named rtf")
    with pytest.raises(ExtractionError, match=r"not an RTF document"):
        extract_file(p, S)


def test_xlsx_that_is_random_bytes(tmp_path):
    p = tmp_path / "junk.xlsx"
    p.write_bytes(b"PK\x03\x04" + bytes(range(256)) * 4)
    with pytest.raises(ExtractionError, match=r"\.xlsx"):
        extract_file(p, S)


def test_xls_that_is_text(tmp_path):
    p = tmp_path / "junk.xls"
    p.write_text("name,value\nx,1\n")
    with pytest.raises(ExtractionError, match=r"\.xls"):
        extract_file(p, S)


def test_empty_spreadsheet_is_skipped(tmp_path):
    import openpyxl

    p = tmp_path / "blank.xlsx"
    openpyxl.Workbook().save(p)
    with pytest.raises(ExtractionSkipped, match="no cell values"):
        extract_file(p, S)


def test_odt_without_content_xml(tmp_path):
    p = tmp_path / "hollow.odt"
    with zipfile.ZipFile(p, "w") as z:
        z.writestr("mimetype", "application/vnd.oasis.opendocument.text")
    with pytest.raises(ExtractionError, match="no content.xml"):
        extract_file(p, S)


def test_docx_that_is_a_zip_bomb_is_refused_before_parsing(tmp_path):
    p = tmp_path / "bomb.docx"
    with zipfile.ZipFile(p, "w", zipfile.ZIP_DEFLATED) as z:
        with z.open("word/document.xml", "w") as m:
            for _ in range(40):
                m.write(bytes(1 << 20))
    with pytest.raises(ArchiveLimitError, match="zip bomb"):
        extract_file(p, ExtractSettings(zip_max_total_bytes=1 << 30))


def test_audio_file_that_is_not_audio(tmp_path):
    p = tmp_path / "fake.mp3"
    p.write_text("ID3 but actually words " * 50)
    with pytest.raises(ExtractionError) as ei:
        extract_file(p, S)
    assert "fake.mp3" in str(ei.value)


def test_silent_audio_is_skipped_not_indexed_empty(tmp_path):
    require_tool("ffmpeg")
    import subprocess

    p = tmp_path / "silence.wav"
    subprocess.run(["ffmpeg", "-nostdin", "-loglevel", "error", "-f", "lavfi", "-i", "anullsrc=r=16000:cl=mono",
                    "-t", "2", str(p)], check=True)
    try:
        doc = extract_file(p, S)
    except ExtractionSkipped as e:
        assert "no speech" in str(e)
    else:  # whisper may hallucinate on silence; what it must never do is return empty text
        assert doc.text.strip()


def test_unknown_extension_is_skipped(tmp_path):
    p = tmp_path / "a.xyz"
    p.write_text("text")
    with pytest.raises(ExtractionSkipped, match="unsupported file type '.xyz'"):
        extract_file(p, S)


def test_jsonl_bad_line_is_named(tmp_path):
    p = tmp_path / "rows.jsonl"
    p.write_text(json.dumps({"a": 1}) + "\n{broken\n")
    with pytest.raises(ExtractionError, match="line 2"):
        extract_file(p, S)


def test_html_with_only_scripts_is_skipped(tmp_path):
    p = tmp_path / "app.html"
    p.write_text("<html><head><script>var a=1;</script></head><body><script>boot()</script></body></html>")
    with pytest.raises(ExtractionSkipped, match="no text"):
        extract_file(p, S)


def test_csv_with_nul_bytes_is_binary(tmp_path):
    p = tmp_path / "x.csv"
    buf = io.BytesIO(b"a,b\n" + b"\x00" * 64)
    p.write_bytes(buf.getvalue())
    with pytest.raises(ExtractionSkipped, match="binary file"):
        extract_file(p, S)
