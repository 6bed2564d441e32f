"""Each provider through its official SDK (or aiohttp for Ollama) against a local server speaking its
wire protocol: streaming, whole replies, stop reasons, usage, and every error a user can meet."""

from __future__ import annotations

import asyncio
import time

import pytest

from ragweedd.config import default_config  # noqa: E402
from ragweedd.errors import (  # noqa: E402
    ConfigError,
    ProviderAuthError,
    ProviderError,
    ProviderModelMissing,
    ProviderRateLimited,
    ProviderTimeout,
)
from ragweedd.llm import make_provider  # noqa: E402
from tests.fakes.llm_server import API_KEY, FakeLLMServer  # noqa: E402

PROVIDERS = ["anthropic", "openai", "gemini", "ollama"]
ENV = {"ANTHROPIC_API_KEY": API_KEY, "OPENAI_API_KEY": API_KEY, "GEMINI_API_KEY": API_KEY}
MSGS = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Say hello."}]


@pytest.fixture(scope="module")
def server():
    with FakeLLMServer(models=("test-model", "gemma3:1b")) as srv:
        yield srv


@pytest.fixture(autouse=True)
def _clean(server):
    server.script.clear()
    server.requests.clear()
    server.reply = lambda provider, messages: f"Hello from {provider}, a reply long enough to stream."
    yield


def _url(server, provider):
    return server.url + "/v1" if provider == "openai" else server.url


def _provider(server, provider, model="test-model", env=ENV, **kw):
    kw.setdefault("retry_backoff_s", 0.01)
    kw.setdefault("timeout_s", 10)
    return make_provider(f"{provider}:{model}", default_config(), env=env, base_url=_url(server, provider), **kw)


def run(coro):
    return asyncio.run(coro)


async def _use(p, fn):
    try:
        return await fn(p)
    finally:
        await p.aclose()


@pytest.mark.parametrize("provider", PROVIDERS)
def test_stream_yields_pieces_then_stop_and_usage(server, provider):
    p = _provider(server, provider)

    async def go(p):
        return [c async for c in p.stream(MSGS, max_tokens=100, temperature=0.3)]

    chunks = run(_use(p, go))
    text = "".join(c.text for c in chunks)
    assert text == f"Hello from {provider}, a reply long enough to stream."
    assert len([c for c in chunks if c.text]) > 3, "the reply must arrive in several pieces"
    assert chunks[-1].stop_reason == "end"
    assert chunks[-1].usage["output_tokens"] > 0 and chunks[-1].usage["input_tokens"] > 0
    req = server.requests[-1]
    assert req["stream"] is True
    # the system prompt reached the provider in its own protocol's place, and so did the user turn
    assert req["messages"][0] == {"role": "system", "content": "You are terse."}
    assert req["messages"][-1] == {"role": "user", "content": "Say hello."}
    assert req["max_tokens"] == 100


@pytest.mark.parametrize("provider", PROVIDERS)
def test_complete_reports_max_tokens_stop(server, provider):
    p = _provider(server, provider)
    r = run(_use(p, lambda p: p.complete(MSGS, max_tokens=3, temperature=1.0)))
    assert r.stop_reason == "max_tokens"
    assert r.text == f"Hello from {provider}, a reply long enough to stream."[:12]
    assert r.model == "test-model"
    assert set(r.usage) == {"input_tokens", "output_tokens"}


@pytest.mark.parametrize("provider", PROVIDERS)
def test_assistant_turn_is_sent_back_in_the_provider_format(server, provider):
    msgs = MSGS + [{"role": "assistant", "content": "Hel"}, {"role": "user", "content": "Continue."}]
    p = _provider(server, provider)
    run(_use(p, lambda p: p.complete(msgs, max_tokens=50, temperature=1.0)))
    assert server.requests[-1]["messages"][-2] == {"role": "assistant", "content": "Hel"}


@pytest.mark.parametrize("provider", ["anthropic", "openai", "gemini"])
def test_bad_key_is_an_auth_error_naming_provider_model_and_fix(server, provider):
    p = _provider(server, provider, env={k: "wrong" for k in ENV})
    with pytest.raises(ProviderAuthError) as ei:
        run(_use(p, lambda p: p.complete(MSGS, max_tokens=10, temperature=1.0)))
    msg = str(ei.value)
    assert provider in msg and "test-model" in msg and "API_KEY" in msg
    assert "wrong" not in msg, "the key must never appear in messages"
    assert len(server.requests) == 1, "auth errors are not retried"


def test_missing_key_fails_before_any_request(server):
    with pytest.raises(ProviderAuthError, match="ANTHROPIC_API_KEY"):
        make_provider("anthropic:test-model", default_config(), env={})
    with pytest.raises(ProviderAuthError, match="GEMINI_API_KEY or GOOGLE_API_KEY"):
        make_provider("gemini:test-model", default_config(), env={})
    assert server.requests == []


def test_google_api_key_is_accepted_for_gemini(server):
    p = _provider(server, "gemini", env={"GOOGLE_API_KEY": API_KEY})
    r = run(_use(p, lambda p: p.complete(MSGS, max_tokens=50, temperature=1.0)))
    assert r.text.startswith("Hello from gemini")


def test_openai_compatible_server_without_key(server):
    # a local OpenAI-compatible server (llama.cpp, vLLM) often takes no key: the base URL is enough
    srv_key = server.api_key
    server.api_key = "not-needed"
    try:
        p = _provider(server, "openai", env={})
        r = run(_use(p, lambda p: p.complete(MSGS, max_tokens=50, temperature=1.0)))
    finally:
        server.api_key = srv_key
    assert r.text.startswith("Hello from openai")


@pytest.mark.parametrize("provider", PROVIDERS)
def test_rate_limit_then_success_is_retried_with_backoff(server, provider):
    server.push({"status": 429}, {"status": 429})
    p = _provider(server, provider, max_retries=3, retry_backoff_s=0.05)
    t0 = time.monotonic()
    r = run(_use(p, lambda p: p.complete(MSGS, max_tokens=50, temperature=1.0)))
    assert r.text.startswith(f"Hello from {provider}")
    assert len(server.requests) == 3
    assert p.calls == 3
    gaps = [b["time"] - a["time"] for a, b in zip(server.requests, server.requests[1:])]
    assert gaps[0] >= 0.03 and gaps[1] >= 0.07, f"backoff should double: {gaps}"
    assert time.monotonic() - t0 < 5


@pytest.mark.parametrize("provider", PROVIDERS)
def test_rate_limit_forever_raises_rate_limited(server, provider):
    server.push(*[{"status": 429}] * 10)
    p = _provider(server, provider, max_retries=2)
    with pytest.raises(ProviderRateLimited) as ei:
        run(_use(p, lambda p: p.complete(MSGS, max_tokens=50, temperature=1.0)))
    assert len(server.requests) == 3
    assert provider in str(ei.value) and "test-model" in str(ei.value) and "2 retries" in str(ei.value)
    assert ei.value.http_status == 429


@pytest.mark.parametrize("provider", PROVIDERS)
def test_unknown_model_is_model_missing(server, provider):
    p = _provider(server, provider, model="no-such-model")
    with pytest.raises(ProviderModelMissing) as ei:
        run(_use(p, lambda p: p.complete(MSGS, max_tokens=50, temperature=1.0)))
    assert "no-such-model" in str(ei.value) and provider in str(ei.value)
    assert len(server.requests) == 1


@pytest.mark.parametrize("provider", PROVIDERS)
def test_server_that_never_answers_times_out(server, provider):
    server.push({"stall": True})
    p = _provider(server, provider, timeout_s=1.0)
    t0 = time.monotonic()
    with pytest.raises(ProviderTimeout) as ei:
        run(_use(p, lambda p: p.complete(MSGS, max_tokens=50, temperature=1.0)))
    assert time.monotonic() - t0 < 6
    assert "1 s" in str(ei.value) and "llm.timeout_s" in str(ei.value)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_server_error_is_a_provider_error(server, provider):
    server.push({"status": 500, "message": "boom"})
    p = _provider(server, provider, max_retries=0)
    with pytest.raises(ProviderError) as ei:
        run(_use(p, lambda p: p.complete(MSGS, max_tokens=50, temperature=1.0)))
    assert type(ei.value) is ProviderError
    assert provider in str(ei.value)


def test_ollama_model_name_with_tag(server):
    p = _provider(server, "ollama", model="gemma3:1b")
    assert p.model == "gemma3:1b"
    r = run(_use(p, lambda p: p.complete(MSGS, max_tokens=50, temperature=1.0)))
    assert server.requests[-1]["model"] == "gemma3:1b"
    assert r.stop_reason == "end"


def test_ollama_unreachable_is_a_clear_error():
    cfg = default_config()
    p = make_provider("ollama:gemma3:1b", cfg, base_url="http://127.0.0.1:9", timeout_s=2, max_retries=0)
    with pytest.raises(ProviderError, match="ollama serve"):
        run(_use(p, lambda p: p.complete(MSGS, max_tokens=5, temperature=1.0)))


@pytest.mark.parametrize("spec", ["", "anthropic", "mistral:x", "openai:", 42])
def test_bad_spec_is_a_config_error(spec):
    with pytest.raises(ConfigError):
        make_provider(spec, default_config(), env=ENV)
