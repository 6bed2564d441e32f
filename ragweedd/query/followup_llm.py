"""A follow-up question rewritten into a standalone query by the synthesis LLM, in one short call
(docs/answers.md, Conversations).

The model sees the earlier turns (each question, and the start of its answer, without the [N] marks
that point at sources this call does not see) and the new question, and writes the query
to search. Its prompt, reply, tokens and time are recorded (``RewriteCall``); a failure (the
provider down, a timeout, a reply that is empty or not one line of query) never fails the answer:
the question is searched as asked and the record says why.
"""

from __future__ import annotations

import re
import time
from typing import Any

from ragweedd.contract import RewriteCall, ThreadTurn
from ragweedd.errors import RagweedError

SYSTEM = ("You rewrite the last question of a conversation into one standalone search query for the user's "
          "documents. Keep the question's own words, and add from the earlier turns only what the question "
          "leaves out or points back to (the company, product, study, period or topic). If the question "
          "already stands alone, repeat it unchanged. Reply with the query alone, on one line, without "
          "quotes or explanation.")
PROMPT_HEAD = "CONVERSATION:"
PROMPT_TAIL = "LAST QUESTION: {QUESTION}\n\nStandalone search query:"
ANSWER_CHARS = 300  # of each earlier answer: enough to name what it was about
MAX_TOKENS = 128
MAX_QUERY_CHARS = 1000
_LABEL = re.compile(r"^(?:standalone\s+)?(?:search\s+)?query\s*:\s*", re.I)


def messages(question: str, thread: list[ThreadTurn]) -> list[dict[str, str]]:
    lines = [PROMPT_HEAD]
    for i, t in enumerate(thread, 1):
        lines.append(f"Q{i}: {' '.join(t['question'].split())}")
        answer = " ".join(t["answer"].split())
        if answer:
            lines.append(f"A{i}: {answer[:ANSWER_CHARS]}{'…' if len(answer) > ANSWER_CHARS else ''}")
    user = "\n".join(lines) + "\n\n" + PROMPT_TAIL.replace("{QUESTION}", " ".join(question.split()))
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


def query_of(reply: str) -> str | None:
    """The query in a reply: its first non-empty line without a "Query:" label or quotes; None when
    there is none, or it is too long to be one."""
    for line in (reply or "").splitlines():
        q = _LABEL.sub("", line.strip()).strip().strip('"“”\'`').strip()
        if q:
            return q if len(q) <= MAX_QUERY_CHARS else None
    return None


async def rewrite(question: str, thread: list[ThreadTurn], provider: Any) -> tuple[str | None, RewriteCall]:
    """(the query, or None when the call failed or its reply is unusable; the call's record).
    ``provider`` is a ChatProvider; its errors are caught and recorded, never raised."""

    msgs = messages(question, thread)
    call: RewriteCall = {"provider": provider.spec, "model": provider.model, "messages": msgs, "reply": None,
                         "input_tokens": 0, "output_tokens": 0, "calls": 0, "ms": 0.0}
    calls0 = provider.calls
    t0 = time.perf_counter()
    try:
        res = await provider.complete(msgs, max_tokens=MAX_TOKENS, temperature=0.0)
    except Exception as e:  # noqa: BLE001 - a failed rewrite searches the question as asked
        call["error"] = (e.message if isinstance(e, RagweedError) else f"{type(e).__name__}: {e}")[:300]
        return None, _done(call, provider, calls0, t0)
    call["reply"] = res.text
    usage = res.usage or {}
    call["input_tokens"] = int(usage.get("input_tokens") or 0)
    call["output_tokens"] = int(usage.get("output_tokens") or 0)
    if res.model:
        call["model"] = res.model
    query = query_of(res.text)
    if query is None:
        call["error"] = "the reply holds no usable query (empty, or longer than a query)"
    return query, _done(call, provider, calls0, t0)


def _done(call: RewriteCall, provider: Any, calls0: int, t0: float) -> RewriteCall:
    call["calls"] = max(1, provider.calls - calls0)
    call["ms"] = round((time.perf_counter() - t0) * 1000, 1)
    return call
