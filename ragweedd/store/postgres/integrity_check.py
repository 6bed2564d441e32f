"""The periodic integrity check on a database server (PostgreSQL), in the shape of
``ragweedd/store/sqlite/integrity_check.py``'s report.

The server keeps its own files sound (checksums, WAL, its own recovery): there is nothing for
ragweedd to move aside. What can still go wrong is a step between two transactions, so this checks
what ragweedd's own writes must keep true, each in one statement so that other machines ingesting
meanwhile cannot make it look wrong:

* every chunk has its vector or is waiting for one (a chunk with neither is never embedded);
* every file this machine's ingest state calls done is held by the collection with that content.
  Such a file is forgotten by ingest and ingested again by the scan that follows (content already
  stored is only linked), which also heals an edit the check happened to read half-way.

Only this machine's source is checked and mended: other machines check their own files.
"""

from __future__ import annotations

from typing import Any

from ragweedd.logging import get_logger

log = get_logger("ragweedd.integrity")

REINGEST = "ragweedd ingests these files again now"


def server_integrity(stores: Any, collections: list[str]) -> dict[str, Any]:
    """Check (and mend) ``collections``; ``mended`` names the collections to scan again."""
    out: dict[str, Any] = {"ok": True, "repair": False, "ingest_db": [], "history": [], "collections": {},
                           "mended": []}
    ingest = stores.open_ingest()
    try:
        for name in collections:
            if not stores.has_rag(name):
                continue
            rag = stores.open_rag(name, readonly=True)
            try:
                res = _check(rag, ingest, name)
            except Exception as e:  # noqa: BLE001 - a finding, never the end of the job
                res = {"chunks": None, "fts_rows": None, "vectors": None, "index_count": None, "damaged": False,
                       "problems": [f"collection '{name}' in {stores!r}: cannot be checked: {e}"]}
            finally:
                rag.close()
            out["collections"][name] = res
            if res["problems"]:
                # every finding is shown under DEGRADED (ragweedd/status.py), saying what was mended,
                # until a check finds none: nothing here waits for a restart's repair
                res["damaged"] = True
                out["ok"] = False
            if res.pop("mend", None):
                out["mended"].append(name)
    finally:
        ingest.close()
    return out


def _check(rag: Any, ingest: Any, name: str) -> dict[str, Any]:
    problems: list[str] = []
    chunks, vectors, pending, lost = rag.vector_accounts()
    if lost:
        problems.append(f"collection '{name}': {lost} of {chunks} chunks have no vector and none is waiting; "
                        "they were queued for the embedding stage again")
        rag.requeue_unembedded()
    held = {p: m for p, _r, m in rag.document_paths()}
    live = {r["source_file"]: r["md5"] for r in ingest.live_files(name) if r["extract_status"] == "done" and r["md5"]}
    lacking = sorted(p for p, m in live.items() if held.get(p) != m)
    if lacking:
        # read again: an ingest that finished between the two reads is not a finding
        held = {p: m for p, _r, m in rag.document_paths()}
        lacking = [p for p in lacking if held.get(p) != live[p]]
    if lacking:
        problems.append(f"collection '{name}': {len(lacking)} files recorded as indexed are not held with their "
                        f"content (first: {lacking[0]}); {REINGEST}")
        ingest.forget_files(name, lacking)
        log.warning("integrity_reingest", collection=name, files=len(lacking), first=lacking[0])
    return {"chunks": chunks, "fts_rows": chunks, "vectors": vectors, "pending_vectors": pending,
            "index_count": vectors, "damaged": False, "problems": problems, "mend": bool(lacking or lost)}
