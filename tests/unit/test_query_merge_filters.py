"""Merging (boost and RRF), the per-file cap, dedup, rel_score, MIN_SCORE, PRE_ANNOTATE_KEEP, and
filter validation."""

import pytest

from ragweedd.errors import RequestError
from ragweedd.query.filters import Filters
from ragweedd.query.merge import Candidate, dedup_key, finish, fuse


def hit(i, score, src="/a.txt", text=None, coll="c"):
    return {"embedding_id": i, "collection": coll, "source_file": src, "doc_id": src,
            "text": text if text is not None else f"chunk number {i}", "score": score}


def test_boost_adds_fts_weight_and_keyword_only_uses_stored_similarity():
    a = Candidate("c", 1, sim=0.50, in_dense=True)
    b = Candidate("c", 2, sim=0.45, bm25=3.0, in_dense=True)
    c = Candidate("c", 3, sim=0.20, bm25=9.0)  # keyword-only, sim from its stored vector
    fuse([a, b, c], mode="hybrid", fusion="boost", fts_weight=0.15, rrf_k=60)
    assert a.score == pytest.approx(0.50)
    assert b.score == pytest.approx(0.60)
    assert c.score == pytest.approx(0.35)
    assert (a.dense_rank, b.dense_rank, c.dense_rank) == (1, 2, None)
    assert (b.fts_rank, c.fts_rank) == (2, 1)


def test_rrf_uses_ranks_of_both_lists():
    a = Candidate("c", 1, sim=0.9, in_dense=True)
    b = Candidate("c", 2, sim=0.8, bm25=1.0, in_dense=True)
    c = Candidate("c", 3, sim=0.1, bm25=5.0)
    fuse([a, b, c], mode="hybrid", fusion="rrf", fts_weight=0.15, rrf_k=10)
    assert a.score == pytest.approx(1 / 11)
    assert b.score == pytest.approx(1 / 12 + 1 / 12)
    assert c.score == pytest.approx(1 / 11)


def test_dense_and_keyword_modes_score_one_half_only():
    a = Candidate("c", 1, sim=0.3, bm25=7.0, in_dense=True)
    fuse([a], mode="dense", fusion="boost", fts_weight=0.15, rrf_k=60)
    assert a.score == pytest.approx(0.3)
    fuse([a], mode="keyword", fusion="boost", fts_weight=0.15, rrf_k=60)
    assert a.score == pytest.approx(7.0)


def test_file_cap_then_dedup_then_rel_score():
    hits = [hit(1, 0.9, "/a"), hit(2, 0.8, "/a"), hit(3, 0.7, "/a"),  # third of /a goes
            hit(4, 0.6, "/b", text="same   text " + "x" * 300),
            hit(5, 0.5, "/c", text="same text " + "x" * 300 + " different tail"),  # same first 200
            hit(6, 0.1, "/d")]
    out, counts = finish(hits, max_per_file=2, min_score=0.0, limit=10, keep_pct=100)
    assert [h["embedding_id"] for h in out] == [1, 2, 4, 6]
    assert counts == {"merged": 6, "after_file_cap": 5, "after_dedup": 4, "after_min_score": 4,
                      "returned": 4, "for_annotation": 4}
    assert out[0]["rel_score"] == 1.0 and out[-1]["rel_score"] == 0.0
    assert out[1]["rel_score"] == pytest.approx((0.8 - 0.1) / 0.8)
    assert dedup_key("a\n b") == "a b"


def test_file_cap_is_per_collection():
    hits = [hit(1, 0.9, "/a", coll="x"), hit(1, 0.8, "/a", coll="y", text="other")]
    out, _ = finish(hits, max_per_file=1, min_score=0.0, limit=10, keep_pct=100)
    assert len(out) == 2


def test_min_score_limit_and_annotation_share():
    hits = [hit(i, 1.0 - i / 10) for i in range(10)]
    for n, h in enumerate(hits):
        h["source_file"] = f"/f{n}"
    out, counts = finish(hits, max_per_file=2, min_score=0.5, limit=3, keep_pct=50)
    assert counts["after_min_score"] == 5  # rel_score of scores 1.0..0.1 over 0.9 span: >= 0.5 keeps 5
    assert [h["rank"] for h in out] == [1, 2, 3]
    assert [h["annotate"] for h in out] == [True, True, False]  # ceil(3 * 50%) = 2


def test_equal_scores_give_rel_score_one():
    out, _ = finish([hit(1, 0.4, "/a"), hit(2, 0.4, "/b")], max_per_file=2, min_score=1.0, limit=5, keep_pct=1)
    assert [h["rel_score"] for h in out] == [1.0, 1.0]
    assert [h["annotate"] for h in out] == [True, False]


@pytest.mark.parametrize("kw, msg", [
    ({"file_types": ["p/df"]}, "filter 'type'"),
    ({"file_types": ["*"]}, "filter 'type'"),
    ({"doc_ids": ["nothex"]}, "filter 'document'"),
    ({"doc_ids": ["0" * 31]}, "filter 'document'"),
    ({"path_glob": "a\x00b"}, "filter 'path'"),
    ({"collections": [""]}, "filter 'collection'"),
])
def test_bad_filters_are_request_errors(kw, msg):
    with pytest.raises(RequestError, match=msg):
        Filters.make(**kw)


def test_filters_normalise():
    f = Filters.make(file_types=[".PDF", "md", "pdf"], doc_ids=["A" * 32], path_glob="")
    assert f.file_types == ("pdf", "md") and f.doc_ids == ("a" * 32,) and f.path_glob is None
    assert f.restricts_chunks
    assert not Filters.make(collections=["x"]).restricts_chunks
