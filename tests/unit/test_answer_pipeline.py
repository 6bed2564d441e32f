"""answer_question / ask / continue_answer with FakeChatProvider (the real SDK paths are in
tests/integration/test_llm_answer.py)."""

import asyncio
import dataclasses
import json
import re

import pytest
from fake_chat import FakeChatProvider

from ragweedd.answer import NO_LLM_LABEL, REFUSAL, answer_question, ask, ask_continue
from ragweedd.answer.annotate import annotate, compile_irrelevant
from ragweedd.answer.prompts import CONTINUE_PROMPT, load_prompts
from ragweedd.config import default_config, load_config
from ragweedd.errors import ProviderAuthError, ProviderTimeout, RequestError
from ragweedd.llm import ChatResult

CFG = default_config()


def hits(n=4, chars=2000):
    return [{"embedding_id": 100 + i, "collection": "notes", "doc_id": f"{i:032x}", "source_file": f"/home/u/n/f{i}.md",
             "filename": f"f{i}.md", "source_rel_path": f"f{i}.md",
             "text": (f"Chunk {i} says cats purr when content. " * 100)[:chars],
             "score": 0.9 - i / 10, "rel_score": 1 - i / max(1, n - 1), "page_label": str(i + 1) if i % 2 else None,
             "section": None, "span": [0, chars], "t_start": None, "t_end": None, "member": None} for i in range(n)]


def irrelevant_for(*idx):
    def reply(messages):
        m = re.search(r"Chunk (\d+)", messages[0]["content"])
        return "[IRRELEVANT!!!]" if m and int(m.group(1)) in idx else f'"{m.group(0)} says cats purr" is on topic.'
    return reply


def events(query, hs, cfg=CFG, **kw):
    async def go():
        return [e async for e in answer_question(query, hs, cfg, **kw)]
    return asyncio.run(go())


def test_no_provider_gives_labelled_cited_passages():
    evs = events("do cats purr?", hits(7))
    done = evs[-1]
    assert [e["type"] for e in evs] == ["sources", "context", "token", "done"]
    assert done["mode"] == "passages" and done["label"] == NO_LLM_LABEL
    assert done["answer"].startswith(NO_LLM_LABEL)
    assert "[1] notes/f0.md" in done["answer"] and "[2] notes/f1.md [p.2]" in done["answer"]
    assert done["cited_numbers"] == [1, 2, 3, 4, 5], "top five passages, each cited"
    assert done["provider"] is None and done["llm_calls"] == 0 and not done["refused"]


def test_no_hits_and_no_provider_is_a_refusal_without_calls():
    done = asyncio.run(ask("anything?", [], CFG))
    assert done["mode"] == "empty" and done["answer"] == REFUSAL and done["refused"] and done["cited"] == []


def test_full_answer_events_and_history_record():
    ann = FakeChatProvider("ann", default=irrelevant_for(2))
    syn = FakeChatProvider("syn", ["Cats purr [1]. They also purr when content [2][3]. Dogs bark [9]."])
    evs = events("do cats purr?", hits(4), annotator=ann, synthesizer=syn)
    types = [e["type"] for e in evs]
    assert types[0] == "sources" and types.count("annotation") == 4
    assert types.index("context") > max(i for i, t in enumerate(types) if t == "annotation")
    assert types[-1] == "done" and "token" in types
    done = evs[-1]
    assert "".join(e["text"] for e in evs if e["type"] == "token") == done["answer"]
    # the irrelevant chunk is filtered out of the prompt but kept in the record
    assert [f["embedding_id"] for f in done["filtered"]] == [102]
    assert [s["embedding_id"] for s in done["sources"]] == [100, 101, 103]
    assert "Chunk 2" not in syn.requests[0][-1]["content"]
    assert done["cited_numbers"] == [1, 2, 3] and done["invalid_citations"] == [9]
    assert [c["embedding_id"] for c in done["cited"]] == [100, 101, 103]
    for key in ("query", "retrieved", "annotations", "filtered", "answer", "provider", "model", "timings", "usage",
                "annotation_provider", "stop_reason", "llm_calls"):
        assert key in done, key
    assert done["provider"] == "fake:syn" and done["annotation_provider"] == "fake:ann"
    assert done["llm_calls"] == 5 and done["stop_reason"] == "end" and not done["continuable"]
    relevant = {a["embedding_id"]: a["relevant"] for a in done["annotations"]}
    assert relevant == {100: True, 101: True, 102: False, 103: True}
    u = done["usage"]
    assert u["input_tokens"] == u["by_stage"]["annotation"]["input_tokens"] + u["by_stage"]["synthesis"]["input_tokens"]
    assert u["by_stage"]["synthesis"]["output_tokens"] > 0
    assert set(done["timings"]) >= {"annotate_ms", "synthesize_ms"}
    json.dumps(done)  # the history stores it as JSON


def test_synthesis_prompt_layout_and_parameters():
    syn = FakeChatProvider("syn", ["ok [1]."])
    asyncio.run(ask("why?", hits(2), CFG, synthesizer=syn))
    system, user = syn.requests[0]
    assert system["role"] == "system" and REFUSAL in system["content"]
    assert user["content"].index("[1] SOURCE: notes/f0.md\n") < user["content"].index("[2] SOURCE: notes/f1.md [p.2]\n")
    assert "QUESTION: why?" in user["content"]
    assert syn.params == [{"max_tokens": CFG.max_tokens, "temperature": CFG.llm_synthesis_temperature}]


def test_annotation_parameters_and_content_limit():
    ann = FakeChatProvider("ann", default="fine")
    hs = hits(1, chars=5000)
    hs[0]["text"] = "A" * 1200 + "TAILMARK" + "B" * 100
    asyncio.run(ask("q?", hs, CFG, annotator=ann, synthesizer=FakeChatProvider(default="x [1].")))
    prompt = ann.requests[0][0]["content"]
    assert "A" * 1200 in prompt and "TAILMARK" not in prompt and "QUESTION: q?" in prompt
    assert ann.params == [{"max_tokens": 200, "temperature": 1.0}]


def test_annotation_concurrency_is_bounded():
    cfg = dataclasses.replace(CFG, annotation_concurrency=3)
    ann = FakeChatProvider("ann", default="ok", delay_s=0.05)
    asyncio.run(ask("q", hits(10), cfg, annotator=ann))
    assert ann.max_in_flight == 3 and len(ann.requests) == 10


def test_irrelevant_pattern_and_flags_are_configurable():
    cfg = load_config(text='annotation_irrelevant_re = "^nope"\nannotation_irrelevant_flags = "MULTILINE"', env={})
    ann = FakeChatProvider("ann", ["fine", "blah\nnope", "NOPE", "nope!"])
    done = asyncio.run(ask("q", hits(4), cfg, annotator=ann, synthesizer=FakeChatProvider(default="a [1].")))
    # annotations complete in order here, so replies map to chunks 0..3; "NOPE" stays (case-sensitive)
    assert sorted(f["embedding_id"] for f in done["filtered"]) == [101, 103]
    pat = compile_irrelevant(r"\[irrelevant!!!\]", "IGNORECASE")
    assert pat.search("[IRRELEVANT!!!]") and not compile_irrelevant(r"\[irrelevant!!!\]", "").search("[IRRELEVANT!!!]")


def test_all_filtered_means_refusal_without_synthesis_call():
    ann = FakeChatProvider("ann", default="[IRRELEVANT!!!]")
    syn = FakeChatProvider("syn", default="should not be called")
    done = asyncio.run(ask("q", hits(3), CFG, annotator=ann, synthesizer=syn))
    assert done["answer"] == REFUSAL and done["refused"] and done["mode"] == "empty"
    assert syn.requests == [] and len(done["filtered"]) == 3


def test_model_refusal_is_flagged():
    syn = FakeChatProvider("syn", [REFUSAL])
    done = asyncio.run(ask("what is the airspeed of a swallow?", hits(2), CFG, synthesizer=syn))
    assert done["refused"] and done["refused_only"] and done["cited"] == []
    syn2 = FakeChatProvider("syn", [f"Cats purr [1]. {REFUSAL}"])
    done2 = asyncio.run(ask("q", hits(2), CFG, synthesizer=syn2))
    assert done2["refused"] and not done2["refused_only"] and done2["cited_numbers"] == [1]


def test_failed_annotation_call_keeps_chunk_and_records_error():
    ann = FakeChatProvider("ann", [ProviderTimeout("slow"), "good"], max_retries=0)
    out = asyncio.run(annotate("q", hits(2), ann, load_prompts(None).annotation, concurrency=1,
                               irrelevant=compile_irrelevant(r"\[IRRELEVANT!!!\]")))
    assert [h["embedding_id"] for h in out.kept] == [100, 101] and out.filtered == []
    assert out.errors == [{"embedding_id": 100, "error": "slow"}] and out.calls == 2


def test_bad_annotation_key_fails_the_answer():
    ann = FakeChatProvider("ann", [ProviderAuthError("bad key")], default="ok")
    with pytest.raises(ProviderAuthError):
        asyncio.run(ask("q", hits(3), CFG, annotator=ann, synthesizer=FakeChatProvider(default="x")))


def test_continuation_after_max_tokens():
    syn = FakeChatProvider("syn", [ChatResult("Cats purr [1].", "max_tokens"), "They sleep a lot [2]."])
    done = asyncio.run(ask("cats?", hits(3), CFG, synthesizer=syn))
    assert done["stop_reason"] == "max_tokens" and done["continuable"]
    state = json.loads(json.dumps(done["state"]))  # survives storage as JSON
    evs = []

    async def go():
        from ragweedd.answer import continue_answer
        async for e in continue_answer(state, CFG, synthesizer=syn):
            evs.append(e)

    asyncio.run(go())
    done2 = evs[-1]
    assert done2["answer"] == "Cats purr [1]. They sleep a lot [2]."
    assert "".join(e["text"] for e in evs if e["type"] == "token") == " They sleep a lot [2]."
    assert done2["cited_numbers"] == [1, 2] and done2["stop_reason"] == "end" and not done2["continuable"]
    assert done2["continuations"] == 1 and done2["llm_calls"] == 2
    second = syn.requests[1]
    assert second[:2] == syn.requests[0]
    assert second[2] == {"role": "assistant", "content": "Cats purr [1]."}
    assert second[3] == {"role": "user", "content": CONTINUE_PROMPT}


def test_continuation_mid_word_does_not_insert_space():
    syn = FakeChatProvider("syn", [ChatResult("Cats pu", "max_tokens"), ChatResult("rr [1] a", "max_tokens"),
                                   "nd sleep."])
    done = asyncio.run(ask("cats?", hits(2), CFG, synthesizer=syn))
    done = asyncio.run(ask_continue(done["state"], CFG, synthesizer=syn))
    assert done["continuable"] and done["continuations"] == 1
    done = asyncio.run(ask_continue(done["state"], CFG, synthesizer=syn))
    assert done["answer"] == "Cats purr [1] and sleep." and done["continuations"] == 2
    assert syn.requests[2][2]["content"] == "Cats purr [1] a"


@pytest.mark.parametrize("state", [None, {}, {"messages": []}, {"answer": "x"}])
def test_continue_with_bad_state_is_a_request_error(state):
    with pytest.raises(RequestError, match="cannot be continued"):
        asyncio.run(ask_continue(state, CFG, synthesizer=FakeChatProvider(default="x")))


def test_annotation_and_synthesis_use_their_own_prompts(tmp_path):
    (tmp_path / "prompts.json").write_text(json.dumps({
        "fake:ann": {"annotation": "ANNPROMPT {QUERY} {CONTENT}", "synthesis": "WRONG {SOURCES} {QUERY}"},
        "fake:syn": {"synthesis": "SYNPROMPT {QUERY}\n{SOURCES}", "synthesis_system": ""},
    }))
    ann, syn = FakeChatProvider("ann", default="ok"), FakeChatProvider("syn", default="a [1].")
    asyncio.run(ask("q", hits(1), CFG, annotator=ann, synthesizer=syn, config_dir=tmp_path))
    assert ann.requests[0][0]["content"].startswith("ANNPROMPT q")
    assert len(syn.requests[0]) == 1 and syn.requests[0][0]["content"].startswith("SYNPROMPT q\n[1] SOURCE:")


def test_providers_built_from_config_when_not_given():
    cfg = dataclasses.replace(CFG, llm_synthesis="mistral:large")
    from ragweedd.errors import ConfigError
    with pytest.raises(ConfigError, match="llm.synthesis"):
        asyncio.run(ask("q", hits(1), cfg))


def test_prompts_default_to_the_config_files_directory(tmp_path):
    (tmp_path / "config.toml").write_text("max_tokens = 512\n")
    (tmp_path / "annotation_prompt.txt").write_text("BESIDE {QUERY} {CONTENT}")
    cfg = load_config(tmp_path / "config.toml", env={})
    ann = FakeChatProvider("ann", default="ok")
    asyncio.run(ask("q", hits(1), cfg, annotator=ann))
    assert ann.requests[0][0]["content"].startswith("BESIDE q")
    (tmp_path / "annotation_prompt.txt").write_text("no tokens here")
    from ragweedd.errors import ConfigError
    with pytest.raises(ConfigError, match="annotation_prompt.txt"):
        asyncio.run(ask("q", hits(1), cfg, annotator=ann))
