"""A shared (PostgreSQL) collection and a change of embed.model: a daemon configured with another
model than the collection's refuses to start and says what to do; ``ragweedd reembed`` sets every
stored chunk waiting for the new model; the daemon started with it embeds them from the stored
text, and a daemon still embedding with the old model cannot write its vectors there."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.system.conftest import ROOT, wait_until


def _hnsw_indexes(dsn: str) -> list[str]:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute("SELECT indexname FROM pg_indexes WHERE indexname LIKE 'vectors_hnsw_%'").fetchall()
    return sorted(r[0] for r in rows)


def _vectors(dsn: str) -> dict[str, int]:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        return dict(conn.execute("SELECT embedder_id, count(*) FROM vectors WHERE space='primary' GROUP BY 1"
                                 ).fetchall())


def test_reembed_moves_a_shared_collection_to_another_model(pg_dsn, daemon, tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    for i, topic in enumerate(["heron nesting season", "granite quarry history", "tide tables for the bay"]):
        (docs / f"n{i}.md").write_text(f"# Note {i}\n\nA long note about the {topic}. " * 20)
    old = daemon({"notes": [docs]}, store=pg_dsn, source_name="laptop")
    wait_until(lambda: len(old.live_rows("notes")) == 3, 60, what="three files indexed")
    old.wait_idle()
    chunks = old.probe.chunks("notes")
    old_id = "hash:64@fh1+ctx1"  # the model, its feature hashing version, the context line format
    new_id = "hash:32@fh1+ctx1"
    assert _vectors(pg_dsn) == {old_id: chunks}
    old.stop()

    new = daemon({"notes": [docs]}, start=False, store=pg_dsn, source_name="laptop",
                 env={"RAGWEED_EMBED_MODEL": "hash:32"})
    new.start(wait=False)
    assert new.proc.wait(60) == 1
    log = new.out.read_text()
    assert f"collection 'notes' in the shared database was embedded with {old_id}" in log, log[-2000:]
    assert "ragweedd reembed -c notes" in log

    r = subprocess.run([sys.executable, "-m", "ragweedd", "--config", str(new.cfg), "--json", "reembed"],
                       env=new.env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["collections"]["notes"] == {"embedder": new_id, "chunks": chunks,
                                                            "already": False, "was": old_id}
    assert _vectors(pg_dsn) == {}
    # the index of the old dimension is gone, the new one is there before a vector arrives
    assert [i.rsplit("_", 1)[1] for i in _hnsw_indexes(pg_dsn)] == ["32"]

    # the old model's daemon, started again by mistake, cannot write its vectors into the collection
    old.start(wait=False)
    assert old.proc.wait(60) == 1
    assert f"was embedded with {new_id}" in old.out.read_text()

    new.start()
    wait_until(lambda: _vectors(pg_dsn) == {new_id: chunks} and new.idle(), 60, what="every chunk re-embedded")
    hits = new.search("granite quarry history")
    assert hits and hits[0]["filename"] == "n1.md"
    assert new.ingests_any() == 0, "nothing is extracted again"
    # a second run has nothing to do
    r = subprocess.run([sys.executable, "-m", "ragweedd", "--config", str(new.cfg), "reembed", "-c", "notes"],
                       env=new.env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and f"already embedded with {new_id}" in r.stdout, r.stdout + r.stderr


def test_vectors_of_the_model_a_collection_was_moved_away_from_are_refused(pg_dsn):
    """A daemon on another machine still running with the old model when reembed ran: its embedding
    stage's vectors must not land among the new model's."""
    import pytest

    from ragweedd.errors import EmbedderError
    from ragweedd.store.postgres.backend import PgBackend
    from ragweedd.store.types import PRIMARY

    backend = PgBackend(pg_dsn, source="a")
    rag = backend.open_rag("notes")
    try:
        rag.publish(md5="b" * 32, source_file="/n.md", rel_path="n.md", kind="text", extractor="text", ocr_type=None,
                    title=None, size_bytes=10, chunks=[{"chunk_idx": 0, "text": "tide tables", "meta": {}}],
                    vectors={}, embedders={PRIMARY: ("old", 4)})
        waiting = rag.pending_batch(10)
        assert len(waiting) == 1
        assert rag.restart_vectors("new", 4) == 1
        cid, emb_id, _text, ctx = waiting[0]
        with pytest.raises(EmbedderError, match="embedded with new, but this process embeds with old"):
            rag.add_vectors("old", [(cid, emb_id, ctx, b"\0" * 16)])
        assert rag.add_vectors("new", [(cid, emb_id, ctx, b"\0" * 16)]) == [cid]
    finally:
        rag.close()
        backend.close()


def test_a_daemon_left_on_the_old_model_keeps_its_other_collections_going(pg_dsn, daemon, tmp_path):
    """reembed run while a daemon of the old model still runs: that daemon writes no vector into the
    moved collection, says so in status, and its other collections go on; adding a shared
    collection of another model at run time is refused with the same explanation."""
    one, two, theirs = tmp_path / "one", tmp_path / "two", tmp_path / "theirs"
    for f in (one, two, theirs):
        f.mkdir()
        (f / "first.md").write_text(f"# {f.name}\n\nThe first note of the {f.name} folder, about herons.\n")
    d = daemon({"one": [one], "two": [two]}, store=pg_dsn, source_name="laptop")
    wait_until(lambda: len(d.live_rows("one")) == 1 and len(d.live_rows("two")) == 1, 60, what="both indexed")
    d.wait_idle()
    other = daemon({"one": [one], "theirs": [theirs]}, start=False, store=pg_dsn, source_name="desk",
                   env={"RAGWEED_EMBED_MODEL": "hash:32"})
    for args in (["reembed", "-c", "one"], ["ingest", str(theirs), "-c", "theirs"]):
        r = subprocess.run([sys.executable, "-m", "ragweedd", "--config", str(other.cfg), *args], env=other.env,
                           cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr

    (one / "second.md").write_text("# Second\n\nA second note in the moved collection, about egrets.\n")
    (two / "second.md").write_text("# Second\n\nA second note in the other collection, about storks.\n")
    wait_until(lambda: any("collection 'one' gets no vectors here" in p for p in d.status()["degraded"]), 60,
               what="the refusal in status")
    wait_until(lambda: d.probe.vectors("two") == d.probe.chunks("two") == 2, 60, what="the other collection's vectors")
    assert d.probe.vectors("one") == 0  # none of the old model's vectors went in
    # the moved collection's chunks are left to a daemon of the new model, while the old one runs
    other.start()
    wait_until(lambda: d.probe.vectors("one") == d.probe.chunks("one") == 2, 60,
               what="the new model's daemon to embed the moved collection")

    r = d.api("POST", "/v1/collections", json={"name": "theirs", "paths": [str(theirs)]})
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert "collection 'theirs' in the shared database was embedded with hash:32" in err["message"]
    assert "ragweedd reembed" in err["hint"]
    # still only another machine's collection here: listed as shared, with no folder of this machine
    listed = {c["name"]: c for c in d.api("GET", "/v1/collections").json()["items"]}
    assert listed["theirs"]["paths"] == [] and listed["one"]["paths"] == [str(one)]
