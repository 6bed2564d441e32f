"""The web UI as a reader sees it, in real headless Chromium against a real daemon subprocess (the
set-up of test_web_ui.py): no stray "null" or "undefined" in an answer, quoted passages as
blockquotes, vectors still being computed said as such (not "Idle" under a full bar), skipped files
shown as skips and not as failures, a History entry low in a long list opened in view, sources of a
collection the daemon does not have shown as plain text saying so (never a link that jumps to
another tab), and search snippets with their matched words in <mark>, built as text."""

from __future__ import annotations

import re

import pytest

from tests.system.conftest import Daemon, serving, wait_indexed, wait_until
from tests.system.test_web_ui import SOURDOUGH, browser, by_css, go, run_search, sign_in, texts, wait_css  # noqa: F401 - browser is a fixture

WARN = "rgb(164, 70, 27)"  # app.css --warn: the colour of failures
NULLISH = re.compile(r"\b(null|undefined|NaN)\b")


@pytest.fixture(scope="module")
def d(tmp_path_factory):
    base = tmp_path_factory.mktemp("web-reading")
    notes = base / "notes"
    notes.mkdir()
    (notes / "sourdough.md").write_text(SOURDOUGH)
    # a chunk longer than a snippet: shown cut at a word
    (notes / "mill.md").write_text("The mill grinds rye flour on Tuesdays. " + " ".join(
        f"Sack {i} of milled grain waits in the loft beside the millstone." for i in range(12)) + "\n")
    (notes / "zstd.1.gz").write_bytes(b"\x28\xb5\x2f\xfd not really a compressed man page")  # skipped
    (notes / "torn.pdf").write_bytes(b"%PDF-1.4 the rest is missing\n")  # failed
    with serving(Daemon(base / "d", {"notes": [notes]})) as dm:
        wait_indexed(dm, "notes", 2)
        dm.wait_idle()
        yield dm


@pytest.fixture()
def ui(d, browser):  # noqa: F811 - the imported fixture
    sign_in(browser, d)
    return browser


def shot(d: Daemon, drv, name: str) -> None:
    drv.save_screenshot(str(d.base / f"{name}.png"))


def settled(drv, css: str) -> str:
    """The text of ``css`` once every source link in it has resolved (or been marked unresolvable)."""
    wait_until(lambda: not by_css(drv, f"{css} .pending"), 15, 0.1, what=f"the source links of {css}")
    return texts(drv, css)[0]


def ask(drv, d: Daemon, question: str) -> str:
    go(drv, d, "ask")
    box = by_css(drv, "#ask-query")[0]
    box.clear()
    box.send_keys(question)
    by_css(drv, "#ask-go")[0].click()
    wait_css(drv, "#ask-out h3", what="the finished answer")
    return settled(drv, "#ask-out")


def open_history(drv, d: Daemon, query: str) -> str:
    go(drv, d, "history")
    wait_until(lambda: [t for t in texts(drv, "#history-list a") if t == query], 10, what=f"'{query}' in history")
    drv.execute_script("[...document.querySelectorAll('#history-list a')].find(a => a.textContent === arguments[0])"
                       ".click()", query)
    wait_until(lambda: [t for t in texts(drv, "#history-out h2") if t == query], 10, what="the entry opened")
    wait_css(drv, "#history-out h3", what="the reopened answer")
    return settled(drv, "#history-out")


# --------------------------------------------------------------------------- answers
def test_no_null_or_undefined_anywhere_in_an_answer_or_its_history_entry(d, ui):
    """An answer without a tree (every answer without tree mode) once showed a line "null" under it,
    in Ask and in History: the whole pane is read, not only the error box."""
    question = "how often should I feed the sourdough starter?"
    pane = ask(ui, d, question)
    assert "Feed the starter once a day" in pane, pane
    assert not NULLISH.search(pane), pane
    shot(d, ui, "ask")
    pane = open_history(ui, d, question)
    assert "Feed the starter once a day" in pane, pane
    assert not NULLISH.search(pane), pane
    shot(d, ui, "history")


def test_quoted_passages_are_blockquotes_without_their_markers(d, ui):
    """The answer without an LLM quotes its passages as "> sentence" lines: the reader sees them
    set off as quotes, with no raw ">" at the start of a line."""
    ask(ui, d, "how often should I feed the sourdough starter?")
    lines = texts(ui, "#ask-out .answer-text")[0].splitlines()
    assert not [ln for ln in lines if ln.lstrip().startswith(">")], lines
    # the answer's first line says no LLM wrote it: said once, not again under it
    assert texts(ui, "#ask-out .answer")[0].lower().count("no llm configured") == 1
    quoted = texts(ui, "#ask-out .answer-text blockquote")
    assert any(q.startswith("Feed the starter once a day") for q in quoted), quoted
    # the pill before the quote still opens the file at the quoted sentence
    href = wait_until(lambda: [a.get_attribute("href") for a in by_css(ui, "#ask-out .answer-text a.pill")
                               if a.get_attribute("href")], 10, what="the resolved pill")[0]
    assert "#view/" in href, href


# --------------------------------------------------------------------------- documents
def test_a_skipped_file_is_shown_as_a_skip_not_as_a_failure(d, ui):
    go(ui, d, "documents")
    wait_until(lambda: [r for r in texts(ui, "#documents tbody tr") if "zstd.1.gz" in r], 10,
               what="the skipped file's row")
    skipped = texts(ui, "#documents tbody tr")
    zstd = next(r for r in skipped if "zstd.1.gz" in r)
    assert "skipped" in zstd and "unsupported file type '.gz'" in zstd, zstd
    torn = next(r for r in skipped if "torn.pdf" in r)
    assert "failed" in torn and "not a readable PDF" in torn, torn
    # the colour of failure (the red error box and badge) is the failed file's alone
    warned = ui.execute_script(
        "return [...document.querySelectorAll('#documents tbody tr')].map(r => [r.innerText.split('\\n')[0], "
        "[...r.querySelectorAll('*')].some(e => getComputedStyle(e).color === arguments[0])])", WARN)
    assert dict(warned) == {**{name: False for name, _ in warned}, "torn.pdf": True}, warned
    shot(d, ui, "documents")


def test_documents_say_vectors_are_still_computed_and_idle_only_when_they_are_done(tmp_path, browser):  # noqa: F811
    """Chunks waiting for their vectors (the embedder is down here, as a model server that does not
    answer) are not "Idle" under a full bar: the tab says how many wait, and says Idle once they
    have their vectors."""
    notes = tmp_path / "notes"
    notes.mkdir()
    for i in range(3):
        (notes / f"n{i}.md").write_text(f"# Note {i}\n\nThe heron number {i} wades in the reed marsh.\n")
    down = tmp_path / "embedder-down"
    down.touch()
    with serving(Daemon(tmp_path / "d", {"notes": [notes]}, launcher_args=["--embed-down-while", str(down)])) as dm:
        def read_but_not_embedded() -> bool:
            s = dm.status()
            return s["vectors"]["files_searchable"] == 3 and not s["ingest"]["running"] and not s["ingest"]["total"]
        wait_until(read_but_not_embedded, 60, 0.2, what="the files read and published")
        pending = dm.status()["vectors"]["pending_chunks"]
        assert pending >= 3
        sign_in(browser, dm)
        # (a fresh daemon: its History says there is nothing yet, rather than showing a blank page)
        go(browser, dm, "history")
        wait_until(lambda: [t for t in texts(browser, "#history-list") if "No searches or answers yet" in t], 10,
                   what="the empty History said")
        go(browser, dm, "documents")
        # the status holds still while the embedder is down: the first rendering says it all
        wait_until(lambda: by_css(browser, "#ingest .bar span"), 15, 0.1, what="the progress card")
        card = texts(browser, "#ingest")[0]
        assert "Idle" not in card and f"Embedding: {pending:,} chunks waiting for vectors" in card, card
        assert "Idle" not in texts(browser, "#progress")[0], card
        width = browser.execute_script("return document.querySelector('#ingest .bar span').style.width")
        assert width != "100%", width
        shot(dm, browser, "documents-embedding")
        down.unlink()  # the model server answers again
        wait_until(lambda: [t for t in texts(browser, "#ingest") if t.startswith("Idle")], 90, 0.5,
                   what="Idle once every chunk has its vector")
        assert dm.status()["vectors"]["pending_chunks"] == 0
        assert browser.execute_script("return document.querySelector('#ingest .bar span').style.width") == "100%"


# --------------------------------------------------------------------------- history
def test_a_history_entry_low_in_a_long_list_opens_in_view(d, ui):
    for i in range(45):
        d.search(f"heron marsh {i}")
    go(ui, d, "history")
    wait_until(lambda: len(by_css(ui, "#history-list li")) >= 40, 10, what="a long history list")
    last = by_css(ui, "#history-list li a[data-id]")[-1]  # the entry's own link, not its conversation's
    query = last.get_attribute("textContent")
    ui.execute_script("arguments[0].scrollIntoView({block: 'end'})", last)  # the reader scrolls down to it
    assert ui.execute_script("return window.scrollY") > 300, "the list is not long enough to scroll"
    last.click()
    wait_until(lambda: [t for t in texts(ui, "#history-out h2") if t == query], 10, what="the entry opened")
    top, bottom, height = ui.execute_script(
        "const r = document.querySelector('#history-out h2').getBoundingClientRect(); "
        "return [r.top, r.bottom, window.innerHeight]")
    header = ui.execute_script("return document.querySelector('header').getBoundingClientRect().bottom")
    assert header <= top and bottom <= height, (top, bottom, header, height)
    shot(d, ui, "history-long")


def test_sources_of_a_collection_the_daemon_lacks_are_marked_and_never_jump_away(d, ui, tmp_path):
    """An entry whose sources name a collection this daemon does not have (answered by a one-shot
    `ragweedd ask` on another index, or here a collection forgotten since) shows them as plain text
    saying so; clicking them, or the entry, stays in History. Sources it has still open."""
    jot = tmp_path / "jot"
    jot.mkdir()
    (jot / "kettle.md").write_text("# Kettle\n\nThe kettle whistles when the water boils.\n")
    assert d.api("POST", "/v1/collections", json={"name": "jot", "paths": [str(jot)]}).status_code == 200
    wait_indexed(d, "jot", 1)
    question = "when does the kettle whistle?"
    r = d.api("POST", "/v1/ask", json={"query": question, "collections": ["jot"], "stream": False})
    assert r.status_code == 200 and r.json()["sources"], r.text
    assert d.api("DELETE", "/v1/collections/jot").status_code == 200
    pane = open_history(ui, d, question)
    listed = texts(ui, "#history-out ol.sources li")
    assert listed and all("not in this daemon's index" in t and "'jot'" in t for t in listed), listed
    assert not by_css(ui, "#history-out a.pill, #history-out a.where"), "a link to a source the daemon lacks"
    pills = by_css(ui, "#history-out .answer-text .pill")
    assert pills and all("not in this daemon's index" in p.get_attribute("title") for p in pills)
    assert not NULLISH.search(pane), pane
    shot(d, ui, "history-unknown-collection")
    for css in ("#history-out .answer-text .pill", "#history-out ol.sources .where"):
        by_css(ui, css)[0].click()
        assert ui.current_url.endswith("#history") and by_css(ui, "#tab-history")[0].is_displayed(), ui.current_url
    # an entry of a collection it has: its sources open as before
    other = "how long does the sourdough starter take to double?"
    assert d.api("POST", "/v1/ask", json={"query": other, "collections": ["notes"], "stream": False}).status_code == 200
    open_history(ui, d, other)
    links = by_css(ui, "#history-out a.where")
    assert links and all("#view/" in (a.get_attribute("href") or "") for a in links)


def test_a_source_whose_file_left_the_index_is_marked(d, ui, tmp_path):
    """The collection is the daemon's but the cited file is gone from it: plain text saying so."""
    box = tmp_path / "box"
    box.mkdir()
    (box / "lid.md").write_text("# Lid\n\nThe copper lid rattles when the stew simmers.\n")
    assert d.api("POST", "/v1/collections", json={"name": "box", "paths": [str(box)]}).status_code == 200
    try:
        wait_indexed(d, "box", 1)
        question = "why does the copper lid rattle?"
        r = d.api("POST", "/v1/ask", json={"query": question, "collections": ["box"], "stream": False})
        assert r.status_code == 200 and r.json()["sources"], r.text
        (box / "lid.md").unlink()
        wait_until(lambda: d.api("GET", "/v1/documents?collection=box&state=indexed").json()["total"] == 0, 30, 0.2,
                   what="lid.md gone from the index")
        open_history(ui, d, question)
        listed = texts(ui, "#history-out ol.sources li")
        assert listed and all("no indexed file at this path" in t for t in listed), listed
        assert not by_css(ui, "#history-out a.pill, #history-out a.where")
    finally:
        assert d.api("DELETE", "/v1/collections/box").status_code == 200


# --------------------------------------------------------------------------- search snippets
SNIPPET = "…a 🍞 starter <img src=x onerror=\"window.pwned=1\"> doubles when fed flour and water…"


def test_a_snippet_marks_its_matched_words_and_stays_text(d, ui):
    """A hit's ``snippet`` is shown with each ``snippet_marks`` range (code point offsets, as Python
    counts them: the emoji is one) in <mark>; markup in it stays text. A stubbed hit, rendered by the
    page's own function: the daemon of this branch does not send snippets yet."""
    marks = [[SNIPPET.index("starter"), SNIPPET.index("starter") + len("starter")],
             [SNIPPET.index("flour"), SNIPPET.index("flour") + len("flour")]]
    go(ui, d, "search")
    ui.execute_script(
        "renderHits(document.getElementById('search-out'), [{collection: 'notes', source_file: '/nowhere/x.md', "
        "filename: 'x.md', source_rel_path: 'x.md', text: 'the whole chunk', score: 1.5, rel_score: 1, "
        "snippet: arguments[0], snippet_marks: arguments[1]}])", SNIPPET, marks)
    assert texts(ui, "#search-out .snippet mark") == ["starter", "flour"]
    assert texts(ui, "#search-out .snippet")[0] == SNIPPET
    assert not by_css(ui, "#search-out img") and ui.execute_script("return window.pwned") is None


def test_search_hits_show_the_daemons_snippet_or_the_chunk_start(d, ui):
    """What the daemon sends decides what is shown: its snippet with its marks when the hits carry
    one, else the start of the chunk, cut at a word and marked as cut. How well each hit matched is
    said in words, not as a raw score (which can be negative)."""
    run_search(ui, d, "starter flour")
    hits = d.search("starter flour")
    shown = texts(ui, "#search-out .snippet")
    assert len(shown) == len(hits) == len(texts(ui, "#search-out .strength"))
    for hit, text in zip(hits, shown):
        if "snippet" in hit:
            assert text == hit["snippet"]
        elif len(hit["text"]) <= 400:
            assert text == hit["text"]
        else:
            assert text.endswith(" …") and hit["text"].startswith(text[:-2]) and len(text) <= 402, text
    expected = [hit["snippet"][a:b] for hit in hits if "snippet" in hit for a, b in hit["snippet_marks"]]
    assert texts(ui, "#search-out .snippet mark") == expected
    assert all(re.fullmatch(r"(strong|partial|weak) match", t) for t in texts(ui, "#search-out .strength"))
    assert "score -" not in texts(ui, "#search-out")[0]
    shot(d, ui, "search")


def test_original_file_links_carry_a_ticket_for_their_file_only(d, ui):
    """The Documents tab's "original" link and the text view's link are navigations (no header
    of the page's): each carries ?t=, good for its own file with the session's cookie only."""
    go(ui, d, "documents")
    hrefs = wait_until(lambda: ui.execute_script(
        "return [...document.querySelectorAll('#documents td.actions a')].filter(a => a.textContent === 'original')"
        ".map(a => a.getAttribute('href')).filter(Boolean)"), 15, 0.1, what="the original-file links")
    assert all(re.fullmatch(r"/v1/files/[^?#]+\?t=[0-9a-f]{64}", h) for h in hrefs), hrefs
    fetch = ("const done = arguments[1]; fetch(arguments[0]).then(async r => done([r.status, await r.text()]))")
    sourdough = next(h for h in hrefs if ui.execute_async_script(fetch, h)[1] == SOURDOUGH)
    other = next(h for h in hrefs if h != sourdough)
    # a ticket opens its file only: moved onto another document's address it is refused
    swapped = other.split("?")[0] + "?" + sourdough.split("?")[1]
    assert ui.execute_async_script(fetch, swapped)[0] == 401
    assert ui.execute_async_script(fetch, sourdough.split("?")[0])[0] == 401  # no ticket, no key
    # the text view's link to the original file carries the same ticket
    key = sourdough.split("?")[0].rsplit("/", 1)[1]
    ui.get(f"http://127.0.0.1:{d.port}/#view/{key}//")
    wait_until(lambda: by_css(ui, "#view-original")[0].get_attribute("href"), 10, what="the view's original link")
    assert by_css(ui, "#view-original")[0].get_attribute("href").endswith(sourdough)
