"""Follow-up questions: does the second question of a conversation keep its subject?

    .venv/bin/python benchmarks/followups.py [--fb-config /work/fb-pdftables/ragweedd.toml]
        [--financebench ../shared/eval/financebench] [--scifact ../shared/eval/scifact]
        [--scifact-docs 1500] [--workdir DIR] [--out followups]

The follow-up set is generated at run time from the evaluation files (never copied here):

* **FinanceBench dev**, each company's questions in file order, two at a time: the first asked as
  it is, the second as a follow-up, the company's name taken out ("Adobe's" -> "its", "Adobe" ->
  "the company"), judged by the second question's own document and evidence pages; its
  standalone rewrite is the second question as written.
* **SciFact train**, claims that share a name (a word with a digit or two capitals: "ALDH1",
  "SIDS", "PD-1"): the second with that name taken out ("it", "its"), judged by its qrels; and
  claims with a contradicting abstract, followed by "Which study found the opposite?", judged by
  the abstracts that contradict the first claim (standalone rewrite: "Which study found the
  opposite of this claim: CLAIM").
* **Standalone second questions**: a question of another company (FinanceBench) or an unrelated
  claim (SciFact, no shared word) after the first; they must be left alone, never made worse.

Each pair runs the real pipeline: the first question is answered by the ask flow the daemon runs
(no LLM: its quoted sources are the documents the thread prefers), recorded in a scratch history,
and the follow-up is searched through ``Services.followup_search`` with that thread: as asked
(alone), after the rule-based rewrite (no LLM), and after the LLM rewrite, where the LLM is the
local wire-protocol test server (tests/fakes/llm_server.py, OpenAI protocol) scripted to answer
the rewrite call with the standalone rewrite: what is measured is the pipeline (prompt, call,
parse, search), not a model's skill. "standalone" searches the standalone rewrite directly.

Metrics: FinanceBench document and page hit@5 (a top-5 hit from the relevant filing; on an
evidence page); SciFact nDCG@10 and hit@5 over abstracts. The FinanceBench index is the one
already ingested at --fb-config (read through the one-shot services, its history kept in a scratch
state dir); SciFact's judged abstracts of the pairs plus --scifact-docs others are ingested into
--workdir (kept and reused). Prints a table and writes benchmarks/results/<out>.json.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import dataclasses
import json
import random
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._common import SCIFACT, table, write_json  # noqa: E402

FB = ROOT.parent / "shared" / "eval" / "financebench"
FB_CONFIG = Path("/work/fb-pdftables/ragweedd.toml")
OPPOSITE = "Which study found the opposite?"
# Other names of the companies in the questions (the file names the company one way, the questions
# another: "AMEX", "Pepsico", "MGM").
ALIASES = {"American Express": ["AMEX", "Amex"], "MGM Resorts": ["MGM"], "PepsiCo": ["Pepsico", "PEPSICO"],
           "Block": ["Square"], "CVS Health": ["CVS"], "Amcor": ["AMCOR"], "Lockheed Martin": ["Lockheed"],
           "Coca-Cola": ["Coca Cola"], "American Water Works": ["AWK"]}
NAME = re.compile(r"[^\W_]+(?:-[^\W_]+)*")


# --------------------------------------------------------------------------- the pairs
@dataclasses.dataclass
class Pair:
    set: str  # "fb", "scifact", "scifact-opposite", "fb-standalone", "scifact-standalone"
    first: str
    follow: str
    standalone: str  # what a standalone rewrite of the follow-up reads
    relevant: dict  # fb: {"doc": name, "pages": [..]}; scifact: {doc_id: gain}


def _without(text: str, names: list[str], *, it: str) -> str:
    out = text
    for n in sorted(names, key=len, reverse=True):
        pat = re.escape(n)
        out = re.sub(rf"\(\s*{pat}\s*\)", "", out)
        out = re.sub(rf"\b{pat}['’]s\b", "its", out, flags=re.I if n[:1].isupper() and not n.isupper() else 0)
        out = re.sub(rf"(?<![\w-]){pat}(?![\w-])", it, out, flags=re.I if n[:1].isupper() and not n.isupper() else 0)
    out = re.sub(r"\s+([,.?;:])", r"\1", re.sub(r"\s{2,}", " ", out)).strip()
    return re.sub(r"(^|[.?!]\s+)(it|its|the company)\b", lambda m: m.group(1) + m.group(2).capitalize(), out)


def financebench_pairs(path: Path) -> tuple[list[Pair], list[Pair]]:
    qs = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    by: dict[str, list[dict]] = collections.defaultdict(list)
    for q in qs:
        by[q["company"]].append(q)

    def rel(q: dict) -> dict:
        return {"doc": q["doc_name"], "pages": sorted({int(e["evidence_page_num"]) + 1 for e in q.get("evidence") or []
                                                      if e.get("evidence_page_num") is not None})}
    follow, alone = [], []
    for company, items in by.items():
        names = [company, *ALIASES.get(company, [])]
        for a, b in zip(items, items[1:]):
            f = _without(b["question"], names, it="the company")
            if f != b["question"]:
                follow.append(Pair("fb", a["question"], f, b["question"], rel(b)))
    companies = sorted(by)
    for i, company in enumerate(companies):
        other = by[companies[(i + 1) % len(companies)]]
        for a, b in zip(by[company][:2], other[:2]):
            alone.append(Pair("fb-standalone", a["question"], b["question"], b["question"], rel(b)))
    return follow, alone


def _names(text: str) -> set[str]:
    return {w for w in NAME.findall(text) if len(w) >= 3 and (
        (any(c.isdigit() for c in w) and any(c.isalpha() for c in w)) or sum(c.isupper() for c in w) >= 2)}


def _words(text: str) -> set[str]:
    return {w.lower() for w in re.findall(r"[A-Za-z]{4,}", text)}


def scifact_pairs(directory: Path, n_subject: int, n_opposite: int, n_alone: int,
                  seed: int = 7) -> tuple[list[Pair], list[Pair], dict]:
    from ragweedd.eval.beir import load

    ds = load(directory, "train")
    meta = {}
    for line in (directory / "queries.jsonl").read_text(encoding="utf-8").splitlines():
        d = json.loads(line)
        meta[str(d["_id"])] = d.get("metadata") or {}
    train = sorted(ds.qrels, key=lambda q: (len(q), q))
    rng = random.Random(seed)
    by_name: dict[str, list[str]] = collections.defaultdict(list)
    for q in train:
        for n in _names(ds.queries[q]):
            by_name[n].append(q)
    subject = []
    for name in sorted(by_name):
        qs = by_name[name]
        if not 2 <= len(qs) <= 6:
            continue
        a, b = qs[0], qs[1]
        f = _without(ds.queries[b], [name], it="it")
        if f != ds.queries[b] and len(f.split()) >= 4:
            subject.append(Pair("scifact", ds.queries[a], f, ds.queries[b], dict(ds.qrels[b])))
    rng.shuffle(subject)
    opposite = []
    for q in train:
        against = {d: 1 for d, ev in meta[q].items() if d in ds.qrels[q]
                   and any(e.get("label") == "CONTRADICT" for e in ev)}
        if against:
            opposite.append(Pair("scifact-opposite", ds.queries[q], OPPOSITE,
                                 f"Which study found the opposite of this claim: {ds.queries[q]}", against))
    rng.shuffle(opposite)
    alone = []
    pool = list(train)
    rng.shuffle(pool)
    for a, b in zip(pool[::2], pool[1::2]):
        if len(alone) >= n_alone:
            break
        qa, qb = ds.queries[a], ds.queries[b]
        if _words(qa) & _words(qb) or _names(qa) & _names(qb):
            continue
        alone.append(Pair("scifact-standalone", qa, qb, qb, dict(ds.qrels[b])))
    return subject[:n_subject] + opposite[:n_opposite], alone, {"dataset": ds}


# --------------------------------------------------------------------------- the indexes
def scifact_services(ds, pairs: list[Pair], extra_docs: int, workdir: Path, cfg_base, seed: int = 7):
    """A scratch collection of the pairs' judged abstracts, their first questions' and others."""
    from ragweedd.eval.beir import Dataset, prepare, with_overrides
    from ragweedd.services import open_oneshot

    wanted = {d for p in pairs for d in p.relevant}
    for p in pairs:  # the first questions' abstracts too: what the thread's answer quotes
        q = next((qid for qid, text in ds.queries.items() if text == p.first), None)
        if q is not None and q in ds.qrels:
            wanted |= set(ds.qrels[q])
    others = sorted(set(ds.corpus) - wanted)
    random.Random(seed).shuffle(others)
    keep = sorted(wanted | set(others[:extra_docs]))
    sub = Dataset(ds.name, {d: ds.corpus[d] for d in keep if d in ds.corpus}, ds.queries, ds.qrels, ds.fingerprint)
    cfg = with_overrides(cfg_base, data_dir=str(workdir / "data"), state_dir=str(workdir / "state"),
                         cache_dir=str(workdir / "cache"), search_cache_size=0)
    services = open_oneshot(cfg)
    names = prepare(sub, services, workdir)  # {file name: abstract id}
    return services, names, len(sub.corpus)


def scratch_state(cfg, state: Path):
    """The FinanceBench index read in place; the history (the threads) written elsewhere."""
    return dataclasses.replace(cfg, state_dir=str(state), search_cache_size=0)


# --------------------------------------------------------------------------- running a pair
def llm_config(cfg, url: str):
    from tests.fakes.llm_server import API_KEY

    return dataclasses.replace(cfg, llm_synthesis="openai:test-model", llm_openai_base_url=url + "/v1",
                               llm_openai_api_key=API_KEY, llm_max_retries=0, llm_timeout_s=30.0)


async def first_turn(services, question: str, collection: str) -> list:
    """Ask the first question as the daemon does (no LLM); the thread a follow-up reads."""
    res = await services.followup_search(question, [], collections=[collection], limit=10)
    events = await services.ask_flow.ask(question, res)
    cid = None
    async for ev in events:
        if ev.get("type") == "done":
            cid = ev["conversation_id"]
    return await asyncio.to_thread(services.history.thread, cid)


async def run_pair(services, plain_cfg, llm_cfg, p: Pair, collection: str, k: int = 10) -> dict:
    thread = await first_turn(services, p.first, collection)
    out: dict = {"set": p.set, "first": p.first[-200:], "follow": p.follow[-200:]}
    services.cfg = plain_cfg
    alone = await services.followup_search(p.follow, [], collections=[collection], limit=k)
    rules = await services.followup_search(p.follow, thread, collections=[collection], limit=k)
    services.cfg = llm_cfg
    llm = await services.followup_search(p.follow, thread, collections=[collection], limit=k)
    services.cfg = plain_cfg
    standalone = await services.followup_search(p.standalone, [], collections=[collection], limit=k)
    for name, res in (("alone", alone), ("rules", rules), ("llm", llm), ("standalone", standalone)):
        out[name] = res["results"]
        out[f"{name}_query"] = res["retrieval_meta"]["rewrite"]["query"]
    out["rules_rewritten"] = rules["retrieval_meta"]["rewrite"]["rewritten"]
    out["rules_reason"] = rules["retrieval_meta"]["rewrite"]["reason"]
    out["llm_error"] = (llm["retrieval_meta"]["rewrite"].get("llm") or {}).get("error")
    return out


def fb_scores(hits: list[dict], rel: dict) -> dict:
    from ragweedd.eval.questions import Question, Relevant, ranks

    q = Question("q", "", [Relevant(rel["doc"], pg) for pg in rel["pages"]] or [Relevant(rel["doc"])])
    doc, page = ranks(q, hits)
    return {"doc_hit@5": float(bool(doc and doc <= 5)), "page_hit@5": float(bool(page and page <= 5))}


def scifact_scores(hits: list[dict], rel: dict, names: dict) -> dict:
    from ragweedd.eval.metrics import ndcg_at

    ranking: list[str] = []
    for h in hits:
        d = names.get(h["filename"])
        if d is not None and d not in ranking:
            ranking.append(d)
    return {"ndcg@10": ndcg_at(ranking, rel, 10), "hit@5": float(any(d in rel for d in ranking[:5]))}


RUNS = ("alone", "rules", "llm", "standalone")


def summarise(rows: list[dict], metrics: tuple[str, ...]) -> list[dict]:
    out = []
    for metric in metrics:
        row: dict = {"metric": metric, "pairs": len(rows)}
        for r in RUNS:
            row[r] = sum(x["scores"][r][metric] for x in rows) / len(rows) if rows else 0.0
        row["rules/standalone"] = row["rules"] / row["standalone"] if row["standalone"] else None
        out.append(row)
    return out


async def measure(services, pairs: list[Pair], collection: str, score, llm_url: str, log) -> list[dict]:
    plain = services.cfg
    llm_cfg = llm_config(plain, llm_url)
    rows = []
    for i, p in enumerate(pairs, 1):
        row = await run_pair(services, plain, llm_cfg, p, collection)
        row["scores"] = {r: score(row[r], p.relevant) for r in RUNS}
        for r in RUNS:
            row[r] = [h.get("filename") for h in row[r][:5]]
        rows.append(row)
        if i % 10 == 0:
            log(f"{p.set}: {i}/{len(pairs)}")
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fb-config", default=str(FB_CONFIG), help="config of an ingested FinanceBench index")
    ap.add_argument("--fb-collection", default="fb")
    ap.add_argument("--financebench", default=str(FB), help="the FinanceBench folder (questions.jsonl)")
    ap.add_argument("--scifact", default=str(SCIFACT))
    ap.add_argument("--scifact-docs", type=int, default=1500, help="abstracts besides the judged ones")
    ap.add_argument("--subject-pairs", type=int, default=40)
    ap.add_argument("--opposite-pairs", type=int, default=20)
    ap.add_argument("--standalone-pairs", type=int, default=30)
    ap.add_argument("--workdir", help="scratch folder of the SciFact subset (kept and reused)")
    ap.add_argument("--skip-financebench", action="store_true")
    ap.add_argument("--out", default="followups")
    a = ap.parse_args(argv)

    from ragweedd.config import load_config
    from ragweedd.services import open_oneshot
    from tests.fakes.llm_server import FakeLLMServer

    t0 = time.monotonic()

    def log(msg: str) -> None:
        print(f"[{time.monotonic() - t0:6.0f} s] {msg}", file=sys.stderr, flush=True)

    fb_follow, fb_alone = financebench_pairs(Path(a.financebench) / "questions.jsonl")
    sf_follow, sf_alone, extra = scifact_pairs(Path(a.scifact), a.subject_pairs, a.opposite_pairs, a.standalone_pairs)
    # the scripted LLM: the standalone rewrite of the follow-up asked after that first question (the
    # prompt writes each question on one line: "Q1: ..." and "LAST QUESTION: ...")
    standalone_of = {(" ".join(p.first.split()), " ".join(p.follow.split())): p.standalone
                     for p in fb_follow + sf_follow}

    def rewrite_reply(provider, messages):
        prompt = messages[-1]["content"]
        first = re.search(r"^Q1: (.*)$", prompt, re.M)
        last = prompt.split("LAST QUESTION:", 1)[-1].split("\n\nStandalone search query:")[0].strip()
        return standalone_of.get((first.group(1) if first else "", last), last)

    result: dict = {"pairs": {"financebench": len(fb_follow), "scifact": len(sf_follow),
                              "financebench_standalone": len(fb_alone), "scifact_standalone": len(sf_alone)}}
    tables = []
    work = Path(a.workdir) if a.workdir else Path(tempfile.gettempdir()) / "ragweed-followups"
    work.mkdir(parents=True, exist_ok=True)
    with FakeLLMServer(models=("test-model",), reply=rewrite_reply) as llm:
        if not a.skip_financebench:
            cfg = scratch_state(load_config(a.fb_config, env={}), work / "fb-state")
            services = open_oneshot(cfg)
            try:
                log(f"FinanceBench: {len(fb_follow)} follow-ups, {len(fb_alone)} standalone second questions")
                rows = asyncio.run(measure(services, fb_follow, a.fb_collection, fb_scores, llm.url, log))
                alone = asyncio.run(measure(services, fb_alone, a.fb_collection, fb_scores, llm.url, log))
            finally:
                services.close()
            result["financebench"] = _report(rows, alone, ("doc_hit@5", "page_hit@5"), "FinanceBench dev", tables)
        base = load_config(None, env={})
        services, names, n_docs = scifact_services(extra["dataset"], sf_follow + sf_alone, a.scifact_docs,
                                                   work / "scifact", base)
        try:
            log(f"SciFact: {len(sf_follow)} follow-ups, {len(sf_alone)} standalone, {n_docs} abstracts")

            def score(hits, rel):
                return scifact_scores(hits, rel, names)
            rows = asyncio.run(measure(services, sf_follow, "eval", score, llm.url, log))
            alone = asyncio.run(measure(services, sf_alone, "eval", score, llm.url, log))
        finally:
            services.close()
        result["scifact"] = _report(rows, alone, ("ndcg@10", "hit@5"), f"SciFact train ({n_docs} abstracts)", tables)
        result["llm_requests"] = len(llm.requests)
    for title, rows in tables:
        print(f"\n{title}")
        print(table(rows, ["metric", "pairs", *RUNS, "rules/standalone"]))
    path = write_json(a.out, result)
    print(f"\nwrote {path} ({time.monotonic() - t0:.0f} s)")
    return 0


def _report(rows: list[dict], alone: list[dict], metrics: tuple[str, ...], title: str, tables: list) -> dict:
    summary = summarise(rows, metrics)
    worse = [r for r in alone if any(r["scores"]["rules"][m] < r["scores"]["alone"][m] - 1e-9 for m in metrics)]
    rewritten = sum(1 for r in alone if r["rules_rewritten"])
    alone_summary = [{"metric": m, "pairs": len(alone),
                      **{run: sum(r["scores"][run][m] for r in alone) / len(alone) for run in ("alone", "rules")}}
                     for m in metrics] if alone else []
    tables.append((f"{title}: follow-ups ({len(rows)} pairs; rules rewrote "
                   f"{sum(1 for r in rows if r['rules_rewritten'])})", summary))
    tables.append((f"{title}: standalone second questions ({len(alone)} pairs; rules rewrote {rewritten}, "
                   f"made worse {len(worse)})", alone_summary))
    by_set = collections.Counter(r["set"] for r in rows)
    return {"follow_ups": summary, "by_set": dict(by_set), "standalone_second": alone_summary,
            "standalone_rewritten": rewritten, "standalone_made_worse": len(worse), "rows": rows, "alone_rows": alone}


if __name__ == "__main__":
    raise SystemExit(main())
