"""Greedy packing of sources into the synthesis model's context budget, and their serialisation.

Tokens are estimated as ceil(chars / 3.5), a deliberately pessimistic ratio (English averages ~4
chars/token) so that the prompt never overflows a real tokenizer's count.
"""

from __future__ import annotations

import math

from ragweedd.errors import ConfigError

CHARS_PER_TOKEN = 3.5
SAFETY_TOKENS = 64  # role markers and formatting the estimate does not see


def estimate_tokens(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN) if text else 0


def _clock(t: float) -> str:
    t = int(t)
    return f"{t // 3600:d}:{t % 3600 // 60:02d}:{t % 60:02d}" if t >= 3600 else f"{t // 60:d}:{t % 60:02d}"


def _one_line(name: object) -> str:
    # A label is one line of the answer text and of the prompt: a newline or another control
    # character in a file name must neither break that layout nor reach a terminal.
    named = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}
    return "".join(c if c.isprintable() else named.get(c) or (f"\\x{ord(c):02x}" if ord(c) < 256 else
                                                              f"\\u{ord(c):04x}") for c in str(name))


def source_label(hit: dict) -> str:
    """``collection/path [p.PAGE]`` (page and timestamp only when known), on one line. The path is the
    file's, relative to its collection root, so files of one name in two subfolders stay apart."""
    name = hit.get("source_rel_path") or hit.get("filename") or hit.get("source_file") or "?"
    label = _one_line(f"{hit.get('collection') or '?'}/{name}")
    if hit.get("member"):
        label += f"!{_one_line(hit['member'])}"
    if hit.get("page_label"):
        label += f" [p.{hit['page_label']}]"
    if hit.get("t_start") is not None:
        label += f" [t.{_clock(hit['t_start'])}]"
    return label


def serialise_source(n: int, hit: dict, text: str | None = None) -> str:
    lines = [f"[{n}] SOURCE: {source_label(hit)}"]
    ann = (hit.get("annotation") or "").strip()
    if ann:
        lines.append(f"ANNOTATION: {ann}")
    lines.append((hit.get("text") or "") if text is None else text)
    return "\n".join(lines)


def pack_sources(hits: list[dict], *, context_tokens: int, max_tokens: int, context_chunks: int,
                 overhead_tokens: int = 0) -> tuple[list[dict], list[dict], dict]:
    """Choose sources by descending rel_score while they fit.

    Returns (packed, left_out, budget). ``packed`` items are copies of the hits with ``n`` (1-based,
    the number the model cites) and ``block`` (their serialised text). A source that does not fit is
    skipped and smaller ones after it may still go in. If not even the best source fits, its text is
    cut to the budget so an answer always has something to stand on.
    """
    budget = context_tokens - max_tokens - overhead_tokens - SAFETY_TOKENS
    if budget < 50:
        raise ConfigError(
            f"llm.context_tokens ({context_tokens}) leaves no room for sources after max_tokens ({max_tokens}) "
            f"and the prompt ({overhead_tokens} tokens)",
            hint="raise llm.context_tokens to the model's real window or lower max_tokens",
        )
    ordered = sorted(hits, key=lambda h: (-(h.get("rel_score") or 0.0), -(h.get("score") or 0.0)))
    packed: list[dict] = []
    left: list[dict] = []
    used = 0
    for hit in ordered:
        if len(packed) >= context_chunks:
            left.append(hit)
            continue
        n = len(packed) + 1
        block = serialise_source(n, hit)
        cost = estimate_tokens(block) + 2  # the blank line between sources
        if used + cost <= budget:
            packed.append({**hit, "n": n, "block": block})
            used += cost
        elif not packed and not left:
            head = estimate_tokens(serialise_source(n, hit, "")) + 2
            keep_chars = max(0, int((budget - head) * CHARS_PER_TOKEN) - 1)
            block = serialise_source(n, hit, (hit.get("text") or "")[:keep_chars])
            packed.append({**hit, "n": n, "block": block, "truncated": True})
            used += estimate_tokens(block) + 2
        else:
            left.append(hit)
    return packed, left, {"budget_tokens": budget, "used_tokens": used, "overhead_tokens": overhead_tokens}
