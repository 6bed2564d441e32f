"""Adaptive HyDE (hypothetical document embeddings) for the dense leg (docs/retrieval.md, "HyDE").

When the best cosine of a query's own vector search is below ``llm.hyde_gate`` -- the collection
holds nothing that reads like the question -- the ``[llm] hyde`` model writes ``hyde_passages``
short passages that would answer it, in one call. Their embeddings, averaged with the query's
(each counts once) and normalised, search the primary space again and replace the dense leg. A
query whose vector search already finds something close costs no call.

One call for all the passages rather than one per passage: a single round trip (the latency a
search pays), and the model writes them side by side, so they differ. A reply is split at lines of
dashes or at "Passage N:" heads; fewer passages than asked are used as they are.

It never fails a search: a provider that is down, times out (``hyde_timeout_s``), refuses the key
or answers nothing usable leaves the plain query vector in place, and ``retrieval_meta.hyde.error``
says why. The search runs in a worker thread and the providers are asynchronous: the call is handed
to the event loop the search was started from (the daemon's, or the one-shot command's), and the
worker thread waits for it there; a search started without an event loop (the eval) runs the call
with ``asyncio.run``, in its own thread, which no loop runs. A provider is made for each call and
closed after it (SDK clients keep the connections of the loop they were first used on).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import re
import time
from dataclasses import dataclass
from typing import Any, Callable

from ragweedd.config import Config
from ragweedd.errors import InternalError, RagweedError
from ragweedd.llm.factory import make_provider, parse_spec
from ragweedd.logging import get_logger

log = get_logger("ragweedd.hyde")

MAX_TOKENS_PER_PASSAGE = 160
SYSTEM = "You write short factual passages, as they would appear in a document, that answer a search query."
PROMPT = """Query: {query}

Write {n} different short passage{s} (3 to 5 sentences each) from a document that would answer this query.
Write them as the document would, not as an answer to a person; invent plausible details where needed.
{sep}Reply with the passage{s} only."""
SEPARATOR = 'Put a line with only "---" between passages.\n'

_SPLIT = re.compile(r"^\s*(?:-{3,}|\*{3,}|={3,})\s*$|^\s*(?:#+\s*)?passage\s*\d+\s*[:.)-]?\s*", re.I | re.M)


@dataclass
class HydeOutcome:
    passages: list[str]
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    ms: float = 0.0
    error: str | None = None
    error_code: str | None = None


def messages(query: str, n: int) -> list[dict]:
    return [{"role": "system", "content": SYSTEM},
            {"role": "user", "content": PROMPT.format(query=query, n=n, s="s" if n > 1 else "",
                                                      sep=SEPARATOR if n > 1 else "")}]


def split_passages(text: str, n: int) -> list[str]:
    """At most ``n`` non-empty passages of a reply, in order."""
    parts = [" ".join(p.split()) for p in _SPLIT.split(text or "")]
    return [p for p in parts if len(p) >= 3][:n]


class HyDE:
    def __init__(self, spec: str, cfg: Config, *, gate: float, passages: int, timeout_s: float,
                 make: Callable[[], Any] | None = None) -> None:
        self.provider, self.model = parse_spec(spec, "llm.hyde")
        self.gate = float(gate)
        self.passages = int(passages)
        self.timeout_s = float(timeout_s)
        self._make = make or (lambda: make_provider(spec, cfg, key="llm.hyde"))

    def write(self, query: str, loop: asyncio.AbstractEventLoop | None = None) -> HydeOutcome:
        """The hypothetical passages for ``query``, from a worker thread: the call runs on ``loop``
        (the event loop the search came from) while this thread waits, or, without one, on a loop
        of its own here."""
        if loop is None:
            return asyncio.run(self._write(query))
        if _running_loop() is loop:
            raise InternalError("HyDE.write blocks: call it from a worker thread, not from its event loop")
        fut = asyncio.run_coroutine_threadsafe(self._write(query), loop)
        try:
            # _write ends itself at timeout_s; the margin covers a loop busy with other work
            return fut.result(self.timeout_s + 10)
        except concurrent.futures.TimeoutError:
            fut.cancel()
            return HydeOutcome([], error=f"the HyDE call did not return within {self.timeout_s:g} s",
                               error_code="provider_timeout")

    async def _write(self, query: str) -> HydeOutcome:
        out = HydeOutcome([])
        t0 = time.perf_counter()
        provider = None
        try:
            provider = self._make()
            async with asyncio.timeout(self.timeout_s):
                r = await provider.complete(messages(query, self.passages),
                                            max_tokens=MAX_TOKENS_PER_PASSAGE * self.passages, temperature=0.7)
            out.input_tokens = int((r.usage or {}).get("input_tokens") or 0)
            out.output_tokens = int((r.usage or {}).get("output_tokens") or 0)
            out.passages = split_passages(r.text, self.passages)
            if not out.passages:
                out.error = f"the HyDE model answered no usable passage ({' '.join(r.text.split())[:80]!r})"
                out.error_code = "hyde_bad_output"
        except TimeoutError:
            out.error = (f"the HyDE model did not answer within {self.timeout_s:g} s "
                         "(raise llm.hyde_timeout_s, or use a faster model)")
            out.error_code = "provider_timeout"
        except RagweedError as e:
            out.error, out.error_code = str(e), e.code
        except Exception as e:  # noqa: BLE001 - HyDE may never fail the search
            log.exception("hyde_failed")
            out.error, out.error_code = f"{type(e).__name__}: {e}"[:300], "internal"
        finally:
            if provider is not None:
                out.calls = getattr(provider, "calls", 1)
                try:
                    await provider.aclose()
                except Exception:  # noqa: BLE001 - closing a client must not fail the search
                    pass
            out.ms = round((time.perf_counter() - t0) * 1000, 3)
        return out


def make_hyde(cfg: Config) -> HyDE | None:
    """The configured HyDE stage, or None when ``llm.hyde`` is empty (a bad spec is a ConfigError)."""
    spec = (getattr(cfg, "llm_hyde", "") or "").strip()
    if not spec:
        return None
    return HyDE(spec, cfg, gate=cfg.llm_hyde_gate, passages=cfg.llm_hyde_passages, timeout_s=cfg.llm_hyde_timeout_s)


def hyde_vector(qvec: Any, passage_vecs: list[Any]) -> Any:
    """The query's vector averaged with the passages' (each once), as a unit vector."""
    import numpy as np

    q = np.asarray(qvec, dtype=np.float32).reshape(-1)
    vecs = [np.asarray(v, dtype=np.float32).reshape(-1) for v in passage_vecs]
    mean = np.mean([q] + [v for v in vecs if v.shape == q.shape], axis=0)
    norm = float(np.linalg.norm(mean))
    return (mean / norm if norm > 0 else q).astype(np.float32)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
