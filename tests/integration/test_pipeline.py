"""The per-file pipeline on real folders, on both storage backends (the data directory's SQLite
files and a real PostgreSQL with pgvector): dedup, supersede, bad input, resume. What the stores
hold is read back through tests/system/state_probe.py, the same question on each backend."""

import signal
import subprocess
import sys
import textwrap
import time

import pytest

from ragweedd.config import load_config
from ragweedd.embed.hashing import HashEmbedder
from ragweedd.ingest.pipeline import Pipeline
from ragweedd.paths import Paths
from ragweedd.query.hybrid import open_collections
from ragweedd.store.backends import open_data_dir
from ragweedd.store.types import Terms
from tests.query_support import dense_search, keyword_search
from tests.system.state_probe import PgProbe, SqliteProbe

SOURCE = "laptop"  # the machine name the PostgreSQL rows are written under
# A keyword expression as the query planner writes it (quoted words): the only form the PostgreSQL
# store takes, where FTS5 would also take a bare word.
ZANZIBAR = Terms(("zanzibar",))


class CountingEmbedder(HashEmbedder):
    def __init__(self, dim=64):
        super().__init__(dim)
        self.texts = []

    def embed_batch(self, texts):
        self.texts.extend(texts)
        return super().embed_batch(texts)


@pytest.fixture
def make_pipe(tmp_path, store):
    """``make_pipe(cfg_text, embedder)``: a Pipeline writing to this test's backend, closed after it."""
    from ragweedd.store.postgres.backend import PgBackend

    opened = []

    def make(text, emb):
        cfg = load_config(text=text, env={})
        paths = Paths.resolve(str(tmp_path / "data"), str(tmp_path / "state"), str(tmp_path / "cache"))
        stores = PgBackend(store, source=SOURCE) if store else open_data_dir(paths)
        pipe = Pipeline(cfg, paths, emb, stores=stores)
        opened.append(pipe)
        return pipe

    yield make
    for pipe in opened:
        pipe.close()
        pipe.stores.close()


@pytest.fixture
def probe(tmp_path, store):
    """What the test's backend holds, read straight from it."""
    return PgProbe(store, SOURCE) if store else SqliteProbe(tmp_path / "data")


def searchable(pipe):
    """The collection ``c`` opened for search the way the pipeline's backend is."""
    return open_collections(pipe.stores, ["c"])


@pytest.fixture
def env(tmp_path, make_pipe):
    emb = CountingEmbedder()
    pipe = make_pipe("chunk_size = 64\n[embed]\nmodel = 'hash:64'\n", emb)
    docs = tmp_path / "docs"
    docs.mkdir()
    return pipe, emb, docs, pipe.paths


def _paragraphs(n, tag="p"):
    return "\n\n".join(f"Paragraph {tag}{i} talks about topic{i} with several words in it." * 3 for i in range(n))


def test_same_bytes_under_two_paths_are_embedded_once_and_both_recorded(env):
    pipe, emb, docs, paths = env
    a = docs / "a.md"
    a.write_text(_paragraphs(5))
    (docs / "sub").mkdir()
    b = docs / "sub" / "b.md"
    b.write_bytes(a.read_bytes())
    out_a = pipe.ingest_file("c", a, docs)
    n = len(emb.texts)
    out_b = pipe.ingest_file("c", b, docs)
    assert out_a.status == "indexed" and out_b.status == "linked"
    assert len(emb.texts) == n and out_b.embedded == 0
    assert sorted(pipe.rag("c").paths_of(out_a.md5)) == sorted([str(a), str(b)])
    assert sorted(pipe.db.live_paths_for_md5("c", out_a.md5)) == sorted([str(a), str(b)])
    # unchanged on a second pass: nothing extracted, nothing embedded
    assert pipe.ingest_file("c", a, docs).status == "unchanged" and len(emb.texts) == n


def test_modify_reembeds_only_changed_chunks_and_old_text_leaves(env, probe):
    pipe, emb, docs, _ = env
    f = docs / "notes.md"
    import random

    rng = random.Random(7)
    words = "river stone lantern copper meadow signal harbor velvet quiet orbit timber saffron".split()

    def sentence(i):
        return f"Subject{i} " + " ".join(rng.choice(words) for _ in range(rng.randint(4, 18))) + "."

    paras = [" ".join(sentence(i) for _ in range(rng.randint(3, 7))) for i in range(30)]
    f.write_text("\n\n".join(paras))
    first = pipe.ingest_file("c", f, docs)
    old_texts = set(pipe.rag("c").hits(list(range(1, first.chunks + 1)))[i]["text"] for i in range(1, first.chunks + 1))
    assert first.chunks >= 20
    paras[15] = "A rewritten paragraph about zeppelins and airships. " * 3
    f.write_text("\n\n".join(paras))
    second = pipe.ingest_file("c", f, docs)
    assert second.status == "indexed"
    ids = pipe.rag("c").chunk_ids_of(second.md5)
    new_texts = {h["text"] for h in pipe.rag("c").hits(ids).values()}
    # exactly the chunk texts that did not exist before are embedded, and they are few
    assert second.embedded == len(new_texts - old_texts)
    assert 0 < second.embedded < second.chunks / 3, (second.embedded, second.chunks)
    rags = searchable(pipe)
    assert keyword_search(rags, "subject15", 10) == []
    assert [h["source_file"] for h in keyword_search(rags, "zeppelins", 10)][:1] == [str(f)]
    rag = pipe.rag("c")
    assert rag.chunk_count() == second.chunks  # old version's chunks are gone
    assert probe.chunks("c") == len(probe.keyword_texts("c")) == second.chunks


def test_delete_removes_unless_a_copy_holds_the_bytes(env):
    pipe, emb, docs, _ = env
    a, b = docs / "a.txt", docs / "b.txt"
    a.write_text("Unique marmalade recipe with bitter Seville oranges. " * 4)
    b.write_bytes(a.read_bytes())
    pipe.ingest_file("c", a, docs)
    pipe.ingest_file("c", b, docs)
    a.unlink()
    assert pipe.remove_file("c", str(a)) == []
    rags = searchable(pipe)
    assert [h["source_file"] for h in keyword_search(rags, "marmalade", 5)] == [str(b)]
    b.unlink()
    assert pipe.remove_file("c", str(b)) != []
    assert keyword_search(rags, "marmalade", 5) == []
    assert dense_search(rags, HashEmbedder(64), "marmalade Seville oranges", 5) == []


def _upgraded(real):
    """What a better extractor reads in the same bytes (same length: the regions stay valid)."""
    def extract(path, settings):
        doc = real(path, settings)
        doc.text = doc.text.replace("Quince", "Medlar")
        return doc
    return extract


def test_force_extracts_content_already_indexed_again_for_every_path_that_holds_it(env, probe):
    pipe, emb, docs, _ = env
    a, b = docs / "a.txt", docs / "sub" / "b.txt"
    b.parent.mkdir()
    a.write_text("Quince jelly sets with the pectin of the fruit itself. " * 4)
    b.write_bytes(a.read_bytes())
    first = pipe.ingest_file("c", a, docs)
    assert pipe.ingest_file("c", b, docs).status == "linked"
    real, pipe.extract = pipe.extract, _upgraded(pipe.extract)
    # without --force the same content is neither read nor linked again
    assert pipe.ingest_file("c", a, docs).status == "unchanged"
    out = pipe.ingest_file("c", a, docs, force=True)
    assert out.status == "indexed" and out.md5 == first.md5
    rags = searchable(pipe)
    assert keyword_search(rags, '"quince"', 10) == []
    assert {h["source_file"] for h in keyword_search(rags, '"medlar"', 10)} <= {str(a), str(b)}
    assert sorted(pipe.rag("c").paths_of(out.md5)) == sorted([str(a), str(b)])
    assert probe.chunks("c") == len(probe.keyword_texts("c")) == out.chunks  # the old chunks are gone
    rows = probe.live_rows("c")
    assert {rows[p]["extract_status"] for p in (str(a), str(b))} == {"done"}
    pipe.extract = real
    assert pipe.ingest_file("c", b, docs).status == "unchanged"


def test_a_forced_publish_that_fails_leaves_the_other_paths_to_be_read_again(env, probe, monkeypatch):
    pipe, emb, docs, _ = env
    a, b = docs / "a.txt", docs / "b.txt"
    a.write_text("Quince jelly sets with the pectin of the fruit itself. " * 4)
    b.write_bytes(a.read_bytes())
    pipe.ingest_file("c", a, docs)
    pipe.ingest_file("c", b, docs)
    pipe.extract = _upgraded(pipe.extract)
    rag = pipe.rag("c")

    def crash(**kw):
        raise OSError("the disk went away")

    monkeypatch.setattr(rag, "publish", crash)
    with pytest.raises(OSError):
        pipe.ingest_file("c", a, docs, force=True)
    monkeypatch.undo()
    rows = probe.live_rows("c")
    assert rows[str(b)]["extract_status"] == "extracting"  # not "done" over content that left
    assert pipe.ingest_file("c", b, docs).status == "indexed"  # read again, as the next start does
    assert [h["source_file"] for h in keyword_search(searchable(pipe), '"medlar"', 10)] == [str(b)]


@pytest.mark.parametrize("name,data,status,reason", [
    ("empty.txt", b"", "skipped", "empty"),
    ("binary.txt", bytes(range(256)) * 40, "skipped", "binary"),
    ("unknown.xyz", b"\x00\x01binary", "skipped", ""),
])
def test_bad_input_ends_as_a_clear_status_never_an_empty_success(env, name, data, status, reason):
    pipe, _, docs, _ = env
    f = docs / name
    f.write_bytes(data)
    out = pipe.ingest_file("c", f, docs)
    assert out.status == status and out.chunks == 0
    assert reason in (out.error or "").lower()
    row = pipe.db.live_file("c", str(f))
    assert row["extract_status"] == status and row["error"]


def test_invalid_utf8_text_is_decoded_with_replacement(env):
    pipe, _, docs, _ = env
    f = docs / "latin1.txt"
    f.write_bytes("Café crème brûlée recipe with vanilla and caramelised sugar.\n".encode("latin-1") * 5)
    out = pipe.ingest_file("c", f, docs)
    assert out.status == "indexed" and out.chunks >= 1


def test_file_that_turns_unreadable_loses_its_old_chunks(env):
    pipe, _, docs, _ = env
    f = docs / "n.txt"
    f.write_text("Quokkas live on Rottnest Island near Perth. " * 5)
    pipe.ingest_file("c", f, docs)
    f.write_bytes(b"")
    assert pipe.ingest_file("c", f, docs).status == "skipped"
    assert keyword_search(searchable(pipe), "quokkas", 5) == []


RESUME_SCRIPT = textwrap.dedent("""
    import sys, time
    from ragweedd.config import load_config
    from ragweedd.embed.hashing import HashEmbedder
    from ragweedd.ingest.pipeline import Pipeline
    from ragweedd.paths import Paths

    class Logged(HashEmbedder):
        def embed_batch(self, texts):
            with open(sys.argv[3], "a") as log:
                for t in texts:
                    log.write(t[:40].replace("\\n", " ") + "\\n")
            time.sleep(float(sys.argv[4]))
            return super().embed_batch(texts)

    cfg = load_config(text="chunk_size = 32\\nchunk_overlap_pct = 0\\n[embed]\\nbatch_size = 4\\n", env={})
    root = sys.argv[1]
    paths = Paths.resolve(root + "/data", root + "/state", root + "/cache")
    if sys.argv[5]:  # a PostgreSQL database to write to
        from ragweedd.store.postgres.backend import PgBackend
        stores = PgBackend(sys.argv[5], source=sys.argv[6])
    else:
        from ragweedd.store.backends import open_data_dir
        stores = open_data_dir(paths)
    out = Pipeline(cfg, paths, Logged(64), stores=stores).ingest_file("c", sys.argv[2], root)
    print(out.status, out.chunks, out.embedded)
""")


def test_embedding_resumes_after_kill_minus_9(tmp_path, store, probe):
    big = tmp_path / "big.txt"
    big.write_text("\n".join(f"Line {i} mentions the unique token w{i} and nothing else of note." for i in range(400)))
    script = tmp_path / "ingest.py"
    script.write_text(RESUME_SCRIPT)
    log = tmp_path / "embed.log"
    backend = [store or "", SOURCE]
    proc = subprocess.Popen([sys.executable, str(script), str(tmp_path), str(big), str(log), "0.05", *backend])
    deadline = time.time() + 60
    while time.time() < deadline:
        if log.exists() and len(log.read_text().splitlines()) >= 24:
            break
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done_before = len(log.read_text().splitlines())
    assert done_before >= 24
    r = subprocess.run([sys.executable, str(script), str(tmp_path), str(big), str(log), "0", *backend],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    status, chunks, embedded = r.stdout.strip().splitlines()[-1].split()
    # Chunks are published before their vectors: killed after that, the file is unchanged and only
    # its missing vectors are computed; killed before, it is indexed again.
    assert status in ("indexed", "unchanged"), status
    n = probe.chunks("c")
    assert probe.vectors("c") == n and probe.pending("c") == 0
    adds = probe.change_ids("c", "add")
    assert (len(adds), len(set(adds))) == (n, n)
    chunks = str(n)
    total = len(log.read_text().splitlines())
    # Every chunk text embedded once, except at most the one batch in flight when killed.
    assert int(chunks) <= total <= int(chunks) + 4, (chunks, total)
    assert int(embedded) <= int(chunks) - done_before + 4


def test_context_line_is_embedded_and_keyword_indexed_but_not_stored_as_text(env, probe):
    """A chunk is embedded and keyword-indexed with its document's name and section path; its
    stored and cited text is the chunk alone."""
    from ragweedd.chunk.chunker import text_hash
    from ragweedd.chunk.context import embed_input

    pipe, emb, docs, paths = env
    f = docs / "Zanzibar_Spice_Trip.md"
    f.write_text("# Packing\n\nBring light shirts and a hat for the afternoons.\n")
    out = pipe.ingest_file("c", f, docs)
    assert out.status == "indexed" and out.chunks == 1
    rag = pipe.rag("c")
    [hit] = rag.hits(rag.chunk_ids_of(out.md5)).values()
    assert hit["text"] == "# Packing\n\nBring light shirts and a hat for the afternoons."
    [ctx] = probe.contexts("c")
    assert ctx == "Zanzibar Spice Trip · Packing"
    # what the embedder read: the context line, then the text
    assert emb.texts == [embed_input(hit["text"], ctx)]
    assert pipe.db.cached_vectors(emb.id, [text_hash(embed_input(hit["text"], ctx))])
    # a word only in the file name finds the chunk by keyword; the keyword text column holds the chunk only
    assert [cid for cid, _ in rag.keyword_match(ZANZIBAR, 10)] == rag.chunk_ids_of(out.md5)
    assert probe.keyword_texts("c") == [hit["text"]]
    assert rag.embedder()[0].endswith("+ctx1")


def test_without_the_context_line_only_the_text_is_embedded(tmp_path, make_pipe, probe):
    emb = CountingEmbedder()
    pipe = make_pipe("chunk_size = 64\nchunk_context = false\n[embed]\nmodel = 'hash:64'\n", emb)
    f = tmp_path / "Zanzibar_Spice_Trip.md"
    f.write_text("# Packing\n\nBring light shirts.\n")
    out = pipe.ingest_file("c", f, tmp_path)
    assert emb.texts == ["# Packing\n\nBring light shirts."]
    assert pipe.rag("c").keyword_match(ZANZIBAR, 10) == []
    assert pipe.rag("c").embedder()[0] == emb.id and out.status == "indexed"
    assert probe.contexts("c") == []
