"""Hostile zip archives: a 1 GiB bomb, nesting past the depth cap, '../' and absolute member names,
forged sizes, too many members. Each is refused with a clear ArchiveLimitError in bounded time and
memory, and nothing is written outside the scratch directory."""

from __future__ import annotations

import io
import struct
import time
import zipfile
from pathlib import Path

import pytest

from ragweedd.errors import ArchiveLimitError, ExtractionSkipped  # noqa: E402
from ragweedd.extract.base import ExtractSettings  # noqa: E402
from ragweedd.extract.registry import extract_file  # noqa: E402
from ragweedd.ingest.sandbox import extract_sandboxed  # noqa: E402
from tests.conftest_extract import fx, zip_bomb  # noqa: E402,F401

TEXT = "The harbour master logs every ship that enters the port before dawn.\n"


def _zip(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in members.items():
            z.writestr(zipfile.ZipInfo(name), data, compress_type=zipfile.ZIP_DEFLATED)
    return path


def _nested(depth: int) -> bytes:
    """A zip whose only member is a zip, `depth` levels down to a text file."""
    data = TEXT.encode()
    name = "deep.txt"
    for level in range(depth):
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
            z.writestr(name, data)
        data, name = buf.getvalue(), f"level{depth - level}.zip"
    return data


def test_zip_bomb_refused_quickly_in_process(zip_bomb):
    t0 = time.monotonic()
    with pytest.raises(ArchiveLimitError, match=r"zip bomb") as ei:
        extract_file(zip_bomb, ExtractSettings())
    assert time.monotonic() - t0 < 10
    assert "zeros.txt" in str(ei.value) and "zip_max_ratio" in str(ei.value)


def test_zip_bomb_in_sandbox_has_bounded_time_and_peak_memory(zip_bomb):
    t0 = time.monotonic()
    with pytest.raises(ArchiveLimitError) as ei:
        extract_sandboxed(zip_bomb, ExtractSettings(), timeout_s=60, cpu_s=60, memory_mb=512)
    took = time.monotonic() - t0
    peak = ei.value.peak_rss_mb
    print(f"\nzip bomb (1 GiB member): refused in {took:.2f} s, sandbox child peak RSS {peak} MB")
    assert took < 10
    assert 0 < peak < 150


def test_zip_bomb_with_ratio_cap_lifted_stops_at_total_bytes(zip_bomb, tmp_path):
    """Even when the ratio cap is lifted, the total-bytes cap stops the read (declared size first)."""
    s = ExtractSettings(zip_max_ratio=1e9, zip_max_total_bytes=64 << 20, scratch_dir=str(tmp_path / "scratch"))
    t0 = time.monotonic()
    with pytest.raises(ArchiveLimitError, match="zip_max_total_mb"):
        extract_file(zip_bomb, s)
    assert time.monotonic() - t0 < 10
    assert list((tmp_path / "scratch").iterdir()) == []


def _forge_size(path: Path, member: str, new_size: int) -> None:
    """Patch the uncompressed-size fields of `member` in the local header and the central directory
    of a real zip written by zipfile (no zip64 here, so both are 32-bit fields)."""
    data = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as z:
        info = z.getinfo(member)
    assert data[info.header_offset:info.header_offset + 4] == b"PK\x03\x04"
    struct.pack_into("<I", data, info.header_offset + 22, new_size)
    cd = data.find(b"PK\x01\x02")
    while cd >= 0:
        name_len = struct.unpack_from("<H", data, cd + 28)[0]
        if data[cd + 46:cd + 46 + name_len] == member.encode():
            struct.pack_into("<I", data, cd + 24, new_size)
            break
        cd = data.find(b"PK\x01\x02", cd + 4)
    else:
        raise AssertionError("central directory entry not found")
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("factor", [0.01, 10])
def test_forged_member_size_is_refused(tmp_path, factor):
    body = (TEXT * 20000).encode()  # ~1.4 MB of real text
    p = _zip(tmp_path / "forged.zip", {"log.txt": body, "ok.md": b"# fine\n\nnothing wrong here\n"})
    _forge_size(p, "log.txt", int(len(body) * factor))
    with zipfile.ZipFile(p) as z:
        assert z.getinfo("log.txt").file_size == int(len(body) * factor)  # the forgery took
    with pytest.raises(ArchiveLimitError, match=r"forged") as ei:
        extract_file(p, ExtractSettings(zip_max_ratio=1e6))
    assert "log.txt" in str(ei.value)


def test_nesting_within_depth_keeps_member_paths(tmp_path):
    p = tmp_path / "nest2.zip"
    p.write_bytes(_nested(2))  # outer -> level2.zip -> deep.txt  (depth 1 inside the outer)
    doc = extract_file(p, ExtractSettings(zip_max_depth=3))
    assert "harbour master" in doc.text
    members = {r.meta.get("member") for r in doc.regions}
    assert "level2.zip/deep.txt" in members


def test_nesting_beyond_depth_is_refused(tmp_path):
    p = tmp_path / "nest6.zip"
    p.write_bytes(_nested(6))
    t0 = time.monotonic()
    with pytest.raises(ArchiveLimitError, match=r"nested deeper than 3 \(zip_max_depth\)"):
        extract_file(p, ExtractSettings(zip_max_depth=3))
    assert time.monotonic() - t0 < 5


@pytest.mark.parametrize("name", ["../../escape.txt", "docs/../../escape.txt", "..\\escape.txt"])
def test_parent_dir_member_names_are_refused(tmp_path, name):
    work = tmp_path / "work"
    work.mkdir()
    p = _zip(work / "slip.zip", {"readme.txt": TEXT.encode(), name: b"owned\n"})
    with pytest.raises(ArchiveLimitError, match=r"climbs out of the archive"):
        extract_file(p, ExtractSettings(scratch_dir=str(tmp_path / "scratch")))
    assert not list(tmp_path.rglob("escape.txt"))


@pytest.mark.parametrize("name", ["/tmp/ragweed-abs-escape.txt", "C:/Windows/escape.txt", "\\\\server\\share.txt"])
def test_absolute_member_names_are_refused(tmp_path, name):
    p = _zip(tmp_path / "abs.zip", {name: b"owned\n"})
    with zipfile.ZipFile(p) as z:
        assert z.namelist() == [name]
    with pytest.raises(ArchiveLimitError, match=r"absolute path"):
        extract_file(p, ExtractSettings())
    assert not Path("/tmp/ragweed-abs-escape.txt").exists()


def test_member_count_cap(tmp_path):
    p = _zip(tmp_path / "many.zip", {f"n{i}.txt": TEXT.encode() for i in range(30)})
    with pytest.raises(ArchiveLimitError, match=r"more than 10 members \(zip_max_members\)"):
        extract_file(p, ExtractSettings(zip_max_members=10))
    assert "harbour" in extract_file(p, ExtractSettings(zip_max_members=30)).text


def test_total_bytes_cap_across_members(tmp_path):
    chunk = ("".join(f"line {i} {TEXT}" for i in range(9000))).encode()  # ~700 KB, ratio < 200
    p = _zip(tmp_path / "big.zip", {f"part{i}.txt": chunk for i in range(6)})
    with pytest.raises(ArchiveLimitError, match="zip_max_total_mb"):
        extract_file(p, ExtractSettings(zip_max_total_bytes=2 << 20))


def test_broken_and_unknown_members_do_not_sink_the_archive(tmp_path, fx):
    pdf = fx["pdf"].read_bytes()
    p = _zip(tmp_path / "mixed.zip", {
        "good.pdf": pdf, "bad.pdf": pdf[: len(pdf) // 3], "blob.bin": b"\x00" * 100, "notes.txt": TEXT.encode(),
    })
    doc = extract_file(p, ExtractSettings())
    assert "humpback whales" in doc.text and "harbour master" in doc.text
    assert any(f.startswith("bad.pdf: ") and "mixed.zip!bad.pdf: not a readable PDF" in f
               for f in doc.stats["members_failed"])
    assert "blob.bin" in doc.stats["members_skipped"]
    pages = {(r.meta.get("member"), r.meta.get("page")) for r in doc.regions}
    assert ("good.pdf", 2) in pages


def test_archive_with_nothing_extractable_is_skipped(tmp_path):
    p = _zip(tmp_path / "bins.zip", {"a.bin": b"\x00\x01", "b.exe": b"MZ\x00\x00"})
    with pytest.raises(ExtractionSkipped, match="no extractable text"):
        extract_file(p, ExtractSettings())


def test_scratch_dir_is_emptied_after_members_needing_files(tmp_path, fx):
    scratch = tmp_path / "scratch"
    doc = extract_file(fx["zip"], ExtractSettings(scratch_dir=str(scratch)))
    assert "Beekeeping" in doc.text  # docx inside a nested zip
    assert {r.meta.get("member") for r in doc.regions} >= {"whales.pdf", "nested/inner.zip/docs/bees.docx"}
    assert list(scratch.iterdir()) == []


def test_regions_with_the_same_keys_never_overlap(fx):
    """The chunker bisects regions grouped by key set; overlaps inside a group would lose provenance."""
    doc = extract_file(fx["zip"], ExtractSettings())
    groups: dict[frozenset, list] = {}
    for r in doc.regions:
        groups.setdefault(frozenset(r.meta), []).append(r)
    for rs in groups.values():
        rs.sort(key=lambda r: r.start)
        for a, b in zip(rs, rs[1:]):
            assert a.end <= b.start, (a, b)
