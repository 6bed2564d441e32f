"""The real daemon when ``embed.model`` changes (docs/embedders.md, "Changing the model without
downtime"): a collection embedded by hash:64 is moved to an Ollama-protocol model (32-d, on the
local wire-protocol server) beside its old vectors. Searches keep answering from the old complete
index, embedded by the old model; status shows both models and the progress; a file added
meanwhile gets both vectors; a kill -9 in the middle resumes without embedding a chunk twice; once
complete, the new model serves and the old vectors are gone."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import requests

from tests.fakes.llm_server import FakeLLMServer
from tests.system.conftest import wait_until

ROOT = Path(__file__).resolve().parents[2]
N = 24  # notes, one chunk each


def _note(i: int) -> str:
    return f"Note {i} is about harbour number {i}; its codeword is mz{i:02d}k and nothing else.\n"


def _spaces(d) -> dict[str, int]:
    with d.db("notes") as c:
        out = {r[0]: r[1] for r in c.execute("SELECT space, count(*) FROM vectors GROUP BY space")}
        out["chunks"] = c.execute("SELECT count(*) FROM embeddings").fetchone()[0]
        return out


def _embedders(d) -> dict[str, tuple[str, int]]:
    with d.db("notes") as c:
        return {r[0]: (r[1], r[2]) for r in c.execute("SELECT space, embedder_id, dim FROM embedders")}


def _texts_embedded(srv) -> list[str]:
    """Chunk texts the server embedded (the model's dimension probe left out)."""
    out: list[str] = []
    for r in list(srv.requests):
        if r["provider"] == "ollama-embed" and r["model"] == "swapmodel":
            inp = r["body"]["input"]
            out += [t for t in (inp if isinstance(inp, list) else [inp]) if t != "dimension probe"]
    return out


def _migration(d):
    try:
        r = d.api("GET", "/v1/status")
    except requests.RequestException:
        return None
    return r.json().get("embed_migration") if r.status_code == 200 else None


def _top(d, query: str) -> str:
    hits = d.search(query)
    assert hits, query
    return hits[0]["filename"]


def test_a_changed_model_is_built_beside_the_old_one_resumes_after_kill9_and_switches_when_complete(
        daemon, tmp_path):
    with FakeLLMServer(embed_dims={"swapmodel": 32}) as srv:
        root = tmp_path / "notes"
        root.mkdir()
        for i in range(N):
            (root / f"n{i:02d}.txt").write_text(_note(i))
        d = daemon({"notes": [root]}, extra=f'[embed]\nollama_url = "{srv.url}"\nbatch_size = 2\n')
        d.wait_idle(90)
        assert _spaces(d) == {"primary": N, "chunks": N}
        old_id = _embedders(d)["primary"][0]
        assert old_id.startswith("hash:64@")
        assert _top(d, "mz07k") == "n07.txt"

        # The user changes the model; the new one is slow (0.4 s a batch of 2).
        d.stop(30)
        d.env["RAGWEED_EMBED_MODEL"] = "ollama:swapmodel"
        d.launcher_args = ["--slow-embed", "0.4"]
        # The new model answers two batches (4 chunks), then holds the next until the test lets it go
        # on: the migration is half done at each check below, however slow the machine is.
        srv.allow_embeds(2)
        d.start()
        m = wait_until(lambda: (lambda m: m if m and m["vectors"] >= 4 else None)(_migration(d)), 60, 0.1,
                       "the migration to be under way")
        s = d.status()
        assert s["embedder"]["id"] == old_id and s["embedder"]["dim"] == 64, "the old model serves meanwhile"
        assert m["old_embedder_id"] == old_id and m["new_embedder_id"].startswith("ollama:swapmodel@")
        assert (m["model"], m["dim"], m["state"]) == ("ollama:swapmodel", 32, "embedding")
        assert m["pending_chunks"] > 0 and 0 < m["percent"] < 100
        assert m["collections"]["notes"]["vectors"] + m["collections"]["notes"]["pending_chunks"] == N
        assert not any("indexed again" in r for r in s["degraded"])
        assert _embedders(d)["next"][0] == m["new_embedder_id"]
        # every note is found, from the complete old index, while the new vectors are half done
        for i in (3, 11, 19, 23):
            assert _top(d, f"mz{i:02d}k") == f"n{i:02d}.txt"
        assert _spaces(d)["primary"] == N and 0 < _spaces(d).get("next", 0) < N
        ctl = subprocess.run([sys.executable, "-m", "ragweedd.cli.ctl", "--state-dir", str(d.base / "state"),
                              "status"], capture_output=True, text=True, timeout=60, cwd=str(ROOT))
        assert ctl.returncode == 0, ctl.stderr
        assert f"embedder: {old_id} (64-d)" in ctl.stdout
        assert "changing embed.model to ollama:swapmodel (32-d): embedding, " in ctl.stdout, ctl.stdout
        assert f"searches use {old_id} until then" in ctl.stdout

        # A file added meanwhile gets a vector of the old model at once (searchable now) and one
        # of the new model with the rest.
        (root / "n99.txt").write_text("Note 99 arrives during the migration; codeword mz99k.\n")
        wait_until(lambda: _spaces(d)["chunks"] == N + 1, 60, 0.1, "the new file's chunk")
        # the held batch and one more: the new file's old-model vector goes before the second
        srv.allow_embeds(2)
        wait_until(lambda: _spaces(d)["primary"] == N + 1, 60, 0.1, "the new file's old-model vector")
        assert _top(d, "mz99k") == "n99.txt"

        # kill -9 in the middle, a batch of the new model held at the server
        wait_until(lambda: _spaces(d).get("next", 0) >= 8, 60, 0.1, "more new vectors")
        d.kill9()
        srv.allow_embeds(None)
        at_kill = _spaces(d).get("next", 0)
        sent_before = len(_texts_embedded(srv))
        assert at_kill < N + 1, "the test must kill the daemon mid-migration"

        d.launcher_args = []
        d.start()
        started = d.events("model_swap_started")
        assert started[-1]["resumed"] == ["notes"]
        unavailable: list[float] = []  # when a call was refused while the daemon switched

        def switched() -> bool:
            r = d.api("GET", "/v1/status")
            if r.status_code == 503:
                assert r.json()["error"]["code"] == "repairing" and "embed.model" in r.json()["error"]["message"]
                unavailable.append(time.monotonic())
                return False
            assert r.status_code == 200, r.text
            return bool(r.json()["embedder"]["id"].startswith("ollama:swapmodel@"))
        wait_until(switched, 90, 0.05, "the daemon to switch to the new model")
        # the switch itself (stop the old core, swap the vectors, start the new) takes moments, and
        # a call made meanwhile waits for the new core instead of being refused
        assert unavailable == [], unavailable
        assert d.status().get("embed_migration") is None
        assert d.events("model_swapped") and d.events("model_switched")

        # nothing embedded twice (at most the batch in flight at the kill), nothing lost
        after = _texts_embedded(srv)[sent_before:]
        assert N + 1 - at_kill <= len(after) <= N + 1 - at_kill + 2, (at_kill, len(after))
        assert len(_texts_embedded(srv)) <= N + 1 + 2
        assert _spaces(d) == {"primary": N + 1, "chunks": N + 1}
        emb = _embedders(d)
        assert list(emb) == ["primary"] and emb["primary"][1] == 32
        with d.db("notes") as c:
            assert {r[0] for r in c.execute("SELECT DISTINCT length(vec) FROM vectors")} == {32 * 4}
            assert c.execute("SELECT count(*) FROM pass_changes").fetchone()[0] == 0
            assert tuple(c.execute("SELECT count(*), count(DISTINCT id) FROM changes").fetchone()) == (N + 1, N + 1)

        # the new model serves, from the index built beside the old one while its vectors were made
        d.wait_idle(60)
        assert d.status()["index"]["notes"]["vectors"] == N + 1 and d.status()["index"]["notes"]["state"] == "ok"
        switched_at = d.events("model_swapped")[-1]["timestamp"]
        assert not [e for e in d.events("index_rebuild") if e["timestamp"] >= switched_at], "adopted, not rebuilt"
        assert not d.events("model_swap_index_unused")
        for i in (3, 11, 23):
            assert _top(d, f"mz{i:02d}k") == f"n{i:02d}.txt"
        assert _top(d, "mz99k") == "n99.txt"
        d.stop(30)
        files = {f.name for f in (d.base / "data" / "collections" / "notes").iterdir()}
        assert "data_level0.bin" in files and not any("next" in f for f in files), files
        d.start()
        assert d.status()["embedder"]["dim"] == 32 and d.status().get("embed_migration") is None
        assert _top(d, "mz11k") == "n11.txt"


def test_the_embedded_minilm_moves_to_its_float32_variant_at_the_same_dimension(daemon, tmp_path):
    """The bundled MiniLM (int8 linear layers) to its float32 variant: the same 384 dimensions, so
    only the recorded model tells the vectors apart. After the switch every stored vector is the
    float32 model's embedding of what the int8 one read (text and context line), and none of the
    int8 vectors is left in the database or in the index."""
    import numpy as np

    from ragweedd.chunk.context import embed_input
    from ragweedd.embed.factory import make_embedder

    topics = ["the migration of arctic terns", "sourdough bread and its starter", "tidal power stations",
              "the rules of contract bridge", "repairing a bicycle chain", "orbital mechanics of comets"]
    root = tmp_path / "notes"
    root.mkdir()
    for i, t in enumerate(topics):
        (root / f"t{i}.txt").write_text(f"A short note on {t}. It says a few plain things about {t}.\n")
    d = daemon({"notes": [root]}, extra="[embed]\nbatch_size = 2\n",
               env={"RAGWEED_EMBED_MODEL": "local:all-minilm-l6-v2"})
    d.wait_idle(120)
    assert _embedders(d)["primary"][0].startswith("local:all-minilm-l6-v2@q8-")
    assert _top(d, "seabirds flying south") == "t0.txt"

    d.stop(30)
    d.env["RAGWEED_EMBED_MODEL"] = "local:all-minilm-l6-v2-f32"
    d.launcher_args = ["--slow-embed", "0.5"]
    d.start()
    m = wait_until(lambda: (lambda m: m if m and m["vectors"] >= 2 else None)(_migration(d)), 60, 0.1,
                   "the migration to be under way")
    assert m["old_embedder_id"].startswith("local:all-minilm-l6-v2@q8-") and m["dim"] == 384
    assert m["new_embedder_id"].startswith("local:all-minilm-l6-v2@f32-") and m["pending_chunks"] > 0
    assert _top(d, "baking bread") == "t1.txt"  # the int8 model and index answer meanwhile

    def switched() -> bool:
        r = d.api("GET", "/v1/status")
        return r.status_code == 200 and r.json()["embedder"]["id"].startswith("local:all-minilm-l6-v2@f32-")
    wait_until(switched, 120, 0.1, "the switch to the float32 model")
    d.wait_idle(60)
    assert _top(d, "baking bread") == "t1.txt" and _top(d, "seabirds flying south") == "t0.txt"
    f32 = make_embedder("local:all-minilm-l6-v2-f32")
    with d.db("notes") as c:
        assert [tuple(r) for r in c.execute("SELECT space, dim FROM embedders")] == [("primary", 384)]
        rows = c.execute(
            "SELECT v.vec, t.string_value, x.string_value FROM vectors v"
            " JOIN embedding_metadata t ON t.id = v.id AND t.key = 'chroma:document'"
            " LEFT JOIN embedding_metadata x ON x.id = v.id AND x.key = 'context'").fetchall()
    assert len(rows) == len(topics)
    for vec, text, ctx in rows:
        want = f32.embed_batch([embed_input(text, ctx)])[0]
        np.testing.assert_allclose(np.frombuffer(vec, dtype=np.float32), want, atol=1e-5)
    assert d.status()["index"]["notes"]["vectors"] == len(topics) and d.status()["index"]["notes"]["state"] == "ok"
    switched_at = d.events("model_swapped")[-1]["timestamp"]
    assert not [e for e in d.events("index_rebuild") if e["timestamp"] >= switched_at], "adopted, not rebuilt"
