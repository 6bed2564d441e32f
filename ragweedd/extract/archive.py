"""Zip archives, recursively, with caps (DESIGN §5, issue: hostile archives).

Nothing a zip declares is trusted: every member is read through a byte counter, and the counted
bytes (not the header's sizes) are held against the caps: total uncompressed bytes, compression
ratio, member count and nesting depth. A member whose content disagrees with its declared size or
CRC is a forged header and refuses the archive. Member names are never used as paths: a member
that needs a file on disk (unrtf, pdftoppm, nested zips) is copied to ``m<N><ext>`` inside a
private scratch directory, extracted, and deleted; names with ``..`` or absolute paths refuse the
whole archive, since no honest archiver writes them.

Each member's text is preceded by a ``File: <member>`` line; regions carry ``member`` (nested:
``"inner.zip/b.pdf"``) next to the member's own provenance (page, sheet, ...).
"""

from __future__ import annotations

import re
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ragweedd.errors import ArchiveLimitError, ExtractionError, ExtractionSkipped
from ragweedd.extract.base import ExtractedDoc, Extractor, ExtractSettings, Region, ToolRequirement
from ragweedd.extract.sniff import require_nonempty
from ragweedd.extract.tools import scratch_dir
from ragweedd.logging import lazy_logger

# which extractor reads a member, by its name (None: not a format ragweedd reads)
MemberLookup = Callable[[Path], Extractor | None]

log = lazy_logger(__name__)

ZIP_EXT = (".zip",)
_READ = 64 * 1024
_DRIVE = re.compile(r"^[A-Za-z]:")


@dataclass
class _Budget:
    total: int = 0
    members: int = 0


def check_member_name(archive: str, name: str) -> None:
    if "\x00" in name:
        raise ArchiveLimitError(f"{archive}: member name {name!r} contains a NUL byte; archive refused")
    if name.startswith(("/", "\\")) or _DRIVE.match(name):
        raise ArchiveLimitError(f"{archive}: member {name!r} has an absolute path; archive refused",
                                hint="a zip made by an ordinary archiver never holds absolute paths")
    if ".." in re.split(r"[/\\]+", name):
        raise ArchiveLimitError(f"{archive}: member {name!r} climbs out of the archive with '..'; archive refused",
                                hint="path traversal ('zip slip') is a sign of a hostile archive")


def _copy_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, dest: Path, label: str, settings: ExtractSettings,
                 budget: _Budget) -> int:
    """Stream one member to ``dest`` through the counter; returns the bytes actually read."""
    n = 0
    csize = max(info.compress_size, 1)
    try:
        with zf.open(info) as src, open(dest, "wb") as out:
            while True:
                chunk = src.read(_READ)
                if not chunk:
                    break
                n += len(chunk)
                budget.total += len(chunk)
                if n > info.file_size:
                    raise ArchiveLimitError(f"{label}: member holds more than the {info.file_size} bytes its header "
                                            f"declares (forged size); archive refused")
                if budget.total > settings.zip_max_total_bytes:
                    raise ArchiveLimitError(
                        f"{label}: archive expands past {settings.zip_max_total_bytes // (1024 * 1024)} MiB "
                        f"(zip_max_total_mb); refused", hint="raise zip_max_total_mb if the archive is trusted")
                if n / csize > settings.zip_max_ratio and n > 1024 * 1024:
                    raise ArchiveLimitError(f"{label}: compression ratio passed {settings.zip_max_ratio:.0f}:1 "
                                            f"(zip_max_ratio) while reading: a zip bomb; refused")
                out.write(chunk)
    except zipfile.BadZipFile as e:
        if "CRC" in str(e):
            raise ArchiveLimitError(f"{label}: content does not match its header (size or CRC forged: {e}); "
                                    f"archive refused") from None
        raise ExtractionError(f"{label}: damaged zip member ({e})") from None
    except EOFError:
        raise ArchiveLimitError(f"{label}: member ends after {n} bytes but its header declares {info.file_size} "
                                f"(forged size or truncated archive); refused") from None
    except (zlib.error, NotImplementedError, RuntimeError) as e:
        raise ExtractionError(f"{label}: cannot decompress member ({e})") from None
    if n != info.file_size:
        raise ArchiveLimitError(f"{label}: member holds {n} bytes but its header declares {info.file_size} "
                                f"(forged size); archive refused")
    return n


def extract_archive(path: Path, settings: ExtractSettings, extractor_for: MemberLookup, *, depth: int = 0,  # noqa: C901 - each archive limit (depth, count, size, ratio) ends the member loop its own way
                    budget: _Budget | None = None, display: str | None = None) -> ExtractedDoc:
    """The members' text, each read by the extractor ``extractor_for`` names for it (the registry's
    lookup, handed in: the registry holds this extractor too)."""
    budget = budget or _Budget()
    display = display or str(path)
    try:
        zf = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError, ValueError) as e:
        raise ExtractionError(f"{display}: not a valid zip archive ({e})",
                              hint="the file is damaged or truncated") from None
    parts: list[str] = []
    regions: list[Region] = []
    pos = 0
    kinds: set[str] = set()
    skipped: list[str] = []
    failed: list[str] = []
    ocr = False
    with zf, scratch_dir(settings, "ragweed-zip-") as work:
        infos = zf.infolist()
        for info in infos:
            check_member_name(display, info.filename)
        for idx, info in enumerate(infos):
            if info.is_dir():
                continue
            name = info.filename
            label = f"{display}!{name}"
            budget.members += 1
            if budget.members > settings.zip_max_members:
                raise ArchiveLimitError(f"{display}: more than {settings.zip_max_members} members "
                                        f"(zip_max_members); refused")
            if info.flag_bits & 0x1:
                skipped.append(f"{name} (encrypted)")
                continue
            if info.file_size == 0:
                continue
            if info.file_size / max(info.compress_size, 1) > settings.zip_max_ratio:
                raise ArchiveLimitError(
                    f"{label}: declares {info.file_size} bytes from {info.compress_size} compressed, a "
                    f"{info.file_size / max(info.compress_size, 1):.0f}:1 ratio over zip_max_ratio "
                    f"{settings.zip_max_ratio:.0f}: a zip bomb; refused")
            if budget.total + info.file_size > settings.zip_max_total_bytes:
                raise ArchiveLimitError(
                    f"{label}: declares {info.file_size} bytes, which takes the archive past "
                    f"{settings.zip_max_total_bytes // (1024 * 1024)} MiB (zip_max_total_mb); refused",
                    hint="raise zip_max_total_mb if the archive is trusted")
            ext = Path(name).suffix.lower()
            inner = extractor_for(Path(name))
            if inner is None:
                skipped.append(name)
                continue
            if ext in ZIP_EXT and depth + 1 > settings.zip_max_depth:
                raise ArchiveLimitError(f"{label}: archives nested deeper than {settings.zip_max_depth} "
                                        f"(zip_max_depth); refused")
            tmp = work / f"m{idx}{ext}"
            try:
                _copy_member(zf, info, tmp, label, settings, budget)
                if ext in ZIP_EXT:
                    doc = extract_archive(tmp, settings, extractor_for, depth=depth + 1, budget=budget,
                                          display=label)
                else:
                    doc = inner.extract(tmp, settings)
            except ArchiveLimitError as e:
                if str(tmp) not in e.message:
                    raise
                raise ArchiveLimitError(e.message.replace(str(tmp), label), hint=e.hint) from None
            except ExtractionSkipped as e:
                skipped.append(f"{name} ({e.message.replace(str(tmp), label)})")
                continue
            except ExtractionError as e:
                msg = e.message.replace(str(tmp), label)
                log.warning("zip_member_failed", archive=display, member=name, error=msg)
                failed.append(f"{name}: {msg}")
                continue
            finally:
                tmp.unlink(missing_ok=True)
            kinds.add(doc.kind)
            ocr = ocr or bool(doc.ocr_type)
            if parts:
                parts.append("\n\n")
                pos += 2
            header = f"File: {name}\n"
            body = doc.text.replace(f"{tmp}", name)
            start = pos
            parts.append(header)
            pos += len(header)
            for r in doc.regions:
                meta = dict(r.meta)
                meta["member"] = f"{name}/{meta['member']}" if "member" in meta else name
                regions.append(Region(pos + r.start, pos + r.end, meta))
            parts.append(body)
            pos += len(body)
            # a nested archive's text is already covered by regions naming its members in full
            # ("inner.zip/b.pdf"); a region for "inner.zip" over all of it would overlap them, and
            # regions with the same keys must not overlap (the chunker bisects them)
            end = start + len(header) if ext in ZIP_EXT else pos
            regions.append(Region(start, end, {"member": name}))
    regions.sort(key=lambda r: (r.start, -r.end))
    text = "".join(parts)
    if not text.strip():
        why = "; ".join(failed + skipped)[:500] or "no members"
        if failed:
            raise ExtractionError(f"{display}: no member could be extracted ({why})")
        raise ExtractionSkipped(f"{display}: archive holds no extractable text ({why})")
    return ExtractedDoc(text=text, kind=kinds.pop() if len(kinds) == 1 else "text", regions=regions,
                        ocr_type="tesseract:partial" if ocr else None, extractor="zip",
                        stats={"members_failed": failed, "members_skipped": skipped, "bytes_read": budget.total})


class ZipExtractor:
    name = "zip"
    extensions = ZIP_EXT

    def __init__(self, extractor_for: MemberLookup) -> None:
        self.extractor_for = extractor_for

    def extract(self, path: Path, settings: ExtractSettings) -> ExtractedDoc:
        require_nonempty(path)
        return extract_archive(path, settings, self.extractor_for)

    def requirements(self) -> list[ToolRequirement]:
        return []
