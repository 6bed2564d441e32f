"""Daemon life cycle: single instance, clean stop with the queue persisted, reconciliation at
start, vanished roots, polling fallback, idle CPU."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time

from tests.system.conftest import ROOT, wait_until


def _indexed_daemon(daemon, root, collection: str, files: dict[str, str]):
    """A daemon over ``root`` holding ``files`` (relative path -> text), all indexed and idle."""
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    d = daemon({collection: [root]})
    wait_until(lambda: len(d.live_rows(collection)) == len(files), 60, what=f"{len(files)} files indexed")
    d.wait_idle()
    return d


def _oneshot(d, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ragweedd", "--config", str(d.cfg), *argv], env=d.env, cwd=ROOT,
                          capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)


def test_oneshot_ingest_beside_a_running_daemon_hands_the_work_to_it(daemon, tmp_path):
    """One writer per data directory, one index per user: the daemon does the one-shot ingest's
    work, and the new collection is the daemon's (listed, searched, watched) with no restart."""
    folder = tmp_path / "n"
    d = _indexed_daemon(daemon, folder, "n", {"a.txt": "Indexed by the daemon: albatross."})
    other = tmp_path / "other"
    other.mkdir()
    (other / "b.txt").write_text("Handed to the daemon: bandicoot.")
    r = _oneshot(d, "ingest", str(other), "-c", "fresh")
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert f"by the running daemon (pid {d.proc.pid})" in r.stdout and "1 documents" in r.stdout, r.stdout
    names = {c["name"]: c for c in d.api("GET", "/v1/collections").json()["items"]}
    assert names["fresh"]["paths"] == [str(other.resolve())] and names["fresh"]["documents"] == 1
    assert [h for h in d.search("bandicoot", collections=["fresh"]) if "bandicoot" in h["text"]]
    (other / "c.txt").write_text("Watched from then on: capybara.")  # the daemon watches the folder
    wait_until(lambda: [h for h in d.search("capybara") if "capybara" in h["text"]], 60, 0.3, "the new file")
    # a known collection: its folder is scanned again and the command waits for the daemon
    (folder / "d.txt").write_text("Scanned again: dugong.")
    r = _oneshot(d, "--json", "ingest", str(folder), "-c", "n")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["documents"] == 2 and json.loads(r.stdout)["by"] == "daemon"
    r = _oneshot(d, "ingest", "-c", "n", "--rebuild-fts")
    assert r.returncode == 0 and "rebuilds the keyword index of 'n'" in r.stdout, r.stderr
    # what the daemon cannot take says what to do instead, and writes nothing
    for argv, words in ((["ingest", str(other), "-c", "n"], "outside"),
                        (["ingest", str(other / "b.txt"), "-c", "single"], "is a file"),
                        (["ingest", str(folder), "-c", "n", "--force"], "--force")):
        r = _oneshot(d, *argv)
        assert r.returncode == 2 and words in r.stderr, (argv, r.stdout, r.stderr)
        assert "Traceback" not in r.stderr
    assert "single" not in {c["name"] for c in d.api("GET", "/v1/collections").json()["items"]}
    assert not (d.base / "data" / "collections" / "single").exists()
    assert [h for h in d.search("albatross") if "albatross" in h["text"]]  # the daemon is unharmed


def test_a_oneshot_collection_is_served_by_the_daemon_and_one_of_an_older_version_adopted(daemon, tmp_path):
    """`ragweedd ingest` with no daemon records the collection; the daemon started later lists,
    searches and watches it. A collection in the data directory that nothing records (what an
    older version's one-shot ingest left) is adopted: listed and searched."""
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "s.txt").write_text("Feed the starter once a day: sourdough.")
    d = daemon({}, start=False)
    r = _oneshot(d, "ingest", str(folder), "-c", "notes")
    assert r.returncode == 0, r.stderr
    old = tmp_path / "old"
    old.mkdir()
    (old / "o.txt").write_text("Left by an older version: okapi.")
    r = _oneshot(d, "ingest", str(old), "-c", "legacy")
    assert r.returncode == 0, r.stderr
    with sqlite3.connect(d.base / "data" / "ingest_db.sqlite3") as conn:  # as an older version left it
        conn.execute("DELETE FROM daemon_collections WHERE name = 'legacy'")
    conn.close()
    d.start()
    names = {c["name"]: c for c in d.api("GET", "/v1/collections").json()["items"]}
    assert names["notes"]["paths"] == [str(folder.resolve())] and names["notes"]["documents"] == 1
    assert names["legacy"]["paths"] == [] and names["legacy"]["documents"] == 1
    assert [h for h in d.search("okapi", collections=["legacy"]) if "okapi" in h["text"]]
    (folder / "t.txt").write_text("Watched by the daemon: tapir.")
    wait_until(lambda: [h for h in d.search("tapir", collections=["notes"]) if "tapir" in h["text"]], 60, 0.3,
               "the new file of the one-shot collection")
    assert [h for h in d.search("sourdough", collections=["notes"]) if "sourdough" in h["text"]]


def test_a_file_ingested_by_itself_stays_the_daemons_and_in_step(daemon, tmp_path):
    """A file given by itself to a one-shot ingest is recorded as its collection's root: the
    daemon keeps it (its scan does not take it for a file outside the collection), notices an edit
    and a deletion at its scans, and names it as the one-shot ingest did."""
    single = tmp_path / "loose" / "report.txt"
    single.parent.mkdir()
    single.write_text("The quarterly report mentions the narwhal.")
    (single.parent / "sibling.txt").write_text("Not given: the sibling mentions a wombat.")
    d = daemon({}, start=False)
    assert _oneshot(d, "ingest", str(single), "-c", "work").returncode == 0
    d.start()
    d.wait_idle()
    hits = [h for h in d.search("narwhal", collections=["work"]) if "narwhal" in h["text"]]
    assert hits and hits[0]["source_rel_path"] == "report.txt", hits
    assert not [h for h in d.search("wombat") if "wombat" in h["text"]]  # its folder is not the root
    single.write_text("The report now mentions the pangolin instead.")
    assert d.api("POST", "/v1/collections/work/scan").status_code == 200
    wait_until(lambda: [h for h in d.search("pangolin", collections=["work"]) if "pangolin" in h["text"]], 60, 0.3,
               "the edit")
    # Deleted with its folder still there: the daemon's own root check notices (no scan asked for),
    # the file leaves the index, and the collection is not reported unavailable, now or after a restart.
    single.unlink()
    wait_until(lambda: not d.live_rows("work"), 60, 0.3, "the deleted file gone from the index")

    def deleted_and_available():
        c = next(c for c in d.api("GET", "/v1/collections").json()["items"] if c["name"] == "work")
        return c["available"] and [r["state"] for r in c["roots"]] == ["deleted"]
    wait_until(deleted_and_available, 30, 0.3, "the root reported deleted, the collection available")
    assert not [m for m in d.status()["degraded"] if "work" in m], d.status()["degraded"]
    d.stop()
    d.start()
    d.wait_idle()
    assert deleted_and_available() and not [m for m in d.status()["degraded"] if "work" in m]
    single.write_text("The report is back and mentions the axolotl.")  # the same name again
    wait_until(lambda: [h for h in d.search("axolotl", collections=["work"]) if "axolotl" in h["text"]], 60, 0.3,
               "the file back under its name")


def test_second_instance_exits_with_already_running(daemon, tmp_path):
    folder = tmp_path / "n"
    folder.mkdir()
    d = daemon({"n": [folder]})
    r = subprocess.run([sys.executable, "-m", "ragweedd", "--config", str(d.cfg), "run"], env=d.env, cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    assert "already running" in r.stderr and str(d.proc.pid) in r.stderr
    # The failed second start must not have removed the running daemon's port file.
    assert (d.base / "state" / "port").exists()
    assert d.status()["pid"] == d.proc.pid
    tok = d.base / "state" / "token"
    assert oct(tok.stat().st_mode & 0o777) == "0o600"


def test_sigterm_persists_pending_events_and_start_reconciles(daemon, tmp_path):
    folder = tmp_path / "n"
    folder.mkdir()
    keep = folder / "keep.txt"
    keep.write_text("Keep this note about tidal pools and anemones.")
    gone = folder / "gone.txt"
    gone.write_text("This note about volcanoes will be deleted while the daemon is stopped.")
    edit = folder / "edit.txt"
    edit.write_text("Old text about windmills.")
    d = daemon({"n": [folder]}, debounce_s=30.0)  # events stay in the debouncer until stop
    wait_until(lambda: len(d.live_rows("n")) == 3, 30, what="start-up scan to index three files")
    d.wait_idle()
    late = folder / "late.txt"
    late.write_text("Written just before SIGTERM: a note about comets.")
    wait_until(lambda: d.status()["queue"]["debouncing"] == 1, 10, what="the event to be held")
    assert d.stop() == 0
    with d.db() as c:
        jobs = [r["path"] for r in c.execute("SELECT path FROM jobs")]
    assert jobs == [str(late)], "the held event must be persisted as a job on SIGTERM"
    stopped = [e for e in d.events() if e.get("event") == "daemon_stopped"]
    assert stopped

    # Changes while stopped: one delete, one modify, one new file.
    gone.unlink()
    edit.write_text("New text about lighthouses.")
    (folder / "new.txt").write_text("A new note about glaciers.")
    d.start()
    want = {str(keep), str(edit), str(late), str(folder / "new.txt")}
    wait_until(lambda: set(d.live_rows("n")) == want and d.idle(), 30, what="reconciliation at start")
    assert [h for h in d.search("lighthouses") if "lighthouses" in h["text"]]
    assert not [h for h in d.search("windmills") if "windmills" in h["text"]]
    assert not [h for h in d.search("volcanoes") if "volcanoes" in h["text"]]
    assert [h for h in d.search("comets") if "comets" in h["text"]]
    # keep.txt was not touched: it was not re-indexed by the restart.
    assert len(d.ingests(keep)) == 1


def test_vanished_root_deletes_nothing(daemon, tmp_path):
    root = tmp_path / "disk"
    d = _indexed_daemon(daemon, root, "ext",
                        {f"f{i}.txt": f"File {i} on the external disk mentions puffin{i}." for i in range(20)})
    away = tmp_path / "disk-renamed-away"
    os.rename(root, away)  # like an unmount: the root and everything below it vanish at once
    wait_until(lambda: not d.status()["collections"][0]["available"], 20, what="collection marked unavailable")
    s = d.status()
    assert any("unavailable" in x for x in s["degraded"])
    d.api("POST", "/v1/collections/ext/scan")  # an explicit scan must not delete either
    time.sleep(2)
    d.wait_idle()
    assert len(d.live_rows("ext")) == 20
    assert [h for h in d.search("puffin7") if "puffin7" in h["text"]]

    # Also across a restart while the root is away.
    d.stop()
    d.start()
    time.sleep(2)
    d.wait_idle()
    assert len(d.live_rows("ext")) == 20
    assert not d.status()["collections"][0]["available"]

    os.rename(away, root)
    wait_until(lambda: d.status()["collections"][0]["available"], 20, what="collection available again")
    (root / "f3.txt").unlink()  # watched again: a real delete now counts
    wait_until(lambda: len(d.live_rows("ext")) == 19, 30, what="the real delete")
    assert not [e for e in d.events("ingest_file") if e["status"] == "deleted" and e["path"] != str(root / "f3.txt")]


def test_watch_failure_falls_back_to_polling(daemon, tmp_path):
    root = tmp_path / "nfs"
    root.mkdir()
    (root / "a.txt").write_text("A file on a share that cannot be watched natively: narwhals.")
    d = daemon({"share": [root]}, fail_watch=root)
    wait_until(lambda: len(d.live_rows("share")) == 1, 30, what="start-up scan")
    s = d.status()
    assert s["collections"][0]["roots"][0]["watch"] == "polling"
    assert any("polling" in x for x in s["degraded"])
    (root / "b.txt").write_text("Found by the polling observer: walruses.")
    wait_until(lambda: [h for h in d.search("walruses") if "walruses" in h["text"]], 30, 0.5,
               what="polling to pick up a new file")


def _cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_idle_daemon_uses_no_measurable_cpu(daemon, tmp_path):
    d = _indexed_daemon(daemon, tmp_path / "n", "n", {f"sub/{i}.txt": f"idle test file {i}" for i in range(200)})
    time.sleep(6)  # let the index flush settle
    c0 = _cpu_s(d.proc.pid)
    time.sleep(10)
    used = _cpu_s(d.proc.pid) - c0
    assert used < 0.2, f"an idle daemon used {used:.2f} s of CPU in 10 s"


def test_a_changed_embedder_with_migrate_off_reindexes_the_collection_instead_of_mixing_vectors(daemon, tmp_path):
    """``embed.migrate = false``: the collection is dropped and indexed again from its files (the
    default builds the new vectors beside the old ones: tests/system/test_daemon_model_swap.py)."""
    root = tmp_path / "notes"
    d = _indexed_daemon(daemon, root, "notes",
                        {f"n{i}.txt": f"Note {i} about the embedder that made this collection, codeword kz{i}q."
                         for i in range(20)})
    assert not any("indexed again" in r for r in d.status()["degraded"])
    before = d.ingest_embedded()
    d.stop(30)
    d.env["RAGWEED_EMBED_MODEL"] = "hash:48"  # the user switches models
    d.env["RAGWEED_EMBED_MIGRATE"] = "false"
    d.start()
    wait_until(lambda: d.ingest_embedded() - before == 20, 60, what="every file embedded again")
    wait_until(lambda: sum(1 for r in d.live_rows("notes").values() if r["extract_status"] == "done") == 20, 60,
               what="the files indexed again")
    d.wait_idle()
    with d.db("notes") as c:
        assert [tuple(r) for r in c.execute("SELECT embedder_id, dim FROM embedders")] == [("hash:48@fh1+ctx1", 48)]
        assert {r[0] for r in c.execute("SELECT DISTINCT length(vec) FROM vectors")} == {48 * 4}, "no 64-d vector left"
        assert c.execute("SELECT count(*) FROM embeddings").fetchone()[0] == 20
    hits = d.search("kz7q")
    assert hits and hits[0]["source_file"] == str(root / "n7.txt")
    wait_until(lambda: not any("indexed again" in r for r in d.status()["degraded"]), 30, what="status to settle")
    assert (d.base / "data" / "collections" / "notes").is_dir()
    assert d.events("collection_reindexing")


def test_turning_the_context_line_off_reembeds_instead_of_mixing_vectors(daemon, tmp_path):
    """The context line is part of what the embedder reads, so it is part of the collection's
    embedder id: vectors made with and without it never mix in one collection."""
    root = tmp_path / "notes"
    d = _indexed_daemon(daemon, root, "notes",
                        {f"note_{i}.txt": f"Note {i} on context lines, codeword qx{i}v." for i in range(10)})
    with d.db("notes") as c:
        assert [r[0] for r in c.execute("SELECT embedder_id FROM embedders")] == ["hash:64@fh1+ctx1"]
        assert c.execute("SELECT count(*) FROM embedding_metadata WHERE key='context'").fetchone()[0] == 10
    before = d.ingest_embedded()
    d.stop(30)
    d.cfg.write_text(d.cfg.read_text().replace("ingest_nice = 5", "ingest_nice = 5\nchunk_context = false"))
    d.start()
    wait_until(lambda: d.ingest_embedded() - before == 10, 60, what="every file embedded again")
    d.wait_idle()
    with d.db("notes") as c:
        assert [r[0] for r in c.execute("SELECT embedder_id FROM embedders")] == ["hash:64@fh1"]
        assert c.execute("SELECT count(*) FROM embedding_metadata WHERE key='context'").fetchone()[0] == 0
        assert c.execute("SELECT count(*) FROM vectors").fetchone()[0] == 10
    assert d.events("collection_reindexing")
