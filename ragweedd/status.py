"""The daemon's status (GET /v1/status, ragweedctl status) as the contract's ``Status``.

Built from the running parts on a worker thread; nothing here waits for a scan or an ingest: the
queue, ingest tracker and index report from their own short-lived reads.
"""

from __future__ import annotations

import functools
import os
import time
from typing import TYPE_CHECKING, Any, TypedDict

from ragweedd import __version__
from ragweedd.config import ingest_worker_count, redact_dsn
from ragweedd.contract import (
    FILE_STATE_SHOWN,
    Collection,
    FailedJob,
    IngestProgress,
    IntegrityReport,
    JobRun,
    MissingTool,
    ScanActivity,
    ScanSummary,
    Status,
    iso,
    shown_path,
)
from ragweedd.extract.doctor import report

if TYPE_CHECKING:
    from ragweedd.config import Config
    from ragweedd.daemon_core import Core


def collection_of(core: Core, name: str) -> Collection:
    d = core.collections.describe(name)
    scan = d.get("last_scan")
    last: ScanSummary | None = None
    if scan:
        last = {"collection": scan["collection"], "files_seen": scan["files_seen"], "upserts": scan["upserts"],
                "deletes": scan["deletes"], "unavailable_roots": list(scan.get("unavailable_roots") or []),
                "seconds": scan["seconds"], "at": iso(scan["at"]) or ""}
    return {"name": d["name"], "paths": d["paths"], "ignore": d["ignore"], "topic": d["topic"],
            "documents": d["documents"], "available": d["available"], "roots": d["roots"],
            "from_config": d["from_config"], "last_scan": last}


def shared_collections(core: Core) -> list[Collection]:
    """On a database server: the collections other machines hold there and this one does not
    declare. Searchable from here (docs/postgres.md), so listed, in the same shape with no folders
    of this machine: ``paths`` and ``roots`` empty, ``documents`` every machine's."""
    if core.server is None:
        return []
    out: list[Collection] = []
    for name, docs in sorted(core.services.shared_collections(list(core.collections.items)).items()):
        out.append({"name": name, "paths": [], "ignore": [], "topic": "", "documents": docs, "available": True,
                    "roots": [], "from_config": False, "last_scan": None})
    return out


def missing_tools(cfg: Config) -> list[MissingTool]:
    """External programs that formats need and the machine lacks (what ``ragweedd doctor`` lists)."""

    by_tool: dict[str, MissingTool] = {}
    for row in report(cfg):
        for m in row["missing"]:
            t = by_tool.setdefault(m["tool"], {"tool": m["tool"], "package": m["package"], "formats": [],
                                               "optional": bool(m["optional"])})
            t["formats"].append(row["format"])
            t["optional"] = t["optional"] and bool(m["optional"])
    return sorted(by_tool.values(), key=lambda t: t["tool"])


def build_status(core: Core, tools: list[MissingTool]) -> Status:
    if core.server is not None:
        try:
            return _build_status(core, tools)
        except Exception as e:  # noqa: BLE001 - the database away: status still answers, and says so
            return _unreachable(core, tools, e)
    return _build_status(core, tools)


def _unreachable(core: Core, tools: list[MissingTool], e: Exception) -> Status:
    """The status of a daemon whose database server cannot be reached: what it knows without it."""

    reason = " ".join(str(e).split())
    if len(reason) > 300:
        reason = reason[:300].rsplit(" ", 1)[0] + " …"
    reason = reason or type(e).__name__
    degraded = [f"the PostgreSQL database {redact_dsn(core.cfg.store)} cannot be reached ({type(e).__name__}: "
                f"{reason}); nothing is indexed or searched until it answers again. Check that the server "
                f"runs and this machine reaches it (network, credentials in store); ragweedd retries by "
                f"itself and scans its collections once it is back"]
    if core.debouncer.dropped:
        degraded.append(f"{core.debouncer.dropped} file change events could not be queued meanwhile; their "
                        "files are found by the scan that runs once the database answers")
    waiting = core.workers.server_trouble()
    if waiting:
        degraded.append(waiting)
    degraded.extend(core.thread_problems())
    cols: list[Collection] = []
    for name in sorted(core.collections.items):
        try:
            cols.append(collection_of(core, name))
        except Exception:  # noqa: BLE001 - its document count is in the database: 0 here
            st = core.collections.get(name)
            cols.append({"name": name, "paths": list(st.conf.paths), "ignore": list(st.conf.ignore),
                         "topic": st.conf.topic, "documents": 0, "available": st.available, "roots": [],
                         "from_config": st.from_config, "last_scan": None})
    debouncing = len(core.debouncer)
    return {
        "version": __version__, "pid": os.getpid(), "uptime_s": round(time.time() - core.started_at, 1),
        "collections": cols, "files_by_state": {},
        "queue": {"queued": 0, "running": 0, "failed": 0, "debouncing": debouncing},
        "queue_depth": 0, "failed_jobs": [],
        # nothing can be recorded while the database is away: never idle
        "ingest": _progress(core, debouncing, {
            "idle": False, "busy_with": ["waiting for the database server to answer"],
            "scans": core.scans(), "settling": debouncing,  # type: ignore[typeddict-item]
            "events_seen": int(getattr(core.collections.watcher, "events_seen", 0))}),
        "vectors": core.vectorizer.snapshot(),  # type: ignore[typeddict-item]
        "embedder": {"id": core.index_embedder_id, "dim": core.embedder.dim},
        "index": {}, "index_sizes": {}, "last_flush": None,
        "next_jobs": [{"name": k, "at": v} for k, v in (core.jobs.next_runs() if core.jobs else {}).items()],
        "last_jobs": {k: _job(v) for k, v in (core.jobs.last if core.jobs else {}).items()},
        "integrity": _integrity(core.last_integrity), "degraded": degraded, "missing_tools": tools,
        "embed_passes": core.passes.info(),  # type: ignore[typeddict-item]
        "embed_migration": core.migration.info() if core.migration is not None else None,
        "idle": False,
    }


def _n(n: int, one: str, many: str | None = None) -> str:
    return f"{n:,} {one if n == 1 else (many or one + 's')}"


class Activity(TypedDict):
    idle: bool
    busy_with: list[str]
    scans: list[ScanActivity]
    settling: int
    events_seen: int


def activity(core: Core) -> Activity:
    """Whether any file still waits anywhere, and where. Work moves one way through the stages
    (a repair due -> the watcher -> the debouncer -> a scan -> the job queue -> the workers -> the
    embedding stage -> the index), and each stage takes it over before the one before lets go of
    it. So the stages are read in that order: a file that moves on while this reads is met again
    further down, and idle is never said while one is still on its way (docs/daemon.md)."""
    busy: list[str] = []
    repairing = bool(core.repair_due)
    if repairing:
        busy.append("repairing the damage the integrity check found (the files are then ingested again)")
    watcher = core.collections.watcher
    events = int(getattr(watcher, "in_flight", lambda: 0)()) + len(core.debouncer)
    if events:
        busy.append(f"{_n(events, 'file change event')} settling")
    if core.server is not None and core.debouncer.dropped:
        busy.append(f"{_n(core.debouncer.dropped, 'file change event')} not queued: a scan finds their files "
                    f"once the database answers")
    scans: list[ScanActivity] = core.scans()  # type: ignore[assignment]
    for sc in scans:
        name = sc["collection"]
        if sc["state"] == "walking":
            busy.append(f"scanning '{name}' ({_n(sc['files_seen'], 'file')} seen)")
        elif sc["state"] == "recording":
            busy.append(f"recording what the scan of '{name}' found ({_n(sc['files_seen'], 'file')} seen)")
        else:
            busy.append(f"scan of '{name}' about to start")
    unwritten = core.queue.unwritten
    if unwritten:
        busy.append(f"{_n(unwritten, 'file event')} waiting for disk space to be queued")
    depth: dict[str, int] = core.read(lambda db: db.job_depth())
    queued, running = depth.get("queued", 0), max(depth.get("running", 0), core.workers.busy)
    if queued or running:
        busy.append(f"{_n(queued, 'file')} queued, {running:,} being read")
    v = core.vectorizer.snapshot()
    if v["pending_chunks"]:
        busy.append(f"{_n(v['pending_chunks'], 'chunk')} waiting for vectors")
    elif v["running"]:
        busy.append("embedding new chunks")
    idle_index = getattr(core.index, "wait_idle", None)
    syncing = idle_index is not None and not idle_index(0)
    if syncing:
        busy.append("adding new vectors to the search index")
    return {"idle": not busy, "busy_with": busy, "scans": scans, "settling": events,
            "events_seen": int(getattr(watcher, "events_seen", 0))}


def _build_status(core: Core, tools: list[MissingTool]) -> Status:
    act = activity(core)  # first: it reads the parts in the order work moves through them
    depth: dict[str, int] = core.read(lambda db: db.job_depth())
    by_raw: dict[str, int] = core.read(lambda db: db.counts_by_state())
    by_state: dict[str, int] = {}
    for raw, n in by_raw.items():
        shown = FILE_STATE_SHOWN.get(raw, "queued")
        by_state[shown] = by_state.get(shown, 0) + n
    cols = [collection_of(core, n) for n in sorted(core.collections.items)]
    degraded = list(core.collections.watcher.degraded.values())
    full = core.workers.trouble()
    if full:
        degraded.append(full)
    waiting = core.workers.server_trouble()
    if waiting:
        degraded.append(waiting)
    if core.queue.unwritten:
        degraded.append(f"disk full: cannot write the data dir {core.paths.data} ({core.workers.free_mb()} MB "
                        f"free); {core.queue.unwritten} file events wait in memory for the job queue in "
                        f"{core.paths.ingest_db.name}; free space on that disk and they are queued within "
                        f"seconds (a restart's scan would find them too)")
    for c in cols:
        if not c["available"]:
            degraded.append(f"collection '{c['name']}' is unavailable: a root folder is missing or an empty "
                            f"mount point; nothing is deleted until it returns")
    degraded.extend(core.thread_problems())
    degraded.extend(core.rot.problems())  # chunk texts a read found changed, until they are repaired
    if core.debouncer.last_error:
        degraded.append(f"file change events could not be queued ({core.debouncer.last_error}); a "
                        f"reconciliation scan picks the files up")
    for name, before in core.reindexed.items():
        d = core.read(functools.partial(_depth_of, name))
        if d.get("queued", 0) + d.get("running", 0) or core.scan_pending(name):
            degraded.append(f"collection '{name}' is being indexed again: it was embedded with {before} and "
                            f"embed.model is now {core.index_embedder_id}; its search results fill up as files "
                            f"are re-ingested")
    # Databases repaired at start (ragweedd/store/sqlite/repair.py): said while the files are re-ingested.
    repaired = core.repaired
    busy = any(d for d in (depth.get("queued", 0), depth.get("running", 0))) or any(
        core.scan_pending(n) for n in core.collections.items)
    if busy:
        degraded.extend(repaired.get("ingest_db") or [])
        degraded.extend(repaired.get("history") or [])
        for notes in (repaired.get("collections") or {}).values():
            degraded.extend(notes)
    last = core.last_integrity or {}
    damage = list(last.get("ingest_db") or []) + list(last.get("history") or [])
    for res in (last.get("collections") or {}).values():
        if res.get("damaged"):
            damage.extend(res.get("problems") or [])
    if not last.get("repaired"):  # once repaired, the notes above say what is still going on
        # on a database server the check mends at once and says so: its time tells how old that is
        when = f" at {iso(last.get('at'))}" if core.server is not None and last.get("at") else ""
        degraded.extend(f"integrity check{when}: {p}" for p in damage)
    degraded.extend(core.passes.degraded())  # extra embedding passes whose model cannot be used
    if core.migration is not None and core.migration.problem:
        degraded.append(core.migration.problem)
    for name, err in list(core.index.errors.items()):
        degraded.append(f"the vector index of collection '{name}' failed: {err}; searches use the stored "
                        f"vectors exactly until it recovers (see the daemon log)")
    for t in tools:
        if t["optional"]:
            continue
        degraded.append(f"'{t['tool']}' is not installed: {', '.join(t['formats'])} files cannot be fully "
                        f"read; install {t['package']}")
    debouncing = len(core.debouncer)
    queued = depth.get("queued", 0) + depth.get("running", 0)
    index = core.index.status()
    flushes = [i["last_flush"] for i in index.values() if i["last_flush"]]
    return {
        "version": __version__, "pid": os.getpid(), "uptime_s": round(time.time() - core.started_at, 1),
        "collections": cols, "files_by_state": by_state,
        "queue": {"queued": depth.get("queued", 0), "running": depth.get("running", 0),
                  "failed": depth.get("failed", 0), "debouncing": debouncing},
        "queue_depth": queued,
        "failed_jobs": [_failed(j) for j in core.read(lambda db: db.failed_jobs(20))],
        "ingest": _progress(core, queued + debouncing, act),
        "vectors": core.vectorizer.snapshot(),  # type: ignore[typeddict-item]
        "embedder": {"id": core.index_embedder_id, "dim": core.embedder.dim},
        "index": index,
        "index_sizes": {n: i["vectors"] for n, i in index.items()},
        "last_flush": max(flushes) if flushes else None,
        "next_jobs": [{"name": k, "at": v} for k, v in (core.jobs.next_runs() if core.jobs else {}).items()],
        "last_jobs": {k: _job(v) for k, v in (core.jobs.last if core.jobs else {}).items()},
        "integrity": _integrity(core.last_integrity),
        "degraded": degraded,
        "missing_tools": tools,
        "embed_passes": core.passes.info(),  # type: ignore[typeddict-item]
        "embed_migration": core.migration.info() if core.migration is not None else None,
        "idle": act["idle"],
    }


def _depth_of(collection: str, db: Any) -> dict[str, int]:
    return db.job_depth(collection)  # type: ignore[no-any-return]


def _progress(core: Core, queued: int, act: Activity) -> IngestProgress:
    p = core.workers.progress.snapshot(queued)
    return {"running": core.workers.busy > 0, "done": p["files_done"], "total": p["files_total"],
            "files_per_s": p["files_per_s"], "chunks_per_s": p["chunks_per_s"], "eta_s": p["eta_s"],
            "done_since_start": p["files_done_since_start"], "failed_since_start": p["failed_since_start"],
            "chunks_since_start": p["chunks_since_start"],
            "embedded_since_start": p["embedded_since_start"] + core.vectorizer.sent,
            "workers": ingest_worker_count(core.cfg), "scans": act["scans"], "settling": act["settling"],
            "events_seen": act["events_seen"], "busy_with": act["busy_with"]}


def _failed(j: dict[str, Any]) -> FailedJob:
    return {"collection": j["collection"], "path": shown_path(j["path"]), "op": j["op"], "tries": j["tries"],
            "error": j["error"]}


def _job(v: dict[str, Any]) -> JobRun:
    return {"at": iso(v.get("at")) or "", "ok": bool(v.get("ok")), "seconds": v.get("seconds"),
            "error": v.get("error")}


def _integrity(last: dict[str, Any] | None) -> IntegrityReport | None:
    if last is None:
        return None
    problems: list[str] = list(last.get("ingest_db") or []) + list(last.get("history") or [])
    for res in (last.get("collections") or {}).values():
        problems.extend(res.get("problems") or [])
    return {"ok": bool(last.get("ok")), "at": iso(last.get("at")) or "", "problems": problems,
            "repaired": list(last.get("repaired") or [])}
