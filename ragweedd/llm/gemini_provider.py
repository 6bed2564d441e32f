"""Google Gemini through google-genai (``client.aio``), streaming with ``streamGenerateContent?alt=sse``."""

from __future__ import annotations

from typing import Any, AsyncIterator

from ragweedd.llm.base import BaseProvider, Chunk, rate_limited_signal, split_system, usage_dict

_STOP = {"STOP": "end", "MAX_TOKENS": "max_tokens", "SAFETY": "content_filter", "RECITATION": "content_filter",
         "PROHIBITED_CONTENT": "content_filter", "BLOCKLIST": "content_filter", "SPII": "content_filter"}


class GeminiProvider(BaseProvider):
    name = "gemini"

    def __init__(self, model: str, *, api_key: str, base_url: str | None = None, **kw: Any) -> None:
        super().__init__(model, **kw)
        from google import genai
        from google.genai import errors, types

        self._errors = errors
        self._types = types
        # google-genai takes milliseconds; v1beta is where system_instruction and SSE streaming live
        opts: dict[str, Any] = {"timeout": max(1, int(self.timeout_s * 1000)), "api_version": "v1beta"}
        if base_url:
            opts["base_url"] = base_url
        self._client = genai.Client(api_key=api_key, http_options=types.HttpOptions(**opts))

    def _key_hint(self) -> str:
        return "llm.gemini_api_key, GEMINI_API_KEY / GOOGLE_API_KEY or the keys file (ragweedctl keys list)"

    def _model_hint(self) -> str:
        return "use a Gemini model id, e.g. 'gemini:gemini-2.5-flash'"

    def _map_error(self, exc: BaseException) -> BaseException:
        e = self._errors
        if isinstance(exc, e.APIError):
            detail = (exc.message or str(exc))[:300]
            code = exc.code
            if (code in (401, 403) or (code == 400 and "API key" in detail)
                    or exc.status in ("UNAUTHENTICATED", "PERMISSION_DENIED")):
                return self.auth_error(detail)
            if code == 429 or exc.status == "RESOURCE_EXHAUSTED":
                return rate_limited_signal(detail)
            if code == 404:
                return self.model_missing(detail)
            return self.other_error(f"HTTP {code}: {detail}")
        # google-genai runs on aiohttp or httpx depending on what is installed; both name theirs *Timeout*
        if "Timeout" in type(exc).__name__ or isinstance(exc, TimeoutError):
            return self.timeout_error()
        if type(exc).__name__ in ("ClientConnectorError", "ConnectError", "ServerDisconnectedError"):
            return self.other_error(f"cannot connect ({exc})")
        return super()._map_error(exc)

    async def _stream_once(self, messages: list[dict], max_tokens: int, temperature: float) -> AsyncIterator[Chunk]:
        t = self._types
        system, turns = split_system(messages)
        contents = [t.Content(role="model" if m["role"] == "assistant" else "user",
                              parts=[t.Part(text=m["content"])]) for m in turns]
        config = t.GenerateContentConfig(max_output_tokens=max_tokens, temperature=temperature,
                                         system_instruction=system or None)
        stop, usage, model = "end", usage_dict(0, 0), self.model
        stream = await self._client.aio.models.generate_content_stream(model=self.model, contents=contents,
                                                                       config=config)
        async for resp in stream:
            if resp.usage_metadata is not None:
                usage = usage_dict(resp.usage_metadata.prompt_token_count, resp.usage_metadata.candidates_token_count)
            model = resp.model_version or model
            for cand in resp.candidates or ():
                if cand.content and cand.content.parts:
                    text = "".join(p.text or "" for p in cand.content.parts if not getattr(p, "thought", False))
                    if text:
                        yield Chunk(text=text)
                if cand.finish_reason:
                    fr = getattr(cand.finish_reason, "value", str(cand.finish_reason))
                    stop = _STOP.get(fr, "other")
        yield Chunk(stop_reason=stop, usage=usage, model=model)

    async def aclose(self) -> None:
        try:
            await self._client.aio.aclose()
        except AttributeError:  # older google-genai has no aclose
            pass
