"""What `ragweedd doctor` prints about formats: which extractor reads each, and whether the external
tools and models it needs are installed (with the package that provides each missing one)."""

from __future__ import annotations

from ragweedd.config import Config
from ragweedd.extract.base import Extractor, ExtractSettings, ToolRequirement
from ragweedd.extract.registry import all_extractors
from ragweedd.extract.tools import TOOL_PACKAGES


def _requirements(ex: Extractor, settings: ExtractSettings) -> list[ToolRequirement]:
    reqs = list(ex.requirements())
    if ex.name == "pdf":
        reqs = [r if r.name != "tesseract" else ToolRequirement(settings.tess_bin, r.package, r.optional, r.kind,
                                                               r.purpose) for r in reqs]
    if ex.name == "av" and settings.whisper_model:
        reqs = [
            ToolRequirement("whisper-cli", TOOL_PACKAGES["whisper-cli"], optional=False, purpose="speech to text"),
            ToolRequirement(settings.whisper_model, "a ggml model for whisper.cpp (whisper_model)", optional=False,
                            kind="path", purpose="speech model"),
            ToolRequirement("ffmpeg", TOOL_PACKAGES["ffmpeg"], optional=False, purpose="audio decoding"),
        ]
    return reqs


def report(settings: ExtractSettings | Config | None = None) -> list[dict]:
    """One dict per extractor: format, extensions, extractor, ok, missing (tool (alias name), package,
    optional, purpose), degraded (optional features lost). ``ok`` is False when a required tool is
    missing: that format's files fail with ToolMissingError until it is installed. ``settings`` is an
    ExtractSettings or a loaded Config (its tess_bin and whisper_model are what gets checked)."""

    if settings is None:
        settings = ExtractSettings()
    elif not isinstance(settings, ExtractSettings):
        settings = ExtractSettings.from_config(settings)
    out = []
    for ex in all_extractors():
        missing = []
        for req in _requirements(ex, settings):
            if not req.present():
                missing.append({"tool": req.name, "name": req.name, "package": req.package,
                                "optional": req.optional, "purpose": req.purpose})
        out.append({
            "format": ex.name,
            "extensions": list(ex.extensions),
            "extractor": f"{type(ex).__module__}.{type(ex).__name__}",
            "ok": not any(not m["optional"] for m in missing),
            "missing": missing,
            "degraded": [m["purpose"] or m["tool"] for m in missing if m["optional"]],
        })
    out.sort(key=lambda r: str(r["format"]))
    return out


def format_report(rows: list[dict]) -> str:
    """Plain-text table for the CLI."""
    lines = []
    for r in rows:
        state = "ok" if r["ok"] and not r["missing"] else ("degraded" if r["ok"] else "MISSING")
        exts = " ".join(r["extensions"][:8]) + (" ..." if len(r["extensions"]) > 8 else "")
        lines.append(f"{r['format']:6s} {state:9s} {exts}")
        for m in r["missing"]:
            kind = "optional" if m["optional"] else "required"
            lines.append(f"         {kind} {m['tool']} missing -> install {m['package']}"
                         + (f" ({m['purpose']})" if m["purpose"] else ""))
    return "\n".join(lines)
