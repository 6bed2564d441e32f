"""Follow-ups without an LLM (ragweedd/query/followup.py), the LLM rewrite's prompt and reply
(query/followup_llm.py, with FakeChatProvider), and the earlier turns in the synthesis prompt
(answer/thread.py through answer_question). The rules are given document frequencies here; the
daemon's own (the keyword index's) are used in tests/integration/test_conversations_flow.py."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
from fake_chat import FakeChatProvider

from ragweedd.answer import answer_question
from ragweedd.answer.thread import ANSWER_CHARS, fit_thread
from ragweedd.config import default_config
from ragweedd.contract import without_marks
from ragweedd.errors import ProviderTimeout
from ragweedd.query import followup, followup_llm
from ragweedd.query.followup import carried_filters, prefer, rewrite, words_of

N = 2000  # chunks in the made-up collection
DF = {"green": 2, "tea": 5, "steep": 3, "long": 400, "black": 4, "3m": 30, "capital": 60, "expenditure": 40,
      "fy2018": 10, "operating": 300, "margin": 150, "pfizer": 25, "revenue": 400, "aldh1": 3,
      "expression": 200, "prognosis": 20, "breast": 90, "cancer": 400, "sourdough": 2, "starter": 5, "feed": 9,
      "amd": 20, "quick": 40, "ratio": 100, "liquidity": 60, "healthy": 30, "oolong": 2, "caffeine": 12,
      "sleep": 30, "alcohol": 15, "net": 90, "lubricate": 3, "chain": 8, "brake": 4, "pads": 5}


def stats(words):
    return {w: DF.get(w, 0) for w in words}, N


def turn(q, docs=("d" * 32,), answer="", query=None, filters=None):
    return {"question": q, "query": query or q, "answer": answer, "filters": filters or {}, "documents": list(docs)}


TEA = "How long should green tea steep?"
CAPEX = "What was 3M's capital expenditure in FY2018?"


@pytest.mark.parametrize("before,question,query,same", [
    # a variation of the topic: the word the new one took the place of is not carried
    (TEA, "and black tea?", "and black tea? steep", True),
    # a new period replaces the old; names and topic are carried
    (CAPEX, "and in 2016?", "and in 2016? 3M capital expenditure", False),
    # a new topic pointing back: the names and the period are carried
    (CAPEX, "What about its operating margin?", "What about its operating margin? 3M FY2018", True),
    # an opener and a new name: the name is replaced, the topic and period carried
    (CAPEX, "And Pfizer?", "And Pfizer? capital expenditure FY2018", False),
    # nothing of its own but a reference: the whole subject is carried
    ("ALDH1 expression is associated with poorer prognosis for breast cancer.", "Which study found the opposite?",
     "Which study found the opposite? ALDH1 prognosis breast", True),
])
def test_a_follow_up_carries_the_subject_it_leaves_out(before, question, query, same):
    r = rewrite(question, [turn(before)], stats)
    assert r.rewritten and r.query == query and r.same_subject is same, r


@pytest.mark.parametrize("before,question,why", [
    (TEA, "How do I feed a sourdough starter?", "shares its rare words with no earlier turn"),
    (CAPEX, "What was Pfizer's capital expenditure in FY2018?", "names a new subject: Pfizer"),
    # "its" refers to the name before it in the question itself
    (CAPEX, "Does AMD have a healthy liquidity profile based on its quick ratio?", "names a new subject: AMD"),
    (CAPEX, "What was 3M's capital expenditure in FY2018?", "whole question of its own"),
    (CAPEX, "and 3M's capital expenditure in FY2018?", "names its subject itself"),
    # "that" opening a clause of the question, "the other" of its own nouns: no pointing back
    (CAPEX, "What are the geographies that Pepsico primarily operates in as of FY2022?", "new subject: Pepsico"),
    (CAPEX, "Were there any board nominees with more votes against than the other nominees?", "whole question"),
])
def test_a_question_that_stands_alone_is_left_alone(before, question, why):
    r = rewrite(question, [turn(before)], stats)
    assert not r.rewritten and r.query == question and why in r.reason, r


def test_a_demonstrative_standing_alone_points_back():
    r = rewrite("What caused this?", [turn(CAPEX)], stats)
    assert r.rewritten and r.query == "What caused this? 3M capital expenditure FY2018", r


def test_the_first_question_is_searched_as_asked():
    r = rewrite("and black tea?", [], stats)
    assert not r.rewritten and r.query == "and black tea?" and "first question" in r.reason


def test_the_previous_turn_searched_query_carries_the_subject_down_a_chain():
    second = rewrite("and in 2016?", [turn(CAPEX)], stats)
    third = rewrite("and in 2015?", [turn(CAPEX), turn("and in 2016?", query=second.query)], stats)
    assert third.query == "and in 2015? 3M capital expenditure" and third.replaced == ["2016"]


@pytest.mark.parametrize("before,question,query", [
    # the new word stands in for the modifier; the head and the rest of the subject are carried
    ("How long should black tea steep?", "and green?", "and green? tea steep"),
    (TEA, "What about oolong?", "What about oolong? tea steep"),
    (CAPEX, "and net?", "and net? 3M expenditure FY2018"),
    # no phrase of two topic words: the first one, the subject, is what it replaces
    ("How does caffeine affect sleep?", "and alcohol?", "and alcohol? sleep"),
    # a noun phrase with its article stands in for the earlier object
    ("How often should I lubricate the chain?", "and the brake pads?", "and the brake pads? lubricate"),
])
def test_an_ellipsis_replaces_the_first_words_of_the_earlier_subject(before, question, query):
    r = rewrite(question, [turn(before)], stats)
    assert r.rewritten and r.query == query, r


def test_in_a_small_collection_every_word_of_the_subject_is_carried():
    """Two notes both about tea: "tea" is in every chunk, yet it is the subject of the thread."""
    two = {"green": 1, "tea": 2, "steep": 2, "black": 1}

    def small(ws):
        return {w: two.get(w, 0) for w in ws}, 2

    first = rewrite("and black tea?", [turn(TEA)], small)
    assert first.query == "and black tea? steep", first
    assert rewrite("and green?", [turn("and black tea?", query=first.query)], small).query == "and green? tea steep"
    it = rewrite("how long should it steep?", [turn("What is green tea?")], small)
    assert it.query == "how long should it steep? green tea", it


def test_a_collection_of_a_few_chunks_still_has_rare_words():
    tiny = {"green": 1, "tea": 1, "steep": 1, "black": 1, "long": 1}
    r = rewrite("and black tea?", [turn(TEA)], lambda ws: ({w: tiny.get(w, 0) for w in ws}, 3))
    assert r.rewritten and "steep" in r.carried and "green" not in r.carried


def test_words_know_a_sentence_opening_capital_from_a_name():
    kinds = {w.text: w.kind for w in words_of("Here's the question: What is Adobe's FY2015 EBITDA? Round it.")}
    assert kinds["Here"] == "stop" or kinds["Here"] == "topic"
    assert kinds["What"] == "stop" and kinds["Round"] == "topic"
    assert (kinds["Adobe"], kinds["FY2015"], kinds["EBITDA"], kinds["it"]) == ("name", "period", "name", "pointer")


def test_filters_are_carried_only_when_the_follow_up_has_none():
    given = {"collections": None, "path_glob": None, "file_type": None, "doc_id": None}
    thread = [turn(TEA, filters={"collections": ["notes"], "file_type": "md"})]
    assert carried_filters(given, thread) == ({**given, "collections": ["notes"], "file_type": "md"}, True)
    own = {**given, "path_glob": "*/x/*"}
    assert carried_filters(own, thread) == (own, False)
    assert carried_filters(given, []) == (given, False)


def test_preferred_documents_rank_first_among_near_equals():
    hits = [{"doc_id": "a", "rel_score": 1.0}, {"doc_id": "b", "rel_score": 0.9}, {"doc_id": "a", "rel_score": 0.5},
            {"doc_id": "c", "rel_score": 0.0}]
    out = prefer([dict(h) for h in hits], ["b"], 3)
    assert [h["doc_id"] for h in out] == ["b", "a", "a"] and [h["rank"] for h in out] == [1, 2, 3]
    assert [h["doc_id"] for h in prefer([dict(h) for h in hits], ["c"], 4)] == ["a", "b", "a", "c"], \
        "a far weaker hit stays where it is"
    assert prefer([dict(h) for h in hits], [], 2) == hits[:2]


# --------------------------------------------------------------------------- the LLM rewrite
def run(coro):
    return asyncio.run(coro)


def test_the_llm_rewrite_sends_the_thread_without_marks_and_records_its_cost():
    llm = FakeChatProvider("rw", default="Query: How long should black tea steep?\n")
    thread = [turn(TEA, answer=without_marks("Two minutes at eighty degrees [1]."))]
    query, call = run(followup_llm.rewrite("and black tea?", thread, llm))
    assert query == "How long should black tea steep?"
    sent = llm.requests[0]
    assert sent[0]["role"] == "system" and "standalone search query" in sent[0]["content"]
    assert "Q1: How long should green tea steep?" in sent[1]["content"]
    assert "A1: Two minutes at eighty degrees." in sent[1]["content"] and "[1]" not in sent[1]["content"]
    assert sent[1]["content"].rstrip().endswith("LAST QUESTION: and black tea?\n\nStandalone search query:")
    assert llm.params == [{"max_tokens": followup_llm.MAX_TOKENS, "temperature": 0.0}]
    assert call["messages"] == sent and call["calls"] == 1 and call["input_tokens"] > 0 and "error" not in call


@pytest.mark.parametrize("reply,query", [
    ('"How long should black tea steep?"', "How long should black tea steep?"),
    ("\n\n  search query: black tea steeping time  \nbecause ...", "black tea steeping time"),
    ("", None), ("   \n  ", None), ("x" * 2000, None),
])
def test_the_query_is_read_from_the_reply(reply, query):
    assert followup_llm.query_of(reply) == query


def test_a_failed_llm_rewrite_is_recorded_and_raises_nothing():
    llm = FakeChatProvider("rw", replies=[ProviderTimeout("fake:rw did not answer within 20 s")], max_retries=0)
    query, call = run(followup_llm.rewrite("and black tea?", [turn(TEA)], llm))
    assert query is None and "did not answer" in call["error"] and call["reply"] is None
    empty = FakeChatProvider("rw", default="")
    query, call = run(followup_llm.rewrite("and black tea?", [turn(TEA)], empty))
    assert query is None and "no usable query" in call["error"]


# --------------------------------------------------------------------------- the thread in the prompt
def hits(n=3):
    return [{"embedding_id": 100 + i, "collection": "notes", "doc_id": f"{i:032x}", "source_file": f"/n/f{i}.md",
             "filename": f"f{i}.md", "source_rel_path": f"f{i}.md", "text": f"Black tea {i} steeps four minutes.",
             "score": 1 - i / 10, "rel_score": 1 - i / 3, "page_label": None, "section": None, "span": [0, 30],
             "t_start": None, "t_end": None, "member": None} for i in range(n)]


def answer(question, thread, cfg=None, **kw):
    syn = FakeChatProvider("syn", default="Black tea steeps four minutes [1].")

    async def go():
        return [e async for e in answer_question(question, hits(), cfg or default_config(), synthesizer=syn,
                                                 thread=thread, **kw)]
    return syn, run(go())


def test_the_prompt_reads_the_earlier_turns_and_counts_them_in_the_budget():
    thread = [turn("Who sells tea?", answer="The shop on Main Street."), turn(TEA, answer="Two minutes.")]
    syn, evs = answer("and black tea?", thread, searched="and black tea? steep")
    msgs = syn.requests[0]
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert (msgs[1]["content"], msgs[2]["content"]) == ("Who sells tea?", "The shop on Main Street.")
    assert (msgs[3]["content"], msgs[4]["content"]) == (TEA, "Two minutes.")
    assert "QUESTION: and black tea?" in msgs[5]["content"] and "[1] SOURCE: notes/f0.md" in msgs[5]["content"]
    done = evs[-1]
    assert done["budget"]["thread_turns"] == 2 and done["budget"]["thread_turns_left_out"] == 0
    assert done["budget"]["thread_tokens"] > 0
    # citations stay numbered per answer, and are checked against this answer's sources
    assert done["cited_numbers"] == [1] and done["citations_verified"]["checked"] == 1


def test_the_oldest_turns_are_dropped_first_when_the_budget_is_short():
    long_answer = "word " * 600  # about 860 tokens each
    thread = [turn(f"question {i}", answer=long_answer) for i in range(6)]
    cfg = dataclasses.replace(default_config(), llm_context_tokens=9000, max_tokens=1000)
    syn, evs = answer("and the last?", thread, cfg)
    b = evs[-1]["budget"]
    assert b["thread_turns"] + b["thread_turns_left_out"] == 6 and 0 < b["thread_turns"] < 6
    sent = [m["content"] for m in syn.requests[0] if m["role"] == "user"][:-1]
    assert sent == [f"question {i}" for i in range(6 - b["thread_turns"], 6)], "the newest are kept"
    # the prompt's overhead counts the earlier turns; they took at most a quarter of what it left
    prompt = b["overhead_tokens"] - b["thread_tokens"]
    assert b["thread_tokens"] <= int((9000 - 1000 - prompt - 64) * 0.25)
    assert b["used_tokens"] <= b["budget_tokens"] == 9000 - 1000 - b["overhead_tokens"] - 64


def test_a_long_earlier_answer_is_cut_and_a_missing_one_said():
    msgs, used = fit_thread([turn("a", answer="x " * 5000), turn("b", answer="")], 100000)
    assert len(msgs[1]["content"]) <= ANSWER_CHARS + 2 and msgs[1]["content"].endswith("…")
    assert msgs[3]["content"] == "(no answer was given)" and used["thread_turns"] == 2


def test_without_a_thread_the_prompt_is_as_before():
    syn, evs = answer("How long does black tea steep?", None)
    assert [m["role"] for m in syn.requests[0]] == ["system", "user"]
    assert "thread_turns" not in evs[-1]["budget"]


def test_annotation_and_quotes_judge_by_the_searched_query():
    ann = FakeChatProvider("ann", default='"Black tea 0 steeps" is relevant.')

    async def go():
        return [e async for e in answer_question("and black tea?", hits(1), default_config(), annotator=ann,
                                                 searched="and black tea? steep")]
    run(go())
    assert "QUESTION: and black tea? steep" in ann.requests[0][0]["content"]


def test_module_constants_are_what_the_docs_say():
    assert (followup.RARE_DF, followup.NAME_DF, followup.RARE_MIN_DF, followup.MAX_CARRY) == (0.05, 0.5, 3, 6)
    assert followup.SMALL_COLLECTION == 30
