"""Security middlewares against the real daemon engine on a loopback port: Host (DNS rebinding),
Origin and Sec-Fetch-Site (cross-site requests), bearer token, body caps, answer caps, binds, token
file. The engine is ragweedd.engine.DaemonEngine over a real core; to prove a refused request never
reached it, its methods are wrapped with a call counter (``Api.count_engine_calls``)."""

from __future__ import annotations

import io
import json
import os
import stat
import sys
import threading

import pytest

from ragweedd import logging as rlog  # noqa: E402
from ragweedd.api.security import STATE_KEY  # noqa: E402
from ragweedd.api.server import ApiServer, check_bind, ensure_token  # noqa: E402
from ragweedd.errors import ConfigError, DaemonError  # noqa: E402
from tests.api_support import API_KEY_LLM_TOML, body_json, raw_http, running_api, wait_until  # noqa: E402
from tests.fakes.llm_server import FakeLLMServer  # noqa: E402


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    with running_api(tmp_path_factory.mktemp("sec"), max_body_bytes=4096,
                     max_concurrent_answers=2) as a:
        a.count_engine_calls()
        yield a


def _get(port: int, host_lines: list[str], path: str = "/v1/health", token: str | None = None) -> tuple[int, bytes]:
    lines = [f"GET {path} HTTP/1.1", *host_lines, "Connection: close"]
    if token:
        lines.append(f"Authorization: Bearer {token}")
    return raw_http(port, ("\r\n".join(lines) + "\r\n\r\n").encode())


BAD_HOSTS = [
    "evil.com", "evil.com:{port}", "localhost.evil.com:{port}", "127.0.0.1.nip.io:{port}", "",
    ":{port}", "localhost", "127.0.0.1", "127.0.0.1:{other}", "[::1]", "0.0.0.0:{port}",
    "127.0.0.2:{port}", "localhost:{port}.evil.com", "localhost:{port} evil",
]


@pytest.mark.parametrize("host", BAD_HOSTS)
@pytest.mark.parametrize("path", ["/v1/health", "/v1/status", "/v1/no-such-route"])
def test_bad_host_is_refused_before_routing(api, host, path):
    calls = len(api.calls)
    status, resp = _get(api.port, [f"Host: {host.format(port=api.port, other=api.port + 1)}"], path, api.token)
    assert status == 403
    assert body_json(resp)["error"]["code"] == "forbidden_host"
    assert len(api.calls) == calls  # the engine never saw it


def test_missing_and_duplicate_host_are_refused(api):
    status, resp = raw_http(api.port, b"GET /v1/health HTTP/1.0\r\n\r\n")
    assert status == 403 and body_json(resp)["error"]["code"] == "forbidden_host"
    status, _ = _get(api.port, [f"Host: 127.0.0.1:{api.port}", "Host: evil.com"])
    assert status in (400, 403)  # aiohttp may reject the duplicate itself; never 200
    status, _ = _get(api.port, ["Host: evil.com", f"Host: 127.0.0.1:{api.port}"])
    assert status in (400, 403)


@pytest.mark.parametrize("host", ["localhost:{port}", "127.0.0.1:{port}", "[::1]:{port}", "LocalHost:{port}"])
def test_loopback_hosts_are_accepted(api, host):
    status, resp = _get(api.port, [f"Host: {host.format(port=api.port)}"], "/v1/status", api.token)
    assert status == 200, resp
    assert "collections" in body_json(resp)


@pytest.mark.parametrize("origin", ["http://evil.com", "null", "https://127.0.0.1:{port}",
                                    "http://localhost:{other}", "http://localhost.evil.com:{port}",
                                    "http://127.0.0.1:{port}.nip.io"])
@pytest.mark.parametrize("with_token", [True, False])
def test_cross_origin_text_plain_post_is_refused(api, origin, with_token):
    calls, entries = len(api.calls), api.ok("GET", "/v1/history")["total"]
    status, _, body = api.request(
        "POST", "/v1/search", raw=b'{"query": "hnsw"}', token=with_token,
        headers={"Content-Type": "text/plain", "Origin": origin.format(port=api.port, other=api.port + 1)})
    assert status == 403
    assert body["error"]["code"] == "forbidden_origin"
    assert api.calls[calls:] == ["history_list"] and api.ok("GET", "/v1/history")["total"] == entries, \
        "the refused search reached the engine"


@pytest.mark.parametrize("site", ["cross-site", "same-site", "bogus"])
def test_sec_fetch_site_other_than_same_origin_is_refused(api, site):
    status, _, body = api.request("GET", "/v1/status", headers={"Sec-Fetch-Site": site})
    assert status == 403 and body["error"]["code"] == "forbidden_origin"
    # health is public, but still cross-site checked
    status, _, _ = api.request("GET", "/v1/health", token=None, headers={"Sec-Fetch-Site": site})
    assert status == 403


@pytest.mark.parametrize("headers", [{"Sec-Fetch-Site": "same-origin"}, {"Sec-Fetch-Site": "none"},
                                     {"Origin": "http://127.0.0.1:{port}"}, {"Origin": "http://localhost:{port}"},
                                     {"Origin": "http://[::1]:{port}", "Sec-Fetch-Site": "same-origin"}])
def test_same_origin_requests_pass(api, headers):
    headers = {k: v.format(port=api.port) for k, v in headers.items()}
    status, _, body = api.request("GET", "/v1/status", headers=headers)
    assert status == 200, body


@pytest.mark.parametrize("auth", [None, "Bearer wrong-token-wrong-token-wrong-token", "Basic {token}",
                                  "Bearer", "{token}", "Bearer {token}x", "Bearer {short}"])
def test_token_is_required(api, auth):
    headers = {"Authorization": auth.format(token=api.token, short=api.token[:-1])} if auth else {}
    for method, path in [("GET", "/v1/status"), ("GET", "/v1/openapi.json"), ("POST", "/v1/search"),
                         ("GET", "/v1/no-such-route")]:
        status, hdrs, body = api.request(method, path, token=None, headers=headers,
                                         body={"query": "x"} if method == "POST" else None)
        assert status == 401, (method, path)
        assert body["error"]["code"] == "unauthorized"
        assert hdrs.get("WWW-Authenticate", "").startswith("Bearer")


def test_health_needs_no_token_but_the_rest_does(api):
    status, _, body = api.request("GET", "/v1/health", token=None)
    assert status == 200 and body["ok"] is True
    assert api.request("GET", "/v1/status")[0] == 200


def test_token_never_logged(tmp_path):
    buf = io.StringIO()
    rlog.configure(json=True, stream=buf)
    try:
        with running_api(tmp_path) as a:
            a.request("GET", "/v1/status")
            a.request("POST", "/v1/search", {"query": "hnsw"})
            a.request("GET", "/v1/status", token="guess-" + a.token[:10])
            a.request("GET", "/v1/status?token=" + a.token[:12], token=None)
            a.request("GET", "/v1/documents/" + a.token)  # a 404 whose path holds the token
    finally:
        rlog.configure(json=True, stream=sys.stdout)
    logged = buf.getvalue()
    assert "api_request" in logged and "ingest_file" in logged  # the daemon's log was captured at all
    assert a.token not in logged.replace("/v1/documents/" + a.token, "")
    assert a.token[:12] not in logged.replace("/v1/documents/" + a.token, "").replace("token=" + a.token[:12], "")
    assert "Bearer" not in logged


def test_declared_body_over_cap_is_413(api):
    status, _, body = api.request("POST", "/v1/search", body={"query": "x" * 5000})
    assert status == 413 and body["error"]["code"] == "body_too_large"
    assert "4096" in body["error"]["message"]


def test_chunked_body_over_cap_is_413(api):
    payload = json.dumps({"query": "y" * 6000}).encode()
    chunked = b"".join(b"%x\r\n%s\r\n" % (len(payload[i:i + 1000]), payload[i:i + 1000])
                       for i in range(0, len(payload), 1000)) + b"0\r\n\r\n"
    req = (f"POST /v1/search HTTP/1.1\r\nHost: 127.0.0.1:{api.port}\r\nAuthorization: Bearer {api.token}\r\n"
           "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n").encode()
    status, resp = raw_http(api.port, req + chunked)
    assert status == 413 and body_json(resp)["error"]["code"] == "body_too_large"


def test_multipart_upload_over_cap_is_413(api):
    boundary = "XyZ"
    blob = b"a" * 3000
    mp = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"big.txt\"\r\n\r\n").encode() \
        + blob + blob + f"\r\n--{boundary}--\r\n".encode()
    req = (f"POST /v1/collections/notes/documents HTTP/1.1\r\nHost: 127.0.0.1:{api.port}\r\n"
           f"Authorization: Bearer {api.token}\r\nContent-Type: multipart/form-data; boundary={boundary}\r\n"
           "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n").encode()
    chunked = b"".join(b"%x\r\n%s\r\n" % (len(mp[i:i + 512]), mp[i:i + 512]) for i in range(0, len(mp), 512))
    status, resp = raw_http(api.port, req + chunked + b"0\r\n\r\n")
    assert status == 413, resp[:300]


def test_concurrent_answers_are_capped(tmp_path):
    """Two answers whose LLM has not replied hold both slots; a third is refused with 429, not
    queued (a queued one would wait for a slot the held answers never give back)."""
    with FakeLLMServer(models=("test-model",), reply=lambda p, m: "Graphs [1].") as llm, \
            running_api(tmp_path, extra_toml=API_KEY_LLM_TOML(llm), max_concurrent_answers=2) as a:
        llm.hold = threading.Event()
        results = []

        def ask():
            results.append(a.request("POST", "/v1/ask", body={"query": "hnsw sqlite attention"}, timeout=30))

        threads = [threading.Thread(target=ask) for _ in range(2)]
        for t in threads:
            t.start()
        state = a.server.app[STATE_KEY]
        wait_until(lambda: state.answers_in_flight == 2 and llm.in_flight == 2, 60,
                   what="two answers in flight, their LLM calls held")
        status, hdrs, body = a.request("POST", "/v1/ask", body={"query": "hnsw", "stream": False})
        assert status == 429 and body["error"]["code"] == "too_many_answers" and hdrs.get("Retry-After")
        assert results == [] and state.answers_in_flight == 2, "refused while both slots were held"
        # searches are not answers: they are never capped
        assert a.request("POST", "/v1/search", body={"query": "hnsw"})[0] == 200
        llm.hold.set()
        for t in threads:
            t.join(30)
        assert [r[0] for r in results] == [200, 200]
        assert llm.max_in_flight == 2
        # the slots are given back (the counter drops just after the last byte is sent)
        wait_until(lambda: state.answers_in_flight == 0, 10, what="the answer slots to be given back")
        assert a.request("POST", "/v1/ask", body={"query": "hnsw", "stream": False})[0] == 200


@pytest.mark.parametrize("listen", ["0.0.0.0:0", "192.168.1.10:0", "[::]:0", "example.com:0"])
def test_non_loopback_bind_is_refused(api, listen):
    with pytest.raises(ConfigError) as e:
        ApiServer(api.engine, token="t" * 40, listen=listen)
    assert "loopback" in e.value.message and "allow_remote_bind" in e.value.hint


def test_forced_remote_bind_warns():
    buf = io.StringIO()
    rlog.configure(json=True, stream=buf)
    try:
        check_bind("0.0.0.0", allow_remote=True)
        check_bind("::1", allow_remote=False)
        check_bind("localhost", allow_remote=False)
    finally:
        rlog.configure(json=True, stream=sys.stdout)
    events = [json.loads(line) for line in buf.getvalue().splitlines()]
    assert [e["event"] for e in events] == ["api_remote_bind"]
    assert events[0]["level"] == "warning"


def test_port_file_written_and_removed(tmp_path):
    with running_api(tmp_path, files={}) as a:
        info = json.loads((a.state_dir / "port").read_text())
        assert info["port"] == a.port and info["host"] == "127.0.0.1" and info["pid"] == os.getpid()
        assert info["url"] == f"http://127.0.0.1:{a.port}"
    assert not (a.state_dir / "port").exists()


def test_token_created_0600_and_stable(tmp_path):
    p = tmp_path / "state" / "token"
    tok = ensure_token(p)
    assert len(tok) >= 40
    assert stat.S_IMODE(p.stat().st_mode) == 0o600
    assert ensure_token(p) == tok


def test_group_readable_token_is_replaced(tmp_path):
    p = tmp_path / "token"
    old = ensure_token(p)
    p.chmod(0o644)
    new = ensure_token(p)
    assert new != old  # it may have been read: rotate it
    assert stat.S_IMODE(p.stat().st_mode) == 0o600


@pytest.mark.parametrize("content", ["", "short", "x" * 20 + " spaces " + "y" * 20, "\x00" * 50])
def test_garbage_token_is_replaced(tmp_path, content):
    p = tmp_path / "token"
    p.write_text(content)
    p.chmod(0o600)
    tok = ensure_token(p)
    assert tok != content and len(tok) >= 40 and p.read_text().strip() == tok


def test_symlinked_or_odd_token_file_is_refused(tmp_path):
    target = tmp_path / "elsewhere"
    target.write_text("a" * 43)
    link = tmp_path / "token"
    link.symlink_to(target)
    with pytest.raises(DaemonError) as e:
        ensure_token(link)
    assert "not a regular file" in e.value.message
    (tmp_path / "dir").mkdir()
    with pytest.raises(DaemonError):
        ensure_token(tmp_path / "dir")


def test_build_app_refuses_empty_token(api):
    from ragweedd.api.app import build_app

    with pytest.raises(ValueError):
        build_app(api.engine, token="", port=1)
    with pytest.raises(ValueError):
        build_app(api.engine, token="short", port=1)
