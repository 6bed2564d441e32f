"""The real daemon when the new ``embed.model`` of a change cannot be loaded at a start (docs/
embedders.md, "Changing the model without downtime"): its Ollama server unreachable after a kill -9
in the middle of the move, or a model name that was never pulled. The daemon starts with the old
model, which answers searches from the old complete index and embeds new files; status shows the
move blocked with the reason and the fix; the new model is tried again every embed.retry_s and the
move resumes (or starts) once it loads. Without an old model to serve with, the start fails with
the clear error as before."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.fakes.llm_server import FakeLLMServer
from tests.system.conftest import free_port, wait_until
from tests.system.test_daemon_model_swap import _embedders, _migration, _note, _spaces, _top

ROOT = Path(__file__).resolve().parents[2]
N = 24
MODEL = "swapmodel4"


def _texts(srv) -> list[str]:
    out: list[str] = []
    for r in list(srv.requests):
        if r["provider"] == "ollama-embed" and r["model"] == MODEL:
            inp = r["body"]["input"]
            out += [t for t in (inp if isinstance(inp, list) else [inp]) if t != "dimension probe"]
    return out


def _notes(tmp_path) -> Path:
    root = tmp_path / "notes"
    root.mkdir()
    for i in range(N):
        (root / f"n{i:02d}.txt").write_text(_note(i))
    return root


def _indexed_then_stopped(daemon, root: Path, srv, *, batch_size: int):
    """A daemon that indexed ``root`` with the default model, stopped before the model changes:
    (the daemon, the embedder id its vectors were made by)."""
    d = daemon({"notes": [root]}, extra=f"[embed]\nbatch_size = {batch_size}\nretry_s = 0.5\n",
               env={"RAGWEED_EMBED_OLLAMA_URL": srv.url})
    d.wait_idle(90)
    old_id = _embedders(d)["primary"][0]
    d.stop(30)
    return d, old_id


def _switched(d) -> bool:
    r = d.api("GET", "/v1/status")
    return r.status_code == 200 and r.json()["embedder"]["id"].startswith(f"ollama:{MODEL}@")


def test_a_restart_mid_move_with_the_new_model_unreachable_serves_the_old_model_and_resumes_when_it_is_back(
        daemon, tmp_path):
    root = _notes(tmp_path)
    with FakeLLMServer(embed_dims={MODEL: 32}) as srv:
        d, old_id = _indexed_then_stopped(daemon, root, srv, batch_size=2)
        d.env["RAGWEED_EMBED_MODEL"] = f"ollama:{MODEL}"
        d.launcher_args = ["--slow-embed", "0.4"]
        d.start()
        wait_until(lambda: (lambda m: m if m and m["vectors"] >= 4 else None)(_migration(d)), 60, 0.1,
                   "the migration to be under way")
        d.kill9()
    at_kill = _spaces(d).get("next", 0)
    new_id = _embedders(d)["next"][0]
    assert 0 < at_kill < N, "the test must kill the daemon mid-migration"

    # Ollama is not there at the next start (a boot where ragweedd starts first)
    port = free_port()
    d.env["RAGWEED_EMBED_OLLAMA_URL"] = f"http://127.0.0.1:{port}"
    d.launcher_args = []
    d.start()
    s = d.status()
    assert s["embedder"]["id"] == old_id, "the old model serves"
    m = s["embed_migration"]
    assert (m["state"], m["model"], m["old_embedder_id"], m["new_embedder_id"], m["dim"]) == (
        "blocked", f"ollama:{MODEL}", old_id, new_id, 32)
    assert m["vectors"] == at_kill and m["pending_chunks"] == N - at_kill
    assert f"cannot reach Ollama at http://127.0.0.1:{port}" in m["problem"]
    assert "ollama serve" in m["problem"] and "goes on where it stopped" in m["problem"]
    assert m["problem"] in s["degraded"]
    assert d.events("model_swap_blocked")
    for i in (3, 11, 23):
        assert _top(d, f"mz{i:02d}k") == f"n{i:02d}.txt"
    # a file added meanwhile is embedded by the old model at once
    (root / "n99.txt").write_text("Note 99 arrives while the move waits; codeword mz99k.\n")
    wait_until(lambda: _spaces(d)["primary"] == N + 1, 60, 0.1, "the new file's old-model vector")
    assert _top(d, "mz99k") == "n99.txt"
    assert _spaces(d).get("next", 0) == at_kill, "nothing of the new model is built while it is away"
    ctl = subprocess.run([sys.executable, "-m", "ragweedd.cli.ctl", "--state-dir", str(d.base / "state"),
                          "status"], capture_output=True, text=True, timeout=60, cwd=str(ROOT))
    assert ctl.returncode == 0, ctl.stderr
    assert f"changing embed.model to ollama:{MODEL} (32-d): blocked, " in ctl.stdout, ctl.stdout

    # Ollama comes up on that address: the daemon notices by itself and the move goes on
    with FakeLLMServer(embed_dims={MODEL: 32}, port=port) as srv2:
        wait_until(lambda: _switched(d), 90, 0.1, "the move to resume and switch")
        assert d.events("model_swap_unblocked")
        assert d.events("model_swap_started")[-1]["resumed"] == ["notes"]
        assert d.status().get("embed_migration") is None
        assert not any("embed.model" in r for r in d.status()["degraded"])
        # only the chunks still without a new vector were embedded (at most a batch in flight at the kill)
        assert N + 1 - at_kill <= len(_texts(srv2)) <= N + 1 - at_kill + 2, (at_kill, len(_texts(srv2)))
        assert _spaces(d) == {"primary": N + 1, "chunks": N + 1}
        d.wait_idle(60)
        for i in (3, 11, 23):
            assert _top(d, f"mz{i:02d}k") == f"n{i:02d}.txt"
        assert _top(d, "mz99k") == "n99.txt"
        d.stop(30)


def test_a_model_not_pulled_at_the_start_of_a_move_keeps_the_old_model_until_the_config_is_fixed(daemon, tmp_path):
    root = _notes(tmp_path)
    with FakeLLMServer(embed_dims={MODEL: 32}) as srv:
        d, old_id = _indexed_then_stopped(daemon, root, srv, batch_size=4)
        d.env["RAGWEED_EMBED_MODEL"] = "ollama:notpulled"  # a typo: the server has no such model
        d.start()
        s = d.status()
        assert s["embedder"]["id"] == old_id
        m = s["embed_migration"]
        assert (m["state"], m["model"], m["new_embedder_id"], m["dim"]) == ("blocked", "ollama:notpulled", "", 0)
        assert (m["vectors"], m["pending_chunks"], m["percent"]) == (0, N, 0.0)
        assert "does not have the model 'notpulled'" in m["problem"] and "ollama pull notpulled" in m["problem"]
        assert m["problem"] in s["degraded"]
        assert _top(d, "mz07k") == "n07.txt"
        assert list(_embedders(d)) == ["primary"], "nothing is recorded for a model that never loaded"
        # it keeps being tried (and keeps failing), the daemon keeps serving
        wait_until(lambda: sum(1 for r in list(srv.requests) if "notpulled" in str(r.get("model"))) >= 3,
                   30, 0.1, "the model to be tried again")
        assert d.proc.poll() is None and _top(d, "mz11k") == "n11.txt"

        # the user fixes embed.model: the move starts and completes
        d.stop(30)
        d.env["RAGWEED_EMBED_MODEL"] = f"ollama:{MODEL}"
        d.start()
        wait_until(lambda: _switched(d), 90, 0.1, "the move to the fixed model")
        assert d.status().get("embed_migration") is None
        assert _spaces(d) == {"primary": N, "chunks": N}
        assert _top(d, "mz07k") == "n07.txt"
        d.stop(30)


def test_without_an_old_model_to_serve_an_unloadable_model_still_stops_the_start(daemon, tmp_path):
    root = _notes(tmp_path)
    port = free_port()
    d = daemon({"notes": [root]}, env={"RAGWEED_EMBED_MODEL": f"ollama:{MODEL}",
                                       "RAGWEED_EMBED_OLLAMA_URL": f"http://127.0.0.1:{port}"}, start=False)
    d.start(wait=False)
    assert d.proc.wait(60) != 0
    assert f"cannot reach Ollama at http://127.0.0.1:{port}" in d.out.read_text()
    # the old model unavailable too: an Ollama-embedded collection moving to another Ollama model
    with FakeLLMServer(embed_dims={MODEL: 32}) as srv:
        d.env["RAGWEED_EMBED_OLLAMA_URL"] = srv.url
        d.start()
        d.wait_idle(90)
        with d.db("notes") as c:
            assert c.execute("SELECT count(*) FROM vectors").fetchone()[0] == N
        d.stop(30)
    d.env["RAGWEED_EMBED_MODEL"] = "ollama:othermodel"  # its server, which also had the old model, is gone
    d.start(wait=False)
    assert d.proc.wait(60) != 0
    assert re.search(f"cannot reach Ollama at {srv.url}/api/[a-z]+ for model othermodel", d.out.read_text())
    assert not d.events("model_swap_blocked")
