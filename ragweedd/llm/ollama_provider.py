"""Ollama ``/api/chat`` (NDJSON streaming) over aiohttp, at cfg.embed_ollama_url."""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any, AsyncIterator

from ragweedd.llm.base import BaseProvider, Chunk, parse_retry_after, rate_limited_signal, usage_dict

if TYPE_CHECKING:
    import aiohttp


class OllamaProvider(BaseProvider):
    name = "ollama"

    def __init__(self, model: str, *, base_url: str = "http://127.0.0.1:11434", **kw: Any) -> None:
        super().__init__(model, **kw)
        self.base_url = base_url.rstrip("/")
        self._session: aiohttp.ClientSession | None = None

    def _key_hint(self) -> str:
        return "the reverse proxy in front of Ollama (Ollama itself needs no key)"

    def _model_hint(self) -> str:
        return f"run 'ollama pull {self.model}' or pick a model listed by 'ollama list'"

    async def _get_session(self) -> aiohttp.ClientSession:
        import aiohttp

        if self._session is None or self._session.closed:
            # sock_read bounds the silence between stream lines, not the whole (possibly long) answer
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=None, connect=self.timeout_s, sock_read=self.timeout_s))
        return self._session

    def _map_error(self, exc: BaseException) -> BaseException:
        import aiohttp

        if isinstance(exc, (asyncio.TimeoutError, aiohttp.ServerTimeoutError)):
            return self.timeout_error()
        if isinstance(exc, aiohttp.ClientConnectionError):
            return self.other_error(f"cannot reach Ollama at {self.base_url} ({exc}); is 'ollama serve' running?")
        return super()._map_error(exc)

    async def _stream_once(self, messages: list[dict], max_tokens: int, temperature: float) -> AsyncIterator[Chunk]:
        session = await self._get_session()
        body = {"model": self.model, "messages": [{"role": m["role"], "content": m["content"]} for m in messages],
                "stream": True, "options": {"num_predict": max_tokens, "temperature": temperature}}
        async with session.post(self.base_url + "/api/chat", json=body) as resp:
            if resp.status != 200:
                raw = await resp.text()
                try:
                    detail = str(json.loads(raw).get("error", raw))
                except (ValueError, AttributeError):
                    detail = raw
                detail = detail[:300]
                if resp.status == 404 or "not found" in detail.lower():
                    raise self.model_missing(detail)
                if resp.status in (401, 403):
                    raise self.auth_error(detail)
                if resp.status == 429:
                    raise rate_limited_signal(detail, parse_retry_after(resp.headers))
                raise self.other_error(f"HTTP {resp.status}: {detail}")
            stop, usage, model = "end", usage_dict(0, 0), self.model
            async for raw_line in resp.content:
                line = raw_line.strip()
                if not line:
                    continue
                try:
                    ev = json.loads(line)
                except ValueError:
                    raise self.other_error(f"sent a line that is not JSON: {line[:100]!r}") from None
                if ev.get("error"):
                    raise self.other_error(str(ev["error"])[:300])
                text = (ev.get("message") or {}).get("content") or ""
                if text:
                    yield Chunk(text=text)
                if ev.get("done"):
                    stop = {"stop": "end", "length": "max_tokens"}.get(ev.get("done_reason") or "stop", "other")
                    usage = usage_dict(ev.get("prompt_eval_count"), ev.get("eval_count"))
                    model = ev.get("model") or model
        yield Chunk(stop_reason=stop, usage=usage, model=model)

    async def aclose(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()
