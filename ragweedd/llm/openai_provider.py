"""OpenAI chat completions, and any OpenAI-compatible server (llm.openai_base_url), via the openai SDK."""

from __future__ import annotations

from typing import Any, AsyncIterator

from ragweedd.llm.base import BaseProvider, Chunk, parse_retry_after, rate_limited_signal, usage_dict

_STOP = {"stop": "end", "length": "max_tokens", "content_filter": "content_filter"}


def _detail(exc: BaseException) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        # the SDK keeps either the whole body or its inner "error" object
        err = body.get("error")
        inner = err if isinstance(err, dict) else body
        msg = inner.get("message")
        if msg:
            return str(msg)[:300]
    return str(getattr(exc, "message", "") or exc)[:300]


class OpenAIProvider(BaseProvider):
    name = "openai"

    def __init__(self, model: str, *, api_key: str, base_url: str | None = None, **kw: Any) -> None:
        super().__init__(model, **kw)
        import openai

        self._sdk = openai
        self.base_url = base_url or None
        self._client = openai.AsyncOpenAI(api_key=api_key, base_url=self.base_url,
                                          timeout=self.timeout_s, max_retries=0)

    def _key_hint(self) -> str:
        return "llm.openai_api_key, OPENAI_API_KEY or the keys file (ragweedctl keys list)"

    def _model_hint(self) -> str:
        where = self.base_url or "api.openai.com"
        return f"use a model that {where} serves (GET {where.rstrip('/')}/models lists them)"

    def _map_error(self, exc: BaseException) -> BaseException:
        o = self._sdk
        if isinstance(exc, o.APITimeoutError):
            return self.timeout_error()
        if isinstance(exc, (o.AuthenticationError, o.PermissionDeniedError)):
            return self.auth_error(_detail(exc))
        if isinstance(exc, o.RateLimitError):
            return rate_limited_signal(_detail(exc), parse_retry_after(exc.response.headers))
        if isinstance(exc, o.NotFoundError):
            return self.model_missing(_detail(exc))
        if isinstance(exc, o.APIConnectionError):
            return self.other_error(f"cannot connect to {self.base_url or 'api.openai.com'} ({exc})")
        if isinstance(exc, o.APIError):
            return self.other_error(_detail(exc))
        return super()._map_error(exc)

    async def _stream_once(self, messages: list[dict], max_tokens: int, temperature: float) -> AsyncIterator[Chunk]:
        stream = await self._client.chat.completions.create(
            model=self.model, messages=[{"role": m["role"], "content": m["content"]} for m in messages],
            max_tokens=max_tokens, temperature=temperature, stream=True,
            stream_options={"include_usage": True},
        )
        stop, usage, model = "end", usage_dict(0, 0), self.model
        async with stream:
            async for ev in stream:
                model = getattr(ev, "model", None) or model
                if ev.usage is not None:
                    usage = usage_dict(ev.usage.prompt_tokens, ev.usage.completion_tokens)
                for choice in ev.choices or ():
                    text = getattr(choice.delta, "content", None) if choice.delta else None
                    if text:
                        yield Chunk(text=text)
                    if choice.finish_reason:
                        stop = _STOP.get(choice.finish_reason, "other")
        yield Chunk(stop_reason=stop, usage=usage, model=model)

    async def aclose(self) -> None:
        await self._client.close()
