"""Embedding throughput of the local MiniLM embedder.

Measures model load time (hash check + onnxruntime session) and chunks/s for 256-token chunks of real
English (SciFact abstracts, read at run time) at batch sizes 16/32/64 with N threads, going through
ragweedd.embed.long.embed_texts as ingest does. Also abstracts/s for the abstracts as they are
(mixed lengths, long ones split and averaged). Prints a table; writes benchmarks/results/embed.json.

    .venv/bin/python benchmarks/embed.py [--threads 2] [--chunks 128] [--batches 16,32,64] [--repeats 3]
                                         [--variants q8,f32,int8]

Each batch size is timed --repeats times; the table shows the median run (per_s) and the best.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import SCIFACT, peak_rss_mb, table, write_json  # noqa: E402


def load_abstracts(limit: int) -> list[str]:
    path = SCIFACT / "corpus.jsonl"
    if not path.exists():
        sys.exit(f"{path} not found: set RAGWEED_SCIFACT to the folder holding SciFact's corpus.jsonl")
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            out.append(f"{d['title']}. {d['text']}".strip())
            if len(out) >= limit:
                break
    return out


def chunks_of_256(emb, texts: list[str], n: int) -> list[str]:
    """Cut the running text into pieces of exactly 256 word pieces ([CLS] and [SEP] included)."""
    tok = emb._tokenizer
    out: list[str] = []
    for text in texts:
        enc = tok.encode(text)
        offs = enc.offsets[1:-1]  # drop [CLS]/[SEP]
        for s in range(0, len(offs) - 254 + 1, 254):
            piece = text[offs[s][0]:offs[s + 253][1]]
            if emb.count_tokens(piece) == 256:
                out.append(piece)
            if len(out) >= n:
                return out
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--chunks", type=int, default=128)
    ap.add_argument("--variants", default="q8,f32,int8")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--batches", default="16,32,64")
    ap.add_argument("--abstracts", type=int, default=64)
    args = ap.parse_args()

    from ragweedd.embed.local import MiniLMEmbedder
    from ragweedd.embed.long import embed_texts

    load_avg = os.getloadavg()[0]
    abstracts = load_abstracts(4000)
    rows: list[dict] = []
    ids = {}
    vecs = {}
    for variant in args.variants.split(","):
        t0 = time.perf_counter()
        emb = MiniLMEmbedder(threads=args.threads, variant=variant).load()
        load_s = time.perf_counter() - t0
        ids[variant] = emb.id
        chunks = chunks_of_256(emb, abstracts, args.chunks)
        embed_texts(emb, chunks[:8], batch_size=8)  # warm-up: first runs allocate arenas
        rows.append({"variant": variant, "case": "model load (sha256 + session)", "n": 1, "seconds": load_s})
        for bs in (int(b) for b in args.batches.split(",")):
            emb.batch_size = bs
            runs = []
            for _ in range(max(1, args.repeats)):
                t, c = time.perf_counter(), time.process_time()
                vecs[variant] = embed_texts(emb, chunks, batch_size=bs)
                runs.append((time.perf_counter() - t, time.process_time() - c))
            dt, cpu = sorted(runs)[len(runs) // 2]
            rows.append({"variant": variant, "case": "256-token chunks", "batch": bs, "n": len(chunks),
                         "seconds": dt, "per_s": len(chunks) / dt, "best_per_s": len(chunks) / min(r[0] for r in runs),
                         "tokens_per_s": 256 * len(chunks) / dt, "cpu_s": cpu, "per_cpu_s": len(chunks) / cpu})
        emb.batch_size = 32
        sample = abstracts[: args.abstracts]
        tokens = sum(emb.count_tokens(a) for a in sample)
        t, c = time.perf_counter(), time.process_time()
        embed_texts(emb, sample, batch_size=32)
        dt, cpu = time.perf_counter() - t, time.process_time() - c
        rows.append({"variant": variant, "case": "SciFact abstracts as-is", "batch": 32, "n": len(sample),
                     "seconds": dt, "per_s": len(sample) / dt, "tokens_per_s": tokens / dt,
                     "cpu_s": cpu, "per_cpu_s": len(sample) / cpu})
        del emb

    agreement = {}
    for v in vecs:
        if v != "f32" and "f32" in vecs and len(vecs[v]) == len(vecs["f32"]):
            cos = (vecs[v] * vecs["f32"]).sum(axis=1)
            agreement[v] = {"min": float(cos.min()), "mean": float(cos.mean()), "n": int(len(cos))}
            print(f"{v} vs f32 cosine on the same chunks: min {cos.min():.4f}, mean {cos.mean():.4f}")
    load_end = os.getloadavg()[0]
    print(f"threads={args.threads}, load average at start {load_avg:.2f}, at end {load_end:.2f} "
          f"({os.cpu_count()} CPUs)")
    print(table(rows, ["variant", "case", "batch", "n", "seconds", "per_s", "best_per_s", "tokens_per_s", "cpu_s",
                       "per_cpu_s"]))
    # On a shared machine wall time mostly measures the neighbours; items per CPU-second times the
    # thread count is what the same run would reach with the cores to itself.
    print("per_cpu_s x threads estimates throughput on an otherwise idle machine")
    best = {v: max(r["per_s"] for r in rows if r["variant"] == v and r["case"] == "256-token chunks") for v in ids}
    idle = {v: args.threads * max(r["per_cpu_s"] for r in rows if r["variant"] == v and r["case"] == "256-token chunks")
            for v in ids}
    print("median-run 256-token chunks/s at the best batch size: " + ", ".join(f"{v} {b:.1f}" for v, b in best.items())
          + "; idle-machine estimate: " + ", ".join(f"{v} {b:.1f}" for v, b in idle.items())
          + f" (target >= 30); peak RSS {peak_rss_mb():.0f} MB")
    p = write_json("embed", {"embedders": ids, "threads": args.threads, "load_average_at_start": load_avg,
                             "load_average_at_end": load_end, "rows": rows, "best_chunks_per_s": best,
                             "idle_estimate_chunks_per_s": idle, "cosine_vs_f32": agreement,
                             "peak_rss_mb": peak_rss_mb()})
    print(f"wrote {p}")

if __name__ == "__main__":
    main()
