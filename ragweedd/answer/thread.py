"""The earlier turns of a conversation in the synthesis prompt (docs/answers.md, Conversations).

They go in as the chat's own user and assistant turns before the question and its sources, so the
model reads "and black tea?" after "How long should green tea steep?" and what it answered. They
share the context budget with the sources: at most THREAD_SHARE of what is left after the prompt,
the newest turns first, so the oldest are dropped first; each answer is given without its [N]
marks (they point at that turn's sources; this answer's sources are numbered anew) and cut at
ANSWER_CHARS. What they took is counted in the answer's ``budget``.
"""

from __future__ import annotations

from ragweedd.answer.packing import estimate_tokens
from ragweedd.contract import ThreadTurn

THREAD_SHARE = 0.25
ANSWER_CHARS = 2000
NO_ANSWER = "(no answer was given)"
TURN_OVERHEAD = 8  # two role markers


def fit_thread(thread: list[ThreadTurn] | None, budget_tokens: int) -> tuple[list[dict[str, str]], dict[str, int]]:
    """The messages of the newest earlier turns that fit in ``budget_tokens`` (oldest first), and
    {"thread_tokens", "thread_turns", "thread_turns_left_out"}."""
    kept: list[tuple[str, str]] = []
    used = 0
    for t in reversed(thread or []):
        q = " ".join(t["question"].split())
        a = t["answer"].strip()
        a = (a[:ANSWER_CHARS].rsplit(" ", 1)[0] + " …") if len(a) > ANSWER_CHARS else (a or NO_ANSWER)
        cost = estimate_tokens(q) + estimate_tokens(a) + TURN_OVERHEAD
        if used + cost > budget_tokens:
            break  # the oldest are left out first: nothing older goes in once one does not fit
        kept.append((q, a))
        used += cost
    kept.reverse()
    msgs = [m for q, a in kept for m in ({"role": "user", "content": q}, {"role": "assistant", "content": a})]
    return msgs, {"thread_tokens": used, "thread_turns": len(kept),
                  "thread_turns_left_out": len(thread or []) - len(kept)}


def thread_budget(context_tokens: int, max_tokens: int, overhead_tokens: int, safety: int) -> int:
    """The tokens the earlier turns may take: THREAD_SHARE of what the prompt leaves."""
    return max(0, int((context_tokens - max_tokens - overhead_tokens - safety) * THREAD_SHARE))
