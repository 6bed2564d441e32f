"""Verified citations on whole answers through the official SDKs against the local wire-protocol
server: the done event and the history record carry a check per citation, the optional entailment
model turns a claim the terms accept into an unsupported one, a failing entailment model leaves the
deterministic verdicts, and both CLIs mark what is unsupported."""

from __future__ import annotations

import asyncio
import dataclasses
import io

import pytest

from ragweedd.answer import answer_question  # noqa: E402
from ragweedd.cli.ask import print_sources  # noqa: E402
from ragweedd.cli.ctl_text import print_citation_checks  # noqa: E402
from ragweedd.config import default_config  # noqa: E402
from tests.hashed_world import llm_server_fixtures, provider_for  # noqa: E402

PROVIDERS = ["anthropic", "openai", "gemini", "ollama"]
TEXTS = ["Acme Corp reported revenue of $4.2 billion in fiscal 2022. Operating margin fell to 18.5%.",
         "The pump in hall B failed at 12 bar after the relief valve stuck."]
ANSWER = ("Acme Corp's revenue was $4.2 billion in fiscal 2022 [1]. The pump failed at 14 bar [2]. "
          "Operating margin rose to 18.5% [1].")


def hits():
    return [{"embedding_id": i, "collection": "lab", "doc_id": f"{i:032x}", "source_file": f"/lab/r{i}.txt",
             "filename": f"r{i}.txt", "source_rel_path": f"r{i}.txt", "text": t, "score": 1 - i / 10,
             "rel_score": 1 - i / 2, "page_label": None, "section": None,
             "span": [100 * (i + 1), 100 * (i + 1) + len(t)], "t_start": None, "t_end": None, "member": None}
            for i, t in enumerate(TEXTS)]


def reply(provider, messages):
    last = messages[-1]["content"]
    if "Does the passage support" in last:
        return "no" if "rose" in last else "yes"
    return ANSWER


server, _clean = llm_server_fixtures(reply)


def provider(server, name, model="test-model"):
    return provider_for(server, name, model, default_config())


def run(server, syn_name, ent=None, cfg=None):
    cfg = cfg or default_config()

    async def go():
        syn = provider(server, syn_name)
        try:
            return [e async for e in answer_question("what happened?", hits(), cfg, synthesizer=syn, entailer=ent)]
        finally:
            await syn.aclose()
            if ent is not None:
                await ent.aclose()

    return asyncio.run(go())[-1]


@pytest.mark.parametrize("name", PROVIDERS)
def test_terms_flag_the_wrong_number_and_point_into_the_source(server, name):
    done = run(server, name)
    checks = done["citation_checks"]
    assert [(c["n"], c["supported"]) for c in checks] == [(1, True), (2, False), (1, True)]
    wrong = checks[1]
    assert wrong["claim"] == "The pump failed at 14 bar." and wrong["missing"][0] == "14"
    assert done["answer"][wrong["answer_span"][0]:wrong["answer_span"][1]].startswith("The pump failed at 14 bar")
    best = wrong["source_sentence"]
    a, b = best["offsets"]
    assert TEXTS[1][a:b] == best["text"] and best["span"] == [200 + a, 200 + b]
    assert done["citations_verified"] == {**done["citations_verified"], "method": "terms", "checked": 3,
                                          "supported": 2, "unsupported": 1}
    assert len(server.requests) == 1  # no entailment model: no extra call


@pytest.mark.parametrize("name", PROVIDERS)
def test_the_entailment_model_catches_what_terms_cannot(server, name):
    # "rose to 18.5%" holds every term of the source but says the opposite: only the model sees it
    done = run(server, "openai", ent=provider(server, name))
    checks = done["citation_checks"]
    assert [(c["n"], c["supported"]) for c in checks] == [(1, True), (2, False), (1, False)]
    assert checks[2]["entailed"] is False and checks[2]["method"] == "terms+llm" and checks[2]["missing"] == []
    assert checks[0]["entailed"] is True
    assert "entailed" not in checks[1]  # already unsupported: not asked
    ent = done["citations_verified"]["entailment"]
    assert ent["provider"] == f"{name}:test-model" and ent["calls"] == 2 and ent["input_tokens"] > 0
    assert done["citations_verified"]["method"] == "terms+llm"


def test_a_failing_entailment_model_keeps_the_deterministic_verdicts(server):
    done = run(server, "anthropic", ent=provider(server, "gemini", model="no-such-model"))
    assert [c["supported"] for c in done["citation_checks"]] == [True, False, True]
    assert done["citations_verified"]["entailment"]["error"]
    assert all("entailment_error" in c for c in done["citation_checks"] if c["supported"])


def test_off(server):
    done = run(server, "ollama", cfg=dataclasses.replace(default_config(), verify_citations=False))
    assert "citation_checks" not in done and "citations_verified" not in done


def test_the_cli_marks_unsupported_claims(server):
    done = run(server, "openai", ent=provider(server, "ollama"))
    out = io.StringIO()
    print_sources(done, out)
    text = out.getvalue()
    assert "Citation check (terms and an entailment model): 1 of 3 citations supported, 2 UNSUPPORTED:" in text
    assert "UNSUPPORTED [2] The pump failed at 14 bar." in text and "not in source 2: 14" in text
    assert "closest in [2]: The pump in hall B failed at 12 bar after the relief valve stuck." in text
    assert "UNSUPPORTED [1] Operating margin rose to 18.5%." in text
    assert "the entailment model says source 1 does not support it" in text
    quiet = io.StringIO()
    print_citation_checks({**done, "citation_checks": [c for c in done["citation_checks"] if c["supported"]],
                           "citations_verified": {**done["citations_verified"], "method": "terms"}}, quiet)
    assert quiet.getvalue().strip() == "Citation check (terms): 1 of 1 citations supported."


def test_an_entailment_reply_that_is_neither_yes_nor_no_keeps_the_terms_verdict(server):
    server.reply = lambda provider, messages: ("perhaps" if "Does the passage support" in messages[-1]["content"]
                                               else ANSWER)
    try:
        done = run(server, "openai", ent=provider(server, "anthropic"))
    finally:
        server.reply = reply
    assert [c["supported"] for c in done["citation_checks"]] == [True, False, True]
    assert "not yes or no" in done["citation_checks"][0]["entailment_error"]
    assert "not yes or no" in done["citations_verified"]["entailment"]["error"]


def test_a_citation_of_a_source_that_does_not_exist_is_unsupported(server):
    """[99] with two sources: the claim stands on nothing, and the check (and the CLI) say so."""
    server.reply = lambda provider, messages: ("Acme Corp's revenue was $4.2 billion in fiscal 2022 [1]. "
                                               "The relief valve was replaced in March [99].")
    try:
        done = run(server, "openai")
    finally:
        server.reply = reply
    assert done["invalid_citations"] == [99]
    ghost = [c for c in done["citation_checks"] if c["n"] == 99]
    assert len(ghost) == 1 and ghost[0]["supported"] is False and ghost[0]["no_source"] is True
    assert ghost[0]["claim"] == "The relief valve was replaced in March."
    assert done["citations_verified"]["unsupported"] == 1 and done["citations_verified"]["checked"] == 2
    out = io.StringIO()
    print_citation_checks(done, out)
    text = out.getvalue()
    assert "1 of 2 citations supported, 1 UNSUPPORTED:" in text
    assert "UNSUPPORTED [99] The relief valve was replaced in March." in text and "there is no source 99" in text
