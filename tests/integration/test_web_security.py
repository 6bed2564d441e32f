"""The web UI's sign-in and file serving against the REAL daemon engine on a loopback port
(tests/api_support.py): login codes (single use, expiry, token only), the session cookie in place
of the token and the Origin / Sec-Fetch-Site rule for what it may change, the pages, and
GET /v1/files/{doc_key} refusing files outside a collection's folders, symlinks and documents
that are not indexed. The browser end of all this is tests/system/test_web_ui.py."""

from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from ragweedd.api import web_routes  # noqa: E402
from ragweedd.api.security import STATE_KEY, ApiState  # noqa: E402
from tests.api_support import running_api, wait_until  # noqa: E402

PDF = b"%PDF-1.4 not really a pdf\n"


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    with running_api(tmp_path_factory.mktemp("web"), files={
            "notes.md": "# Notes\n\nThe heron waits in the shallow water.\n",
            "page.html": "<html><body><script>alert(1)</script><p>Herons and egrets.</p></body></html>\n",
            "broken.pdf": PDF}, expect={"notes.md", "page.html"}) as a:
        wait_until(lambda: a.ok("GET", "/v1/documents?state=failed")["total"] == 1, 30, what="broken.pdf failed")
        yield a


def login(a) -> tuple[str, str]:
    """(cookie name, value) from a fresh code."""
    code = a.ok("POST", "/v1/login-codes")["code"]
    st, hdrs, _ = a.request("GET", f"/login?code={code}", token=None)
    assert st == 303 and hdrs["Location"] == "/"
    m = re.match(r"(ragweedd_session_\d+)=([^;]+);(.*)", hdrs["Set-Cookie"])
    assert m, hdrs["Set-Cookie"]
    return m.group(1), m.group(2)


def with_cookie(cookie: tuple[str, str], **more) -> dict:
    return {"Cookie": f"{cookie[0]}={cookie[1]}", **more}


# --------------------------------------------------------------------------- login codes
def test_a_login_code_signs_in_once(api):
    body = api.ok("POST", "/v1/login-codes")
    assert set(body) == {"code", "url", "expires_in_s"} and body["expires_in_s"] == 60
    assert body["url"] == f"http://127.0.0.1:{api.port}/login?code={body['code']}"
    st, hdrs, _ = api.request("GET", f"/login?code={body['code']}", token=None)
    assert st == 303
    cookie = hdrs["Set-Cookie"]
    name, value = cookie.split(";")[0].split("=", 1)
    assert name == f"ragweedd_session_{api.port}" and value != api.token and len(value) >= 40
    attrs = {a.strip().lower() for a in cookie.split(";")[1:]}
    assert {"httponly", "samesite=strict", "path=/"} <= attrs, cookie
    assert not any(a.startswith(("max-age", "expires", "domain")) for a in attrs), cookie
    st, hdrs, page = api.request("GET", f"/login?code={body['code']}", token=None)  # used
    assert st == 403 and "Set-Cookie" not in hdrs and b"does not work" in page and b"ragweedctl open" in page
    assert hdrs["Content-Type"].startswith("text/html")


@pytest.mark.parametrize("query", ["", "?code=", "?code=nonsense", "?code=" + "x" * 5000, "?other=1"])
def test_a_bad_code_is_a_clear_page_and_no_cookie(api, query):
    st, hdrs, page = api.request("GET", f"/login{query}", token=None)
    assert st in (400, 403) and "Set-Cookie" not in hdrs and b"ragweedctl open" in page


def test_an_expired_code_is_refused(api):
    code = api.ok("POST", "/v1/login-codes")["code"]
    st_ = api.server.app[STATE_KEY]
    st_.login_codes[code] = time.monotonic() - 1
    st, hdrs, page = api.request("GET", f"/login?code={code}", token=None)
    assert st == 403 and "Set-Cookie" not in hdrs and b"expired" in page


def test_login_codes_need_the_bearer_token(api):
    st, _, body = api.request("POST", "/v1/login-codes", token=None)
    assert st == 401
    cookie = login(api)
    st, _, body = api.request("POST", "/v1/login-codes", token=None,
                              headers=with_cookie(cookie, Origin=f"http://127.0.0.1:{api.port}"))
    assert st == 403 and body["error"]["code"] == "token_required"


def test_codes_and_sessions_are_bounded():
    st = ApiState(engine=None, token="t" * 32, port=1, max_body_bytes=1, max_concurrent_answers=1)
    codes = [st.new_login_code() for _ in range(100)]
    assert len(st.login_codes) == 32 and set(st.login_codes) == set(codes[-32:])
    assert st.redeem_login_code(codes[0]) is None  # dropped
    sessions = {st.redeem_login_code(c) for c in codes[-32:]}
    assert None not in sessions and len(sessions) == 32 and not st.login_codes
    for _ in range(40):
        st.redeem_login_code(st.new_login_code())
    assert len(st.sessions) == 64


# --------------------------------------------------------------------------- the cookie on the API
def test_the_cookie_reads_like_the_token(api):
    cookie = login(api)
    assert api.request("GET", "/v1/status", token=None, headers=with_cookie(cookie))[0] == 200
    assert api.request("GET", "/v1/status", token=None, headers=with_cookie((cookie[0], "forged")))[0] == 401
    # another daemon's (port's) cookie name does not count
    assert api.request("GET", "/v1/status", token=None,
                       headers={"Cookie": f"ragweedd_session_1={cookie[1]}"})[0] == 401


@pytest.mark.parametrize("headers,status", [
    ({}, 403),                                                      # a cookie alone
    ({"Sec-Fetch-Site": "none"}, 403),                              # a typed URL cannot POST
    ({"Sec-Fetch-Site": "same-site"}, 403),                         # another port of 127.0.0.1
    ({"Sec-Fetch-Site": "cross-site"}, 403),
    ({"Origin": "http://evil.com"}, 403),
    ({"Origin": "http://127.0.0.1:{other}"}, 403),
    ({"Origin": "null"}, 403),
    ({"Sec-Fetch-Site": "same-origin"}, 200),
    ({"Origin": "http://127.0.0.1:{port}"}, 200),
    ({"Origin": "http://localhost:{port}", "Sec-Fetch-Site": "same-origin"}, 200),
])
def test_what_the_cookie_may_change(api, headers, status):
    cookie = login(api)
    h = {k: v.format(port=api.port, other=api.port + 1) for k, v in headers.items()}
    st, _, body = api.request("POST", "/v1/search", {"query": "heron"}, token=None, headers=with_cookie(cookie, **h))
    assert st == status, body
    if status == 403:
        assert body["error"]["code"] == "forbidden_origin"
    # the bearer token needs neither header (ragweedctl sends none)
    assert api.request("POST", "/v1/search", {"query": "heron"})[0] == 200


def test_a_refused_cookie_write_never_reaches_the_engine(api, tmp_path):
    with running_api(tmp_path) as a:
        calls = a.count_engine_calls()
        cookie = login(a)
        st, _, _ = a.request("POST", "/v1/collections/notes/documents?filename=x.txt", raw=b"planted",
                             token=None, headers=with_cookie(cookie, **{"Content-Type": "text/plain"}))
        assert st == 403 and calls == []
        assert not (a.paths.data / "uploads" / "notes" / "x.txt").exists()


def test_pages_need_no_token_but_the_host_and_origin_checks(api):
    st, hdrs, page = api.request("GET", "/", token=None)
    assert st == 200 and hdrs["Content-Type"].startswith("text/html") and b"/ui/app.js" in page
    assert "script-src 'self'" in hdrs["Content-Security-Policy"] and hdrs["X-Frame-Options"] == "DENY"
    assert api.token.encode() not in page
    for name, ctype in (("app.js", "text/javascript"), ("app.css", "text/css")):
        st, hdrs, body = api.request("GET", f"/ui/{name}", token=None)
        assert st == 200 and hdrs["Content-Type"].startswith(ctype) and body
    for bad in ("/ui/index.html", "/ui/..%2Fapi%2Fsecurity.py", "/ui/nope.js"):
        assert api.request("GET", bad, token=None)[0] == 404, bad
    st, _, body = api.request("GET", "/", token=None, headers={"Host": f"evil.com:{api.port}"})
    assert st == 403 and body["error"]["code"] == "forbidden_host"
    st, _, body = api.request("GET", "/login?code=x", token=None, headers={"Sec-Fetch-Site": "cross-site"})
    assert st == 403 and body["error"]["code"] == "forbidden_origin"
    assert api.request("POST", "/", token=None)[0] == 401  # only GET is public


# --------------------------------------------------------------------------- original files
def _key(a, name: str, state: str = "indexed") -> str:
    items = a.ok("GET", f"/v1/documents?state={state}&limit=100")["items"]
    return next(d["doc_key"] for d in items if d["filename"] == name)


def test_an_indexed_file_is_served_with_a_safe_type(api):
    st, hdrs, body = api.request("GET", f"/v1/files/{_key(api, 'notes.md')}")
    assert st == 200 and body == (api.docs_dir / "notes.md").read_bytes()
    assert hdrs["Content-Type"] == "text/plain; charset=utf-8" and "sandbox" in hdrs["Content-Security-Policy"]
    # a page of the collection is text, never a page of this origin
    st, hdrs, body = api.request("GET", f"/v1/files/{_key(api, 'page.html')}")
    assert st == 200 and b"<script>" in body and hdrs["Content-Type"] == "text/plain; charset=utf-8"
    assert hdrs["Content-Disposition"] == "inline; filename*=UTF-8''page.html"
    # the cookie works here too (the pill opens this URL in a new tab)
    assert api.request("GET", f"/v1/files/{_key(api, 'notes.md')}", token=None,
                       headers=with_cookie(login(api)))[0] == 200


def test_ranges(api):
    key, data = _key(api, "notes.md"), (api.docs_dir / "notes.md").read_bytes()
    st, hdrs, body = api.request("GET", f"/v1/files/{key}", headers={"Range": "bytes=2-5"})
    assert st == 206 and body == data[2:6] and hdrs["Content-Range"] == f"bytes 2-5/{len(data)}"
    st, _, body = api.request("GET", f"/v1/files/{key}", headers={"Range": "bytes=-4"})
    assert st == 206 and body == data[-4:]
    for junk in ("bytes=9999-", "bytes=5-2", "lines=1-2", "bytes=1-2,4-5", "bytes=x-"):
        st, _, body = api.request("GET", f"/v1/files/{key}", headers={"Range": junk})
        assert st == 200 and body == data, junk


def test_what_is_not_served(api, tmp_path):
    st, _, body = api.request("GET", f"/v1/files/{_key(api, 'broken.pdf', 'failed')}")
    assert st == 404 and "not in the index" in body["error"]["message"]
    for key in ("999999", "abc", "1.5", "%2E%2E", "..%2F..%2Fetc%2Fpasswd"):
        st, _, body = api.request("GET", f"/v1/files/{key}")
        assert st == 404, (key, body)
    assert api.request("GET", "/v1/files/../../etc/passwd")[0] == 404
    assert api.request("GET", f"/v1/files/{_key(api, 'notes.md')}", token=None)[0] == 401


def test_a_file_swapped_for_a_symlink_is_refused(tmp_path):
    """The index still lists the file while the watcher has not caught up: the route itself must
    refuse what now points outside the collection."""
    secret = tmp_path / "secret.txt"
    secret.write_text("the neighbour's diary\n")
    with running_api(tmp_path / "a", files={"swap.txt": "a harmless note about herons\n"}) as a:
        key = _key(a, "swap.txt")
        src = a.docs_dir / "swap.txt"
        src.unlink()
        os.symlink(secret, src)
        st, _, body = a.request("GET", f"/v1/files/{key}")
        # refused whether the index has noticed (not indexed any more) or not (a symlink now)
        assert st in (403, 404), body
        assert b"diary" not in repr(body).encode()
        if st == 403:
            assert body["error"]["code"] == "forbidden_path"


# --------------------------------------------------------------------------- open_served itself
def test_open_served(tmp_path):
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "sub").mkdir(parents=True)
    outside.mkdir()
    (root / "sub" / "a.txt").write_text("inside")
    (outside / "b.txt").write_text("outside")
    os.symlink(outside / "b.txt", root / "link.txt")
    os.symlink(outside, root / "linkdir")
    linked_root = tmp_path / "linked-root"
    os.symlink(root, linked_root)

    fd = web_routes.open_served(str(root / "sub" / "a.txt"), [str(root)])
    try:
        assert os.read(fd, 100) == b"inside"
    finally:
        os.close(fd)
    fd = web_routes.open_served(str(linked_root / "sub" / "a.txt"), [str(linked_root)])  # the root may be a link
    os.close(fd)
    refused = {
        str(root / "link.txt"): "outside every folder",            # a symlink out of the root
        str(root / "linkdir" / "b.txt"): "outside every folder",   # a folder symlink out of the root
        str(outside / "b.txt"): "outside every folder",            # not under any root
        str(root / "sub" / ".." / "sub" / "a.txt"): "plain absolute",
        "sub/a.txt": "plain absolute",
        str(root / "sub"): "not a regular file",
    }
    for path, why in refused.items():
        with pytest.raises(PermissionError, match=why):
            os.close(web_routes.open_served(path, [str(root)]))
    with pytest.raises(PermissionError, match="no folders"):
        web_routes.open_served(str(root / "sub" / "a.txt"), [])
    # inside the root but through a symlink that stays inside: refused as well (not followed, as ingest)
    os.symlink(root / "sub" / "a.txt", root / "inner-link.txt")
    with pytest.raises(PermissionError, match="symbolic link"):
        web_routes.open_served(str(root / "inner-link.txt"), [str(root)])
    with pytest.raises(FileNotFoundError):
        web_routes.open_served(str(root / "gone.txt"), [str(root)])


@pytest.mark.parametrize("name,ctype,disposition,sandbox", [
    ("a.pdf", "application/pdf", "inline", False),
    ("a.html", "text/plain; charset=utf-8", "inline", True),
    ("a.svg", "text/plain; charset=utf-8", "inline", True),
    ("a.xhtml", "text/plain; charset=utf-8", "inline", True),
    ("a.js", "text/plain; charset=utf-8", "inline", True),
    ("a.md", "text/plain; charset=utf-8", "inline", True),
    ("a.png", "image/png", "inline", True),
    ("a.mp3", "audio/mpeg", "inline", True),
    ("a.docx", "application/vnd.openxmlformats-officedocument.wordprocessingml.document", "attachment", True),
    ("noext", "application/octet-stream", "attachment", True),
])
def test_file_headers(name, ctype, disposition, sandbox):
    h = web_routes.file_headers(name)
    assert h["Content-Type"] == ctype and h["Content-Disposition"].startswith(disposition + ";")
    assert ("sandbox" in h.get("Content-Security-Policy", "")) is sandbox
