"""Answer quality with an LLM judge (docs/answers.md, "Evaluating answers"): ``ragweedd eval answers``.

Each question of a JSON Lines file is searched and answered exactly as ``ragweedd ask`` answers it
(no history entry is written), then scored:

- faithfulness: the judge lists the answer's claims and says of each whether the sources given to
  the answering model support it; the share supported;
- answer relevance: the judge rates 0-10 how directly and completely the answer addresses the
  question; the rating / 10;
- context precision: the judge says of each source, in the order it was given, whether it is useful
  for answering (against the reference when there is one); average precision over those verdicts;
- context recall: with a ``reference``, the judge splits it into statements and says of each whether
  the sources hold it; the share held. Without one but with ``relevant`` files, the share of those
  files among the sources (no judge call). Else not measured;
- citations: the deterministic citation check of every answer (ragweedd/answer/verify.py): the share
  of ``[N]`` citations whose source holds the claim.

A judge failure (provider error, a reply that is not the JSON asked for) leaves that metric empty
for that question with the error recorded; the run goes on. But a provider that cannot work at all
-- a rejected key, an unknown model, a server it cannot reach -- stops the run on the first
question, from the judge or from the answering model: every later call would fail the same way.
An answer detected as a refusal and nothing else (``refused_only``) is not judged for faithfulness
(nothing to be faithful to): the metric is N/A for it. Means come with 95 % bootstrap intervals
over the questions that have a value.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Sequence

from ragweedd.errors import (
    JudgeError,
    ProviderAuthError,
    ProviderError,
    ProviderModelMissing,
    RagweedError,
    RequestError,
)
from ragweedd.eval.metrics import bootstrap_ci
from ragweedd.eval.questions import file_matches, read_lines

if TYPE_CHECKING:
    from ragweedd.llm.base import ChatProvider

METRICS = ("faithfulness", "answer_relevance", "context_precision", "context_recall", "citations")
CONTEXT_CHARS = 1500  # of each source, in the judge's prompts
JUDGE_MAX_TOKENS = 1024
HINT = 'each line is {"question": "...", "reference"?: "...", "relevant"?: ["file", ...]} (see docs/answers.md)'

FAITHFULNESS = """Here are numbered sources and an answer written from them.

Sources:
{CONTEXT}

Answer:
{ANSWER}

List every factual claim the answer makes (ignore the [N] citation marks) and say for each whether \
the sources support it. Reply with JSON only: {"claims": [{"claim": "...", "supported": true}, ...]}"""
RELEVANCE = """Question: {QUESTION}

Answer:
{ANSWER}

Rate from 0 to 10 how directly and completely the answer addresses the question (0: it does not; \
10: fully and only what was asked). Whether it is true does not matter here. Reply with JSON only: \
{"score": N}"""
PRECISION = """Question: {QUESTION}
{REFERENCE}
Numbered passages:
{CONTEXT}

Say for each passage, in order, whether it is useful for answering the question (1) or not (0). \
Reply with JSON only: {"verdicts": [1, 0, ...]} with exactly {COUNT} numbers."""
RECALL = """Reference answer:
{REFERENCE}

Numbered passages:
{CONTEXT}

Split the reference answer into its statements and say for each whether the passages contain it. \
Reply with JSON only: {"statements": [{"statement": "...", "attributed": true}, ...]}"""


@dataclass
class Item:
    id: str
    question: str
    reference: str | None = None
    relevant: list[str] = field(default_factory=list)


def hopeless(e: BaseException) -> bool:
    """A provider failure that every later call would repeat: key, model name, or no connection."""

    if isinstance(e, (ProviderAuthError, ProviderModelMissing)):
        return True
    return isinstance(e, ProviderError) and ("cannot connect" in e.message or "cannot reach" in e.message)


def _stopped(e: Any, who: str, fix: str) -> Exception:
    """``e`` again (same class, same exit code), saying the run stopped and what to change."""
    msg = f"eval answers stopped at the first question: {who} failed: {e.message}"
    return type(e)(msg, hint=f"{e.hint}; {fix}" if e.hint else fix)


def load(path: str | os.PathLike) -> list[Item]:
    """The questions of a JSONL file; a bad line is an error naming its number and what is wrong."""

    return read_lines(path, _item, HINT)


def _item(obj: Any, n: int) -> Item:
    if not isinstance(obj, dict):
        raise RequestError(f"a line must be a JSON object, not {type(obj).__name__}")
    q = obj.get("question")
    if not isinstance(q, str) or not q.strip():
        raise RequestError("'question' must be a non-empty string")
    ref = obj.get("reference")
    if ref is not None and (not isinstance(ref, str) or not ref.strip()):
        raise RequestError("'reference' must be a non-empty string when given")
    rel = obj.get("relevant")
    files: list[str] = []
    if rel is not None:
        if not isinstance(rel, list):
            raise RequestError("'relevant' must be a list of file names (or {\"file\": ...} objects)")
        for r in rel:
            f = r.get("file") if isinstance(r, dict) else r
            if not isinstance(f, str) or not f.strip():
                raise RequestError(f"'relevant' holds {r!r}; each must be a file name or {{\"file\": \"...\"}}")
            files.append(f)
    unknown = set(obj) - {"id", "question", "reference", "relevant"}
    if unknown:
        raise RequestError(f"unknown field(s) {', '.join(sorted(unknown))}")
    return Item(str(obj.get("id") or n), q.strip(), ref.strip() if ref else None, files)


# --------------------------------------------------------------------------- scoring
def average_precision(verdicts: Sequence[int]) -> float:
    """Mean of precision@k over the ranks k of the useful passages (0 when none is useful)."""
    hits, total = 0, 0.0
    for k, v in enumerate(verdicts, 1):
        if v:
            hits += 1
            total += hits / k
    return total / hits if hits else 0.0


def reply_json(text: str) -> dict:
    m = re.search(r"\{.*\}", text or "", re.S)
    if m is None:
        raise JudgeError(f"the judge's reply holds no JSON object: {(text or '')[:120]!r}")
    try:
        obj = json.loads(m.group(0))
    except ValueError as e:
        raise JudgeError(f"the judge's JSON does not parse ({e}): {m.group(0)[:120]!r}") from None
    if not isinstance(obj, dict):
        raise JudgeError("the judge's JSON is not an object")
    return obj


def _flags(obj: dict, key: str, flag: str) -> list[bool]:
    items = obj.get(key)
    if not isinstance(items, list) or not all(isinstance(i, dict) and isinstance(i.get(flag), bool) for i in items):
        raise JudgeError(f"the judge's JSON needs '{key}': a list of objects with a true/false '{flag}'")
    return [i[flag] for i in items]


def score_faithfulness(reply: str) -> float | None:
    flags = _flags(reply_json(reply), "claims", "supported")
    return sum(flags) / len(flags) if flags else None  # no claim (a refusal): nothing to be faithful to


def score_relevance(reply: str) -> float:
    s = reply_json(reply).get("score")
    if isinstance(s, bool) or not isinstance(s, (int, float)) or not 0 <= s <= 10:
        raise JudgeError(f"the judge's 'score' must be a number from 0 to 10, not {s!r}")
    return float(s) / 10


def score_precision(reply: str, count: int) -> float:
    v = reply_json(reply).get("verdicts")
    if not isinstance(v, list) or len(v) != count or any(x not in (0, 1) or isinstance(x, float) for x in v):
        raise JudgeError(f"the judge's 'verdicts' must be {count} numbers 0 or 1, not {str(v)[:80]}")
    return average_precision([int(x) for x in v])


def score_recall(reply: str) -> float | None:
    flags = _flags(reply_json(reply), "statements", "attributed")
    return sum(flags) / len(flags) if flags else None


def files_recall(item: Item, sources: Sequence[dict]) -> float:
    return sum(1 for f in item.relevant if any(file_matches(s, f) for s in sources)) / len(item.relevant)


def _context(sources: Sequence[dict]) -> str:
    return "\n\n".join(f"[{i}] {(s.get('text') or s.get('excerpt') or '')[:CONTEXT_CHARS]}"
                       for i, s in enumerate(sources, 1))


def _fill(template: str, **values: str) -> str:
    return re.sub(r"\{([A-Z]+)\}", lambda m: values.get(m.group(1), m.group(0)), template)


async def judge_one(item: Item, done: dict, judge: ChatProvider, *, stop_hopeless: bool = False) -> dict[str, Any]:
    """The scores of one answered question: {metric: value or None}, ``errors`` {metric: why},
    ``not_applicable`` (metrics with no value by nature: faithfulness of a refusal), and the judge's
    cost. Calls run one after another, so a rate-limited judge is not flooded. ``stop_hopeless``:
    a provider failure that every later call would repeat (``hopeless``) is raised, not recorded."""
    sources = [s for s in done.get("sources") or []]
    answer = done.get("answer") or ""
    scores: dict[str, Any] = {m: None for m in METRICS}
    errors: dict[str, str] = {}
    cost = {"calls": 0, "input_tokens": 0, "output_tokens": 0}

    async def ask(prompt: str) -> str:
        res = await judge.complete([{"role": "user", "content": prompt}], max_tokens=JUDGE_MAX_TOKENS,
                                   temperature=0.0)
        cost["calls"] += 1
        cost["input_tokens"] += res.usage.get("input_tokens", 0)
        cost["output_tokens"] += res.usage.get("output_tokens", 0)
        return res.text

    async def metric(name: str, run: Callable[[], Awaitable[float | None]]) -> None:
        try:
            scores[name] = await run()
        except JudgeError as e:
            errors[name] = str(e)
        except Exception as e:  # noqa: BLE001 - one failed judge call must not end the run
            if stop_hopeless and hopeless(e):
                raise _stopped(e, f"the judge {getattr(judge, 'spec', '')}".rstrip(),
                               "pass a working --judge PROVIDER:MODEL or fix [llm] judge") from None
            errors[name] = f"{type(e).__name__}: {str(e)[:300]}"

    ctx = _context(sources)
    not_applicable: list[str] = []
    # a refusal claims nothing (docs/answers.md); an answer that refuses one part and answers the
    # rest (refused, not refused_only) has claims to judge
    if done.get("refused_only", done.get("refused")):
        not_applicable.append("faithfulness")
    elif sources and answer.strip():
        async def faith() -> float | None:
            return score_faithfulness(await ask(_fill(FAITHFULNESS, CONTEXT=ctx, ANSWER=answer)))

        await metric("faithfulness", faith)
    if answer.strip():
        async def rel() -> float | None:
            return score_relevance(await ask(_fill(RELEVANCE, QUESTION=item.question, ANSWER=answer)))

        await metric("answer_relevance", rel)
    if sources:
        ref = f"Reference answer: {item.reference}\n" if item.reference else ""

        async def prec() -> float | None:
            return score_precision(await ask(_fill(PRECISION, QUESTION=item.question, REFERENCE=ref, CONTEXT=ctx,
                                                   COUNT=str(len(sources)))), len(sources))

        await metric("context_precision", prec)
    else:
        scores["context_precision"] = 0.0
    reference = item.reference
    if reference:
        async def rec() -> float | None:
            if not sources:
                return 0.0
            return score_recall(await ask(_fill(RECALL, REFERENCE=reference, CONTEXT=ctx)))

        await metric("context_recall", rec)
    elif item.relevant:
        scores["context_recall"] = files_recall(item, sources)
    cv = done.get("citations_verified")
    if cv and cv.get("checked"):
        scores["citations"] = cv["supported"] / cv["checked"]
    return {"scores": scores, "errors": errors, "not_applicable": not_applicable, "judge": cost,
            "recall_method": "judge" if item.reference else "files" if item.relevant else None}


async def evaluate(items: Sequence[Item], answer: Callable[[str], Awaitable[dict]], judge: ChatProvider, *,
                   progress: Callable[[str], None] | None = None, samples: int = 1000,
                   answer_spec: str | None = None) -> dict[str, Any]:
    """Answer and score every item; ``answer(question)`` returns the answer's done record. A
    question whose answer fails is recorded with its error and left out of every mean, except on
    the first question a ``hopeless`` provider failure, which stops the run (raised)."""

    rows: list[dict[str, Any]] = []
    for i, item in enumerate(items, 1):
        row: dict[str, Any] = {"id": item.id, "question": item.question}
        try:
            done = await answer(item.question)
        except RagweedError as e:
            if i == 1 and hopeless(e):
                raise _stopped(e, f"the answering model {answer_spec or ''}".rstrip(),
                               "fix [llm] synthesis (the model that answers)") from None
            row.update(error=e.to_dict(), scores={m: None for m in METRICS}, errors={})
            rows.append(row)
            continue
        row.update(answer=done.get("answer"), mode=done.get("mode"), refused=done.get("refused"),
                   sources=[{"n": s.get("n"), "file": os.path.basename(s.get("source_file") or ""),
                             "page": s.get("page_label")} for s in done.get("sources") or []])
        row.update(await judge_one(item, done, judge, stop_hopeless=i == 1))
        rows.append(row)
        if progress:
            progress(f"{i}/{len(items)} questions")
    metrics: dict[str, dict[str, Any]] = {}
    for m in METRICS:
        vals = [r["scores"][m] for r in rows if r["scores"].get(m) is not None]
        lo, hi = bootstrap_ci(vals, samples=samples)
        metrics[m] = {"mean": sum(vals) / len(vals) if vals else None, "lo": lo if vals else None,
                      "hi": hi if vals else None, "n": len(vals),
                      "errors": sum(1 for r in rows if m in r.get("errors", {})),
                      "not_applicable": sum(1 for r in rows if m in r.get("not_applicable", []))}
    return {"questions": len(rows), "failed": sum(1 for r in rows if "error" in r),
            "judge": getattr(judge, "spec", None), "metrics": metrics, "per_question": rows}


def table(res: dict[str, Any]) -> str:
    lines = [f"{res['questions']} questions ({res['failed']} failed to answer), judge {res.get('judge')}", "",
             f"{'metric':<18} {'mean':>6}  {'95% interval':<16} {'n':>4} {'errors':>6}",
             f"{'-' * 18} {'-' * 6}  {'-' * 16} {'-' * 4} {'-' * 6}"]
    for name, m in res["metrics"].items():
        if m["mean"] is None:
            lines.append(f"{name:<18} {'-':>6}  {'':<16} {m['n']:>4} {m['errors']:>6}")
        else:
            iv = f"[{m['lo']:.3f}, {m['hi']:.3f}]"
            lines.append(f"{name:<18} {m['mean']:6.3f}  {iv:<16} {m['n']:>4} {m['errors']:>6}")
    for name, m in res["metrics"].items():
        if m.get("not_applicable"):
            lines.append(f"{name}: N/A for {m['not_applicable']} refused answer(s), not judged")
    failures = [(r["id"], "answer", r["error"].get("message", "")) for r in res["per_question"] if r.get("error")]
    failures += [(r["id"], k, v) for r in res["per_question"] for k, v in (r.get("errors") or {}).items()]
    if failures:
        qid, what, msg = failures[0]
        first = " ".join(str(msg).split())[:300]
        lines += ["", f"{len(failures)} error(s); the first, {what} of question {qid}: {first}",
                  "(every error is in --json / --out, per question)"]
    return "\n".join(lines)
