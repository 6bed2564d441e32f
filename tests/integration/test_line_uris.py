"""Hits of text files open at their lines: a markdown file (CRLF, BOM) and a text member of a zip go
through the real pipeline (the zip through the sandboxed extractor the daemon uses), and every stored
chunk's ``lines`` and ``uri`` point at the lines of the file on disk that hold its words."""

from __future__ import annotations

import zipfile

import pytest

from ragweedd.config import load_config
from ragweedd.embed.hashing import HashEmbedder
from ragweedd.ingest.pipeline import Pipeline
from ragweedd.ingest.worker import make_extract
from ragweedd.paths import Paths
from ragweedd.query.hybrid import open_collections
from ragweedd.store.backends import open_data_dir
from tests.query_support import keyword_search


@pytest.fixture
def env(tmp_path):
    cfg = load_config(text="chunk_size = 64\n[embed]\nmodel = 'hash:64'\n", env={})
    paths = Paths.resolve(str(tmp_path / "data"), str(tmp_path / "state"), str(tmp_path / "cache"))
    pipe = Pipeline(cfg, paths, HashEmbedder(64), extract=make_extract(cfg), stores=open_data_dir(paths))
    docs = tmp_path / "docs"
    docs.mkdir()
    yield pipe, docs
    pipe.close()


def _notes(n: int) -> str:
    out = ["# Field notes", ""]
    for i in range(n):
        out += [f"## Day {i}", "", f"Observed heron{i} near the reeds at dawn, then marsh{i} birds.",
                f"Water level{i} rose by a hand; the otter{i} stayed hidden.", ""]
    return "\r\n".join(out)


def _hits(pipe, md5: str) -> list[dict]:
    rag = pipe.rag("c")
    ids = rag.chunk_ids_of(md5)
    hits = rag.hits(ids)
    return [hits[i] for i in ids]


def _check(hits: list[dict], lines_on_disk: list[str], uri_prefix: str) -> None:
    assert len(hits) > 5
    for h in hits:
        assert h["lines"] is not None, h
        start, end = h["lines"]
        words = h["text"].split()
        # the chunk may start inside a word (overlap), so its first word is a part of line `start`
        assert words[0] in lines_on_disk[start - 1], (h["lines"], words[0], lines_on_disk[start - 1])
        assert lines_on_disk[end - 1].split()[-1] == words[-1], (h["lines"], words[-1])
        anchor = f"L{start}" if start == end else f"L{start}-L{end}"
        assert h["uri"] == f"{uri_prefix}{anchor}", h["uri"]
    assert any(h["lines"][0] > 20 for h in hits)


def test_markdown_hits_open_their_lines(env):
    pipe, docs = env
    f = docs / "notes.md"
    f.write_bytes(b"\xef\xbb\xbf" + _notes(12).encode())
    out = pipe.ingest_file("c", f, docs)
    assert out.status == "indexed", out
    on_disk = f.read_bytes().decode("utf-8-sig").split("\r\n")  # as an editor numbers them
    _check(_hits(pipe, out.md5), on_disk, f.as_uri() + "#")
    # what the query layer returns carries them too
    found = keyword_search(open_collections(pipe.stores, ["c"]), "heron7", 10)
    assert found and all("heron7" in "\n".join(on_disk[h["lines"][0] - 1:h["lines"][1]]) for h in found)


def test_text_member_of_a_zip_opens_its_lines_in_the_member(env):
    pipe, docs = env
    z = docs / "trip.zip"
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr("page.html", "<html><body><p>Herons nest in colonies.</p></body></html>")
        zf.writestr("readme.txt", "A short note before the field notes.\n")
        zf.writestr("log/notes.md", _notes(12))
    out = pipe.ingest_file("c", z, docs)
    assert out.status == "indexed", out
    hits = _hits(pipe, out.md5)
    member = [h for h in hits if h["member"] == "log/notes.md" and "File:" not in h["text"]]  # inside the member
    _check(member, _notes(12).split("\r\n"), z.as_uri() + "#member=log/notes.md&")
    html = [h for h in hits if "Herons nest" in h["text"]]
    # a chunk that starts in the html member (transformed text) has no lines, whatever it runs into
    assert html and all(h["lines"] is None and "&L" not in h["uri"] for h in html)
