"""A local server that speaks four LLM wire protocols, for driving the official SDKs in tests.

- Anthropic Messages API: POST /v1/messages (JSON, or SSE message_start / content_block_start /
  content_block_delta / content_block_stop / message_delta / message_stop)
- OpenAI chat completions: POST /v1/chat/completions (JSON, or ``data:`` chunks then ``data: [DONE]``)
- Gemini: POST /v1beta/models/{model}:generateContent and :streamGenerateContent?alt=sse
- Ollama: POST /api/chat (NDJSON stream, or one JSON object with "stream": false); with
  ``embed_dims`` ({model: dimension}) also POST /api/embed and GET /api/tags for embedding models
  (vectors from ``embed_fn(model, text)``, by default a hash of the words; unknown models get 404
  "model ... not found, try pulling it first", as Ollama answers)

It runs in its own thread and event loop on 127.0.0.1 and a free port, so synchronous and asynchronous
tests can both use it. Behaviour per request comes from a script queue (``push``): ``{"status": 429}``,
``{"status": 401}``, ``{"stall": True}`` (never answers), ``{"text": "...", "stop": "max_tokens"}``;
otherwise ``reply(provider, messages) -> str``. Unknown models get the provider's 404, a wrong key its
401. It counts requests in flight (``max_in_flight``) so tests can prove concurrency bounds.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
import time
from collections import deque

from aiohttp import web

API_KEY = "test-key-123"

_ERR_TYPES = {401: ("authentication_error", "UNAUTHENTICATED"), 404: ("not_found_error", "NOT_FOUND"),
              429: ("rate_limit_error", "RESOURCE_EXHAUSTED"), 500: ("api_error", "INTERNAL")}


class FakeLLMServer:
    def __init__(self, models=("test-model",), reply=None, delay_s: float = 0.0, piece_chars: int = 5,
                 api_key: str = API_KEY, embed_dims: dict[str, int] | None = None, embed_fn=None,
                 port: int = 0) -> None:
        self.models = set(models)
        self.embed_dims = {k.removesuffix(":latest"): v for k, v in (embed_dims or {}).items()}
        self.embed_fn = embed_fn
        self.reply = reply or (lambda provider, messages: "Hello from the fake server.")
        self.delay_s = delay_s
        self.piece_chars = piece_chars
        self.api_key = api_key
        self.script: deque = deque()
        self.requests: list[dict] = []
        self.in_flight = 0
        self.max_in_flight = 0
        # Embedding requests still answered (each takes one); None: every one. At 0 a request waits,
        # already recorded, until the test allows more: a client's progress then stops where the
        # test wants it, however busy the machine.
        self.embed_budget: int | None = None
        # Set to an unset threading.Event to hold every chat reply (recorded, counted in flight)
        # until the test sets it: requests then stay in flight for as long as the test needs them.
        self.hold: threading.Event | None = None
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_evt: asyncio.Event | None = None
        self.port = port  # 0: any free port

    # --- lifecycle ------------------------------------------------------------------------------
    def __enter__(self) -> "FakeLLMServer":
        ready = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(ready,), daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("fake LLM server did not start")
        return self

    def __exit__(self, *exc) -> None:
        if self.hold is not None:
            self.hold.set()  # a held reply's waiting thread ends with the server (a test that failed)
        self._loop.call_soon_threadsafe(self._stop_evt.set)
        self._thread.join(10)

    def _run(self, ready: threading.Event) -> None:
        self._loop = asyncio.new_event_loop()
        self._loop.run_until_complete(self._serve(ready))
        self._loop.close()

    async def _serve(self, ready: threading.Event) -> None:
        self._stop_evt = asyncio.Event()
        app = web.Application()
        app.router.add_post("/v1/messages", self._anthropic)
        app.router.add_post("/v1/chat/completions", self._openai)
        app.router.add_post("/v1beta/models/{model_action}", self._gemini)
        app.router.add_post("/api/chat", self._ollama)
        app.router.add_post("/api/embed", self._ollama_embed)
        app.router.add_get("/api/tags", self._ollama_tags)
        runner = web.AppRunner(app, shutdown_timeout=0.5)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", self.port)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]
        ready.set()
        await self._stop_evt.wait()
        await runner.cleanup()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def push(self, *actions: dict) -> "FakeLLMServer":
        self.script.extend(actions)
        return self

    # --- shared ------------------------------------------------------------------------------
    async def _handle(self, provider: str, request: web.Request, model: str, messages: list[dict],
                      max_tokens: int | None, stream: bool, key_ok: bool, body: dict):
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            self.requests.append({"provider": provider, "path": request.path, "model": model,
                                  "messages": messages, "max_tokens": max_tokens, "stream": stream,
                                  "body": body, "time": time.monotonic()})
        try:
            action = self.script.popleft() if self.script else {}
            if action.get("stall"):
                await self._stop_evt.wait()
                return None, None, None
            if not key_ok:
                return ("error", 401, "invalid x-api-key"), None, None
            if action.get("status"):
                return ("error", action["status"], action.get("message", "scripted error")), None, None
            if model not in self.models:
                return ("error", 404, f"model '{model}' not found"), None, None
            if self.delay_s:
                await asyncio.sleep(self.delay_s)
            hold = self.hold
            if hold is not None:
                await asyncio.to_thread(hold.wait)
            text = action["text"] if "text" in action else self.reply(provider, messages)
            stop = action.get("stop", "end")
            if max_tokens and len(text) > max_tokens * 4:
                text, stop = text[: max_tokens * 4], "max_tokens"
            return None, text, stop
        finally:
            with self._lock:
                self.in_flight -= 1

    def _pieces(self, text: str):
        return [text[i:i + self.piece_chars] for i in range(0, len(text), self.piece_chars)] or [""]

    @staticmethod
    def _usage(messages, text):
        return max(1, sum(len(m["content"]) for m in messages) // 4), max(1, len(text) // 4)

    async def _sse(self, request, events) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await resp.prepare(request)
        for name, data in events:
            prefix = f"event: {name}\n" if name else ""
            await resp.write(f"{prefix}data: {data if isinstance(data, str) else json.dumps(data)}\n\n".encode())
        await resp.write_eof()
        return resp

    # --- Anthropic -----------------------------------------------------------------------------
    def _anthropic_key_ok(self, request) -> bool:
        # older SDKs send x-api-key, newer ones "Authorization: Bearer"; the real API takes both
        return self.api_key in (request.headers.get("x-api-key"),
                                request.headers.get("Authorization", "").removeprefix("Bearer "))

    async def _anthropic(self, request: web.Request):
        body = await request.json()
        msgs = []
        if body.get("system"):
            sys_ = body["system"]
            msgs.append({"role": "system",
                         "content": sys_ if isinstance(sys_, str) else "".join(b["text"] for b in sys_)})
        for m in body["messages"]:
            c = m["content"]
            msgs.append({"role": m["role"],
                         "content": c if isinstance(c, str) else "".join(b.get("text", "") for b in c)})
        err, text, stop = await self._handle("anthropic", request, body["model"], msgs, body.get("max_tokens"),
                                             bool(body.get("stream")), self._anthropic_key_ok(request), body)
        if err:
            _, status, msg = err
            return web.json_response({"type": "error", "error": {"type": _ERR_TYPES.get(status, ("api_error",))[0],
                                                                 "message": msg}}, status=status)
        if text is None:
            return web.Response(status=500)
        stop_reason = {"end": "end_turn", "max_tokens": "max_tokens"}[stop]
        inp, out = self._usage(msgs, text)
        msg = {"id": "msg_fake", "type": "message", "role": "assistant", "model": body["model"],
               "stop_reason": None, "stop_sequence": None, "content": [],
               "usage": {"input_tokens": inp, "output_tokens": 1}}
        if not body.get("stream"):
            msg.update(content=[{"type": "text", "text": text}], stop_reason=stop_reason,
                       usage={"input_tokens": inp, "output_tokens": out})
            return web.json_response(msg)
        events = [("message_start", {"type": "message_start", "message": msg}),
                  ("content_block_start", {"type": "content_block_start", "index": 0,
                                           "content_block": {"type": "text", "text": ""}}),
                  ("ping", {"type": "ping"})]
        events += [("content_block_delta", {"type": "content_block_delta", "index": 0,
                                            "delta": {"type": "text_delta", "text": p}}) for p in self._pieces(text)]
        events += [("content_block_stop", {"type": "content_block_stop", "index": 0}),
                   ("message_delta", {"type": "message_delta",
                                      "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                                      "usage": {"output_tokens": out}}),
                   ("message_stop", {"type": "message_stop"})]
        return await self._sse(request, events)

    # --- OpenAI --------------------------------------------------------------------------------
    async def _openai(self, request: web.Request):
        body = await request.json()
        msgs = [{"role": m["role"], "content": m["content"]} for m in body["messages"]]
        mt = body.get("max_tokens") or body.get("max_completion_tokens")
        ok = request.headers.get("Authorization") == f"Bearer {self.api_key}"
        err, text, stop = await self._handle("openai", request, body["model"], msgs, mt, bool(body.get("stream")),
                                             ok, body)
        if err:
            _, status, m = err
            return web.json_response({"error": {"message": m, "type": _ERR_TYPES.get(status, ("api_error",))[0],
                                                "code": None}}, status=status)
        if text is None:
            return web.Response(status=500)
        finish = {"end": "stop", "max_tokens": "length"}[stop]
        inp, out = self._usage(msgs, text)
        base = {"id": "chatcmpl-fake", "created": int(time.time()), "model": body["model"]}
        usage = {"prompt_tokens": inp, "completion_tokens": out, "total_tokens": inp + out}
        if not body.get("stream"):
            return web.json_response({**base, "object": "chat.completion", "usage": usage, "choices": [
                {"index": 0, "finish_reason": finish, "message": {"role": "assistant", "content": text}}]})
        ch = {**base, "object": "chat.completion.chunk"}
        first = {"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}
        events = [(None, {**ch, "choices": [first]})]
        events += [(None, {**ch, "choices": [{"index": 0, "delta": {"content": p}, "finish_reason": None}]})
                   for p in self._pieces(text)]
        events.append((None, {**ch, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}))
        if (body.get("stream_options") or {}).get("include_usage"):
            events.append((None, {**ch, "choices": [], "usage": usage}))
        events.append((None, "[DONE]"))
        return await self._sse(request, events)

    # --- Gemini --------------------------------------------------------------------------------
    async def _gemini(self, request: web.Request):
        model, _, action = request.match_info["model_action"].partition(":")
        if action not in ("generateContent", "streamGenerateContent"):
            return web.json_response({"error": {"code": 404, "message": "no such method", "status": "NOT_FOUND"}},
                                     status=404)
        body = await request.json()
        msgs = []
        si = body.get("systemInstruction") or body.get("system_instruction")
        if si:
            msgs.append({"role": "system", "content": "".join(p.get("text", "") for p in si.get("parts", []))})
        for c in body.get("contents", []):
            msgs.append({"role": "assistant" if c.get("role") == "model" else "user",
                         "content": "".join(p.get("text", "") for p in c.get("parts", []))})
        gc = body.get("generationConfig") or {}
        key = request.headers.get("x-goog-api-key") or request.query.get("key")
        stream = action == "streamGenerateContent"
        err, text, stop = await self._handle("gemini", request, model, msgs, gc.get("maxOutputTokens"), stream,
                                             key == self.api_key, body)
        if err:
            _, status, m = err
            return web.json_response({"error": {"code": status, "message": m,
                                                "status": _ERR_TYPES.get(status, (None, "UNKNOWN"))[1]}}, status=status)
        if text is None:
            return web.Response(status=500)
        finish = {"end": "STOP", "max_tokens": "MAX_TOKENS"}[stop]
        inp, out = self._usage(msgs, text)
        usage = {"promptTokenCount": inp, "candidatesTokenCount": out, "totalTokenCount": inp + out}

        def resp(t, fr=None, with_usage=False):
            cand = {"content": {"role": "model", "parts": [{"text": t}]}, "index": 0}
            if fr:
                cand["finishReason"] = fr
            r = {"candidates": [cand], "modelVersion": model}
            if with_usage:
                r["usageMetadata"] = usage
            return r

        if not stream:
            return web.json_response(resp(text, finish, True))
        pieces = self._pieces(text)
        events = [(None, resp(p, finish if i == len(pieces) - 1 else None, i == len(pieces) - 1))
                  for i, p in enumerate(pieces)]
        return await self._sse(request, events)

    # --- Ollama --------------------------------------------------------------------------------
    async def _ollama_tags(self, request: web.Request):
        return web.json_response({"models": [
            {"name": f"{n}:latest", "model": f"{n}:latest", "digest": hashlib.sha256(n.encode()).hexdigest(),
             "size": 1} for n in self.embed_dims]})

    def allow_embeds(self, n: int | None) -> None:
        """Answer ``n`` more embedding requests, then hold the rest (None: answer every one)."""
        with self._lock:
            self.embed_budget = n

    def _take_embed(self, texts: list) -> bool:
        with self._lock:
            if self.embed_budget is None or texts == ["dimension probe"]:  # a model's load is never held
                return True
            if self.embed_budget > 0:
                self.embed_budget -= 1
                return True
            return False

    async def _ollama_embed(self, request: web.Request):
        body = await request.json()
        model = str(body.get("model", "")).removesuffix(":latest")
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        with self._lock:
            self.requests.append({"provider": "ollama-embed", "path": request.path, "model": model,
                                  "messages": [], "max_tokens": None, "stream": False, "body": body,
                                  "time": time.monotonic()})
        if model not in self.embed_dims:
            return web.json_response({"error": f'model "{model}" not found, try pulling it first'}, status=404)
        while not self._take_embed(texts):
            await asyncio.sleep(0.02)
        if self.embed_fn is not None:
            rows = [list(self.embed_fn(model, t)) for t in texts]
        else:
            from ragweedd.embed.hashing import HashEmbedder

            rows = HashEmbedder(self.embed_dims[model]).embed_batch(texts).tolist()
        return web.json_response({"model": body["model"], "embeddings": rows})

    async def _ollama(self, request: web.Request):
        body = await request.json()
        msgs = [{"role": m["role"], "content": m["content"]} for m in body["messages"]]
        opts = body.get("options") or {}
        stream = body.get("stream", True)
        err, text, stop = await self._handle("ollama", request, body["model"], msgs, opts.get("num_predict"),
                                             bool(stream), True, body)
        if err:
            _, status, m = err
            return web.json_response({"error": m}, status=status)
        if text is None:
            return web.Response(status=500)
        inp, out = self._usage(msgs, text)
        done = {"model": body["model"], "created_at": "2025-01-01T00:00:00Z",
                "message": {"role": "assistant", "content": ""}, "done": True,
                "done_reason": {"end": "stop", "max_tokens": "length"}[stop],
                "prompt_eval_count": inp, "eval_count": out}
        if not stream:
            done["message"]["content"] = text
            return web.json_response(done)
        resp = web.StreamResponse(headers={"Content-Type": "application/x-ndjson"})
        await resp.prepare(request)
        for p in self._pieces(text):
            line = {"model": body["model"], "created_at": "2025-01-01T00:00:00Z",
                    "message": {"role": "assistant", "content": p}, "done": False}
            await resp.write((json.dumps(line) + "\n").encode())
        await resp.write((json.dumps(done) + "\n").encode())
        await resp.write_eof()
        return resp


# --- rerank ----------------------------------------------------------------------------------------
def relevance_reply(score_of, other=None):
    """A ``reply`` that answers ragweedd's rerank prompts (ragweedd/query/rerank.py) from
    ``score_of(passage_text) -> 0..10``: the batch prompt's numbered passages get "N: SCORE" lines,
    the yes/no prompt "yes" for a score of 5 or more, else "no". Any other prompt goes to ``other``."""
    import re

    def reply(provider, messages):
        prompt = messages[-1]["content"]
        if "<Document>:" in prompt:
            doc = prompt.split("<Document>:", 1)[1].rsplit("Is the document relevant", 1)[0]
            return "yes" if score_of(doc) >= 5 else "no"
        if "Passages:" in prompt:
            body = prompt.split("Passages:", 1)[1].split("\n\nRate how relevant", 1)[0]
            parts = re.split(r"(?m)^\[(\d+)\] ", body)
            return "\n".join(f"{n}: {score_of(text):g}" for n, text in zip(parts[1::2], parts[2::2]))
        return other(provider, messages) if other is not None else "Hello from the fake server."

    return reply
