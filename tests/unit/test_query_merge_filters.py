"""Merging (zscore, convex, boost and weighted RRF), the per-file cap, dedup, rel_score, MIN_SCORE,
PRE_ANNOTATE_KEEP, and filter validation."""

import pytest

from ragweedd.errors import RequestError
from ragweedd.query.filters import Filters
from ragweedd.query.merge import Candidate, FusionParams, dedup_key, finish, fuse


def hit(i, score, src="/a.txt", text=None, coll="c"):
    return {"embedding_id": i, "collection": coll, "source_file": src, "doc_id": src,
            "text": text if text is not None else f"chunk number {i}", "score": score}


def test_boost_adds_fts_weight_and_keyword_only_uses_stored_similarity():
    a = Candidate("c", 1, sim=0.50, in_dense=True)
    b = Candidate("c", 2, sim=0.45, bm25=3.0, in_dense=True, in_keyword=True)
    c = Candidate("c", 3, sim=0.20, bm25=9.0, in_keyword=True)  # keyword-only, sim from its stored vector
    fuse([a, b, c], mode="hybrid", params=FusionParams.default("boost", fts_weight=0.15, rrf_k=60))
    assert a.score == pytest.approx(0.50)
    assert b.score == pytest.approx(0.60)
    assert c.score == pytest.approx(0.35)
    assert (a.dense_rank, b.dense_rank, c.dense_rank) == (1, 2, None)
    assert (b.fts_rank, c.fts_rank) == (2, 1)


def test_rrf_uses_ranks_of_both_lists():
    a = Candidate("c", 1, sim=0.9, in_dense=True)
    b = Candidate("c", 2, sim=0.8, bm25=1.0, in_dense=True, in_keyword=True)
    c = Candidate("c", 3, sim=0.1, bm25=5.0, in_keyword=True)
    d = Candidate("c", 4, sim=0.05, bm25=2.0, in_dense=True)  # scored for its words, not found by them
    fuse([a, b, c, d], mode="hybrid", params=FusionParams.default("rrf", rrf_k=10))
    assert a.score == pytest.approx(1 / 11)
    assert b.score == pytest.approx(1 / 12 + 1 / 12)
    assert c.score == pytest.approx(1 / 11)
    assert d.score == pytest.approx(1 / 13) and d.fts_rank is None
    fuse([a, b, c, d], mode="hybrid", params=FusionParams.default("rrf", rrf_k=10, rrf_keyword_weight=0.5))
    assert b.score == pytest.approx(1 / 12 + 0.5 / 12) and c.score == pytest.approx(0.5 / 11)


def test_convex_weighs_cosine_and_bm25_over_the_best_per_collection():
    a = Candidate("c", 1, sim=0.9, in_dense=True)
    b = Candidate("c", 2, sim=0.5, bm25=4.0, in_dense=True, in_keyword=True)
    c = Candidate("c", 3, sim=0.2, bm25=8.0, in_keyword=True)
    d = Candidate("other", 1, sim=0.3, bm25=1.0, in_keyword=True)  # its own collection's best
    fuse([a, b, c, d], mode="hybrid", params=FusionParams.default("convex", dense_weight=0.7))
    assert a.score == pytest.approx(0.63)
    assert b.score == pytest.approx(0.7 * 0.5 + 0.3 * 0.5)
    assert c.score == pytest.approx(0.7 * 0.2 + 0.3)
    assert d.score == pytest.approx(0.7 * 0.3 + 0.3)


def _z(xs, x):
    m = sum(xs) / len(xs)
    return (x - m) / (sum((v - m) ** 2 for v in xs) / len(xs)) ** 0.5


SMALL_WINDOWS = FusionParams.default("zscore", dense_weight=0.5, dense_window=3, keyword_window=3)


def _cands(bm25s):
    dense = [Candidate("c", i, sim=s, in_dense=True) for i, s in enumerate((0.8, 0.6, 0.4), 1)]
    dense[1].bm25 = 3.0  # a dense hit that holds some of the words
    return dense + [Candidate("c", 10 + i, sim=0.5, bm25=b, in_keyword=True) for i, b in enumerate(bm25s, 1)]


def test_zscore_standardises_each_leg_over_its_window():
    cands = _cands((9.0, 3.0))
    fuse(cands, mode="hybrid", params=SMALL_WINDOWS)
    sims, bms = [0.8, 0.6, 0.5], [9.0, 3.0, 3.0]  # each leg's top 3 over every candidate
    z = {c.chunk_id: c.score for c in cands}
    assert z[1] == pytest.approx(0.5 * _z(sims, 0.8) + 0.5 * _z(bms, 0.0))  # none of the words: BM25 0
    assert z[2] == pytest.approx(0.5 * _z(sims, 0.6) + 0.5 * _z(bms, 3.0))
    assert z[11] == pytest.approx(0.5 * _z(sims, 0.5) + 0.5 * _z(bms, 9.0))
    # one scale for both legs whatever their raw scales: BM25 times 10 and cosines shifted by 0.1
    # (another model's range) fuse to the same scores
    moved = _cands((9.0, 3.0))
    for c in moved:
        c.sim = (c.sim or 0.0) + 0.1
        c.bm25 = c.bm25 * 10 if c.bm25 is not None else None
    fuse(moved, mode="hybrid", params=SMALL_WINDOWS)
    assert {c.chunk_id: pytest.approx(c.score) for c in moved} == z


def test_zscore_lifts_the_one_chunk_that_holds_a_rare_word():
    """A word only one chunk holds (an identifier, a name) must lift it: the keyword window the
    matches do not fill is filled with zeros, so the lone match stands far above it."""
    cands = [Candidate("c", i, sim=s, in_dense=True) for i, s in enumerate((0.8, 0.7, 0.6), 1)]
    lone = Candidate("c", 9, sim=0.5, bm25=4.85, in_keyword=True)
    fuse(cands + [lone], mode="hybrid", params=FusionParams.default("zscore"))
    assert lone.score > max(c.score for c in cands)
    # two near-equal matches stay near each other and both above the chunks without the words
    pair = [Candidate("c", 10, sim=0.5, bm25=2.963, in_keyword=True),
            Candidate("c", 11, sim=0.5, bm25=2.919, in_keyword=True)]
    others = [Candidate("c", i, sim=s, in_dense=True) for i, s in enumerate((0.8, 0.7, 0.6), 1)]
    fuse(pair + others, mode="hybrid", params=FusionParams.default("zscore"))
    assert min(p.score for p in pair) > max(c.score for c in others)
    assert pair[0].score - pair[1].score < 0.1


def test_zscore_never_sinks_a_known_item_under_a_narrow_dense_window():
    """Cosines bunched at 0.44-0.45 and the rare word's chunk at 0.07: its dense z is dozens of
    deviations down. As a known item the vector leg can no longer sink it below the others."""
    dense = [Candidate("c", i, sim=0.44 + i * 0.0002, in_dense=True) for i in range(1, 65)]
    lone = Candidate("c", 99, sim=0.07, bm25=10.8, in_keyword=True)
    fuse(dense + [lone], mode="hybrid", params=FusionParams.default("zscore"))
    assert lone.score < min(c.score for c in dense)  # what it was: buried
    lone.known_item = True
    fuse(dense + [lone], mode="hybrid", params=FusionParams.default("zscore"))
    assert lone.score > max(c.score for c in dense)
    # a known item the vector leg likes keeps that lift
    liked = Candidate("c", 98, sim=0.46, bm25=10.8, in_keyword=True, known_item=True)
    fuse(dense + [liked], mode="hybrid", params=FusionParams.default("zscore"))
    assert liked.score > lone.score


def test_a_known_item_is_never_capped_deduplicated_or_cut():
    """The per-file cap, a repeat of a chunk that is not one, min_score and the limit all keep it."""
    hits = [hit(i, 1.0 - i / 100, "/big.txt") for i in range(1, 6)]
    hits += [hit(i, 0.9 - i / 100, f"/f{i}") for i in range(6, 30)]
    known = dict(hit(50, 0.01, "/big.txt", text="chunk number 1"), known_item=True)  # repeats chunk 1's text
    out, _ = finish(hits + [known], max_per_file=3, min_score=0.5, limit=10, keep_pct=100)
    ids = [h["embedding_id"] for h in out]
    assert len(out) == 10 and ids[-1] == 50 and out[-1]["rank"] == 10
    # its file keeps the cap: the known item takes one of the three places, the best two the rest
    assert [i for i in ids if i <= 5] == [1, 2]
    # without the mark it is lost, as before
    plain, _ = finish([dict(h) for h in hits] + [hit(50, 0.01, "/big.txt")], max_per_file=3, min_score=0.5,
                      limit=10, keep_pct=100)
    assert 50 not in [h["embedding_id"] for h in plain]


def test_known_items_take_at_most_half_of_the_places():
    hits = [hit(i, 1.0 - i / 100, f"/f{i}") for i in range(1, 11)]
    known = [dict(hit(i, 0.01, f"/k{i}"), known_item=True) for i in range(20, 30)]
    out, _ = finish(hits + known, max_per_file=3, min_score=0.0, limit=5, keep_pct=100)
    assert [h["embedding_id"] for h in out] == [1, 2, 20, 21, 22]


def test_dense_and_keyword_modes_score_one_half_only():
    a = Candidate("c", 1, sim=0.3, bm25=7.0, in_dense=True)
    fuse([a], mode="dense", params=FusionParams.default("boost"))
    assert a.score == pytest.approx(0.3)
    fuse([a], mode="keyword", params=FusionParams.default("zscore"))
    assert a.score == pytest.approx(7.0)


def test_a_chunk_on_pages_a_better_chunk_of_the_file_shows_gives_way():
    """Overlapping PDF chunks of one page would take both of the file's places with one page."""
    hits = [dict(hit(1, 0.9, "/a.pdf"), pages=[4]), dict(hit(2, 0.8, "/a.pdf"), pages=[4]),
            dict(hit(3, 0.7, "/a.pdf"), pages=[4, 5]), dict(hit(4, 0.6, "/a.pdf"), pages=[5]),
            dict(hit(5, 0.5, "/b.pdf"), pages=[4]), hit(6, 0.4, "/a.txt"), hit(7, 0.3, "/a.txt")]
    out, counts = finish(hits, max_per_file=2, min_score=0.0, limit=10, keep_pct=100)
    # page 4 of a.pdf once; pages 4-5 add page 5 so they stay, page 5 alone then gives way; another
    # file's page 4 and chunks without pages are not concerned
    assert [h["embedding_id"] for h in out] == [1, 3, 5, 6, 7]
    assert counts["after_same_pages"] == 5


def test_file_cap_then_dedup_then_rel_score():
    hits = [hit(1, 0.9, "/a"), hit(2, 0.8, "/a"), hit(3, 0.7, "/a"),  # third of /a goes
            hit(4, 0.6, "/b", text="same   text " + "x" * 300),
            hit(5, 0.5, "/c", text="same text " + "x" * 300 + " different tail"),  # same first 200
            hit(6, 0.1, "/d")]
    out, counts = finish(hits, max_per_file=2, min_score=0.0, limit=10, keep_pct=100)
    assert [h["embedding_id"] for h in out] == [1, 2, 4, 6]
    assert counts == {"merged": 6, "after_same_pages": 6, "after_file_cap": 5, "after_dedup": 4,
                      "after_min_score": 4, "returned": 4, "for_annotation": 4}
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
