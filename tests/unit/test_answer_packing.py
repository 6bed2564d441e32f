import math

import pytest

from ragweedd.answer.packing import estimate_tokens, pack_sources, serialise_source, source_label
from ragweedd.errors import ConfigError


def hit(i, chars=700, rel=None, **kw):
    h = {"embedding_id": i, "collection": "papers", "filename": f"f{i}.pdf", "source_file": f"/d/f{i}.pdf",
         "text": (f"chunk{i} " * chars)[:chars], "score": 0.5, "rel_score": rel if rel is not None else 1 - i / 100,
         "page_label": None, "t_start": None, "member": None}
    h.update(kw)
    return h


def test_estimate_tokens_is_ceil_of_chars_over_3_5():
    assert estimate_tokens("") == 0
    assert estimate_tokens("a") == 1
    assert estimate_tokens("a" * 7) == 2
    assert estimate_tokens("a" * 8) == 3
    assert estimate_tokens("x" * 3500) == 1000


def test_source_label_and_serialisation():
    h = hit(1, page_label="3-4", annotation='"quote" matters')
    assert source_label(h) == "papers/f1.pdf [p.3-4]"
    block = serialise_source(2, h)
    lines = block.split("\n")
    assert lines[0] == "[2] SOURCE: papers/f1.pdf [p.3-4]"
    assert lines[1] == 'ANNOTATION: "quote" matters'
    assert lines[2] == h["text"]
    assert source_label(hit(2, t_start=83.0, filename="talk.mp3")) == "papers/talk.mp3 [t.1:23]"
    assert source_label(hit(3, member="a/b.txt", filename="x.zip")) == "papers/x.zip!a/b.txt"
    assert "ANNOTATION" not in serialise_source(1, hit(4))


def test_packing_orders_by_rel_score_and_numbers_from_one():
    hits = [hit(0, rel=0.2), hit(1, rel=0.9), hit(2, rel=0.5)]
    packed, left, _ = pack_sources(hits, context_tokens=32000, max_tokens=1024, context_chunks=12)
    assert [p["embedding_id"] for p in packed] == [1, 2, 0]
    assert [p["n"] for p in packed] == [1, 2, 3]
    assert packed[0]["block"].startswith("[1] SOURCE: papers/f1.pdf")
    assert left == []


def test_packing_stays_under_budget_and_skips_what_does_not_fit():
    # budget = 2000 - 500 - 100 - 64 = 1336 tokens ~ 4676 chars
    hits = [hit(i, chars=1400) for i in range(5)] + [hit(9, chars=200, rel=0.0)]
    packed, left, b = pack_sources(hits, context_tokens=2000, max_tokens=500, context_chunks=12, overhead_tokens=100)
    assert b["budget_tokens"] == 1336
    total = sum(estimate_tokens(p["block"]) + 2 for p in packed)
    assert total == b["used_tokens"] <= 1336
    assert [p["embedding_id"] for p in packed] == [0, 1, 2, 9], \
        "the small, low-score chunk still fits after a big one did not"
    assert [h["embedding_id"] for h in left] == [3, 4]


def test_packing_respects_context_chunks():
    packed, left, _ = pack_sources([hit(i, chars=50) for i in range(10)], context_tokens=32000, max_tokens=1024,
                                   context_chunks=3)
    assert len(packed) == 3 and len(left) == 7


def test_top_source_too_big_is_truncated_not_dropped():
    packed, left, b = pack_sources([hit(0, chars=20000), hit(1, chars=20000)], context_tokens=1200, max_tokens=500,
                                   context_chunks=12)
    assert len(packed) == 1 and packed[0]["truncated"]
    assert estimate_tokens(packed[0]["block"]) + 2 <= b["budget_tokens"]
    assert [h["embedding_id"] for h in left] == [1]


def test_budget_too_small_is_a_config_error_naming_keys():
    with pytest.raises(ConfigError, match="llm.context_tokens"):
        pack_sources([hit(0)], context_tokens=1000, max_tokens=990, context_chunks=12)


def test_empty_hits_pack_to_nothing():
    assert pack_sources([], context_tokens=32000, max_tokens=1024, context_chunks=12)[:2] == ([], [])


def test_math_ceil_matches_definition():
    for n in (1, 3, 4, 100, 3501):
        assert estimate_tokens("x" * n) == math.ceil(n / 3.5)


def test_source_label_shows_the_path_under_the_collection_root():
    """Two files of one name in two subfolders get two labels (the LLM and the reader tell them apart)."""
    a = hit(1, filename="n45.md", source_rel_path="big/n45.md")
    b = hit(2, filename="n45.md", source_rel_path="small/n45.md")
    assert source_label(a) == "papers/big/n45.md" and source_label(b) == "papers/small/n45.md"
    assert source_label(hit(3, filename="top.md", source_rel_path=None)) == "papers/top.md"
