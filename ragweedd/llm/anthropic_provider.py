"""Anthropic Messages API through the official SDK (imported lazily: the CLI never pays for it)."""

from __future__ import annotations

from typing import Any, AsyncIterator

from ragweedd.llm.base import BaseProvider, Chunk, parse_retry_after, rate_limited_signal, split_system, usage_dict

_STOP = {"end_turn": "end", "max_tokens": "max_tokens", "stop_sequence": "stop_sequence",
         "refusal": "content_filter", "model_context_window_exceeded": "max_tokens"}


def _detail(exc: BaseException) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])[:300]
    return str(getattr(exc, "message", "") or exc)[:300]


class AnthropicProvider(BaseProvider):
    name = "anthropic"

    def __init__(self, model: str, *, api_key: str, base_url: str | None = None, **kw: Any) -> None:
        super().__init__(model, **kw)
        import anthropic

        self._sdk = anthropic
        # SDK retries off: BaseProvider owns the backoff so every provider behaves alike.
        self._client = anthropic.AsyncAnthropic(api_key=api_key, base_url=base_url or None,
                                                timeout=self.timeout_s, max_retries=0)

    def _key_hint(self) -> str:
        return "llm.anthropic_api_key, ANTHROPIC_API_KEY or the keys file (ragweedctl keys list)"

    def _model_hint(self) -> str:
        return ("use a model id from https://docs.anthropic.com/en/docs/about-claude/models, "
                "e.g. 'anthropic:claude-sonnet-4-5'")

    def _map_error(self, exc: BaseException) -> BaseException:
        a = self._sdk
        if isinstance(exc, a.APITimeoutError):
            return self.timeout_error()
        if isinstance(exc, (a.AuthenticationError, a.PermissionDeniedError)):
            return self.auth_error(_detail(exc))
        if isinstance(exc, a.RateLimitError) or getattr(exc, "status_code", None) == 529:
            response = getattr(exc, "response", None)
            return rate_limited_signal(_detail(exc), parse_retry_after(response and response.headers))
        if isinstance(exc, a.NotFoundError):
            return self.model_missing(_detail(exc))
        if isinstance(exc, a.APIConnectionError):
            return self.other_error(f"cannot connect ({exc}); check the network or base URL")
        if isinstance(exc, a.APIError):
            return self.other_error(_detail(exc))
        return super()._map_error(exc)

    async def _stream_once(self, messages: list[dict], max_tokens: int, temperature: float) -> AsyncIterator[Chunk]:
        system, turns = split_system(messages)
        # The SDK (2.x) no longer takes a temperature: current Claude models sample at their default (1.0),
        # which is what annotation wants; synthesis_temperature does not apply to Anthropic.
        kwargs: dict[str, Any] = dict(model=self.model, max_tokens=max_tokens,
                      messages=[{"role": m["role"], "content": m["content"]} for m in turns], stream=True)
        if system:
            kwargs["system"] = system
        stream = await self._client.messages.create(**kwargs)
        inp = out = 0
        stop, model = "end", self.model
        async with stream:
            async for ev in stream:
                t = ev.type
                if t == "message_start":
                    inp = ev.message.usage.input_tokens or 0
                    model = ev.message.model or model
                elif t == "content_block_delta" and getattr(ev.delta, "type", "") == "text_delta":
                    if ev.delta.text:
                        yield Chunk(text=ev.delta.text)
                elif t == "message_delta":
                    stop = _STOP.get(ev.delta.stop_reason or "end_turn", "other")
                    out = ev.usage.output_tokens or out
                    if ev.usage.input_tokens:
                        inp = ev.usage.input_tokens
        yield Chunk(stop_reason=stop, usage=usage_dict(inp, out), model=model)

    async def aclose(self) -> None:
        await self._client.close()
