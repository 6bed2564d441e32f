"""The web UI of a REAL daemon subprocess, driven in real headless Chromium (Debian's chromium and
chromium-driver, through selenium; nothing downloaded): sign-in through a one-time link, asking
with streamed answers whose [N] pills open a PDF at its page and a markdown file with the cited
sentence marked, search with filters, uploads that become searchable, history, and the checks
that keep other sites out (foreign Origin, single-use codes, an HttpOnly SameSite=Strict cookie
page scripts cannot read). Screenshots go to the test's tmp dir (``--basetemp``)."""

from __future__ import annotations

import http.server
import os
import re
import subprocess
import sys
import threading
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import requests

from tests.data.make_fixtures import _pdf_text
from tests.fakes.llm_server import API_KEY, FakeLLMServer
from tests.system.conftest import ROOT, Daemon, free_port, serving, wait_indexed, wait_until
from tests.system.test_openai_compat import PDF_PAGES, reply  # noqa: E402 - the same PDF and scripted LLM
from tests.tools import require_tool

CHROMEDRIVER = "/usr/bin/chromedriver"
SOURDOUGH = ("# Sourdough\n\nA starter is flour and water left to ferment.\n\n"
             "Feed the starter once a day with equal weights of flour and water.\n\n"
             "Bake when the starter doubles within six hours.\n")


def _selenium():
    try:
        import selenium  # noqa: F401
    except ImportError:
        if os.environ.get("RAGWEED_REQUIRE_TOOLS") == "1":
            pytest.fail("the selenium package is not installed (pip install '.[test]') (RAGWEED_REQUIRE_TOOLS=1)")
        pytest.skip("the selenium package is not installed")


@pytest.fixture(scope="module")
def d(tmp_path_factory):
    base = tmp_path_factory.mktemp("web")
    notes, pets = base / "notes", base / "pets"
    notes.mkdir()
    pets.mkdir()
    (notes / "sourdough.md").write_text(SOURDOUGH)
    _pdf_text(pets / "animals.pdf", PDF_PAGES)
    (pets / "torn.pdf").write_bytes(b"%PDF-1.4 the rest is missing\n")  # fails: its error is shown
    with serving(Daemon(base / "d", {"notes": [notes], "pets": [pets]})) as dm:
        wait_indexed(dm, "notes", 1)
        wait_indexed(dm, "pets", 1)
        dm.wait_idle()
        dm.notes, dm.pets, dm.shots = notes, pets, base / "screenshots"
        dm.shots.mkdir()
        yield dm


def web_reply(provider, messages):
    """The cited reply, plus, when asked how loud, a second claim its source does not hold; tree
    mode's section pick is the first section."""
    if messages[-1]["content"].startswith("You choose which sections"):
        return '{"sections": ["%s"]}' % re.search(r"\[(D\d+\.\d+)\]", messages[-1]["content"]).group(1)
    text = reply(provider, messages)
    cited = re.search(r"\[(\d+)\]", text)
    if cited and "how loud" in messages[-1]["content"]:
        text += f" A purring cat reaches 95 decibels [{cited.group(1)}]."
    if cited and "how old" in messages[-1]["content"]:
        text += " Cats were first kept in ancient Egypt [99]."
    return text


@pytest.fixture(scope="module")
def d_llm(tmp_path_factory):
    """A daemon whose synthesis LLM is the local wire-protocol server, streaming its cited reply in
    4-character pieces."""
    base = tmp_path_factory.mktemp("web-llm")
    (base / "pets").mkdir()
    _pdf_text(base / "pets" / "animals.pdf", PDF_PAGES)
    with FakeLLMServer(models=("test-model",), reply=web_reply, piece_chars=4) as llm:
        extra = "\n".join(["[llm]", 'synthesis = "openai:test-model"', f'openai_base_url = "{llm.url}/v1"',
                           f'openai_api_key = "{API_KEY}"', "max_retries = 0", "timeout_s = 20"])
        with serving(Daemon(base / "d", {"pets": [base / "pets"]}, extra=extra)) as dm:
            wait_indexed(dm, "pets", 1)
            dm.wait_idle()
            dm.shots = base / "screenshots"
            dm.shots.mkdir()
            yield dm


@pytest.fixture(scope="module")
def browser():
    require_tool("chromium")
    require_tool("chromedriver")
    _selenium()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = require_tool("chromium")
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,900",
                "--disable-gpu", "--no-first-run"):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # the console, for CSP reports
    drv = webdriver.Chrome(service=Service(require_tool("chromedriver") or CHROMEDRIVER), options=opts)
    drv.set_page_load_timeout(30)
    try:
        yield drv
    finally:
        drv.quit()


def login_url(d: Daemon) -> str:
    r = d.api("POST", "/v1/login-codes")
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["url"] == f"http://127.0.0.1:{d.port}/login#code={body['code']}" and body["expires_in_s"] == 60
    return body["url"]


def sign_in(drv, d: Daemon, url: str | None = None) -> None:
    """Open a sign-in link and wait until its page has swapped the code for a session and gone on to /."""
    drv.get(url or login_url(d))
    wait_until(lambda: drv.current_url == f"http://127.0.0.1:{d.port}/", 15, what="the redirect to /")
    assert drv.execute_script("return sessionStorage.getItem('ragweedd_key')")


def new_browser(width: int = 1000, height: int = 500):
    """A second Chromium with its own profile: no cookie, no session."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", f"--window-size={width},{height}"):
        opts.add_argument(arg)
    drv = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    drv.set_page_load_timeout(30)
    return drv


def ragweedctl(d: Daemon, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ragweedd.cli.ctl", "--state-dir", str(d.base / "state"), *args],
                          capture_output=True, text=True, timeout=60, cwd=str(ROOT), env={**os.environ, **(env or {})})


@pytest.fixture(scope="module")
def ui(d, browser):
    """The browser signed in to the daemon's UI through the link `ragweedctl open --print-only` prints."""
    p = ragweedctl(d, "open", "--print-only")
    assert p.returncode == 0, p.stderr
    url = p.stdout.splitlines()[0]
    assert url.startswith(f"http://127.0.0.1:{d.port}/login#code="), p.stdout
    sign_in(browser, d, url)
    browser.used_url = None
    return browser


def shot(d: Daemon, drv, name: str) -> Path:
    p = d.shots / f"{name}.png"
    drv.save_screenshot(str(p))
    return p


def by_css(drv, css: str):
    from selenium.webdriver.common.by import By

    return drv.find_elements(By.CSS_SELECTOR, css)


def texts(drv, css: str) -> list[str]:
    """The shown text of every element matching ``css``, read in one go (the page re-renders its
    tables while it loads: element handles kept across calls go stale)."""
    return drv.execute_script("return [...document.querySelectorAll(arguments[0])].map(e => e.innerText)", css)


def wait_css(drv, css: str, timeout: float = 30, what: str | None = None):
    from selenium.common.exceptions import StaleElementReferenceException

    def shown():
        try:
            return [e for e in by_css(drv, css) if e.is_displayed()]
        except StaleElementReferenceException:  # the page re-rendered meanwhile: look again
            return []
    return wait_until(shown, timeout, 0.1, what or css)


def go(drv, d: Daemon, tab: str) -> None:
    url = f"http://127.0.0.1:{d.port}/#{tab}"
    if drv.current_url == url:  # the same hash again is no navigation: load the tab afresh
        drv.refresh()
    else:
        drv.get(url)
    wait_css(drv, f"#tab-{tab}")


def ask(drv, d: Daemon, question: str) -> None:
    go(drv, d, "ask")
    box = by_css(drv, "#ask-query")[0]
    box.clear()
    box.send_keys(question)
    by_css(drv, "#ask-go")[0].click()
    wait_css(drv, "#ask-out h3", what="the finished answer")


def pill_for(drv, filename: str):
    def ready():
        pills = [p for p in by_css(drv, "#ask-out a.pill") if filename in (p.get_attribute("title") or "")]
        return [p for p in pills if "pending" not in (p.get_attribute("class") or "")]
    return wait_until(ready, 15, 0.1, f"a resolved pill for {filename}")[0]


# --------------------------------------------------------------------------- sign-in
def test_sign_in_cookie_is_httponly_strict_and_invisible_to_scripts(d, ui):
    cookies = {c["name"]: c for c in ui.get_cookies()}
    c = cookies[f"ragweedd_session_{d.port}"]
    assert c["httpOnly"] is True and c["sameSite"] == "Strict" and c["path"] == "/", c
    token = (d.base / "state" / "token").read_text().strip()
    assert c["value"] != token
    assert "ragweedd_session" not in ui.execute_script("return document.cookie")
    assert token not in ui.page_source
    # the page reads the API with the cookie: the collections fill the select boxes
    wait_until(lambda: len(by_css(ui, "#ask-collection option")) == 3, 10, what="collections in the select")
    assert by_css(ui, "#signin")[0].is_displayed() is False
    shot(d, ui, "ask-empty")


def test_a_login_code_works_once(d, browser):
    url = login_url(d)
    code = url.split("#code=", 1)[1]
    r = requests.post(f"http://127.0.0.1:{d.port}/login", json={"code": code}, timeout=10)
    assert r.status_code == 200 and "HttpOnly" in r.headers["Set-Cookie"]
    r = requests.post(f"http://127.0.0.1:{d.port}/login", json={"code": code}, timeout=10)
    assert r.status_code == 403 and "Set-Cookie" not in r.headers and "ragweedctl open" in r.json()["error"]["hint"]
    browser.get(url)  # the browser sees a clear page: the sign-in page's script says why
    wait_until(lambda: "This sign-in link does not work" in by_css(browser, "h1")[0].text, 10, what="the refusal")
    text = by_css(browser, "main")[0].text
    assert "already used" in text and "ragweedctl open" in text, text
    assert browser.current_url == f"http://127.0.0.1:{d.port}/login"  # the code left the address bar
    shot(d, browser, "used-code")
    browser.get(f"http://127.0.0.1:{d.port}/login")
    wait_until(lambda: "No sign-in code" in by_css(browser, "h1")[0].text, 10, what="the missing code said")


def _argv_holding(needle: bytes) -> list[str]:
    """The processes on this machine whose command line holds ``needle``."""
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if needle in (proc / "cmdline").read_bytes():
                found.append(proc.name)
        except OSError:  # gone meanwhile, or not ours to read
            pass
    return found


def test_ragweedctl_open_keeps_the_code_off_every_command_line(d, tmp_path):
    """Without --print-only, the browser is started (here a BROWSER command that records its
    arguments) with the file:// address of a 0600 page in the state directory, never with the code:
    any local user can read a command line. Real Chromium, given that address, ends signed in."""
    seen = tmp_path / "argv.txt"
    fake = tmp_path / "fake-browser"
    fake.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > {seen}.tmp && mv {seen}.tmp {seen}\n')
    fake.chmod(0o755)
    p = ragweedctl(d, "open", env={"BROWSER": f"{fake} %s", "DISPLAY": ""})
    assert p.returncode == 0, p.stderr
    url = p.stdout.splitlines()[0]
    code = url.split("#code=", 1)[1]
    wait_until(seen.exists, 10, what="the browser command")
    args = seen.read_text().splitlines()
    page = d.base / "state" / "open.html"
    assert args == [page.as_uri()], args
    assert code not in seen.read_text() and not _argv_holding(code.encode())
    assert os.stat(page).st_mode & 0o777 == 0o600 and url in page.read_text()
    token = (d.base / "state" / "token").read_text().strip()
    assert token not in url and token not in p.stdout and token not in page.read_text()
    drv = new_browser()
    try:
        drv.get(args[0])  # what a browser started with that argument opens
        wait_until(lambda: drv.current_url == f"http://127.0.0.1:{d.port}/", 15, what="the redirect to /")
        wait_until(lambda: len(by_css(drv, "#ask-collection option")) == 3, 10, what="collections in the select")
        assert not by_css(drv, "#signin")[0].is_displayed()
        assert not _argv_holding(code.encode())  # the browser's processes included
        shot(d, drv, "signed-in-from-file")
    finally:
        drv.quit()
    r = requests.post(f"http://127.0.0.1:{d.port}/login", json={"code": code}, timeout=10)
    assert r.status_code == 403  # used up by the browser
    # no daemon: the usual "not running" error, exit 3
    p = subprocess.run([sys.executable, "-m", "ragweedd.cli.ctl", "--state-dir", str(tmp_path / "none"), "open"],
                       capture_output=True, text=True, timeout=60, cwd=str(ROOT))
    assert p.returncode == 3 and "not running" in p.stderr, p.stderr


def test_without_a_session_the_page_says_how_to_sign_in(d, ui, tmp_path):
    other = new_browser()
    try:
        other.get(f"http://127.0.0.1:{d.port}/")
        wait_css(other, "#signin", 10, "the sign-in banner")
        assert "ragweedctl open" in by_css(other, "#signin")[0].text
        shot(d, other, "signed-out")
    finally:
        other.quit()


# --------------------------------------------------------------------------- ask
def test_ask_streams_and_the_pdf_pill_opens_the_cited_page(d, ui):
    ask(ui, d, "do cats purr?")
    pill = pill_for(ui, "animals.pdf")
    href = pill.get_attribute("href")
    assert "/v1/files/" in href and href.endswith("#page=2"), href
    shot(d, ui, "ask-answer")
    before = set(ui.window_handles)
    pill.click()
    new = wait_until(lambda: set(ui.window_handles) - before, 10, what="the PDF tab")
    main = ui.current_window_handle
    ui.switch_to.window(new.pop())
    try:
        wait_until(lambda: ui.current_url.endswith("#page=2"), 10, what="the PDF URL")
        assert ui.current_url.startswith(f"http://127.0.0.1:{d.port}/v1/files/")
    finally:
        ui.close()
        ui.switch_to.window(main)
    # what that URL serves the page's session is the PDF itself; its ticket (?t=) opens that file
    # only, and only with the session's cookie
    parts = urlsplit(href)
    assert parts.query.startswith("t="), href
    status, ctype, head = ui.execute_async_script(
        "const done = arguments[1]; fetch(arguments[0]).then(async r => done([r.status, "
        "r.headers.get('content-type'), (await r.text()).slice(0, 5)]))", f"{parts.path}?{parts.query}")
    assert (status, ctype, head) == (200, "application/pdf", "%PDF-")
    assert requests.get(f"http://127.0.0.1:{d.port}{parts.path}?{parts.query}", timeout=10).status_code == 401


def test_an_llm_answer_streams_in_with_its_pill(d_llm, browser):
    sign_in(browser, d_llm)
    ask_box = wait_css(browser, "#ask-query", 10)[0]
    # every version of the answer the page shows while it is written (each render adds a new node)
    browser.execute_script(
        "window.seen = []; new MutationObserver(recs => { for (const r of recs) for (const n of r.addedNodes) "
        "if (n.classList && n.classList.contains('answer-text') && n.closest('.streaming')) "
        "window.seen.push(n.textContent); }).observe(document.getElementById('ask-out'), "
        "{childList: true, subtree: true});")
    ask_box.send_keys("do cats purr?")
    by_css(browser, "#ask-go")[0].click()
    wait_css(browser, "#ask-out h3", 30, "the finished answer")
    text = by_css(browser, "#ask-out .answer-text")[0].text
    assert text.startswith("Cats purr when they are content"), text
    seen = [t for t in browser.execute_script("return window.seen") if t]
    # the reply arrives in 4-character pieces: the page showed it growing, piece by piece
    assert len(seen) >= 5 and seen[0] == "Cats" and all(len(a) < len(b) for a, b in zip(seen, seen[1:])), seen
    pill = pill_for(browser, "animals.pdf")
    assert pill.get_attribute("href").endswith("#page=2") and pill.text.isdigit()
    assert "written by" in by_css(browser, "#ask-out .answer")[0].text
    shot(d_llm, browser, "ask-llm")


def test_a_claim_its_source_does_not_hold_is_marked(d_llm, browser):
    sign_in(browser, d_llm)
    wait_css(browser, "#ask-query", 10)[0].send_keys("do cats purr, and how loud?")
    by_css(browser, "#ask-go")[0].click()
    wait_css(browser, "#ask-out h3", 30, "the finished answer")
    pills = by_css(browser, "#ask-out .answer-text a.pill")
    assert len(pills) == 2, [p.text for p in pills]
    good, bad = pills
    # the same source cited twice: the purring sentence holds, the decibels are nowhere in it
    assert "unsupported" not in good.get_attribute("class") and good.text.isdigit()
    assert "unsupported" in bad.get_attribute("class") and bad.text == good.text + "?"
    assert "lacks 95, decibels" in bad.get_attribute("title")  # the claim's words, not stems
    listed = by_css(browser, "#ask-out .unsupported-list")[0].text
    assert "1 claim not supported" in listed and "95 decibels" in listed
    shot(d_llm, browser, "ask-unsupported")


def test_a_citation_of_a_source_that_does_not_exist_is_marked(d_llm, browser):
    sign_in(browser, d_llm)
    wait_css(browser, "#ask-query", 10)[0].send_keys("do cats purr, and how old is the habit?")
    by_css(browser, "#ask-go")[0].click()
    wait_css(browser, "#ask-out h3", 30, "the finished answer")
    ghost = by_css(browser, "#ask-out .answer-text .no-source")
    assert [g.text for g in ghost] == ["[99]"] and "no such source" in ghost[0].get_attribute("title")
    listed = by_css(browser, "#ask-out .unsupported-list")[0].text
    assert "ancient Egypt" in listed and "there is no source 99" in listed, listed
    shot(d_llm, browser, "ask-no-source")


def test_tree_mode_is_a_choice_and_its_steps_show_under_the_answer_and_in_history(d_llm, browser):
    from selenium.webdriver.support.ui import Select

    sign_in(browser, d_llm)
    wait_css(browser, "#ask-query", 10)[0].send_keys("do cats purr?")
    Select(by_css(browser, "#ask-mode")[0]).select_by_visible_text("Tree")
    by_css(browser, "#ask-go")[0].click()
    wait_css(browser, "#ask-out h3", 30, "the finished answer")
    tree = wait_css(browser, "#ask-out .tree", 5, "the tree steps")[0].text
    assert tree.startswith("Tree mode: 1 of 1 documents chosen") and "sections opened:" in tree, tree
    assert re.search(r"D1\.1 .*\(pp?\. \d", tree), tree
    assert pill_for(browser, "animals.pdf").get_attribute("href").endswith("#page=2")
    shot(d_llm, browser, "ask-tree")
    # the answer really was a tree answer (the steps were not drawn from some other record)
    newest = d_llm.api("GET", "/v1/history?limit=1").json()["items"][0]
    entry = d_llm.api("GET", f"/v1/history/{newest['id']}").json()
    assert entry["tree"]["sections"][0]["id"] == "D1.1" and entry["query"] == "do cats purr?"
    # reopened from History, the answer shows the same steps
    go(browser, d_llm, "history")
    wait_css(browser, "#history-list a", 10)[0].click()
    again = wait_css(browser, "#history-out .tree", 10, "the tree steps in history")[0].text
    assert again == tree
    shot(d_llm, browser, "history-tree")


def test_the_markdown_pill_marks_the_cited_sentence(d, ui):
    ask(ui, d, "how often should I feed the sourdough starter?")
    pill = pill_for(ui, "sourdough.md")
    assert "#view/" in pill.get_attribute("href")
    pill.click()
    mark = wait_css(ui, "#view-text mark", 10, "the highlighted span")[0]
    assert "Feed the starter once a day" in mark.text, mark.text
    assert "sourdough.md" in by_css(ui, "#view-title")[0].text
    # the marked text is exactly where the file has it: the text around it is the file's
    whole = by_css(ui, "#view-text")[0].text
    assert whole.index(mark.text) == SOURDOUGH.index(mark.text) - (len(SOURDOUGH) - len(SOURDOUGH.lstrip()))
    shot(d, ui, "text-view")


def test_the_page_breaks_none_of_its_own_rules(d, ui):
    """The page's Content-Security-Policy allows only its own script, style and requests: the
    console has no report of the UI doing anything else (inline styles included), after the tabs
    were each shown."""
    for tab in ("documents", "search", "history", "ask"):
        go(ui, d, tab)
    wait_until(lambda: by_css(ui, "#ingest .bar span"), 10, what="the progress bar")
    width = ui.execute_script("return document.querySelector('#ingest .bar span').style.width")
    assert width == "100%", width  # idle: everything done (set through the CSSOM, which CSP allows)
    logs = [e["message"] for e in ui.get_log("browser")]
    assert not [m for m in logs if "Content Security Policy" in m or "Uncaught" in m], logs
    # nothing the page asks for is missing: no favicon.ico 404 on every load
    assert not [m for m in logs if "404" in m or "favicon" in m], logs
    r = requests.get(f"http://127.0.0.1:{d.port}/ui/favicon.svg", timeout=10)
    assert r.status_code == 200 and r.headers["Content-Type"] == "image/svg+xml" and b"<svg" in r.content


def test_an_error_shows_its_message_alone_and_the_answer_box_says_why(d, ui):
    go(ui, d, "ask")
    ui.execute_script("document.getElementById('ask-query').value = 'x'.repeat(8001)")
    by_css(ui, "#ask-go")[0].click()
    box = wait_css(ui, "#error", 10, "the error box")[0]
    assert "longer than 8000" in box.text and "null" not in box.text, box.text
    out = wait_until(lambda: [t for t in texts(ui, "#ask-out") if "No answer" in t], 10, what="the ask box's verdict")
    assert "searching" not in out[0] and "longer than 8000" in out[0], out
    shot(d, ui, "ask-error")
    ui.execute_script("document.querySelector('#error button.close').click()")


# --------------------------------------------------------------------------- search, upload, documents
def run_search(drv, d: Daemon, query: str, file_type: str = "", collection: str = "") -> list:
    from selenium.webdriver.support.ui import Select

    go(drv, d, "search")
    drv.execute_script("document.getElementById('search-out').replaceChildren()")
    for css, value in (("#search-query", query), ("#search-type", file_type)):
        box = by_css(drv, css)[0]
        box.clear()
        box.send_keys(value)
    Select(by_css(drv, "#search-collection")[0]).select_by_value(collection)
    by_css(drv, "#search-go")[0].click()
    return wait_css(drv, "#search-out li, #search-out p", 15, "search results")


def test_search_filters_by_type_and_collection(d, ui):
    both = [h.text for h in run_search(ui, d, "starter cats")]
    assert any("sourdough.md" in t for t in both) and any("animals.pdf" in t for t in both), both
    only_notes = [h.text for h in run_search(ui, d, "starter cats", collection="notes")]
    assert only_notes and all("notes/" in t for t in only_notes), only_notes
    hits = run_search(ui, d, "starter cats", file_type="pdf")
    assert hits and all("animals.pdf" in h.text for h in hits), [h.text for h in hits]
    shot(d, ui, "search")


def test_upload_in_the_ui_becomes_searchable(d, ui, tmp_path):
    f = tmp_path / "kettle.txt"
    f.write_text("The kettle whistles loudly once the water reaches a rolling boil.\n")
    go(ui, d, "documents")
    wait_until(lambda: len(by_css(ui, "#upload-collection option")) == 2, 10, what="collections to upload into")
    from selenium.webdriver.support.ui import Select

    Select(by_css(ui, "#upload-collection")[0]).select_by_value("notes")
    by_css(ui, "#upload-file")[0].send_keys(str(f))
    by_css(ui, "#upload-go")[0].click()
    wait_until(lambda: "uploaded kettle.txt" in by_css(ui, "#upload-msg")[0].text, 15, what="the upload message")
    wait_until(lambda: any(h["filename"] == "kettle.txt" for h in d.search("kettle whistles")), 60, 0.3,
               what="the uploaded file in search results")
    hits = run_search(ui, d, "kettle whistles")
    assert "kettle.txt" in hits[0].text
    go(ui, d, "documents")
    wait_until(lambda: any("kettle.txt" in r and "indexed" in r for r in texts(ui, "#documents tbody tr")), 15,
               what="kettle.txt indexed in the documents table")
    rows = texts(ui, "#collections tbody tr")
    assert any("notes" in r and "ok" in r for r in rows), rows
    torn = next(r for r in texts(ui, "#documents tbody tr") if "torn.pdf" in r)
    assert "failed" in torn and "not a readable PDF" in torn, torn
    assert re.match(r"(Idle|Indexing|Embedding)\b", by_css(ui, "#ingest")[0].text), by_css(ui, "#ingest")[0].text
    shot(d, ui, "documents")


def test_same_named_files_in_two_subfolders_are_told_apart(d, ui, tmp_path):
    twins = tmp_path / "twins"
    for sub in ("big", "small"):
        (twins / sub).mkdir(parents=True)
        (twins / sub / "n45.md").write_text(f"# Note\n\nThe {sub} heron wades in the reed marsh at dawn.\n")
    assert d.api("POST", "/v1/collections", json={"name": "twins", "paths": [str(twins)]}).status_code == 200
    try:
        wait_indexed(d, "twins", 2)
        go(ui, d, "documents")  # reads the collections again: the select boxes offer twins
        wait_until(lambda: by_css(ui, "#search-collection option[value=twins]"), 10, what="twins to search in")
        labels = [h.text for h in run_search(ui, d, "heron wades reed marsh", collection="twins")]
        assert any("twins/big/n45.md" in t for t in labels) and any("twins/small/n45.md" in t for t in labels), labels
        shot(d, ui, "search-subfolders")
    finally:
        assert d.api("DELETE", "/v1/collections/twins").status_code == 200


def test_an_upload_of_a_type_never_indexed_is_refused_in_the_ui(d, ui, tmp_path):
    f = tmp_path / "tool.exe"
    f.write_bytes(b"MZ not a document")
    go(ui, d, "documents")
    wait_until(lambda: len(by_css(ui, "#upload-collection option")) >= 2, 10, what="collections to upload into")
    from selenium.webdriver.support.ui import Select

    Select(by_css(ui, "#upload-collection")[0]).select_by_value("notes")
    by_css(ui, "#upload-file")[0].send_keys(str(f))
    by_css(ui, "#upload-go")[0].click()
    box = wait_css(ui, "#error", 10, "the error box")[0]
    # the error box is at the top of the page, scrolled to from the upload form below
    assert ui.execute_script("return window.scrollY") == 0
    assert "'.exe'" in box.text and "does not index" in box.text and "docs/formats.md" in box.text, box.text
    assert "null" not in box.text
    shot(d, ui, "upload-refused")
    ui.execute_script("document.querySelector('#error button.close').click()")


def test_the_documents_page_counts_an_upload_without_reopening(d, ui, tmp_path):
    f = tmp_path / "bell.txt"
    f.write_text("The brass bell rings thrice at noon over the harbour.\n")
    go(ui, d, "documents")
    wait_until(lambda: [r for r in texts(ui, "#collections tbody tr") if r.startswith("notes")], 10,
               what="the notes row")
    before = d.api("GET", "/v1/collections").json()["items"]
    notes = next(c for c in before if c["name"] == "notes")["documents"]
    from selenium.webdriver.support.ui import Select

    Select(by_css(ui, "#upload-collection")[0]).select_by_value("notes")
    by_css(ui, "#upload-file")[0].send_keys(str(f))
    by_css(ui, "#upload-go")[0].click()

    def counted():
        row = [r for r in texts(ui, "#collections tbody tr") if r.startswith("notes")]
        return row and f"\t{notes + 1}\t" in row[0]
    wait_until(counted, 30, 0.2, what=f"the notes row counting {notes + 1} documents (no reopening)")
    wait_until(lambda: any("bell.txt" in r and "indexed" in r for r in texts(ui, "#documents tbody tr")), 15,
               what="bell.txt indexed in the documents table")


def test_forget_a_collection(d, ui, tmp_path):
    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "x.txt").write_text("an extra note\n")
    assert d.api("POST", "/v1/collections", json={"name": "extra", "paths": [str(extra)]}).status_code == 200
    go(ui, d, "documents")
    wait_until(lambda: [r for r in texts(ui, "#collections tbody tr") if r.startswith("extra")], 10,
               what="the extra collection")
    # clicked from a timer: the confirm() it opens must not block this script
    ui.execute_script("const row = [...document.querySelectorAll('#collections tbody tr')]"
                      ".find(r => r.innerText.startsWith('extra')); "
                      "setTimeout(() => row.querySelector('button.danger').click(), 0);")
    from selenium.common.exceptions import NoAlertPresentException

    def alert_open():
        try:
            return ui.switch_to.alert
        except NoAlertPresentException:
            return None
    alert = wait_until(alert_open, 10, what="the confirmation")
    assert "extra" in alert.text and "files stay" in alert.text
    alert.accept()
    wait_until(lambda: not [r for r in texts(ui, "#collections tbody tr") if r.startswith("extra")], 10,
               what="the collection gone from the table")
    assert [c["name"] for c in d.api("GET", "/v1/collections").json()["items"]] == ["notes", "pets"]
    assert (extra / "x.txt").exists()


def test_history_reopens_an_answer_in_full(d, ui):
    # its own entry: the test does not lean on another test's ask having run before it
    r = d.api("POST", "/v1/ask", json={"query": "do cats purr?"})
    assert r.status_code == 200, r.text
    go(ui, d, "history")
    entry = wait_until(lambda: next((e for e in wait_css(ui, "#history-list li", 10, "history entries")
                                     if "do cats purr?" in e.text), None), 20, what="the asked question in history")
    assert entry.find_element("css selector", "span.kind").text == "ask"
    # the underlined link is the query alone: no badge and no leading space inside it
    target = entry.find_element("css selector", "a")
    assert target.get_attribute("textContent") == "do cats purr?"
    target.click()
    wait_css(ui, "#history-out .answer", 10, "the reopened answer")
    assert by_css(ui, "#history-out h2")[0].text == "do cats purr?"
    wait_until(lambda: [p for p in by_css(ui, "#history-out a.pill")
                        if (p.get_attribute("href") or "").endswith("#page=2")], 10, what="the PDF pill")
    shot(d, ui, "history")


# --------------------------------------------------------------------------- other sites
class _EvilPage(http.server.BaseHTTPRequestHandler):
    """Another local server (a dev server, a hostile package's listener): it keeps every Cookie
    header the browser sends it, and its page tries to use the daemon from the browser."""
    target = ""
    cookies: list[str] = []

    def do_GET(self):  # noqa: N802 - http.server's name
        _EvilPage.cookies.extend(self.headers.get_all("Cookie") or [])
        page = ("<!doctype html><title>evil</title><script>"
                f"fetch('{self.target}/v1/collections/notes/documents?filename=evil.txt', {{method: 'POST', "
                "mode: 'no-cors', credentials: 'include', body: 'planted'}).then(() => document.title = 'sent', "
                "() => document.title = 'failed');</script>")
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.end_headers()
        self.wfile.write(page.encode())

    def log_message(self, *a):
        pass


def test_another_local_server_gets_the_cookie_and_can_do_nothing_with_it(d, ui, tmp_path):
    """Browsers do not keep cookies apart by port: a page on another port of 127.0.0.1 is the same
    *site*, so SameSite=Strict lets the browser send it the session cookie. Its own script's POST is
    refused by the Origin check; the cookie it captured, replayed from outside the browser with
    whatever headers it likes, reads and writes nothing: the session's key never left the page."""
    port = free_port()
    _EvilPage.target = f"http://127.0.0.1:{d.port}"
    _EvilPage.cookies = []
    # threaded: Chromium opens a spare connection it may never send on, which would hold a
    # one-at-a-time server (and its shutdown) until the browser drops it a minute later
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", port), _EvilPage)
    srv.daemon_threads = True
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        ui.get(f"http://127.0.0.1:{port}/")
        wait_until(lambda: ui.title in ("sent", "failed"), 10, what="the cross-origin fetch")
        # nor can its page read the key: sessionStorage is kept per origin, port included
        assert ui.execute_script("return sessionStorage.getItem('ragweedd_key')") is None
    finally:
        srv.shutdown()
    refused = wait_until(lambda: [e for e in d.events("api_request") if e.get("path") ==
                                  "/v1/collections/notes/documents" and e.get("status") == 403], 10,
                         what="the refused upload in the daemon log")
    assert refused
    assert not any(p.name == "evil.txt" for p in (d.base / "data").rglob("evil.txt"))
    # the server did receive the live session cookie ...
    name = f"ragweedd_session_{d.port}"
    stolen = dict(c.split("=", 1) for header in _EvilPage.cookies for c in header.split("; "))
    assert name in stolen, _EvilPage.cookies
    assert stolen[name] == next(c["value"] for c in ui.get_cookies() if c["name"] == name)
    cookie = {name: stolen[name]}
    base = f"http://127.0.0.1:{d.port}"
    forged = {"Origin": base, "Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": "cors", "Referer": base + "/"}
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("the neighbour's diary names the heron\n")
    # ... and with it, with or without forged browser headers, reads and writes nothing
    for headers in ({}, forged):
        for method, path, body in (("GET", "/v1/status", None), ("GET", "/v1/documents", None),
                                   ("POST", "/v1/collections", {"name": "stolen", "roots": [str(outside)]}),
                                   ("POST", "/v1/search", {"query": "heron diary"})):
            r = requests.request(method, base + path, json=body, cookies=cookie, headers=headers, timeout=10)
            assert r.status_code == 401, (method, path, headers, r.text)
            assert "cookie alone" in r.json()["error"]["message"]
    assert "stolen" not in [c["name"] for c in d.api("GET", "/v1/collections").json()["items"]]
    # while the page, in the browser, goes on working with the same cookie and its key
    go(ui, d, "documents")
    wait_until(lambda: [t for t in texts(ui, "#documents") if "sourdough.md" in t], 15, what="the documents table")
    assert not by_css(ui, "#signin")[0].is_displayed()
    key = ui.execute_script("return sessionStorage.getItem('ragweedd_key')")
    assert requests.get(base + "/v1/status", cookies=cookie, headers={"X-Ragweedd-Key": key},
                        timeout=10).status_code == 200
    r = requests.post(base + "/v1/search", json={"query": "cats"}, cookies=cookie, timeout=10,
                      headers={"X-Ragweedd-Key": key})  # a write also needs Origin or Sec-Fetch-Site
    assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden_origin"
    # the session cannot mint itself more login codes
    r = requests.post(f"http://127.0.0.1:{d.port}/v1/login-codes", cookies=cookie, timeout=10,
                      headers={"Origin": f"http://127.0.0.1:{d.port}", "X-Ragweedd-Key": key})
    assert r.status_code == 403 and r.json()["error"]["code"] == "token_required"
    # a rebinding Host is refused before anything, the UI's pages too
    r = requests.get(f"http://127.0.0.1:{d.port}/", headers={"Host": f"evil.com:{d.port}"}, timeout=10)
    assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden_host"
