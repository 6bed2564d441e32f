"""Route handlers under /v1. Each one validates its input against the OpenAPI schemas, calls one
Engine method and returns its JSON. Errors are raised as ragweedd.errors exceptions; the error
middleware renders them."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import unicodedata
from typing import Any, AsyncIterator, Callable

from aiohttp import BodyPartReader, web

from ragweedd import __version__
from ragweedd.api import openapi
from ragweedd.api.jsontext import dumps, loads
from ragweedd.api.security import STATE_KEY, ApiState
from ragweedd.api.sse import AnswersBusy, answer_events, next_event, stream_error
from ragweedd.errors import RequestError


def _st(request: web.Request) -> ApiState:
    return request.app[STATE_KEY]


def _json(data: Any, status: int = 200) -> web.Response:
    return web.json_response(data, status=status, dumps=dumps)


async def _body(request: web.Request, schema_name: str) -> dict:
    ctype = request.content_type
    if ctype != "application/json":
        raise RequestError(f"the request body must be JSON (Content-Type: application/json), got {ctype!r}")
    raw = await read_body(request)
    try:
        body = loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise RequestError(f"the request body is not valid JSON: {e}") from None
    except RecursionError:  # json nests deeper than the interpreter's stack: no body of ours does
        raise RequestError(f"the request body nests more than {openapi.MAX_DEPTH} levels deep") from None
    if openapi.depth(body) > openapi.MAX_DEPTH:
        raise RequestError(f"the request body nests more than {openapi.MAX_DEPTH} levels deep")
    openapi.validate(body, openapi.schema(schema_name), "body")
    return body


async def read_body(request: web.Request) -> bytes:
    """The whole body, within the body timeout: a client that sends a head and then trickles (or
    stops) must not hold a connection and a handler for ever. client_max_size still gives 413."""
    try:
        async with asyncio.timeout(_st(request).body_timeout):
            return await request.read()
    except TimeoutError:
        raise web.HTTPRequestTimeout() from None


def _name(request: web.Request, key: str = "name") -> str:
    value = request.match_info[key]
    sch = {"type": "string", "pattern": openapi.NAME_PATTERN} if key == "name" else \
        {"type": "string", "minLength": 1, "maxLength": 512, "pattern": openapi.NO_NUL}
    openapi.validate(value, sch, f"path parameter '{key}'")
    return value


def check_filename(name: str) -> str:
    """An uploaded file lands in the collection's managed folder under exactly this name, so it
    must be a bare name: no directory parts that could climb out of the folder."""
    if not name or name.strip() in (".", ".."):
        raise RequestError(f"file name {name!r} is not allowed", hint="give a plain file name such as notes.pdf")
    if "/" in name or "\\" in name:
        raise RequestError(f"file name {name[:100]!r} contains a path separator",
                           hint="give a bare file name; uploads always go to the collection's managed folder")
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise RequestError(f"file name {name[:100]!r} contains control characters")
    # format characters (category Cf) are invisible: a right-to-left override shows "\u202edm.exe"
    # as "exe.md", so the name a reader sees is not the file's type
    hidden = sorted({f"U+{ord(c):04X}" for c in name if unicodedata.category(c) == "Cf"})
    if hidden:
        raise RequestError(f"file name {name[:100]!r} contains invisible format characters ({', '.join(hidden)})",
                           hint="rename the file without them (they can disguise its type, e.g. a right-to-left "
                                "override)")
    if len(name.encode("utf-8", "surrogatepass")) > 255:
        raise RequestError("file name is longer than 255 bytes")
    return name


# --------------------------------------------------------------------------- simple routes
def health_proof(token: str, port: int, challenge: str) -> str:
    """What a client checks before it sends the token (ragweedd/cli/ctl_http.py): only a server
    that knows the token can compute it, and the port in it stops a relay from another daemon."""
    return hmac.new(token.encode(), f"ragweedd-health\n{port}\n{challenge}".encode(), hashlib.sha256).hexdigest()


async def health(request: web.Request) -> web.Response:
    q = openapi.parse_query(request.query, "/v1/health", "get")
    out: dict[str, Any] = {"ok": True, "version": __version__}
    if "challenge" in q:
        st = _st(request)
        out["proof"] = health_proof(st.token, st.port, q["challenge"])
    return _json(out)


async def status(request: web.Request) -> web.Response:
    return _json(await _st(request).engine.status())


async def openapi_json(request: web.Request) -> web.Response:
    return _json(openapi.document(_st(request).port))


async def list_collections(request: web.Request) -> web.Response:
    return _json({"items": await _st(request).engine.list_collections()})


async def add_collection(request: web.Request) -> web.Response:
    b = await _body(request, "AddCollection")
    res = await _st(request).engine.add_collection(b["name"], b["paths"], b.get("ignore") or [],
                                                   b.get("topic", ""))
    return _json(res)


async def remove_collection(request: web.Request) -> web.Response:
    return _json(await _st(request).engine.remove_collection(_name(request)))


async def scan(request: web.Request) -> web.Response:
    return _json(await _st(request).engine.scan(_name(request)))


async def reanalyze(request: web.Request) -> web.Response:
    return _json(await _st(request).engine.reanalyze(_name(request)))


async def rebuild_fts(request: web.Request) -> web.Response:
    return _json(await _st(request).engine.rebuild_fts(_name(request)))


async def list_documents(request: web.Request) -> web.Response:
    q = openapi.parse_query(request.query, "/v1/documents", "get")
    res = await _st(request).engine.list_documents(
        collection=q.get("collection"), state=q.get("state"), path_glob=q.get("path_glob"),
        offset=q.get("offset", 0), limit=q.get("limit", 50))
    return _json(res)


async def get_document(request: web.Request) -> web.Response:
    return _json(await _st(request).engine.get_document(_name(request, "doc_key")))


async def history_list(request: web.Request) -> web.Response:
    q = openapi.parse_query(request.query, "/v1/history", "get")
    return _json(await _st(request).engine.history_list(offset=q.get("offset", 0), limit=q.get("limit", 50)))


async def history_show(request: web.Request) -> web.Response:
    return _json(await _st(request).engine.history_show(_name(request, "history_id")))


async def conversations_list(request: web.Request) -> web.Response:
    q = openapi.parse_query(request.query, "/v1/conversations", "get")
    return _json(await _st(request).engine.conversations_list(offset=q.get("offset", 0), limit=q.get("limit", 50)))


async def conversation_show(request: web.Request) -> web.Response:
    return _json(await _st(request).engine.conversation_show(_name(request, "conversation_id")))


async def conversation_delete(request: web.Request) -> web.Response:
    return _json(await _st(request).engine.conversation_delete(_name(request, "conversation_id")))


async def search(request: web.Request) -> web.Response:
    b = await _body(request, "SearchRequest")
    return _json(await _st(request).engine.search(b.pop("query"), **b))


# --------------------------------------------------------------------------- upload
async def upload(request: web.Request) -> web.Response:
    st = _st(request)
    coll = _name(request)
    # filename is checked below, with a hint, since multipart bodies may do without it
    q = openapi.parse_query(request.query, "/v1/collections/{name}/documents", "post",
                            optional=frozenset({"filename"}))
    filename = q.get("filename")
    if request.content_type.startswith("multipart/"):
        try:
            async with asyncio.timeout(st.body_timeout):
                filename, data = await _read_multipart(request, st.max_body_bytes, filename)
        except TimeoutError:
            raise web.HTTPRequestTimeout() from None
    else:
        if not filename:
            raise RequestError("query parameter 'filename' is required for a raw upload body",
                               hint="POST the bytes with ?filename=NAME, or send multipart/form-data with a "
                                    "'file' part")
        data = await read_body(request)
    check_filename(filename)
    return _json(await st.engine.upload(coll, filename, data))


async def _read_multipart(request: web.Request, cap: int, filename: str | None) -> tuple[str, bytes]:
    try:
        reader = await request.multipart()
        while True:
            part = await reader.next()
            if part is None:
                break
            if not isinstance(part, BodyPartReader):  # a nested multipart body is not a file
                raise RequestError("the multipart body nests another multipart body; send one 'file' part")
            if part.name != "file" and not part.filename:
                await part.release()
                continue
            chunks, size = [], 0
            while chunk := await part.read_chunk(65536):
                size += len(chunk)
                if size > cap:
                    raise web.HTTPRequestEntityTooLarge(max_size=cap, actual_size=size)
                chunks.append(chunk)
            name = filename or part.filename
            if not name:
                raise RequestError("the multipart 'file' part has no file name",
                                   hint="set filename in its Content-Disposition or pass ?filename=NAME")
            return name, b"".join(chunks)
    except (web.HTTPException, RequestError):
        raise
    except Exception as e:  # noqa: BLE001 - aiohttp raises assorted errors on malformed multipart bodies
        raise RequestError(f"the multipart body could not be parsed: {type(e).__name__}") from None
    raise RequestError("the multipart body has no 'file' part")


# --------------------------------------------------------------------------- answers
def _want_stream(request: web.Request, body: dict | None, path: str) -> bool:
    q = openapi.parse_query(request.query, path, "post")
    if "stream" in q:
        return q["stream"]
    if body is not None and "stream" in body:
        return bool(body["stream"])
    return True


async def ask(request: web.Request) -> web.StreamResponse:
    b = await _body(request, "AskRequest")
    stream = _want_stream(request, b, "/v1/ask")
    b.pop("stream", None)
    query = b.pop("query")
    return await _answer(request, stream, lambda eng: eng.ask(query, **b))


async def ask_continue(request: web.Request) -> web.StreamResponse:
    hid = _name(request, "history_id")
    stream = _want_stream(request, None, "/v1/ask/{history_id}/continue")
    return await _answer(request, stream, lambda eng: eng.ask_continue(hid))


async def _answer(request: web.Request, stream: bool, start: Callable[[Any], Any]) -> web.StreamResponse:
    st = _st(request)
    try:
        async with answer_events(st, lambda: start(st.engine)) as (first, events):
            if not stream:
                return _json(await _collect(first, events))
            return await _sse(request, first, events, st)
    except AnswersBusy as e:
        return e.response()


async def _collect(first: dict | None, events: AsyncIterator[dict]) -> dict:
    out: dict[str, Any] = {"answer": "", "sources": [], "annotations": [], "history_id": None,
                           "finish_reason": None}
    parts: list[str] = []
    done = False
    ev = first
    while ev is not None:
        t = ev.get("type")
        if t == "sources":
            out["sources"] = ev.get("sources", [])
        elif t == "annotation":
            out["annotations"].append({k: v for k, v in ev.items() if k != "type"})
        elif t == "token":
            parts.append(ev.get("text", ""))
        elif t == "done":
            out.update({k: v for k, v in ev.items() if k != "type"})
            done = True
        elif t == "error":
            err = ev.get("error") or {}
            return {"error": err, "answer": "".join(parts), **{k: out[k] for k in ("sources", "history_id")}}
        ev = await anext(events, None)
    if not done:  # the done record's answer is whole (a continuation's tokens are only the new text)
        out["answer"] = "".join(parts)
    return out


def _sse_frame(ev: dict) -> bytes:
    data = dumps(ev)
    return f"event: {ev.get('type', 'message')}\ndata: {data}\n\n".encode()


async def _sse(request: web.Request, first: dict | None, events: AsyncIterator[dict],
               st: ApiState) -> web.StreamResponse:
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream; charset=utf-8",
                                       "Cache-Control": "no-store", "X-Accel-Buffering": "no"})
    await resp.prepare(request)
    ev = first
    try:
        while ev is not None:
            await resp.write(_sse_frame(ev))
            if ev.get("type") in ("done", "error"):
                break
            ev = await next_event(events, resp)
    except (ConnectionResetError, asyncio.CancelledError):
        raise
    except Exception as e:  # noqa: BLE001 - headers are sent: report inside the stream
        err = stream_error(e, st.log, request.path, "answer_stream_failed")
        await resp.write(_sse_frame({"type": "error", "error": err}))
    await resp.write_eof()
    return resp


def add_routes(app: web.Application) -> None:
    r = app.router
    r.add_get("/v1/health", health, allow_head=False)
    r.add_get("/v1/status", status, allow_head=False)
    r.add_get("/v1/openapi.json", openapi_json, allow_head=False)
    r.add_get("/v1/collections", list_collections, allow_head=False)
    r.add_post("/v1/collections", add_collection)
    r.add_delete("/v1/collections/{name}", remove_collection)
    r.add_post("/v1/collections/{name}/scan", scan)
    r.add_post("/v1/collections/{name}/reanalyze", reanalyze)
    r.add_post("/v1/collections/{name}/rebuild-fts", rebuild_fts)
    r.add_post("/v1/collections/{name}/documents", upload)
    r.add_get("/v1/documents", list_documents, allow_head=False)
    r.add_get("/v1/documents/{doc_key}", get_document, allow_head=False)
    r.add_post("/v1/search", search)
    r.add_post("/v1/ask", ask)
    r.add_post("/v1/ask/{history_id}/continue", ask_continue)
    r.add_get("/v1/history", history_list, allow_head=False)
    r.add_get("/v1/history/{history_id}", history_show, allow_head=False)
    r.add_get("/v1/conversations", conversations_list, allow_head=False)
    r.add_get("/v1/conversations/{conversation_id}", conversation_show, allow_head=False)
    r.add_delete("/v1/conversations/{conversation_id}", conversation_delete)
