"""``ragweedd ingest`` while a daemon runs: the daemon does the work.

A running daemon is the one writer of its data directory, so a one-shot ingest beside it would
build a second copy of the index files. Instead the command hands its folders to the daemon over
the API (a new collection is added and watched from then on; folders of a known collection are
scanned again) and waits, with the same progress line, until the daemon has recorded, extracted and
embedded everything. The collection is then the daemon's like any other: listed by ``ragweedctl
collections``, searched by ``ragweedctl search`` and by ``ragweedd search``.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

from ragweedd.cli.ctl_http import Client
from ragweedd.cli.progress import Bar
from ragweedd.errors import RequestError
from ragweedd.paths import within

POLL_S = 0.5


def is_idle(status: dict[str, Any]) -> bool:
    """Nothing recorded, queued, extracting, settling or waiting for a vector."""
    if "idle" in status:
        return bool(status["idle"])
    return (not status["queue_depth"] and not status["queue"].get("debouncing")
            and not status["ingest"]["running"] and not status["vectors"]["pending_chunks"])


def hand_over(daemon: dict[str, Any], state_dir: str, name: str, inputs: list[Path], force: bool,
              as_json: bool) -> int:
    """Give ``inputs`` to the running daemon as collection ``name`` and wait until it is indexed."""

    if force:
        raise RequestError("--force cannot be handed to the running daemon: it re-extracts only files that "
                           "changed", hint="stop the daemon and run this command again to re-extract everything")
    client = Client(state_dir)
    known = {c["name"]: c for c in client.call("GET", "/v1/collections").get("items", [])}
    paths = [str(p) for p in inputs]
    before = None
    if name in known:
        roots = [os.path.realpath(r) for r in known[name].get("paths", [])]
        outside = [p for p in paths if not any(within(os.path.realpath(p), r) for r in roots)]
        if outside:
            shown = ", ".join(roots) or "no folder"
            raise RequestError(
                f"collection '{name}' of the running daemon watches {shown}; {outside[0]} is outside it",
                hint=f"ingest it into a new collection (ragweedd ingest {outside[0]} -c NEW_NAME), or add the "
                     f"folder to [collections.{name}] paths in the configuration and restart the daemon")
        before = (known[name].get("last_scan") or {}).get("at")
        client.call("POST", f"/v1/collections/{name}/scan")
        action = "scanned again"
    else:
        files = [p for p in paths if not os.path.isdir(p)]
        if files:
            raise RequestError(f"{files[0]} is a file: the running daemon takes folders, which it then watches",
                               hint="give the folder that holds it, or copy it into a collection with "
                                    "ragweedctl upload")
        client.call("POST", "/v1/collections", {"name": name, "paths": paths})
        action = "added and watched"
    bar = Bar("ingest", 0, sys.stderr)
    t0 = time.monotonic()
    try:
        while True:
            status = client.call("GET", "/v1/status")
            col = next((c for c in status["collections"] if c["name"] == name), None)
            scanned = col is not None and col.get("last_scan") is not None and col["last_scan"].get("at") != before
            ing = status["ingest"]
            if bar.enabled and ing["total"]:
                bar.total = ing["total"]
                bar.update(ing["done"])
            if scanned and is_idle(status):
                break
            time.sleep(POLL_S)
    finally:
        bar.close()
    failed = [j for j in status.get("failed_jobs", []) if j.get("collection") == name]
    docs = col.get("documents", 0) if col else 0
    if as_json:
        import json

        json.dump({"collection": name, "by": "daemon", "pid": daemon.get("pid"), "action": action,
                   "paths": paths, "documents": docs, "failed": failed,
                   "seconds": round(time.monotonic() - t0, 3), "ok": not failed}, sys.stdout, ensure_ascii=False)
        sys.stdout.write("\n")
    else:
        print(f"ingested into '{name}' by the running daemon (pid {daemon.get('pid')}): {docs} documents, "
              f"{len(failed)} failed, {time.monotonic() - t0:.1f} s; its folders are {action}")
        for j in failed:
            print(f"failed: {j.get('path')}: {j.get('error')}", file=sys.stderr)
    return 1 if failed else 0


def rebuild_fts(state_dir: str, name: str, as_json: bool) -> int:
    """``ragweedd ingest --rebuild-fts`` beside the daemon: the daemon rebuilds it (in the background)."""

    res = Client(state_dir).call("POST", f"/v1/collections/{name}/rebuild-fts")
    if as_json:
        import json

        print(json.dumps({"collection": name, "by": "daemon", **res}, ensure_ascii=False))
    else:
        print(f"the running daemon rebuilds the keyword index of '{name}' (ragweedctl status shows when it is done)")
    return 0
