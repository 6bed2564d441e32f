"""The optional rerank stage: an LLM reorders the top fused results of a search (docs/retrieval.md,
"Rerank").

A ``Reranker`` answers ``await rerank(query, hits) -> RerankOutcome``: one relevance in [0, 1] per
hit (in the order given) and what it cost. ``LLMReranker`` asks the ``[llm] rerank`` provider with
one of two strategies:

- ``batch``: one prompt numbers the candidates and asks a 0-10 score per passage (one call, and the
  model sees the candidates side by side);
- ``each``: one yes/no call per candidate, ``rerank_concurrency`` in flight (as qmd does; many small
  calls, none of which sees the others).

``rerank_result`` applies an outcome to a search result in place. It never raises: a provider that is
down, refuses the key, times out or answers something unreadable leaves the fused order as it was and
``retrieval_meta.rerank.error`` says what happened. The stage is all-or-nothing: a partial set of
scores would have to be merged with fused ranks on another scale, so it is not used.

The stage runs in the async engine layer (``Services.search_async``), after the search's worker
thread returns: the providers are asynchronous and the daemon's event loop is where they live.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping, Protocol, Sequence

from ragweedd.config import Config
from ragweedd.errors import BadOutput, ConfigError, RagweedError
from ragweedd.llm.factory import make_provider, parse_spec
from ragweedd.logging import get_logger

if TYPE_CHECKING:
    from ragweedd.llm.base import ChatProvider

log = get_logger("ragweedd.rerank")

STRATEGIES = ("batch", "each")
BATCH_PASSAGE_CHARS = 1200  # each candidate's text in the batch prompt (20 candidates ~ 6k tokens)
EACH_PASSAGE_CHARS = 4000
EACH_MAX_TOKENS = 16  # "yes"/"no", with room for a model that adds a word or a full stop
SCORE_MAX = 10.0

BATCH_SYSTEM = "You judge how relevant text passages are to a search query. You answer only with scores."
BATCH_PROMPT = """Query: {query}

Passages:
{passages}

Rate how relevant each passage is to the query, from 0 (unrelated) to 10 (answers it directly).
Reply with exactly one line per passage, "NUMBER: SCORE", for all {n} passages, and nothing else."""

EACH_SYSTEM = ('Judge whether the Document meets the requirements based on the Query provided. '
               'Note that the answer can only be "yes" or "no".')
EACH_PROMPT = """<Query>: {query}
<Document>: {passage}

Is the document relevant to the query? Answer "yes" or "no"."""


@dataclass
class RerankOutcome:
    """``relevance``: one value in [0, 1] per hit, in the order given (None when it failed, and then
    ``error`` says why). The counters are what the stage spent, failed calls included."""

    relevance: list[float] | None = None
    error: str | None = None
    error_code: str | None = None
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    ms: float = 0.0
    notes: dict[str, Any] = field(default_factory=dict)


class Reranker(Protocol):
    provider: str  # "anthropic", "openai", "gemini", "ollama", or another scorer's name
    model: str
    strategy: str
    candidates: int  # how many of the top results it is given

    async def rerank(self, query: str, hits: Sequence[Mapping[str, Any]]) -> RerankOutcome: ...


# --- parsing what the model said -------------------------------------------------------------------
_FENCE = re.compile(r"^```[a-zA-Z]*\s*|\s*```\s*$")
_LINE = re.compile(r"^\W*(?:passage|document|doc|item)?\s*#?\s*(\d{1,4})\s*(?:[\])]|\W)+?\s*"
                   r"(?:score|relevance|rating)?\s*\W?\s*(\d{1,3}(?:\.\d+)?)\b", re.I)


def parse_scores(text: str, n: int) -> list[float]:
    """Scores 0-10 for passages 1..n from a batch reply, as relevance in [0, 1]. Accepts "N: S" lines
    (with "[N]", "Passage N", "N.", "S/10" variants) and JSON ({"1": 8}, [8, 3], [{"id": 1, "score":
    8}]). A passage number outside 1..n or a score outside 0-10 is ignored; the first score given for
    a passage counts. Raises BadOutput unless every passage got a score."""
    body = _FENCE.sub("", text.strip())
    got = _scores_from_json(body, n)
    if got is None:
        got = {}
        for line in body.splitlines():
            m = _LINE.match(line.strip())
            if m:
                _take(got, m.group(1), m.group(2), n)
    missing = [i for i in range(1, n + 1) if i not in got]
    if missing:
        shown = " ".join(text.split())[:120]
        raise BadOutput(f"the rerank model scored {n - len(missing)} of {n} passages "
                        f"(no score for {', '.join(map(str, missing[:5]))}{' ...' if len(missing) > 5 else ''}); "
                        f"it answered {shown!r}",
                        hint="use a stronger llm.rerank model or rerank_strategy = 'each'")
    return [got[i] / SCORE_MAX for i in range(1, n + 1)]


def _take(got: dict[int, float], num: Any, score: Any, n: int) -> None:
    try:
        i, s = int(str(num).strip()), float(str(score).strip())
    except ValueError:
        return
    if 1 <= i <= n and 0.0 <= s <= SCORE_MAX and math.isfinite(s) and i not in got:
        got[i] = s


def _scores_from_json(body: str, n: int) -> dict[int, float] | None:
    start = min((i for i in (body.find("{"), body.find("[")) if i >= 0), default=-1)
    if start < 0:
        return None
    try:
        data, end = json.JSONDecoder().raw_decode(body[start:])
    except ValueError:
        return None
    if body[start + end:].strip():
        return None  # "[1] 8" lines start like a JSON list; only a reply that ends with its JSON is JSON
    if isinstance(data, dict) and len(data) == 1 and isinstance(next(iter(data.values())), (list, dict)):
        data = next(iter(data.values()))  # {"scores": ...}
    got: dict[int, float] = {}
    if isinstance(data, dict):
        for k, v in data.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                _take(got, re.sub(r"\D", "", str(k)) or "x", v, n)
    elif isinstance(data, list):
        for pos, item in enumerate(data, 1):
            if isinstance(item, (int, float)) and not isinstance(item, bool):
                _take(got, pos, item, n)
            elif isinstance(item, dict):
                num = next((item[k] for k in item if k.lower() in ("id", "n", "number", "index", "passage")), None)
                score = next((item[k] for k in item if k.lower() in ("score", "relevance", "rating")), None)
                if num is not None and isinstance(score, (int, float)) and not isinstance(score, bool):
                    _take(got, num, score, n)
    return got or None


_YES_NO = re.compile(r"\b(yes|no)\b", re.I)


def parse_yes_no(text: str) -> float:
    """1.0 for yes, 0.0 for no. The first word decides; else the reply must name only one of them."""
    words = re.findall(r"[a-z]+", text.lower())
    if words and words[0] in ("yes", "no"):
        return 1.0 if words[0] == "yes" else 0.0
    found = {m.lower() for m in _YES_NO.findall(text)}
    if len(found) == 1:
        return 1.0 if found == {"yes"} else 0.0
    raise BadOutput(f"the rerank model answered {' '.join(text.split())[:80]!r} instead of yes or no",
                    hint="use a stronger llm.rerank model or rerank_strategy = 'batch'")


# --- the LLM reranker ------------------------------------------------------------------------------
def _passage(hit: Mapping[str, Any], chars: int) -> str:
    text = " ".join(str(hit.get("text") or "").split())
    return text if len(text) <= chars else text[:chars].rsplit(" ", 1)[0] + " ..."


def batch_messages(query: str, hits: Sequence[Mapping[str, Any]]) -> list[dict]:
    passages = "\n\n".join(f"[{i}] {_passage(h, BATCH_PASSAGE_CHARS)}" for i, h in enumerate(hits, 1))
    return [{"role": "system", "content": BATCH_SYSTEM},
            {"role": "user", "content": BATCH_PROMPT.format(query=query, passages=passages, n=len(hits))}]


def each_messages(query: str, hit: Mapping[str, Any]) -> list[dict]:
    return [{"role": "system", "content": EACH_SYSTEM},
            {"role": "user", "content": EACH_PROMPT.format(query=query, passage=_passage(hit, EACH_PASSAGE_CHARS))}]


class LLMReranker:
    """A Reranker over a ChatProvider. ``make`` builds a provider for one rerank (it is closed after
    it): the SDK clients hold connections of the event loop they were first used on, and one-shot
    commands run a new loop each time."""

    def __init__(self, spec: str, cfg: Config, *, strategy: str = "batch", candidates: int = 20,
                 concurrency: int = 4, timeout_s: float = 30.0, make: Callable[[], Any] | None = None) -> None:
        self.provider, self.model = parse_spec(spec, "llm.rerank")
        if strategy not in STRATEGIES:
            raise ConfigError(f"key 'llm.rerank_strategy' has value {strategy!r}; allowed: 'batch', 'each'")
        self.strategy = strategy
        self.candidates = int(candidates)
        self.concurrency = max(1, int(concurrency))
        self.timeout_s = float(timeout_s)
        self._make = make or (lambda: make_provider(spec, cfg, key="llm.rerank"))

    async def rerank(self, query: str, hits: Sequence[Mapping[str, Any]]) -> RerankOutcome:
        out = RerankOutcome()
        t0 = time.perf_counter()
        provider = None
        try:
            provider = self._make()
            async with asyncio.timeout(self.timeout_s):
                if self.strategy == "batch":
                    out.relevance = await self._batch(provider, query, hits, out)
                else:
                    out.relevance = await self._each(provider, query, hits, out)
        except TimeoutError:
            out.error = (f"the rerank model did not finish within {self.timeout_s:g} s "
                         "(raise llm.rerank_timeout_s, or use a faster model)")
            out.error_code = "provider_timeout"
        except RagweedError as e:
            out.error, out.error_code = str(e), e.code
        except Exception as e:  # noqa: BLE001 - no rerank failure may fail the search
            log.exception("rerank_failed")
            out.error, out.error_code = f"{type(e).__name__}: {e}"[:300], "internal"
        finally:
            if provider is not None:
                out.calls = getattr(provider, "calls", out.calls)
                try:
                    await provider.aclose()
                except Exception:  # noqa: BLE001 - closing a client must not fail the search
                    pass
            out.ms = (time.perf_counter() - t0) * 1000
        if out.error:
            out.relevance = None
        return out

    async def _batch(self, provider: ChatProvider, query: str, hits: Sequence[Mapping[str, Any]],
                     out: RerankOutcome) -> list[float]:
        r = await provider.complete(batch_messages(query, hits), max_tokens=16 + 12 * len(hits), temperature=0.0)
        _count(out, r.usage)
        if r.stop_reason == "max_tokens":
            out.notes["stop_reason"] = "max_tokens"
        return parse_scores(r.text, len(hits))

    async def _each(self, provider: ChatProvider, query: str, hits: Sequence[Mapping[str, Any]],
                    out: RerankOutcome) -> list[float]:
        sem = asyncio.Semaphore(self.concurrency)
        failed = asyncio.Event()

        async def one(hit: Mapping[str, Any]) -> float:
            async with sem:
                # Set before the slot is given up: a call waiting for the slot of a failed one is
                # never started (it would only add cost to a result that is not used).
                if failed.is_set():
                    return 0.0
                try:
                    r = await provider.complete(each_messages(query, hit), max_tokens=EACH_MAX_TOKENS,
                                                temperature=0.0)
                    _count(out, r.usage)
                    return parse_yes_no(r.text)
                except BaseException:
                    failed.set()
                    raise

        tasks = [asyncio.ensure_future(one(h)) for h in hits]
        try:
            # the first failure ends the stage: the rest would only add cost to a result not used
            return list(await asyncio.gather(*tasks))
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)


def _count(out: RerankOutcome, usage: Mapping[str, Any] | None) -> None:
    out.input_tokens += int((usage or {}).get("input_tokens") or 0)
    out.output_tokens += int((usage or {}).get("output_tokens") or 0)


def make_reranker(cfg: Config) -> LLMReranker | None:
    """The configured reranker, or None when ``llm.rerank`` is empty. A bad spec is a ConfigError now;
    a missing key or an unreachable provider shows up in each search's retrieval_meta instead."""
    spec = (getattr(cfg, "llm_rerank", "") or "").strip()
    if not spec:
        return None
    return LLMReranker(spec, cfg, strategy=cfg.llm_rerank_strategy, candidates=cfg.llm_rerank_candidates,
                       concurrency=cfg.llm_rerank_concurrency, timeout_s=cfg.llm_rerank_timeout_s)


# --- applying an outcome ---------------------------------------------------------------------------
async def rerank_result(reranker: Reranker, query: str, res: dict[str, Any], *, limit: int,
                        keep_pct: int) -> dict[str, Any]:
    """Rerank the top ``reranker.candidates`` results of ``res`` (a search result fetched with at
    least that many), cut to ``limit`` and record ``retrieval_meta.rerank``. Never raises."""
    results: list[dict[str, Any]] = list(res.get("results") or [])
    meta: dict[str, Any] = res.setdefault("retrieval_meta", {})
    n = min(reranker.candidates, len(results))
    info: dict[str, Any] = {"provider": reranker.provider, "model": reranker.model, "strategy": reranker.strategy,
                            "candidates": n, "calls": 0, "input_tokens": 0, "output_tokens": 0, "ms": 0.0}
    order = list(range(len(results)))
    if n < 2:
        info["skipped"] = "fewer than two results"
    else:
        block = results[:n]
        try:
            outcome = await reranker.rerank(query, block)
        except Exception as e:  # noqa: BLE001 - the protocol asks rerankers not to raise; one that does is recorded
            log.exception("rerank_failed")
            outcome = RerankOutcome(error=f"{type(e).__name__}: {e}"[:300], error_code="internal")
        info.update(calls=outcome.calls, input_tokens=outcome.input_tokens, output_tokens=outcome.output_tokens,
                    ms=round(outcome.ms, 1), **outcome.notes)
        rel = outcome.relevance
        if outcome.error is None and (rel is None or len(rel) != n or not all(_unit(x) for x in rel)):
            outcome.error, outcome.error_code = (f"the reranker gave {len(rel or [])} relevance values in "
                                                 f"[0, 1] for {n} candidates"), "rerank_bad_output"
        if outcome.error is not None:
            info["error"], info["error_code"] = outcome.error, outcome.error_code
            log.warning("rerank_failed", provider=reranker.provider, model=reranker.model, error=outcome.error)
        else:
            assert rel is not None
            # ties keep the fused order, so a yes/no reranker moves the "yes" block up, each in fused order
            order = sorted(range(n), key=lambda i: (-rel[i], i)) + order[n:]
            info["scores"] = [{"collection": h.get("collection"), "embedding_id": h.get("embedding_id"),
                               "fused_rank": i + 1, "fused_score": h.get("score"), "relevance": round(rel[i], 4),
                               "rank": order.index(i) + 1} for i, h in enumerate(block)]
            _reorder(results, order, n)
    out = [results[i] for i in order][:limit]
    n_ann = math.ceil(len(out) * keep_pct / 100)
    for r, h in enumerate(out, 1):
        h["rank"] = r
        h["annotate"] = r <= n_ann
    counts = meta.get("counts")
    if isinstance(counts, dict):
        counts["returned"], counts["for_annotation"] = len(out), n_ann
    timings = meta.get("timings_ms")
    if isinstance(timings, dict):
        timings["rerank"] = info["ms"]
    res["results"] = out
    meta["rerank"] = info
    return res


def _unit(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and 0.0 <= x <= 1.0


def _reorder(results: list[dict[str, Any]], order: list[int], n: int) -> None:
    """The reranked block takes over the block's score slots: the hit now first gets the highest fused
    score and rel_score of the block, and so on, so scores keep falling with rank, stay on the fusion's
    scale, and the results after the block keep theirs."""
    scores = sorted((results[i].get("score") or 0.0 for i in range(n)), reverse=True)
    rels = sorted((results[i].get("rel_score") or 0.0 for i in range(n)), reverse=True)
    for slot, i in enumerate(order[:n]):
        results[i]["score"], results[i]["rel_score"] = scores[slot], rels[slot]
