"""The ChatProvider protocol and what every adapter shares (DESIGN §9).

A provider turns a list of messages (``{"role": "system"|"user"|"assistant", "content": str}``) into
text, either streamed (``stream``: Chunks, the last one carrying ``stop_reason`` and ``usage``) or
whole (``complete``: a ChatResult). Adapters implement only ``_stream_once``; this module adds the
retry-with-backoff on rate limits, so SDKs run with their own retries off and every provider backs off
the same, configurable way.

Stop reasons are normalised: "end" (the model finished), "max_tokens" (cut at the limit, can be
continued), "stop_sequence", "content_filter", "other".
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import AsyncIterator, Protocol, runtime_checkable

from ragweedd.errors import (
    ProviderAuthError,
    ProviderError,
    ProviderModelMissing,
    ProviderRateLimited,
    ProviderTimeout,
    RequestError,
)

STOP_REASONS = ("end", "max_tokens", "stop_sequence", "content_filter", "other")
ROLES = ("system", "user", "assistant")
BACKOFF_CAP_S = 60.0


@dataclass(frozen=True)
class Chunk:
    """One piece of a streamed reply. The final chunk has ``stop_reason`` and ``usage`` set."""

    text: str = ""
    stop_reason: str | None = None
    usage: dict | None = None
    model: str | None = None


@dataclass
class StreamTally:
    """What a streamed reply adds up to as its chunks arrive: the text, the stop reason, the
    usage and the model (the last chunk that says each)."""

    model: str
    usage: dict | None = None
    stop: str = "end"
    parts: list[str] = field(default_factory=list)

    def add(self, c: Chunk, text: str | None = None) -> None:
        """Count ``c``; ``text`` replaces its text where the caller changes it (a joining space)."""
        if c.text:
            self.parts.append(c.text if text is None else text)
        if c.stop_reason:
            self.stop = c.stop_reason
        if c.usage:
            self.usage = c.usage
        if c.model:
            self.model = c.model

    @property
    def text(self) -> str:
        return "".join(self.parts)


@dataclass(frozen=True)
class ChatResult:
    text: str
    stop_reason: str
    usage: dict = field(default_factory=lambda: {"input_tokens": 0, "output_tokens": 0})
    model: str = ""


@runtime_checkable
class ChatProvider(Protocol):
    name: str  # "anthropic", "openai", "gemini", "ollama"
    model: str
    calls: int  # requests made, retries included (history reports llm_calls)

    @property
    def spec(self) -> str:
        """``name:model``, as the configuration writes it."""
        ...

    def stream(self, messages: list[dict], *, max_tokens: int, temperature: float) -> AsyncIterator[Chunk]: ...

    async def complete(self, messages: list[dict], *, max_tokens: int, temperature: float) -> ChatResult: ...

    async def aclose(self) -> None: ...


def check_messages(messages: list[dict]) -> None:
    """Reject malformed message lists before they reach a provider (a clear error beats a 400)."""
    if not isinstance(messages, list) or not messages:
        raise RequestError("chat messages must be a non-empty list of {'role', 'content'} dicts")
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") not in ROLES or not isinstance(m.get("content"), str):
            raise RequestError(
                f"chat message #{i} is {m!r}; each must be a dict with role in {ROLES} and a string content"
            )
    if all(m["role"] == "system" for m in messages):
        raise RequestError("chat messages contain only system prompts; add a user message")


def split_system(messages: list[dict]) -> tuple[str, list[dict]]:
    """System prompts joined into one string (Anthropic and Gemini take it apart from the turns)."""
    system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
    return system, [m for m in messages if m["role"] != "system"]


def usage_dict(input_tokens: int | None, output_tokens: int | None) -> dict:
    return {"input_tokens": int(input_tokens or 0), "output_tokens": int(output_tokens or 0)}


class BaseProvider:
    """Retry/backoff and ``complete`` on top of an adapter's single-attempt ``_stream_once``."""

    name = "base"

    def __init__(self, model: str, *, timeout_s: float = 120.0, max_retries: int = 4,
                 retry_backoff_s: float = 1.0) -> None:
        if not model:
            raise RequestError(f"{self.name}: no model name given; write the provider spec as '{self.name}:MODEL'")
        self.model = model
        self.timeout_s = float(timeout_s)
        self.max_retries = int(max_retries)
        self.retry_backoff_s = float(retry_backoff_s)
        self.calls = 0  # provider requests made, retries included (history reports llm_calls)

    def __repr__(self) -> str:  # never shows keys: adapters keep them inside their SDK client
        return f"<{type(self).__name__} {self.name}:{self.model}>"

    @property
    def spec(self) -> str:
        return f"{self.name}:{self.model}"

    async def _stream_once(self, messages: list[dict], max_tokens: int, temperature: float) -> AsyncIterator[Chunk]:
        raise NotImplementedError
        yield  # pragma: no cover

    def _map_error(self, exc: BaseException) -> BaseException:
        """Turn an SDK/transport exception into a ProviderError subclass; adapters extend this."""
        if isinstance(exc, ProviderError):
            return exc
        if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
            return self.timeout_error()
        return exc

    # --- uniform, user-facing errors ---------------------------------------------------------
    def auth_error(self, detail: str = "") -> ProviderAuthError:
        return ProviderAuthError(
            f"{self.name} rejected the API key for model '{self.model}'" + (f": {detail}" if detail else ""),
            hint=f"check {self._key_hint()}",
        )

    def rate_limited(self, detail: str = "") -> ProviderRateLimited:
        return ProviderRateLimited(
            f"{self.name} kept rate-limiting model '{self.model}' after {self.max_retries} retries"
            + (f": {detail}" if detail else ""),
            hint="wait a minute and ask again, lower annotation_concurrency, or raise llm.max_retries",
        )

    def timeout_error(self) -> ProviderTimeout:
        return ProviderTimeout(
            f"{self.name} model '{self.model}' did not answer within {self.timeout_s:g} s",
            hint="check that the provider is reachable, or raise llm.timeout_s",
        )

    def model_missing(self, detail: str = "") -> ProviderModelMissing:
        return ProviderModelMissing(
            f"{self.name} does not know the model '{self.model}'" + (f": {detail}" if detail else ""),
            hint=self._model_hint(),
        )

    def other_error(self, detail: str) -> ProviderError:
        return ProviderError(f"{self.name} model '{self.model}' failed: {detail}",
                             hint="see the daemon log; retry later")

    def _key_hint(self) -> str:
        return "the API key"

    def _model_hint(self) -> str:
        return "fix the model name in llm.synthesis / llm.annotation / llm.rerank"

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        base = min(BACKOFF_CAP_S, self.retry_backoff_s * (2 ** attempt))
        if retry_after is not None:
            base = max(base, min(retry_after, BACKOFF_CAP_S))
        # jitter spreads concurrent annotation calls that were limited together
        return base * (0.75 + 0.5 * random.random())

    # --- public API ------------------------------------------------------------------------
    async def stream(self, messages: list[dict], *, max_tokens: int, temperature: float) -> AsyncIterator[Chunk]:
        check_messages(messages)
        if not isinstance(max_tokens, int) or max_tokens < 1:
            raise RequestError(f"max_tokens must be a positive whole number, not {max_tokens!r}")
        attempt = 0
        while True:
            started = False
            self.calls += 1
            try:
                async for chunk in self._stream_once(messages, max_tokens, float(temperature)):
                    started = True
                    yield chunk
                return
            except Exception as exc:  # noqa: BLE001 - mapped to the error tree below
                err = self._map_error(exc)
                # A stream that already produced text cannot be retried without duplicating it.
                if isinstance(err, ProviderRateLimited) and not started and attempt < self.max_retries:
                    await asyncio.sleep(self._backoff(attempt, err.retry_after))
                    attempt += 1
                    continue
                if isinstance(err, ProviderRateLimited):
                    raise self.rate_limited(err.message) from None
                if err is exc:
                    raise
                raise err from None

    async def complete(self, messages: list[dict], *, max_tokens: int, temperature: float) -> ChatResult:
        tally = StreamTally(self.model, usage_dict(0, 0))
        async for c in self.stream(messages, max_tokens=max_tokens, temperature=temperature):
            tally.add(c)
        return ChatResult(text=tally.text, stop_reason=tally.stop, usage=tally.usage or usage_dict(0, 0),
                          model=tally.model)

    async def aclose(self) -> None:
        return None


def rate_limited_signal(detail: str, retry_after: float | None = None) -> ProviderRateLimited:
    """An internal marker raised by adapters; BaseProvider retries it, then raises its own message."""
    e = ProviderRateLimited(detail)
    e.retry_after = retry_after
    return e


def parse_retry_after(headers: Mapping[str, str] | None) -> float | None:
    try:
        v = headers.get("retry-after") if headers is not None else None
        return float(v) if v is not None else None
    except (TypeError, ValueError):
        return None
