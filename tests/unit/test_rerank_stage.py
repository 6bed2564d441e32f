"""The rerank stage's parsing and how an outcome is applied to a search result (no provider: a scorer
that implements the Reranker protocol directly). The providers are in tests/integration/test_rerank_providers.py."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from ragweedd.config import default_config, load_config
from ragweedd.errors import ConfigError
from ragweedd.query.rerank import (
    BadOutput,
    LLMReranker,
    RerankOutcome,
    make_reranker,
    parse_scores,
    parse_yes_no,
    rerank_result,
)


@pytest.mark.parametrize("text", [
    "1: 8\n2: 3\n3: 10",
    "[1] 8\n[2] 3\n[3] 10",
    "Passage 1: score 8/10\nPassage 2 - 3\n#3. 10",
    "1. 8\n2. 3\n3. 10\n",
    "Scores:\n1 = 8\n2 = 3\n3 = 10\nThat is all.",
    '```json\n{"1": 8, "2": 3, "3": 10}\n```',
    'Here you go: {"scores": [{"id": 1, "score": 8}, {"id": 2, "score": 3}, {"passage": 3, "relevance": 10}]}',
    "[8, 3, 10]",
    "1: 8\n2: 3\n3: 10\n1: 0",  # a passage scored twice: the first counts
    "1: 8\n2: 3\n3: 10\n7: 9",  # a passage that does not exist is ignored
])
def test_batch_scores_are_read_in_many_shapes(text):
    assert parse_scores(text, 3) == [0.8, 0.3, 1.0]


@pytest.mark.parametrize("text, why", [
    ("", "scored 0 of 3"),
    ("I cannot rank these.", "scored 0 of 3"),
    ("1: 8\n2: 3", "no score for 3"),
    ("1: 8\n2: 11\n3: 4", "no score for 2"),  # out of the 0-10 scale
    ("[1] 8 [2", "scored 1 of 3"),
    ('{"1": "high", "2": 3, "3": 4}', "no score for 1"),
])
def test_unreadable_batch_output_is_bad_output(text, why):
    with pytest.raises(BadOutput, match=why) as ei:
        parse_scores(text, 3)
    assert "llm.rerank" in str(ei.value)


@pytest.mark.parametrize("text, want", [("yes", 1.0), ("Yes.", 1.0), ("NO", 0.0), ("no, it is about tea", 0.0),
                                        ("The answer is: yes", 1.0), ("  **No**", 0.0)])
def test_yes_no(text, want):
    assert parse_yes_no(text) == want


@pytest.mark.parametrize("text", ["", "Perhaps.", "maybe yes, maybe no", "nope", "relevant"])
def test_unreadable_yes_no_is_bad_output(text):
    with pytest.raises(BadOutput):
        parse_yes_no(text)


# --- applying an outcome ---------------------------------------------------------------------------
class Scorer:
    """A Reranker that answers from a fixed list (or an error, or an exception)."""

    provider, model, strategy = "fixed", "list", "batch"

    def __init__(self, relevance=None, *, candidates=10, error=None, raises=None):
        self.relevance, self.candidates, self.error, self.raises = relevance, candidates, error, raises
        self.seen = None

    async def rerank(self, query, hits):
        self.seen = [h["embedding_id"] for h in hits]
        if self.raises:
            raise self.raises
        rel = self.relevance[:len(hits)] if self.relevance is not None else None
        return RerankOutcome(relevance=rel, error=self.error, error_code="provider" if self.error else None,
                             calls=1, input_tokens=100, output_tokens=10, ms=12.34)


def result(n):
    """A search result as the searcher returns it: fused scores falling, rel_score 1 .. 0."""
    hits = [{"embedding_id": i, "collection": "c", "text": f"t{i}", "score": 1.0 - i / 10,
             "rel_score": 1 - i / max(1, n - 1), "rank": i + 1, "annotate": True} for i in range(n)]
    return {"results": hits, "retrieval_meta": {"counts": {"returned": n, "for_annotation": n},
                                                "timings_ms": {"total": 5.0}}}


def run(scorer, res, limit=10, keep_pct=100):
    return asyncio.run(rerank_result(scorer, "q", res, limit=limit, keep_pct=keep_pct))


def test_block_is_reordered_and_takes_the_score_slots_and_the_tail_stays():
    res = run(Scorer([0.1, 0.9, 0.5], candidates=3), result(5))
    hits = res["results"]
    assert [h["embedding_id"] for h in hits] == [1, 2, 0, 3, 4]
    assert [h["rank"] for h in hits] == [1, 2, 3, 4, 5]
    assert [h["score"] for h in hits] == pytest.approx([1.0, 0.9, 0.8, 0.7, 0.6])
    assert [h["rel_score"] for h in hits] == pytest.approx([1.0, 0.75, 0.5, 0.25, 0.0])
    rr = res["retrieval_meta"]["rerank"]
    assert rr == {**rr, "provider": "fixed", "model": "list", "strategy": "batch", "candidates": 3, "calls": 1,
                  "input_tokens": 100, "output_tokens": 10, "ms": 12.3}
    assert [(s["embedding_id"], s["fused_rank"], s["rank"], s["relevance"]) for s in rr["scores"]] == [
        (0, 1, 3, 0.1), (1, 2, 1, 0.9), (2, 3, 2, 0.5)]
    assert rr["scores"][1]["fused_score"] == pytest.approx(0.9)
    assert res["retrieval_meta"]["timings_ms"]["rerank"] == 12.3


def test_ties_keep_the_fused_order():
    res = run(Scorer([0.0, 1.0, 0.0, 1.0]), result(4))
    assert [h["embedding_id"] for h in res["results"]] == [1, 3, 0, 2]


def test_cut_to_limit_after_the_rerank_with_annotation_marks_and_counts_redone():
    res = run(Scorer([0.0, 0.2, 0.4, 0.6, 0.8, 1.0], candidates=6), result(6), limit=4, keep_pct=50)
    assert [h["embedding_id"] for h in res["results"]] == [5, 4, 3, 2]
    assert [h["annotate"] for h in res["results"]] == [True, True, False, False]
    assert res["retrieval_meta"]["counts"] == {"returned": 4, "for_annotation": 2}


@pytest.mark.parametrize("scorer, code", [
    (Scorer(error="openai model 'm' failed: cannot connect"), "provider"),
    (Scorer(raises=RuntimeError("a bug in a reranker")), "internal"),
    (Scorer([0.5, 0.5]), "rerank_bad_output"),  # too few values
    (Scorer([0.5, 7.0, 0.1, 0.2, 0.3]), "rerank_bad_output"),  # not in [0, 1]
    (Scorer([0.5, float("nan"), 0.1, 0.2, 0.3]), "rerank_bad_output"),
])
def test_a_failed_rerank_keeps_the_fused_order_and_says_why(scorer, code):
    before = result(5)
    want = [(h["embedding_id"], h["score"], h["rel_score"]) for h in before["results"]]
    res = run(scorer, before, limit=3)
    assert [(h["embedding_id"], h["score"], h["rel_score"]) for h in res["results"]] == want[:3]
    assert [h["rank"] for h in res["results"]] == [1, 2, 3]
    rr = res["retrieval_meta"]["rerank"]
    assert rr["error_code"] == code and rr["error"] and "scores" not in rr


def test_fewer_than_two_results_are_not_sent():
    scorer = Scorer([1.0])
    res = run(scorer, result(1))
    assert scorer.seen is None
    assert res["retrieval_meta"]["rerank"]["skipped"] and res["retrieval_meta"]["rerank"]["calls"] == 0
    res = run(scorer, {"results": [], "retrieval_meta": {}})
    assert res["results"] == [] and res["retrieval_meta"]["rerank"]["candidates"] == 0


# --- configuration ---------------------------------------------------------------------------------
def test_rerank_is_off_unless_configured():
    assert make_reranker(default_config()) is None


def test_configured_reranker_takes_its_keys():
    cfg = load_config(text='[llm]\nrerank = "ollama:gemma3:1b"\nrerank_strategy = "each"\n'
                           "rerank_candidates = 8\nrerank_concurrency = 3\nrerank_timeout_s = 5\n", env={})
    rr = make_reranker(cfg)
    assert isinstance(rr, LLMReranker)
    assert (rr.provider, rr.model, rr.strategy, rr.candidates, rr.concurrency, rr.timeout_s) == (
        "ollama", "gemma3:1b", "each", 8, 3, 5.0)


@pytest.mark.parametrize("text, words", [
    ('[llm]\nrerank_strategy = "listwise"\n', ["llm.rerank_strategy", "'batch', 'each'"]),
    ("[llm]\nrerank_candidates = 1\n", ["llm.rerank_candidates", "from 2 to 200"]),
    ("[llm]\nrerank_concurrency = 0\n", ["llm.rerank_concurrency"]),
])
def test_bad_rerank_keys_are_config_errors(text, words):
    with pytest.raises(ConfigError) as ei:
        load_config(text=text, env={})
    assert all(w in str(ei.value) for w in words)


@pytest.mark.parametrize("spec, words", [("claude", ["llm.rerank", "PROVIDER:MODEL"]),
                                         ("mistral:large", ["llm.rerank", "mistral"]),
                                         ("openai:", ["llm.rerank", "no model"])])
def test_bad_rerank_spec_is_a_config_error_naming_the_key(spec, words):
    cfg = dataclasses.replace(default_config(), llm_rerank=spec)
    with pytest.raises(ConfigError) as ei:
        make_reranker(cfg)
    assert all(w in str(ei.value) for w in words)
