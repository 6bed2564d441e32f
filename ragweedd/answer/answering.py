"""``answer_question``: annotate -> pack -> synthesise -> check, as a stream of events for SSE.

Events, in order:

- ``{"type": "sources", "sources": [...]}``: the retrieved hits (compact: no full text);
- ``{"type": "annotation", "embedding_id", "annotation", "relevant", "error"}``: one per hit, as they
  complete (only with an annotation provider);
- ``{"type": "context", "sources": [...]}``: the numbered sources that went into the prompt; their
  ``n`` is what ``[N]`` in the answer refers to;
- ``{"type": "token", "text": ...}``: answer text as it arrives;
- ``{"type": "done", ...}``: the result record (see ``_done``), everything the history stores.

Provider errors propagate as exceptions (ProviderError subclasses); the API turns them into its
error envelope or an SSE error event.
"""

from __future__ import annotations

import asyncio
import os
import re
import time
from typing import TYPE_CHECKING, Any, AsyncIterator

from ragweedd.answer import quotes as Q
from ragweedd.answer.annotate import AnnotationOutcome, annotate_iter, collect, compile_irrelevant
from ragweedd.answer.citations import check_citations, is_pure_refusal, is_refusal
from ragweedd.answer.packing import SAFETY_TOKENS, estimate_tokens, pack_sources, source_label
from ragweedd.answer.prompts import CONTINUE_PROMPT, NO_LLM_LABEL, REFUSAL, Prompts, fill, load_prompts
from ragweedd.answer.thread import fit_thread, thread_budget
from ragweedd.answer.verify import entail, verify
from ragweedd.config import Config
from ragweedd.contract import ThreadTurn
from ragweedd.errors import RequestError
from ragweedd.keyfile import synthesis_missing
from ragweedd.llm.base import StreamTally
from ragweedd.llm.factory import make_provider
from ragweedd.logging import get_logger

if TYPE_CHECKING:
    from pathlib import Path

    from ragweedd.embed.base import Embedder
    from ragweedd.llm.base import ChatProvider

log = get_logger(__name__)
EXCERPT_CHARS = 300
PASSAGE_CHARS = 700  # characters of each passage shown when no LLM writes the answer
PASSAGES_SHOWN = 5

_SOURCE_KEYS = ("embedding_id", "collection", "doc_id", "source_file", "filename", "source_rel_path", "uri", "score",
                "rel_score", "page_label", "section", "span", "lines", "sheet", "table", "table_title", "rows",
                "t_start", "t_end", "member")


def _compact(hit: dict, *, with_text: bool = False) -> dict:
    out = {k: hit.get(k) for k in _SOURCE_KEYS}
    out["label"] = source_label(hit)
    if "n" in hit:
        out["n"] = hit["n"]
    if "annotation" in hit:
        out["annotation"] = hit["annotation"]
    if "quotes" in hit:
        out["quotes"] = hit["quotes"]
        out["quote"] = hit.get("quote")
    text = hit.get("text") or ""
    if with_text:
        out["text"] = text
        if hit.get("truncated"):
            out["truncated"] = True
    else:
        out["excerpt"] = text[:EXCERPT_CHARS]
    return out


def _usage_add(a: dict, b: dict | None) -> dict:
    b = b or {}
    return {"input_tokens": a.get("input_tokens", 0) + b.get("input_tokens", 0),
            "output_tokens": a.get("output_tokens", 0) + b.get("output_tokens", 0)}


def synthesis_messages(query: str, packed: list[dict], prompts: Prompts,
                       earlier: list[dict] | None = None) -> list[dict]:
    """The prompt: the system prompt, the earlier turns of the conversation (``earlier``: user and
    assistant messages, answer/thread.py), then the sources and the question."""
    sources = "\n\n".join(p["block"] for p in packed)
    msgs = []
    if prompts.synthesis_system.strip():
        msgs.append({"role": "system", "content": fill(prompts.synthesis_system, REFUSAL=REFUSAL)})
    msgs.extend(earlier or [])
    msgs.append({"role": "user", "content": fill(prompts.synthesis, SOURCES=sources, QUERY=query, REFUSAL=REFUSAL)})
    return msgs


def _overhead(query: str, prompts: Prompts) -> int:
    return estimate_tokens(fill(prompts.synthesis_system, REFUSAL=REFUSAL)) + estimate_tokens(
        fill(prompts.synthesis, SOURCES="", QUERY=query, REFUSAL=REFUSAL))


def passages_answer(hits: list[dict], limit: int = PASSAGES_SHOWN, *, query: str = "",
                    embedder: Embedder | None = None) -> tuple[str, list[dict]]:
    """The answer without an LLM: the sentences of the retrieved passages that best answer ``query``
    (ragweedd/answer/quotes.py), grouped by passage, numbered, clearly labelled. Passages far below
    the best, or below the absolute floor, are not sources; with none above the floor the answer is
    the refusal and no source. Each source carries its ``quotes`` and best ``quote``."""

    ordered = sorted(hits, key=lambda h: -(h.get("rel_score") or 0.0))
    scores, cands = Q.rank_passages(query, ordered, embedder)
    top = max(scores, default=0.0)
    absolute = Q.answer_floor(embedder)  # 0 without an embedder: keyword-only scores run lower
    if top < absolute:
        return REFUSAL, []
    floor = max(Q.KEEP_RATIO * top, absolute)
    seen: set[tuple] = set()
    numbered: list[dict] = []
    parts = [NO_LLM_LABEL + ":"]
    for i in Q.kept(scores, rels=[h.get("rel_score") for h in ordered]):
        if len(numbered) >= limit:
            break
        # overlapping passages of one document hold the same sentence: it is quoted once, first
        qs = Q.quotes_for(i, ordered, cands, skip=seen)
        if not qs or max(q["score"] for q in qs) < floor - 1e-4:  # scores are rounded
            continue
        seen.update((ordered[i].get("doc_id"), tuple(q["span"])) for q in qs if q["span"])
        h = {**ordered[i], "n": len(numbered) + 1, "quotes": qs, "quote": max(qs, key=lambda q: q["score"])}
        numbered.append(h)
        parts.append(f"[{h['n']}] {source_label(h)}\n" + "\n".join(f"> {_quoted(q)}" for q in qs))
    return "\n\n".join(parts), numbered


def _quoted(q: dict) -> str:
    """A quote on one line; a heading or term brought along is set off by a dash."""
    lead = int(q.get("lead") or 0)
    head, rest = q["text"][:lead], q["text"][lead:]
    if not head.strip():
        return _one_line(rest)
    joint = " " if re.search(r"[.!?]['\"”’)\]]*\s*$", head) else " — "
    return _one_line(" ".join(head.split()) + joint + " ".join(rest.split()))


def _one_line(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= PASSAGE_CHARS else text[:PASSAGE_CHARS].rsplit(" ", 1)[0] + " …"


def _provider_from(cfg: Config, spec_attr: str, given: ChatProvider | None,
                   key: str) -> tuple[ChatProvider | None, bool]:
    if given is not None:
        return given, False
    spec = getattr(cfg, spec_attr, "") or ""
    if not spec:
        return None, False

    return make_provider(spec, cfg, key=key), True


async def answer_question(query: str, hits: list[dict], cfg: Config, *, annotator: ChatProvider | None = None,
                          synthesizer: ChatProvider | None = None,
                          prompts: Prompts | None = None, config_dir: str | Path | None = None,
                          embedder: Embedder | None = None,
                          entailer: ChatProvider | None = None, thread: list[ThreadTurn] | None = None,
                          searched: str | None = None) -> AsyncIterator[dict]:
    """Stream the events of one answer. ``annotator`` / ``synthesizer`` are ChatProviders; when None
    they are built from cfg.llm_annotation / cfg.llm_synthesis (empty = that stage is skipped).
    ``embedder`` (the collection's) scores the sentences quoted; without it quotes are chosen by
    keywords alone. A turn of a conversation passes the earlier turns (``thread``: they go into the
    synthesis prompt) and the query its question was searched as (``searched``: what annotation
    judges the passages by and the quoted sentences are chosen for, since "and black tea?" alone
    names no subject)."""
    t_start = time.perf_counter()
    judged = searched or query
    annotator, own_a = _provider_from(cfg, "llm_annotation", annotator, "llm.annotation")
    try:
        synthesizer, own_s = _provider_from(cfg, "llm_synthesis", synthesizer, "llm.synthesis")
    except BaseException:
        if own_a and annotator is not None:
            await annotator.aclose()
        raise
    try:
        if prompts is None:
            prompts = _merged_prompts(config_dir if config_dir is not None else _config_dir_of(cfg),
                                      annotator, synthesizer)
        yield {"type": "sources", "sources": [_compact(h) for h in hits]}

        # --- annotation -------------------------------------------------------------------
        outcome = AnnotationOutcome()
        if annotator is not None and hits:
            t0 = time.perf_counter()
            calls0 = annotator.calls
            pattern = compile_irrelevant(cfg.annotation_irrelevant_re, cfg.annotation_irrelevant_flags)
            results = []
            async for ev in annotate_iter(judged, hits, annotator, prompts.annotation,
                                          concurrency=cfg.annotation_concurrency, irrelevant=pattern):
                results.append(ev)
                yield {"type": "annotation", "embedding_id": ev["hit"].get("embedding_id"),
                       "annotation": ev["annotation"], "relevant": ev["relevant"], "error": ev["error"]}
            collect(outcome, results)
            outcome.calls = annotator.calls - calls0
            outcome.ms = (time.perf_counter() - t0) * 1000
        else:
            outcome.kept = list(hits)

        base: dict[str, Any] = {
            "query": query,
            "retrieved": [_compact(h) for h in hits],
            "annotations": [{"embedding_id": h.get("embedding_id"), "annotation": h.get("annotation"),
                             "relevant": True} for h in outcome.kept if annotator is not None]
            + [{"embedding_id": h.get("embedding_id"), "annotation": h.get("annotation"), "relevant": False}
               for h in outcome.filtered],
            "filtered": [_compact(h) for h in outcome.filtered],
            "annotation_errors": outcome.errors,
            "annotation_provider": annotator.spec if annotator is not None else None,
        }
        usage_by: dict[str, dict | None] = {"annotation": outcome.usage,
                                            "synthesis": {"input_tokens": 0, "output_tokens": 0}}

        # --- no LLM: cited passages -----------------------------------------------------
        if synthesizer is None:
            t0 = time.perf_counter()
            text, numbered = (await asyncio.to_thread(passages_answer, outcome.kept, query=judged, embedder=embedder)
                              if outcome.kept else (REFUSAL, []))
            quote_ms = (time.perf_counter() - t0) * 1000
            yield {"type": "context", "sources": [_compact(h, with_text=True) for h in numbered]}
            yield {"type": "token", "text": text}
            yield _done(base, mode="passages" if numbered else "empty", answer=text, context=numbered,
                        stop_reason="end", usage_by=usage_by, provider=None, model=None, llm_calls=outcome.calls,
                        annotate_ms=outcome.ms, synth_ms=0.0, t_start=t_start, messages=None, cfg=cfg,
                        quote_ms=quote_ms)
            return

        # --- nothing left to answer from: refuse without spending a call ---------------------
        if not outcome.kept:
            yield {"type": "context", "sources": []}
            yield {"type": "token", "text": REFUSAL}
            yield _done(base, mode="empty", answer=REFUSAL, context=[], stop_reason="end", usage_by=usage_by,
                        provider=synthesizer.spec, model=synthesizer.model, llm_calls=outcome.calls,
                        annotate_ms=outcome.ms, synth_ms=0.0, t_start=t_start, messages=None, cfg=cfg)
            return

        # --- synthesis --------------------------------------------------------------------
        overhead = _overhead(query, prompts)
        earlier, used = fit_thread(thread, thread_budget(cfg.llm_context_tokens, cfg.max_tokens, overhead,
                                                         SAFETY_TOKENS)) if thread else ([], None)
        packed, left_out, budget = pack_sources(outcome.kept, context_tokens=cfg.llm_context_tokens,
                                                max_tokens=cfg.max_tokens, context_chunks=cfg.context_chunks,
                                                overhead_tokens=overhead + (used or {}).get("thread_tokens", 0))
        base["budget"] = {**budget, **(used or {}), "left_out": [h.get("embedding_id") for h in left_out]}
        # each source carries its best sentence, so a citation can point at the words, not the passage
        from ragweedd.answer.quotes import attach

        t0 = time.perf_counter()
        packed = await asyncio.to_thread(attach, judged, packed, embedder)
        quote_ms = (time.perf_counter() - t0) * 1000
        yield {"type": "context", "sources": [_compact(h, with_text=True) for h in packed]}
        messages = synthesis_messages(query, packed, prompts, earlier)
        t0 = time.perf_counter()
        calls0 = synthesizer.calls
        tally = StreamTally(synthesizer.model, usage_by["synthesis"])
        async for c in synthesizer.stream(messages, max_tokens=cfg.max_tokens,
                                          temperature=cfg.llm_synthesis_temperature):
            tally.add(c)
            if c.text:
                yield {"type": "token", "text": c.text}
        usage_by["synthesis"] = tally.usage
        synth_ms = (time.perf_counter() - t0) * 1000
        verified = await verify_citations(tally.text, packed, cfg, entailer)
        yield _done(base, mode="llm", answer=tally.text, context=packed, stop_reason=tally.stop, usage_by=usage_by,
                    provider=synthesizer.spec, model=tally.model, llm_calls=outcome.calls + synthesizer.calls - calls0,
                    annotate_ms=outcome.ms, synth_ms=synth_ms, t_start=t_start, messages=messages, cfg=cfg,
                    quote_ms=quote_ms, verified=verified)
    finally:
        if own_a and annotator is not None:
            await annotator.aclose()
        if own_s and synthesizer is not None:
            await synthesizer.aclose()


def _config_dir_of(cfg: Config) -> Path | None:
    # custom prompts live beside the config file the daemon was started with
    src = getattr(cfg, "source", None)
    if isinstance(src, str) and src and not src.startswith("<"):
        from pathlib import Path

        return Path(src).parent
    return None


def _merged_prompts(config_dir: str | Path | None, annotator: ChatProvider | None,
                    synthesizer: ChatProvider | None) -> Prompts:
    # annotation and synthesis may use different providers, each with its own prompts.json entry
    a = load_prompts(config_dir, annotator.spec if annotator is not None else None)
    s = load_prompts(config_dir, synthesizer.spec if synthesizer is not None else None)
    return Prompts(annotation=a.annotation, synthesis=s.synthesis, synthesis_system=s.synthesis_system,
                   source={"annotation": a.source["annotation"], "synthesis": s.source["synthesis"],
                           "synthesis_system": s.source["synthesis_system"]})


async def verify_citations(answer: str, context: list[dict], cfg: Config,
                           entailer: ChatProvider | None = None) -> dict | None:
    """``citation_checks`` and ``citations_verified`` of an LLM answer (answer/verify.py), or None
    when ``verify_citations`` is off. The entailment model (``[llm] entailment``, or ``entailer``)
    is asked only about the citations the deterministic check accepts; its failure never fails the
    answer."""
    if not getattr(cfg, "verify_citations", True):
        return None

    t0 = time.perf_counter()
    checks = verify(answer, context, min_support=cfg.citation_min_support)
    summary: dict = {"method": "terms", "checked": len(checks), "min_support": cfg.citation_min_support}
    provider, own = None, False
    try:
        provider, own = _provider_from(cfg, "llm_entailment", entailer, "llm.entailment")
        if provider is not None and checks:
            cost = await entail(checks, context, provider, concurrency=cfg.annotation_concurrency)
            summary.update(method="terms+llm", entailment={"provider": provider.spec, **cost})
            errors = [c["entailment_error"] for c in checks if "entailment_error" in c]
            if errors:
                summary["entailment"]["error"] = errors[0]
    except Exception as e:  # noqa: BLE001 - a failed entailment check leaves the deterministic verdicts
        log.warning("entailment_failed", error=str(e)[:300])
        summary["entailment"] = {"error": str(e)[:300]}
    finally:
        if own and provider is not None:
            await provider.aclose()
    summary["unsupported"] = sum(1 for c in checks if not c["supported"])
    summary["supported"] = len(checks) - summary["unsupported"]
    summary["ms"] = round((time.perf_counter() - t0) * 1000, 1)
    return {"citation_checks": checks, "citations_verified": summary}


def _done(base: dict, *, mode: str, answer: str, context: list[dict], stop_reason: str, usage_by: dict,
          provider: str | None, model: str | None, llm_calls: int, annotate_ms: float, synth_ms: float, t_start: float,
          messages: list[dict[str, Any]] | None, cfg: Config, continuations: int = 0, quote_ms: float | None = None,
          verified: dict | None = None) -> dict:
    check = check_citations(answer, len(context)) if mode == "llm" else {
        "cited": [h["n"] for h in context], "invalid": []}
    by_n = {h["n"]: h for h in context}
    refused = mode == "empty" or is_refusal(answer)
    continuable = mode == "llm" and stop_reason == "max_tokens"
    total = _usage_add(usage_by["annotation"], usage_by["synthesis"])
    done = {
        "type": "done",
        **base,
        "mode": mode,  # "llm" | "passages" (no LLM configured) | "empty" (nothing to answer from)
        "label": NO_LLM_LABEL if mode == "passages" else None,
        "llm_setup": _llm_setup(cfg) if mode == "passages" else None,
        "answer": answer,
        "sources": [_compact(h, with_text=True) for h in context],
        "cited": [_compact(by_n[n]) for n in check["cited"]],
        "cited_numbers": check["cited"],
        "invalid_citations": check["invalid"],
        "refused": refused,
        "refused_only": refused and (mode == "empty" or is_pure_refusal(answer)),
        "stop_reason": stop_reason,
        "continuable": continuable,
        "provider": provider,
        "model": model,
        "usage": {**total, "by_stage": usage_by},
        "llm_calls": llm_calls,
        "continuations": continuations,
        "timings": {"annotate_ms": round(annotate_ms, 1), "synthesize_ms": round(synth_ms, 1),
                    "total_ms": round((time.perf_counter() - t_start) * 1000, 1)},
    }
    if quote_ms is not None:  # choosing the quoted sentences (their embedding included)
        done["timings"]["quote_ms"] = round(quote_ms, 1)
    if verified is not None:
        done.update(verified)
        if verified["citations_verified"]["unsupported"]:
            log.info("unsupported_citations", count=verified["citations_verified"]["unsupported"])
    if check["invalid"]:
        log.warning("invalid_citations", numbers=check["invalid"], sources=len(context))
    if continuable:
        done["state"] = {"query": base["query"], "messages": messages, "answer": answer,
                         "context": [{k: v for k, v in h.items()} for h in context],
                         "base": base, "provider": provider, "usage_by": usage_by, "llm_calls": llm_calls,
                         "annotate_ms": annotate_ms, "synthesize_ms": synth_ms, "continuations": continuations,
                         "max_tokens": cfg.max_tokens, "temperature": cfg.llm_synthesis_temperature}
    return done


async def continue_answer(state: dict, cfg: Config, *, synthesizer: ChatProvider | None = None) -> AsyncIterator[dict]:
    """Continue an answer that stopped at max_tokens: the partial reply goes back as the assistant's turn,
    followed by a request to carry on. Yields token events and a new done event for the whole answer."""

    if not isinstance(state, dict) or not state.get("messages") or "answer" not in state:
        raise RequestError("this answer cannot be continued: the state is missing or was not cut at max_tokens",
                           hint="continue only answers whose done event had continuable = true")
    t_start = time.perf_counter()
    own = False
    if synthesizer is None:
        from ragweedd.llm.factory import make_provider

        synthesizer, own = make_provider(state["provider"], cfg, key="llm.synthesis"), True
    try:
        messages = list(state["messages"]) + [{"role": "assistant", "content": state["answer"]},
                                              {"role": "user", "content": CONTINUE_PROMPT}]
        calls0 = synthesizer.calls
        tally = StreamTally(synthesizer.model)
        t0 = time.perf_counter()
        prev = state["answer"]
        async for c in synthesizer.stream(messages, max_tokens=state.get("max_tokens", cfg.max_tokens),
                                          temperature=state.get("temperature", cfg.llm_synthesis_temperature)):
            text = c.text
            if (text and not tally.parts and prev and not prev[-1].isspace() and not text[0].isspace()
                    and _needs_space(prev, text)):
                text = " " + text
            tally.add(c, text)
            if text:
                yield {"type": "token", "text": text}
        usage_by = dict(state["usage_by"])
        usage_by["synthesis"] = _usage_add(usage_by["synthesis"], tally.usage)
        synth_ms = state.get("synthesize_ms", 0.0) + (time.perf_counter() - t0) * 1000
        verified = await verify_citations(prev + tally.text, state["context"], cfg)
        yield _done(state["base"], mode="llm", answer=prev + tally.text, context=state["context"],
                    stop_reason=tally.stop, usage_by=usage_by, provider=synthesizer.spec, model=tally.model,
                    llm_calls=state.get("llm_calls", 0) + synthesizer.calls - calls0,
                    annotate_ms=state.get("annotate_ms", 0.0), synth_ms=synth_ms, t_start=t_start,
                    messages=state["messages"], cfg=cfg, continuations=state.get("continuations", 0) + 1,
                    verified=verified)
    finally:
        if own:
            await synthesizer.aclose()


def _needs_space(prev: str, nxt: str) -> bool:
    # a continuation often starts a new sentence without the space that separates it: "... [2]." + "The"
    return prev[-1] in ".,;:!?)]" and nxt[0].isalnum()


async def ask(query: str, hits: list[dict], cfg: Config, **kw: Any) -> dict:
    """Non-streaming wrapper: the final ``done`` record of ``answer_question``."""
    return _last_done([ev async for ev in answer_question(query, hits, cfg, **kw)])


async def ask_continue(state: dict, cfg: Config, **kw: Any) -> dict:
    return _last_done([ev async for ev in continue_answer(state, cfg, **kw)])


def _last_done(events: list[dict]) -> dict:
    # both generators end with a done record on every path, including a refusal
    return [ev for ev in events if ev["type"] == "done"][-1]


def _llm_setup(cfg: Config) -> str | None:
    return synthesis_missing(cfg, os.environ)
