"""Issue 12 item 4: a damaged database is detected and repaired, one test per case the issue lists,
each on a real daemon: the damage is done while it is stopped (or killed), and the restarted daemon
must serve the files' true text again, say what it did, and keep indexing afterwards."""

from __future__ import annotations

import os
import sqlite3
from contextlib import closing
from pathlib import Path

from tests.system.conftest import wait_until

N = 12


def _text(i: int, version: int = 0, paragraphs: int = 30) -> str:
    return "\n\n".join(f"document {i} version {version} paragraph {j}: the heron{i}v{version} counts "
                       f"pebbles {i * 100 + j} beside the mill race in spring and autumn alike"
                       for j in range(paragraphs))


def _setup(daemon, tmp_path: Path):
    root = tmp_path / "notes"
    root.mkdir()
    for i in range(N):
        (root / f"n{i}.txt").write_text(_text(i))
    d = daemon({"notes": [root]})
    d.wait_idle(60)
    assert len(d.live_rows("notes")) == N
    return d, root


def _checkpoint(db: Path) -> None:
    """Move everything from the -wal into the main file, as SQLite does in time on its own, so the
    damage below hits the pages that hold the data."""
    c = sqlite3.connect(db)
    try:
        c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        c.close()


def _flip_pages(db: Path, first: int = 2, count: int = 4) -> None:
    """Overwrite whole pages in the middle of a database file with garbage."""
    _checkpoint(db)
    size = db.stat().st_size
    page = 4096
    assert size >= (first + count) * page, size
    with open(db, "r+b") as f:
        for n in range(first, first + count):
            f.seek(n * page)
            f.write(bytes((n * 37 + k) % 251 for k in range(page)))


def _rag(d) -> Path:
    return d.base / "data" / "collections" / "notes" / "rag.sqlite3"


def _quick_check(p: Path) -> str:
    c = sqlite3.connect(f"file:{p}?mode=ro", uri=True)
    try:
        return c.execute("PRAGMA quick_check").fetchone()[0]
    except sqlite3.DatabaseError as e:
        return str(e)
    finally:
        c.close()


def _all_searchable(d, version_of=lambda i: 0) -> None:
    for i in (0, N // 2, N - 1):
        word = f"heron{i}v{version_of(i)}"
        hits = d.search(word, top_k=20)
        assert any(h["source_file"].endswith(f"n{i}.txt") and word in h["text"] for h in hits), \
            (i, [(h["source_file"][-7:], h["text"][:40]) for h in hits])


def _consistent(d) -> None:
    """Every live file done once, and the vector index holds exactly the stored chunks."""
    d.wait_idle(60)
    rows = d.live_rows("notes")
    assert len(rows) == N and all(r["extract_status"] == "done" for r in rows.values()), \
        {p: r["extract_status"] for p, r in rows.items()}
    with closing(d.db("notes")) as c:
        chunks = c.execute("SELECT count(*) FROM embeddings").fetchone()[0]
        max_seq = c.execute("SELECT max(seq) FROM changes").fetchone()[0]
    s = d.status()

    def index_caught_up():
        i = d.status()["index"]["notes"]
        return i["vectors"] == chunks and i["applied_seq"] == max_seq and i
    wait_until(index_caught_up, 30, 0.3, "the index to hold exactly the logged chunks")
    assert s["failed_jobs"] == [], s["failed_jobs"]


def test_flipped_pages_in_rag_db_are_repaired_at_start(daemon, tmp_path):
    d, root = _setup(daemon, tmp_path)
    d.stop()
    _flip_pages(_rag(d))
    assert _quick_check(_rag(d)) != "ok"
    d.start()
    _consistent(d)
    _all_searchable(d)
    assert _quick_check(_rag(d)) == "ok"
    assert list(_rag(d).parent.glob("rag.sqlite3.damaged-*")), "the damaged file is kept aside"
    assert d.events("database_repaired")


def test_rag_db_moved_aside_is_rebuilt_from_the_files(daemon, tmp_path):
    d, root = _setup(daemon, tmp_path)
    d.stop()
    for p in _rag(d).parent.glob("rag.sqlite3*"):
        os.replace(p, tmp_path / p.name)
    d.start()
    _consistent(d)
    _all_searchable(d)
    assert d.events("database_missing")


def test_bit_rot_in_a_stored_chunk_is_repaired(daemon, tmp_path):
    d, root = _setup(daemon, tmp_path)
    d.stop()
    rag = _rag(d)
    _checkpoint(rag)
    data = bytearray(rag.read_bytes())
    needle = b"heron5v0 counts pebbles 507"
    assert data.count(needle) >= 2  # the chunk's text and its keyword (FTS) row
    # the same byte of every stored copy: "pebbles 509", a text that is not in the file
    rag.write_bytes(bytes(data).replace(needle, needle[:-1] + b"9"))
    d.start()
    d.wait_idle(60)
    for h in d.search("heron5v0 pebbles", top_k=50):
        assert "pebbles 509 beside" not in h["text"] or h["source_file"].endswith("n5.txt") and \
            "paragraph 9" in h["text"], h["text"]
    texts = [h["text"] for h in d.search("heron5v0 pebbles 507", top_k=50)]
    assert any("pebbles 507 beside" in t for t in texts), texts
    _consistent(d)
    assert d.events("chunk_text_mismatch")


def test_lost_wal_after_a_crash_is_caught_up_and_the_index_not_left_ahead(daemon, tmp_path):
    d, root = _setup(daemon, tmp_path)
    d.stop()  # checkpointed: what follows lives only in the -wal
    d.start()
    edited = (1, 2, 3)
    for i in edited:
        (root / f"n{i}.txt").write_text(_text(i, 1))
    d.wait_idle(60)
    wait_until(lambda: all(d.search(f"heron{i}v1") for i in edited), 30, 0.3, "the edits")
    # the index file is flushed with an applied_seq that includes the edits
    with closing(d.db("notes")) as c:
        top = c.execute("SELECT max(seq) FROM changes").fetchone()[0]
    assert top > 84

    def flushed():
        i = d.status()["index"]["notes"]
        return i["applied_seq"] == top and not i["dirty"] and i["last_flush"] is not None
    wait_until(flushed, 60, 0.3, "the index flush")
    d.kill9()
    from ragweedd.index.fileformat import read_header
    assert read_header(_rag(d).parent)["applied_seq"] == top
    wal = Path(str(_rag(d)) + "-wal")
    assert wal.exists() and wal.stat().st_size > 0
    wal.unlink()
    # edited again while the daemon was down, shorter: the changes that follow are numbered below
    # the index's old applied_seq, which must not make them skipped
    for i in edited:
        (root / f"n{i}.txt").write_text(_text(i, 2, paragraphs=8))
    d.start()
    version = lambda i: 2 if i in edited else 0  # noqa: E731
    _consistent(d)
    _all_searchable(d, version)
    for i in edited:
        for old in (0, 1):
            hits = d.search(f"heron{i}v{old}", top_k=5)
            assert not any(f"heron{i}v{old}" in h["text"] for h in hits), "old text returned as current"
    # changes after the repair reach the index (none is skipped as "already applied")
    for i in (4, 5):
        (root / f"n{i}.txt").write_text(_text(i, 2))
    d.wait_idle(60)
    _consistent(d)


def test_flipped_pages_in_ingest_db_are_repaired_at_start(daemon, tmp_path):
    d, root = _setup(daemon, tmp_path)
    d.stop()
    ingest = d.base / "data" / "ingest_db.sqlite3"
    _flip_pages(ingest)
    assert _quick_check(ingest) != "ok"
    embedded = d.ingest_embedded()
    d.start()
    _consistent(d)
    _all_searchable(d)
    s = d.status()
    assert s["files_by_state"].get("indexed", 0) + s["files_by_state"].get("done", 0) == N, s["files_by_state"]
    assert _quick_check(ingest) == "ok"
    assert list(ingest.parent.glob("ingest_db.sqlite3.damaged-*"))
    assert d.ingest_embedded() == embedded, "content already in the collection is not embedded again"
