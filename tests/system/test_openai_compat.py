"""The OpenAI-compatible face (GET /v1/models, POST /v1/chat/completions) of a REAL daemon subprocess,
spoken to through the official ``openai`` SDK exactly as a chat client would: base_url
http://127.0.0.1:PORT/v1 and the daemon's token as the API key. Two daemons for the module: one
without an LLM (the quoted-passages answer) and one whose synthesis LLM is the local wire-protocol
server of tests/fakes/llm_server.py (the cited answer)."""

from __future__ import annotations

import re
from pathlib import Path

import openai
import pytest
import requests

from tests.data.make_fixtures import _pdf_text
from tests.fakes.llm_server import API_KEY, FakeLLMServer
from tests.system.conftest import Daemon, serving, wait_indexed

TEXTS = {
    "tea.txt": "Green tea should steep for two minutes at eighty degrees Celsius, never boiling water.\n",
    "bikes.txt": "Bicycle chains need a drop of oil every three hundred kilometres, more after rain.\n",
}
PDF_PAGES = ["Chapter one is about dogs. Dogs bark at the postman every single morning.",
             "Chapter two is about cats. Cats purr when they are content and relaxed."]


def reply(provider, messages):
    """Cites the source that holds the purring sentence, by the number the prompt gave it; asked to
    rewrite a follow-up, answers with the question itself (it stands alone)."""
    prompt = messages[-1]["content"]
    if "LAST QUESTION:" in prompt:
        return prompt.split("LAST QUESTION:", 1)[1].split("\n", 1)[0].strip()
    at = prompt.find("Cats purr")
    nums = [(m.start(), m.group(1)) for m in re.finditer(r"\[(\d+)\]", prompt[:at])] if at >= 0 else []
    if not nums:
        return "I cannot find that in the documents."
    return f"Cats purr when they are content [{nums[-1][1]}]."


def make_docs(base: Path) -> tuple[Path, Path]:
    notes, pets = base / "notes", base / "pets"
    notes.mkdir()
    pets.mkdir()
    for name, text in TEXTS.items():
        (notes / name).write_text(text)
    _pdf_text(pets / "animals.pdf", PDF_PAGES)
    return notes, pets


@pytest.fixture(scope="module")
def llm():
    with FakeLLMServer(models=("test-model",), reply=reply) as srv:
        yield srv


def _ready(base: Path, extra: str = ""):
    """A daemon over the notes and the PDF, once every document is indexed (fixture body)."""
    notes, pets = make_docs(base)
    with serving(Daemon(base / "d", {"notes": [notes], "pets": [pets]}, extra=extra)) as d:
        wait_indexed(d, "notes", 2)
        wait_indexed(d, "pets", 1)
        d.wait_idle()
        d.pets = pets
        yield d


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    yield from _ready(tmp_path_factory.mktemp("oai-plain"))


@pytest.fixture(scope="module")
def with_llm(tmp_path_factory, llm):
    extra = "\n".join(["[llm]", 'synthesis = "openai:test-model"', f'openai_base_url = "{llm.url}/v1"',
                       f'openai_api_key = "{API_KEY}"', "max_retries = 0", "timeout_s = 20"])
    yield from _ready(tmp_path_factory.mktemp("oai-llm"), extra)


def client(d: Daemon, key: str | None = None) -> openai.OpenAI:
    token = (d.base / "state" / "token").read_text().strip()
    return openai.OpenAI(base_url=f"http://127.0.0.1:{d.port}/v1", api_key=key or token, max_retries=0, timeout=60)


def ask(c: openai.OpenAI, model: str, question: str, **kw):
    return c.chat.completions.create(model=model, messages=[
        {"role": "system", "content": "You are helpful."},
        {"role": "user", "content": "an earlier question"},
        {"role": "assistant", "content": "an earlier answer"},
        {"role": "user", "content": question}], **kw)


def assert_points_at_page_two(citations: list[dict], pets: Path) -> None:
    assert citations, "no citations"
    cats = [c for c in citations if c["filename"] == "animals.pdf"]
    assert cats, citations
    c = cats[0]
    assert c["file"] == str(pets / "animals.pdf") and Path(c["file"]).is_file()
    assert c["collection"] == "pets" and c["n"] >= 1
    assert c["page"] == "2", c
    assert c["uri"].startswith("file://") and "animals.pdf" in c["uri"] and c["uri"].endswith("#page=2"), c
    assert c["quote"] and "purr" in c["quote"], c


# --------------------------------------------------------------------------- models
def test_models_are_the_collections_plus_all(plain):
    ms = client(plain).models.list()
    ids = [m.id for m in ms.data]
    assert ids == ["ragweedd/all", "ragweedd/notes", "ragweedd/pets"]
    assert all(m.object == "model" and m.owned_by == "ragweedd" and m.created > 0 for m in ms.data)


# --------------------------------------------------------------------------- without an LLM
def test_chat_without_llm_answers_with_quoted_passages_and_citations(plain):
    r = ask(client(plain), "ragweedd/pets", "do cats purr?")
    assert r.object == "chat.completion" and r.model == "ragweedd/pets" and r.id.startswith("chatcmpl-")
    ch = r.choices[0]
    assert ch.index == 0 and ch.message.role == "assistant" and ch.finish_reason == "stop"
    assert "purr" in ch.message.content
    assert r.usage.total_tokens == 0  # no model was called
    body = r.model_dump()
    assert_points_at_page_two(body["citations"], plain.pets)
    # the answer is the one the history keeps
    e = plain.api("GET", f"/v1/history/{body['history_id']}").json()
    assert e["answer"] == ch.message.content


def test_chat_stream_without_llm_ends_with_citations_then_done(plain):
    chunks = list(ask(client(plain), "ragweedd/all", "do cats purr?", stream=True))
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks)
    assert "purr" in text
    last = chunks[-1].model_dump()
    assert last["object"] == "chat.completion.chunk" and last["choices"][0]["finish_reason"] == "stop"
    assert all(c.choices[0].finish_reason is None and "citations" not in c.model_dump() for c in chunks[:-1])
    assert_points_at_page_two(last["citations"], plain.pets)
    assert {c.id for c in chunks} == {chunks[0].id}


def test_chat_of_one_collection_cites_only_that_collection(plain):
    r = ask(client(plain), "ragweedd/notes", "how long does green tea steep?").model_dump()
    assert r["citations"] and {c["collection"] for c in r["citations"]} == {"notes"}
    assert "tea.txt" in {c["filename"] for c in r["citations"]}


# --------------------------------------------------------------------------- with an LLM
def test_chat_with_llm_gives_the_cited_answer(with_llm, llm):
    llm.requests.clear()
    r = ask(client(with_llm), "ragweedd/all", "do cats purr?")
    content = r.choices[0].message.content
    assert re.fullmatch(r"Cats purr when they are content \[\d+\]\.", content), content
    n = int(re.search(r"\[(\d+)\]", content).group(1))
    body = r.model_dump()
    assert [c["n"] for c in body["citations"]] == [n]
    assert_points_at_page_two(body["citations"], with_llm.pets)
    assert r.usage.prompt_tokens > 0 and r.usage.completion_tokens > 0
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    # the messages before the question are the thread: one call rewrote the question from them,
    # and the answer's prompt has them as its earlier turns (the client's system prompt is not ours)
    rewrite, answer = llm.requests[-2:]
    assert "Q1: an earlier question\nA1: an earlier answer" in rewrite["messages"][-1]["content"]
    assert [(m["role"], m["content"]) for m in answer["messages"][1:3]] == [("user", "an earlier question"),
                                                                            ("assistant", "an earlier answer")]
    prompt = answer["messages"][-1]["content"]
    assert "do cats purr?" in prompt and "an earlier question" not in prompt and "You are helpful" not in str(answer)


def test_chat_stream_with_llm(with_llm):
    chunks = list(ask(client(with_llm), "ragweedd/pets", "do cats purr?", stream=True))
    text = "".join(c.choices[0].delta.content or "" for c in chunks)
    assert re.fullmatch(r"Cats purr when they are content \[\d+\]\.", text), text
    assert len([c for c in chunks if c.choices[0].delta.content]) > 1  # the tokens as they came
    last = chunks[-1].model_dump()
    assert last["choices"][0]["finish_reason"] == "stop" and last["usage"]["completion_tokens"] > 0
    assert_points_at_page_two(last["citations"], with_llm.pets)


def test_raw_stream_is_sse_data_lines_ending_in_done(with_llm):
    r = requests.post(f"http://127.0.0.1:{with_llm.port}/v1/chat/completions", headers=with_llm.headers,
                      json={"model": "ragweedd/all", "stream": True,
                            "messages": [{"role": "user", "content": [{"type": "text", "text": "do cats purr?"}]}]},
                      timeout=60)
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/event-stream")
    lines = [ln for ln in r.text.split("\n\n") if ln.strip()]
    assert lines[-1] == "data: [DONE]" and all(ln.startswith("data: ") for ln in lines)


# --------------------------------------------------------------------------- refusals
def test_wrong_or_missing_key_is_an_authentication_error(plain):
    with pytest.raises(openai.AuthenticationError) as ei:
        client(plain, key="not-the-token-at-all").models.list()
    assert ei.value.status_code == 401
    with pytest.raises(openai.AuthenticationError):
        ask(client(plain, key="not-the-token-at-all"), "ragweedd/all", "do cats purr?")
    r = requests.post(f"http://127.0.0.1:{plain.port}/v1/chat/completions", timeout=30,
                      json={"model": "ragweedd/all", "messages": [{"role": "user", "content": "x"}]})
    assert r.status_code == 401


def test_unknown_model_is_a_404_naming_it(plain):
    for model in ("ragweedd/ghost", "gpt-4o", "notes"):
        with pytest.raises(openai.NotFoundError) as ei:
            ask(client(plain), model, "do cats purr?")
        assert ei.value.code == "model_not_found"
        assert model in ei.value.message and "ragweedd/all" in ei.value.message


@pytest.mark.parametrize("messages, words", [
    ([], "no user message"),
    ([{"role": "system", "content": "be brief"}], "no user message"),
    ([{"role": "user", "content": "   "}], "no text"),
    ([{"role": "user", "content": "x" * 8001}], "at most 8000"),
])
def test_messages_without_a_question_are_400(plain, messages, words):
    with pytest.raises(openai.BadRequestError) as ei:
        client(plain).chat.completions.create(model="ragweedd/all", messages=messages)
    assert words in ei.value.message


def test_bad_bodies_are_400_and_the_daemon_stays_up(plain):
    url = f"http://127.0.0.1:{plain.port}/v1/chat/completions"
    hdrs = {**plain.headers, "Content-Type": "application/json"}
    for raw in (b"{not json", b"[1, 2]", b'{"messages": [{"role": "user", "content": "x"}]}',
                b'{"model": "ragweedd/all"}', b'{"model": "ragweedd/all", "messages": "hi"}',
                b'{"model": "ragweedd/all", "messages": [{"role": "user", "content": "x"}], "stream": "yes"}'):
        r = requests.post(url, data=raw, headers=hdrs, timeout=30)
        assert r.status_code == 400, (raw, r.text)
        err = r.json()["error"]
        assert err["code"] == "bad_request" and err["message"], err
    assert client(plain).models.list().data


def test_rebinding_host_and_foreign_origin_are_refused(plain):
    url = f"http://127.0.0.1:{plain.port}/v1/models"
    r = requests.get(url, headers={**plain.headers, "Host": f"evil.example:{plain.port}"}, timeout=30)
    assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden_host"
    r = requests.post(f"http://127.0.0.1:{plain.port}/v1/chat/completions", timeout=30,
                      headers={**plain.headers, "Origin": "https://evil.example"},
                      json={"model": "ragweedd/all", "messages": [{"role": "user", "content": "do cats purr?"}]})
    assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden_origin"


# --------------------------------------------------------------------------- the LLM failing or cut short
@pytest.fixture
def fresh_llm(llm):
    llm.script.clear()
    yield llm
    llm.script.clear()


REWRITTEN = {"text": "do cats purr?"}  # the rewrite of the question after the earlier turns the client sends


def test_provider_failure_is_an_api_error_and_the_daemon_stays_up(with_llm, fresh_llm):
    fresh_llm.push(REWRITTEN, {"status": 500, "message": "the model server is overloaded"})
    with pytest.raises(openai.InternalServerError) as ei:
        ask(client(with_llm), "ragweedd/all", "do cats purr?")
    assert ei.value.status_code == 502 and ei.value.code == "provider" and "overloaded" in ei.value.message

    # streaming: the failure comes after the headers, as a data line holding "error", which the SDK raises
    fresh_llm.push(REWRITTEN, {"status": 500, "message": "the model server is overloaded"})
    with pytest.raises(openai.APIError, match="overloaded"):
        list(ask(client(with_llm), "ragweedd/all", "do cats purr?", stream=True))
    assert ask(client(with_llm), "ragweedd/all", "do cats purr?").choices[0].finish_reason == "stop"


def test_an_answer_cut_at_max_tokens_finishes_with_length(with_llm, fresh_llm):
    fresh_llm.push(REWRITTEN, {"text": "Cats purr when", "stop": "max_tokens"})
    r = ask(client(with_llm), "ragweedd/all", "do cats purr?")
    assert r.choices[0].finish_reason == "length" and r.choices[0].message.content == "Cats purr when"
    fresh_llm.push(REWRITTEN, {"text": "Cats purr when", "stop": "max_tokens"})
    chunks = list(ask(client(with_llm), "ragweedd/all", "do cats purr?", stream=True))
    assert chunks[-1].choices[0].finish_reason == "length"
