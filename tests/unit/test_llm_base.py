"""The provider-independent parts: spec parsing, message checks, retry/backoff, FakeChatProvider."""

import asyncio
import sys
import time

import pytest
from fake_chat import FakeChatProvider

from ragweedd.config import default_config
from ragweedd.errors import ConfigError, ProviderAuthError, ProviderRateLimited, ProviderTimeout, RequestError
from ragweedd.llm import ChatProvider, ChatResult, make_provider, parse_spec

MSGS = [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize("spec,expected", [
    ("anthropic:claude-sonnet-4-5", ("anthropic", "claude-sonnet-4-5")),
    ("ollama:gemma3:1b", ("ollama", "gemma3:1b")),
    ("OpenAI:gpt-4o-mini", ("openai", "gpt-4o-mini")),
    ("gemini:gemini-2.5-flash", ("gemini", "gemini-2.5-flash")),
])
def test_parse_spec_splits_on_first_colon(spec, expected):
    assert parse_spec(spec) == expected


@pytest.mark.parametrize("spec", ["claude", "mistral:large", "ollama:", None, ":model"])
def test_bad_specs_name_the_key(spec):
    with pytest.raises(ConfigError, match="llm.annotation"):
        parse_spec(spec, "llm.annotation")


def test_importing_llm_and_answer_loads_no_sdk():
    import subprocess

    code = ("import sys, ragweedd.llm, ragweedd.answer; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('anthropic','openai','google','aiohttp')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"


def test_config_key_wins_over_environment_and_is_not_in_repr():
    cfg = default_config()
    p = make_provider("openai:gpt-x", cfg, env={"OPENAI_API_KEY": "sk-secret-env"})
    assert "sk-secret" not in repr(p) and p.spec == "openai:gpt-x"
    assert p._client.api_key == "sk-secret-env"
    import dataclasses

    cfg2 = dataclasses.replace(cfg, llm_openai_api_key="sk-from-config")
    assert make_provider("openai:gpt-x", cfg2, env={"OPENAI_API_KEY": "sk-env"})._client.api_key == "sk-from-config"


def test_ollama_url_comes_from_embed_ollama_url():
    import dataclasses

    cfg = dataclasses.replace(default_config(), embed_ollama_url="http://127.0.0.1:5555/")
    p = make_provider("ollama:gemma3:1b", cfg)
    assert p.base_url == "http://127.0.0.1:5555" and p.model == "gemma3:1b"


def test_fake_provider_is_a_chat_provider_and_streams():
    p = FakeChatProvider("unit", replies=["one two three"], chunk_chars=4)
    assert isinstance(p, ChatProvider)

    async def go():
        return [c async for c in p.stream(MSGS, max_tokens=10, temperature=0)]

    chunks = asyncio.run(go())
    assert [c.text for c in chunks[:-1]] == ["one ", "two ", "thre", "e"]
    assert chunks[-1].stop_reason == "end" and chunks[-1].usage["output_tokens"] > 0
    assert p.requests == [MSGS]


def test_fake_provider_cuts_at_max_tokens_and_honours_queued_result():
    p = FakeChatProvider(replies=["x" * 100, ChatResult("partial", "max_tokens")])
    r1 = asyncio.run(p.complete(MSGS, max_tokens=5, temperature=1))
    r2 = asyncio.run(p.complete(MSGS, max_tokens=5, temperature=1))
    assert (r1.text, r1.stop_reason) == ("x" * 20, "max_tokens")
    assert (r2.text, r2.stop_reason) == ("partial", "max_tokens")


def test_rate_limit_retries_with_exponential_backoff():
    p = FakeChatProvider(replies=[ProviderRateLimited("slow down")] * 3 + ["ok"], max_retries=3, retry_backoff_s=0.05)
    t0 = time.monotonic()
    r = asyncio.run(p.complete(MSGS, max_tokens=5, temperature=1))
    elapsed = time.monotonic() - t0
    assert r.text == "ok" and p.calls == 4
    # 0.05 + 0.1 + 0.2 = 0.35 s nominal, jitter 0.75..1.25
    assert 0.25 <= elapsed < 1.5


def test_rate_limit_gives_up_after_max_retries_with_clear_message():
    p = FakeChatProvider(replies=[ProviderRateLimited("429")] * 5, max_retries=2)
    with pytest.raises(ProviderRateLimited) as ei:
        asyncio.run(p.complete(MSGS, max_tokens=5, temperature=1))
    assert p.calls == 3
    assert "fake" in str(ei.value) and "2 retries" in str(ei.value) and "annotation_concurrency" in str(ei.value)


@pytest.mark.parametrize("exc", [ProviderAuthError("bad key"), ProviderTimeout("slow")])
def test_other_errors_are_not_retried(exc):
    p = FakeChatProvider(replies=[exc, "never"], max_retries=5)
    with pytest.raises(type(exc)):
        asyncio.run(p.complete(MSGS, max_tokens=5, temperature=1))
    assert p.calls == 1


@pytest.mark.parametrize("messages", [[], "hi", [{"role": "robot", "content": "x"}], [{"role": "user"}],
                                      [{"role": "user", "content": 3}], [{"role": "system", "content": "x"}]])
def test_malformed_messages_are_request_errors(messages):
    p = FakeChatProvider(default="x")
    with pytest.raises(RequestError):
        asyncio.run(p.complete(messages, max_tokens=5, temperature=1))
    assert p.calls == 0


@pytest.mark.parametrize("mt", [0, -1, 1.5, None])
def test_bad_max_tokens_is_a_request_error(mt):
    with pytest.raises(RequestError, match="max_tokens"):
        asyncio.run(FakeChatProvider(default="x").complete(MSGS, max_tokens=mt, temperature=1))
