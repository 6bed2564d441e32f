"""What one connection may hold (issue 12, items 15 and 16), on the REAL engine: requests aiohttp's
HTTP parser refuses get the JSON error envelope; idle, half-sent and trickling connections are
closed; a body that does not arrive is a 408; a client that stops reading is disconnected, so
what its handler held (an answer slot) is released."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time

import pytest
from aiohttp import web

from ragweedd.api.protocol import ApiRunner  # noqa: E402
from tests.api_support import raw_http, running_api  # noqa: E402

TIMEOUTS = {"idle_timeout": 1.0, "body_timeout": 1.0, "write_timeout": 1.0}


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    with running_api(tmp_path_factory.mktemp("conn"), server_kwargs=TIMEOUTS) as a:
        yield a
        assert a.request("GET", "/v1/health", token=None)[0] == 200


def envelope(data: bytes) -> tuple[int, dict]:
    head, _, body = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    assert b"content-type: application/json" in head.lower(), head
    err = json.loads(body)
    assert set(err) == {"error"} and err["error"]["code"] and err["error"]["message"], err
    return status, err["error"]


def head(port: int, *lines: str) -> bytes:
    return ("\r\n".join(["GET /v1/health HTTP/1.1", *lines]) + "\r\n\r\n").encode()


# --------------------------------------------------------------------------- item 15
@pytest.mark.parametrize("case", ["no-host", "two-hosts", "long-url", "long-header", "garbage", "bad-version"])
def test_parser_errors_use_the_error_envelope(api, case):
    host = f"Host: 127.0.0.1:{api.port}"
    req = {"no-host": head(api.port),
           "two-hosts": head(api.port, host, host),
           "long-url": f"GET /v1/health?{'a' * 70_000} HTTP/1.1\r\n{host}\r\n\r\n".encode(),
           "long-header": head(api.port, host, "X-Big: " + "a" * 20_000),
           "garbage": b"GARBAGE\r\n\r\n",
           "bad-version": f"GET /v1/health HTTP/9.x\r\n{host}\r\n\r\n".encode()}[case]
    _, data = raw_http(api.port, req)
    status, err = envelope(data)
    assert 400 <= status < 500, (status, err)
    assert "Traceback" not in err["message"]


# --------------------------------------------------------------------------- item 16
def closed_within(sock: socket.socket, seconds: float) -> float:
    """Seconds until the server closes ``sock`` (reading whatever it sends); fails after ``seconds``."""
    t0 = time.monotonic()
    sock.settimeout(seconds)
    try:
        while sock.recv(65536):
            pass
    except ConnectionResetError:
        pass
    except socket.timeout:
        pytest.fail(f"the server kept the connection open for {seconds} s")
    return time.monotonic() - t0


def test_idle_connection_is_closed(api):
    with socket.create_connection(("127.0.0.1", api.port)) as s:
        assert closed_within(s, 10) < 5


def test_half_sent_head_is_closed(api):
    with socket.create_connection(("127.0.0.1", api.port)) as s:
        s.sendall(b"GET /v1/health HTTP/1.1\r\nHo")
        assert closed_within(s, 10) < 5


def test_trickled_head_is_closed(api):
    """One byte every 0.2 s never completes a head in time: the deadline is not reset by bytes."""
    req = head(api.port, f"Host: 127.0.0.1:{api.port}", "X-Slow: " + "a" * 200)
    with socket.create_connection(("127.0.0.1", api.port)) as s:
        t0 = time.monotonic()
        try:
            for b in req[:-4]:
                s.sendall(bytes([b]))
                time.sleep(0.2)
                if time.monotonic() - t0 > 10:
                    pytest.fail("the server accepted a head trickled over 10 s")
        except (BrokenPipeError, ConnectionResetError):
            return
        pytest.fail("the whole trickled head was accepted")


def test_idle_after_an_answer_is_closed(api):
    with socket.create_connection(("127.0.0.1", api.port)) as s:
        s.sendall(head(api.port, f"Host: 127.0.0.1:{api.port}"))
        assert closed_within(s, 10) < 5  # keep-alive, but nothing follows


def test_body_that_does_not_arrive_is_a_408(api):
    req = (f"POST /v1/search HTTP/1.1\r\nHost: 127.0.0.1:{api.port}\r\nAuthorization: Bearer {api.token}\r\n"
           "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"query\":").encode()
    t0 = time.monotonic()
    _, data = raw_http(api.port, req, timeout=10)
    assert time.monotonic() - t0 < 6
    status, err = envelope(data)
    assert status == 408 and err["code"] == "request_timeout", err


def test_client_that_stops_reading_is_disconnected():
    """A handler writing to a client that reads nothing: once the socket buffers are full its write
    fails within write_timeout and the handler's ``finally`` runs (that is where an answer slot is
    given back); the connection is closed."""
    loop = asyncio.new_event_loop()
    released = threading.Event()

    async def endless(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse()
        await resp.prepare(request)
        try:
            while True:
                await resp.write(b"x" * 65536)
        finally:
            released.set()

    app = web.Application()
    app.router.add_get("/", endless)
    runner = ApiRunner(app, write_timeout=0.5, handle_signals=False)

    async def start() -> int:
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        return runner.addresses[0][1]

    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        port = asyncio.run_coroutine_threadsafe(start(), loop).result(10)
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.connect(("127.0.0.1", port))
            s.sendall(f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
            assert released.wait(30), "the handler is still writing to a client that reads nothing"
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def test_a_stalled_answer_reader_frees_its_slot_on_the_real_engine(tmp_path):
    """The real engine streams a long answer (the OpenAI SDK against the wire-protocol test
    server) to a client that reads nothing: once the socket buffers are full the write times out,
    the stream ends and the only answer slot is free again for the next ask."""
    from tests.fakes.llm_server import API_KEY, FakeLLMServer
    from tests.tools import wait_until

    def reply(provider, messages):  # a long answer for the stalled reader, short ones for the probes
        return "purring cats " * 80000 if "marathon" in messages[-1]["content"] else "Short [1]."

    with FakeLLMServer(reply=reply, piece_chars=5) as llm:
        toml = "\n".join(["[llm]", 'synthesis = "openai:test-model"', f'openai_base_url = "{llm.url}/v1"',
                          f'openai_api_key = "{API_KEY}"', "max_retries = 0", "timeout_s = 20",
                          "context_tokens = 400000"])
        with running_api(tmp_path, extra_toml=toml, top_toml="max_tokens = 200000", max_concurrent_answers=1,
                         server_kwargs=TIMEOUTS) as a:
            body = json.dumps({"query": "attention token marathon"}).encode()
            with socket.socket() as s:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                s.connect(("127.0.0.1", a.port))
                s.sendall(f"POST /v1/ask HTTP/1.1\r\nHost: 127.0.0.1:{a.port}\r\nAuthorization: Bearer {a.token}"
                          f"\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode()
                          + body)
                # the stalled stream holds the only slot (the case under test); a probe that came
                # first answers 200 at once and frees it again
                wait_until(lambda: a.request("POST", "/v1/ask?stream=false", {"query": "attention token"})[0] == 429,
                           60, what="the stalled stream to hold the answer slot")

                def probe() -> int:
                    code = a.request("POST", "/v1/ask?stream=false", {"query": "attention token"}, timeout=60)[0]
                    assert code in (200, 429), code
                    return code == 200

                # generous: the write times out only once the stream has filled the socket buffers,
                # which a busy machine takes its time to do
                wait_until(probe, 180, interval=0.5, what="the stalled stream's slot to be freed")


def test_an_abandoned_answer_stream_is_recorded_as_ended_not_streaming(tmp_path):
    """A client that closes the connection in the middle of a streamed answer: its history entry
    says the answer ended unfinished (with the text so far), instead of "streaming" for ever."""
    from tests.fakes.llm_server import API_KEY, FakeLLMServer
    from tests.tools import wait_until

    def reply(provider, messages):
        return "purring cats " * 20000

    with FakeLLMServer(reply=reply, piece_chars=5) as llm:
        toml = "\n".join(["[llm]", 'synthesis = "openai:test-model"', f'openai_base_url = "{llm.url}/v1"',
                          f'openai_api_key = "{API_KEY}"', "max_retries = 0", "timeout_s = 20",
                          "context_tokens = 400000"])
        with running_api(tmp_path, extra_toml=toml, top_toml="max_tokens = 200000") as a:
            body = json.dumps({"query": "attention token abandoned"}).encode()
            with socket.create_connection(("127.0.0.1", a.port), timeout=30) as s:
                s.sendall(f"POST /v1/ask HTTP/1.1\r\nHost: 127.0.0.1:{a.port}\r\nAuthorization: Bearer {a.token}"
                          f"\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode()
                          + body)
                seen = b""
                while b"event: token" not in seen:  # the answer is being written
                    seen += s.recv(65536)

            items = a.ok("GET", "/v1/history")["items"]
            hid = next(i["id"] for i in items if i["query"] == "attention token abandoned")

            def entry():
                rec = a.ok("GET", f"/v1/history/{hid}")
                return rec["status"] != "streaming" and rec
            rec = wait_until(entry, 60, 0.2, "the abandoned answer's entry to end")
            assert rec["status"] == "error" and rec["error"]["code"] == "cancelled", rec
            assert rec["answer"].startswith("purring"), rec["answer"][:80]
