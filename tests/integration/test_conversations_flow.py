"""Conversations through the real engine (``running_api``: the daemon's core, real SQLite files or a
real PostgreSQL, real ingest and search, the hash embedder) over HTTP: a follow-up keeps its
subject by rules without an LLM (the collection's own IDF), by one LLM call with one (the OpenAI
SDK against tests/fakes/llm_server.py), the earlier turns in the synthesis prompt, filters carried,
a standalone question left alone, and every bad id refused with nothing lost."""

from __future__ import annotations

import json

import pytest

from tests.api_support import API_KEY_LLM_TOML, running_api
from tests.fakes.llm_server import FakeLLMServer
from tests.integration.test_api_contract import module_store, sse_events

# A follow-up asked alone finds the note on black tea towels, which says "black tea" most often;
# with the subject of the turn before ("steep") it finds the note on steeping black tea.
FILES = {
    "green.md": "# Green tea\n\nGreen tea should steep for two minutes at eighty degrees Celsius.\n",
    "black.md": "# Black tea\n\nBlack tea should steep for four minutes in water just off the boil.\n",
    "towels.md": "# Tea towels\n\nA black tea towel hides stains. Wash black tea towels at sixty degrees, "
                 "black tea towels with black tea towels.\n",
    "survey.csv": "topic,finding\nworkforce,Black representation in the workforce rose in 2022\n",
    "bikes.md": "# Bicycles\n\nBicycle chains need a drop of oil every three hundred kilometres.\n",
    "bread.md": "# Bread\n\nA sourdough starter is fed once a day with flour and water.\n",
    "cats.md": "# Cats\n\nCats purr when they are content and relaxed.\n",
}
TEA = "How long should green tea steep?"


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def backend(request) -> str:
    return request.param


@pytest.fixture(scope="module")
def api(tmp_path_factory, backend, request):
    with module_store(backend, request) as dsn, \
            running_api(tmp_path_factory.mktemp("conv"), files=FILES, expect=set(FILES), store=dsn) as a:
        yield a


def rewrite_reply(provider, messages):
    """The scripted LLM: the rewrite call gets a standalone query, the answer cites source 1."""
    if "standalone search query" in messages[0]["content"]:
        last = messages[-1]["content"].split("LAST QUESTION:", 1)[1].split("\n")[0].strip()
        return {"and black tea?": "How long should black tea steep?"}.get(last, last)
    return "It steeps for four minutes [1]."


@pytest.fixture(scope="module")
def llm():
    with FakeLLMServer(models=("test-model",), reply=rewrite_reply) as srv:
        yield srv


@pytest.fixture(scope="module")
def llm_api(tmp_path_factory, llm, backend, request):
    with module_store(backend, request) as dsn, \
            running_api(tmp_path_factory.mktemp("conv-llm"), files=FILES, expect=set(FILES),
                        extra_toml=API_KEY_LLM_TOML(llm), store=dsn) as a:
        yield a


def ask(a, query: str, **body) -> dict:
    return a.ok("POST", "/v1/ask?stream=false", {"query": query, **body})


def files_of(answer: dict) -> list[str]:
    return [s["filename"] for s in answer["sources"]]


# --------------------------------------------------------------------------- without an LLM
def test_a_follow_up_keeps_its_subject_by_rules(api):
    alone = ask(api, "and black tea?")
    assert files_of(alone)[0] == "towels.md", "asked alone, the follow-up finds the tea towels"
    first = ask(api, TEA)
    assert first["turn"] == 1 and first["rewrite"]["method"] == "none" and not first["rewrite"]["rewritten"]
    follow = ask(api, "and black tea?", conversation_id=first["conversation_id"])
    rw = follow["rewrite"]
    assert follow["conversation_id"] == first["conversation_id"] and follow["turn"] == 2
    assert rw["method"] == "rules" and rw["rewritten"] and rw["query"].startswith("and black tea? ")
    assert "steep" in rw["carried"] and "green" not in rw["carried"] and rw["replaced"] == ["green"]
    assert files_of(follow)[0] == "black.md", follow["answer"]
    entry = api.ok("GET", f"/v1/history/{follow['history_id']}")
    assert entry["retrieval_meta"]["rewrite"]["query"] == rw["query"] and entry["query"] == "and black tea?"
    assert (entry["conversation_id"], entry["turn"]) == (first["conversation_id"], 2)


def test_the_stream_names_the_conversation_and_the_searched_query_first(api):
    first = ask(api, TEA)
    st, hdrs, body = api.request("POST", "/v1/ask", {"query": "and black tea?",
                                                     "conversation_id": first["conversation_id"]})
    assert st == 200 and hdrs["Content-Type"].startswith("text/event-stream")
    events = sse_events(body)
    name, sources = events[0]
    assert name == "sources" and sources["conversation_id"] == first["conversation_id"] and sources["turn"] == 2
    assert sources["rewrite"]["rewritten"] and "steep" in sources["rewrite"]["query"]
    done = events[-1][1]
    assert done["type"] == "done" and done["conversation_id"] == first["conversation_id"] and done["turn"] == 2


def test_a_standalone_second_question_is_left_alone(api):
    first = ask(api, TEA)
    second = ask(api, "How often is a sourdough starter fed?", conversation_id=first["conversation_id"])
    rw = second["rewrite"]
    assert not rw["rewritten"] and rw["query"] == "How often is a sourdough starter fed?" and rw["carried"] == []
    assert "no earlier turn" in rw["reason"] or "new subject" in rw["reason"], rw["reason"]
    assert files_of(second)[0] == "bread.md"
    assert second["turn"] == 2, "it is still a turn of the conversation"


def test_filters_of_the_earlier_turn_are_carried_by_a_follow_up(api):
    first = ask(api, TEA, collections=["notes"], file_type="md")
    follow = ask(api, "and black tea?", conversation_id=first["conversation_id"])
    assert follow["rewrite"]["filters_carried"]
    assert follow["rewrite"]["filters"] == {"collections": ["notes"], "file_type": "md"}
    assert all(f.endswith(".md") for f in files_of(follow))
    own = ask(api, "and black tea?", conversation_id=first["conversation_id"], file_type="csv")
    assert not own["rewrite"]["filters_carried"] and own["rewrite"]["filters"] == {"file_type": "csv"}


def test_the_previous_answer_documents_are_preferred_when_the_subject_stays(api):
    first = ask(api, "Why do cats purr?")
    follow = ask(api, "and when are they relaxed?", conversation_id=first["conversation_id"])
    rw = follow["rewrite"]
    cited = {s["doc_id"] for s in first["sources"]}
    assert rw["rewritten"] and set(rw["preferred_documents"]) == cited
    assert follow["sources"][0]["doc_id"] in cited


def test_threads_are_listed_reopened_and_deleted_whole(api):
    first = ask(api, "Do bicycle chains need oil?")
    ask(api, "how often?", conversation_id=first["conversation_id"])
    cid = first["conversation_id"]
    listed = api.ok("GET", "/v1/conversations?limit=1")["items"][0]
    assert listed["id"] == cid and listed["turn_count"] == 2 and listed["title"] == "Do bicycle chains need oil?"
    thread = api.ok("GET", f"/v1/conversations/{cid}")
    assert [(t["turn"], t["query"]) for t in thread["turns"]] == [(1, "Do bicycle chains need oil?"), (2, "how often?")]
    assert thread["turns"][1]["rewrite"]["rewritten"] and all("state" not in t for t in thread["turns"])
    ids = [t["id"] for t in thread["turns"]]
    assert api.ok("DELETE", f"/v1/conversations/{cid}") == {"id": cid, "deleted": True, "turns": 2}
    for hid in ids:
        assert api.request("GET", f"/v1/history/{hid}")[0] == 404
    assert cid not in [c["id"] for c in api.ok("GET", "/v1/conversations?limit=1000")["items"]]


@pytest.mark.parametrize("cid,status,words", [
    ("c0000000000000000", 404, "conversation 'c0000000000000000' does not exist"),
    ("0000000000000000", 400, "is a history id, not a conversation id"),
    ("not-an-id", 400, "is not one: a conversation id is 'c' and 16 hex digits"),
    ("c" + "0" * 15 + "G", 400, "is not one"),
])
def test_a_bad_conversation_id_is_refused_and_nothing_is_lost(api, cid, status, words):
    before = api.ok("GET", "/v1/history?limit=1")["total"]
    convs = api.ok("GET", "/v1/conversations?limit=1")["total"]
    st, _, body = api.request("POST", "/v1/ask", {"query": "and black tea?", "conversation_id": cid})
    assert st == status and words in body["error"]["message"], body
    assert body["error"].get("action") == {"id": "list_conversations"} or "history id" in words
    for method in ("GET", "DELETE"):
        st, _, body = api.request(method, f"/v1/conversations/{cid}")
        assert st == status and words in body["error"]["message"], body
    assert api.ok("GET", "/v1/history?limit=1")["total"] == before
    assert api.ok("GET", "/v1/conversations?limit=1")["total"] == convs
    assert api.ok("GET", "/v1/health")["ok"]


def test_a_deleted_conversation_cannot_be_continued_and_the_others_stay(api):
    keep = ask(api, "Why do cats purr?")
    gone = ask(api, TEA)
    api.ok("DELETE", f"/v1/conversations/{gone['conversation_id']}")
    st, _, body = api.request("POST", "/v1/ask", {"query": "and black tea?",
                                                  "conversation_id": gone["conversation_id"]})
    assert st == 404 and "was deleted" in body["error"]["message"]
    assert api.request("DELETE", f"/v1/conversations/{gone['conversation_id']}")[0] == 404
    again = ask(api, "and when?", conversation_id=keep["conversation_id"])
    assert again["turn"] == 2


def test_a_history_id_asked_as_a_conversation_says_which_it_is(api):
    first = ask(api, TEA)
    st, _, body = api.request("GET", f"/v1/history/{first['conversation_id']}")
    assert st == 400 and "is a conversation id, not a history id" in body["error"]["message"]


# --------------------------------------------------------------------------- with an LLM
def test_with_an_llm_one_call_rewrites_the_follow_up_and_the_answer_reads_the_thread(llm_api, llm):
    first = ask(llm_api, TEA)
    llm.requests.clear()
    follow = ask(llm_api, "and black tea?", conversation_id=first["conversation_id"])
    rw = follow["rewrite"]
    assert rw["method"] == "llm" and rw["rewritten"] and rw["query"] == "How long should black tea steep?"
    call = rw["llm"]
    assert call["provider"] == "openai:test-model" and call["calls"] == 1 and call["input_tokens"] > 0
    assert "Q1: How long should green tea steep?" in call["messages"][1]["content"]
    assert "A1: It steeps for four minutes." in call["messages"][1]["content"], "answers go without their marks"
    assert files_of(follow)[0] == "black.md"
    rewrite_req, answer_req = llm.requests
    assert rewrite_req["messages"] == call["messages"] and rewrite_req["max_tokens"] == 128
    roles = [m["role"] for m in answer_req["messages"]]
    assert roles == ["system", "user", "assistant", "user"], roles
    assert answer_req["messages"][1]["content"] == TEA
    assert answer_req["messages"][2]["content"] == "It steeps for four minutes."
    assert "QUESTION: and black tea?" in answer_req["messages"][3]["content"]
    assert follow["budget"]["thread_turns"] == 1 and follow["budget"]["thread_tokens"] > 0
    assert follow["cited_numbers"] == [1] and follow["citations_verified"]["checked"] == 1
    assert follow["usage"]["by_stage"]["synthesis"]["input_tokens"] > 0


def test_a_tree_mode_follow_up_is_chosen_for_its_rewrite_and_its_answer_reads_the_thread(llm_api, llm):
    first = ask(llm_api, TEA)
    llm.requests.clear()
    follow = ask(llm_api, "and black tea?", conversation_id=first["conversation_id"], mode="tree")
    assert follow["rewrite"]["query"] == "How long should black tea steep?"
    assert "tree" in follow and follow["turn"] == 2
    answer_req = llm.requests[-1]
    roles = [m["role"] for m in answer_req["messages"]]
    assert roles == ["system", "user", "assistant", "user"], roles
    assert answer_req["messages"][1]["content"] == TEA
    assert "QUESTION: and black tea?" in answer_req["messages"][3]["content"]
    assert follow["budget"]["thread_turns"] == 1 and follow["budget"]["thread_tokens"] > 0


def test_a_failed_llm_rewrite_searches_the_question_as_asked_and_says_why(llm_api, llm):
    first = ask(llm_api, TEA)
    llm.push({"status": 500, "message": "the model is overloaded"})
    follow = ask(llm_api, "and black tea?", conversation_id=first["conversation_id"])
    rw = follow["rewrite"]
    assert rw["method"] == "llm" and not rw["rewritten"] and rw["query"] == "and black tea?"
    assert "failed" in rw["reason"] and "overloaded" in rw["llm"]["error"]
    assert follow["answer"] == "It steeps for four minutes [1]." and follow["turn"] == 2


def test_the_chat_face_reads_the_messages_it_is_sent_and_stores_no_conversation(llm_api, llm):
    convs = llm_api.ok("GET", "/v1/conversations?limit=1")["total"]
    llm.requests.clear()
    body = {"model": "ragweedd/all", "messages": [
        {"role": "system", "content": "Be brief."}, {"role": "user", "content": TEA},
        {"role": "assistant", "content": "Two minutes [1]."}, {"role": "user", "content": "and black tea?"}]}
    out = llm_api.ok("POST", "/v1/chat/completions", body)
    assert out["choices"][0]["message"]["content"] == "It steeps for four minutes [1]."
    rewrite_req, answer_req = llm.requests
    assert "Q1: How long should green tea steep?\nA1: Two minutes." in rewrite_req["messages"][1]["content"]
    assert [m["content"] for m in answer_req["messages"][1:3]] == [TEA, "Two minutes."]
    entry = llm_api.ok("GET", f"/v1/history/{out['history_id']}")
    assert entry["conversation_id"] is None and entry["rewrite"]["query"] == "How long should black tea steep?"
    assert llm_api.ok("GET", "/v1/conversations?limit=1")["total"] == convs


def test_a_continued_answer_stays_a_turn_of_its_conversation(llm_api, llm):
    first = ask(llm_api, TEA)
    llm.push({"text": "How long should black tea steep?"}, {"text": "Black tea steeps for four minutes [1]. " * 400})
    cut = ask(llm_api, "and black tea?", conversation_id=first["conversation_id"])
    assert cut["finish_reason"] == "max_tokens" and cut["turn"] == 2
    llm.push({"text": " The end [1]."})
    more = llm_api.ok("POST", f"/v1/ask/{cut['history_id']}/continue?stream=false", {})
    assert more["conversation_id"] == first["conversation_id"] and more["turn"] == 2
    assert more["rewrite"]["query"] == "How long should black tea steep?"
    thread = llm_api.ok("GET", f"/v1/conversations/{first['conversation_id']}")
    assert [t["turn"] for t in thread["turns"]] == [1, 2] and thread["turns"][1]["continuations"] == 1
    assert json.dumps(thread).count('"state"') == 0
