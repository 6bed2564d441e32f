"""The web UI: its pages (``/``, ``/login``, ``/ui/<asset>``), the login codes ``ragweedctl open``
asks for (``POST /v1/login-codes``) and the original files its citations open (``GET /v1/files/{doc_key}``).

Sign-in (docs/web.md): ragweedctl, which holds the token, asks for a code that works once within
LOGIN_CODE_TTL_S and opens ``/login#code=...`` (through a private file, so that the code is never
on a command line). The fragment never reaches the daemon: the page's script (``/ui/login.js``)
posts the code to ``POST /login``, which answers a session's two secrets: the cookie (HttpOnly,
SameSite=Strict) and the key the page keeps in sessionStorage and sends with every API call. The
page's scripts never see the token or the cookie; the security middleware accepts the pair in
place of the token (ragweedd/api/security.py says why one is not enough).

A file is served only when its document is indexed and its path lies inside one of its
collection's current roots, as written and with symlinks resolved, and it opens as a regular file
without following a symlink below that root (as ingest opens files). Files that a browser would
run as a page of this origin (HTML, SVG, XML, scripts) are sent as plain text, and everything but
PDFs under a sandbox CSP, so an indexed file cannot act with the session of the user who opens it.
"""

from __future__ import annotations

import asyncio
import json
import mimetypes
import os
from importlib import resources
from urllib.parse import quote

from aiohttp import web

from ragweedd.api.jsontext import dumps
from ragweedd.api.routes import read_body
from ragweedd.api.security import LOGIN_CODE_TTL_S, STATE_KEY, error_response
from ragweedd.contract import LoginCode, WebSession
from ragweedd.errors import NotFoundError, RequestError, SignInRefused
from ragweedd.ingest.safe_open import NotRegularFile, open_regular
from ragweedd.paths import within

MAX_LOGIN_BODY = 4096
# favicon.svg: a browser asks for an icon on every page load (at /favicon.ico when the page names
# none: the sign-in messages, a PDF opened from /v1/files); without one its console shows a 404
ASSETS = {"app.js": "text/javascript; charset=utf-8", "ask.js": "text/javascript; charset=utf-8",
          "login.js": "text/javascript; charset=utf-8",
          "app.css": "text/css; charset=utf-8",
          "favicon.svg": "image/svg+xml"}
PAGE_CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
            "form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
CHUNK = 256 * 1024
# Shown in the browser as they are: the PDF viewer, images, audio and video.
INLINE_TYPES = {"application/pdf", "image/png", "image/jpeg", "image/gif", "image/webp", "image/bmp"}
INLINE_PREFIXES = ("audio/", "video/")
# Text a browser would run or render as a page of this origin: sent as plain text instead.
AS_TEXT = {"application/json", "application/xml", "application/javascript", "application/xhtml+xml",
           "image/svg+xml", "application/x-sh", "application/x-python-code"}


def _asset(name: str) -> bytes:
    # ragweedd/web holds data only (no __init__.py): package data of ragweedd itself
    return resources.files("ragweedd").joinpath("web", name).read_bytes()


def _page_headers(ctype: str) -> dict[str, str]:
    return {"Content-Type": ctype, "Content-Security-Policy": PAGE_CSP, "X-Frame-Options": "DENY",
            "Referrer-Policy": "no-referrer"}


async def index(request: web.Request) -> web.Response:
    return web.Response(body=_asset("index.html"), headers=_page_headers("text/html; charset=utf-8"))


async def favicon(request: web.Request) -> web.Response:
    return web.Response(body=_asset("favicon.svg"), headers=_page_headers(ASSETS["favicon.svg"]))


async def asset(request: web.Request) -> web.Response:
    name = request.match_info["asset"]
    if name not in ASSETS:
        raise NotFoundError(f"no web UI file {name[:80]!r}", hint="the UI is at /")
    return web.Response(body=_asset(name), headers=_page_headers(ASSETS[name]))


async def login_page(request: web.Request) -> web.Response:
    # the code is in the fragment (or, from an older link, the query): login.js reads and posts it
    return web.Response(body=_asset("login.html"), headers={**_page_headers("text/html; charset=utf-8"),
                                                            "Referrer-Policy": "no-referrer"})


async def login(request: web.Request) -> web.Response:
    """``{"code": ...}`` -> the session: its cookie set, its key in the body."""
    st = request.app[STATE_KEY]
    body = await read_body(request)  # within the body timeout, as every route reads its body
    try:
        data = json.loads(body) if len(body) <= MAX_LOGIN_BODY else None
    except (ValueError, RecursionError):
        data = None
    code = data.get("code") if isinstance(data, dict) else None
    if not isinstance(code, str) or not code:
        raise RequestError('POST /login takes a JSON object {"code": "..."} with the code from POST /v1/login-codes',
                              hint="open the link that `ragweedctl open` gives")
    pair = st.redeem_login_code(code[:200])
    if pair is None:
        raise SignInRefused(f"the sign-in code was already used, has expired (codes last {LOGIN_CODE_TTL_S:g} "
                            "seconds) or is not one this daemon gave out",
                            hint="run `ragweedctl open` for a new sign-in link")
    cookie, key = pair
    out: WebSession = {"key": key, "idle_timeout_s": st.session_idle_s, "max_age_s": st.session_max_s}
    resp = web.json_response(out, dumps=dumps)
    # No Max-Age: a session cookie, gone when the browser closes; the daemon ends the session itself.
    resp.set_cookie(st.cookie_name, cookie, httponly=True, samesite="Strict", path="/")
    return resp


async def login_code(request: web.Request) -> web.Response:
    st = request.app[STATE_KEY]
    code = st.new_login_code()
    # request.host is the Host header the security middleware accepted: the name the client used
    out: LoginCode = {"code": code, "url": f"http://{request.host}/login#code={code}",
                      "expires_in_s": LOGIN_CODE_TTL_S}
    return web.json_response(out, dumps=dumps)


def open_served(path: str, roots: list[str]) -> int:
    """A read-only fd of the file to serve for ``path``, or ``PermissionError`` saying why not: the
    path must be absolute and without ``..``, lie inside one of ``roots`` both as written and with
    symlinks resolved, and be a regular file reached without following a symlink below that root
    (opened component by component with O_NOFOLLOW, as ingest opens files: a file swapped for a
    link after the check is refused too). ``FileNotFoundError`` when it is gone."""

    if not os.path.isabs(path) or ".." in path.split(os.sep):
        raise PermissionError("its path is not a plain absolute path")
    if not roots:
        raise PermissionError("its collection has no folders any more")
    real = os.path.realpath(path)
    root = next((r for r in roots
                 if within(path, r, strictly=True) and within(real, os.path.realpath(r), strictly=True)), None)
    if root is None:
        raise PermissionError("it lies outside every folder of its collection (a symlink may point elsewhere)")
    try:
        return open_regular(path, root)
    except NotRegularFile:
        raise PermissionError("it is a symbolic link, or reached through one, or not a regular file") from None


def file_headers(name: str) -> dict[str, str]:
    """Content type and disposition for an original file: see the module's docstring."""
    ctype, _ = mimetypes.guess_type(name, strict=False)
    ctype = ctype or "application/octet-stream"
    disposition = "inline"
    if ctype in AS_TEXT or ctype.startswith("text/"):
        ctype = "text/plain; charset=utf-8"
    elif ctype not in INLINE_TYPES and not ctype.startswith(INLINE_PREFIXES):
        disposition = "attachment"
    headers = {"Content-Type": ctype, "Content-Disposition": f"{disposition}; filename*=UTF-8''"
               + quote(os.fsencode(name), safe="")}
    if ctype != "application/pdf":  # the PDF viewer does not run in a sandboxed document
        headers["Content-Security-Policy"] = "sandbox; default-src 'none'; img-src 'self'; media-src 'self'; " \
                                             "style-src 'unsafe-inline'"
    return headers


async def original_file(request: web.Request) -> web.StreamResponse:
    st = request.app[STATE_KEY]
    key = request.match_info["doc_key"]
    src = await st.engine.source_file(key)
    shown = os.path.basename(src["path"])
    if not src["indexed"]:
        raise NotFoundError(f"document '{key}' ({shown!r}) is not in the index (it failed, was skipped, is still "
                            "queued or was replaced)", hint="only indexed documents are served; see GET /v1/documents")
    try:
        fd = await asyncio.to_thread(open_served, src["path"], src["roots"])
    except PermissionError as e:
        return error_response(403, "forbidden_path", f"the file of document '{key}' is not served: {e}",
                              "only regular files inside a collection's folders are served")
    except FileNotFoundError:
        raise NotFoundError(f"the file of document '{key}' ({shown!r}) is gone",
                            hint="a scan of its collection will notice") from None
    try:
        return await _send_fd(request, fd, file_headers(shown))
    finally:
        os.close(fd)


def _range(header: str, size: int) -> tuple[int, int] | None:
    """(first, last) of a single ``bytes=`` range within ``size``; None for anything else (the
    whole file is sent then, which a client must accept)."""
    unit, _, spec = header.partition("=")
    if unit.strip() != "bytes" or "," in spec:
        return None
    first, _, last = spec.strip().partition("-")
    if not (first.isdigit() or last.isdigit()) or (first and not first.isdigit()) or (last and not last.isdigit()):
        return None
    if not first:  # the last N bytes
        n = int(last)
        return (max(0, size - n), size - 1) if n else None
    lo, hi = int(first), (int(last) if last else size - 1)
    if lo >= size or hi < lo:
        return None
    return lo, min(hi, size - 1)


async def _send_fd(request: web.Request, fd: int, headers: dict[str, str]) -> web.StreamResponse:
    """The bytes of ``fd``, or the one range asked for (PDF viewers and media players seek)."""
    size = os.fstat(fd).st_size
    lo, hi, status = 0, size - 1, 200
    rng = _range(request.headers.get("Range", ""), size) if request.headers.get("Range") else None
    if rng is not None:
        lo, hi = rng
        status = 206
        headers["Content-Range"] = f"bytes {lo}-{hi}/{size}"
    headers.update({"Accept-Ranges": "bytes", "X-Frame-Options": "SAMEORIGIN", "Cache-Control": "no-store",
                    "X-Content-Type-Options": "nosniff"})
    resp = web.StreamResponse(status=status, headers=headers)
    resp.content_length = max(0, hi - lo + 1)
    await resp.prepare(request)
    off = lo
    while off <= hi:
        chunk = await asyncio.to_thread(os.pread, fd, min(CHUNK, hi - off + 1), off)
        if not chunk:  # the file shrank meanwhile: the client sees a short body
            break
        await resp.write(chunk)
        off += len(chunk)
    await resp.write_eof()
    return resp


def add_web_routes(app: web.Application) -> None:
    r = app.router
    r.add_get("/", index, allow_head=False)
    r.add_get("/login", login_page, allow_head=False)
    r.add_post("/login", login)
    r.add_get("/ui/{asset}", asset, allow_head=False)
    r.add_get("/favicon.ico", favicon, allow_head=False)
    r.add_post("/v1/login-codes", login_code)
    r.add_get("/v1/files/{doc_key}", original_file, allow_head=False)
