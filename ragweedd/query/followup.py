"""A follow-up question rewritten into a standalone query by rules (docs/answers.md, Conversations).

"and black tea?" after "How long should green tea steep?" searched alone finds whatever mentions
black tea; the question leans on the turn before it. Without an LLM the subject of the previous
turn is carried into the query by what its words are:

* **names**: words written as names (capitalised inside a sentence, with a digit or two capitals:
  "Adobe", "3M", "ALDH1", "PrP") that at most NAME_DF of the collection's chunks hold;
* **periods**: years and one-word periods ("2018", "FY2015", "Q3");
* **topic**: the other words, where carried only when rare (at most RARE_DF of the chunks: the
  collection's IDF says what tells documents apart in *this* collection).

Each kind is a slot the question may fill itself: "and in 2016?" fills the period, so the earlier
year is replaced and its names and topic are carried; "what about its operating margin?" fills the
topic and points back ("its"), so the names and the period are carried; "and Pfizer?" (an opener
and a new name) replaces the name. A question that varies the earlier topic ("and black tea?":
it shares "tea" and adds one or two words) keeps the earlier topic but for the word its own took
the place of ("green", the word before the shared "tea"); an ellipsis ("and green?", no shared word)
stands in for the start of the earlier phrase (``_ellipsis_swapped``). The words carried are appended to the
question as asked, so the keyword leg and the embedding both see them.

A question that stands alone is left alone: one that names a new subject without pointing back (a
new name, or rare words of its own none of which an earlier turn has, and no opener such as
"and"/"what about" or reference such as "it"/"the company"), and one to which nothing is left to
carry. Word lists here are English; in another language only the IDF-based parts apply.

The previous answer's documents rank first among equals (``prefer``) when the question keeps the
earlier names and period: it is about the same thing, so the document that answered is the likely
place. Filters of the earlier turn are carried by the caller when the question is a follow-up.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from ragweedd.contract import ThreadTurn

# A topic word in at most this share of the chunks tells documents apart; a name may be more
# common (a company's own filings repeat its name) and still does.
RARE_DF = 0.05
NAME_DF = 0.5
RARE_MIN_DF = 3  # a word of at most this many chunks (and a third of them) is rare in any collection
# Below this many chunks document frequencies say nothing (two notes about tea both hold "tea"):
# every word that is no stop word and is held by some chunk counts as the subject's.
SMALL_COLLECTION = 30
MAX_CARRY = 6
# A short question whose own new topic words are at most this many, beside a word it shares with
# the earlier turn, varies that turn's topic rather than replacing it ("and black tea?").
VARIATION_WORDS = 2
# A question that neither opens as a follow-up nor points back, and has at least this many words of
# its own (names and topic, rare or not), asks a whole question: it stands alone.
STANDALONE_WORDS = 3
# How far up the previous answer's documents move: their hits are ranked as if their relative
# score (0..1 within the results) were this much higher.
PREFER_BONUS = 0.15

_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)
_PERIOD = re.compile(r"^(?:(?:19|20)\d\d|fy\d{2,4}|cy\d{2,4}|q[1-4]|h[12]|(?:19|20)\d\dq[1-4])$", re.I)
STOP = frozenset("""
a about above after again against all also am an and any are aren as at be because been before being
below between both but by can cannot could did didn do does doesn doing don down during each else ever
few for from further get got had has have having here how i if in into is isn just let may me might
more most much must my no nor not now of off on once only or other our out over own per please same
should so some such than that the then there these they this those through to too under until up
upon us very via was wasn we were weren what when where whether which while who whom whose why will
with within without would yes yet you your s t tell give show explain describe list say said compare
versus vs often long far soon usually typically exactly really ago
""".split())
# Pronouns that point back to an earlier turn's subject rather than name one. "this", "that",
# "these" and "those" mostly introduce a clause or a noun of the question itself ("the geographies
# that Pepsico operates in"): they point back only standing alone ("what caused this?") or in a
# referring phrase (_REFERRING).
POINTERS = frozenset("it its itself they them their theirs themselves he him his she her hers former latter".split())
DEMONSTRATIVES = frozenset("this that these those".split())
# General nouns a follow-up refers with ("the company", "which study", "the opposite"): they
# name no subject of their own.
DISCOURSE = frozenset("""
company companies firm business study studies paper papers article trial trials report reports
document documents source sources one ones opposite contrary same similar different difference
other another else instead again more less detail details example examples year years period
quarter quarters case cases result results finding findings found find show shows showed claim
claims answer question part thing things way effect effects kind kinds type types cause caused causes
happen happened happens change changed changes mean means meant reason reasons affect affected impact
""".split())
_OPENERS = ("and", "also", "but", "or", "then", "so", "plus", "what about", "how about", "what of",
            "as for", "same for", "and what about", "and how about", "what if")
_REFERRING = re.compile(r"\b(?:(?:the|that|this|those|these)\s+(?:company|companies|firm|business|study|studies|"
                        r"paper|article|trial|same|opposite|previous|former|latter)|(?:that|those)\s+(?:year|years|"
                        r"period|quarter|one|ones)|the\s+same\s+(?:year|period|quarter|company|study))\b", re.I)


@dataclass
class Word:
    text: str  # as written
    word: str  # lower-cased, as the keyword index is asked
    at: int  # token index in its text
    kind: str  # "stop", "period", "number", "name", "topic", "pointer", "discourse"
    df: int = 0
    rare: bool = False


@dataclass
class RuleRewrite:
    """What the rules made of a question: the query to search (the question itself when
    ``rewritten`` is false) and why."""

    query: str
    rewritten: bool
    reason: str
    carried: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)
    same_subject: bool = False  # keeps the earlier names and period: the answer's documents are preferred


Stats = Callable[[list[str]], tuple[dict[str, int], int]]


def stem(word: str) -> str:
    """A light suffix stripper: enough to tell "steeping" is "steep" and "studies" is "study"."""
    w = word.lower()
    for suffix, keep in (("ies", "y"), ("sses", "ss"), ("ing", ""), ("ed", ""), ("es", ""), ("s", "")):
        if w.endswith(suffix) and len(w) - len(suffix) >= 3 and not w.endswith("ss"):
            return w[: len(w) - len(suffix)] + keep
    return w


def words_of(text: str) -> list[Word]:
    """The text's words with their kind; a capital that only opens a sentence is no name."""
    out: list[Word] = []
    for i, m in enumerate(_TOKEN.finditer(text)):
        t = m.group(0)
        low = t.lower()
        before = text[:m.start()].rstrip(" \t\"'“‘([")
        opens = not before or before[-1] in ".?!:;\n" or before.endswith("\n")
        after = text[m.end():].lstrip(" \t\"'”’)]")
        if low in POINTERS or (low in DEMONSTRATIVES and (not after or not after[0].isalnum())):
            kind = "pointer"
        elif _PERIOD.match(low):
            kind = "period"
        elif low.isdigit() or len(low) == 1:
            kind = "number" if low.isdigit() else "stop"
        elif low in STOP:
            kind = "stop"
        elif low in DISCOURSE:
            kind = "discourse"
        elif _is_name(t, opens):
            kind = "name"
        else:
            kind = "topic"
        out.append(Word(t, low, i, kind))
    return out


def _is_name(t: str, opens: bool) -> bool:
    if any(c.isdigit() for c in t) and any(c.isalpha() for c in t):
        return True
    if sum(1 for c in t if c.isupper()) >= 2:
        return True
    return t[:1].isupper() and not opens


def _opener(question: str) -> bool:
    q = " ".join(_TOKEN.findall(question.lower()))
    return any(q == o or q.startswith(o + " ") for o in _OPENERS)


def rewrite(question: str, thread: list[ThreadTurn], stats: Stats) -> RuleRewrite:
    """The query to search for ``question`` asked after ``thread`` (oldest first). ``stats(words)``
    gives the words' document frequencies in the collections searched and their chunk count."""
    if not thread:
        return RuleRewrite(question, False, "the first question of the conversation")
    prev = thread[-1]["query"] or thread[-1]["question"]
    own, before = words_of(question), words_of(prev)
    dfs, n = stats(sorted({w.word for w in own + before if w.kind in ("name", "topic", "period")}))
    for w in own + before:
        w.df = int(dfs.get(w.word, 0))
        # in a collection of a few chunks a word of one, two or three of them still tells them apart
        w.rare = 0 < w.df and (n < SMALL_COLLECTION or
                               w.df <= max((NAME_DF if w.kind == "name" else RARE_DF) * n, min(RARE_MIN_DF, n / 3)))
    earlier = {stem(w.word) for t in thread for w in words_of(f"{t['question']} {t['query']}")
               if w.kind in ("name", "topic", "period")}
    names = [w for w in own if w.kind == "name"]
    new_names = [w for w in names if stem(w.word) not in earlier]
    subject = [w for w in own if (w.kind == "name" or w.kind == "topic") and w.rare]
    shared = [w for w in subject if stem(w.word) in earlier]
    opener = _opener(question)
    # a pronoun points back unless a name of the question itself stands before it ("Does 3M ... its")
    first_pointer = next((w.at for w in own if w.kind == "pointer"), None)
    pointer = first_pointer is not None and not any(w.at < first_pointer for w in new_names)
    refers = bool(_REFERRING.search(question)) or pointer
    if not (opener or refers):
        if new_names:
            return RuleRewrite(question, False, "it names a new subject: " + ", ".join(w.text for w in new_names))
        if subject and not shared:
            return RuleRewrite(question, False, "it shares its rare words with no earlier turn: "
                               + ", ".join(w.text for w in subject[:4]))
        whole = [w for w in own if w.kind in ("name", "topic")]
        if len({stem(w.word) for w in whole}) >= STANDALONE_WORDS:
            return RuleRewrite(question, False, "it asks a whole question of its own, pointing back nowhere")
    carried: list[Word] = []
    replaced: list[Word] = []

    def slot(kind: str, fill: bool, mine: list[Word]) -> None:
        theirs = [w for w in before if w.kind == kind and (w.rare or kind == "period")]
        if fill:
            have = {stem(w.word) for w in mine}
            replaced.extend(w for w in theirs if stem(w.word) not in have)
        else:
            carried.extend(theirs)

    # names: a reference back keeps the earlier ones; a new name after an opener takes their place
    slot("name", bool(new_names) and not refers, names)
    periods = [w for w in own if w.kind == "period"]
    slot("period", bool(periods), periods)
    topic = [w for w in own if w.kind == "topic"]
    new_topic = [w for w in topic if stem(w.word) not in earlier]
    shared_topic = [w for w in topic if stem(w.word) in earlier]
    theirs = [w for w in before if w.kind == "topic" and w.rare]
    named = any(w.kind == "name" for w in carried)
    if not topic or (refers and not named and not new_names):
        # nothing of its own, or "it"/"they" pointing at an earlier subject that no name gives:
        # the earlier topic is what it points at ("and when are they relaxed?" after cats purring)
        carried.extend(theirs)
    elif shared_topic and len(new_topic) <= VARIATION_WORDS and len(topic) <= VARIATION_WORDS + 2:
        swapped = _swapped(before, own, shared_topic)
        replaced.extend(w for w in theirs if w.at in swapped)
        carried.extend(w for w in theirs if w.at not in swapped)
    elif opener and not shared_topic and not new_names and len(topic) <= VARIATION_WORDS:
        # an ellipsis ("and green?" after "how long should black tea steep?"): its words stand in
        # for the earlier phrase's first words, the rest of the earlier subject is what it asks about
        swapped = _ellipsis_swapped(theirs, len(topic), _determined(question, topic))
        replaced.extend(w for w in theirs if w.at in swapped)
        carried.extend(w for w in theirs if w.at not in swapped)
    else:
        replaced.extend(w for w in theirs if stem(w.word) not in {stem(t.word) for t in topic})
    mine = {stem(w.word) for w in own}
    picked: list[Word] = []
    seen: set[str] = set()
    for w in sorted(carried, key=lambda w: (w.kind != "period", w.df, w.at)):
        s = stem(w.word)
        if s in mine or s in seen:
            continue
        seen.add(s)
        picked.append(w)
    picked = sorted(picked[:MAX_CARRY], key=lambda w: w.at)
    lost = [w.text for w in replaced if stem(w.word) not in mine]
    same = not any(w.kind in ("name", "period") for w in replaced)
    if not picked:
        return RuleRewrite(question, False, "it names its subject itself: nothing of the earlier turn is "
                           "missing from it", replaced=list(dict.fromkeys(lost)), same_subject=same)
    query = question.rstrip() + " " + " ".join(w.text for w in picked)
    why = "it " + ("points back" if refers else "continues" if opener else "leaves out its subject")
    return RuleRewrite(query, True, why + ": carried " + ", ".join(w.text for w in picked) + " from turn "
                       f"{len(thread)}", [w.text for w in picked], list(dict.fromkeys(lost)), same)


def _swapped(before: list[Word], own: list[Word], shared: list[Word]) -> set[int]:
    """Positions of the earlier words the question's own took the place of: the word right before
    a shared word, when the question has a different word right there ("green" tea -> "black" tea)."""
    out = set()
    keys = {stem(w.word) for w in shared}
    for i, w in enumerate(before):
        if stem(w.word) not in keys or i == 0:
            continue
        j = next((k for k, o in enumerate(own) if stem(o.word) == stem(w.word)), None)
        if j is None or j == 0:
            continue
        mine, theirs = own[j - 1], before[i - 1]
        if mine.kind in ("topic", "name") and stem(mine.word) != stem(theirs.word):
            out.add(theirs.at)
    return out


def _ellipsis_swapped(theirs: list[Word], k: int, determined: bool) -> set[int]:
    """Positions of the earlier topic words the ``k`` words of an ellipsis take the place of.

    A noun phrase with its determiner ("and the brake pads?") stands in for the earlier turn's last
    phrase, its object ("chain" of "how often should I lubricate the chain?"). Otherwise, in the
    earlier turn's first phrase of two or more topic words, one word stands in for its first word
    and keeps the head ("and green?" after "black tea"), two or more for the whole phrase ("what
    about its operating margin?" after "capital expenditure"); with no such phrase, one stands in
    for the first topic word ("caffeine" of "how does caffeine affect sleep?" for "and alcohol?")."""
    runs: list[list[Word]] = []
    for w in theirs:
        if runs and w.at == runs[-1][-1].at + 1:
            runs[-1].append(w)
        else:
            runs.append([w])
    if not runs:
        return set()
    if determined:
        return {w.at for w in runs[-1]}
    phrase = next((r for r in runs if len(r) >= 2), None)
    if phrase is not None:
        return {w.at for w in (phrase[:1] if k == 1 else phrase)}
    return {runs[0][0].at}


def _determined(question: str, topic: list[Word]) -> bool:
    """Whether the question's own words open with an article ("and the brake pads?"): a noun
    phrase of its own, not a modifier of the earlier one."""
    words = _TOKEN.findall(question.lower())
    first = topic[0].at if topic else 0
    return first > 0 and words[first - 1] in ("the", "a", "an")


def carried_filters(given: dict[str, Any], thread: list[ThreadTurn]) -> tuple[dict[str, Any], bool]:
    """The filters of a follow-up: its own when it has any, else the previous turn's."""
    if any(v not in (None, [], "") for v in given.values()) or not thread:
        return given, False
    prev = {k: v for k, v in (thread[-1].get("filters") or {}).items() if k in given and v not in (None, [], "")}
    return ({**given, **prev}, True) if prev else (given, False)


def prefer(results: list[dict[str, Any]], doc_ids: Iterable[str], limit: int) -> list[dict[str, Any]]:
    """``results`` with the hits of ``doc_ids`` ranked as if their relative score were
    PREFER_BONUS higher, cut to ``limit`` and numbered again (``rank``); scores are kept."""
    wanted = set(doc_ids)
    if not wanted:
        return results[:limit]
    order = sorted(range(len(results)), key=lambda i: (
        -((results[i].get("rel_score") or 0.0) + (PREFER_BONUS if results[i].get("doc_id") in wanted else 0.0)), i))
    out = [results[i] for i in order[:limit]]
    for r, h in enumerate(out, 1):
        h["rank"] = r
    return out
