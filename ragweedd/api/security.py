"""Middlewares: the uniform error envelope, and the checks that keep a localhost service local.

Order (outermost first): ``error_middleware`` turns every failure -- ours, aiohttp's 404/405/413,
and unexpected exceptions -- into ``{"error": {"code", "message", "hint"?}}``; then
``security_middleware`` checks, before any handler runs (unknown routes included):

1. Host is exactly one of localhost / 127.0.0.1 / [::1] with our port. A DNS-rebinding page on
   evil.com that resolves to 127.0.0.1 sends ``Host: evil.com:PORT`` and is refused.
2. Origin, when present, is one of our own origins; Sec-Fetch-Site, when present, is same-origin or
   none. A page on another site can send a "simple" text/plain POST without a preflight; these two
   headers are what browsers cannot let it forge. A top-level navigation to the two HTML pages that
   hold no data (``/`` and ``/login``) is let in from anywhere: the sign-in file ``ragweedctl open``
   writes is a file:// page, whose navigations browsers mark cross-site.
3. The bearer token (constant-time comparison; never logged) on everything but GET /v1/health and
   the web UI's pages (``PUBLIC_PREFIXES``). A web UI session (``ragweedctl open``, docs/web.md) is
   accepted in its place, except for minting login codes. A session is two secrets: an HttpOnly
   cookie, and a key the page keeps in sessionStorage and sends as ``X-Ragweedd-Key`` (or, for an
   original file opened as a link, as ``?t=HMAC(key, doc_key)``). Browsers do not keep cookies apart
   by port, so any other server on 127.0.0.1 receives the cookie; it never sees the key, which only
   pages of this origin can read, so a cookie alone is a 401. Sessions end after SESSION_IDLE_S
   unused and SESSION_MAX_S after sign-in. A request a session signs that changes something must
   also carry Origin or ``Sec-Fetch-Site: same-origin`` (checked in 2.).
4. A declared Content-Length above the cap is refused with 413 before the body is read.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import secrets
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aiohttp import web

from ragweedd.api.jsontext import dumps
from ragweedd.errors import RagweedError

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

PUBLIC_ROUTES = {("GET", "/v1/health")}
# The web UI's shell (HTML, script, style: no data) and its sign-in page need no token; the data
# they show comes from the API, which checks the session cookie (ragweedd/api/web_routes.py).
PUBLIC_PAGES = {("GET", "/"), ("GET", "/login"), ("POST", "/login"), ("GET", "/favicon.ico")}
PUBLIC_PREFIXES = (("GET", "/ui/"),)
# Minting a login code needs the bearer token itself: a browser session cannot extend itself.
TOKEN_ONLY_ROUTES = {("POST", "/v1/login-codes")}
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
LOGIN_CODE_TTL_S = 60.0
MAX_LOGIN_CODES = 32
MAX_SESSIONS = 64
# A session ends when unused this long (an open page polls the status every few seconds, so this is
# the time since its last tab closed or the machine slept) and, used or not, this long after sign-in.
SESSION_IDLE_S = 2 * 3600.0
SESSION_MAX_S = 24 * 3600.0
SESSION_KEY_HEADER = "X-Ragweedd-Key"
# The pages a browser may be sent to from another site (or a file:// page): HTML without data.
NAVIGABLE_PAGES = {("GET", "/"), ("GET", "/login")}

_HTTP_CODES = {
    400: ("bad_request", "the request is malformed"),
    401: ("unauthorized", "a valid bearer token is required"),
    403: ("forbidden", "the request was refused"),
    404: ("not_found", "no such route"),
    405: ("method_not_allowed", "method not allowed"),
    408: ("request_timeout", "the request body did not arrive in time"),
    411: ("length_required", "a Content-Length is required"),
    413: ("body_too_large", "the request body is too large"),
    415: ("unsupported_media_type", "unsupported content type"),
    429: ("too_many_requests", "too many requests"),
}


@dataclass
class Session:
    """One browser sign-in: the page's key (see the module's docstring) and monotonic times."""

    key: str
    created: float
    used: float

    def file_ticket(self, doc_key: str) -> str:
        return hmac.new(self.key.encode(), doc_key.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()


@dataclass
class ApiState:
    engine: Any
    token: str
    port: int
    max_body_bytes: int
    max_concurrent_answers: int
    extra_hosts: tuple[str, ...] = ()
    answers_in_flight: int = 0
    body_timeout: float = 60.0
    log: Any = None
    allowed_hosts: frozenset[str] = field(default_factory=frozenset)
    allowed_origins: frozenset[str] = field(default_factory=frozenset)
    # login code -> monotonic expiry; cookie secret -> its session (newest kept).
    # In memory only: a restarted daemon forgets both, and the user runs `ragweedctl open` again.
    login_codes: dict[str, float] = field(default_factory=dict)
    sessions: dict[str, Session] = field(default_factory=dict)
    session_idle_s: float = SESSION_IDLE_S
    session_max_s: float = SESSION_MAX_S

    def __post_init__(self) -> None:
        self.set_port(self.port)

    def set_port(self, port: int) -> None:
        """The port is known only after binding when the config asks for port 0."""
        self.port = port
        names = ["localhost", "127.0.0.1", "[::1]", *self.extra_hosts]
        hosts = {f"{n}:{port}" for n in names}
        if port == 80:
            hosts |= set(names)
        self.allowed_hosts = frozenset(h.lower() for h in hosts)
        self.allowed_origins = frozenset(f"http://{n}:{port}" for n in ("localhost", "127.0.0.1", "[::1]"))

    @property
    def cookie_name(self) -> str:
        # Cookies are not kept apart by port: two daemons on one machine get two names.
        return f"ragweedd_session_{self.port}"

    def new_login_code(self, ttl: float = LOGIN_CODE_TTL_S) -> str:
        now = time.monotonic()
        self.login_codes = {c: t for c, t in self.login_codes.items() if t > now}
        while len(self.login_codes) >= MAX_LOGIN_CODES:
            self.login_codes.pop(next(iter(self.login_codes)))
        code = secrets.token_urlsafe(32)
        self.login_codes[code] = now + ttl
        return code

    def redeem_login_code(self, code: str) -> tuple[str, str] | None:
        """A new session's (cookie secret, page key) for a valid code, which is used up; None when
        the code is unknown, used or expired."""
        expires = None
        for known in list(self.login_codes):
            # every code is compared, in constant time each, so timing tells nothing about them
            if hmac.compare_digest(known.encode(), code.encode("utf-8", "replace")):
                expires = self.login_codes.pop(known)
        if expires is None or expires <= time.monotonic():
            return None
        now = time.monotonic()
        self.sessions = {c: s for c, s in self.sessions.items() if self.live(s, now)}
        while len(self.sessions) >= MAX_SESSIONS:
            self.sessions.pop(next(iter(self.sessions)))
        cookie, key = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
        self.sessions[cookie] = Session(key, now, now)
        return cookie, key

    def live(self, s: Session, now: float) -> bool:
        return now - s.used < self.session_idle_s and now - s.created < self.session_max_s

    def session_of(self, cookie: str) -> Session | None:
        """The live session whose cookie secret this is (every secret compared in constant time);
        an expired one is forgotten."""
        found = None
        for known in list(self.sessions):
            if hmac.compare_digest(known.encode(), cookie.encode("utf-8", "replace")):
                found = known
        if found is None:
            return None
        s = self.sessions[found]
        if not self.live(s, time.monotonic()):
            del self.sessions[found]
            return None
        return s


STATE_KEY = web.AppKey("ragweedd_api_state", ApiState)


def error_response(status: int, code: str, message: str, hint: str | None = None,
                   headers: dict | None = None) -> web.Response:
    err: dict[str, Any] = {"code": code, "message": message}
    if hint:
        err["hint"] = hint
    return web.json_response({"error": err}, status=status, headers=headers, dumps=dumps)


def _from_http_exception(request: web.Request, exc: web.HTTPException, st: ApiState) -> web.Response:
    code, message = _HTTP_CODES.get(exc.status, ("http_error", exc.reason or "HTTP error"))
    hint = None
    headers = {}
    if exc.status == 404:
        message = f"no route {request.method} {request.path}"
        hint = "see /v1/openapi.json for the routes"
    elif exc.status == 405:
        allowed = sorted(getattr(exc, "allowed_methods", ()) or ())
        message = f"{request.method} is not allowed on {request.path}"
        if allowed:
            hint = "allowed: " + ", ".join(allowed)
            headers["Allow"] = ",".join(allowed)
    elif exc.status == 408:
        message = f"the request body did not arrive within {st.body_timeout:g} s"
        hint = "send the whole body at once (raise http_body_timeout_s in the config for slow links)"
    elif exc.status == 413:
        message = f"the request body is larger than the limit of {st.max_body_bytes} bytes"
        hint = "raise max_body_mb in the config for bigger uploads"
    elif exc.status == 400 and exc.text and not exc.text.startswith("400"):
        message = exc.text[:300]
    return error_response(exc.status, code, message, hint, headers)


@web.middleware
async def error_middleware(request: web.Request,
                           handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> web.StreamResponse:
    st = request.app[STATE_KEY]
    rid = uuid.uuid4().hex[:12]
    t0 = time.perf_counter()
    try:
        resp = await handler(request)
    except RagweedError as e:
        resp = web.json_response({"error": e.to_dict()}, status=e.http_status, dumps=dumps)
    except web.HTTPException as e:
        if e.status < 400:
            raise
        resp = _from_http_exception(request, e, st)
    except (asyncio.CancelledError, ConnectionResetError):
        raise
    except Exception:
        # The body names the request id only; the traceback (which may hold paths or data)
        # stays in the daemon's log.
        st.log.exception("api_unhandled_error", request_id=rid, method=request.method, path=request.path)
        resp = error_response(500, "internal", "internal error in ragweedd",
                              f"see the daemon log for request id {rid}")
    if not resp.prepared:
        resp.headers["X-Request-Id"] = rid
        resp.headers.setdefault("Cache-Control", "no-store")
        resp.headers.setdefault("X-Content-Type-Options", "nosniff")
    st.log.info("api_request", request_id=rid, method=request.method, path=request.path,
                status=resp.status, ms=round((time.perf_counter() - t0) * 1000, 2))
    return resp


def check_host(request: web.Request, st: ApiState) -> str | None:
    # Read the raw header: request.host falls back to the socket's name when Host is absent.
    hosts = request.headers.getall("Host", [])
    if len(hosts) != 1:
        return "exactly one Host header is required"
    if hosts[0].strip().lower() not in st.allowed_hosts:
        return f"Host {hosts[0][:100]!r} is not this service"
    return None


def check_cross_site(request: web.Request, st: ApiState) -> str | None:
    origins = request.headers.getall("Origin", [])
    if len(origins) > 1 or (origins and origins[0].strip().lower() not in st.allowed_origins):
        return "cross-origin requests are not allowed"
    sites = request.headers.getall("Sec-Fetch-Site", [])
    if len(sites) > 1 or (sites and sites[0].strip().lower() not in ("same-origin", "none")):
        if (request.method, request.path) in NAVIGABLE_PAGES and not origins \
                and request.headers.get("Sec-Fetch-Mode", "").strip().lower() == "navigate":
            return None
        return "cross-site requests are not allowed"
    return None


def check_token(request: web.Request, st: ApiState) -> bool:
    auth = request.headers.get("Authorization", "")
    scheme, _, given = auth.partition(" ")
    if scheme.lower() != "bearer":
        # Still compare, so that a missing header costs the same as a wrong one.
        given = ""
    return hmac.compare_digest(given.strip().encode("utf-8", "replace"), st.token.encode())


def check_session(request: web.Request, st: ApiState) -> str | None:
    """None when the request carries both secrets of one live web UI session (see the module's
    docstring), else why not: the caller answers 401 with it."""
    given = request.cookies.get(st.cookie_name, "")
    if not given:
        return "missing or wrong bearer token"
    s = st.session_of(given)
    if s is None:
        return "the web UI session has ended or is unknown (sessions end when the daemon stops, " \
               f"after {st.session_idle_s / 60:g} minutes unused and {st.session_max_s / 3600:g} hours after sign-in)"
    key = request.headers.get(SESSION_KEY_HEADER, "")
    ok = hmac.compare_digest(key.strip().encode("utf-8", "replace"), s.key.encode())
    doc_key = request.match_info.get("doc_key") if request.path.startswith("/v1/files/") else None
    if not ok and request.method == "GET" and doc_key is not None:
        ticket = request.query.get("t", "")
        ok = hmac.compare_digest(ticket.encode("utf-8", "replace"), s.file_ticket(doc_key).encode())
    if not ok:
        return (f"the session cookie alone does not sign in: the web UI's {SESSION_KEY_HEADER} header is "
                "missing or wrong")
    s.used = time.monotonic()
    return None


def check_cookie_write(request: web.Request) -> str | None:
    """A cookie-signed request that changes something must show it comes from our page: browsers
    always send Origin on such fetches, and Sec-Fetch-Site; either (already checked to be ours) is
    required, so a request that carries the cookie and neither is refused."""
    if request.method in SAFE_METHODS:
        return None
    site = request.headers.get("Sec-Fetch-Site", "").strip().lower()
    if request.headers.get("Origin") or site == "same-origin":
        return None
    return "a request signed in by the session cookie must carry Origin or Sec-Fetch-Site: same-origin"


def is_public(method: str, path: str) -> bool:
    if (method, path) in PUBLIC_ROUTES or (method, path) in PUBLIC_PAGES:
        return True
    return any(method == m and path.startswith(p) for m, p in PUBLIC_PREFIXES)


@web.middleware
async def security_middleware(request: web.Request,
                              handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> web.StreamResponse:
    st = request.app[STATE_KEY]
    why = check_host(request, st)
    if why:
        return error_response(403, "forbidden_host", why,
                              "connect to http://127.0.0.1:PORT (see the state directory's port file)")
    why = check_cross_site(request, st)
    if why:
        return error_response(403, "forbidden_origin", why,
                              "browsers on other sites may not use this service")
    if not is_public(request.method, request.path) and not check_token(request, st):
        why = check_session(request, st)
        if why:
            return error_response(401, "unauthorized", why,
                                  "send 'Authorization: Bearer <token>' with the token from the state "
                                  "directory's 'token' file (ragweedctl does this for you); in a browser, "
                                  "sign in with `ragweedctl open`",
                                  headers={"WWW-Authenticate": 'Bearer realm="ragweedd"'})
        if (request.method, request.path) in TOKEN_ONLY_ROUTES:
            return error_response(403, "token_required", f"{request.method} {request.path} needs the bearer token",
                                  "the web UI's session cannot do this; use ragweedctl")
        why = check_cookie_write(request)
        if why:
            return error_response(403, "forbidden_origin", why, "browsers on other sites may not use this service")
    length = request.content_length
    if length is not None and length > st.max_body_bytes:
        return error_response(413, "body_too_large",
                              f"the request body ({length} bytes) is larger than the limit of "
                              f"{st.max_body_bytes} bytes", "raise max_body_mb in the config for bigger uploads")
    return await handler(request)
