"""An error's hint is worded by the face that shows it (ragweedd.errors.FIXES): the API names its
routes, ragweedctl its commands, MCP its tools; the message is the same everywhere. The faces
themselves are tested end to end in tests/system/test_error_faces.py."""

from __future__ import annotations

import re

import pytest

from ragweedd.errors import FACES, FIXES, NotFoundError, RagweedError, RequestError, hint_for, say


def test_every_action_is_worded_for_every_face_in_its_own_terms():
    for action, words in FIXES.items():
        for face in FACES:
            text = hint_for(face, {"id": action, "args": {"name": "notes"}})
            assert text, (action, face)
            if face in ("ctl", "cli", "mcp"):
                # a person or a model never reads a REST route where a command or a tool does the job
                assert not re.search(r"\b(GET|POST|DELETE) /v1/", text), (action, face, text)
        assert "/v1/" in words["api"] or "ragweedd run" in words["api"], (action, words["api"])


def test_an_error_with_an_action_carries_it_to_the_envelope_and_words_it_per_face():
    e = NotFoundError("collection 'nope' does not exist", action="list_collections")
    assert e.to_dict() == {"code": "not_found", "message": "collection 'nope' does not exist",
                           "hint": "list them with GET /v1/collections", "action": {"id": "list_collections"}}
    assert e.say("ctl") == "collection 'nope' does not exist — list them with `ragweedctl collections`"
    assert e.say("mcp") == "collection 'nope' does not exist — list them with the `list_collections` tool"
    taken = RequestError("collection 'notes' already exists", action="collection_name_taken", name="notes")
    assert taken.to_dict()["action"] == {"id": "collection_name_taken", "args": {"name": "notes"}}
    assert "`ragweedctl remove notes`" in taken.say("ctl") and "delete of /v1/collections/notes" in taken.hint


def test_a_worded_hint_is_kept_and_an_unknown_action_is_refused_where_it_is_raised():
    e = RequestError("the query is empty", hint="give some words to search for")
    assert e.say("mcp") == e.say("ctl") == "the query is empty — give some words to search for"
    assert RagweedError("boom").say("ctl") == "boom"
    with pytest.raises(ValueError, match="no hint words"):
        RequestError("x", action="no_such_action")


@pytest.mark.parametrize("action", [None, "list_collections", {"id": 3}, {"id": "nope"}, [1],
                                    {"id": "collection_name_taken"},  # its {name} is missing
                                    {"id": "collection_name_taken", "args": {"name": 5}},
                                    {"id": "list_collections", "args": "x"}])
def test_an_action_read_from_the_wire_that_is_not_of_the_shape_falls_back_to_the_hint(action):
    assert say("ctl", "it failed", "the daemon's hint", action) == "it failed — the daemon's hint"
    assert say("ctl", "it failed", None, action) == "it failed"


def test_the_web_ui_words_every_action():
    """The web UI shows an error's hint in its own words (no routes): one wording per action."""
    import re
    from pathlib import Path

    from ragweedd.errors import FIXES

    js = (Path(__file__).resolve().parents[2] / "ragweedd" / "web" / "app.js").read_text()
    table = js.split("const WEB_FIXES = {", 1)[1].split("};", 1)[0]
    words = dict(re.findall(r'^\s*(\w+): "([^"]+)', table, flags=re.M))
    assert set(words) == set(FIXES)
    assert not [w for w in words.values() if "/v1/" in w or "GET " in w or "POST " in w]
