"""The OpenAPI 3.1 document served at /v1/openapi.json, and the request validator that uses it.

The document is written out by hand (not generated from the route table) so that a test comparing
it with the routes aiohttp actually registered means something: a route added without docs, or
docs for a route that does not exist, fails that test. Request bodies and query parameters are
validated against the same schemas, so the documented contract is the enforced one.
"""

from __future__ import annotations

import copy
import functools
import re
from typing import Any

from ragweedd import __version__, contract
from ragweedd.api import openai_compat
from ragweedd.api.schemas import components, ref
from ragweedd.errors import RequestError

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
# Free text may hold anything but NUL (SQLite, file names and globs cannot carry it). Saying so in
# the document keeps schema-generated requests (schemathesis) and the server in agreement.
NO_NUL = r"^[^\x00]*$"
CHALLENGE_PATTERN = r"^[A-Za-z0-9_-]{16,128}$"
# A document id as search results give it (doc_id): the content's MD5.
DOC_ID_PATTERN = r"^[0-9A-Fa-f]{32}$"
# JSON nests far deeper than any request body of this API; deeper values are refused before the
# validator (which recurses once per level) gets near the interpreter's recursion limit.
MAX_DEPTH = 32

_ERR = {"$ref": "#/components/responses/Error"}
# What the MCP transport answers a request it refuses (JSON-RPC 2.0 error response)
_JSONRPC_ERROR = {"type": "object", "required": ["jsonrpc", "error"], "properties": {
    "jsonrpc": {"type": "string", "enum": ["2.0"]}, "id": {"type": ["string", "integer", "null"]},
    "error": {"type": "object", "required": ["code", "message"], "properties": {
        "code": {"type": "integer"}, "message": {"type": "string"}, "data": {}}}}}
_OBJ = {"type": "object"}


def _ok(desc: str, schema: dict | None = None, media: str = "application/json") -> dict:
    return {"description": desc, "content": {media: {"schema": schema or _OBJ}}}


def _op(op_id: str, summary: str, returns: type | None, *, params: list | None = None, body: dict | None = None,
        ok: dict | None = None, public: bool = False, extra: dict | None = None) -> dict:
    """One operation; ``returns`` is the contract type of its 200 body (None: ``ok`` says it)."""
    if ok is None:
        ok = _ok("OK", ref(returns) if returns is not None else None)
    op: dict[str, Any] = {"operationId": op_id, "summary": summary,
                          "responses": {"200": ok, "default": _ERR}}
    if params:
        op["parameters"] = params
    if body is not None:
        op["requestBody"] = body
    if public:
        op["security"] = []
    if extra:
        op["responses"].update(extra)
    return op


def _no_content(op: dict) -> dict:
    """An operation that always answers with an error (documented, so a client learns why)."""
    del op["responses"]["200"]
    return op


def _json_body(ref: str) -> dict:
    return {"required": True, "content": {"application/json": {"schema": {"$ref": ref}}}}


def _path(name: str, schema: dict, desc: str) -> dict:
    return {"name": name, "in": "path", "required": True, "schema": schema, "description": desc}


def _query(name: str, schema: dict, desc: str, required: bool = False) -> dict:
    return {"name": name, "in": "query", "required": required, "schema": schema, "description": desc}


def _text(lo: int, hi: int) -> dict:
    return {"type": "string", "minLength": lo, "maxLength": hi, "pattern": NO_NUL}


_COLL = _path("name", {"type": "string", "pattern": NAME_PATTERN}, "Collection name.")
_PAGING = [
    _query("offset", {"type": "integer", "minimum": 0, "maximum": 10**9}, "Items to skip (default 0)."),
    _query("limit", {"type": "integer", "minimum": 1, "maximum": 1000}, "Items per page (default 50)."),
]
_STREAM = _query("stream", {"type": "boolean"},
                 "false: one JSON object instead of Server-Sent Events (a body field 'stream' works too).")
_SSE = {"description": "Server-Sent Events (default) or JSON when stream=false",
        "content": {"text/event-stream": {"schema": {
            # One schema per event, as SSE-aware tools read it: the event name and its JSON data.
            "type": "object", "required": ["event", "data"],
            "properties": {"event": {"type": "string", "enum": list(contract.ASK_EVENT_TYPES)},
                           "data": {"type": "string", "contentMediaType": "application/json"}}}},
                    "application/json": {"schema": {"$ref": "#/components/schemas/Answer"}}},
        # The JSON carried in each event's data line, by event name (see docs/api.md).
        "x-event-data": {name: ref(tp) for name, tp in (
            ("sources", contract.SourcesEvent), ("annotation", contract.AnnotationEvent),
            ("context", contract.ContextEvent), ("token", contract.TokenEvent), ("done", contract.DoneEvent),
            ("error", contract.ErrorEvent))}}

_STRS = {"type": "array", "items": _text(1, 4096), "maxItems": 256}
_FILTERS = {
    "collections": {"type": "array", "items": {"type": "string", "pattern": NAME_PATTERN}, "maxItems": 256},
    "top_k": {"type": "integer", "minimum": 1, "maximum": 10000},
    "path_glob": _text(1, 4096),
    "file_type": {"type": "string", "pattern": r"^\.?[A-Za-z0-9]{1,16}$"},
    "doc_id": {"type": "string", "pattern": DOC_ID_PATTERN},
}
_QUERY = _text(1, 8000)
# A path parameter is checked against its shape by the route (a clear 400 naming what the id looks
# like), so the document allows any text here: the shape is in CONVERSATION_ID_PATTERN.
_CONVERSATION = _path("conversation_id", _text(1, 128),
                      "Conversation id: 'c' and 16 hex digits, from an answer's conversation_id")

DOCUMENT: dict[str, Any] = {
    "openapi": "3.1.0",
    "info": {
        "title": "ragweedd",
        "version": __version__,
        "description": "Local document indexer and question-answering daemon. Every route except "
                       "/v1/health needs 'Authorization: Bearer <token>' (the token is in the state "
                       "directory's 'token' file). Errors are {\"error\": {\"code\", \"message\", \"hint\"}}.",
    },
    "servers": [{"url": "http://127.0.0.1:8723"}],
    "security": [{"bearer": []}],
    "paths": {
        "/v1/health": {"get": _op("health", "Liveness: {\"ok\": true} (no token needed); with ?challenge= also "
                                  "the proof that this server knows the token", contract.Health, public=True,
                                  params=[_query("challenge", {"type": "string", "pattern": CHALLENGE_PATTERN},
                                                 "Random text chosen by the client; the answer's 'proof' is "
                                                 "HMAC-SHA256(token, 'ragweedd-health\\n' + port + '\\n' + "
                                                 "challenge) in hex.")])},
        "/v1/status": {"get": _op("status", "Collections, files by state, queue, ingest progress, embedder, "
                                  "index, last flush, next jobs, degraded reasons, missing tools", contract.Status)},
        "/v1/openapi.json": {"get": _op("openapi", "This document", None)},
        "/v1/collections": {
            "get": _op("list_collections", "List collections", contract.CollectionList),
            "post": _op("add_collection", "Add a collection (roots and ignore globs); persisted", contract.Collection,
                        body=_json_body("#/components/schemas/AddCollection")),
        },
        "/v1/collections/{name}": {
            "delete": _op("remove_collection", "Forget a collection and its index (files stay)", contract.Removed,
                          params=[_COLL]),
        },
        "/v1/collections/{name}/scan": {
            "post": _op("scan", "Reconcile the collection's folders now", contract.Queued, params=[_COLL]),
        },
        "/v1/collections/{name}/reanalyze": {
            "post": _op("reanalyze", "Re-run cluster analysis (entry points)", contract.Queued, params=[_COLL]),
        },
        "/v1/collections/{name}/rebuild-fts": {
            "post": _op("rebuild_fts", "Rebuild the keyword (FTS5) index", contract.Queued, params=[_COLL]),
        },
        "/v1/collections/{name}/documents": {
            "post": _op(
                "upload", "Upload a file into the collection's managed folder", contract.Uploaded,
                # Required in the document, so that every request it allows is one the server
                # accepts (a raw body has no other name); a multipart body whose part has a
                # filename may still leave it out (routes.upload).
                params=[_COLL, _query("filename", _text(1, 255),
                                      "File name (a bare name, no '/', '\\\\', NUL, '.' or '..'); "
                                      "a multipart body may leave it out and use its part's filename",
                                      required=True)],
                body={"required": True, "content": {
                    "application/octet-stream": {"schema": {"type": "string", "format": "binary"}},
                    "multipart/form-data": {"schema": {
                        "type": "object", "required": ["file"],
                        "properties": {"file": {"type": "string", "format": "binary"}}}},
                }},
                extra={"413": _ERR}),
        },
        "/v1/documents": {
            "get": _op("list_documents", "List documents with filters and paging", contract.DocumentPage, params=[
                _query("collection", {"type": "string", "pattern": NAME_PATTERN}, "Only this collection."),
                _query("state", {"type": "string", "enum": ["queued", "indexed", "failed", "skipped",
                                                             "superseded"]}, "Only this state."),
                _query("path_glob", _text(1, 4096),
                       "fnmatch glob on the source path."),
                *_PAGING]),
        },
        "/v1/documents/{doc_key}": {
            "get": _op("get_document", "One document with its chunks, state and error", contract.DocumentDetail,
                       params=[_path("doc_key", _text(1, 512),
                                     "Document key from a listing")]),
        },
        "/v1/search": {
            "post": _op("search", "Hybrid search with filters", contract.SearchResult,
                        body=_json_body("#/components/schemas/SearchRequest")),
        },
        "/v1/ask": {
            "post": _op("ask", "Answer a question with cited sources (SSE by default)", None, params=[_STREAM],
                        body=_json_body("#/components/schemas/AskRequest"), ok=_SSE, extra={"429": _ERR}),
        },
        "/v1/ask/{history_id}/continue": {
            "post": _op("ask_continue", "Continue an answer cut at max_tokens (SSE by default)", None,
                        params=[_path("history_id", _text(1, 128),
                                      "History id of the answer"), _STREAM],
                        ok=_SSE, extra={"429": _ERR}),
        },
        "/v1/history": {"get": _op("history_list", "Past searches and answers, newest first", contract.HistoryPage,
                                   params=_PAGING)},
        "/v1/history/{history_id}": {
            "get": _op("history_show", "One history entry in full", contract.HistoryEntry,
                       params=[_path("history_id", _text(1, 128),
                                     "History id")]),
        },
        "/v1/conversations": {"get": _op("conversations_list", "Conversations, the most recently continued first",
                                         contract.ConversationPage, params=_PAGING)},
        "/v1/conversations/{conversation_id}": {
            "get": _op("conversation_show", "One conversation with every turn in full", contract.Conversation,
                       params=[_CONVERSATION]),
            "delete": _op("conversation_delete", "Delete a conversation and all its turns",
                          contract.ConversationDeleted, params=[_CONVERSATION]),
        },
        "/v1/login-codes": {
            "post": _op("login_code", "A single-use sign-in code for the web UI, valid for 60 s (bearer token "
                        "only; ragweedctl open uses it)", contract.LoginCode, extra={"403": _ERR}),
        },
        "/v1/files/{doc_key}": {
            "get": _op("original_file", "The original file of an indexed document, if it lies inside one of its "
                       "collection's folders (symlinks resolved); pages, scripts and markup as text/plain",
                       None, params=[_path("doc_key", _text(1, 512), "Document key from a listing")],
                       ok={"description": "The file's bytes", "content": {"*/*": {"schema": {
                           "type": "string", "format": "binary"}}}},
                       extra={"403": _ERR, "404": _ERR}),
        },
        **openai_compat.OPENAPI_PATHS,
        # The web UI's pages and assets (docs/web.md): no token, the browser's session cookie
        # does the rest through the /v1 routes they call.
        "/": {"get": _op("web_ui", "The web UI (HTML); it signs in through /login", None, public=True,
                         ok=_ok("The page", {"type": "string"}, "text/html"))},
        "/login": {
            "get": _op("web_login_page", "The sign-in page (HTML): its script reads the code from the address's "
                       "fragment (#code=...) and posts it to POST /login", None, public=True,
                       ok=_ok("The page", {"type": "string"}, "text/html")),
            "post": _op("web_login", "Trade a single-use login code for a web UI session: an HttpOnly, "
                        "SameSite=Strict session cookie (Set-Cookie) and the key the page sends as X-Ragweedd-Key "
                        "with every call; the cookie alone signs nothing in", contract.WebSession, public=True,
                        body={"required": True, "content": {"application/json": {"schema": {
                            "type": "object", "required": ["code"], "additionalProperties": False,
                            "properties": {"code": {**_text(1, 200),
                                                    "description": "The code from POST /v1/login-codes"}}}}}},
                        extra={"400": _ERR, "403": _ERR}),
        },
        "/ui/{asset}": {"get": _op("web_asset", "A file of the web UI (app.js, ask.js, app.css, favicon.svg)", None,
                                   public=True, params=[_path("asset", _text(1, 64), "The file's name")],
                                   ok={"description": "The file", "content": {"*/*": {"schema": {
                                       "type": "string", "format": "binary"}}}},
                                   extra={"404": _ERR})},
        "/favicon.ico": {"get": _op("favicon", "The web UI's icon (SVG), for pages that do not name one", None,
                                    public=True, ok=_ok("The icon", {"type": "string"}, "image/svg+xml"))},
        "/mcp": {"post": _op("mcp_post", "MCP tools over streamable HTTP (JSON-RPC 2.0; docs/mcp.md), behind "
                             "the same Host, Origin and token checks", None,
                             body={"required": True, "content": {"application/json": {"schema": _OBJ}}},
                             ok=_ok("A JSON-RPC response", _OBJ),
                             # the MCP transport's own refusals are JSON-RPC errors, which MCP
                             # clients read; the checks in front of it (401, 403, 413) use the envelope
                             extra={s: _ok(why, _JSONRPC_ERROR) for s, why in (
                                 ("400", "Not a JSON-RPC request (a JSON-RPC error object)"),
                                 ("406", "The Accept header does not take application/json and "
                                         "text/event-stream (a JSON-RPC error object)"),
                                 ("415", "The body is not application/json (a JSON-RPC error object)"))}),
                 # stateless: no event stream to open (GET) and no session to end (DELETE)
                 **{m: _no_content(_op(f"mcp_{m}", "Not offered: /mcp is stateless and takes POST only", None,
                                       extra={"405": _ERR})) for m in ("get", "delete")}},
    },
    "components": {
        "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        "responses": {"Error": {"description": "Error envelope", "content": {"application/json": {
            "schema": {"$ref": "#/components/schemas/Error"}}}}},
        "schemas": {
            **components(),
            "Error": {"$ref": "#/components/schemas/ApiError"},
            "AddCollection": {
                "type": "object", "required": ["name", "paths"], "additionalProperties": False,
                "properties": {"name": {"type": "string", "pattern": NAME_PATTERN},
                               "paths": {**_STRS, "minItems": 1}, "ignore": _STRS,
                               "topic": _text(0, 4096)}},
            "SearchRequest": {"type": "object", "required": ["query"], "additionalProperties": False,
                              "properties": {"query": _QUERY, **_FILTERS}},
            "AskRequest": {"type": "object", "required": ["query"], "additionalProperties": False,
                           "properties": {"query": _QUERY, **_FILTERS, "stream": {"type": "boolean"},
                                          "mode": {"type": "string", "enum": ["hybrid", "tree"]},
                                          # its shape is checked by the engine, which says what an
                                          # id looks like (and when it is a history id instead)
                                          "conversation_id": {
                                              **_text(1, 128),
                                              "description": "Continue this conversation (an earlier answer's "
                                                             "conversation_id: 'c' and 16 hex digits); without it "
                                                             "the answer starts a new one"}}},
            **openai_compat.OPENAPI_SCHEMAS,
        },
    },
}


def document(port: int | None = None) -> dict:
    doc = copy.deepcopy(DOCUMENT)
    if port:
        doc["servers"] = [{"url": f"http://127.0.0.1:{port}"}]
    return doc


def schema(name: str) -> dict:
    return DOCUMENT["components"]["schemas"][name]


def parameters(path: str, method: str) -> list[dict]:
    return DOCUMENT["paths"][path][method].get("parameters", [])


# --------------------------------------------------------------------------- validation
_TYPES = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None)}


def _type_ok(value: Any, t: str) -> bool:
    if t == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if t == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, _TYPES[t])


@functools.lru_cache(maxsize=256)
def _pattern(pattern: str) -> re.Pattern[str]:
    # JSON Schema patterns are ECMA regexes, where a final "$" is the end of the string; in Python
    # it also matches before a final newline, which let the name "x\n" through. "\Z" is the end.
    if pattern.endswith("$") and not pattern.endswith("\\$"):
        pattern = pattern[:-1] + r"\Z"
    return re.compile(pattern)


def depth(value: Any, limit: int = MAX_DEPTH) -> int:
    """Nesting depth of a JSON value, without recursion (a hostile body may nest 100,000 deep)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        v, d = stack.pop()
        if d > limit:
            return d
        deepest = max(deepest, d)
        if isinstance(v, dict):
            stack.extend((x, d + 1) for x in v.values())
        elif isinstance(v, list):
            stack.extend((x, d + 1) for x in v)
    return deepest


def validate(value: Any, sch: dict, where: str, _level: int = 0) -> None:  # noqa: C901 - one branch per JSON Schema keyword the API document uses, read top to bottom
    """Check ``value`` against the subset of JSON Schema this document uses; RequestError names
    the offending field (``where``) and what is allowed. Values nested deeper than MAX_DEPTH are
    refused, so the recursion here is bounded whatever the schema allows."""
    if _level > MAX_DEPTH:
        raise RequestError(f"{where} is nested more than {MAX_DEPTH} levels deep")
    while "$ref" in sch:
        sch = DOCUMENT["components"]["schemas"][sch["$ref"].rsplit("/", 1)[1]]
    if "anyOf" in sch:
        errors = []
        for alt in sch["anyOf"]:
            try:
                validate(value, alt, where, _level)
                break
            except RequestError as e:
                errors.append(e.message)
        else:
            raise RequestError(f"{where} matches none of the allowed shapes: " + "; ".join(errors))
        return
    types = sch.get("type")
    if types is not None:
        tl = types if isinstance(types, list) else [types]
        if not any(_type_ok(value, t) for t in tl):
            raise RequestError(f"{where} must be {' or '.join(tl)}, got {type(value).__name__}")
    if "enum" in sch and value not in sch["enum"]:
        raise RequestError(f"{where} must be one of {', '.join(map(str, sch['enum']))}")
    if isinstance(value, str):
        if len(value) < sch.get("minLength", 0):
            raise RequestError(f"{where} must not be empty" if sch["minLength"] == 1
                               else f"{where} needs at least {sch['minLength']} characters")
        if "maxLength" in sch and len(value) > sch["maxLength"]:
            raise RequestError(f"{where} is longer than {sch['maxLength']} characters")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate ("\ud800" in JSON): no file, glob or row can hold it
            raise RequestError(f"{where} is not valid Unicode (it holds a lone surrogate such as \\ud800)",
                               hint="send text as UTF-8; escape only whole characters") from None
        if "pattern" in sch and not _pattern(sch["pattern"]).search(value):
            raise RequestError(f"{where} {value[:80]!r} is not allowed (must match {sch['pattern']})")
        if "\x00" in value:
            raise RequestError(f"{where} contains a NUL character")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in sch and value < sch["minimum"]:
            raise RequestError(f"{where} must be at least {sch['minimum']}")
        if "maximum" in sch and value > sch["maximum"]:
            raise RequestError(f"{where} must be at most {sch['maximum']}")
    if isinstance(value, list):
        if len(value) < sch.get("minItems", 0):
            raise RequestError(f"{where} needs at least {sch['minItems']} item(s)")
        if "maxItems" in sch and len(value) > sch["maxItems"]:
            raise RequestError(f"{where} has more than {sch['maxItems']} items")
        for i, item in enumerate(value):
            validate(item, sch.get("items", {}), f"{where}[{i}]", _level + 1)
    if isinstance(value, dict):
        props = sch.get("properties", {})
        for req in sch.get("required", []):
            if req not in value:
                raise RequestError(f"{where}: field '{req}' is required")
        extra_sch = sch.get("additionalProperties")
        if extra_sch is False:
            extra = sorted(set(value) - set(props))
            if extra:
                raise RequestError(f"{where}: unknown field(s) {extra}", hint="allowed: " + ", ".join(props))
        elif isinstance(extra_sch, dict) and extra_sch:
            for key in set(value) - set(props):
                validate(value[key], extra_sch, f"{where}.{key}", _level + 1)
        for key, sub in props.items():
            if key in value:
                validate(value[key], sub, f"{where}.{key}" if where != "body" else key, _level + 1)


def parse_query(query: Any, path: str, method: str, optional: frozenset[str] = frozenset()) -> dict[str, Any]:
    """Query parameters of an operation, converted to their schema types and validated;
    ``optional`` names required ones the caller can do without this time."""
    out: dict[str, Any] = {}
    for p in parameters(path, method):
        if p["in"] != "query":
            continue
        name, sch = p["name"], p["schema"]
        raw = query.get(name)
        if raw is None:
            if p.get("required") and name not in optional:
                raise RequestError(f"query parameter '{name}' is required")
            continue
        val: Any = raw
        if sch.get("type") == "integer":
            if not re.fullmatch(r"-?[0-9]{1,12}", raw):  # not \d: "１" (fullwidth) is no number here
                raise RequestError(f"query parameter '{name}' must be a whole number, got {raw[:40]!r}")
            val = int(raw)
        elif sch.get("type") == "boolean":
            low = raw.lower()
            if low not in ("true", "false", "1", "0", "yes", "no"):
                raise RequestError(f"query parameter '{name}' must be true or false, got {raw[:40]!r}")
            val = low in ("true", "1", "yes")
        validate(val, sch, f"query parameter '{name}'")
        out[name] = val
    return out
