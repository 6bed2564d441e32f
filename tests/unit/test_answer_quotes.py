"""The sentence splitter and the quote scorer of answers (ragweedd/answer/sentences.py, quotes.py),
with the deterministic hash embedder; the real model is in tests/integration/test_answer_quotes_model.py."""

import asyncio

import pytest

from ragweedd.answer import NO_LLM_LABEL, answer_question, passages_answer
from ragweedd.answer import quotes as Q
from ragweedd.answer.sentences import MAX_CHARS, split_sentences
from ragweedd.config import default_config
from ragweedd.embed.factory import make_embedder

EMB = make_embedder("hash:256")


def sents(text: str) -> list[str]:
    out = split_sentences(text)
    for a, b in out:  # offsets, trimmed, in order, never overlapping
        assert text[a:b] == text[a:b].strip() and text[a:b]
    assert all(b1 <= a2 for (_, b1), (a2, _) in zip(out, out[1:]))
    return [text[a:b] for a, b in out]


# --- splitter ---------------------------------------------------------------------------------------
def test_abbreviations_initials_and_decimals_do_not_end_a_sentence():
    text = ("Take 3.5 mg daily, e.g. with food, i.e. twice. Dr. Smith et al. agree (see Fig. 2). "
            "J. R. R. Tolkien wrote it! Version 2.0.1 shipped? Yes.")
    assert sents(text) == ["Take 3.5 mg daily, e.g. with food, i.e. twice.", "Dr. Smith et al. agree (see Fig. 2).",
                           "J. R. R. Tolkien wrote it!", "Version 2.0.1 shipped?", "Yes."]


def test_sentences_end_as_each_script_ends_them():
    assert sents("Зелёный чай заваривают три минуты. Чёрный чай настаивают пять минут.") == [
        "Зелёный чай заваривают три минуты.", "Чёрный чай настаивают пять минут."]
    # no space after a CJK full stop
    assert sents("绿茶应该冲泡两到三分钟，水太热会让茶变苦。乌龙茶可以反复冲泡多次！真的吗？是的。") == [
        "绿茶应该冲泡两到三分钟，水太热会让茶变苦。", "乌龙茶可以反复冲泡多次！", "真的吗？", "是的。"]
    assert sents("हरी चाय तीन मिनट तक भिगोएँ। काली चाय पाँच मिनट।") == [
        "हरी चाय तीन मिनट तक भिगोएँ।", "काली चाय पाँच मिनट।"]
    assert sents("هل هذا سؤال؟ نعم هذا جواب.") == ["هل هذا سؤال؟", "نعم هذا جواب."]
    assert sents("Ελληνικά κείμενα εδώ. Δεύτερη πρόταση.") == ["Ελληνικά κείμενα εδώ.", "Δεύτερη πρόταση."]


def test_a_chinese_answer_quotes_the_sentence_that_answers_not_the_heading_and_the_rest():
    text = ("# 泡茶\n\n绿茶应该用八十度左右的水冲泡两到三分钟，水太热会让茶变苦。"
            "乌龙茶可以反复冲泡多次，每次三到四分钟。")
    assert Q.words("乌龙茶") == ["乌龙", "龙茶"] and Q.word_count("乌龙茶可以反复冲泡多次") == 5
    _, numbered = passages_answer([hit(text, 0)], query="乌龙茶泡几分钟？")  # by its words: bigrams
    assert [q["text"] for q in numbered[0]["quotes"]] == ["乌龙茶可以反复冲泡多次，每次三到四分钟。"]


def test_a_full_stop_before_a_lower_case_word_or_at_a_number_does_not_end_one():
    assert sents("It costs approx. three euros. The pH was 7.4 at 25 °C.") == [
        "It costs approx. three euros.", "The pH was 7.4 at 25 °C."]


def test_line_broken_pdf_text_joins_and_quotes_close_sentences():
    text = ("The treatment was effective in\n80% of the patients. Side effects were\nrare and mild.\n\n"
            "She said \"it works.\" Then she left.")
    assert sents(text) == ["The treatment was effective in\n80% of the patients.", "Side effects were\nrare and mild.",
                           "She said \"it works.\"", "Then she left."]


def test_blank_lines_headings_and_titles_end_sentences():
    text = ("# Tuning\nThe beam width trades recall for speed\n\nIntroduction\n"
            "The method described here is based on a new kind of analysis of long running text\n"
            "that was measured carefully.")
    assert sents(text) == ["# Tuning", "The beam width trades recall for speed", "Introduction",
                           "The method described here is based on a new kind of analysis of long running text\n"
                           "that was measured carefully."]


def test_a_title_line_over_a_narrow_block_stands_alone():
    assert sents("Lighthouse keeper's schedule\nLamp lit at sunset, extinguished at sunrise.\n"
                 "Lens cleaned every morning; fog horn tested on Sundays.") == [
        "Lighthouse keeper's schedule", "Lamp lit at sunset, extinguished at sunrise.",
        "Lens cleaned every morning; fog horn tested on Sundays."]


def test_bullets_and_numbered_items_are_one_sentence_each_even_when_wrapped():
    text = ("Steps:\n- Mix flour and water\n- Wait four hours, then\n  fold the dough\n• Bake\n"
            "1. First item\n2) Second item\n(a) third")
    assert sents(text) == ["Steps:", "- Mix flour and water", "- Wait four hours, then\n  fold the dough", "• Bake",
                           "1. First item", "2) Second item", "(a) third"]


def test_table_rows_are_one_sentence_each():
    assert sents("| Tea | Grams |\n|---|---|\n| Sencha | 120 |\n| Oolong | 30 |") == [
        "| Tea | Grams |", "|---|---|", "| Sencha | 120 |", "| Oolong | 30 |"]
    assert sents("Sencha\t120\tgreen\nOolong\t30\tsemi") == ["Sencha\t120\tgreen", "Oolong\t30\tsemi"]
    assert sents("Revenue      1,200      1,350\nCosts        800        900") == [
        "Revenue      1,200      1,350", "Costs        800        900"]


def test_crlf_and_a_run_on_text_are_cut():
    assert sents("One line.\r\n\r\nTwo lines\r\nhere.") == ["One line.", "Two lines\r\nhere."]
    long = " ".join(["word"] * 300)
    parts = sents(long)
    assert len(parts) > 1 and all(len(p) <= MAX_CHARS for p in parts) and " ".join(parts) == long
    assert split_sentences("") == [] and split_sentences("  \n\n ") == []


# --- scorer -----------------------------------------------------------------------------------------
SOURDOUGH = ("Sourdough starter care\n\nFeed the starter once a day with equal weights of flour and water. "
             "Keep it at room temperature,\naround 24 degrees Celsius.\n\nBake when the starter is at its peak.")
LIGHTHOUSE = ("Lighthouse keeper's schedule\nLamp lit at sunset, extinguished at sunrise.\n"
              "Lens cleaned every morning; fog horn tested on Sundays.")


def hit(text, i=0, *, span0=100, lines=None, pages=None, uri=None, doc_id=None, rel=1.0, **kw):
    h = {"embedding_id": i, "collection": "notes", "doc_id": doc_id or f"doc{i}", "source_file": f"/n/f{i}.txt",
         "filename": f"f{i}.txt", "source_rel_path": f"f{i}.txt", "text": text, "span": [span0, span0 + len(text)],
         "lines": lines, "pages": pages, "page_label": (str(pages[0]) if len(pages) == 1 else
                                                         f"{pages[0]}-{pages[-1]}") if pages else None,
         "uri": uri or f"file:///n/f{i}.txt", "score": 0.016, "rel_score": rel, "section": None, "t_start": None,
         "t_end": None, "member": None}
    h.update(kw)
    return h


def test_words_are_stemmed_and_stop_words_dropped():
    assert Q.words("How often do I feed the starters? Feeding feeds") == ["often", "feed", "starter", "feed", "feed"]
    assert Q.words("speed speeds glass viruses studies tested") == ["speed", "speed", "glass", "virus", "study", "test"]


@pytest.mark.parametrize("embedder", [None, EMB], ids=["keywords", "hash-embedder"])
def test_the_unrelated_passage_is_not_a_source(embedder):
    hits = [hit(LIGHTHOUSE, 0, rel=1.0), hit(SOURDOUGH, 1, rel=0.99)]  # retrieval ranked the lighthouse first
    text, numbered = passages_answer(hits, query="how often do I feed the starter?", embedder=embedder)
    assert [h["filename"] for h in numbered] == ["f1.txt"], text
    assert "Lighthouse" not in text and "> Feed the starter once a day" in text
    assert numbered[0]["quote"]["text"] == "Feed the starter once a day with equal weights of flour and water."


def test_quote_span_is_the_documents_text_and_lines_and_uri_follow_it():
    doc = "x" * 100 + SOURDOUGH
    h = hit(SOURDOUGH, 0, span0=100, lines=[7, 11], uri="file:///n/f0.txt#L7-L11")
    _, cands = Q.rank_passages("what temperature for the starter?", [h], EMB)
    q = Q.quotes_for(0, [h], cands, limit=1)[0]
    assert q["text"].startswith("Keep it at room temperature")
    assert doc[q["span"][0]:q["span"][1]] == q["text"]
    assert q["lines"] == [9, 10] and q["uri"] == "file:///n/f0.txt#L9-L10" and q["page_label"] is None


def test_member_and_time_uris():
    h = hit("Feed the starter daily.", 0, lines=[3, 3], member="box/notes.txt",
            uri="file:///n/a.zip#member=box/notes.txt&L3-L3")
    _, cands = Q.rank_passages("feed", [h])
    assert Q.quotes_for(0, [h], cands)[0]["uri"] == "file:///n/a.zip#member=box/notes.txt&L3"
    h = hit("Feed the starter daily.", 0, t_start=12.0, t_end=20.0, uri="file:///n/r.mp3#t=12,20")
    _, cands = Q.rank_passages("feed", [h])
    assert Q.quotes_for(0, [h], cands)[0]["uri"] == "file:///n/r.mp3#t=12,20", "a sentence has no time of its own"


def test_pdf_quote_page_is_told_by_the_page_joins_of_its_passage():
    # PDF pages are joined by a blank line: one blank line in a passage over two pages is the turn
    text = "Page three ends here with a fact about pumps.\n\nPage four starts with the valve story."
    two = hit(text, 0, span0=1000, pages=[3, 4], uri="file:///n/x.pdf#page=3", doc_id="pdf")
    for question, page in (("pumps fact", "3"), ("valve story", "4")):
        _, cands = Q.rank_passages(question, [two], EMB)
        q = Q.quotes_for(0, [two], cands, limit=1)[0]
        assert q["page_label"] == page and q["uri"] == f"file:///n/x.pdf#page={page}", q


def test_pdf_quote_page_is_told_by_another_passage_of_the_document_else_the_range():
    # two blank lines over two pages: one is a paragraph break, which one the page turn is unknown
    text = ("Page three ends here with a fact about pumps.\n\nStill page three, or four.\n\n"
            "Page four starts with the valve story.")
    two = hit(text, 0, span0=1000, pages=[3, 4], uri="file:///n/x.pdf#page=3", doc_id="pdf")
    before = hit("earlier text on page three only", 1, span0=900, pages=[3], doc_id="pdf")
    before["span"] = [900, 1030]  # ends inside the first sentence of the two-page passage
    _, cands = Q.rank_passages("pumps fact", [two], EMB)
    alone = Q.quotes_for(0, [two, before], cands, limit=1)[0]
    assert alone["page_label"] == "3-4" and alone["uri"] == "file:///n/x.pdf#page=3"
    before["span"] = [900, 1050]  # the first sentence, 1000-1045, lies inside a page-3-only passage
    q = Q.quotes_for(0, [two, before], cands, limit=1)[0]
    assert q["text"].startswith("Page three ends") and q["page_label"] == "3" and q["uri"].endswith("#page=3")
    after = hit("later text on page four only", 2, span0=1070, pages=[4], doc_id="pdf")
    _, cands = Q.rank_passages("valve story", [two], EMB)
    q = Q.quotes_for(0, [two, after], cands, limit=1)[0]
    assert q["text"].startswith("Page four") and q["page_label"] == "4" and q["uri"] == "file:///n/x.pdf#page=4"
    other_doc = {**after, "doc_id": "another"}
    assert Q.quotes_for(0, [two, other_doc], cands, limit=1)[0]["page_label"] == "3-4"


def test_overlapping_passages_quote_a_sentence_once():
    a = hit(SOURDOUGH, 0, span0=0, doc_id="d", rel=1.0)
    cut = SOURDOUGH.index("Feed")
    b = hit(SOURDOUGH[cut:], 1, span0=cut, doc_id="d", rel=0.9)
    text, numbered = passages_answer([a, b], query="how often do I feed the starter?", embedder=EMB)
    spans = [tuple(q["span"]) for h in numbered for q in h["quotes"]]
    assert len(spans) == len(set(spans)) and text.count("Feed the starter once a day") == 1


def test_passages_that_cut_a_sentence_at_different_places_quote_it_once():
    doc = ("Votes cast for and against: 10,716,259 6,884,223\n"
           "and each of the ten nominees to the Board was duly elected for a one-year term.")
    a = hit(doc, 0, span0=0, doc_id="d", rel=1.0, chunk_idx=0)
    cut = doc.index("6,884,223")
    b = hit(doc[cut:], 1, span0=cut, doc_id="d", rel=0.9, chunk_idx=1)
    assert Q.candidates([a])[0].start == 0 and len(Q.candidates([a])) == 1  # one sentence, cut differently
    assert b["text"].startswith("6,884,223")
    text, numbered = passages_answer([a, b], query="were the nominees to the board elected?", embedder=EMB)
    assert text.count("duly elected") == 1


def test_a_sentence_cut_by_the_passage_start_or_end_is_not_quoted():
    text = ('6 Notes, the "New Notes"), in each case as the indenture allows. The issuer may substitute '
            "any subsidiary for itself under Section 101 of the indenture. It then entered into the Second")
    h = hit(text, 3, span0=5000, doc_id="d", chunk_idx=3)
    _, cands = Q.rank_passages("may the issuer substitute a subsidiary under section 101?", [h], EMB)
    assert [c.partial for c in cands] == [False]  # the whole sentence in the middle is the one left
    q = Q.quotes_for(0, [h], cands, limit=3)
    assert [x["text"] for x in q] == ["The issuer may substitute any subsidiary for itself under Section 101 "
                                      "of the indenture."]
    first = hit(text, 0, span0=0, doc_id="d", chunk_idx=0)  # a document's first passage starts a sentence
    assert Q.candidates([first])[0].partial is False


def test_no_llm_answer_events_carry_quotes():
    async def go():
        return [e async for e in answer_question("how often do I feed the starter?",
                                                 [hit(LIGHTHOUSE, 0), hit(SOURDOUGH, 1, rel=0.5)],
                                                 default_config(), embedder=EMB)]
    evs = asyncio.run(go())
    done = evs[-1]
    assert done["answer"].startswith(NO_LLM_LABEL) and done["mode"] == "passages"
    assert [s["filename"] for s in done["sources"]] == ["f1.txt"] and done["cited_numbers"] == [1]
    src = done["sources"][0]
    assert src["quote"] in src["quotes"] and src["quote"]["span"][0] >= src["span"][0]
    assert [s["embedding_id"] for s in done["retrieved"]] == [0, 1], "everything retrieved is still recorded"


def test_without_a_question_word_in_common_every_passage_stays_in_retrieval_order():
    hits = [hit("Alpha beta gamma delta.", 0, rel=1.0), hit("Epsilon zeta eta theta.", 1, rel=0.5)]
    _, numbered = passages_answer(hits, query="quux?")
    assert [h["embedding_id"] for h in numbered] == [0, 1]


def test_kept_is_relative_to_the_best():
    assert Q.kept([0.2, 0.9, 0.5, 0.6]) == [1, 3]
    assert Q.kept([0.2, 0.9, 0.5, 0.6], 0.5) == [1, 3, 2]
    assert Q.kept([]) == [] and Q.kept([0.0, 0.0]) == [0, 1]


def test_the_search_relevance_weighs_in_the_order_and_the_keep_rule():
    """A passage whose sentences score a little higher but that the search put far below (another
    company's table) comes after the search's best, and one the search all but dropped is no source."""
    assert Q.REL_WEIGHT == 0.5
    assert Q.kept([0.30, 0.33], rels=[1.0, 0.2]) == [0, 1]  # 0.30 x 1.1 against 0.33 x 0.6 x 1.05
    assert Q.kept([0.30, 0.33]) == [1, 0]  # on the sentences alone
    assert Q.kept([0.40, 0.30], rels=[1.0, 0.0]) == [0]  # 0.30 x 0.5 < 0.6 x 0.44
    assert Q.kept([0.40, 0.30], rels=[None, None]) == [0, 1]  # no search score: the sentences decide


def test_a_passage_without_span_or_lines_still_quotes_with_the_file_uri():
    h = hit(SOURDOUGH, 0, uri="file:///n/f0.docx")
    h["span"], h["lines"] = [None, None], None
    _, numbered = passages_answer([h], query="feed the starter", embedder=EMB)
    q = numbered[0]["quote"]
    assert q["span"] is None and q["lines"] is None and q["uri"] == "file:///n/f0.docx"
    assert q["text"] in SOURDOUGH


def test_printed_quotes_escape_control_characters():
    import io

    from ragweedd.cli.ctl_text import print_quotes

    out = io.StringIO()
    print_quotes({"quotes": [{"text": "Feed it\x1b]0;owned\x07 daily.", "uri": "file:///n/f.txt#L3"}]}, out)
    assert "\x1b" not in out.getvalue() and "\\x1b" in out.getvalue()
    assert out.getvalue().endswith("      file:///n/f.txt#L3\n")


def test_the_ask_flow_hands_the_embedder_to_the_answer_and_the_history_keeps_quotes(tmp_path):
    from ragweedd.answer.ask_flow import AskFlow
    from tests.history_support import open_history

    made = []

    class Counting:
        id, dim, max_input_tokens = EMB.id, EMB.dim, EMB.max_input_tokens

        def embed_batch(self, texts):
            made.append(len(texts))
            return EMB.embed_batch(texts)

    def embedder():
        made.append("made")
        return Counting()

    async def go():
        with open_history(tmp_path / "h.sqlite3") as hs:
            flow = AskFlow(default_config(), hs, embedder=embedder)
            res = {"results": [hit(LIGHTHOUSE, 0), hit(SOURDOUGH, 1)], "retrieval_meta": {}}
            evs = [e async for e in await flow.ask("how often do I feed the starter?", res)]
            return evs[-1], hs.show(evs[-1]["history_id"])

    done, entry = asyncio.run(go())
    assert made[0] == "made" and sum(n for n in made[1:]) > 2, "the question and the sentences were embedded"
    assert [s["filename"] for s in done["sources"]] == ["f1.txt"] and done["timings"]["quote_ms"] >= 0
    assert entry["sources"][0]["quote"] == done["sources"][0]["quote"], "the history keeps the quotes"


MANPAGE = ("GROUPS\n       kvm\n              Access to the KVM device is given to members of this group.\n"
           "       libvirt\n              Access to the system libvirt daemon is controlled by this group.\n"
           "       audio\n              Sound cards can be opened by this group.")
BACKREF = ("The offsite will be held in Lisbon, at the Palácio Chiado. It starts on 12 May at 9:00 and "
           "ends with a dinner.\n\nRooms are booked for everyone.")


def test_a_sentence_keeps_the_term_above_it_that_names_its_subject():
    hits = [hit(MANPAGE, 0, lines=[1, 7])]
    text, numbered = passages_answer(hits, query="which group controls access to the libvirt daemon?")
    q = numbered[0]["quote"]
    assert q["text"].startswith("libvirt\n") and q["text"].endswith("controlled by this group.")
    assert q["lead"] == len("libvirt\n              ")
    assert MANPAGE[q["span"][0] - 100:q["span"][1] - 100] == q["text"]  # still exactly the document's text
    assert "> libvirt — Access to the system libvirt daemon is controlled by this group." in text, text
    assert q["lines"] == [4, 5]


def test_a_sentence_that_points_back_brings_the_sentence_it_points_to():
    hits = [hit(BACKREF, 0)]
    _, numbered = passages_answer(hits, query="when does the offsite start?")
    q = numbered[0]["quote"]
    assert q["text"].startswith("The offsite will be held in Lisbon") and "starts on 12 May" in q["text"], q
    # a title above a blank line is not brought along; a sentence that names its subject stands alone
    hits = [hit(SOURDOUGH, 0)]
    _, numbered = passages_answer(hits, query="how often do I feed the starter?")
    assert numbered[0]["quote"]["lead"] == 0


def test_a_period_written_as_one_word_meets_its_year():
    assert Q.words("What was FY2015 revenue? FY15, Q3'22") == \
        ["fiscal", "2015", "revenue", "fiscal", "2015", "q3", "2022"]
    quarter = hit("Revenue for the third quarter of 2015 was $1,217 million, up 21 percent.", 0)
    year = hit("Revenue for fiscal 2015 was $4,796 million, compared with $4,147 million in 2014.", 1, rel=0.9)
    _, numbered = passages_answer([quarter, year], query="What was Adobe's FY2015 revenue?")
    assert "4,796" in numbered[0]["quote"]["text"], numbered


def test_a_table_row_is_chosen_through_its_tables_title():
    """Two companies' rows read alike; only the table title says whose they are."""
    ours = hit("Operating income | Fiscal year 2022: 7,361.1 | Fiscal year 2021: 6,020.4", 0,
               table_title="Lumen Ferries statement of operations (in millions)", rel=0.8)
    theirs = hit("Operating income | Fiscal year 2022: 1,234.5 | Fiscal year 2021: 2,345.6", 1,
                 table_title="Orrin Textiles statement of operations (in millions)", rel=1.0)
    prose = hit("Lumen Ferries reported its results for the last three fiscal years.", 2, rel=0.9)
    _, numbered = passages_answer([theirs, prose, ours], query="What is the Operating income of Lumen Ferries "
                                                               "in fiscal 2022?")
    assert "7,361.1" in numbered[0]["quote"]["text"], numbered[0]["quote"]
