"""The command lines' edges, run as real processes: collection names the daemon would refuse are
refused by the one-shot commands too (nothing written outside data_dir/collections); with --json
every error, usage errors included, is a JSON object on stdout; a reader that closes stdout early
gets no traceback; "not found" has the same exit code in ragweedd and ragweedctl."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

RULE = "(must match ^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$)"
BAD_NAMES = ["../../escape", "ABS", "bad name/", ".hidden", "x\n", "a" * 65]


@pytest.fixture()
def setup(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'data_dir = "{tmp_path / "data"}"\ncache_dir = "{tmp_path / "cache"}"\n')
    doc = tmp_path / "f.txt"
    doc.write_text("hello world\n")
    return tmp_path, cfg, doc, {**os.environ, "HOME": str(home), "RAGWEED_EMBED_MODEL": "hash:64",
                                "RAGWEED_STATE_DIR": str(tmp_path / "state")}


def run(env, *argv, shell: str | None = None) -> tuple[int, str, str]:
    if shell:
        p = subprocess.run(["bash", "-c", shell], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    else:
        p = subprocess.run([sys.executable, *argv], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    return p.returncode, p.stdout, p.stderr


def rd(env, cfg, *argv):
    return run(env, "-m", "ragweedd", "--config", str(cfg), *argv)


def ctl(env, *argv):
    return run(env, "-m", "ragweedd.cli.ctl", *argv)


def files_under(p: Path) -> set[str]:
    return {str(f.relative_to(p)) for f in p.rglob("*")} if p.exists() else set()


# --------------------------------------------------------------------------- collection names
@pytest.mark.parametrize("name", BAD_NAMES)
def test_one_shot_commands_refuse_names_the_daemon_refuses(setup, name):
    tmp, cfg, doc, env = setup
    name = str(tmp / "abs") if name == "ABS" else name
    before = files_under(tmp)
    q = tmp / "q.jsonl"
    q.write_text(json.dumps({"query": "hello", "relevant": [{"file": "f.txt"}]}) + "\n")
    for argv in (["ingest", str(doc), "--collection", name], ["search", "hello", "-c", name],
                 ["ask", "hello", "-c", name], ["eval", "questions", str(q), "--collection", name],
                 ["ingest", "--collection", name, "--rebuild-fts"]):
        code, out, err = rd(env, cfg, *argv)
        assert code == 2, (argv, out, err)
        assert f"name {name!r} is not allowed {RULE}" in err, err
        code, out, err = rd(env, cfg, "--json", *argv)
        e = json.loads(out)["error"]
        assert code == 2 and e["code"] == "bad_request" and e["message"] == f"name {name!r} is not allowed {RULE}"
    # nothing was written: not outside data_dir, not even the data dir itself
    assert files_under(tmp) == before | {"q.jsonl"}
    assert not (tmp.parent / "escape").exists() and not (tmp / "abs").exists()


def test_a_good_name_still_ingests(setup):
    tmp, cfg, doc, env = setup
    code, out, err = rd(env, cfg, "--json", "ingest", str(doc), "--collection", "Good_name.1-x")
    assert code == 0, err
    assert (tmp / "data" / "collections" / "Good_name.1-x" / "rag.sqlite3").exists()


def test_the_path_of_a_collection_cannot_be_built_for_a_bad_name(tmp_path):
    from ragweedd.errors import RequestError
    from ragweedd.paths import Paths

    paths = Paths(data=tmp_path / "d", cache=tmp_path / "c", state=tmp_path / "s")
    assert paths.collection_dir("notes") == tmp_path / "d" / "collections" / "notes"
    for name in ("..", "../x", "/etc", "a/b", "", "x\n", "-x"):
        with pytest.raises(RequestError, match="is not allowed"):
            paths.rag_db(name)


# --------------------------------------------------------------------------- --json usage errors
@pytest.mark.parametrize("prog,argv,message", [
    ("ragweedd", ["--json", "search"], "the following arguments are required: query"),
    ("ragweedd", ["search", "--json"], "the following arguments are required: query"),
    ("ragweedd", ["--json", "completion", "tcsh"], "invalid choice: 'tcsh'"),
    ("ragweedd", ["--json", "bogus"], "invalid choice: 'bogus'"),
    ("ragweedd", ["--json", "search", "x", "--limit", "many"], "'many' is not a whole number >= 1"),
    ("ragweedctl", ["--json", "search"], "the following arguments are required: query"),
    ("ragweedctl", ["--json", "bogus"], "invalid choice: 'bogus'"),
    ("ragweedctl", ["--json", "keys", "frobnicate"], "invalid choice: 'frobnicate'"),
])
def test_usage_errors_under_json_are_a_json_object(setup, prog, argv, message):
    tmp, cfg, _, env = setup
    code, out, err = (rd(env, cfg, *argv) if prog == "ragweedd" else ctl(env, *argv))
    assert code == 2, err
    e = json.loads(out)["error"]
    assert e["code"] == "usage" and message in e["message"] and e["hint"].startswith(f"see `{prog}")
    assert "usage:" in err and message in err  # the text stays on stderr
    plain = (rd(env, cfg, *[a for a in argv if a != "--json"]) if prog == "ragweedd"
             else ctl(env, *[a for a in argv if a != "--json"]))
    assert plain[0] == 2 and plain[1] == ""  # without --json: stdout stays empty


@pytest.mark.parametrize("argv,message", [
    (["keys", "set", "bogus"], "unknown provider 'bogus'"),
    (["keys", "remove", "gemini"], "no key for gemini"),
    (["keys", "list", "openai"], "keys list takes no PROVIDER"),
])
def test_ctl_local_errors_under_json_are_a_json_object(setup, argv, message):
    _, _, _, env = setup
    code, out, err = ctl(env, "--json", *argv)
    assert code == 2 and message in err
    e = json.loads(out)["error"]
    assert e["code"] == "usage" and message in e["message"]


# --------------------------------------------------------------------------- closed stdout
@pytest.mark.parametrize("cmd", ["ragweedd --config CFG --json check-config", "ragweedd --config CFG check-config",
                                 "ragweedd --config CFG --json doctor", "ragweedctl --json keys list",
                                 "ragweedctl man", "ragweedd man"])
def test_a_closed_stdout_is_quiet(setup, cmd):
    _, cfg, _, env = setup
    exe = {"ragweedd": f"{sys.executable} -m ragweedd", "ragweedctl": f"{sys.executable} -m ragweedd.cli.ctl"}
    prog, rest = cmd.split(" ", 1)
    # the reader has closed its end before the program writes: every write fails with EPIPE
    line = f"{exe[prog]} {rest.replace('CFG', str(cfg))} | (exec 0<&-; sleep 2); echo \"rc=${{PIPESTATUS[0]}}\""
    code, out, err = run(env, shell=line)
    assert out.strip() == "rc=0" and "Traceback" not in err and "BrokenPipe" not in err, (out, err)


@pytest.mark.parametrize("cmd,rc", [("ragweedd --config CFG --json ask hello", 0),
                                    ("ragweedd --config CFG ask hello", 0),
                                    ("ragweedd --config CFG --json search hello", 0),
                                    ("ragweedd --config CFG --json search hello -c nope", 2),
                                    ("ragweedd --config CFG --json bogus", 2),
                                    ("ragweedctl --json keys set bogus", 2),
                                    ("ragweedctl --json bogus", 2)])
def test_a_closed_stdout_keeps_an_error_exit_code_and_is_quiet(setup, cmd, rc):
    _, cfg, doc, env = setup
    assert rd(env, cfg, "ingest", str(doc), "-c", "notes")[0] == 0
    exe = {"ragweedd": f"{sys.executable} -m ragweedd", "ragweedctl": f"{sys.executable} -m ragweedd.cli.ctl"}
    prog, rest = cmd.split(" ", 1)
    line = f"{exe[prog]} {rest.replace('CFG', str(cfg))} | (exec 0<&-; sleep 2); echo \"rc=${{PIPESTATUS[0]}}\""
    code, out, err = run(env, shell=line)
    assert out.strip() == f"rc={rc}" and "Traceback" not in err and "BrokenPipe" not in err, (out, err)


# --------------------------------------------------------------------------- exit codes
def test_one_table_of_exit_codes():
    from ragweedd.cli.exits import exit_code_for
    from ragweedd.errors import (
        ConfigError,
        EmbedderError,
        ExtractionError,
        NotFoundError,
        ProviderRateLimited,
        RequestError,
        StorageError,
    )

    for err, want in ((NotFoundError, 2), (RequestError, 2), (ConfigError, 2), (StorageError, 1),
                      (EmbedderError, 1), (ProviderRateLimited, 1), (ExtractionError, 1)):
        assert exit_code_for(err.code, err.http_status) == want, err
    # what ragweedctl sees from the daemon: the envelope's code and the HTTP status
    assert exit_code_for("not_found", 404) == exit_code_for(NotFoundError.code, NotFoundError.http_status) == 2
    assert exit_code_for("unauthorized", 401) == 2 and exit_code_for("internal", 500) == 1
    assert exit_code_for("daemon_not_running") == 3 and exit_code_for("repairing", 503) == 1


def test_ragweedd_not_found_is_exit_2(setup):
    tmp, cfg, doc, env = setup
    assert rd(env, cfg, "ingest", str(doc), "-c", "notes")[0] == 0
    code, out, err = rd(env, cfg, "--json", "search", "hello", "--collection", "nope")
    assert code == 2 and json.loads(out)["error"]["code"] == "not_found", err
