"""A large text file being published keeps the daemon usable: searches answer, a small file written
after it is searchable before it, and a stop in the middle is prompt and loses nothing.

The file (about 11 MB, tens of thousands of chunks) is staged in bounded batches, copied into the
collection in short transactions out of sight, then switched in at once (docs/daemon.md, "Big
files"): no search sees part of it, and the collection's write lock is never held for long.
"""

from __future__ import annotations

import random
import signal
import time

import pytest

from tests.system.conftest import wait_until

WORDS = 1_400_000  # about 11 MB of text: over 10,000 chunks


def _big_text(n_words: int) -> str:
    rng = random.Random(7)
    vocab = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 9)))
             for _ in range(5000)]
    lines = []
    for i in range(0, n_words, 12):
        lines.append(" ".join(rng.choices(vocab, k=12)) + f" line{i}.")
    return "\n".join(lines) + "\n"


def _running(d, path) -> bool:
    with d.db() as c:
        row = c.execute("SELECT state FROM jobs WHERE path=?", (str(path),)).fetchone()
    return row is not None and row[0] == "running"


def _staging(d, path) -> bool:
    return any(e.get("path") == str(path) for e in d.events("publish_staging"))


def _whole(d, path) -> bool:
    """The file's content is in the collection whole: as many chunks as its document row says."""
    with d.db("notes") as c:
        row = c.execute("SELECT d.chunks, (SELECT count(*) FROM embeddings e WHERE e.md5 = d.md5)"
                        " FROM documents d JOIN document_paths p ON p.md5 = d.md5 WHERE p.source_file=?",
                        (str(path),)).fetchone()
    return row is not None and row[0] == row[1] > 0


def _copying(d, path) -> bool:
    """Rows of the big file are in the collection's tables while its path does not show them yet:
    they are being copied in, out of sight (rag_stage.py). A publish in one transaction never
    shows this state."""
    with d.db("notes") as c:
        rows = c.execute("SELECT count(*) FROM embeddings").fetchone()[0]
        shown = c.execute("SELECT 1 FROM document_paths WHERE source_file=?", (str(path),)).fetchone()
    return rows > 2 and shown is None


def test_searches_answer_and_a_small_file_goes_first_while_a_large_file_is_published(daemon, tmp_path):
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "seed.txt").write_text("a note about sourdough starters and rye flour\n")
    d = daemon({"notes": [folder]})
    d.wait_idle(60)
    big = folder / "big.txt"
    big.write_text(_big_text(WORDS))
    # The small file comes while the big file's rows are being copied into the collection: the
    # copy's short transactions let its publish in.
    wait_until(lambda: _copying(d, big), 300, 0.02, "the big file's rows to be copied in")
    small = folder / "small.txt"
    small.write_text("the quokkaberry marker is in this small note only\n")

    codes: list[int] = []
    found_while_publishing = None
    t0 = time.monotonic()
    while True:
        big_done = bool(d.ingests(big))
        r = d.api("POST", "/v1/search", json={"query": "quokkaberry marker", "top_k": 5})
        codes.append(r.status_code)
        assert r.status_code == 200, r.text
        if any(h["source_file"] == str(small) for h in r.json()["results"]):
            found_while_publishing = not big_done
            break
        assert time.monotonic() - t0 < 300, "the small file never became searchable"
    print(f"small file searchable after {time.monotonic() - t0:.1f} s; searches: {len(codes)}")
    assert found_while_publishing, "the small file waited for the big one's publish"
    # searches keep answering until the big file is in, and none sees part of it
    while not d.ingests(big):
        r = d.api("POST", "/v1/search", json={"query": "line1200", "top_k": 5})
        assert r.status_code == 200, r.text
        if any(h["source_file"] == str(big) for h in r.json()["results"]):
            assert _whole(d, big), "a search saw part of the big file"
    with d.db("notes") as c:
        chunks = c.execute("SELECT chunks FROM documents d JOIN document_paths p ON p.md5 = d.md5"
                           " WHERE p.source_file=?", (str(big),)).fetchone()[0]
        n, distinct = c.execute("SELECT count(*), count(DISTINCT chunk_idx) FROM embeddings e"
                                " JOIN document_paths p ON p.md5 = e.md5 WHERE p.source_file=?",
                                (str(big),)).fetchone()
        assert c.execute("SELECT count(*) FROM documents").fetchone()[0] == 3
    assert chunks > 10_000 and n == distinct == chunks


@pytest.mark.parametrize("how", ["sigterm", "sigterm_copying", "kill9", "kill9_copying"])
def test_a_stop_or_crash_while_a_large_file_is_published_leaves_nothing_and_it_is_indexed_once(daemon, tmp_path,
                                                                                                how):
    """SIGTERM stops promptly and gives the job back untouched; kill -9 leaves its job 'running',
    re-queued at the next start, also between two of the short transactions that copy the file's
    rows in. Either way nothing of the file is visible in the collection before the restart (rows
    copied in are hidden), and after it the file is there once and nothing hidden is left."""
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "seed.txt").write_text("a note about sourdough starters and rye flour\n")
    d = daemon({"notes": [folder]})
    d.wait_idle(60)
    big = folder / "big.txt"
    big.write_text(_big_text(WORDS))
    wait_until(lambda: _staging(d, big), 120, 0.05, "the big file's publish to start")
    if how.endswith("_copying"):
        wait_until(lambda: _copying(d, big), 300, 0.02, "the big file's rows to be copied in")
    assert not d.ingests(big), "the file was published before the signal: make it bigger"
    if how.startswith("kill9"):
        d.kill9()
    else:
        t0 = time.monotonic()
        d.proc.send_signal(signal.SIGTERM)
        rc = d.proc.wait(60)
        took = time.monotonic() - t0
        print(f"stop took {took:.2f} s")
        assert rc == 0, d.out.read_text()[-3000:]
        assert took < 10, f"stopping took {took:.1f} s"
        with d.db() as c:
            rows = c.execute("SELECT state, tries FROM jobs WHERE path=?", (str(big),)).fetchall()
        assert [tuple(r) for r in rows] == [("queued", 0)]
    assert not d.ingests(big)
    with d.db("notes") as c:  # nothing of the interrupted publish is left where searches look
        visible = "NOT EXISTS (SELECT 1 FROM hidden_chunks h WHERE e.id BETWEEN h.lo AND h.hi)"
        assert c.execute(f"SELECT count(*) FROM embeddings e WHERE {visible}").fetchone()[0] == 1
        assert c.execute("SELECT count(*) FROM document_paths").fetchone()[0] == 1
        assert c.execute("SELECT count(*) FROM changes WHERE op='add'").fetchone()[0] <= 1
        hidden = c.execute(f"SELECT count(*) FROM embeddings e WHERE NOT {visible}").fetchone()[0]
    assert (hidden > 0) == how.endswith("_copying")

    d.start()
    wait_until(lambda: d.ingests(big), 300, 0.2, "the big file to be indexed after the restart")
    assert len(d.ingests(big)) == 1
    with d.db("notes") as c:
        n, distinct = c.execute("SELECT count(*), count(DISTINCT embedding_id) FROM embeddings").fetchone()
        docs = c.execute("SELECT sum(chunks) FROM documents").fetchone()[0]
        adds = tuple(c.execute("SELECT count(*), count(DISTINCT id) FROM changes WHERE op='add'").fetchone())
        assert c.execute("SELECT count(*) FROM hidden_chunks").fetchone()[0] == 0
    assert n == distinct == docs and n > 10_000
    assert adds[0] == adds[1]  # no chunk logged twice for the vector index
