"""Issue 12 item 6: an empty file or a type no extractor reads is skipped from its stat alone.

Such a file costs a row, not a pipeline run: it is never read, copied or handed to the extractor,
and nothing in the index changes (so the worker does not wake the index side). A path whose
indexed content becomes empty still loses that content.
"""

from __future__ import annotations

import pytest

from ragweedd.config import load_config
from ragweedd.embed.hashing import HashEmbedder
from ragweedd.files.skip_rules import EMPTY_MD5
from ragweedd.ingest.pipeline import Pipeline, in_process_extract
from ragweedd.paths import Paths
from ragweedd.store.backends import open_data_dir


@pytest.fixture
def env(tmp_path, store):
    """A pipeline on each backend in turn (``store``: None for the SQLite files, else PostgreSQL)."""
    from ragweedd.store.postgres.backend import PgBackend

    cfg = load_config(text="chunk_size = 64\n[embed]\nmodel = 'hash:64'\n", env={})
    paths = Paths.resolve(str(tmp_path / "data"), str(tmp_path / "state"), str(tmp_path / "cache"))
    calls: list[str] = []

    def extract(path, settings):
        calls.append(str(path))
        return in_process_extract(path, settings)

    stores = PgBackend(store, source="laptop") if store else open_data_dir(paths)
    pipe = Pipeline(cfg, paths, HashEmbedder(64), extract=extract, stores=stores)
    docs = tmp_path / "docs"
    docs.mkdir()
    yield pipe, calls, docs
    pipe.close()
    if stores is not None:
        stores.close()


def test_empty_and_unsupported_files_never_reach_the_extractor(env):
    pipe, calls, docs = env
    empty = docs / "empty.txt"
    empty.touch()
    blob = docs / "image.bin"
    blob.write_bytes(b"\x00\x01\x02 some bytes no extractor reads" * 100)
    noext = docs / "LICENSE_NOT_TEXT"
    noext.write_bytes(b"abc")
    for p in (empty, blob, noext):
        out = pipe.ingest_file("c", p, docs)
        assert out.status == "skipped", out
        assert out.index_changed is False
    assert calls == []
    rows = {p: pipe.db.live_file("c", str(p)) for p in (empty, blob, noext)}
    assert rows[empty]["extract_status"] == "skipped" and rows[empty]["md5"] == EMPTY_MD5
    assert "empty file" in rows[empty]["error"]
    assert rows[blob]["extract_status"] == "skipped" and "unsupported file type '.bin'" in rows[blob]["error"]
    assert rows[blob]["size_bytes"] == blob.stat().st_size
    # unchanged on a second look: the stat decides, still no extraction
    assert pipe.ingest_file("c", empty, docs).status == "unchanged"
    assert calls == []


def test_indexed_file_that_becomes_empty_leaves_the_index(env):
    pipe, calls, docs = env
    f = docs / "note.md"
    f.write_text("Zeppelins drift over the harbour every morning, said the note.\n" * 20)
    first = pipe.ingest_file("c", f, docs)
    assert first.status == "indexed" and pipe.rag("c").paths_of(first.md5) == [str(f)]
    f.write_bytes(b"")
    out = pipe.ingest_file("c", f, docs)
    assert out.status == "skipped" and out.index_changed is True
    assert pipe.rag("c").paths_of(first.md5) == []
    assert len(calls) == 1  # only the first, non-empty version was extracted
