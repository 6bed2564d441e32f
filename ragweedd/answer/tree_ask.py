"""Tree mode of ``ask`` (docs/answers.md, "Tree mode"): the LLM reads section trees instead of
ranked chunks.

1. Route: the candidate documents (every document of the collections when there are at most
   ``tree_documents_shown``, else those the ordinary search found, in its order) are shown with their
   top-level summary and section titles; the LLM picks up to ``tree_max_documents``. One candidate
   needs no call.
2. Select: the trees of the chosen documents (node id, title, pages, summary) are shown; the LLM
   picks up to ``tree_max_sections`` sections to open.
3. Answer: the chunks of the opened sections (their subsections included) are the numbered sources
   of the ordinary synthesis, so ``[N]`` cites a page of an opened section. The context's token
   budget is shared across the opened sections (fit_sections), so every section is read; a long
   section gives its chunks most relevant to the question, and the steps record what was left out.

Bad output at either step (no JSON, ids that do not exist, an empty pick) does not fail the answer:
it falls back to the ordinary retrieval's hits and says so in ``tree.fallback``. Every step goes into
the done event's ``tree`` record, which the history keeps.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, AsyncIterator, Callable

from ragweedd.answer import tree as T
from ragweedd.answer.answering import _config_dir_of, _merged_prompts, _overhead, _provider_from, answer_question
from ragweedd.answer.packing import SAFETY_TOKENS, estimate_tokens, serialise_source
from ragweedd.answer.thread import fit_thread, thread_budget
from ragweedd.config import Config
from ragweedd.contract import ThreadTurn, shown_hit
from ragweedd.errors import PickError, RequestError
from ragweedd.logging import get_logger

if TYPE_CHECKING:
    from ragweedd.embed.base import Embedder
    from ragweedd.llm.base import ChatProvider

log = get_logger(__name__)
PICK_MAX_TOKENS = 300
ROUTE_PROMPT = """You choose which documents can answer a question.

Documents:
{DOCS}

Question: {QUERY}

Reply with JSON only, no other text: {"documents": ["D1", ...]} listing at most {MAX} document ids \
that most likely contain the answer, best first."""
SELECT_PROMPT = """You choose which sections of documents to read to answer a question. Each line is \
a section: its id in brackets, title, pages and a summary; indented lines are subsections.

{OUTLINES}

Question: {QUERY}

Reply with JSON only, no other text: {"sections": ["D1.2", ...]} listing at most {MAX} section ids \
whose text you need to read, best first."""


@dataclass
class TreeScope:
    """Where tree mode reads: the collections and how to open each one's store."""

    collections: list[str]
    open_rag: Callable[[str], Any]
    summary_cache: Path
    filters: Any = None  # query.filters.Filters of the ask: only the documents they pass are offered


def parse_pick(text: str, key: str, known: set[str], limit: int) -> list[str]:
    """The ids of a ``{"key": [...]}`` reply that exist, in order, at most ``limit``. The JSON object
    may sit inside prose or a code fence; ids are matched case-insensitively. Raises PickError with
    what was wrong."""
    m = re.search(r"\{.*\}", text or "", re.S)
    if m is None:
        raise PickError(f"the reply holds no JSON object: {text[:120]!r}")
    try:
        obj = json.loads(m.group(0))
    except ValueError as e:
        raise PickError(f"the reply's JSON does not parse ({e}): {m.group(0)[:120]!r}") from None
    ids = obj.get(key) if isinstance(obj, dict) else None
    if not isinstance(ids, list):
        raise PickError(f"the reply's JSON has no list '{key}': {m.group(0)[:120]!r}")
    by_upper = {k.upper(): k for k in known}
    got: list[str] = []
    unknown: list[str] = []
    for i in ids:
        k = by_upper.get(str(i).strip().strip("[]").upper())
        if k is None:
            unknown.append(str(i)[:40])
        elif k not in got:
            got.append(k)
    if not got:
        if not unknown:
            what = "document" if key == "documents" else "section"
            raise PickError(f"the model picked no {what} (its reply: {m.group(0)[:120]!r})")
        raise PickError(f"none of the ids picked exists: {unknown}")
    return got[:limit]


def _load_trees(scope: TreeScope, hits: list[dict], shown: int) -> tuple[list[T.DocTree], int]:
    """The candidate documents' trees, and how many documents the collections hold."""
    docs: list[tuple[str, dict]] = []
    rags = {}
    try:
        for name in scope.collections:
            rags[name] = scope.open_rag(name)
            allowed = scope.filters.allowed_documents(rags[name]) if scope.filters is not None else None
            docs.extend((name, d) for d in rags[name].tree_documents() if allowed is None or d["md5"] in allowed)
        total = len(docs)
        if total > shown:
            order: list[tuple[str, str]] = []
            for h in hits:
                key = (str(h.get("collection")), str(h.get("doc_id")))
                if key not in order:
                    order.append(key)
            rank = {k: i for i, k in enumerate(order)}
            docs = sorted((d for d in docs if (d[0], d[1]["md5"]) in rank), key=lambda d: rank[(d[0], d[1]["md5"])])
            docs = docs[:shown]
        trees = [T.build(name, d, rags[name].tree_sections(d["md5"])) for name, d in docs]
    finally:
        for r in rags.values():
            r.close()
    return [t for t in trees if t.roots], total


def _open(scope: TreeScope, picks: list[tuple[T.DocTree, T.Node]]) -> list[list[dict]]:
    """The chunks of each opened section as hits, in the document's reading order."""

    out: list[list[dict]] = []
    seen: set[tuple[str, int]] = set()
    by_coll: dict[str, list[int]] = {}
    for t, n in picks:
        for i in n.all_chunk_ids():
            if (t.collection, i) not in seen:
                seen.add((t.collection, i))
                by_coll.setdefault(t.collection, []).append(i)
    got: dict[tuple[str, int], dict] = {}
    for coll, ids in by_coll.items():
        rag = scope.open_rag(coll)
        try:
            for i, h in rag.hits(ids).items():
                got[(coll, i)] = h
        finally:
            rag.close()
    for t, n in picks:
        out.append([])
        for i in n.all_chunk_ids():
            h = got.pop((t.collection, i), None)
            if h is not None:
                h.update(score=None, rel_score=1.0, tree_node=n.id)
                out[-1].append(shown_hit(h))
    return out


_WORD = re.compile(r"[^\W_]{3,}")


def _terms(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text or "")]


def fit_sections(query: str, groups: list[list[dict]], budget: int) -> tuple[list[dict], list[int]]:
    """The chunks of the opened sections that fit ``budget`` tokens, shared so that every section
    is read: the sections take turns, each adding its most relevant chunk not yet taken (BM25 of
    the question's words over the opened chunks; reading order breaks ties). A chunk that does not
    fit is skipped and a smaller one may still go in. Returns the chunks kept, per section in
    reading order, and how many chunks of each section were left out."""

    docs = [[_terms(h.get("text") or "") for h in g] for g in groups]
    flat = [d for g in docs for d in g]
    q = set(_terms(query))
    df = {w: sum(1 for d in flat if w in d) for w in q}
    avg = sum(len(d) for d in flat) / max(len(flat), 1) or 1.0

    def bm25(d: list[str]) -> float:
        score = 0.0
        for w in q:
            tf = d.count(w)
            if tf:
                idf = math.log(1 + (len(flat) - df[w] + 0.5) / (df[w] + 0.5))
                score += idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * len(d) / avg))
        return score

    def best_first(group: list[list[str]]) -> list[int]:
        return sorted(range(len(group)), key=lambda i: (-bm25(group[i]), i))

    queues = [best_first(d) for d in docs]
    # the number a source gets is not known yet: a two-digit one stands in for any
    cost = [[estimate_tokens(serialise_source(99, h)) + 2 for h in g] for g in groups]
    taken: list[set[int]] = [set() for _ in groups]
    used = 0
    while any(queues):
        for k, qu in enumerate(queues):
            while qu:
                i = qu.pop(0)
                if used + cost[k][i] <= budget:
                    taken[k].add(i)
                    used += cost[k][i]
                    break
    if not any(taken):
        # not even one chunk fits: the best goes in and packing cuts its text to the budget
        k = next(k for k, g in enumerate(groups) if g)
        taken[k].add(sorted(range(len(groups[k])), key=lambda i: (-bm25(docs[k][i]), i))[0])
    kept = [h for k, g in enumerate(groups) for i, h in enumerate(g) if i in taken[k]]
    return kept, [len(g) - len(taken[k]) for k, g in enumerate(groups)]


def no_llm_error() -> RequestError:
    # no fallback to the ordinary answer: a user who asked for tree mode would not learn why the
    # answer does not read sections
    return RequestError("ask mode 'tree' needs an LLM to read the section trees, and [llm] synthesis is empty",
                        hint='set [llm] synthesis (e.g. synthesis = "ollama:qwen2.5:7b"), or ask without mode '
                             "'tree'")


async def _complete(provider: ChatProvider, prompt: str, steps: dict) -> str:
    res = await provider.complete([{"role": "user", "content": prompt}], max_tokens=PICK_MAX_TOKENS, temperature=0.0)
    steps["calls"] += 1
    steps["input_tokens"] += res.usage.get("input_tokens", 0)
    steps["output_tokens"] += res.usage.get("output_tokens", 0)
    return res.text


async def tree_answer(query: str, res: dict, cfg: Config, scope: TreeScope, *,
                      synthesizer: ChatProvider | None = None, summarizer: ChatProvider | None = None,
                      embedder: Embedder | None = None, thread: list[ThreadTurn] | None = None,
                      searched: str | None = None) -> AsyncIterator[dict]:
    """The events of a tree-mode answer (the events of answering.answer_question, whose done event
    carries ``tree``). A turn of a conversation passes the earlier turns (``thread``) and the
    standalone query it was searched as (``searched``): the sections are chosen for that query, and
    the synthesis prompt reads the earlier turns within the same budget as the ordinary mode's."""

    synthesizer, own_s = _provider_from(cfg, "llm_synthesis", synthesizer, "llm.synthesis")
    if synthesizer is None:
        raise no_llm_error()
    own_m = False
    try:
        summarizer, own_m = _provider_from(cfg, "llm_annotation", summarizer, "llm.annotation")
        t0 = time.perf_counter()
        steps: dict[str, Any] = {"calls": 0, "input_tokens": 0, "output_tokens": 0, "documents": [],
                                 "sections": [], "fallback": None}
        hits = list(res.get("results") or [])
        wanted = searched or query
        groups = await _choose(wanted, hits, cfg, scope, synthesizer, summarizer, steps)
        # the sections were chosen by reading: annotation would only re-judge what was picked
        quiet = dataclasses.replace(cfg, llm_annotation="")
        prompts = _merged_prompts(_config_dir_of(cfg), None, synthesizer)
        sources = hits
        if any(groups):
            overhead = _overhead(query, prompts)
            budget = cfg.llm_context_tokens - cfg.max_tokens - overhead - SAFETY_TOKENS
            if thread:  # the earlier turns take their share first, as answer_question counts them
                _, used = fit_thread(thread, thread_budget(cfg.llm_context_tokens, cfg.max_tokens, overhead,
                                                           SAFETY_TOKENS))
                budget -= used["thread_tokens"]
            sources, left = fit_sections(wanted, groups, budget)
            for sec, n_left in zip(steps["sections"], left):
                sec["chunks_read"] = sec["chunks"] - n_left
                sec["chunks_left_out"] = n_left
            # the token budget, shared across the sections, decides; a count cap would cut the
            # later sections off
            quiet = dataclasses.replace(quiet, context_chunks=max(len(sources), 1))
        steps["ms"] = round((time.perf_counter() - t0) * 1000, 1)
        async for ev in answer_question(query, sources, quiet, synthesizer=synthesizer, embedder=embedder,
                                        prompts=prompts, thread=thread, searched=searched):
            if ev["type"] == "done":
                ev["tree"] = steps
                ev["llm_calls"] = ev.get("llm_calls", 0) + steps["calls"] + steps.get("summaries", {}).get("calls", 0)
                ev.pop("state", None)  # a continuation would re-ask without the tree's record
                ev["continuable"] = False
            yield ev
    finally:
        if own_s:
            await synthesizer.aclose()
        if own_m and summarizer is not None:
            await summarizer.aclose()


async def _choose(query: str, hits: list[dict], cfg: Config, scope: TreeScope, llm: ChatProvider,
                  summarizer: ChatProvider | None, steps: dict) -> list[list[dict]]:
    """Route, then select; the opened chunks per section, or [] after a recorded fallback."""
    trees, total = await asyncio.to_thread(_load_trees, scope, hits, cfg.tree_documents_shown)
    steps["candidates"] = len(trees)
    steps["documents_total"] = total
    if not trees:
        steps["fallback"] = {"stage": "route", "reason": "no document of the collections is a candidate"
                             + (" (none passes the ask's filters)" if scope.filters is not None else "")}
        return []
    cache = None
    if summarizer is not None:
        from ragweedd.store.backends import open_summary_cache

        cache = await asyncio.to_thread(open_summary_cache, scope.summary_cache)
    try:
        if cache is not None and summarizer is not None:
            steps["summaries"] = await T.summarise(trees, summarizer, cache, concurrency=cfg.annotation_concurrency,
                                                   sections=False)
            steps["summaries"]["provider"] = summarizer.spec
        ids = {f"D{i + 1}": t for i, t in enumerate(trees)}
        if len(trees) == 1:
            chosen = ["D1"]
        else:
            docs = "\n".join(
                f"[{k}] {t.title} ({Path(t.source_file).name}"
                + (f", {t.page_count()} pages" if t.page_count() else "") + ")"
                + (f"\n    summary: {t.summary}" if t.summary else "")
                + ("\n    sections: " + "; ".join(r.title for r in t.roots[:12]) if t.structured else "")
                for k, t in ids.items())
            try:
                reply = await _complete(llm, T.fill(ROUTE_PROMPT, DOCS=docs, QUERY=query,
                                                   MAX=str(cfg.tree_max_documents)), steps)
                chosen = parse_pick(reply, "documents", set(ids), cfg.tree_max_documents)
            except PickError as e:
                steps["fallback"] = {"stage": "route", "reason": str(e)}
                log.warning("tree_route_fallback", reason=str(e)[:200])
                return []
        steps["documents"] = [{"id": k, "collection": ids[k].collection, "doc_id": ids[k].md5,
                               "title": ids[k].title, "source_file": ids[k].source_file,
                               "structured": ids[k].structured} for k in chosen]
        picked = [ids[k] for k in chosen]
        if cache is not None and summarizer is not None:
            more = await T.summarise(picked, summarizer, cache, concurrency=cfg.annotation_concurrency, sections=True)
            for k in ("calls", "cached", "errors", "input_tokens", "output_tokens"):
                steps["summaries"][k] += more[k]
        nodes = {f"{k}.{n.id}": (ids[k], n) for k in chosen for n in ids[k].nodes()}
        outlines = "\n\n".join(f"[{k}] {ids[k].title} ({Path(ids[k].source_file).name})\n{T.outline(ids[k], k)}"
                               for k in chosen)
        try:
            reply = await _complete(llm, T.fill(SELECT_PROMPT, OUTLINES=outlines, QUERY=query,
                                               MAX=str(cfg.tree_max_sections)), steps)
            sections = parse_pick(reply, "sections", set(nodes), cfg.tree_max_sections)
        except PickError as e:
            steps["fallback"] = {"stage": "select", "reason": str(e)}
            log.warning("tree_select_fallback", reason=str(e)[:200])
            return []
        # a section and its own subsection: the subsection's chunks are in the section already
        keep = [s for s in sections if not any(s != o and s.startswith(o.split(".")[0] + ".")
                                               and _inside(nodes[s][1], nodes[o][1]) for o in sections)]
        steps["sections"] = [{"id": s, "document": s.split(".")[0], "title": nodes[s][1].title,
                              "path": nodes[s][1].path, "pages": nodes[s][1].page_range(),
                              "chunks": len(nodes[s][1].all_chunk_ids())} for s in keep]
        return await asyncio.to_thread(_open, scope, [nodes[s] for s in keep])
    finally:
        if cache is not None:
            cache.close()


def _inside(inner: T.Node, outer: T.Node) -> bool:
    return inner is not outer and any(n is inner for n in outer.walk())
