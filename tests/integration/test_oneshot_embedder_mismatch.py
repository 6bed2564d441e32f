"""A one-shot ingest with another embed.model than the collection was built with is refused before
anything is written: 128-d vectors never mix into a 64-d collection."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _ingest(cfg: Path, model: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "RAGWEED_EMBED_MODEL": model}
    return subprocess.run([sys.executable, "-m", "ragweedd", "--config", str(cfg), "ingest", "-c", "notes"],
                          env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_oneshot_ingest_with_another_embedder_is_refused_before_writing(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("The first note is about herons and their nests.")
    cfg = tmp_path / "ragweedd.toml"
    cfg.write_text(f'data_dir = "{tmp_path / "data"}"\nstate_dir = "{tmp_path / "state"}"\n'
                   f'cache_dir = "{tmp_path / "cache"}"\n[collections.notes]\npaths = ["{docs}"]\n')
    first = _ingest(cfg, "hash:64")
    assert first.returncode == 0, first.stderr
    (docs / "b.txt").write_text("A second note, about egrets, arrives later.")
    rag = tmp_path / "data" / "collections" / "notes" / "rag.sqlite3"

    def state():
        with sqlite3.connect(f"file:{rag}?mode=ro", uri=True) as c:
            return (c.execute("SELECT count(*) FROM embeddings").fetchone()[0],
                    sorted({len(r[0]) for r in c.execute("SELECT vec FROM vectors")}))

    before = state()
    r = _ingest(cfg, "hash:128")
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "was embedded with hash:64" in r.stderr and "hash:128" in r.stderr and "Traceback" not in r.stderr
    assert state() == before == (1, [64 * 4])
    again = _ingest(cfg, "hash:64")  # the collection still works with its own model
    assert again.returncode == 0, again.stderr
    assert state()[0] == 2
