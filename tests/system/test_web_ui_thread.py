"""The web UI's Ask tab as a conversation, in real headless Chromium against a real daemon subprocess
(the set-up of test_web_ui.py): a follow-up asked under the first answer keeps its subject and
shows what it was searched as, the address names the conversation so a reload reopens it, the
History tab lists the conversations and opens one to continue, "New conversation" starts afresh,
"Delete conversation" deletes it whole, and an address naming no conversation says so and lets
the next question start a new one."""

from __future__ import annotations

import re

import pytest

from tests.integration.test_conversations_flow import FILES, TEA
from tests.system.conftest import Daemon, serving, wait_indexed, wait_until
from tests.system.test_web_ui import browser, by_css, sign_in, texts, wait_css  # noqa: F401 - browser is a fixture

FOLLOW = "and black tea?"


@pytest.fixture(scope="module")
def d(tmp_path_factory):
    base = tmp_path_factory.mktemp("web-thread")
    notes = base / "notes"
    notes.mkdir()
    for name, text in FILES.items():
        (notes / name).write_text(text)
    with serving(Daemon(base / "d", {"notes": [notes]})) as dm:
        wait_indexed(dm, "notes", len(FILES))
        dm.wait_idle()
        dm.shots = base / "screenshots"
        dm.shots.mkdir()
        yield dm


@pytest.fixture()
def ui(d, browser):  # noqa: F811 - the imported fixture
    sign_in(browser, d)
    browser.get(f"http://127.0.0.1:{d.port}/#ask")
    wait_css(browser, "#ask-query", 10)
    return browser


def turns(drv) -> list[str]:
    return texts(drv, "#ask-out .turn")


def ask_in_thread(drv, question: str) -> None:
    """Ask in the conversation the page shows and wait for that turn's finished answer."""
    before = len(by_css(drv, "#ask-out .turn"))
    box = by_css(drv, "#ask-query")[0]
    box.clear()
    box.send_keys(question)
    by_css(drv, "#ask-go")[0].click()
    wait_until(lambda: len(by_css(drv, "#ask-out .turn h3")) == before + 1, 30, 0.1, f"the answer to {question!r}")
    wait_until(lambda: not by_css(drv, "#ask-out .pending"), 15, 0.1, "the source links")


def conversation_id(drv) -> str:
    m = re.fullmatch(r".*#ask/(c[0-9a-f]{16})", drv.current_url)
    assert m, drv.current_url
    return m.group(1)


def first_source(turn_text: str) -> str:
    return turn_text.split("Sources", 1)[1]


def test_a_follow_up_under_the_answer_keeps_its_subject_and_survives_a_reload(d, ui):
    ask_in_thread(ui, TEA)
    cid = conversation_id(ui)
    assert by_css(ui, "#ask-thread")[0].text == f"Conversation {cid} · 1 turn"
    assert by_css(ui, '#tabs a[data-tab="ask"]')[0].get_attribute("href").endswith(f"#ask/{cid}")
    assert not [p for p in by_css(ui, "#ask-out .turn .searched") if p.is_displayed()], "a first question is as asked"
    ask_in_thread(ui, FOLLOW)
    assert conversation_id(ui) == cid and by_css(ui, "#ask-thread")[0].text == f"Conversation {cid} · 2 turns"
    first, second = turns(ui)
    assert first.startswith(TEA) and "green.md" in first_source(first)
    assert second.startswith(FOLLOW)
    searched = by_css(ui, "#ask-out .turn")[1].find_element("css selector", ".searched").text
    # (the <q> around the query draws its quotation marks itself: they are not text)
    assert searched == "Searched for: and black tea? steep (carried from the earlier turns: steep)", searched
    assert "notes/black.md" in first_source(second).split("\n", 2)[1], second
    ui.save_screenshot(str(d.shots / "thread.png"))
    # the address names the conversation: a reload reads it back, and a question continues it
    ui.refresh()
    wait_until(lambda: len(turns(ui)) == 2, 15, 0.1, "the reopened thread")
    assert turns(ui)[1].startswith(FOLLOW) and "Searched for" in turns(ui)[1]
    ask_in_thread(ui, "and green?")
    assert d.api("GET", f"/v1/conversations/{cid}").json()["turns"][2]["turn"] == 3


def test_history_lists_conversations_and_opens_one_to_continue(d, ui):
    first = d.api("POST", "/v1/ask?stream=false", json={"query": "Do bicycle chains need oil?"}).json()
    cid = first["conversation_id"]
    d.api("POST", "/v1/ask?stream=false", json={"query": "how often?", "conversation_id": cid})
    ui.get(f"http://127.0.0.1:{d.port}/#history")
    link = wait_until(lambda: [a for a in by_css(ui, "#threads-list a") if a.get_attribute("data-id") == cid],
                      20, 0.1, "the conversation in the History tab")[0]
    assert link.text == "Do bicycle chains need oil?"
    row = [t for t in texts(ui, "#threads-list li") if t.startswith("Do bicycle chains need oil?")][0]
    assert "2 turns" in row, row
    # an answer of a conversation in the list of entries leads to its thread too
    assert [a for a in by_css(ui, "#history-list a.thread-link") if a.get_attribute("href").endswith(f"#ask/{cid}")]
    link.click()
    wait_until(lambda: len(turns(ui)) == 2, 15, 0.1, "the thread opened from History")
    assert conversation_id(ui) == cid and turns(ui)[1].startswith("how often?")
    ask_in_thread(ui, "and after rain?")
    assert len(d.api("GET", f"/v1/conversations/{cid}").json()["turns"]) == 3


def test_new_conversation_starts_afresh(d, ui):
    ask_in_thread(ui, TEA)
    old = conversation_id(ui)
    by_css(ui, "#ask-new")[0].click()
    wait_until(lambda: ui.current_url.endswith("#ask") and not turns(ui), 10, 0.1, "an empty, new conversation")
    assert by_css(ui, "#ask-thread")[0].text == "New conversation"
    ask_in_thread(ui, FOLLOW)
    assert conversation_id(ui) != old
    assert not [p for p in by_css(ui, "#ask-out .turn .searched") if p.is_displayed()], "nothing to carry: a new one"
    assert "towels.md" in first_source(turns(ui)[0]).split("\n", 2)[1]


def test_delete_conversation_deletes_it_whole(d, ui):
    ask_in_thread(ui, TEA)
    ask_in_thread(ui, FOLLOW)
    cid = conversation_id(ui)
    by_css(ui, "#ask-delete")[0].click()
    ui.switch_to.alert.accept()
    wait_until(lambda: ui.current_url.endswith("#ask") and not turns(ui), 10, 0.1, "the emptied Ask tab")
    assert d.api("GET", f"/v1/conversations/{cid}").status_code == 404
    ids = [c["id"] for c in d.api("GET", "/v1/conversations?limit=1000").json()["items"]]
    assert cid not in ids


def test_an_address_naming_no_conversation_says_so_and_the_next_question_starts_one(d, ui):
    for bad, words in (("c0000000000000000", "does not exist"), ("nope", "is not one")):
        ui.get(f"http://127.0.0.1:{d.port}/#ask/{bad}")
        box = wait_css(ui, "#error", 10, "the error box")[0]
        assert words in box.text, box.text
        assert words in wait_css(ui, "#ask-out .ask-error", 10)[0].text
        ui.execute_script("document.querySelector('#error button.close').click()")
    ask_in_thread(ui, TEA)
    assert conversation_id(ui) and len(turns(ui)) == 1
    assert d.api("GET", "/v1/health").json()["ok"]
