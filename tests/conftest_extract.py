"""Shared fixtures of the extractor tests (imported by tests/unit/test_extract_*.py and
tests/hostile/test_hostile_*.py, which is why it is not a conftest.py that pytest loads by itself).

Fixture files are made once per test session by tests/data/make_fixtures.py in a temp directory.
"""

from __future__ import annotations

import shutil
import tempfile
import zipfile
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parent / "data"
from tests.data import make_fixtures  # noqa: E402

_cache: dict[str, object] = {}


def _session_dir(name: str) -> Path:
    root = _cache.get("root")
    if root is None:
        root = Path(tempfile.mkdtemp(prefix="ragweed-fixtures-"))
        _cache["root"] = root
        import atexit

        atexit.register(shutil.rmtree, root, True)
    d = root / name
    d.mkdir(exist_ok=True)
    return d


@pytest.fixture(scope="session")
def fx() -> dict[str, Path]:
    """Every fixture of make_fixtures.make_all, by key ("pdf", "docx", "zip", ...)."""
    if "fx" not in _cache:
        _cache["fx"] = make_fixtures.make_all(_session_dir("formats"))
    return _cache["fx"]  # type: ignore[return-value]


@pytest.fixture(scope="session")
def speech() -> dict[str, Path]:
    from tests.tools import require_tool

    require_tool("espeak-ng")
    require_tool("ffmpeg")
    if "speech" not in _cache:
        _cache["speech"] = make_fixtures.speech_files(_session_dir("speech"))
    return _cache["speech"]  # type: ignore[return-value]


GB = 1 << 30


@pytest.fixture(scope="session")
def zip_bomb() -> Path:
    """A real zip holding one member of 1 GiB of zeros (about 1 MB on disk), streamed through
    zipfile with ZIP_DEFLATED so the generator itself never holds more than 1 MiB."""
    if "bomb" not in _cache:
        p = _session_dir("bomb") / "bomb.zip"
        zero = bytes(1 << 20)
        with zipfile.ZipFile(p, "w", zipfile.ZIP_DEFLATED) as z:
            with z.open("zeros.txt", "w", force_zip64=True) as m:
                for _ in range(GB // len(zero)):
                    m.write(zero)
        _cache["bomb"] = p
    return _cache["bomb"]  # type: ignore[return-value]
