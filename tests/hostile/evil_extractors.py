"""Test-only extractors that misbehave, registered as the extractor plugin
"evil_extractors:EXTRACTORS" (ragweedd.extract.registry.register; this folder on PYTHONPATH so the
sandbox child can import it too)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from ragweedd.errors import ExtractionSkipped
from ragweedd.extract.base import ExtractedDoc


class _Base:
    extensions: tuple[str, ...] = ()

    def requirements(self):
        return []


class Hang(_Base):
    name = "hang"
    extensions = (".hang",)

    def extract(self, path: Path, settings) -> ExtractedDoc:
        time.sleep(3600)
        raise AssertionError("unreachable")


class MemBomb(_Base):
    name = "membomb"
    extensions = (".membomb",)

    def extract(self, path: Path, settings) -> ExtractedDoc:
        hoard = []
        while True:
            hoard.append(b"x" * (8 << 20))  # written bytes, so they count in RSS


class CpuSpin(_Base):
    name = "cpuspin"
    extensions = (".cpuspin",)

    def extract(self, path: Path, settings) -> ExtractedDoc:
        n = 0
        while True:
            n += 1


class Abort(_Base):
    name = "abort"
    extensions = (".abort",)

    def extract(self, path: Path, settings) -> ExtractedDoc:
        os.abort()


class Noisy(_Base):
    """Prints to stdout (fd 1) from Python and from C level before answering."""

    name = "noisy"
    extensions = (".noisy",)

    def extract(self, path: Path, settings) -> ExtractedDoc:
        print("garbage on stdout {not json")
        os.write(1, b"more garbage at fd level\n")
        return ExtractedDoc(text="quiet answer", extractor=self.name)


class Modules(_Base):
    """Reports which heavy modules the child had imported by the time it extracted."""

    name = "modules"
    extensions = (".modules",)

    def extract(self, path: Path, settings) -> ExtractedDoc:
        heavy = [m for m in ("numpy", "numba", "onnxruntime", "faster_whisper", "ctranslate2", "pypdf", "pypdfium2",
                             "openpyxl", "rich") if m in sys.modules]
        return ExtractedDoc(text="loaded: " + (" ".join(heavy) or "none"), extractor=self.name)


class Skips(_Base):
    name = "skips"
    extensions = (".skips",)

    def extract(self, path: Path, settings) -> ExtractedDoc:
        raise ExtractionSkipped(f"{path}: nothing to see", hint="by design")


class Crashes(_Base):
    name = "crashes"
    extensions = (".crashes",)

    def extract(self, path: Path, settings) -> ExtractedDoc:
        return {}["no such key"]


EXTRACTORS = [Hang(), MemBomb(), CpuSpin(), Abort(), Noisy(), Modules(), Skips(), Crashes()]
