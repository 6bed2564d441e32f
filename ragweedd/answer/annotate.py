"""Annotation (DESIGN §9): an LLM quotes what in each chunk bears on the question, or says it is
irrelevant; irrelevant chunks move to a filtered set that the history keeps.

At most ``concurrency`` calls are in flight (ANNOTATION_CONCURRENCY). A call that fails for a
transient reason (timeout, rate limit after retries, server error) leaves its chunk unannotated and
kept, with the error recorded: one slow call must not sink the answer. A bad key or an unknown model
fails the whole annotation, since every other call would fail the same way.
"""

from __future__ import annotations

import asyncio
import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, AsyncIterator

from ragweedd.answer.prompts import CONTENT_CHARS, fill
from ragweedd.errors import ProviderAuthError, ProviderError, ProviderModelMissing
from ragweedd.logging import get_logger

if TYPE_CHECKING:
    from ragweedd.llm.base import ChatProvider

ANNOTATION_MAX_TOKENS = 200
ANNOTATION_TEMPERATURE = 1.0

log = get_logger(__name__)


def compile_irrelevant(pattern: str, flags: str = "") -> re.Pattern:
    value = 0
    for name in re.split(r"[|,]", flags or ""):
        name = name.strip().upper()
        if name:
            value |= getattr(re, name)
    return re.compile(pattern, value)


@dataclass
class AnnotationOutcome:
    kept: list[dict] = field(default_factory=list)      # hits + "annotation", in retrieval order
    filtered: list[dict] = field(default_factory=list)  # hits judged irrelevant, with their annotation
    errors: list[dict] = field(default_factory=list)    # {"embedding_id", "error"} for calls that failed
    calls: int = 0
    usage: dict = field(default_factory=lambda: {"input_tokens": 0, "output_tokens": 0})
    ms: float = 0.0


def build_prompt(template: str, query: str, hit: dict) -> list[dict]:
    content = (hit.get("text") or "")[:CONTENT_CHARS]
    return [{"role": "user", "content": fill(template, CONTENT=content, QUERY=query)}]


async def annotate_iter(query: str, hits: list[dict], provider: ChatProvider, template: str, *, concurrency: int,
                        irrelevant: re.Pattern) -> AsyncIterator[dict]:
    """Yield one event per hit as its annotation arrives:
    ``{"index", "hit", "annotation", "relevant", "error", "usage"}`` (hit already carries "annotation")."""
    sem = asyncio.Semaphore(max(1, concurrency))

    async def one(i: int, hit: dict) -> dict:
        async with sem:
            try:
                r = await provider.complete(build_prompt(template, query, hit),
                                            max_tokens=ANNOTATION_MAX_TOKENS, temperature=ANNOTATION_TEMPERATURE)
            except (ProviderAuthError, ProviderModelMissing):
                raise
            except ProviderError as e:
                log.warning("annotation_failed", embedding_id=hit.get("embedding_id"), error=e.message)
                return {"index": i, "hit": {**hit, "annotation": None}, "annotation": None, "relevant": True,
                        "error": e.message, "usage": None}
        text = r.text.strip()
        relevant = not irrelevant.search(text)
        return {"index": i, "hit": {**hit, "annotation": text}, "annotation": text, "relevant": relevant,
                "error": None, "usage": r.usage}

    tasks = [asyncio.ensure_future(one(i, h)) for i, h in enumerate(hits)]
    try:
        for fut in asyncio.as_completed(tasks):
            yield await fut
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def annotate(query: str, hits: list[dict], provider: ChatProvider, template: str, *, concurrency: int,
                   irrelevant: re.Pattern) -> AnnotationOutcome:
    out = AnnotationOutcome()
    t0 = time.perf_counter()
    calls0 = getattr(provider, "calls", 0)
    results = []
    async for ev in annotate_iter(query, hits, provider, template, concurrency=concurrency, irrelevant=irrelevant):
        results.append(ev)
    collect(out, results)
    out.calls = getattr(provider, "calls", 0) - calls0
    out.ms = (time.perf_counter() - t0) * 1000
    return out


def collect(out: AnnotationOutcome, results: list[dict]) -> AnnotationOutcome:
    for ev in sorted(results, key=lambda e: e["index"]):
        (out.kept if ev["relevant"] else out.filtered).append(ev["hit"])
        if ev["error"]:
            out.errors.append({"embedding_id": ev["hit"].get("embedding_id"), "error": ev["error"]})
        if ev["usage"]:
            out.usage["input_tokens"] += ev["usage"].get("input_tokens", 0)
            out.usage["output_tokens"] += ev["usage"].get("output_tokens", 0)
    return out
