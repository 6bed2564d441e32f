"""Issue 12 item 7 through the real daemon: its own config, data, state and cache directories are
never part of a collection, and a root inside them is refused."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from tests.system.conftest import ROOT, wait_until


def test_a_collection_on_a_folder_holding_the_daemon_dirs_does_not_index_itself(daemon, tmp_path):
    home = tmp_path  # like $HOME: holds the daemon's dirs (tmp_path/d0/...) and the user's notes
    (home / "notes.txt").write_text("homewombat notes")
    d = daemon({})
    # The harness's own logs sit beside the daemon's dirs (written on every event): not the daemon's.
    r = d.api("POST", "/v1/collections", json={"name": "home", "paths": [str(home)],
                                               "ignore": ["d0/daemon.log", "d0/embed.log"]})
    assert r.status_code in (200, 201), r.text
    wait_until(lambda: d.ingests(home / "notes.txt"), 60, what="the note indexed")
    d.wait_idle()
    time.sleep(3)  # would be several re-index rounds if the daemon's own writes were indexed
    d.wait_idle()
    own = str(d.base)
    indexed = [e["path"] for e in d.events("ingest_file") if e["path"].startswith(own)]
    assert (d.base / "ragweedd.toml").exists() and (d.base / "data" / "ingest_db.sqlite3").exists()
    assert not indexed, f"the daemon indexed its own files: {indexed[:5]}"
    assert not [p for p in d.live_rows("home") if p.startswith(own)]
    hits = d.search("listen 127.0.0.1 data_dir", top_k=20)  # config.toml's text is not searchable
    assert not [h for h in hits if own in str(h) or "data_dir" in h["text"]], hits

    for inside in (d.base / "data", d.base / "state", d.base / "cache", d.base / "data" / "collections"):
        r = d.api("POST", "/v1/collections", json={"name": "mine", "paths": [str(inside)]})
        assert r.status_code == 400, (inside, r.status_code, r.text)
        assert "own directory" in r.text and str(inside) in r.text, r.text


def test_a_config_root_inside_the_data_dir_is_refused_with_a_clear_error(tmp_path):
    base = tmp_path / "d0"
    inside = base / "data" / "notes"
    inside.mkdir(parents=True)
    cfg = base / "ragweedd.toml"
    cfg.write_text(f'listen = "127.0.0.1:0"\ndata_dir = "{base / "data"}"\nstate_dir = "{base / "state"}"\n'
                   f'cache_dir = "{base / "cache"}"\n[collections.mine]\npaths = ["{inside}"]\n')
    env = {**os.environ, "RAGWEED_EMBED_MODEL": "hash:64"}
    r = subprocess.run([sys.executable, "-m", "ragweedd", "--config", str(cfg), "run"], capture_output=True,
                       text=True, timeout=120, env=env, cwd=str(ROOT))
    out = r.stdout + r.stderr
    assert r.returncode != 0
    assert "inside the daemon's own directory" in out and "collection 'mine'" in out, out[-2000:]
    assert "Traceback" not in out, out[-3000:]


def test_the_daemons_own_log_inside_a_watched_folder_is_not_indexed(tmp_path):
    """`ragweedd run > ROOT/daemon.log`: each ingest logs a line, which changed the log, which was
    ingested again, for ever. The file the daemon's output goes to is never a document."""
    from tests.system.conftest import Daemon, serving

    root = tmp_path / "root"
    root.mkdir()
    (root / "note.txt").write_text("A note about herons.")
    d = Daemon(tmp_path / "d", {"root": [root]})
    d.out = root / "daemon.log"
    with serving(d):
        wait_until(lambda: str(root / "note.txt") in d.live_rows("root"), 60, 0.2, "the note indexed")
        (root / "later.txt").write_text("Written later: egrets.")
        wait_until(lambda: str(root / "later.txt") in d.live_rows("root"), 60, 0.2, "the later file")
        d.wait_idle()
        assert str(root / "daemon.log") not in d.live_rows("root")
        assert not [e for e in d.events("ingest_file") if e.get("path", "").endswith("daemon.log")]
