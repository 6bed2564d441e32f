"""The semantic search cache through the real engine (Services over a real ingest: SQLite, FTS5,
the index files): hits for the same and nearly the same query, misses for different options, and
never a stale result after an edit, a delete or a rename."""


import numpy as np
import pytest

from ragweedd.config import load_config  # noqa: E402
from ragweedd.embed.hashing import HashEmbedder  # noqa: E402
from ragweedd.embed.long import embed_texts  # noqa: E402
from ragweedd.query.semantic_cache import SemanticCache  # noqa: E402
from ragweedd.services import open_oneshot  # noqa: E402

DOCS = {
    "papers": {
        "mito.txt": "Mitochondria produce ATP through oxidative phosphorylation in the inner membrane.",
        "heart.md": "# Cardiology\n\nA heart attack damages the cardiac muscle when blood flow stops.",
        "ribo.txt": "Ribosomes translate messenger RNA into protein chains.",
    },
    "mail": {
        "m1.txt": "Meeting about the ATP synthase grant moved to Thursday.",
        "m2.txt": "Lunch order: espresso, croissant and orange juice.",
    },
}
Q = "how do mitochondria produce atp"
NEAR = "how mitochondria produce atp"  # hash:64 cosine 0.935 with Q
FAR = "mitochondria producing atp"  # 0.666


def make_cfg(tmp, extra=""):
    text = (f'data_dir = "{tmp}/data"\nstate_dir = "{tmp}/state"\ncache_dir = "{tmp}/cache"\n'
            f"chunk_size = 64\nsearch_cache_similarity = 0.9\n{extra}\n[embed]\nmodel = 'hash:64'\n")
    return load_config(text=text, env={})


@pytest.fixture
def engine(tmp_path):
    cfg = make_cfg(tmp_path)
    emb = HashEmbedder(64)
    svc = open_oneshot(cfg, embedder=emb)
    pipe = svc.pipeline(extract=None)
    roots = {}
    for coll, files in DOCS.items():
        root = roots[coll] = tmp_path / "src" / coll
        for rel, text in files.items():
            p = root / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text, encoding="utf-8")
            assert pipe.ingest_file(coll, p, root).status in ("indexed", "linked")
    yield svc, pipe, roots, emb
    pipe.close()
    svc.close()


def _cache(res):
    return res["retrieval_meta"]["cache"]


def test_the_queries_of_these_tests_are_as_close_as_they_claim():
    v = embed_texts(HashEmbedder(64), [Q, NEAR, FAR])
    assert float(v[0] @ v[1]) > 0.9 > float(v[0] @ v[2])


def test_same_and_nearly_same_query_hit_a_farther_one_misses(engine):
    svc, *_ = engine
    first = svc.search(Q)
    assert _cache(first)["hit"] is False
    again = svc.search(Q)
    assert _cache(again) == {**_cache(again), "hit": True, "similarity": 1.0, "cached_query": Q}
    assert again["results"] == first["results"]
    near = svc.search(NEAR)
    assert _cache(near)["hit"] is True and 0.9 < _cache(near)["similarity"] < 1.0
    assert near["retrieval_meta"]["query"] == NEAR and near["results"] == first["results"]
    far = _cache(svc.search(FAR))
    assert far["hit"] is False and 0.6 < far["closest_similarity"] < 0.9 and far["stored"] is True


def test_every_option_that_changes_the_result_is_in_the_key(engine):
    svc, *_ = engine
    assert _cache(svc.search(Q))["hit"] is False
    assert _cache(svc.search(Q, ["papers"]))["hit"] is False
    assert _cache(svc.search(Q, ["mail"]))["hit"] is False
    assert _cache(svc.search(Q, limit=2))["hit"] is False
    assert _cache(svc.search(Q, mode="dense"))["hit"] is False
    assert _cache(svc.search(Q, mode="keyword"))["hit"] is False
    assert _cache(svc.search(Q, path_glob="*/mito.txt"))["hit"] is False
    assert _cache(svc.search(Q, file_type="md"))["hit"] is False
    # and each of them, asked again, is served
    for kw in ({}, {"collections": ["papers"]}, {"limit": 2}, {"mode": "keyword"}, {"path_glob": "*/mito.txt"}):
        assert _cache(svc.search(Q, **kw))["hit"] is True, kw


def test_the_order_of_the_collections_and_filter_lists_does_not_split_the_cache(engine):
    svc, *_ = engine
    first = svc.search(Q, ["papers", "mail"])
    assert _cache(first)["hit"] is False
    swapped = svc.search(Q, ["mail", "papers"])
    assert _cache(swapped)["hit"] is True and swapped["results"] == first["results"]
    assert swapped["retrieval_meta"]["filters"]["collections"] == ["mail", "papers"]  # as asked this time
    assert _cache(svc.search(Q, ["mail", "papers"], file_type="md"))["hit"] is False
    assert _cache(svc.search(Q, ["papers", "mail"], file_type="md"))["hit"] is True


def test_an_edited_file_makes_the_next_identical_query_a_miss_with_the_new_text(engine):
    svc, pipe, roots, _ = engine
    before = svc.search(Q, ["papers"])
    assert any("oxidative phosphorylation" in h["text"] for h in before["results"])
    assert _cache(svc.search(Q, ["papers"]))["hit"] is True
    p = roots["papers"] / "mito.txt"
    p.write_text("Mitochondria produce ATP by chemiosmosis across the cristae.", encoding="utf-8")
    assert pipe.ingest_file("papers", p, roots["papers"]).status == "indexed"
    after = svc.search(Q, ["papers"])
    assert _cache(after)["hit"] is False
    texts = " ".join(h["text"] for h in after["results"])
    assert "chemiosmosis" in texts and "oxidative phosphorylation" not in texts


def test_a_change_in_another_collection_keeps_this_ones_entries(engine):
    svc, pipe, roots, _ = engine
    svc.search(Q, ["papers"])
    p = roots["mail"] / "m3.txt"
    p.write_text("Mitochondria talk on Friday.", encoding="utf-8")
    assert pipe.ingest_file("mail", p, roots["mail"]).status == "indexed"
    assert _cache(svc.search(Q, ["papers"]))["hit"] is True
    assert _cache(svc.search(Q))["hit"] is False  # both collections: mail changed


def test_a_deleted_file_is_never_served_again(engine):
    svc, pipe, roots, _ = engine
    first = svc.search(Q, ["papers"])
    assert any(h["source_file"].endswith("mito.txt") for h in first["results"])
    p = roots["papers"] / "mito.txt"
    p.unlink()
    assert pipe.remove_file("papers", str(p))
    after = svc.search(Q, ["papers"])
    assert _cache(after)["hit"] is False
    assert not any(h["source_file"].endswith("mito.txt") for h in after["results"])


def test_a_rename_that_logs_no_chunk_change_still_invalidates(engine):
    """Linking a second path to content already indexed writes no chunk and no change-log entry,
    yet a path filter now lets it through: the path count in search_version moves."""
    svc, pipe, roots, _ = engine
    glob = "*/renamed.txt"
    assert svc.search(Q, ["papers"], path_glob=glob)["results"] == []
    assert _cache(svc.search(Q, ["papers"], path_glob=glob))["hit"] is True
    src = roots["papers"] / "mito.txt"
    dst = roots["papers"] / "renamed.txt"
    dst.write_text(src.read_text(encoding="utf-8"), encoding="utf-8")
    assert pipe.ingest_file("papers", dst, roots["papers"]).status == "linked"
    after = svc.search(Q, ["papers"], path_glob=glob)
    assert _cache(after)["hit"] is False
    assert ["produce ATP" in h["text"] for h in after["results"]] == [True]
    # the old name goes (a rename): the content stays, only the path shown changes
    assert _cache(svc.search(Q, ["papers"]))["hit"] is False
    assert _cache(svc.search(Q, ["papers"]))["hit"] is True
    assert pipe.remove_file("papers", str(src)) == []
    renamed = svc.search(Q, ["papers"])
    assert _cache(renamed)["hit"] is False
    assert renamed["results"][0]["source_file"].endswith("renamed.txt")


def test_numbers_must_match_however_close_the_embeddings():
    cache = SemanticCache(8, 0.5)
    v = np.ones(4, dtype=np.float32) / 2
    res = {"results": [], "retrieval_meta": {"query": "apple revenue 2022"}}
    cache.store("k", {"c": (1, 1, 0, 1)}, "apple revenue 2022", v, res)
    assert cache.lookup("k", {"c": (1, 1, 0, 1)}, "apple revenue 2023", v)[0] is None
    assert cache.lookup("k", {"c": (1, 1, 0, 1)}, "Apple revenue in 2022", v)[0] is not None



def test_scale_words_must_match_like_numbers():
    """"million" and "billion" embed at 0.987 in otherwise equal queries: they are part of a number."""
    cache = SemanticCache(8, 0.5)
    v = np.ones(4, dtype=np.float32) / 2
    ver = {"c": (1,)}
    cache.store("k", ver, "apple revenue in million dollars", v, {"results": [], "retrieval_meta": {"query": "q"}})
    assert cache.lookup("k", ver, "apple revenue in billion dollars", v)[0] is None
    assert cache.lookup("k", ver, "apple revenue in millions of dollars", v)[0] is not None
    cache.store("k", ver, "sales of 12m units", v, {"results": [], "retrieval_meta": {"query": "q"}})
    assert cache.lookup("k", ver, "sales of 12 million units", v)[0] is not None
    assert cache.lookup("k", ver, "sales of 12bn units", v)[0] is None
    assert cache.lookup("k", ver, "sales of 12 units", v)[0] is None


def test_lru_bound_stale_entries_dropped_and_copies_handed_out():
    cache = SemanticCache(2, 0.99)
    vecs = np.eye(3, dtype=np.float32)
    for i in range(3):
        cache.store("k", {"c": (i,)}, f"q{i}", vecs[i], {"results": [{"n": i}], "retrieval_meta": {"query": f"q{i}"}})
    assert len(cache) == 2
    assert cache.lookup("k", {"c": (0,)}, "q0", vecs[0])[0] is None  # evicted (and q1, q2 stale now)
    assert len(cache) == 0
    cache.store("k", {"c": (5,)}, "q", vecs[0], {"results": [{"n": 1}], "retrieval_meta": {"query": "q"}})
    got, meta = cache.lookup("k", {"c": (5,)}, "q", vecs[0])
    got["results"][0]["n"] = 99
    assert cache.lookup("k", {"c": (5,)}, "q", vecs[0])[0]["results"][0]["n"] == 1
    assert meta["hit"] and meta["similarity"] == 1.0


def test_off_with_size_zero(tmp_path):
    cfg = make_cfg(tmp_path, "search_cache_size = 0")
    svc = open_oneshot(cfg, embedder=HashEmbedder(64))
    try:
        assert svc.search_cache is None
    finally:
        svc.close()
