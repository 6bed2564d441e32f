"""The web UI's sign-in and file serving against the REAL daemon engine on a loopback port
(tests/api_support.py): login codes (single use, expiry, token only), the session (cookie and key,
never the cookie alone) in place of the token, its expiry, the Origin / Sec-Fetch-Site rule for
what it may change, the pages, and
GET /v1/files/{doc_key} refusing files outside a collection's folders, symlinks and documents
that are not indexed. The browser end of all this is tests/system/test_web_ui.py."""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import time
from typing import NamedTuple

import pytest

from ragweedd.api import web_routes  # noqa: E402
from ragweedd.api.security import SESSION_KEY_HEADER as KEY  # noqa: E402
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


class Signed(NamedTuple):
    """A web UI session as the browser holds it: the cookie's name and value, and the page's key."""

    name: str
    cookie: str
    key: str


def login(a) -> Signed:
    """A session from a fresh code, redeemed as the sign-in page's script does."""
    code = a.ok("POST", "/v1/login-codes")["code"]
    st, hdrs, body = a.request("POST", "/login", {"code": code}, token=None)
    assert st == 200, body
    m = re.match(r"(ragweedd_session_\d+)=([^;]+);(.*)", hdrs["Set-Cookie"])
    assert m, hdrs["Set-Cookie"]
    return Signed(m.group(1), m.group(2), body["key"])


def with_cookie(s: Signed, **more) -> dict:
    """The cookie alone: what any other server on this machine receives from the browser."""
    return {"Cookie": f"{s.name}={s.cookie}", **more}


def with_session(s: Signed, **more) -> dict:
    """What the web UI page sends: the cookie and its key."""
    return with_cookie(s, **{KEY: s.key, **more})


# --------------------------------------------------------------------------- login codes
def test_a_login_code_signs_in_once(api):
    body = api.ok("POST", "/v1/login-codes")
    assert set(body) == {"code", "url", "expires_in_s"} and body["expires_in_s"] == 60
    # in the fragment, which a browser never sends: the sign-in page's script posts it
    assert body["url"] == f"http://127.0.0.1:{api.port}/login#code={body['code']}"
    st, hdrs, out = api.request("POST", "/login", {"code": body["code"]}, token=None)
    assert st == 200 and set(out) == {"key", "idle_timeout_s", "max_age_s"}, out
    assert out["idle_timeout_s"] == 7200 and out["max_age_s"] == 86400
    cookie = hdrs["Set-Cookie"]
    name, value = cookie.split(";")[0].split("=", 1)
    assert name == f"ragweedd_session_{api.port}" and value != api.token and len(value) >= 40
    assert out["key"] not in (value, api.token) and len(out["key"]) >= 40
    attrs = {a.strip().lower() for a in cookie.split(";")[1:]}
    assert {"httponly", "samesite=strict", "path=/"} <= attrs, cookie
    assert not any(a.startswith(("max-age", "expires", "domain")) for a in attrs), cookie
    st, hdrs, out = api.request("POST", "/login", {"code": body["code"]}, token=None)  # used
    assert st == 403 and "Set-Cookie" not in hdrs and out["error"]["code"] == "sign_in_refused"
    assert "already used" in out["error"]["message"] and "ragweedctl open" in out["error"]["hint"]


def test_the_sign_in_page_redeems_nothing_itself(api):
    """GET /login is the page (its script does the sign-in); a code in its query is not used up."""
    code = api.ok("POST", "/v1/login-codes")["code"]
    st, hdrs, page = api.request("GET", f"/login?code={code}", token=None)
    assert st == 200 and hdrs["Content-Type"].startswith("text/html") and b"/ui/login.js" in page
    assert "Set-Cookie" not in hdrs and code.encode() not in page and hdrs["Referrer-Policy"] == "no-referrer"
    assert api.request("POST", "/login", {"code": code}, token=None)[0] == 200


@pytest.mark.parametrize("body", [None, b"", b"not json", b"[]", b"{}", b'{"code": ""}', b'{"code": 5}',
                                  b'{"code": "nonsense"}', b'{"code": "' + b"x" * 5000 + b'"}'])
def test_a_bad_code_is_a_clear_error_and_no_cookie(api, body):
    st, hdrs, out = api.request("POST", "/login", token=None, raw=body,
                                headers={"Content-Type": "application/json"})
    assert st in (400, 403) and "Set-Cookie" not in hdrs, out
    assert out["error"]["code"] in ("bad_request", "sign_in_refused") and "ragweedctl open" in out["error"]["hint"]


def test_an_expired_code_is_refused(api):
    code = api.ok("POST", "/v1/login-codes")["code"]
    st_ = api.server.app[STATE_KEY]
    st_.login_codes[code] = time.monotonic() - 1
    st, hdrs, out = api.request("POST", "/login", {"code": code}, token=None)
    assert st == 403 and "Set-Cookie" not in hdrs and "expired" in out["error"]["message"]


def test_login_codes_need_the_bearer_token(api):
    st, _, body = api.request("POST", "/v1/login-codes", token=None)
    assert st == 401
    s = login(api)
    st, _, body = api.request("POST", "/v1/login-codes", token=None,
                              headers=with_session(s, Origin=f"http://127.0.0.1:{api.port}"))
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


# --------------------------------------------------------------------------- the session on the API
def test_the_session_reads_like_the_token(api):
    s = login(api)
    assert api.request("GET", "/v1/status", token=None, headers=with_session(s))[0] == 200
    assert api.request("GET", "/v1/status", token=None, headers=with_session(s._replace(cookie="forged")))[0] == 401
    # another daemon's (port's) cookie name does not count
    assert api.request("GET", "/v1/status", token=None,
                       headers={"Cookie": f"ragweedd_session_1={s.cookie}", KEY: s.key})[0] == 401


def test_the_cookie_alone_or_the_key_alone_reads_nothing(api):
    """Any server on this machine receives the cookie (browsers do not keep cookies apart by port):
    without the key that only the page holds it is worth nothing, whatever it claims to be."""
    s, other = login(api), login(api)
    forged = {"Origin": f"http://127.0.0.1:{api.port}", "Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": "cors"}
    for headers in (with_cookie(s), with_cookie(s, **forged), with_cookie(s, **{KEY: "", **forged}),
                    with_cookie(s, **{KEY: s.key[:-1] + "x"}), with_cookie(s, **{KEY: other.key}),
                    {KEY: s.key, **forged}):
        for method, path, body in (("GET", "/v1/status", None), ("GET", "/v1/documents", None),
                                   ("GET", "/v1/collections", None), ("POST", "/v1/search", {"query": "heron"})):
            st, _, out = api.request(method, path, body, token=None, headers=headers)
            assert st == 401 and out["error"]["code"] == "unauthorized", (headers, path, out)
    st, _, out = api.request("GET", "/v1/status", token=None, headers=with_cookie(s))
    assert KEY in out["error"]["message"] and "cookie alone" in out["error"]["message"]
    assert api.request("GET", "/v1/status", token=None, headers=with_session(s))[0] == 200  # both: yes


def test_sessions_end_when_idle_and_when_old(api):
    st_ = api.server.app[STATE_KEY]
    idle, old, fresh = login(api), login(api), login(api)
    st_.sessions[idle.cookie].used -= st_.session_idle_s + 1
    st_.sessions[old.cookie].created -= st_.session_max_s + 1  # used a moment ago, but signed in too long ago
    for s in (idle, old):
        st, _, out = api.request("GET", "/v1/status", token=None, headers=with_session(s))
        assert st == 401 and "has ended" in out["error"]["message"], out
        assert s.cookie not in st_.sessions
    # a session in use lives on: each request counts as use
    st_.sessions[fresh.cookie].used -= st_.session_idle_s - 60
    assert api.request("GET", "/v1/status", token=None, headers=with_session(fresh))[0] == 200
    assert time.monotonic() - st_.sessions[fresh.cookie].used < 30


@pytest.mark.parametrize("headers,status", [
    ({}, 403),                                                      # the session without either header
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
def test_what_the_session_may_change(api, headers, status):
    s = login(api)
    h = {k: v.format(port=api.port, other=api.port + 1) for k, v in headers.items()}
    st, _, body = api.request("POST", "/v1/search", {"query": "heron"}, token=None, headers=with_session(s, **h))
    assert st == status, body
    if status == 403:
        assert body["error"]["code"] == "forbidden_origin"
    # the bearer token needs neither header (ragweedctl sends none)
    assert api.request("POST", "/v1/search", {"query": "heron"})[0] == 200


def test_a_refused_cookie_write_never_reaches_the_engine(api, tmp_path):
    with running_api(tmp_path) as a:
        calls = a.count_engine_calls()
        s = login(a)
        origin = {"Origin": f"http://127.0.0.1:{a.port}", "Content-Type": "text/plain"}
        for headers, status in ((with_session(s, **{"Content-Type": "text/plain"}), 403),
                                (with_cookie(s, **origin), 401)):
            st, _, _ = a.request("POST", "/v1/collections/notes/documents?filename=x.txt", raw=b"planted",
                                 token=None, headers=headers)
            assert st == status and calls == []
        st, _, _ = a.request("POST", "/v1/collections", {"name": "planted", "roots": [str(tmp_path)]},
                             token=None, headers=with_cookie(s, **origin))
        assert st == 401 and calls == []
        assert not (a.paths.data / "uploads" / "notes" / "x.txt").exists()


def test_pages_need_no_token_but_the_host_and_origin_checks(api):
    st, hdrs, page = api.request("GET", "/", token=None)
    assert st == 200 and hdrs["Content-Type"].startswith("text/html") and b"/ui/app.js" in page
    assert "script-src 'self'" in hdrs["Content-Security-Policy"] and hdrs["X-Frame-Options"] == "DENY"
    assert api.token.encode() not in page
    for name, ctype in (("app.js", "text/javascript"), ("login.js", "text/javascript"), ("app.css", "text/css")):
        st, hdrs, body = api.request("GET", f"/ui/{name}", token=None)
        assert st == 200 and hdrs["Content-Type"].startswith(ctype) and body
    for bad in ("/ui/index.html", "/ui/login.html", "/ui/..%2Fapi%2Fsecurity.py", "/ui/nope.js"):
        assert api.request("GET", bad, token=None)[0] == 404, bad
    st, _, body = api.request("GET", "/", token=None, headers={"Host": f"evil.com:{api.port}"})
    assert st == 403 and body["error"]["code"] == "forbidden_host"
    # the sign-in file ragweedctl open writes is a file:// page: browsers mark its navigation
    # cross-site; the two pages that hold no data may be navigated to from anywhere ...
    nav = {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"}
    for path in ("/login", "/"):
        assert api.request("GET", path, token=None, headers=nav)[0] == 200, path
    # ... but not fetched by another site's script, nor anything else navigated to
    st, _, body = api.request("GET", "/login", token=None, headers={**nav, "Sec-Fetch-Mode": "cors"})
    assert st == 403 and body["error"]["code"] == "forbidden_origin"
    for path in ("/v1/status", "/ui/app.js"):
        assert api.request("GET", path, headers=nav)[0] == 403, path
    code = api.ok("POST", "/v1/login-codes")["code"]
    for origin in ("null", "http://evil.com", f"http://127.0.0.1:{api.port + 1}"):
        st, hdrs, body = api.request("POST", "/login", {"code": code}, token=None,
                                     headers={"Origin": origin, "Sec-Fetch-Site": "cross-site"})
        assert st == 403 and body["error"]["code"] == "forbidden_origin" and "Set-Cookie" not in hdrs
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
    # a session opens it with its key, or, as a link (a pill opens it in a new tab), with the cookie
    # and the file's ticket, HMAC-SHA256(key, doc_key), which opens no other file
    s, key, other = login(api), _key(api, "notes.md"), _key(api, "page.html")
    ticket = hmac.new(s.key.encode(), key.encode(), hashlib.sha256).hexdigest()
    path = f"/v1/files/{key}"
    assert api.request("GET", path, token=None, headers=with_session(s))[0] == 200
    st, _, body = api.request("GET", f"{path}?t={ticket}", token=None, headers=with_cookie(s))
    assert st == 200 and body == (api.docs_dir / "notes.md").read_bytes()
    wrong = ticket[:-1] + ("1" if ticket.endswith("0") else "0")  # one digit off, never the ticket itself
    for url, headers in ((path, with_cookie(s)), (f"/v1/files/{other}?t={ticket}", with_cookie(s)),
                         (f"{path}?t={wrong}", with_cookie(s)), (f"{path}?t={ticket}", {}),
                         (f"{path}?t={ticket}", with_cookie(login(api)))):
        assert api.request("GET", url, token=None, headers=headers)[0] == 401, url


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
