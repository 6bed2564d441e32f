"""The MCP (Model Context Protocol) face of ragweedd: tools an assistant calls to search, read and ask.

One tool set, two ways to reach the index (see docs/mcp.md):

* ``ragweedctl mcp`` serves MCP over stdio and proxies every call to the running daemon through
  its HTTP API, with ragweedctl's own client (ragweedd/cli/mcp_stdio.py);
* the daemon serves MCP over streamable HTTP at ``/mcp`` (ragweedd/api/mcp_http.py), calling its
  engine directly.

The ``mcp`` SDK (and pydantic, starlette under it) is imported only here, and this module only by
those two: ragweedctl's other commands and the daemon's start stay as fast as before.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from typing import Annotated, Any, Literal, Protocol
from urllib.parse import quote, unquote

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field, ValidationError

from ragweedd import __version__

# What a tool hands back is read by a model: a whole 64 MiB document would drown it.
DEFAULT_MAX_BYTES = 20_000
MAX_MAX_BYTES = 1_000_000
# A search hit's text in the text part of a result: a model reads every character of it, the
# structured content carries the whole chunk.
SNIPPET_CHARS = 160
SECTION_CHARS = 60
# The whole request per kind of call, as ragweedctl's own defaults.
TIMEOUTS = {"ask": 600.0, "upload": 300.0}
DEFAULT_TIMEOUT = 30.0

INSTRUCTIONS = (
    "ragweedd indexes the user's local documents. Use `search` to find passages (each hit has a `uri` "
    "that opens the exact place: #page=N, #L12-L20), `get_document` to read a document or a page or line "
    "range of it, and `ask` for an answer with numbered citations (or quoted passages when no LLM is "
    "configured). For a follow-up question, pass the conversation_id the last `ask` returned, so the "
    "question keeps its subject. Cite hits by their uri.")


class Backend(Protocol):
    """Where the tools' calls go: the daemon's HTTP API (stdio server) or its engine (/mcp)."""

    async def call(self, method: str, path: str, body: dict | None = None, *, raw: bytes | None = None,
                   query: dict | None = None) -> dict: ...


# --------------------------------------------------------------------------- backends
class EngineBackend:
    """The daemon's engine, called in-process with the same validation as the REST routes."""

    def __init__(self, engine: Any, api_state: Any = None) -> None:
        self.engine = engine
        self.api_state = api_state  # shares max_concurrent_answers with /v1/ask

    async def call(self, method: str, path: str, body: dict | None = None, *, raw: bytes | None = None,
                   query: dict | None = None) -> dict:
        from ragweedd.errors import RagweedError

        try:
            return await self._dispatch(method, path, body or {}, raw, query or {})
        except RagweedError as e:  # worded as the stdio server words the same error from the API
            raise ToolError(e.say("mcp")) from None

    async def _dispatch(self, method: str, path: str, body: dict, raw: bytes | None, query: dict) -> Any:
        from ragweedd.api import openapi

        eng = self.engine
        parts = [unquote(p) for p in path.strip("/").split("/")]  # v1, resource, ...
        match (method, parts[1:]):
            case ("GET", ["status"]):
                return await eng.status()
            case ("GET", ["collections"]):
                return {"items": await eng.list_collections()}
            case ("POST", ["collections"]):
                openapi.validate(body, openapi.schema("AddCollection"), "arguments")
                return await eng.add_collection(body["name"], body["paths"], body.get("ignore") or [],
                                                body.get("topic", ""))
            case ("POST", ["collections", name, "scan"]):
                return await eng.scan(name)
            case ("POST", ["collections", name, "documents"]):
                from ragweedd.api.routes import check_filename

                return await eng.upload(name, check_filename(query["filename"]), raw or b"")
            case ("GET", ["documents"]):
                return await eng.list_documents(collection=query.get("collection"), state=query.get("state"),
                                                path_glob=query.get("path_glob"), offset=query.get("offset", 0),
                                                limit=query.get("limit", 50))
            case ("GET", ["documents", key]):
                return await eng.get_document(key)
            case ("POST", ["search"]):
                openapi.validate(body, openapi.schema("SearchRequest"), "arguments")
                return await eng.search(body.pop("query"), **body)
            case ("POST", ["ask"]):
                body.pop("stream", None)
                openapi.validate(body, openapi.schema("AskRequest"), "arguments")
                return await self._ask(body)
        raise ToolError(f"internal: no engine call for {method} {path}")

    async def _ask(self, body: dict) -> dict:
        """The whole answer; every slot taken is AnswersBusy, worded for MCP by ``call``."""
        from ragweedd.api.routes import _collect
        from ragweedd.api.sse import answer_events

        query = body.pop("query")
        async with answer_events(self.api_state, lambda: self.engine.ask(query, **body)) as (first, events):
            return await _collect(first, events)


# --------------------------------------------------------------------------- shaping
_PLACE = ("collection", "filename", "source_file", "uri", "page_label", "section", "span", "lines",
          "sheet", "table", "table_title", "rows", "t_start", "t_end", "member")


_MD5 = re.compile(r"[0-9a-fA-F]{32}")


def _hit(h: dict) -> dict:
    out = {k: h.get(k) for k in ("doc_id", *_PLACE, "score", "snippet", "snippet_marks") if h.get(k) is not None}
    out["text"] = h.get("text", "")
    return out


def _source(s: dict) -> dict:
    out = {k: s.get(k) for k in ("n", "label", *_PLACE, "score") if s.get(k) is not None}
    quotes = s.get("quotes") or ([s["quote"]] if s.get("quote") else [])
    if quotes:
        out["quotes"] = [{k: q.get(k) for k in ("text", "uri", "lines", "page_label") if q.get(k) is not None}
                         for q in quotes]
    if s.get("text"):
        out["text"] = s["text"]
    return out


# --------------------------------------------------------------------------- the text part
# A tool's result has two parts: structured content (every field, for clients and models that read
# JSON) and a text part. Clients that forward both to the model pay for both, so the text part is a
# short reading of the result, not the same JSON again (docs/mcp.md).
Result = Annotated[CallToolResult, dict[str, Any]]


def _result(data: dict[str, Any], text: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=data)


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _clip(text: str, n: int) -> str:
    """``text`` on one line, cut at a word before ``n`` characters (with an ellipsis)."""
    text = _one_line(text)
    if len(text) <= n:
        return text
    cut = text[: n - 1]
    if " " in cut[n // 2:]:
        cut = cut[: cut.rindex(" ")]
    return cut.rstrip(" ,;:.-") + "…"


def _place(h: dict, lines: bool = True) -> str:
    """Where a hit or source is in its file: member, page, lines (unless the uri shows them), time,
    section."""
    bits = []
    if h.get("member"):
        bits.append(f"in {h['member']}")
    if h.get("page_label"):
        bits.append(f"p. {h['page_label']}")
    if h.get("sheet"):
        bits.append(f"sheet {h['sheet']}")
    if isinstance(h.get("table"), int):
        bits.append(f"table {h['table']}")
    rows = h.get("rows")
    if isinstance(rows, list) and rows and isinstance(rows[0], int):  # a CSV has rows and no sheet
        last = rows[-1] if isinstance(rows[-1], int) else rows[0]
        bits.append(f"row {rows[0]}" if last == rows[0] else f"rows {rows[0]}-{last}")
    span = h.get("lines") if lines else None
    if isinstance(span, list) and len(span) == 2 and all(isinstance(x, int) for x in span):
        bits.append(f"line {span[0]}" if span[0] == span[1] else f"lines {span[0]}-{span[1]}")
    if h.get("t_start") is not None:
        bits.append(f"at {float(h['t_start']):.0f} s")
    if h.get("section"):
        bits.append("§ " + _clip(h["section"], SECTION_CHARS))
    return ", ".join(bits)


def _snippet(h: dict) -> str:
    """The hit's ``snippet`` when the search made one, else the start of its text from its first
    whole word (a chunk may begin in the middle of one), cut at SNIPPET_CHARS."""
    snippet = h.get("snippet")
    if isinstance(snippet, str) and snippet.strip():
        return _clip(snippet, SNIPPET_CHARS)
    text = _one_line(h.get("text", ""))
    span = h.get("span")
    mid_word = isinstance(span, list) and span and isinstance(span[0], int) and span[0] > 0 and text[:1].isalnum()
    if mid_word and " " in text[:40]:
        text = "…" + text[text.index(" ") + 1:]
    return _clip(text, SNIPPET_CHARS)


def search_text(query: str, hits: list[dict]) -> str:
    """A search result as a model reads it: one short block per hit (rank, file and place, doc_key,
    a snippet, the uri); the full text and every field are in the structured content."""
    if not hits:
        return f"No hits for {_clip(query, 200)!r}."
    several = len({h.get("collection") for h in hits}) > 1
    out = [f"{len(hits)} hit{'s' if len(hits) != 1 else ''}, best first (full texts and fields: structured "
           "content):"]
    for i, h in enumerate(hits, 1):
        head = f"[{i}] {h.get('filename') or h.get('source_file') or '?'}"
        if several and h.get("collection"):
            head += f" ({h['collection']})"
        place = _place(h, lines=not str(h.get("uri") or "").rpartition("#")[2].startswith("L"))
        head += (f", {place}" if place else "") + (f", doc_key {h['doc_key']}" if h.get("doc_key") else "")
        out += [head, "    " + _snippet(h), "    " + str(h.get("uri") or h.get("source_file") or "")]
    return "\n".join(out)


def ask_text(res: dict) -> str:
    """An answer as a model reads it: the answer, then one line per numbered source (file, place,
    uri); the sources' quotes and texts are in the structured content."""
    out = [str(res.get("answer") or "").strip()]
    if res.get("finish_reason") not in (None, "stop"):
        out.append(f"(the answer ended early: {res['finish_reason']})")
    sources = res.get("sources") or []
    if sources:
        out.append("\nSources:")
    for s in sources:
        place = _place(s)
        quotes = s.get("quotes") or []
        uri = (quotes[0].get("uri") if len(quotes) == 1 else None) or s.get("uri") or s.get("source_file") or ""
        out.append(f"[{s.get('n', '?')}] {s.get('filename') or s.get('label') or '?'}"
                   + (f", {place}" if place else "") + f" — {uri}")
    rw = res.get("rewrite") if isinstance(res.get("rewrite"), dict) else None
    if rw and rw.get("rewritten"):
        out.insert(0, f"(searched for: {_clip(str(rw.get('query', '')), 300)})")
    if res.get("conversation_id"):
        out.append(f"(conversation_id {res['conversation_id']}, turn {res.get('turn')}: pass it back to ask a "
                   "follow-up)")
    if res.get("history_id"):
        out.append(f"(history_id {res['history_id']})")
    return "\n".join(out)


def json_text(data: Any) -> str:
    """Compact JSON: the same data, without the indentation that doubles its size."""

    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def _cap(text: str, max_bytes: int) -> tuple[str, bool]:
    data = text.encode("utf-8")
    if len(data) <= max_bytes:
        return text, False
    return data[:max_bytes].decode("utf-8", "ignore"), True


def _glob_escape(path: str) -> str:
    return "".join(f"[{c}]" if c in "*?[" else c for c in path)


def merge_chunks(chunks: list[dict]) -> tuple[str, int | None]:
    """The text the chunks cover, overlaps counted once, in document order (chunks overlap by
    chunk_overlap_pct); a gap (a chunk dropped as garbage) is marked. Returns (text, first line)."""
    ordered = sorted(chunks, key=lambda c: ((c.get("span") or [None])[0] or 0, c.get("chunk_idx", 0)))
    out: list[str] = []
    end: int | None = None
    for c in ordered:
        span = c.get("span") or [None, None]
        start, stop = span[0], span[-1]
        text = c.get("text", "")
        if start is None or stop is None:  # no position: whole, in order
            out.append(("\n" if out else "") + text)
        elif end is None or start >= end:
            if end is not None and start > end:
                out.append("\n[…]\n")
            out.append(text)
            end = stop
        elif stop > end:
            out.append(text[end - start:])
            end = stop
    first = next((c["lines"][0] for c in ordered if c.get("lines")), None)
    return "".join(out), first


# --------------------------------------------------------------------------- the server
def bad_arguments(e: ValidationError) -> str:
    """pydantic's report on a tool's arguments, as one sentence per argument: which one, and what
    it must be (without pydantic's type codes and links, which say nothing to a model)."""
    out = []
    for err in e.errors()[:5]:
        name = ".".join(str(x) for x in err.get("loc", ()) if x != "__root__") or "the arguments"
        if err.get("type") == "missing":
            out.append(f"argument '{name}' is required")
            continue
        got = repr(err.get("input"))
        got = got if len(got) <= 40 else got[:39] + "…"
        out.append(f"argument '{name}': {str(err.get('msg', 'is not valid')).lower().rstrip('.')} (got {got})")
    return "; ".join(out)


class _Server(MCPServer):
    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as e:
            if isinstance(e.__cause__, ValidationError):
                raise ToolError(f"Error executing tool {name}: {bad_arguments(e.__cause__)}") from e.__cause__
            raise


Str = Annotated[str, Field(min_length=1, max_length=8000)]
Name = Annotated[str, Field(min_length=1, max_length=128, description="a collection name")]


def build_server(backend: Backend, *, allow_writes: bool = False, name: str = "ragweedd") -> MCPServer:  # noqa: C901 - each MCP tool is a closure registered here; mccabe adds their branches to this function
    mcp: MCPServer = _Server(name, version=__version__, instructions=INSTRUCTIONS, log_level="WARNING")
    read_only = ToolAnnotations(read_only_hint=True, open_world_hint=False)

    def filters(collections: list[str] | None, path_glob: str | None, file_type: str | None) -> dict:
        f = {"collections": collections or None, "path_glob": path_glob, "file_type": file_type}
        return {k: v for k, v in f.items() if v is not None}

    @mcp.tool(annotations=read_only)
    async def search(
        query: Annotated[str, Field(min_length=1, max_length=8000, description="what to look for")],
        collections: Annotated[list[str] | None, Field(description="only these collections")] = None,
        path_glob: Annotated[str | None, Field(description="only files whose path matches, e.g. '*/2024/*'")] = None,
        file_type: Annotated[str | None, Field(description="only this file type, e.g. 'pdf' or 'md'")] = None,
        limit: Annotated[int, Field(ge=1, le=100, description="most hits to return")] = 10,
    ) -> Result:
        """Hybrid (keyword + vector) search of the indexed documents. Each hit has its text and where it
        is: collection, file, page or section, character span, line range, and a uri that opens the place."""
        res = await backend.call("POST", "/v1/search", {"query": query, "top_k": limit,
                                                        **filters(collections, path_glob, file_type)})
        hits = [_hit(h) for h in res.get("results", [])[:limit]]
        await _add_doc_keys(hits)
        return _result({"query": query, "hits": hits}, search_text(query, hits))

    async def _add_doc_keys(hits: list[dict]) -> None:
        # a hit names its content (doc_id, a hash several paths may share); get_document wants the
        # file, so each hit carries the key of its own (collection, path)
        keys: dict[tuple, str | None] = {}
        for h in hits:
            where = (h.get("collection"), h.get("source_file"))
            if where not in keys and all(where):
                res = await backend.call("GET", "/v1/documents", query={
                    "collection": where[0], "path_glob": _glob_escape(str(where[1])), "limit": 2})
                items = [d for d in res.get("items", []) if d.get("state") != "superseded"]
                keys[where] = str(items[0]["doc_key"]) if len(items) == 1 else None
            if keys.get(where):
                h["doc_key"] = keys[where]

    @mcp.tool(annotations=read_only)
    async def get_document(
        doc_key: Annotated[str | None, Field(
            description="the document's key: a search hit's doc_key (not its doc_id, which is a content hash)")] = None,
        path: Annotated[str | None, Field(description="the file's path (absolute, or its end: 'notes/a.md')")] = None,
        page: Annotated[str | None, Field(description="only this page (its label, e.g. '4' or 'iv')")] = None,
        line_start: Annotated[int | None, Field(ge=1, description="first line to return (1-based)")] = None,
        line_end: Annotated[int | None, Field(ge=1, description="last line to return (inclusive)")] = None,
        max_bytes: Annotated[int, Field(ge=100, le=MAX_MAX_BYTES,
                                        description="cut the text after this many UTF-8 bytes")] = DEFAULT_MAX_BYTES,
    ) -> Result:
        """The indexed text of one document, by doc_key or path, optionally one page or a line range,
        cut at max_bytes (truncated says whether it was)."""
        if (doc_key is None) == (path is None):
            raise ToolError("give exactly one of doc_key or path")
        if line_end is not None and line_start is not None and line_end < line_start:
            raise ToolError(f"line_end ({line_end}) is before line_start ({line_start})")
        if doc_key is None:
            doc_key = await _find_key(str(path))
        elif _MD5.fullmatch(doc_key):
            raise ToolError(f"{doc_key!r} is a hit's doc_id (a hash of its content, which several files may "
                            "share); pass the hit's doc_key, or its source_file as path")

        d = await backend.call("GET", f"/v1/documents/{quote(doc_key, safe='')}")
        chunks = d.get("chunks_detail") or []
        if page is not None:
            chunks = [c for c in chunks if c.get("page_label") == page]
            if not chunks:
                raise ToolError(f"document {d.get('source_file')!r} has no indexed text on page {page!r}")
        text, first = merge_chunks(chunks)
        out: dict[str, Any] = {k: d.get(k) for k in ("doc_key", "collection", "source_file", "uri", "state")}
        if line_start is not None or line_end is not None:
            if first is None:
                raise ToolError(f"document {d.get('source_file')!r} has no line numbers (only plain text, "
                                "markdown and source files do); ask by page instead")
            lines = text.split("\n")
            lo = max(line_start or first, first)
            hi = min(line_end or (first + len(lines) - 1), first + len(lines) - 1)
            if lo > hi:
                raise ToolError(f"lines {line_start}-{line_end} are outside the document "
                                f"(lines {first}-{first + len(lines) - 1})")
            text = "\n".join(lines[lo - first: hi - first + 1])
            out["lines"] = [lo, hi]
        if page is not None:
            out["page"] = page
        out["text"], out["truncated"] = _cap(text, max_bytes)
        where = ", ".join(x for x in (f"page {page}" if page is not None else "",
                                      f"lines {out['lines'][0]}-{out['lines'][1]}" if "lines" in out else "") if x)
        head = (f"{out.get('source_file')} (doc_key {out.get('doc_key')}{', ' + where if where else ''}"
                f"{', cut at ' + str(max_bytes) + ' bytes' if out['truncated'] else ''}):")
        return _result(out, head + "\n" + out["text"])

    async def _find_key(path: str) -> str:
        exact = path.startswith("/")
        glob = _glob_escape(path) if exact else "*/" + _glob_escape(path.lstrip("./"))
        res = await backend.call("GET", "/v1/documents", query={"path_glob": glob, "limit": 20})
        items = [d for d in res.get("items", []) if d.get("state") != "superseded"]
        if not items:
            raise ToolError(f"no indexed document has the path {path!r}; `search` or `list_collections` "
                            "show what is indexed")
        if len(items) > 1:
            names = ", ".join(str(d.get("source_file")) for d in items[:5])
            raise ToolError(f"{len(items)} documents match {path!r} ({names}); give the full path or a doc_key")
        return str(items[0]["doc_key"])

    @mcp.tool(annotations=read_only)
    async def ask(
        query: Annotated[str, Field(min_length=1, max_length=8000, description="the question")],
        collections: Annotated[list[str] | None, Field(description="only these collections")] = None,
        path_glob: Annotated[str | None, Field(description="only files whose path matches")] = None,
        file_type: Annotated[str | None, Field(description="only this file type, e.g. 'pdf'")] = None,
        retrieval: Annotated[Literal["hybrid", "tree"], Field(
            description="'tree': the LLM picks documents by their summaries, then sections by their "
                        "titles and pages, and answers from those (needs an LLM in ragweedd)")] = "hybrid",
        conversation_id: Annotated[str | None, Field(
            max_length=128, description="continue this conversation: the conversation_id an earlier ask "
                                        "returned, so a follow-up ('and in 2016?') keeps its subject; "
                                        "leave it out to start a new one")] = None,
    ) -> Result:
        """An answer with numbered citations [N] to its sources (each with a uri and quoted sentences).
        Without an LLM configured in ragweedd, the answer is the quoted passages that answer the question
        (mode 'passages'). Every answer is a turn of a conversation (conversation_id): pass it back to ask
        a follow-up; the query searched for it is in 'searched'."""
        body = {"query": query, "stream": False, **filters(collections, path_glob, file_type)}
        if retrieval != "hybrid":
            body["mode"] = retrieval
        if conversation_id is not None:
            body["conversation_id"] = conversation_id
        res = await backend.call("POST", "/v1/ask", body)
        if res.get("error"):
            from ragweedd.errors import say

            err = res["error"]
            raise ToolError(say("mcp", f"the answer failed: {err.get('message', 'unknown error')}", err.get("hint"),
                                err.get("action")))
        out = {k: res.get(k) for k in ("answer", "mode", "label", "history_id", "conversation_id", "turn",
                                       "finish_reason", "tree", "citation_checks", "citations_verified", "rewrite")
               if res.get(k) is not None}
        if isinstance(res.get("rewrite"), dict):
            out["searched"] = res["rewrite"].get("query")
        out["sources"] = [_source(s) for s in res.get("sources", [])]
        return _result(out, ask_text(out))

    @mcp.tool(annotations=read_only)
    async def list_collections() -> Result:
        """The collections: name, folders, number of documents."""
        res = await backend.call("GET", "/v1/collections")
        out = {"collections": res.get("items", [])}
        return _result(out, json_text(out))

    @mcp.tool(annotations=read_only)
    async def status() -> Result:
        """The daemon's state: collections, files by state, queue, indexing progress, problems."""
        res = await backend.call("GET", "/v1/status")
        return _result(res, json_text(res))

    if not allow_writes:
        return mcp
    writes = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)

    @mcp.tool(annotations=writes)
    async def add_collection(
        name: Annotated[str, Field(min_length=1, max_length=64, description="the new collection's name")],
        paths: Annotated[list[str], Field(min_length=1, description="absolute folder paths to index")],
        ignore: Annotated[list[str] | None, Field(description="glob patterns to skip")] = None,
        topic: Annotated[str, Field(max_length=4096, description="what the collection is about")] = "",
    ) -> Result:
        """Add a collection of folders; indexing starts in the background."""
        res = await backend.call("POST", "/v1/collections", {"name": name, "paths": paths,
                                                             "ignore": ignore or [], "topic": topic})
        return _result(res, json_text(res))

    @mcp.tool(annotations=writes)
    async def scan(name: Name) -> Result:
        """Reconcile a collection's folders with its index now (new, changed and removed files)."""

        res = await backend.call("POST", f"/v1/collections/{quote(name, safe='')}/scan")
        return _result(res, json_text(res))

    @mcp.tool(annotations=writes)
    async def upload(
        collection: Name,
        filename: Annotated[str, Field(min_length=1, max_length=255, description="a bare file name, e.g. notes.md")],
        text: Annotated[str | None, Field(description="the file's content as text (UTF-8)")] = None,
        content_base64: Annotated[str | None, Field(description="the file's bytes, base64 (for binary files)")] = None,
    ) -> Result:
        """Store a file in a collection's managed folder and index it."""
        if (text is None) == (content_base64 is None):
            raise ToolError("give exactly one of text or content_base64")
        if text is not None:
            data = text.encode("utf-8")
        else:
            try:
                data = base64.b64decode(str(content_base64), validate=True)
            except (binascii.Error, ValueError):
                raise ToolError("content_base64 is not valid base64") from None

        res = await backend.call("POST", f"/v1/collections/{quote(collection, safe='')}/documents",
                                 raw=data, query={"filename": filename})
        return _result(res, json_text(res))

    return mcp
