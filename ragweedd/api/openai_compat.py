"""An OpenAI-compatible face on the answer flow: GET /v1/models and POST /v1/chat/completions.

Any OpenAI client (the official SDKs, Open WebUI, editors' chat panels) can then ask the indexed
documents questions: the base URL is ``http://127.0.0.1:PORT/v1`` and the API key is the daemon's
bearer token, so the usual security middleware (Host, Origin, token) guards these routes as well.

The "model" picks the collections: ``ragweedd/<name>`` asks one collection, ``ragweedd/all``
every one. The last user message is the question and the messages before it are the conversation
so far: the client holds the thread, the daemon stores none of it (each answer is a history entry
of no conversation). Earlier user messages paired with the assistant replies after them become the
thread a follow-up is read with (docs/answers.md, Conversations): its question is rewritten into a
standalone query from them, and with an LLM they go into the prompt. The answer is the one
/v1/ask gives, cited ``[N]`` with an LLM configured, quoted passages without one, and the cited
sources come back in an extra ``citations`` field (streaming: in the final chunk, the one with a
``finish_reason``, since only then is it known which numbers the answer cites).

Errors keep the API's envelope ``{"error": {"code", "message", "hint"?}}``: OpenAI clients read
``error.message`` and ``error.code`` from it (an unknown model is 404 ``model_not_found``).

This module imports neither routes.py nor openapi.py: openapi.py takes its document fragment
(``OPENAPI_PATHS``, ``OPENAPI_SCHEMAS``) from here.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any, AsyncIterator, Literal

from aiohttp import web

from ragweedd import contract
from ragweedd.api.jsontext import dumps, loads
from ragweedd.api.schemas import ref
from ragweedd.api.security import STATE_KEY, ApiState, error_response
from ragweedd.api.sse import AnswersBusy, answer_events, next_event, stream_error
from ragweedd.errors import NotFoundError, RequestError

MODEL_PREFIX = "ragweedd/"
ALL_MODEL = MODEL_PREFIX + "all"
MAX_QUESTION_CHARS = 8000  # as /v1/ask's query
THREAD_TURNS = 20  # earlier turns read at most (the newest); the prompt's budget may take fewer


# --------------------------------------------------------------------------- OpenAPI fragment
_MESSAGE = {
    "type": "object", "required": ["role"],
    "properties": {
        "role": {"type": "string", "enum": ["system", "developer", "user", "assistant", "tool"]},
        # a string, or OpenAI's list of parts of which the text parts are read
        "content": {"anyOf": [{"type": "string", "maxLength": 100000},
                              {"type": "array", "maxItems": 64, "items": {"type": "object"}},
                              {"type": "null"}]},
    },
}
OPENAPI_SCHEMAS: dict[str, Any] = {
    # Open: OpenAI clients send temperature, max_tokens, user, ... which the answer flow's own
    # config decides instead; they are accepted and ignored.
    "ChatCompletionRequest": {
        "type": "object", "required": ["model", "messages"],
        "properties": {"model": {"type": "string", "minLength": 1, "maxLength": 200},
                       "messages": {"type": "array", "maxItems": 1000, "items": _MESSAGE},
                       "stream": {"type": "boolean"}},
    },
}
OPENAPI_PATHS: dict[str, Any] = {
    "/v1/models": {"get": {
        "operationId": "openai_models", "summary": "OpenAI-compatible: the collections as models "
        "'ragweedd/<name>', plus 'ragweedd/all'",
        "responses": {"200": {"description": "OK",
                              "content": {"application/json": {"schema": ref(contract.ChatModelList)}}},
                      "default": {"$ref": "#/components/responses/Error"}}}},
    "/v1/chat/completions": {"post": {
        "operationId": "openai_chat_completions",
        "summary": "OpenAI-compatible: answer the last user message from the model's collection(s), "
                   "with 'citations' (SSE chunks ending in 'data: [DONE]' when stream is true)",
        "requestBody": {"required": True, "content": {"application/json": {
            "schema": {"$ref": "#/components/schemas/ChatCompletionRequest"}}}},
        "responses": {"200": {"description": "A chat.completion, or chat.completion.chunk events when stream "
                                             "is true (the last chunk carries citations and usage)",
                              "content": {"application/json": {"schema": ref(contract.ChatCompletion)},
                                          "text/event-stream": {"schema": ref(contract.ChatCompletionChunk)}}},
                      "default": {"$ref": "#/components/responses/Error"}}}},
}


# --------------------------------------------------------------------------- request handling
def _st(request: web.Request) -> ApiState:
    return request.app[STATE_KEY]


def _json(data: Any, status: int = 200) -> web.Response:
    return web.json_response(data, status=status, dumps=dumps)


async def _read_json(request: web.Request) -> Any:
    if request.content_type != "application/json":
        raise RequestError(f"the request body must be JSON (Content-Type: application/json), "
                           f"got {request.content_type!r}")
    try:
        async with asyncio.timeout(_st(request).body_timeout):
            raw = await request.read()
    except TimeoutError:
        raise web.HTTPRequestTimeout() from None
    try:
        return loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise RequestError(f"the request body is not valid JSON: {e}") from None
    except RecursionError:
        raise RequestError("the request body nests too deeply") from None


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # [{"type": "text", "text": ...}, {"type": "image_url", ...}]
        return "\n".join(p["text"] for p in content
                         if isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str))
    return ""


def parse_request(body: Any) -> tuple[str, str, bool, list[contract.ThreadTurn]]:
    """(model, question, stream, earlier turns) of a chat completion request, or RequestError saying
    what is wrong."""
    if not isinstance(body, dict):
        raise RequestError("the request body must be a JSON object with 'model' and 'messages'")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise RequestError("'model' is required: 'ragweedd/all' or 'ragweedd/<collection>'",
                           hint="GET /v1/models lists them")
    messages = body.get("messages")
    if not isinstance(messages, list):
        raise RequestError("'messages' is required: a list of {\"role\", \"content\"}")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise RequestError("'stream' must be true or false")
    users = [i for i, m in enumerate(messages) if isinstance(m, dict) and m.get("role") == "user"]
    if not users:
        raise RequestError("the messages hold no user message: the last user message is the question")
    question = _text_of(messages[users[-1]].get("content")).strip()
    if not question:
        raise RequestError("the last user message has no text to answer")
    if "\x00" in question:
        raise RequestError("the last user message contains a NUL character")
    try:
        question.encode("utf-8")
    except UnicodeEncodeError:  # "\ud800" in JSON: nothing can store or search it
        raise RequestError("the last user message is not valid Unicode (it holds a lone surrogate such as "
                           "\\ud800)", hint="send text as UTF-8; escape only whole characters") from None
    if len(question) > MAX_QUESTION_CHARS:
        raise RequestError(f"the last user message is {len(question)} characters long; a question may "
                           f"have at most {MAX_QUESTION_CHARS}")
    return model, question, stream, thread_of(messages[:users[-1]])


def thread_of(messages: list[Any]) -> list[contract.ThreadTurn]:
    """The conversation before the question: each user message with the assistant replies that
    follow it (their [N] marks removed: they point at sources of that reply); text that cannot be
    stored or searched (NUL, lone surrogates) is left out."""
    turns: list[contract.ThreadTurn] = []
    for m in messages:
        if not isinstance(m, dict):
            continue
        text = _clean(_text_of(m.get("content")))
        if m.get("role") == "user" and text:
            turns.append({"question": text[:MAX_QUESTION_CHARS], "query": text[:MAX_QUESTION_CHARS],
                          "answer": "", "filters": {}, "documents": []})
        elif m.get("role") == "assistant" and turns:
            joined = (turns[-1]["answer"] + "\n" + contract.without_marks(text)).strip()
            turns[-1]["answer"] = joined
    return turns[-THREAD_TURNS:]


def _clean(text: str) -> str:
    text = text.replace("\x00", "").strip()
    return text.encode("utf-8", "replace").decode("utf-8") if not _encodes(text) else text


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


async def _collections_for(engine: Any, model: str) -> list[str] | None:
    names = [c["name"] for c in await engine.list_collections()]
    if model == ALL_MODEL:
        return None
    name = model[len(MODEL_PREFIX):] if model.startswith(MODEL_PREFIX) else None
    if name is None or name not in names:
        # OpenAI clients show the message and drop the hint: the message says what to use
        raise _ModelNotFound(f"the model {model[:200]!r} does not exist; use 'ragweedd/all' or "
                             f"'ragweedd/<collection>' (GET /v1/models lists them)",
                             hint="collections: " + (", ".join(names[:50]) or "none yet"))
    return [name]


class _ModelNotFound(NotFoundError):
    code = "model_not_found"


# --------------------------------------------------------------------------- answers
def citation(src: dict) -> contract.Citation:
    """A cited source as the chat response names it; its best quote places it more closely."""
    q = src.get("quote") or None
    return {"n": src.get("n", 0), "collection": src.get("collection", ""), "doc_id": src.get("doc_id", ""),
            "file": src.get("source_file", ""), "filename": src.get("filename", ""),
            "page": (q or {}).get("page_label") or src.get("page_label"),
            "lines": (q or {}).get("lines") or src.get("lines"),
            "span": (q or {}).get("span") or src.get("span"),
            "uri": (q or {}).get("uri") or src.get("uri", ""),
            "quote": q.get("text") if q else None}


def _finish(done: dict) -> Literal["stop", "length"]:
    return "length" if done.get("finish_reason") == "max_tokens" else "stop"


def _usage(done: dict) -> contract.ChatUsage:
    u = done.get("usage") or {}
    p, c = int(u.get("input_tokens") or 0), int(u.get("output_tokens") or 0)
    return {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}


async def models(request: web.Request) -> web.Response:
    st = _st(request)
    now = int(time.time())
    ids = [ALL_MODEL] + [MODEL_PREFIX + c["name"] for c in await st.engine.list_collections()]
    out: contract.ChatModelList = {"object": "list", "data": [
        {"id": i, "object": "model", "created": now, "owned_by": "ragweedd"} for i in ids]}
    return _json(out)


async def chat_completions(request: web.Request) -> web.StreamResponse:
    st = _st(request)
    model, question, stream, thread = parse_request(await _read_json(request))
    collections = await _collections_for(st.engine, model)
    try:
        async with answer_events(st, lambda: st.engine.ask(question, collections=collections,
                                                           thread=thread)) as (first, events):
            head = {"id": f"chatcmpl-{uuid.uuid4().hex}", "created": int(time.time()), "model": model}
            if stream:
                return await _stream(request, head, first, events, st)
            return await _whole(head, first, events)
    except AnswersBusy as e:
        return e.response()


async def _whole(head: dict, first: dict | None, events: AsyncIterator[dict]) -> web.Response:
    ev = first
    while ev is not None:
        if ev.get("type") == "done":
            out: contract.ChatCompletion = {
                "id": head["id"], "object": "chat.completion", "created": head["created"], "model": head["model"],
                "choices": [{"index": 0, "message": {"role": "assistant", "content": ev.get("answer", "")},
                             "finish_reason": _finish(ev)}],
                "usage": _usage(ev), "citations": [citation(s) for s in ev.get("cited") or []],
                "history_id": ev.get("history_id", "")}
            return _json(out)
        if ev.get("type") == "error":
            err = ev.get("error") or {}
            return error_response(502, err.get("code") or "answer_failed",
                                  err.get("message") or "the answer failed", err.get("hint"))
        ev = await anext(events, None)
    return error_response(502, "answer_failed", "the answer ended without a result", "see the daemon log")


def _chunk(head: dict, delta: dict, finish: str | None = None, **extra: Any) -> bytes:
    c: dict[str, Any] = {"id": head["id"], "object": "chat.completion.chunk", "created": head["created"],
                         "model": head["model"], "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
                         **extra}
    return f"data: {dumps(c)}\n\n".encode()


async def _stream(request: web.Request, head: dict, first: dict | None, events: AsyncIterator[dict],
                  st: ApiState) -> web.StreamResponse:
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream; charset=utf-8",
                                       "Cache-Control": "no-store", "X-Accel-Buffering": "no"})
    await resp.prepare(request)
    await resp.write(_chunk(head, {"role": "assistant", "content": ""}))
    ev = first
    sent_text = False
    try:
        while ev is not None:
            t = ev.get("type")
            if t == "token" and ev.get("text"):
                sent_text = True
                await resp.write(_chunk(head, {"content": ev["text"]}))
            elif t == "done":
                if not sent_text and ev.get("answer"):
                    await resp.write(_chunk(head, {"content": ev["answer"]}))
                await resp.write(_chunk(head, {}, _finish(ev), citations=[citation(s) for s in ev.get("cited") or []],
                                        usage=_usage(ev), history_id=ev.get("history_id", "")))
                break
            elif t == "error":
                # OpenAI streams report a failure as a data line holding "error"; the SDKs raise it
                await resp.write(f"data: {dumps({'error': ev.get('error') or {}})}\n\n".encode())
                break
            ev = await next_event(events, resp)
    except (ConnectionResetError, asyncio.CancelledError):
        raise
    except Exception as e:  # noqa: BLE001 - headers are sent: report inside the stream
        err = stream_error(e, st.log, request.path, "chat_stream_failed")
        await resp.write(f"data: {dumps({'error': err})}\n\n".encode())
    await resp.write(b"data: [DONE]\n\n")
    await resp.write_eof()
    return resp


def add_openai_routes(app: web.Application) -> None:
    app.router.add_get("/v1/models", models, allow_head=False)
    app.router.add_post("/v1/chat/completions", chat_completions)
