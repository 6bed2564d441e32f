"""What stored rows mean, the same in every backend: a chunk's metadata values and the public fields
of a search hit made from them, a tree section's row, the hash kept with each chunk text, and the
backoff of a failed job."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from ragweedd.contract import place_uri
from ragweedd.store.pathnames import from_db, maybe_from_db


def hit_fields(meta: dict[str, Any]) -> dict[str, Any]:
    """The public fields of a search hit from a chunk's metadata rows."""
    src = from_db(meta.get("source_file_name") or "")
    pages = json.loads(meta["pages"]) if meta.get("pages") else None
    # chunks indexed before line numbers were stored have none: no anchor until a re-ingest
    lines = [meta["line_start"], meta["line_end"]] if meta.get("line_start") is not None else None
    return {
        "source_file": src,
        "filename": Path(src).name,
        "uri": place_uri(src, pages=pages, member=meta.get("ole_parent_name"), t_start=meta.get("t_start"),
                         t_end=meta.get("t_end"), lines=lines),
        "source_rel_path": maybe_from_db(meta.get("source_rel_path")),
        "text": meta.get("chroma:document", ""),
        "page_label": meta.get("page_label"),
        "pages": pages,
        "section": meta.get("section"),
        "span": [meta.get("char_start"), meta.get("char_end")],
        "lines": lines,
        "sheet": meta.get("sheet"),
        "table": meta.get("table"),
        "table_title": meta.get("table_title"),
        "rows": [meta.get("row_start"), meta.get("row_end")] if meta.get("row_start") is not None else None,
        "t_start": meta.get("t_start"),
        "t_end": meta.get("t_end"),
        "member": meta.get("ole_parent_name"),
        "ocr_type": meta.get("ocr_type"),
        "text_entropy": meta.get("text_entropy"),
        "word_count": meta.get("word_count"),
    }


def _typed(v: Any) -> tuple[str | None, int | None, float | None]:
    if isinstance(v, bool):
        return None, int(v), None
    if isinstance(v, int):
        return None, v, None
    if isinstance(v, float):
        return None, None, v
    if isinstance(v, (list, dict)):
        return json.dumps(v), None, None
    return str(v), None, None


def section_row(chunk_id: int, section: str | None, section_path: Any, pages: Any, text: str | None) -> dict[str, Any]:
    """One chunk's row as ``section_rows`` gives it, from its stored metadata on either backend."""
    path = _json_list(section_path)
    if not path and section:
        path = [section]
    return {"id": int(chunk_id), "section_path": [str(p) for p in path], "pages": _json_list(pages), "text": text or ""}


def _json_list(v: str | list | None) -> list:
    if isinstance(v, list):  # PostgreSQL's jsonb comes back parsed
        return v
    if not v:
        return []
    try:
        got = json.loads(v)
    except ValueError:
        return []
    return got if isinstance(got, list) else []


def text_sha256(text: str) -> str:
    """The hash stored with each chunk text, which reads check the text against."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


# A failed job is tried again after BACKOFF_BASE_S * 2^(tries - 1) seconds, at most BACKOFF_MAX_S.
BACKOFF_BASE_S = 2.0
BACKOFF_MAX_S = 600.0


def retry_wait(tries: int) -> float:
    """Seconds before a job that failed ``tries`` times runs again (both backends' queues)."""
    return min(BACKOFF_MAX_S, BACKOFF_BASE_S * (2 ** (tries - 1)))
