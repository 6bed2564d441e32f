"""Files are keyword-searchable as soon as they are extracted; their vectors follow.

The embedder is made slow (daemon_main's ``--slow-embed``) so that vectors lag far behind: the
files are found by keyword search and counted in status as searchable without vectors; a kill -9
while vectors are still missing loses nothing and duplicates nothing after a restart.
"""

from __future__ import annotations

import time

from tests.system.conftest import wait_until

WORDS = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet")


def _note(i: int) -> str:
    # several chunks per file (the default chunk is about 1,000 characters)
    body = " ".join(f"{WORDS[(i + k) % len(WORDS)]} sentence {k} of note {i}." for k in range(300))
    return f"Note {i} carries the marker zqmark{i:02d}x.\n\n{body}\n"


def _counts(d) -> tuple[int, int, int, int, tuple[int, int]]:
    with d.db("notes") as c:
        adds = c.execute("SELECT count(*), count(DISTINCT id) FROM changes WHERE op='add'").fetchone()
        return (c.execute("SELECT count(*) FROM embeddings").fetchone()[0],
                c.execute("SELECT count(*) FROM vectors").fetchone()[0],
                c.execute("SELECT count(*) FROM pending_vectors").fetchone()[0],
                c.execute("SELECT count(*) FROM documents").fetchone()[0], (adds[0], adds[1]))


def test_keyword_search_before_vectors_and_kill9_between_the_steps(daemon, tmp_path):
    folder = tmp_path / "notes"
    folder.mkdir()
    d = daemon({"notes": [folder]}, start=False, launcher_args=["--slow-embed", "1.0"])
    d.start()
    for i in range(20):
        (folder / f"note{i:02d}.txt").write_text(_note(i))

    def all_searchable() -> bool:
        v = d.status()["vectors"]
        return v["files_searchable"] == 20
    wait_until(all_searchable, 60, 0.2, "all 20 files published")
    v = d.status()["vectors"]
    assert v["pending_chunks"] > 0 and v["files_with_vectors"] < 20, v
    # Found by keyword while its vectors are still being computed (each search embeds its query
    # with the slow embedder too, so only a few are asked).
    for i in (0, 7, 19):
        hits = [h for h in d.search(f"zqmark{i:02d}x") if f"zqmark{i:02d}x" in h["text"]]
        assert hits, f"note{i:02d} is not keyword-searchable before its vectors"
        assert hits[0]["source_file"] == str(folder / f"note{i:02d}.txt")
    chunks, vectors, pending, docs, adds = _counts(d)
    assert pending > 0 and vectors + pending == chunks and docs == 20
    assert adds == (vectors, vectors)  # only chunks with a vector are logged for the vector index

    d.kill9()
    before = _counts(d)
    assert before[2] > 0, "every vector was written before the kill: make the embedder slower"

    d.launcher_args = []
    d.start()
    d.wait_idle(120)
    chunks2, vectors2, pending2, docs2, adds2 = _counts(d)
    assert (chunks2, docs2) == (before[0], before[3]) == (chunks, 20), "chunks were lost or duplicated"
    assert pending2 == 0 and vectors2 == chunks2
    assert adds2 == (chunks2, chunks2), "a chunk was logged for the vector index twice"
    # the vector index catches up from the change log (it is rebuilt here: none was flushed before the kill)
    wait_until(lambda: d.status()["index"]["notes"]["vectors"] == chunks2, 60, 0.2, "the vector index to catch up")
    s = d.status()
    assert s["vectors"]["files_with_vectors"] == s["vectors"]["files_searchable"] == 20
    # Every file ingested once: the restart only computed the missing vectors.
    assert all(len(d.ingests(folder / f"note{i:02d}.txt")) == 1 for i in range(20))
    hits = [h for h in d.search("zqmark05x") if "zqmark05x" in h["text"]]
    assert hits and hits[0].get("dense_rank") is not None, hits[:1]


def test_vectors_resume_when_the_embedder_comes_back(daemon, tmp_path):
    """An embedder that fails (a model server down) leaves the chunks pending and says so in
    status; when it answers again, the pending vectors are computed without any new file event."""
    folder = tmp_path / "notes"
    folder.mkdir()
    down = tmp_path / "embedder-down"
    down.touch()
    d = daemon({"notes": [folder]}, start=False, launcher_args=["--embed-down-while", str(down)])
    d.start()
    for i in range(5):
        (folder / f"note{i:02d}.txt").write_text(_note(i))
    wait_until(lambda: d.status()["vectors"]["files_searchable"] == 5, 60, 0.2, "the files published")
    s = wait_until(lambda: (lambda s: s if any("embedding" in r for r in s["degraded"]) else None)(d.status()),
                   30, 0.2, "status to say the embedding fails")
    assert s["vectors"]["pending_chunks"] > 0 and s["vectors"]["files_with_vectors"] == 0
    down.unlink()  # the server answers again
    wait_until(lambda: d.status()["vectors"]["pending_chunks"] == 0, 90, 0.5, "the pending vectors computed")
    d.wait_idle(60)
    chunks, vectors, pending, docs, adds = _counts(d)
    assert vectors == chunks and pending == 0 and docs == 5 and adds == (chunks, chunks)


def test_a_removed_collection_stops_being_embedded_and_can_be_added_again(daemon, tmp_path):
    keep = tmp_path / "keep"
    keep.mkdir()
    folder = tmp_path / "dyn"
    folder.mkdir()
    for i in range(20):
        (folder / f"note{i:02d}.txt").write_text(_note(i))
    d = daemon({"keep": [keep]}, start=False, launcher_args=["--slow-embed", "0.5"])
    d.start()
    r = d.api("POST", "/v1/collections", json={"name": "dyn", "paths": [str(folder)]})
    assert r.status_code in (200, 201), r.text
    wait_until(lambda: d.status()["vectors"]["files_searchable"] == 20, 60, 0.2, "the files published")
    assert d.status()["vectors"]["pending_chunks"] > 0
    r = d.api("DELETE", "/v1/collections/dyn")
    assert r.status_code == 200, r.text
    calls = d.embed_calls()
    time.sleep(3)
    # at most the batch in flight when it was removed (batch size 32) is embedded after that
    assert d.embed_calls() - calls <= 32, "a removed collection is still being embedded"
    v = d.status()["vectors"]
    assert v["files_searchable"] == 0 and v["pending_chunks"] == 0, v

    # the same name added again is a new, empty collection that fills from its folder
    r = d.api("POST", "/v1/collections", json={"name": "dyn", "paths": [str(folder)]})
    assert r.status_code in (200, 201), r.text
    wait_until(lambda: d.status()["vectors"]["files_searchable"] == 20, 60, 0.2, "the files published again")
    hits = [h for h in d.search("zqmark03x", collections=["dyn"]) if "zqmark03x" in h["text"]]
    assert hits and hits[0]["source_file"] == str(folder / "note03.txt")
