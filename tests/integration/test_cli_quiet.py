"""One-shot ragweedd commands are quiet (issue 24, point 6): no info log on stderr unless
``--verbose``; warnings and errors still shown, one short human line each. And one-shot ``ragweedd
search`` gets the same snippet fields as the daemon's API (point 5). Real one-shot processes on real
files (hash embedder)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def rd(cfg: Path, *argv: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "RAGWEED_EMBED_MODEL": "hash:64"}
    env.pop("NO_COLOR", None)
    return subprocess.run([sys.executable, "-m", "ragweedd", "--config", str(cfg), *argv], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=180)


def test_one_shot_commands_log_only_with_verbose(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "tea.txt").write_text("Green tea should steep for two minutes at eighty degrees.\n")
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'data_dir = "{tmp_path / "data"}"\nstate_dir = "{tmp_path / "state"}"\n'
                   f'cache_dir = "{tmp_path / "cache"}"\n')
    p = rd(cfg, "ingest", str(docs), "-c", "quiet")
    assert p.returncode == 0 and "ingested into 'quiet'" in p.stdout
    assert p.stderr == "", p.stderr  # no JSON log lines
    p = rd(cfg, "search", "green tea")
    assert p.returncode == 0 and "tea.txt" in p.stdout and p.stderr == "", p.stderr
    p = rd(cfg, "check-config")
    assert p.returncode == 0 and p.stderr == "", p.stderr
    p = rd(cfg, "ingest", str(docs), "-c", "loud", "--verbose")
    assert p.returncode == 0 and '"event": "ingest_file"' in p.stderr, p.stderr  # the info log, as before


def test_warnings_are_one_short_human_line():
    from ragweedd.logging import at_least, configure, get_logger

    out = io.StringIO()
    try:
        configure(at_least("info", "warning"), stream=out, brief=True)
        log = get_logger("ragweedd.test")
        log.info("not_shown", a=1)
        log.warning("hyde_fallback", error="timed out", code="timeout")
    finally:
        configure()
    assert out.getvalue() == "ragweedd: warning: hyde_fallback (error=timed out, code=timeout)\n"


def test_one_shot_search_hits_carry_the_snippet_and_its_marks(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "tea.txt").write_text(("Filler words about nothing much at all. " * 20) + "Green tea should steep for "
                                  "two minutes; steeping it longer makes it bitter. " + ("More filler here. " * 20))
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'data_dir = "{tmp_path / "data"}"\nstate_dir = "{tmp_path / "state"}"\n'
                   f'cache_dir = "{tmp_path / "cache"}"\n')
    assert rd(cfg, "ingest", str(docs), "-c", "tea").returncode == 0
    p = rd(cfg, "search", "how long to STEEP green tea", "--json")
    hit = json.loads(p.stdout)["results"][0]
    snippet = hit["snippet"]
    assert snippet.startswith("… ") and snippet.endswith(" …") and len(snippet) <= 340
    assert [snippet[a:b] for a, b in hit["snippet_marks"]] == ["Green", "tea", "steep", "steeping"]
    p = rd(cfg, "search", "how long to STEEP green tea")  # not a terminal: the same snippet, plain
    assert f"    {snippet}\n" in p.stdout and "\x1b" not in p.stdout
