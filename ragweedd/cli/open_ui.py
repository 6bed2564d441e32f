"""``ragweedctl open``: sign a browser in to the web UI with a one-time link.

ragweedctl holds the token; the browser must not. So this command asks the daemon, over the
token-authenticated API, for a login code that works once and only for a minute
(``POST /v1/login-codes``), and opens ``http://HOST:PORT/login?code=...``; that page sets the
session cookie (docs/web.md). The URL is printed too, for a browser on the same machine that the
command cannot start. ``webbrowser`` is imported only here: ragweedctl's start-up stays light.
"""

from __future__ import annotations

import json  # ragweedctl has imported it already


def add_open_parser(add) -> None:
    s = add("open", "open the web UI in the browser, signed in through a one-time link")
    s.add_argument("--print-only", action="store_true",
                   help="print the sign-in link (valid once, for 60 s) instead of opening a browser")


def cmd_open(c, a, out) -> int:
    res = c.call("POST", "/v1/login-codes")
    if a.json:
        out.write(json.dumps(res, indent=2) + "\n")
        return 0
    url = res["url"]
    if not isinstance(url, str) or not url.startswith("http://"):
        raise ValueError("the login URL is not an http:// URL")
    out.write(f"{url}\n")
    if a.print_only:
        out.write("(the link works once, within the next minute)\n")
        return 0
    import webbrowser

    try:
        opened = webbrowser.open(url)
    except Exception:  # noqa: BLE001 - a broken browser setup is not an error of ours: the URL is printed
        opened = False
    if not opened:
        out.write("no browser could be started: open the link above yourself (it works once, within a minute)\n")
    return 0
