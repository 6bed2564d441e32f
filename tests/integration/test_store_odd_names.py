"""File names that are not UTF-8 in the real SQLite stores: stored through one reversible encoding
(store/pathnames.py) and given back as the very str the file system gave, by every method that
writes or reads a path; shown as \\xNN in JSON."""

import itertools
import json
import os

from ragweedd.api.jsontext import dumps
from ragweedd.contract import shown_hit, shown_path
from ragweedd.store.pathnames import from_db, to_db
from ragweedd.store.sqlite.ingest_db import IngestDB
from ragweedd.store.sqlite.job_queue import JobQueue
from ragweedd.store.sqlite.rag_db import RagDB
from tests.integration.test_store import _publish

LATIN = os.fsdecode(b"/d/caf\xe9.txt")
ODD_DIR = os.fsdecode(b"/d/Archiv\xe4\n")
NAMES = [b"plain", b"caf\xe9", b"\xff\xfe", b"a\nb", "é".encode(), b"x\xc3", b"\xed\xb2\x80", b"\xc3\xa9\xe9",
         b"\x00", b"00", b"\\x00", b"/", b"e9"]


def test_the_encoding_is_valid_utf8_reversible_and_injective():
    names = [os.fsdecode(a + b) for a, b in itertools.product(NAMES, repeat=2) if b"\x00" not in a + b]
    stored = [to_db(n) for n in names]
    for n, s in zip(names, stored):
        s.encode("utf-8")  # SQLite text must be valid UTF-8
        assert from_db(s) == n and to_db(s) == s  # reversible, and idempotent on a stored form
    assert len(set(stored)) == len(set(names))
    assert to_db("/d/ordinary é.txt") == "/d/ordinary é.txt"  # UTF-8 names are stored as before
    # a folder's stored form is a prefix of its children's
    assert to_db(ODD_DIR + "/x").startswith(to_db(ODD_DIR) + "/")


def test_ingest_db_rows_of_an_odd_name(tmp_path):
    db = IngestDB(tmp_path / "ingest_db.sqlite3")
    inner = ODD_DIR + "/" + os.fsdecode(b"n\xf6te.txt")
    for p, md5 in ((LATIN, "m1"), (inner, "m2"), ("/d/Archiv/other.txt", "m3"), ("/D/ARCHIV\n/x", "m4")):
        db.set_file("c", p, md5=md5, size=1, mtime_ns=1, inode=1, status="done", root=os.path.dirname(p),
                    error=f"cannot read {p}")
    assert db.live_file("c", LATIN)["source_file"] == LATIN and db.is_live("c", LATIN)
    assert set(db.live_stats("c")) == {LATIN, inner, "/d/Archiv/other.txt", "/D/ARCHIV\n/x"}
    assert db.live_stats("c")[inner]["source_file"] == inner
    assert db.live_paths_under("c", ODD_DIR) == [inner]  # not case-folded, not cut at the escape
    assert db.live_paths_for_md5("c", "m1") == [LATIN]
    row = db.live_file("c", inner)
    assert row["root"] == ODD_DIR and db.file_by_id(row["id"])["source_file"] == inner
    assert row["error"] == "cannot read " + shown_path(inner)  # messages are stored as shown
    # a new version supersedes, it does not duplicate
    db.set_file("c", LATIN, md5="m9", size=2, mtime_ns=2, inode=1, status="done")
    assert [r["md5"] for r in db.live_files("c") if r["source_file"] == LATIN] == ["m9"]
    rows, total = db.live_files_page(collection="c", states=None, path_glob="caf*", offset=0, limit=10)
    assert total == 1 and rows[0]["source_file"] == LATIN
    rows, total = db.live_files_page(collection="c", states=None, path_glob="caf\\xe9.txt", offset=0, limit=10)
    assert total == 1, "a glob matches the name as it is shown"
    assert db.mark_deleted("c", LATIN) == "m9" and not db.is_live("c", LATIN)
    assert db.forget_files("c", [inner]) == 1 and db.live_paths_under("c", ODD_DIR) == []


def test_skipped_rows_of_odd_names_written_and_forgotten_without_a_job(tmp_path):
    from ragweedd.store.types import SkippedFile

    db = IngestDB(tmp_path / "ingest_db.sqlite3")
    q = JobQueue(tmp_path / "ingest_db.sqlite3", max_tries=1)
    bin_name = ODD_DIR + "/" + os.fsdecode(b"d\xe4ta.bin")
    held_name = ODD_DIR + "/" + os.fsdecode(b"h\xe9ld.bin")
    q.put("c", held_name, "upsert", ODD_DIR)
    files = [SkippedFile(p, ODD_DIR, 5, 1, 1, None, f"{p}: unsupported file type '.bin'; skipped")
             for p in (bin_name, held_name)]
    assert db.record_skipped("c", files) == [held_name]  # a job exists: the pipeline settles it
    row = db.live_file("c", bin_name)
    assert row["extract_status"] == "skipped" and row["root"] == ODD_DIR
    assert row["error"] == shown_path(bin_name) + ": unsupported file type '.bin'; skipped"
    assert db.forget_skipped("c", [bin_name, held_name]) == [held_name]
    assert not db.is_live("c", bin_name)
    q.close()


def test_job_queue_gives_back_the_same_path(tmp_path):
    q = JobQueue(tmp_path / "ingest_db.sqlite3", max_tries=1)
    q.put("c", LATIN, "upsert", ODD_DIR)
    assert q.pending_paths("c") == {LATIN}
    job = q.claim(timeout_s=1)
    assert job is not None and job.path == LATIN and job.root == ODD_DIR
    assert not q.fail(job, f"boom at {LATIN}")
    [failed] = q.failed()
    assert failed["path"] == LATIN and failed["error"] == "boom at " + shown_path(LATIN)
    q.close()


def test_rag_db_paths_hits_and_removal(tmp_path):
    rag = RagDB(tmp_path / "rag.sqlite3", "c")
    ids = _publish(rag, "m1", LATIN, ["alpha beta"])
    assert rag.md5_of_path(LATIN) == "m1" and rag.paths_of("m1") == [LATIN]
    assert rag.document_paths() == [(LATIN, os.fsdecode(b"caf\xe9.txt"), "m1")]
    hit = rag.hits(ids)[ids[0]]
    assert hit["source_file"] == LATIN and hit["filename"] == os.fsdecode(b"caf\xe9.txt")
    assert hit["uri"] == "file:///d/caf%E9.txt"
    # a copy under a second odd name, then the first goes: the display path follows the live one
    other = os.fsdecode(b"/d/\xe9t\xe9.txt")
    assert rag.link_path("m1", other, "x") == []
    assert rag.remove_path(LATIN) == ("m1", [])
    assert rag.hits(ids)[ids[0]]["source_file"] == other
    assert rag.remove_path(other) == ("m1", ids) and rag.chunk_count() == 0


def test_api_json_shows_odd_names_as_valid_unicode():
    hit = shown_hit({"source_file": LATIN, "filename": "caf\udce9.txt", "source_rel_path": None, "uri": "u"})
    assert hit["source_file"] == "/d/caf\\xe9.txt"
    text = dumps({"path": ODD_DIR, "nested": [{"k": LATIN}], "ok": "é"})
    text.encode("utf-8")
    assert json.loads(text) == {"path": "/d/Archiv\\xe4\n", "nested": [{"k": "/d/caf\\xe9.txt"}], "ok": "é"}
