"""Hybrid search end to end on real collections (real pipeline, SQLite, FTS5, WordNet files), the
one-shot CLI, and the keyword index rebuilt while searches run."""

import json
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from ragweedd.config import load_config  # noqa: E402
from ragweedd.embed.hashing import HashEmbedder  # noqa: E402
from ragweedd.errors import NotFoundError, RequestError  # noqa: E402
from ragweedd.ingest.pipeline import Pipeline  # noqa: E402
from ragweedd.paths import Paths  # noqa: E402
from ragweedd.query.filters import Filters  # noqa: E402
from ragweedd.store.backends import open_data_dir
from tests.query_support import one_shot_search, open_searcher, require_wordnet  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]

DOCS = {
    "papers": {
        "mito.txt": "Mitochondria produce ATP through oxidative phosphorylation in the inner membrane.",
        "heart.md": "# Cardiology\n\nA heart attack damages the cardiac muscle when blood flow stops.",
        "notes/zurich.txt": "The café in Zürich serves espresso to researchers every morning.",
        "copy_a.txt": "Ribosomes translate messenger RNA into protein chains.",
        "copy_b.txt": "Ribosomes translate messenger RNA into protein chains.",
    },
    "mail": {
        "m1.txt": "Meeting about the ATP synthase grant moved to Thursday.",
        "m2.txt": "Lunch order: espresso, croissant and orange juice.",
    },
}


def make_cfg(tmp_path, extra=""):
    text = (f'data_dir = "{tmp_path}/data"\nstate_dir = "{tmp_path}/state"\ncache_dir = "{tmp_path}/cache"\n'
            f"chunk_size = 64\n{extra}\n[embed]\nmodel = 'hash:64'\n")
    (tmp_path / "ragweedd.toml").write_text(text)
    return load_config(text=text, env={})


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hybrid")
    # These tests pin the design's additive boost; RRF (the measured default) has its own test.
    cfg = make_cfg(tmp, 'fusion = "boost"')
    paths = Paths.from_config(cfg).ensure()
    emb = HashEmbedder(64)
    pipe = Pipeline(cfg, paths, emb, stores=open_data_dir(paths))
    for coll, files in DOCS.items():
        root = tmp / "src" / coll
        for rel, text in files.items():
            p = root / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text, encoding="utf-8")
            assert pipe.ingest_file(coll, p, root).status in ("indexed", "linked")
    pipe.close()
    return tmp, cfg, paths, emb


def test_hybrid_merges_collections_on_one_scale(world):
    tmp, cfg, paths, emb = world
    res = one_shot_search(cfg, paths, emb, "ATP espresso", top_k=10)
    hits = res["results"]
    assert {h["collection"] for h in hits} == {"papers", "mail"}
    for h in hits:
        assert h["score"] == pytest.approx(h["sim"] + (cfg.fts_weight if h["fts"] else 0.0))
    assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)
    assert hits[0]["rel_score"] == 1.0 and hits[-1]["rel_score"] == 0.0
    assert all(h["annotate"] for h in hits)  # pre_annotate_keep = 100
    meta = res["retrieval_meta"]
    assert set(meta["tier"]) == {"papers", "mail"}
    assert {"embed", "vector", "fts", "merge", "total"} <= set(meta["timings_ms"])
    words = {w["word"]: w for w in meta["fts"]["papers"]["words"]}
    assert set(words) == {"atp", "espresso"} and words["atp"]["df"] == 1
    assert meta["synonyms"]["enabled"] in (True, False)


def test_keyword_only_chunk_gets_similarity_from_its_stored_vector(world, tmp_path):
    _, cfg, paths, emb = world
    cfg1 = load_config(text=f'data_dir="{paths.data}"\nstate_dir="{paths.state}"\ncache_dir="{paths.cache}"\n'
                            "top_k = 1\nfusion = 'boost'\n[embed]\nmodel='hash:64'\n", env={})
    with open_searcher(cfg1, paths, emb, collections=["papers"]) as s:
        res = s.search("ribosomes translate messenger protein cardiac", limit=10)
    hits = res["results"]
    kw_only = [h for h in hits if h["fts"] and h["dense_rank"] is None]
    assert kw_only, hits
    from ragweedd.embed.long import embed_texts
    from ragweedd.store.sqlite.rag_db import RagDB

    q = embed_texts(emb, ["ribosomes translate messenger protein cardiac"])[0]
    rag = RagDB(paths.rag_db("papers"), "papers")
    for h in kw_only:
        v = np.frombuffer(rag.vectors_for([h["embedding_id"]])[h["embedding_id"]], dtype=np.float32)
        assert h["sim"] == pytest.approx(float(v @ q), abs=1e-5)
        assert h["score"] == pytest.approx(h["sim"] + cfg1.fts_weight)
    rag.close()
    assert res["retrieval_meta"]["counts"]["dense"] == 1


def test_rrf_fusion_and_modes(world):
    _, cfg, paths, emb = world
    with open_searcher(cfg, paths, emb) as s:
        rrf = s.search("heart attack", fusion="rrf", limit=5)
        assert rrf["retrieval_meta"]["fusion"] == "rrf"
        top = rrf["results"][0]
        assert top["filename"] == "heart.md"
        assert top["score"] == pytest.approx(1 / (cfg.rrf_k + top["dense_rank"]) + 1 / (cfg.rrf_k + top["fts_rank"]))
        dense = s.search("heart attack", mode="dense", limit=5)
        assert dense["retrieval_meta"]["tier"] is None and all(not h["fts"] for h in dense["results"])
        kw = s.search("heart attack", mode="keyword", limit=5)
        assert [h["filename"] for h in kw["results"]] == ["heart.md"]
        assert kw["results"][0]["sim"] is None
        with pytest.raises(RequestError):
            s.search("x", mode="fuzzy")
        with pytest.raises(RequestError):
            s.search("   ")
        with pytest.raises(RequestError):
            s.search("x", limit=0)


def test_copies_are_one_document_and_dedup_holds(world):
    _, cfg, paths, emb = world
    res = one_shot_search(cfg, paths, emb, "ribosomes protein", collections=["papers"], top_k=10)
    texts = [h["text"] for h in res["results"]]
    assert texts.count(DOCS["papers"]["copy_a.txt"]) == 1


def test_filters_path_type_document_collection(world):
    _, cfg, paths, emb = world
    with open_searcher(cfg, paths, emb) as s:
        r = s.search("espresso", filters=Filters.make(path_glob="notes/*"), limit=10)
        assert [h["filename"] for h in r["results"]] == ["zurich.txt"]
        r = s.search("cardiac heart", filters=Filters.make(file_types=["md"]), limit=10)
        assert {h["filename"] for h in r["results"]} == {"heart.md"}
        doc = r["results"][0]["doc_id"]
        r = s.search("espresso ATP", filters=Filters.make(doc_ids=[doc]), limit=10)
        assert {h["doc_id"] for h in r["results"]} == {doc}
        r = s.search("espresso", filters=Filters.make(collections=["mail"]), limit=10)
        assert {h["collection"] for h in r["results"]} == {"mail"}
        r = s.search("espresso", filters=Filters.make(file_types=["pdf"]), limit=10)
        assert r["results"] == []
        with pytest.raises(NotFoundError, match="nope"):
            s.search("espresso", filters=Filters.make(collections=["nope"]))
    with pytest.raises(NotFoundError, match="nope"):
        one_shot_search(cfg, paths, emb, "x", collections=["nope"])


def test_synonyms_reported_and_used(world):
    require_wordnet()
    _, cfg, paths, emb = world
    with open_searcher(cfg, paths, emb, collections=["papers"]) as s:
        assert s.wordnet_status["enabled"]
        # "coffeehouse" is in no document; its first WordNet synset {cafe, coffeehouse, coffee shop,
        # coffee bar} brings "cafe", which matches "café" (diacritics folded) in zurich.txt.
        r = s.search("coffeehouse", mode="keyword", limit=5)
    m = r["retrieval_meta"]["fts"]["papers"]
    assert m["synonym_status"]["enabled"] is True
    assert m["words"][0]["df"] == 0 and m["words"][0]["synonym_budget"] == cfg.synonyms_max_per_word
    assert m["synonyms"] == {"coffeehouse": ["cafe"]}
    assert m["tier"] == 2 and [h["filename"] for h in r["results"]] == ["zurich.txt"]


def test_missing_wordnet_turns_synonyms_off_with_reason(tmp_path, world):
    _, cfg, paths, emb = world
    cfg2 = load_config(text=f'data_dir="{paths.data}"\nstate_dir="{paths.state}"\ncache_dir="{paths.cache}"\n'
                            f'wordnet_dir="{tmp_path}/none"\n[embed]\nmodel="hash:64"\n', env={})
    res = one_shot_search(cfg2, paths, emb, "heart attack", top_k=3)
    st = res["retrieval_meta"]["synonyms"]
    assert st["enabled"] is False and "index.noun" in st["reason"] and "wordnet-base" in st["hint"]
    assert res["results"]


def test_idf_cache_persists_in_ingest_db(world):
    _, cfg, paths, emb = world
    one_shot_search(cfg, paths, emb, "mitochondria oxidative the", collections=["papers"], top_k=3)
    import sqlite3

    c = sqlite3.connect(paths.ingest_db)
    rows = dict(c.execute("SELECT term, doc FROM fts_idf_cache WHERE collection='papers'").fetchall())
    c.close()
    # keyed by index term (ragweedd/keyterms.py): Porter stems in an English collection
    assert rows.get("mitochondria") == 1 and rows.get("oxid") == 1
    assert "the" not in rows  # df > 50 % of chunks: not cached
    from ragweedd.store.sqlite.idf_cache_db import META_N

    assert rows[META_N] >= 4


def test_cli_search_json_and_text(world):
    tmp, cfg, paths, emb = world
    conf = tmp / "ragweedd.toml"
    out = subprocess.run([sys.executable, "-m", "ragweedd", "--config", str(conf), "search", "ATP synthase", "--json"],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["results"][0]["filename"] == "m1.txt"
    assert data["retrieval_meta"]["mode"] == "hybrid"
    out = subprocess.run([sys.executable, "-m", "ragweedd", "--config", str(conf), "search", "NEAR(\"x\" *",
                          "-c", "nope"],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode != 0 and "nope" in out.stderr and "Traceback" not in out.stderr


def test_fts_rebuild_is_safe_while_searching(tmp_path):
    """A thread searching during ``fts_rebuild`` (batches of 1,000) always finds every row."""
    from ragweedd.query.idf import IdfCache
    from ragweedd.store.sqlite.connection import connect
    from ragweedd.store.sqlite.fts_reader import FtsReader
    from ragweedd.store.sqlite.rag_db import RagDB, fts_rebuild
    from tests.query_support import fts_search

    rag = RagDB(tmp_path / "rag.sqlite3", "c")
    n = 2500
    vec = np.zeros(8, dtype=np.float32).tobytes()
    for d in range(n // 50):
        chunks = [{"chunk_idx": i, "text": f"common words tok{d * 50 + i} plus filler", "meta": {}} for i in range(50)]
        rag.publish(md5=f"{d:032x}", source_file=f"/d{d}.txt", rel_path=f"d{d}.txt", kind="text", extractor="t",
                    ocr_type=None, title=None, size_bytes=1, chunks=chunks, vectors={"primary": [vec] * 50},
                    embedders={"primary": ("t", 8)})
    cfg = load_config(text="", env={})
    reader = connect(rag.path, readonly=True)
    fts = FtsReader(reader)
    idf = IdfCache("c", fts, n_docs=lambda: n, seq=lambda: 0)
    stop = threading.Event()
    misses, done = [], [0]

    def search():
        import random

        rnd = random.Random(1)
        while not stop.is_set():
            i = rnd.randrange(n)
            hits, meta = fts_search(fts, f"tok{i}", idf, cfg, 5)
            if len(hits) != 1:
                misses.append((i, hits))
            cnt = reader.execute("SELECT count(*) FROM fts_chunks WHERE fts_chunks MATCH '\"common\"'").fetchone()[0]
            if cnt != n:
                misses.append(("common", cnt))
            done[0] += 1

    t = threading.Thread(target=search)
    t.start()
    try:
        for _ in range(2):
            assert fts_rebuild(rag.conn) == n  # default batch of 1,000 rows per transaction
    finally:
        stop.set()
        t.join(30)
    assert done[0] > 5 and misses == []
    reader.close()
    rag.close()


def test_score_fusion_weighs_every_candidate_on_both_legs(tmp_path):
    """zscore (the default): chunks the keyword leg did not return still get the BM25 of the
    query's words, so the fusion sees both legs for every candidate; Rocchio feedback runs and says
    so; without feedback the cosines are the query's own."""
    cfg = make_cfg(tmp_path, "fts_top_k = 1\ntop_k = 20")
    assert cfg.fusion == "zscore"
    paths = Paths.from_config(cfg).ensure()
    emb = HashEmbedder(64)
    root = tmp_path / "src"
    root.mkdir()
    texts = [f"Protein number {i} folds in the cell {'membrane ' * i}." for i in range(6)]
    texts += [f"Lunch order {i}: espresso and juice; the weather was mild." for i in range(12)]
    pipe = Pipeline(cfg, paths, emb, stores=open_data_dir(paths))
    for i, t in enumerate(texts):
        (root / f"d{i}.txt").write_text(t)
        pipe.ingest_file("c", root / f"d{i}.txt", root)
    pipe.close()
    with open_searcher(cfg, paths, emb) as s:
        res = s.search("protein membrane", limit=10)
        meta = res["retrieval_meta"]
        hits = res["results"]
        assert meta["fusion"] == "zscore" and meta["fts_top_k"] == 1
        assert meta["counts"]["keyword"] == 3  # the AND tier's page: at least MIN_TIER_HITS rows
        with_words = [h for h in hits if "Protein" in h["text"]]
        assert len(with_words) == 6 and all(h["bm25"] and h["bm25"] > 0 for h in with_words)
        assert sum(1 for h in with_words if not h["fts"]) == 3  # scored for the fusion, not found by the leg
        assert all(h["bm25"] is None for h in hits if "Protein" not in h["text"])
        assert meta["dense_feedback"]["results"] == 5 and meta["dense_feedback"]["vectors"] == 5
        assert "membrane" in hits[0]["text"] and hits[0]["fts"]
    cfg0 = make_cfg(tmp_path, "fts_top_k = 1\ntop_k = 20\ndense_feedback = 0")
    with open_searcher(cfg0, paths, emb) as s:
        res = s.search("protein membrane", limit=10)
        assert res["retrieval_meta"]["dense_feedback"] is None
        from ragweedd.embed.long import embed_texts

        q = embed_texts(emb, ["protein membrane"])[0]
        from ragweedd.store.sqlite.rag_db import RagDB

        rag = RagDB(paths.rag_db("c"), "c")
        try:
            for h in res["results"]:
                v = np.frombuffer(rag.vectors_for([h["embedding_id"]])[h["embedding_id"]], dtype=np.float32)
                assert h["sim"] == pytest.approx(float(v @ q), abs=1e-5)
        finally:
            rag.close()


def test_keyword_search_sees_chunks_published_before_their_vectors(tmp_path):
    """Chunks are keyword-searchable as soon as they are published, before their vectors (which log
    the change): a searcher that has already searched must not keep its old document counts."""
    cfg = make_cfg(tmp_path)
    paths = Paths.from_config(cfg).ensure()
    emb = HashEmbedder(64)
    root = tmp_path / "src"
    root.mkdir()
    for i in range(6):
        (root / f"old{i}.txt").write_text(f"Notes number {i} about gardening and compost heaps.")
    pipe = Pipeline(cfg, paths, emb, stores=open_data_dir(paths))
    for i in range(6):
        pipe.ingest_file("c", root / f"old{i}.txt", root)
    pipe.close()
    with open_searcher(cfg, paths, emb) as s:
        before = s.search("zanzibar clove harvest", mode="keyword", limit=5)
        assert before["results"] == []
        (root / "new.txt").write_text("The zanzibar clove harvest starts in July.")
        late = Pipeline(cfg, paths, emb, defer_vectors=True, stores=open_data_dir(paths))
        assert late.ingest_file("c", root / "new.txt", root).status == "indexed"
        late.close()
        after = s.search("zanzibar clove harvest", mode="keyword", limit=5)
        m = after["retrieval_meta"]["fts"]["c"]
        assert m["n_docs"] == 7 and {w["word"]: w["df"] for w in m["words"]}["zanzibar"] == 1
        assert [h["filename"] for h in after["results"]] == ["new.txt"]
