"""`ragweedd eval beir DIR`: retrieval quality on a BEIR-layout dataset (DESIGN §13).

Layout: ``corpus.jsonl`` ({"_id", "title", "text"}), ``queries.jsonl`` ({"_id", "text"}),
``qrels/<split>.tsv`` (header line, then query-id, corpus-id, score; CRLF tolerated).

Each corpus document becomes one text file (title, blank line, text) in a scratch directory and goes
through the real ingest pipeline (extract -> chunk -> embed -> publish) into a scratch collection, so
the run measures what a user gets. The scratch data lives under the cache directory, keyed by
dataset, embedder and chunk size, and is reused: a second run embeds nothing. The dataset is only
read, never copied into the repository.

Every judged query of the split is searched three ways (dense only, keyword only, hybrid) with the
configured settings, except that the candidate depth is at least ``depth`` chunks so that Recall@100
means something. Chunk hits map back to corpus ids by file name; a document's score is its best
chunk's (the first time it appears in the ranked list).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from ragweedd.errors import NotFoundError, RequestError
from ragweedd.eval.metrics import METRICS, summarise
from ragweedd.logging import get_logger

if TYPE_CHECKING:
    from ragweedd.config import Config
    from ragweedd.embed.base import Embedder
    from ragweedd.ingest.pipeline import Pipeline
    from ragweedd.services import Services

log = get_logger("ragweedd.eval")

MODES = ("dense", "keyword", "hybrid")
_SAFE = re.compile(r"^[A-Za-z0-9_.-]{1,100}$")


@dataclasses.dataclass
class Dataset:
    name: str
    corpus: dict[str, tuple[str, str]]
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]
    fingerprint: str


def _jsonl(path: Path) -> list[dict]:
    if not path.is_file():
        raise NotFoundError(f"{path} is missing", hint="a BEIR dataset directory holds corpus.jsonl, "
                                                      "queries.jsonl and qrels/<split>.tsv")
    out = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                d = json.loads(line)
            except json.JSONDecodeError as e:
                raise RequestError(f"{path}:{n}: not a JSON object ({e.msg})",
                                   hint="each line of a BEIR .jsonl file is one JSON object") from e
            if not isinstance(d, dict) or "_id" not in d:
                raise RequestError(f"{path}:{n}: the object has no \"_id\"", hint="BEIR rows carry _id")
            out.append(d)
    return out


def load(directory: str | Path, split: str = "train") -> Dataset:
    d = Path(directory)
    if not d.is_dir():
        raise NotFoundError(f"BEIR dataset directory {d} does not exist", hint="pass the folder holding corpus.jsonl")
    if not re.fullmatch(r"[A-Za-z0-9_-]+", split):
        raise RequestError(f"split {split!r} is not a split name", hint="e.g. train, dev, test")
    h = hashlib.sha256()
    corpus = {}
    for row in _jsonl(d / "corpus.jsonl"):
        corpus[str(row["_id"])] = (str(row.get("title") or ""), str(row.get("text") or ""))
    h.update((d / "corpus.jsonl").read_bytes())
    queries = {str(r["_id"]): str(r.get("text") or "") for r in _jsonl(d / "queries.jsonl")}
    qpath = d / "qrels" / f"{split}.tsv"
    if not qpath.is_file():
        have = sorted(p.stem for p in (d / "qrels").glob("*.tsv")) if (d / "qrels").is_dir() else []
        raise NotFoundError(f"{qpath} is missing", hint="splits present: " + (", ".join(have) or "none"))
    qrels: dict[str, dict[str, int]] = {}
    with open(qpath, encoding="utf-8", newline="") as f:
        for n, line in enumerate(f, 1):
            parts = line.rstrip("\r\n").split("\t")
            if n == 1 and parts and not parts[-1].strip().lstrip("-").isdigit():
                continue  # header
            if not line.strip():
                continue
            if len(parts) < 3 or not parts[2].strip().lstrip("-").isdigit():
                raise RequestError(f"{qpath}:{n}: expected 'query-id<TAB>corpus-id<TAB>score'")
            qid, did, score = parts[0].strip(), parts[1].strip(), int(parts[2])
            qrels.setdefault(qid, {})[did] = score
    missing = [q for q in qrels if q not in queries]
    if missing:
        raise RequestError(f"{qpath}: {len(missing)} judged queries are not in queries.jsonl (e.g. {missing[0]})")
    return Dataset(d.name, corpus, queries, qrels, h.hexdigest()[:12])


def file_name(doc_id: str) -> str:
    if _SAFE.match(doc_id) and doc_id not in (".", ".."):
        return doc_id + ".txt"
    return "h" + hashlib.sha1(doc_id.encode("utf-8")).hexdigest() + ".txt"


def prepare(ds: Dataset, services: Services, workdir: Path, *,
            progress: Callable[[str], None] | None = None) -> dict[str, str]:
    """Ingest the corpus (once) into a scratch collection; returns {file name: doc id}."""
    docs = workdir / "docs"
    docs.mkdir(parents=True, exist_ok=True)
    names = {}
    for did, (title, text) in ds.corpus.items():
        name = file_name(did)
        names[name] = did
        p = docs / name
        body = (title.strip() + "\n\n" + text.strip()).strip() + "\n"
        if not p.exists() or p.read_text(encoding="utf-8") != body:
            p.write_text(body, encoding="utf-8")
    pipe = services.pipeline()
    t0 = time.monotonic()
    try:
        _warm_embed_cache(pipe, [docs / n for n in sorted(names)], progress)
        for n, name in enumerate(sorted(names), 1):
            out = pipe.ingest_file("eval", docs / name, docs)
            if out.status == "failed":
                log.warning("eval_doc_failed", doc=name, error=out.error)
            if progress and n % 500 == 0:
                progress(f"ingested {n}/{len(names)} documents, {time.monotonic() - t0:.0f} s")
    finally:
        pipe.close()
    return names


def _warm_embed_cache(pipe: Pipeline, files: list[Path], progress: Callable[[str], None] | None = None,
                      batch: int = 64) -> None:
    """Embed the chunks of all files in large batches before the per-file ingest, which then finds
    every vector in the embed cache. Per-file embedding would send 1-3 texts per call, several
    times slower for the local model. Chunks come from the pipeline's own extract, chunker and
    context line, so the hashes are the ones it will look up."""
    from ragweedd.chunk.chunker import chunk_document
    from ragweedd.chunk.context import embed_input
    from ragweedd.embed.long import embed_texts

    eid = pipe.embedder.id
    todo: dict[str, str] = {}
    for f in files:
        if pipe.db.live_file("eval", str(f.absolute())) is not None:
            continue
        try:
            doc = pipe.extract(f, pipe.settings)
            res = chunk_document(doc, pipe.params)
        except Exception:  # noqa: BLE001 - the ingest proper reports the file's error
            continue
        for c in pipe.add_context(res.chunks, str(f.absolute()), doc.title):
            todo.setdefault(c["embed_hash"], embed_input(c["text"], c.get("context")))
    have = set(pipe.db.cached_vectors(eid, list(todo)))
    items = [(h, t) for h, t in todo.items() if h not in have]
    t0 = time.monotonic()
    for i in range(0, len(items), batch):
        part = items[i:i + batch]
        vecs = embed_texts(pipe.embedder, [t for _, t in part], batch_size=batch)
        pipe.db.store_vectors(eid, pipe.embedder.dim, [(h, vecs[j].astype("float32").tobytes())
                                                       for j, (h, _) in enumerate(part)])
        if progress and (i // batch) % 20 == 0:
            progress(f"embedded {i + len(part)}/{len(items)} chunks, {time.monotonic() - t0:.0f} s")


def run(directory: str | Path, cfg: Config, embedder: Embedder, *, split: str = "train", limit: int | None = None,
        modes: tuple[str, ...] = MODES, depth: int = 300, workdir: Path | None = None,
        progress: Callable[[str], None] | None = None, samples: int = 1000) -> dict[str, Any]:
    from ragweedd.chunk.chunker import ChunkParams
    from ragweedd.paths import Paths
    from ragweedd.services import open_oneshot

    ds = load(directory, split)
    qids = sorted(ds.qrels, key=lambda q: (len(q), q))
    if limit is not None:
        if limit < 1:
            raise RequestError(f"--limit must be >= 1, not {limit}")
        qids = qids[:limit]
    params = ChunkParams.for_embedder(cfg, embedder)
    tokens = params.chunk_tokens
    if workdir is None:
        from ragweedd.chunk.context import index_embedder_id

        eid = index_embedder_id(embedder.id, cfg.chunk_context)
        key = hashlib.sha1(f"{ds.fingerprint}|{eid}|{tokens}|{params.overlap_pct}".encode()).hexdigest()[:12]
        workdir = Paths.from_config(cfg).cache / "eval" / f"{ds.name}-{key}"
    workdir = Path(workdir)
    # the scratch collection lives in its own data directory, built like any one-shot command's;
    # no semantic search cache: each query is measured on its own results, never a neighbour's
    scratch = with_overrides(cfg, data_dir=str(workdir / "data"), state_dir=str(workdir / "state"),
                             cache_dir=str(workdir / "cache"), search_cache_size=0)
    services = open_oneshot(scratch, embedder=embedder)
    try:
        return _run(ds, split, qids, services, workdir, depth, modes, tokens, samples, progress)
    finally:
        services.close()


def _run(ds: Dataset, split: str, qids: list[str], services: Services, workdir: Path, depth: int,
         modes: tuple[str, ...], tokens: int, samples: int, progress: Callable[[str], None] | None) -> dict[str, Any]:
    cfg, embedder = services.cfg, services.embedder
    t0 = time.monotonic()
    names = prepare(ds, services, workdir, progress=progress)
    ingest_s = time.monotonic() - t0
    qrels = {q: ds.qrels[q] for q in qids}
    out: dict[str, Any] = {"dataset": ds.name, "split": split, "queries": len(qids), "documents": len(ds.corpus),
                           "embedder": embedder.id, "chunk_tokens": tokens, "fusion": cfg.fusion,
                           "depth": depth, "ingest_s": round(ingest_s, 1), "modes": {}}
    s = services.searcher(["eval"])
    out["chunks"] = s.collections[0].rag.chunk_count()
    for mode in modes:
        t = time.monotonic()
        runs: dict[str, list[str]] = {}
        tiers: dict[str, int] = {}
        for q in qids:
            res = s.search(ds.queries[q], mode=mode, limit=depth, top_k=depth)
            ranking: list[str] = []
            for h in res["results"]:
                did = names.get(h["filename"])
                if did is not None and did not in ranking:
                    ranking.append(did)
            runs[q] = ranking
            tier = (res["retrieval_meta"].get("tier") or {}).get("eval")
            tiers[str(tier)] = tiers.get(str(tier), 0) + 1
        secs = time.monotonic() - t
        out["modes"][mode] = {"metrics": summarise(runs, qrels, samples=samples),
                              "seconds": round(secs, 1), "ms_per_query": round(1000 * secs / max(1, len(qids)), 2),
                              "tiers": tiers if mode != "dense" else None}
        if progress:
            progress(f"{mode}: nDCG@10 {out['modes'][mode]['metrics']['ndcg@10']['mean']:.4f} ({secs:.0f} s)")
    return out


def table(result: dict[str, Any]) -> str:
    cols = list(METRICS)
    lines = [f"{result['dataset']} ({result['split']}, {result['queries']} queries, {result['documents']} docs, "
             f"{result.get('chunks', '?')} chunks of {result['chunk_tokens']} tokens; {result['embedder']}; "
             f"fusion {result['fusion']})",
             f"{'mode':<8s} " + " ".join(f"{c:>22s}" for c in cols)]
    for mode, r in result["modes"].items():
        m = r["metrics"]
        lines.append(f"{mode:<8s} " + " ".join(
            f"{m[c]['mean']:.4f} [{m[c]['lo']:.3f},{m[c]['hi']:.3f}]".rjust(22) for c in cols))
    return "\n".join(lines)


def with_overrides(cfg: Config, **kw: Any) -> Config:
    """cfg with some keys replaced (eval options such as chunk size and fusion)."""
    return dataclasses.replace(cfg, **{k: v for k, v in kw.items() if v is not None})
