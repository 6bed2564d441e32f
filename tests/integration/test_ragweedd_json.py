"""``--json`` on every ragweedd command (before or after the command): one JSON document on stdout,
errors as a JSON error object, exit codes as without it. Real one-shot processes on real files
(hash embedder). ``run --json`` is in tests/system/test_cli_keys_daemon.py; completion and man in
tests/unit/test_cli_completion.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    base = tmp_path_factory.mktemp("rjson")
    docs = base / "docs"
    docs.mkdir()
    (docs / "tea.txt").write_text("Green tea should steep for two minutes at eighty degrees.\n")
    (docs / "cats.md").write_text("# Cats\n\nCats purr when they are content.\n")
    (docs / "broken.pdf").write_bytes(b"%PDF-1.4 this is not really a pdf\n")
    cfg = base / "c.toml"
    cfg.write_text(f'data_dir = "{base / "data"}"\nstate_dir = "{base / "state"}"\ncache_dir = "{base / "cache"}"\n'
                   '[llm]\nanthropic_api_key = "sk-very-secret"\n'
                   f'[collections.notes]\npaths = ["{docs}"]\n')
    return base, cfg


def rd(cfg: Path, *argv: str, timeout: float = 180) -> tuple[int, str, str]:
    env = {**os.environ, "RAGWEED_EMBED_MODEL": "hash:64"}
    p = subprocess.run([sys.executable, "-m", "ragweedd", "--config", str(cfg), *argv], capture_output=True,
                       text=True, env=env, cwd=ROOT, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def one_doc(stdout: str) -> dict:
    return json.loads(stdout)  # exactly one document, nothing else on stdout


def test_ingest_search_ask_in_json(setup):
    base, cfg = setup
    code, out, err = rd(cfg, "ingest", "-c", "notes", "--json")
    doc = one_doc(out)
    assert code == 1  # broken.pdf failed: the same exit code as without --json
    assert doc["files"] == {"indexed": 2, "failed": 1} and doc["new_chunks"] >= 2 and not doc["ok"]
    assert [p["path"].endswith("broken.pdf") for p in doc["problems"]] == [True]
    code, out, _ = rd(cfg, "--json", "ingest", "-c", "notes", "--rebuild-fts")
    assert code == 0 and one_doc(out) == {"collection": "notes", "rebuilt_fts_chunks": 2}
    code, out, _ = rd(cfg, "--json", "search", "green tea")
    assert code == 0 and one_doc(out)["results"][0]["filename"] == "tea.txt"
    code, out, _ = rd(cfg, "ask", "--json", "how long does green tea steep?")
    doc = one_doc(out)
    assert code == 0 and doc["history_id"] and doc["sources"]


def test_check_config_and_doctor_in_json(setup):
    _, cfg = setup
    code, out, _ = rd(cfg, "--json", "check-config")
    doc = one_doc(out)
    assert code == 0 and doc["ok"] and doc["source"] == str(cfg)
    assert doc["config"]["embed"]["model"] and "notes" in doc["collections"]
    assert doc["config"]["llm"]["anthropic_api_key"] == "<set>" and "sk-very-secret" not in out
    code, out, _ = rd(cfg, "check-config")
    assert code == 0 and "sk-very-secret" not in out and 'anthropic_api_key = "<set>"' in out
    code, out, _ = rd(cfg, "doctor", "--json")
    doc = one_doc(out)
    assert code == 0 and {"format", "extractor", "ok", "extensions"} <= set(doc["formats"][0])


def test_eval_in_json_before_its_subcommand(setup):
    base, cfg = setup
    q = base / "q.jsonl"
    q.write_text(json.dumps({"query": "green tea", "relevant": [{"file": "tea.txt"}]}) + "\n")
    code, out, err = rd(cfg, "--json", "eval", "questions", str(q), "--collection", "notes")
    assert code == 0, err
    assert isinstance(one_doc(out), dict)


@pytest.mark.parametrize("argv,code,kind", [
    (["ingest", "-c", "notes", "/nonexistent/folder"], 2, "bad_request"),
    (["search", "x", "-c", "nope"], 2, "not_found"),  # as ragweedctl's: the request's fault
    (["ask", "--continue", "0000000000000000"], None, None),
    (["ask"], 2, "bad_request"),
])
def test_errors_are_a_json_object_with_the_usual_exit_code(setup, argv, code, kind):
    _, cfg = setup
    plain_code, plain_out, plain_err = rd(cfg, *argv)
    got, out, err = rd(cfg, "--json", *argv)
    assert got == plain_code and got != 0
    if code is not None:
        assert got == code
    doc = one_doc(out)
    assert set(doc) == {"error"} and doc["error"]["message"] and doc["error"]["message"] in err
    if kind:
        assert doc["error"]["code"] == kind


def test_a_bad_config_is_a_json_error_too(tmp_path):
    cfg = tmp_path / "bad.toml"
    cfg.write_text("top_k = 'many'\n")
    for cmd in ("check-config", "doctor", "search"):
        argv = [cmd, "q"] if cmd == "search" else [cmd]
        code, out, err = rd(cfg, "--json", *argv)
        assert code == 2 and one_doc(out)["error"]["code"] == "config" and "top_k" in err
