"""The real daemon with extra embedding passes configured: one whose model the (local, Ollama
wire-protocol) server has, one whose model it lacks. Status names both -- the working pass with its
vectors, the skipped one with what to do -- and the working pass's vectors and index files follow
every ingested file, across a restart."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.fakes.llm_server import FakeLLMServer
from tests.system.conftest import wait_until

ROOT = Path(__file__).resolve().parents[2]


def _note(i: int) -> str:
    return f"Note {i} carries the marker zqpass{i:02d}x and a few words about topic {i % 4}.\n"


def _pass_vectors(d) -> tuple[int, int]:
    with d.db("notes") as c:
        return (c.execute("SELECT count(*) FROM embeddings").fetchone()[0],
                c.execute("SELECT count(*) FROM vectors WHERE space='384'").fetchone()[0])


def _passes(d) -> dict[str, dict]:
    return {p["key"]: p for p in d.status()["embed_passes"]}


def test_status_shows_the_passes_and_the_extra_vectors_converge_after_ingest(daemon, tmp_path):
    with FakeLLMServer(embed_dims={"all-minilm": 384}) as srv:
        root = tmp_path / "notes"
        root.mkdir()
        for i in range(12):
            (root / f"n{i:02d}.txt").write_text(_note(i))
        extra = (f'multi_embed_384 = "ollama:all-minilm"\nmulti_embed_1024 = "ollama:mxbai-embed-large"\n'
                 f'[embed]\nollama_url = "{srv.url}"\n')
        d = daemon({"notes": [root]}, extra=extra)
        d.wait_idle(90)

        s = d.status()
        assert not any("not computed" in r or "not wired" in r for r in s["degraded"]), s["degraded"]
        skipped = [r for r in s["degraded"] if "multi_embed_1024" in r]
        assert len(skipped) == 1 and "ollama pull mxbai-embed-large" in skipped[0], s["degraded"]
        assert not any("multi_embed_384" in r for r in s["degraded"]), s["degraded"]
        assert [e for e in d.events("embed_pass_skipped") if e.get("key") == "multi_embed_1024"]

        def converged() -> bool:
            chunks, extra_vectors = _pass_vectors(d)
            p = _passes(d)["multi_embed_384"]
            return chunks == 12 and extra_vectors == chunks and p["vectors"] == chunks and p["pending_chunks"] == 0
        wait_until(converged, 60, 0.2, "the 384-d pass to have a vector for every chunk")
        p = _passes(d)
        assert (p["multi_embed_384"]["state"], p["multi_embed_384"]["dim"]) == ("ok", 384)
        assert p["multi_embed_384"]["embedder_id"].startswith("ollama:all-minilm@")
        assert p["multi_embed_1024"]["state"] == "skipped" and p["multi_embed_1024"]["vectors"] == 0

        # ragweedctl status names the working pass and the skipped one
        ctl = subprocess.run([sys.executable, "-m", "ragweedd.cli.ctl", "--state-dir", str(d.base / "state"), "status"],
                             capture_output=True, text=True, timeout=60, cwd=str(ROOT))
        assert ctl.returncode == 0, ctl.stderr
        assert "extra pass multi_embed_384: ollama:all-minilm (384-d), 12 vectors, 0 chunks waiting" in ctl.stdout
        assert "DEGRADED: multi_embed_1024 = 'ollama:mxbai-embed-large' is skipped" in ctl.stdout, ctl.stdout

        # A search embeds its query with the pass too and says so.
        r = d.api("POST", "/v1/search", json={"query": "zqpass03x"})
        assert r.status_code == 200, r.text
        timings = r.json()["retrieval_meta"]["timings_ms"]
        assert "embed_pass_384" in timings and "vector_pass_384" in timings and "embed_pass_1024" not in timings

        # A new file's pass vector follows it, with no restart.
        (root / "n12.txt").write_text(_note(12))
        wait_until(lambda: _pass_vectors(d) == (13, 13), 60, 0.2, "the new file's 384-d vector")

        d.stop(30)
        # counted once the process is gone: the line for the last vectors is logged just after
        # they are written, so a count taken before the stop can miss it on a busy machine
        before = len(d.events("pass_vectors_written"))
        files = {f.name for f in (d.base / "data" / "collections" / "notes").iterdir()}
        assert {"data_level0.bin", "data_level0_384.bin", "header_384.bin"} <= files, files
        assert not any("1024" in f for f in files)
        d.start()
        d.wait_idle(90)
        wait_until(lambda: _passes(d)["multi_embed_384"]["vectors"] == 13, 60, 0.2, "status after the restart")
        assert _pass_vectors(d) == (13, 13)
        assert len(d.events("pass_vectors_written")) == before, "the restart embedded the pass again"
