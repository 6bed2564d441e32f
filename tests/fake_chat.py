"""FakeChatProvider: queued replies, for tests of code that calls a provider (handed to the answer
layer as ``annotator=`` / ``synthesizer=``; the package knows no such provider).

Each call pops the next queued reply; a reply is a string, a ChatResult (to choose the stop reason),
an exception instance (raised, e.g. ProviderRateLimited to exercise retries), or a callable
``f(messages) -> str | ChatResult``. With the queue empty it falls back to ``default`` (a string or
callable). Every call's messages are recorded in ``requests``; ``delay_s`` makes calls overlap so a
test can measure concurrency (``max_in_flight``).
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import AsyncIterator, Callable

from ragweedd.errors import ProviderRateLimited
from ragweedd.llm.base import BaseProvider, ChatResult, Chunk, usage_dict


def _tokens(text: str) -> int:
    return max(1, len(text) // 4) if text else 0


class FakeChatProvider(BaseProvider):
    name = "fake"

    def __init__(self, model: str = "fake", replies=(), *, default: str | Callable | None = None,
                 delay_s: float = 0.0, chunk_chars: int = 8, **kw) -> None:
        kw.setdefault("retry_backoff_s", 0.0)
        super().__init__(model or "fake", **kw)
        self.queue: deque = deque(replies)
        self.default = default
        self.delay_s = delay_s
        self.chunk_chars = max(1, chunk_chars)
        self.requests: list[list[dict]] = []
        self.params: list[dict] = []  # max_tokens and temperature of each call
        self.in_flight = 0
        self.max_in_flight = 0

    def push(self, *replies) -> "FakeChatProvider":
        self.queue.extend(replies)
        return self

    def _next(self, messages: list[dict]):
        if self.queue:
            r = self.queue.popleft()
        elif self.default is not None:
            r = self.default
        else:
            raise AssertionError("FakeChatProvider: no queued reply left and no default")
        if callable(r) and not isinstance(r, BaseException):
            r = r(messages)
        return r

    async def _stream_once(self, messages, max_tokens, temperature) -> AsyncIterator[Chunk]:
        self.requests.append([dict(m) for m in messages])
        self.params.append({"max_tokens": max_tokens, "temperature": temperature})
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.delay_s:
                await asyncio.sleep(self.delay_s)
            r = self._next(messages)
        finally:
            self.in_flight -= 1
        if isinstance(r, ProviderRateLimited):
            r.retry_after = None  # type: ignore[attr-defined]
        if isinstance(r, BaseException):
            raise r
        if isinstance(r, ChatResult):
            text, stop = r.text, r.stop_reason
        else:
            text, stop = str(r), "end"
            # honour max_tokens like a real model would (4 chars ~ 1 token)
            if _tokens(text) > max_tokens:
                text, stop = text[: max_tokens * 4], "max_tokens"
        for i in range(0, len(text), self.chunk_chars):
            yield Chunk(text=text[i:i + self.chunk_chars])
        prompt_chars = sum(len(m["content"]) for m in messages)
        yield Chunk(stop_reason=stop, usage=usage_dict(max(1, prompt_chars // 4), _tokens(text)), model=self.model)
