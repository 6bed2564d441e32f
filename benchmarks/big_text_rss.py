"""Memory of ingesting one large plain-text file: peak RSS before and after, with the real Pipeline.

Writes a text file of ``--mb`` MiB (random words, 12 per line; ``--single-line`` for one line),
ingests it with the hash embedder (no model, so the numbers are the pipeline's own) at
``chunk_size = 256`` (MiniLM's default) and prints the chunks, seconds and peak RSS growth. Writes
JSON (benchmarks/results/big_text_rss.json). A file over 4 MiB is read, chunked and published piece
by piece (docs/daemon.md, "Big files"), so the growth should not depend on the file's size.

    .venv/bin/python benchmarks/big_text_rss.py [--mb 60] [--single-line]
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import peak_rss_mb, table, write_json  # noqa: E402
from ragweedd.store.backends import open_data_dir


def write_text(path: Path, mib: float, single_line: bool) -> None:
    rng = random.Random(1)
    vocab = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 9)))
             for _ in range(5000)]
    with open(path, "w") as out:
        n = 0
        while n < mib * 2**20:
            line = " ".join(rng.choice(vocab) for _ in range(12)) + ("." if single_line else ".\n")
            out.write(line)
            n += len(line)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mb", type=float, default=60.0)
    ap.add_argument("--single-line", action="store_true")
    a = ap.parse_args()

    from ragweedd.config import load_config
    from ragweedd.embed.hashing import HashEmbedder
    from ragweedd.ingest.pipeline import Pipeline
    from ragweedd.paths import Paths

    with tempfile.TemporaryDirectory(prefix="ragweed-bigtext-") as tmp:
        base = Path(tmp)
        folder = base / "docs"
        folder.mkdir()
        f = folder / "big.txt"
        write_text(f, a.mb, a.single_line)
        cfg = load_config(text=f"chunk_size = 256\ningest_max_text_mb = {int(a.mb) + 1}\n"
                               "[embed]\nmodel = 'hash:64'\nbatch_size = 256\n", env={})
        paths = Paths.resolve(str(base / "data"), str(base / "state"), str(base / "cache"))
        pipe = Pipeline(cfg, paths, HashEmbedder(64), stores=open_data_dir(paths))
        before = peak_rss_mb()
        t0 = time.monotonic()
        out = pipe.ingest_file("c", f, folder)
        row = {"file_mib": round(f.stat().st_size / 2**20, 1), "status": out.status, "chunks": out.chunks,
               "seconds": round(time.monotonic() - t0, 1), "rss_before_mib": round(before),
               "rss_peak_mib": round(peak_rss_mb()), "growth_mib": round(peak_rss_mb() - before)}
        pipe.close()
    print(table([row], list(row)))
    print(write_json("big_text_rss", {"single_line": a.single_line, **row}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
