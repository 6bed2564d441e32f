"""``ragweedd eval answers``: real questions answered over a real collection by the answering model,
scored by a judge spoken to through each provider's official SDK against the local wire-protocol
server, whose replies are scripted so every metric's value is known; a judge failure on one question
is recorded and the run goes on; bad question files fail with the line and what is wrong."""

from __future__ import annotations

import argparse
import asyncio
import json
import re

import pytest

from ragweedd.answer.answering import ask  # noqa: E402
from ragweedd.cli.evaluate import run as eval_run  # noqa: E402
from ragweedd.errors import NotFoundError, ProviderAuthError, ProviderModelMissing, RagweedError, RequestError  # noqa: E402
from ragweedd.eval import answers as A  # noqa: E402
from ragweedd.services import Services  # noqa: E402
from tests.hashed_world import (  # noqa: E402
    hashed_collection,  # noqa: E402
    llm_server_fixtures,
    provider_for,
)

PROVIDERS = ["anthropic", "openai", "gemini", "ollama"]
DOCS = {
    "cats.txt": "Cats purr when they are content. A purring cat is usually relaxed and safe.",
    "tea.txt": "Green tea should steep for two minutes at eighty degrees Celsius, never in boiling water.",
    "bikes.txt": "Bicycle chains need a drop of oil every three hundred kilometres, more after rain.",
}
QUESTIONS = [
    {"id": "tea", "question": "How long should green tea steep?", "reference": "Two minutes at eighty degrees."},
    {"question": "When do bicycle chains need oil?", "relevant": ["bikes.txt", {"file": "missing.txt"}]},
    {"question": "Why do cats purr?"},
]
ANSWER = "Green tea should steep for two minutes at eighty degrees Celsius [1]."


def reply(provider, messages):
    p = messages[-1]["content"]
    if p.startswith("Here are numbered sources and an answer"):
        return json.dumps({"claims": [{"claim": "a", "supported": True}, {"claim": "b", "supported": True},
                                      {"claim": "c", "supported": False}]})
    if p.startswith("Question:") and "Rate from 0 to 10" in p:
        return "I would rather not rate this." if "bicycle" in p else 'Here: {"score": 8}'
    if "useful for answering" in p:
        n = int(re.search(r"exactly (\d+) numbers", p).group(1))
        return json.dumps({"verdicts": [0, 1] + [0] * (n - 2) if n > 1 else [1]})
    if p.startswith("Reference answer:"):
        return json.dumps({"statements": [{"statement": s, "attributed": s != "x"} for s in "abxc"]})
    return ANSWER


server, _clean = llm_server_fixtures(reply)


@pytest.fixture(scope="module")
def world(tmp_path_factory, server):
    tmp = tmp_path_factory.mktemp("evalans")
    cfg, paths, emb = hashed_collection(tmp, DOCS, top="search_cache_size = 0", llm=server)
    qfile = tmp / "questions.jsonl"
    qfile.write_text("\n".join(json.dumps(q) for q in QUESTIONS) + "\n\n")
    services = Services(cfg, paths, embedder=emb, reranker=None, hyde=None)
    yield cfg, services, qfile
    services.close()


def judge(server, name):
    return provider_for(server, name)


def evaluate(world, server, name):
    cfg, services, qfile = world

    async def go():
        j = judge(server, name)

        async def answer(q):
            res = await services.search_async(q, None, 10)
            return await ask(q, list(res["results"]), cfg)

        try:
            return await A.evaluate(A.load(qfile), answer, j, samples=200)
        finally:
            await j.aclose()

    return asyncio.run(go())


@pytest.mark.parametrize("name", PROVIDERS)
def test_metric_math_on_known_judge_replies(world, server, name):
    res = evaluate(world, server, name)
    rows = {r["question"]: r for r in res["per_question"]}
    assert res["questions"] == 3 and res["failed"] == 0 and res["judge"] == f"{name}:test-model"
    tea, bikes, cats = (rows[q["question"]] for q in QUESTIONS)
    for r in (tea, bikes, cats):
        assert r["scores"]["faithfulness"] == pytest.approx(2 / 3)  # 2 of 3 claims supported
        n = len(r["sources"])
        assert n >= 2 and r["scores"]["context_precision"] == pytest.approx(0.5)  # useful only at rank 2: 1/2
        assert r["scores"]["citations"] is not None
    assert tea["scores"]["answer_relevance"] == pytest.approx(0.8)
    assert tea["scores"]["context_recall"] == pytest.approx(0.75) and tea["recall_method"] == "judge"
    assert bikes["scores"]["context_recall"] == pytest.approx(0.5) and bikes["recall_method"] == "files"
    assert cats["scores"]["context_recall"] is None and cats["recall_method"] is None
    # the bicycle question's relevance reply is no JSON: recorded, left out of the mean, run goes on
    assert bikes["scores"]["answer_relevance"] is None and "no JSON" in bikes["errors"]["answer_relevance"]
    m = res["metrics"]
    assert m["answer_relevance"] == {**m["answer_relevance"], "mean": pytest.approx(0.8), "n": 2, "errors": 1}
    assert m["context_recall"]["n"] == 2 and m["context_recall"]["mean"] == pytest.approx(0.625)
    assert m["faithfulness"]["lo"] <= m["faithfulness"]["mean"] <= m["faithfulness"]["hi"]
    # answer + faithfulness + relevance + precision for each, recall for the one with a reference
    assert len(server.requests) == 3 * 4 + 1


def test_a_judge_error_on_one_question_is_recorded_and_the_run_goes_on(world, server):
    server.push({}, {"status": 500})  # the first question's answer, then its faithfulness call
    res = evaluate(world, server, "anthropic")
    first = res["per_question"][0]
    assert first["scores"]["faithfulness"] is None and "faithfulness" in first["errors"]
    assert first["scores"]["answer_relevance"] == pytest.approx(0.8)  # its later metrics still ran
    assert res["metrics"]["faithfulness"]["n"] == 2 and res["metrics"]["faithfulness"]["errors"] == 1


def test_a_failed_answer_is_recorded(world, server):
    server.push({"status": 500})  # the first question's answering call: a passing server error
    res = evaluate(world, server, "openai")
    first = res["per_question"][0]
    assert res["failed"] == 1 and first["error"]["code"] and all(v is None for v in first["scores"].values())
    assert res["metrics"]["faithfulness"]["n"] == 2


def test_a_rejected_key_of_the_answering_model_on_the_first_question_stops_the_run(world, server):
    server.push({"status": 401})
    with pytest.raises(ProviderAuthError, match="stopped at the first question: the answering model"):
        evaluate(world, server, "openai")
    assert len(server.requests) == 1  # nothing after it: no judge call, no second question


def test_a_rejected_judge_key_on_the_first_question_stops_the_run(world, server):
    server.push({}, {"status": 401})  # the first answer, then the judge's first call
    with pytest.raises(ProviderAuthError, match=r"stopped at the first question: the judge anthropic:test-model"):
        evaluate(world, server, "anthropic")
    assert len(server.requests) == 2


def test_a_refusal_is_not_judged_for_faithfulness(world, server):
    from ragweedd.answer.prompts import REFUSAL

    judge_asks = ("Here are numbered sources and an answer", "Rate from 0 to 10", "useful for answering",
                  "Split the reference answer")

    def refusing(provider, messages):
        p = messages[-1]["content"]
        return reply(provider, messages) if any(m in p for m in judge_asks) else REFUSAL

    server.reply = refusing
    try:
        res = evaluate(world, server, "openai")
    finally:
        server.reply = reply
    assert all(r["refused"] for r in res["per_question"])
    assert all(r["not_applicable"] == ["faithfulness"] and r["scores"]["faithfulness"] is None
               for r in res["per_question"])
    assert res["metrics"]["faithfulness"] == {**res["metrics"]["faithfulness"], "n": 0, "errors": 0,
                                              "not_applicable": 3}
    assert not any(m["content"].startswith("Here are numbered sources")
                   for q in server.requests for m in q.get("messages") or [] if isinstance(m.get("content"), str))
    assert "faithfulness: N/A for 3 refused answer(s), not judged" in A.table(res)


def test_average_precision():
    assert A.average_precision([1, 0, 1]) == pytest.approx((1 + 2 / 3) / 2)
    assert A.average_precision([0, 0]) == 0.0 and A.average_precision([0, 1, 1]) == pytest.approx((1 / 2 + 2 / 3) / 2)
    with pytest.raises(A.JudgeError, match="2 numbers"):
        A.score_precision('{"verdicts": [1]}', 2)
    with pytest.raises(A.JudgeError, match="from 0 to 10"):
        A.score_relevance('{"score": 11}')
    assert A.score_faithfulness('{"claims": []}') is None


@pytest.mark.parametrize("line, why", [
    ("not json", "line 2: not JSON"),
    ("[1, 2]", "line 2: a line must be a JSON object"),
    ('{"reference": "x"}', "line 2: 'question' must be a non-empty string"),
    ('{"question": "q", "reference": 3}', "line 2: 'reference' must be a non-empty string"),
    ('{"question": "q", "relevant": "a.txt"}', "line 2: 'relevant' must be a list"),
    ('{"question": "q", "relevant": [7]}', "line 2: 'relevant' holds 7"),
    ('{"question": "q", "answer": "a"}', "line 2: unknown field(s) answer"),
])
def test_bad_lines_name_their_number(tmp_path, line, why):
    f = tmp_path / "q.jsonl"
    f.write_text('{"question": "fine"}\n' + line + "\n")
    with pytest.raises(RequestError, match=re.escape(why)):
        A.load(f)


def test_empty_and_missing_files(tmp_path):
    (tmp_path / "e.jsonl").write_text("\n\n")
    with pytest.raises(RequestError, match="holds no questions"):
        A.load(tmp_path / "e.jsonl")
    with pytest.raises(RequestError, match="cannot read"):
        A.load(tmp_path / "nope.jsonl")


def _args(qfile, **kw):
    base = dict(eval_cmd="answers", file=str(qfile), collection=None, judge=None, tree=None, top_k=10,
                limit=None, json=False, out=None)
    return argparse.Namespace(**{**base, **kw})


def test_the_command_prints_a_table_and_writes_json(world, server, tmp_path, capsys):
    cfg, _, qfile = world
    out = tmp_path / "res.json"
    assert eval_run(cfg, _args(qfile, out=str(out), judge="openai:test-model")) == 0
    table = capsys.readouterr().out
    assert "3 questions (0 failed to answer), judge openai:test-model" in table
    assert re.search(r"answer_relevance\s+0\.800\s+\[0\.800, 0\.800\]\s+2\s+1", table)
    assert re.search(r"context_recall\s+0\.625\s+\[0\.500, 0\.750\]\s+2\s+0", table)
    # the judge's reply about the bicycle question was no rating: counted, and the first one quoted
    assert "1 error(s); the first, answer_relevance of question 2: the judge's reply holds no JSON" in table
    saved = json.loads(out.read_text())
    assert saved["metrics"]["faithfulness"]["n"] == 3 and len(saved["per_question"]) == 3
    assert saved["collections"] is None and saved["mode"] == "hybrid"


def test_the_command_needs_a_judge_and_a_known_collection(world):
    import dataclasses

    cfg, _, qfile = world
    with pytest.raises(RequestError, match="needs a judge LLM"):
        eval_run(dataclasses.replace(cfg, llm_synthesis=""), _args(qfile))
    with pytest.raises(NotFoundError, match="collection 'nope'"):
        eval_run(cfg, _args(qfile, collection=["nope"]))


def test_an_unknown_judge_model_fails_fast_with_the_fix(world, server):
    import dataclasses

    cfg, _, qfile = world
    cfg = dataclasses.replace(cfg, embed_ollama_url=server.url)
    with pytest.raises(ProviderModelMissing) as e:
        eval_run(cfg, _args(qfile, judge="ollama:nosuch"))
    assert "stopped at the first question: the judge ollama:nosuch failed" in e.value.message
    assert "nosuch" in e.value.message and "--judge" in e.value.hint and e.value.exit_code == 1
    asked = [r for r in server.requests if "nosuch" in json.dumps(r, default=str)]
    assert len(asked) == 1  # one judge call, then the stop


def test_an_unreachable_judge_fails_fast(world, server):
    import dataclasses
    import socket

    cfg, _, qfile = world
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    cfg = dataclasses.replace(cfg, embed_ollama_url=f"http://127.0.0.1:{port}")
    with pytest.raises(RagweedError, match="stopped at the first question: the judge ollama:test-model failed"):
        eval_run(cfg, _args(qfile, judge="ollama:test-model"))


def test_eval_answers_takes_dash_c_as_ask_does():
    from ragweedd.cli.command import build_parser

    args = build_parser().parse_args(["eval", "answers", "q.jsonl", "-c", "lab", "-c", "notes"])
    assert args.collection == ["lab", "notes"]
    args = build_parser().parse_args(["eval", "questions", "q.jsonl", "-c", "lab"])
    assert args.collection == ["lab"]
