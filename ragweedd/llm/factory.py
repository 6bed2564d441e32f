"""``make_provider("anthropic:MODEL", cfg)``: spec strings to providers (SDKs imported only here, lazily).

The spec splits on the FIRST colon, because Ollama model names carry tags ("ollama:gemma3:1b" is
provider "ollama", model "gemma3:1b").
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Mapping

from ragweedd.errors import ConfigError, InternalError, KeyFileError, ProviderAuthError
from ragweedd.keyfile import KEY_PROVIDERS, keys_file, read_keys
from ragweedd.llm.base import BaseProvider
from ragweedd.llm.ollama_provider import OllamaProvider

if TYPE_CHECKING:
    from ragweedd.config import Config

PROVIDERS = ("anthropic", "openai", "gemini", "ollama")


def parse_spec(spec: str, key: str = "llm.synthesis") -> tuple[str, str]:
    if not isinstance(spec, str) or ":" not in spec:
        raise ConfigError(
            f"key '{key}' has value {spec!r}; allowed: 'PROVIDER:MODEL' with PROVIDER one of {', '.join(PROVIDERS)}",
            hint="e.g. 'anthropic:claude-sonnet-4-5' or 'ollama:gemma3:1b'",
        )
    provider, _, model = spec.partition(":")
    provider = provider.strip().lower()
    model = model.strip()
    if provider not in PROVIDERS:
        raise ConfigError(f"key '{key}' names the unknown provider {provider!r}; allowed: {', '.join(PROVIDERS)}")
    if not model:
        raise ConfigError(f"key '{key}' has value {spec!r} with no model after '{provider}:'",
                          hint=f"write '{provider}:MODEL'")
    return provider, model


def _key(cfg: Config | None, attr: str, env: Mapping[str, str], names: tuple[str, ...], provider: str, model: str,
         optional: bool = False) -> str:
    """The key of ``provider``: the config's, else the environment's, else the keys file's
    (ragweedd/keyfile.py; read at every call, so ``ragweedctl keys set`` needs no restart).
    ``optional``: "" when there is none (but a keys file that cannot be used is still an error)."""

    explicit = getattr(cfg, attr, "") if cfg is not None else ""
    if explicit:
        return explicit
    for n in names:
        if env.get(n):
            return env[n]
    try:
        stored = read_keys().get(provider)
    except KeyFileError as e:
        raise ProviderAuthError(f"{provider}: no usable API key for model '{model}': {e.message}",
                                hint=f"{e.hint}; or set the key in the config or environment") from None
    if stored or optional:
        return stored or ""
    raise ProviderAuthError(
        f"{provider}: no API key for model '{model}'",
        hint=f"run `ragweedctl keys set {provider}` (stored in {keys_file()}, which the daemon reads), "
             f"set {' or '.join(names)} in the daemon's environment, "
             f"or llm.{attr.removeprefix('llm_')} in the config file",
    )


def make_provider(spec: str, cfg: Config | None = None, *, env: Mapping[str, str] | None = None,
                  key: str = "llm.synthesis", **overrides: Any) -> BaseProvider:
    """Build the provider named by ``spec``. ``overrides`` (timeout_s, max_retries, retry_backoff_s,
    base_url) win over the config; tests use them for short timeouts and local servers."""
    env = os.environ if env is None else env
    provider, model = parse_spec(spec, key)
    common = {
        "timeout_s": overrides.pop("timeout_s", getattr(cfg, "llm_timeout_s", 120.0)),
        "max_retries": overrides.pop("max_retries", getattr(cfg, "llm_max_retries", 4)),
        "retry_backoff_s": overrides.pop("retry_backoff_s", getattr(cfg, "llm_retry_backoff_s", 1.0)),
    }
    base_url = overrides.pop("base_url", None)
    if overrides:
        raise InternalError(f"unexpected overrides for {provider}: {sorted(overrides)}")
    if provider == "anthropic":
        from ragweedd.llm.anthropic_provider import AnthropicProvider

        api_key = _key(cfg, "llm_anthropic_api_key", env, KEY_PROVIDERS["anthropic"], provider, model)
        return AnthropicProvider(model, api_key=api_key, base_url=base_url, **common)
    if provider == "openai":
        from ragweedd.llm.openai_provider import OpenAIProvider

        base_url = base_url or getattr(cfg, "llm_openai_base_url", "") or None
        # local OpenAI-compatible servers (llama.cpp, vLLM) usually take no key
        api_key = _key(cfg, "llm_openai_api_key", env, KEY_PROVIDERS["openai"], provider, model,
                       optional=bool(base_url)) or "not-needed"
        return OpenAIProvider(model, api_key=api_key, base_url=base_url, **common)
    if provider == "gemini":
        from ragweedd.llm.gemini_provider import GeminiProvider

        api_key = _key(cfg, "llm_gemini_api_key", env, KEY_PROVIDERS["gemini"], provider, model)
        return GeminiProvider(model, api_key=api_key, base_url=base_url, **common)

    url = base_url or getattr(cfg, "embed_ollama_url", "") or "http://127.0.0.1:11434"
    return OllamaProvider(model, base_url=url, **common)
