"""``ragweedctl open``: sign a browser in to the web UI with a one-time link.

ragweedctl holds the token; the browser must not. So this command asks the daemon, over the
token-authenticated API, for a login code that works once and only for a minute
(``POST /v1/login-codes``). A browser's command line can be read by every local user
(``/proc/PID/cmdline``), so the link is not put there: the command writes a small page, readable
by its owner only, into the state directory (``open.html``) that sends the browser on to
``http://HOST:PORT/login#code=...``, and hands the browser that file's ``file://`` address. The
daemon's sign-in page reads the code from the fragment and posts it from its own origin
(docs/web.md). The link is printed too, for a browser the command cannot start (stdout is not on
any command line). ``webbrowser`` is imported only here: ragweedctl's start-up stays light.
"""

from __future__ import annotations

import html
import json  # ragweedctl has imported it already
import os

from ragweedd.cli.ctl_http import bad_reply

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: ragweedctl starts without importing typing
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable

    from ragweedd.cli.ctl_http import Client
    from ragweedd.cli.ctl_text import Writer

SIGN_IN_FILE = "open.html"


def add_open_parser(add: Callable[..., argparse.ArgumentParser]) -> None:
    s = add("open", "open the web UI in the browser, signed in through a one-time link",
            epilog="The link never goes on the browser's command line (any local user can read that):\n"
                   "the browser is given a page, readable by you only, in the state directory\n"
                   "(open.html) that sends it on. The link is printed too; it works once, within a minute.")
    s.add_argument("--print-only", action="store_true",
                   help="print the sign-in link (valid once, for 60 s) instead of opening a browser")


def write_sign_in_page(state_dir: str, url: str) -> str:
    """The path of a page, mode 0600, that sends a browser to ``url``; it replaces the previous one
    (whose code is used or expired by then). Written under a new name and renamed into place, so a
    file or link planted at the final name is never written through."""
    page = ("<!doctype html><html lang=en><head><meta charset=utf-8><meta name=referrer content=no-referrer>"
            f'<meta http-equiv=refresh content="0;url={html.escape(url)}"><title>ragweedd: signing in</title>'
            f'</head><body><p>Signing in to ragweedd… <a href="{html.escape(url)}">continue</a></p></body></html>\n')
    final = os.path.join(state_dir, SIGN_IN_FILE)
    tmp = f"{final}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(page)
        os.replace(tmp, final)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return final


def cmd_open(c: Client, a: argparse.Namespace, out: Writer) -> int:
    res = c.call("POST", "/v1/login-codes")
    if a.json:
        out.write(json.dumps(res, indent=2) + "\n")
        return 0
    url = res["url"]
    if not isinstance(url, str) or not url.startswith("http://"):
        raise bad_reply(f"the login URL is not an http:// URL: {str(url)[:80]!r}")
    out.write(f"{url}\n")
    if a.print_only:
        out.write("(the link works once, within the next minute)\n")
        return 0
    import pathlib
    import webbrowser

    try:
        page = write_sign_in_page(c.state_dir, url)
    except OSError as e:
        out.write(f"could not write the sign-in page into {c.state_dir} ({e.strerror}): open the link above "
                  "yourself (it works once, within a minute)\n")
        return 0
    try:
        opened = webbrowser.open(pathlib.Path(page).as_uri())
    except Exception:  # noqa: BLE001 - a broken browser setup is not an error of ours: the URL is printed
        opened = False
    if not opened:
        out.write("no browser could be started: open the link above yourself (it works once, within a minute)\n")
    return 0
