"""Issue 12 item 4, the scheduled integrity job: on damaged databases it reports (never crashes),
names the file, and hints at a step that repairs (a restart runs ragweedd/store/sqlite/repair.py)."""

from __future__ import annotations

import sqlite3

from ragweedd.config import load_config
from ragweedd.paths import Paths
from ragweedd.store.backends import open_data_dir
from ragweedd.store.sqlite.integrity_check import integrity_check
from ragweedd.store.sqlite.repair import check_and_repair


def _setup(tmp_path):
    from ragweedd.embed.hashing import HashEmbedder
    from ragweedd.ingest.pipeline import Pipeline

    p = tmp_path / "cfg.toml"
    p.write_text(f'data_dir = "{tmp_path / "data"}"\nstate_dir = "{tmp_path / "state"}"\n'
                 f'cache_dir = "{tmp_path / "cache"}"\n')
    cfg = load_config(p)
    paths = Paths.from_config(cfg).ensure()
    pipe = Pipeline(cfg, paths, HashEmbedder(32), stores=open_data_dir(paths))
    root = tmp_path / "docs"
    root.mkdir()
    for i in range(30):
        (root / f"{i}.txt").write_text(" ".join(f"word{i}x{j} about herons and mills" for j in range(300)))
        pipe.ingest_file("c", root / f"{i}.txt", root)
    pipe.close()
    for db in (paths.ingest_db, paths.rag_db("c")):
        c = sqlite3.connect(db)
        c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        c.close()
    return paths, root


def _flip(db, first=2, count=4):
    with open(db, "r+b") as f:
        for n in range(first, first + count):
            f.seek(n * 4096)
            f.write(bytes((n * 31 + k) % 253 for k in range(4096)))


def test_integrity_job_reports_damaged_rag_db_with_a_repairing_hint(tmp_path):
    paths, _ = _setup(tmp_path)
    assert integrity_check(paths, ["c"])["ok"]
    _flip(paths.rag_db("c"))
    res = integrity_check(paths, ["c"])  # must not raise
    assert not res["ok"] and res["collections"]["c"]["damaged"]
    problems = res["collections"]["c"]["problems"]
    assert res["repair"], "the daemon repairs it live"
    assert problems and all(str(paths.rag_db("c")) in p and "rebuilds it from your files" in p for p in problems), \
        problems
    # ... and the step it names repairs it
    check_and_repair(paths, ["c"])
    assert integrity_check(paths, ["c"])["collections"].get("c") is None  # rebuilt by the scan from the files


def test_integrity_job_reports_damaged_ingest_db(tmp_path):
    paths, _ = _setup(tmp_path)
    _flip(paths.ingest_db)
    res = integrity_check(paths, ["c"])
    assert not res["ok"]
    assert res["repair"] and res["ingest_db"]
    assert all(str(paths.ingest_db) in p and "rebuilds it from your files" in p for p in res["ingest_db"])
    check_and_repair(paths, ["c"])
    assert integrity_check(paths, ["c"])["ok"]


def test_integrity_job_reports_changed_chunk_text_and_a_missing_rag_db(tmp_path):
    paths, _ = _setup(tmp_path)
    c = sqlite3.connect(paths.rag_db("c"))
    c.execute("UPDATE embedding_metadata SET string_value = string_value || 'x'"
              " WHERE key = 'chroma:document' AND id = 3")
    c.commit()
    c.close()
    res = integrity_check(paths, ["c"])
    assert res["repair"]
    assert any("no longer matches" in p and "re-ingests from disk" in p for p in res["collections"]["c"]["problems"])
    for p in paths.rag_db("c").parent.glob("rag.sqlite3*"):
        p.rename(tmp_path / p.name)
    res = integrity_check(paths, ["c"])
    assert not res["ok"] and res["repair"] and "is missing while 30 files" in res["collections"]["c"]["problems"][0]


def test_integrity_job_finds_a_damaged_history_and_the_repair_keeps_what_it_can(tmp_path):
    from ragweedd.store.sqlite.history_db import HistoryDB

    paths, _ = _setup(tmp_path)
    h = HistoryDB(paths.history_db)
    for i in range(200):
        h.insert(f"h{i:03d}", "search", f"query {i}", float(i), '{"results": "' + "x" * 2000 + '"}')
    h.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    h.close()
    assert integrity_check(paths, ["c"])["ok"]
    _flip(paths.history_db, first=paths.history_db.stat().st_size // 4096 // 2, count=2)
    res = integrity_check(paths, ["c"])
    assert not res["ok"] and res["repair"] and str(paths.history_db) in res["history"][0]
    out = check_and_repair(paths, ["c"])
    assert out["history"] and "entries that could still be read" in out["history"][0]
    h = HistoryDB(paths.history_db)
    try:
        kept = h.conn.execute("SELECT count(*) FROM history").fetchone()[0]
    finally:
        h.close()
    assert 190 <= kept < 200, kept  # two bad pages hold a few entries; everything else is kept
    assert integrity_check(paths, ["c"])["ok"]


def test_a_chunk_whose_text_fails_its_hash_is_never_read_out_and_asks_for_the_check_once(tmp_path):
    from ragweedd.store.served_rot import ServedRot
    from ragweedd.store.sqlite.backend import SqliteBackend

    paths, root = _setup(tmp_path)
    stores = SqliteBackend(paths)
    asked: list[int] = []
    seen = ServedRot(lambda: asked.append(1))
    stores.on_rot = seen
    rag = stores.open_rag("c", readonly=True)
    try:
        ids = [r[0] for r in rag.conn.execute("SELECT id FROM embeddings ORDER BY id")]
        target = ids[3]
        assert set(rag.hits(ids)) == set(ids) and not asked
        with sqlite3.connect(paths.rag_db("c")) as c:  # the stored text changes, its hash does not
            c.execute("UPDATE embedding_metadata SET string_value = 'rotten ' || substr(string_value, 8)"
                      " WHERE id = ? AND key = 'chroma:document'", (target,))
        got = rag.hits(ids)
        assert target not in got and set(got) == set(ids) - {target}
        assert not any(h["text"].startswith("rotten") for h in got.values())
        assert asked == [1], "the integrity check (and so the repair) is asked for at once"
        rag.hits([target])
        assert asked == [1], "the same damage met again within a minute does not ask again"
        problems = seen.problems()
        md5 = rag.conn.execute("SELECT md5 FROM embeddings WHERE id = ?", (target,)).fetchone()[0]
        file = rag.paths_of(md5)[0]
        assert len(problems) == 1 and "collection 'c'" in problems[0] and file in problems[0] and \
            "left out of results" in problems[0], problems
    finally:
        rag.close()
    plain = SqliteBackend(paths).open_rag("c", readonly=True)  # a one-shot search: no daemon to tell
    try:
        assert target not in plain.hits([target, ids[0]]) and ids[0] in plain.hits([ids[0]])
    finally:
        plain.close()
