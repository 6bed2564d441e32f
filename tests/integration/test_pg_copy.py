"""A SQLite data directory copied into PostgreSQL: every collection's documents, chunks, vectors of
every space and paths, the ingest state, embed cache, run-time collections and history arrive, read
back the same through the seam, and a second run copies nothing twice."""

from __future__ import annotations

import numpy as np

from ragweedd.paths import Paths
from ragweedd.store.postgres.backend import PgBackend
from ragweedd.store.postgres.pg_copy import copy_to_postgres
from ragweedd.store.sqlite.backend import SqliteBackend
from ragweedd.store.sqlite.history_db import HistoryDB
from ragweedd.store.types import PRIMARY, Terms


def _vec(*xs):
    v = np.array(xs, dtype=np.float32)
    return (v / np.linalg.norm(v)).astype(np.float32).tobytes()


def _sqlite_dir(tmp_path):
    src = SqliteBackend(Paths(data=tmp_path / "d", state=tmp_path / "s", cache=tmp_path / "c"))
    rag = src.open_rag("notes")
    odd = b"/home/me/caf\xe9.txt".decode("utf-8", "surrogateescape")
    chunks = [{"chunk_idx": 0, "text": "lighthouse keepers log the weather", "context": "Keeper's log",
               "meta": {"char_start": 0, "char_end": 30, "pages": [3, 4], "line_start": 1, "line_end": 2}},
              {"chunk_idx": 1, "text": "the lamp is lit at dusk", "meta": {"char_start": 30, "char_end": 52}}]
    rag.publish(md5="a" * 32, source_file="/home/me/log.txt", rel_path="log.txt", kind="text", extractor="text",
                ocr_type=None, title="Log", size_bytes=52, chunks=chunks,
                vectors={PRIMARY: [_vec(1, 0, 0, 0), _vec(0, 1, 0, 0)], "384": [_vec(1, 1), _vec(1, -1)]},
                embedders={PRIMARY: ("hash:4", 4), "384": ("pass:2", 2)})
    rag.link_path("a" * 32, odd, "café.txt")
    rag.publish(md5="b" * 32, source_file="/home/me/tea.txt", rel_path="tea.txt", kind="text", extractor="text",
                ocr_type=None, title=None, size_bytes=9, chunks=[{"chunk_idx": 0, "text": "green tea", "meta": {}}],
                vectors={PRIMARY: [None]}, embedders={PRIMARY: ("hash:4", 4)})  # still waiting for its vector
    rag.close()
    ing = src.open_ingest()
    ing.set_file("notes", "/home/me/log.txt", md5="a" * 32, size=52, mtime_ns=5, inode=7, status="done", chunks=2,
                 root="/home/me")
    ing.store_vectors("hash:4", 4, [("t1", _vec(1, 0, 0, 0))])
    ing.save_collection("notes", ["/home/me"], ["*.tmp"], "my notes")
    ing.close()
    h = HistoryDB(src.paths.history_db)
    h.insert("h1", "search", "lighthouse", 100.0, '{"q": 1}')
    h.close()
    return src, odd


def test_a_sqlite_directory_arrives_whole_and_a_second_run_copies_nothing(tmp_path, pg_dsn):
    src, odd = _sqlite_dir(tmp_path)
    dst = PgBackend(pg_dsn, source="laptop")
    report = copy_to_postgres(src, dst)
    assert report.collections["notes"] == {"documents": 2, "copied": 2, "paths_linked": 1, "chunks": 3}
    assert (report.files, report.embed_cache, report.history) == (1, 1, 1)

    a, b = src.open_rag("notes", readonly=True), dst.open_rag("notes")
    try:
        assert sorted(b.paths_of("a" * 32)) == sorted(a.paths_of("a" * 32)) == sorted(["/home/me/log.txt", odd])
        ids_a, ids_b = a.chunk_ids_of("a" * 32), b.chunk_ids_of("a" * 32)
        ha, hb = a.hits(ids_a), b.hits(ids_b)
        for ia, ib in zip(ids_a, ids_b):
            for k in ("text", "source_file", "pages", "lines", "span", "uri", "chunk_idx", "doc_id"):
                assert ha[ia][k] == hb[ib][k], k
        assert list(a.vectors_for(ids_a).values()) == list(b.vectors_for(ids_b).values())
        assert list(a.vectors_for(ids_a, "384").values()) == list(b.vectors_for(ids_b, "384").values())
        assert b.embedder() == ("hash:4", 4) and b.embedder("384") == ("pass:2", 2)
        assert b.pending_summary() == (1, 1) and b.change_counts_after(0) == (2, 0)
        assert [c for c, _ in b.keyword_match(Terms(("keeper",)), 5)] == ids_b[:1]  # the context line is indexed too
    finally:
        a.close()
        b.close()
    ing = dst.open_ingest()
    try:
        row = ing.live_file("notes", "/home/me/log.txt")
        assert (row["md5"], row["extract_status"], row["chunks"], row["root"]) == ("a" * 32, "done", 2, "/home/me")
        assert ing.cached_vectors("hash:4", ["t1"]) == {"t1": _vec(1, 0, 0, 0)}
        assert ing.run_time_collections() == [("notes", ["/home/me"], ["*.tmp"], "my notes")]
    finally:
        ing.close()
    hist = dst.open_history()
    assert hist.get("h1")["body_json"] == '{"q": 1}'
    hist.close()
    other = PgBackend(pg_dsn, source="desktop")  # the copied history is the laptop's alone
    try:
        other_hist = other.open_history()
        assert other_hist.get("h1") is None and other_hist.count() == 0
        other_hist.close()
    finally:
        other.close()

    again = copy_to_postgres(src, dst)
    assert again.collections["notes"]["copied"] == 0 and again.collections["notes"]["paths_linked"] == 0
    assert (again.files, again.history) == (0, 0)
    b = dst.open_rag("notes")
    assert b.chunk_count() == 3 and b.change_counts_after(0) == (2, 0)
    b.close()
    dst.close()


def test_ragweedd_migrate_command(tmp_path, pg_dsn, capsys):
    import json

    from ragweedd.cli.command import main

    src, _ = _sqlite_dir(tmp_path)
    cfg = tmp_path / "config.toml"
    cfg.write_text(f'data_dir = "{src.paths.data}"\nstate_dir = "{src.paths.state}"\ncache_dir = "{tmp_path / "c"}"\n'
                   'source_name = "laptop"\nlog_level = "warning"\n')
    assert main(["--config", str(cfg), "migrate", "--to", pg_dsn, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert doc["source"] == "laptop" and doc["collections"]["notes"]["copied"] == 2 and doc["history"] == 1
    assert PgBackend(pg_dsn).indexed_collections() == ["notes"]
    assert main(["--config", str(cfg), "migrate", "--to", pg_dsn]) == 0
    assert "0 of 2 documents copied" in capsys.readouterr().out

    assert main(["--config", str(cfg), "migrate", "--to", "mysql://rw:s3cret@db/x"]) == 2
    err = capsys.readouterr().err
    assert "not a PostgreSQL URI" in err and "s3cret" not in err
    unreachable = "postgresql://rw:s3cret@127.0.0.1:1/nothing?connect_timeout=2"
    assert main(["--config", str(cfg), "migrate", "--to", unreachable]) != 0
    err = capsys.readouterr().err
    assert "cannot connect to PostgreSQL" in err and "s3cret" not in err and "rw:***@127.0.0.1:1" in err
    assert main(["--config", str(cfg), "migrate", "--to", pg_dsn, "--source-name", "lap\ntop"]) == 2
    assert "--source-name 'lap\\ntop'" in capsys.readouterr().err
