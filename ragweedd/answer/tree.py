"""Section trees of documents (docs/answers.md, "Tree mode"): built from the outline every chunk
carries, each node with its page range and a short summary.

A document's tree is built on demand from its chunks' ``section_path`` and ``pages`` (the PDF
outline or detected headings, markdown and docx headings), so it always matches the index. A
document without headings is one node. Summaries are extractive (the section's leading
sentences) unless an LLM writes them; LLM summaries are cached per content hash, section and model
(ragweedd/store/sqlite/tree_db.py), so each is written once.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragweedd.logging import get_logger

if TYPE_CHECKING:
    from collections.abc import Iterator

    from ragweedd.llm.base import ChatProvider
    from ragweedd.store.protocols import SummaryStore

log = get_logger(__name__)

SUMMARY_CHARS = 240       # an extractive summary: the leading sentences up to this many characters
SUMMARY_SOURCE_CHARS = 4000  # what an LLM summary reads of a section
SUMMARY_MAX_TOKENS = 120
SUMMARY_PROMPT = ("Summarise the following section of a document in one or two sentences (at most 40 words). "
                  "Name the concrete facts, figures and topics it covers. Reply with the summary only.\n\n"
                  "Document: {DOC}\nSection: {TITLE}\n\n{TEXT}")
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


@dataclass
class Node:
    id: str
    title: str
    path: list[str]
    chunk_ids: list[int] = field(default_factory=list)
    pages: set[int] = field(default_factory=set)
    text: list[str] = field(default_factory=list)
    children: list["Node"] = field(default_factory=list)
    summary: str = ""

    @property
    def depth(self) -> int:
        return max(len(self.path) - 1, 0)

    def page_range(self) -> list[int] | None:
        pages = self.all_pages()
        return [min(pages), max(pages)] if pages else None

    def all_pages(self) -> set[int]:
        out = set(self.pages)
        for c in self.children:
            out |= c.all_pages()
        return out

    def all_chunk_ids(self) -> list[int]:
        out = list(self.chunk_ids)
        for c in self.children:
            out.extend(c.all_chunk_ids())
        return out

    def own_text(self) -> str:
        return " ".join(self.text)

    def walk(self) -> Iterator[Node]:
        yield self
        for c in self.children:
            yield from c.walk()


@dataclass
class DocTree:
    collection: str
    md5: str
    title: str
    source_file: str
    roots: list[Node]
    summary: str = ""

    @property
    def structured(self) -> bool:
        return any(n.path for n in self.nodes())

    def nodes(self) -> list[Node]:
        return [n for r in self.roots for n in r.walk()]

    def node(self, node_id: str) -> Node | None:
        return next((n for n in self.nodes() if n.id == node_id), None)

    def page_count(self) -> int:
        pages: set[int] = set()
        for r in self.roots:
            pages |= r.all_pages()
        return len(pages)


def build(collection: str, doc: dict[str, Any], rows: list[dict[str, Any]]) -> DocTree:
    """A document's tree from its chunk rows (store/tree_db.section_rows). Nodes are numbered
    from 1 in reading order; chunks before the first heading form a node of their own."""
    name = Path(doc.get("source_file") or "").name
    title = (doc.get("title") or "").strip() or name
    by_path: dict[tuple[str, ...], Node] = {}
    roots: list[Node] = []

    def node_of(path: tuple[str, ...]) -> Node:
        n = by_path.get(path)
        if n is not None:
            return n
        parent = node_of(path[:-1]) if len(path) > 1 else None
        n = Node(id=str(len(by_path) + 1), title=path[-1] if path else "(before the first heading)",
                 path=list(path))
        by_path[path] = n
        (parent.children if parent is not None else roots).append(n)
        return n

    structured = any(r["section_path"] for r in rows)
    for r in rows:
        n = node_of(tuple(r["section_path"])) if structured else node_of(())
        n.chunk_ids.append(r["id"])
        n.pages.update(int(p) for p in r["pages"] if isinstance(p, int))
        n.text.append(r["text"])
    if not structured and roots:
        roots[0].title = title
    for n in by_path.values():
        n.summary = extractive_summary(n)
    tree = DocTree(collection, doc["md5"], title, doc.get("source_file") or "", roots)
    tree.summary = extractive_summary(roots[0]) if roots else ""
    return tree


def _clean_start(text: str, title: str) -> str:
    """``text`` from the first full sentence after the section's heading. A chunk's overlap with the
    one before can begin mid-word ("inancial Statements. RESULTS OF OPERATIONS The following"): the
    text then starts after the heading where the heading is near the start, else after the tail of
    the heading it starts with ("PERATIONS The ..."), else, when it starts with a lower-case letter,
    at the next sentence (or, failing one, the next word)."""
    head = " ".join(title.split())
    if head:
        at = text.lower().find(head.lower(), 0, len(head) + 300)
        # the heading itself, not its words inside a sentence: at the start, after the end of an
        # overlap that begins mid-word, or written as the heading is (a title of one word could
        # start any sentence)
        if at >= 0 and (not text[:at].strip(" #") or (text[:1].islower() and text[:at].rstrip()[-1:] in ".!?:;)")
                        or (text[at:at + len(head)] == head and " " in head)):
            return text[at + len(head):].lstrip(" :.-–—")
        # the heading's tail, cut mid-word ("AL DATA" of "Selected Financial Data") or in capitals
        # ("TRADEMARKS" of "Summary of Trademarks"); a tail that starts a word ("Taxes are ...")
        # may be the text's own first word
        low, hl = text.lower(), head.lower()
        for k in range(len(hl) - 1, 2, -1):
            if ((hl[-k - 1].isalnum() or text[:k].isupper()) and low.startswith(hl[-k:])
                    and not low[k:k + 1].isalnum()):
                return text[k:].lstrip(" :.-–—")
    # a fragment of a number, word or sentence before the first word: ". Intellectual", ",086 Notes",
    # "S Not applicable"
    m = re.match(r"(?:[.,;:)\]\-–—]\S*|[B-HJ-Z])\s+", text)
    if m:
        text = text[m.end():]
    if text[:1].islower():
        m = re.search(r"[.!?]\s+(?=[\"'(\[]?[A-Z0-9])", text[:400])
        if m:
            return text[m.end():]
        return text.split(" ", 1)[1] if " " in text else ""
    return text


def extractive_summary(n: Node) -> str:
    """The section's leading full sentences after its heading, or, for a section with no text of
    its own, its first child's."""
    # one chunk: the next one repeats the overlap, which would read as the text said twice
    text = next((t for t in (_clean_start(" ".join(c.split()), n.title) for c in n.text) if t), "")
    text = re.split(r"(?:^|\s)#{1,6}\s", text, maxsplit=1)[0].strip()  # up to the next markdown heading
    if not text and n.children:
        return extractive_summary(n.children[0])
    out = ""
    for s in _SENTENCE.split(text):
        if out and len(out) + len(s) + 1 > SUMMARY_CHARS:
            break
        out = f"{out} {s}".strip()
    return out if len(out) <= SUMMARY_CHARS else out[:SUMMARY_CHARS].rsplit(" ", 1)[0] + " …"


def fill(template: str, **values: str) -> str:
    # one pass: a section whose text holds "{TITLE}" is inserted verbatim, not filled again
    return re.sub(r"\{([A-Z]+)\}", lambda m: values.get(m.group(1), m.group(0)), template)


def pages_text(pages: list[int] | None) -> str:
    if not pages:
        return ""
    return f"p. {pages[0]}" if pages[0] == pages[1] else f"pp. {pages[0]}-{pages[1]}"


def outline(tree: DocTree, prefix: str) -> str:
    """The tree as the LLM reads it: one line per node, indented by depth."""
    lines = []
    for n in tree.nodes():
        where = pages_text(n.page_range())
        lines.append(f"{'  ' * n.depth}[{prefix}.{n.id}] {n.title}" + (f" ({where})" if where else "")
                     + (f": {n.summary}" if n.summary else ""))
    return "\n".join(lines)


async def summarise(trees: list[DocTree], provider: ChatProvider, cache: SummaryStore, *, concurrency: int,
                    sections: bool) -> dict[str, Any]:
    """LLM summaries for the documents (``sections``: for every node too), from the cache where it
    has them. A failed call keeps the extractive summary: a summary is a hint, never worth failing
    an answer for. Returns the cost."""
    cost: dict[str, Any] = {"calls": 0, "cached": 0, "errors": 0, "input_tokens": 0, "output_tokens": 0}
    sem = asyncio.Semaphore(max(1, concurrency))
    writer = provider.spec

    async def one(tree: DocTree, key: str, title: str, text: str) -> str | None:
        async with sem:
            try:
                res = await provider.complete([{"role": "user", "content": fill(
                    SUMMARY_PROMPT, DOC=tree.title, TITLE=title, TEXT=text[:SUMMARY_SOURCE_CHARS])}],
                    max_tokens=SUMMARY_MAX_TOKENS, temperature=0.0)
            except Exception as e:  # noqa: BLE001 - see the docstring
                cost["errors"] += 1
                log.warning("tree_summary_failed", doc=tree.md5, node=key, error=str(e)[:200])
                return None
            cost["calls"] += 1
            cost["input_tokens"] += res.usage.get("input_tokens", 0)
            cost["output_tokens"] += res.usage.get("output_tokens", 0)
            got = " ".join(res.text.split())[:600]
            if got:
                await asyncio.to_thread(cache.put, tree.md5, key, writer, got)
            return got or None

    jobs: list[tuple[Any, str, Any]] = []
    for t in trees:
        wanted = {"doc": t} | ({n.id: n for n in t.nodes()} if sections else {})
        have = await asyncio.to_thread(cache.get, t.md5, list(wanted), writer)
        cost["cached"] += len(have)
        for key, target in wanted.items():
            if key in have:
                _set(target, have[key])
                continue
            if isinstance(target, DocTree):
                text = "\n".join(f"{n.title}: {n.summary}" for n in t.nodes())
                jobs.append((target, key, one(t, key, "(the whole document: its sections)", text)))
            else:
                jobs.append((target, key, one(t, key, target.title, "\n".join(target.text) or target.summary)))
    results = await asyncio.gather(*(j[2] for j in jobs))
    for (target, _, _), got in zip(jobs, results):
        if got:
            _set(target, got)
    return cost


def _set(target: Any, summary: str) -> None:
    target.summary = summary
