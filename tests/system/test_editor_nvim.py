"""editors/nvim (ragweed.nvim) in Debian's Neovim, headless, against a real daemon.

Each test runs `nvim --headless --clean` with the plugin on the runtimepath (its installation line)
and a Lua scenario: the commands a person types, Enter pressed in the quickfix window or the answer
buffer as keys, and vim.ui.select answered the way a picker plugin answers it. The scenario writes
what it saw (quickfix entries, picker rows, the buffer and line the cursor ended in, the messages)
to a JSON file; PDF viewers and the system opener are recorders on PATH (tests/system/editor_support.py).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.system.conftest import ROOT
from tests.system.editor_support import (
    LIMIT,
    NOWHERE,
    TEA,
    Tools,
    bad_token_state,
    editor_daemon,
    not_running_state,
    target,
)
from tests.tools import require_tool

PLUGIN = ROOT / "editors" / "nvim"
ERROR, WARN = 4, 3  # vim.log.levels

HARNESS = """
local result = { notes = {} }
vim.notify = function(msg, level) table.insert(result.notes, { msg = msg, level = level }) end
local function wait_for(pred, what)
  if not vim.wait(240000, pred, 20) then error("timed out waiting for " .. what) end
end
local function press(keys)
  vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes(keys, true, false, true), "x", false)
end
local function where()
  return { file = vim.api.nvim_buf_get_name(0), line = vim.api.nvim_win_get_cursor(0)[1], buftype = vim.bo.buftype }
end
local function quickfix()
  local out = {}
  for i, e in ipairs(vim.fn.getqflist()) do
    out[i] = { file = e.bufnr > 0 and vim.api.nvim_buf_get_name(e.bufnr) or "", lnum = e.lnum,
               module = e.module, valid = e.valid }
  end
  return out
end
local function errors_after(n)
  return function()
    for i = n + 1, #result.notes do
      if result.notes[i].level >= vim.log.levels.WARN then return true end
    end
    return false
  end
end
local ok, err = xpcall(function()
--SCENARIO--
end, debug.traceback)
if not ok then result.harness_error = err end
result.errmsg = vim.v.errmsg
local f = io.open(--OUT--, "w")
f:write(vim.json.encode(result))
f:close()
vim.cmd("qa!")
"""


@pytest.fixture(scope="module")
def d(tmp_path_factory):
    require_tool("nvim")  # before the daemon starts: nothing to start it for
    with editor_daemon(tmp_path_factory.mktemp("nvim")) as dm:
        yield dm


@pytest.fixture
def tools(tmp_path):
    return Tools(tmp_path)


def lua(value) -> str:
    """A Lua literal of a string, number or flat list (JSON's escapes are Lua's for these)."""
    if isinstance(value, (list, tuple)):
        return "{ " + ", ".join(lua(v) for v in value) + " }"
    return json.dumps(value if not isinstance(value, Path) else str(value))


def nvim(tmp_path: Path, env: dict, scenario: str) -> dict:
    """Run the scenario; what it recorded. Fails on any Lua error or traceback the editor showed."""
    exe = require_tool("nvim")
    out = tmp_path / "nvim-result.json"
    script = tmp_path / "scenario.lua"
    script.write_text(HARNESS.replace("--SCENARIO--", scenario).replace("--OUT--", lua(out)))
    # HOME in the test's folder: whatever Neovim keeps (its log, shada) stays out of the user's
    r = subprocess.run([exe, "--headless", "--clean", "--cmd", f"lua vim.opt.runtimepath:append({lua(PLUGIN)})",
                        "-c", f"luafile {script}"], env={**env, "HOME": str(tmp_path)}, cwd=tmp_path,
                       capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
    assert out.exists(), f"nvim wrote no result (exit {r.returncode}):\n{r.stdout}\n{r.stderr}"
    res = json.loads(out.read_text())
    assert "harness_error" not in res, res["harness_error"]
    for text in (r.stdout, r.stderr, res["errmsg"], *[n["msg"] for n in res["notes"]]):
        assert "traceback" not in text and "E5108" not in text and "Error executing" not in text, text
    assert res["errmsg"] == "", res["errmsg"]
    return res


def docs(d) -> Path:
    return d.base.parent / "docs"


def test_search_fills_the_quickfix_list_and_enter_opens_the_line_or_the_pdf_page(d, tools, tmp_path):
    cats = [target(h["uri"]) for h in d.search("cat number 27", top_k=LIMIT)]
    deepest = max(range(len(cats)), key=lambda i: cats[i].get("line") or 0)
    assert cats[deepest]["line"] > 1
    pdf_hits = d.search("lighthouse keeper lantern", top_k=LIMIT)
    page2 = next(i for i, h in enumerate(pdf_hits) if target(h["uri"]).get("page") == 2)
    tools.pdf_app("org.pwmt.zathura.desktop")
    res = nvim(tmp_path, tools.env(d.base / "state"), f"""
vim.cmd("RagweedSearch! cat number 27")
wait_for(function() return #vim.fn.getqflist() > 0 or #result.notes > 0 end, "the quickfix list")
result.qf, result.title, result.in_qf = quickfix(), vim.fn.getqflist({{ title = 1 }}).title, vim.bo.buftype
vim.api.nvim_win_set_cursor(0, {{ {deepest + 1}, 0 }})
press("<CR>")
result.opened = where()
vim.cmd("RagweedSearch! lighthouse keeper lantern")
wait_for(function() return vim.fn.getqflist({{ title = 1 }}).title:find("lighthouse") ~= nil end, "the second list")
result.qf2 = quickfix()
vim.api.nvim_win_set_cursor(0, {{ {page2 + 1}, 0 }})
press("<CR>")
result.after_pdf = where()
""")
    assert res["notes"] == []
    assert res["title"] == "ragweed: cat number 27" and res["in_qf"] == "quickfix"
    # every hit, best first, as the daemon ranks them; text hits at their first line, PDFs by name
    assert [(e["file"] or e["module"], e["lnum"]) for e in res["qf"]] == [
        (t["path"], t["line"]) if "line" in t else ("notes/" + Path(t["path"]).name, 0) for t in cats]
    assert res["opened"] == {"file": cats[deepest]["path"], "line": cats[deepest]["line"], "buftype": ""}
    # a PDF is no buffer: listed by name, not a valid entry for :cnext, opened in its viewer at the page
    pdf_entry = res["qf2"][page2]
    assert pdf_entry == {"file": "", "lnum": 0, "module": "notes/keeper.pdf", "valid": 0}
    assert tools.wait_call("zathura") == ["--page=2", str(docs(d) / "keeper.pdf")]
    assert res["after_pdf"]["buftype"] == "quickfix"  # the editor stayed where it was


def test_search_in_the_picker_opens_the_chosen_hit_at_its_line(d, tools, tmp_path):
    hits = d.search("cat number 27", top_k=LIMIT)
    cats = [target(h["uri"]) for h in hits]
    deepest = max(range(len(cats)), key=lambda i: cats[i].get("line") or 0)
    first, last = hits[deepest]["lines"]
    # vim.ui.select answered as a picker plugin (telescope, fzf-lua, dressing) answers it
    res = nvim(tmp_path, tools.env(d.base / "state"), f"""
vim.ui.select = function(items, opts, on_choice)
  result.prompt, result.kind, result.rows = opts.prompt, opts.kind, {{}}
  for i, item in ipairs(items) do result.rows[i] = opts.format_item(item) end
  on_choice(items[{deepest + 1}], {deepest + 1})
end
vim.cmd("RagweedSearch cat number 27")
wait_for(function() return vim.api.nvim_buf_get_name(0) ~= "" or #result.notes > 0 end, "a file")
result.opened = where()
""")
    assert res["notes"] == []
    assert res["prompt"] == "ragweed: cat number 27" and res["kind"] == "ragweed"
    assert len(res["rows"]) == len(hits)
    assert all(r.startswith(f"[{n}] ") and "notes/" in r for n, r in enumerate(res["rows"], 1))
    assert f"notes/cats.md  § Cats, lines {first}-{last}  " in res["rows"][deepest]
    assert res["opened"] == {"file": cats[deepest]["path"], "line": first, "buftype": ""}


def test_ask_shows_the_answer_and_enter_on_a_citation_opens_the_quoted_line(d, tools, tmp_path):
    line = TEA.splitlines().index(next(x for x in TEA.splitlines() if x.startswith("Green tea"))) + 1
    res = nvim(tmp_path, tools.env(d.base / "state"), """
vim.cmd("RagweedAsk how long should green tea steep")
wait_for(function() return vim.api.nvim_buf_get_name(0):find("ragweed://answer", 1, true) ~= nil
                           or errors_after(0)() end, "the answer")
result.answer, result.answer_win = vim.api.nvim_buf_get_lines(0, 0, -1, false), vim.api.nvim_get_current_win()
vim.fn.search("\\\\[1\\\\]")
press("<CR>")
result.opened = where()
result.answer_shown = vim.api.nvim_win_is_valid(result.answer_win)
vim.cmd("RagweedAsk! how long should green tea steep")
wait_for(function() return #vim.fn.getqflist() > 0 or errors_after(0)() end, "the sources in the quickfix list")
result.qf = quickfix()
""")
    assert [n for n in res["notes"] if n["level"] >= WARN] == []
    text = "\n".join(res["answer"])
    assert "Green tea should steep for two minutes" in text and "Sources" in text
    # the cited sentence's own line, not the passage's first
    assert res["opened"] == {"file": str(docs(d) / "tea.txt"), "line": line, "buftype": ""}
    assert res["answer_shown"]  # the file opened beside the answer
    assert (str(docs(d) / "tea.txt"), line) in [(e["file"], e["lnum"]) for e in res["qf"]]


def test_errors_are_messages_not_tracebacks(d, tools, tmp_path):
    gone, bad = not_running_state(tmp_path), bad_token_state(d, tmp_path)
    missing = tmp_path / "nowhere" / "ragweedctl"
    res = nvim(tmp_path, tools.env(d.base / "state"), f"""
local function attempt(setup, cmd)
  require("ragweed").setup(setup)
  local before = #result.notes
  vim.cmd(cmd)
  wait_for(errors_after(before), cmd)
end
attempt({{ state_dir = {lua(gone)} }}, "RagweedSearch tea")
attempt({{ state_dir = {lua(bad)} }}, "RagweedSearch tea")
attempt({{ path_glob = {lua(NOWHERE)} }}, "RagweedSearch tea")
attempt({{ cmd = {lua([missing])} }}, "RagweedSearch tea")
attempt({{ state_dir = {lua(gone)} }}, "RagweedAsk tea")
""")
    said = [(n["level"], n["msg"]) for n in res["notes"] if n["msg"] != "ragweed: asking…"]
    not_running = (f"ragweed: ragweedd is not running (no port file at {gone / 'port'}) — start it with "
                   "`ragweedd run`, or install it as a service with `ragweedctl service install`")
    assert said[0] == (ERROR, not_running)
    assert said[1][0] == ERROR and said[1][1].startswith(
        f"ragweed: the server on 127.0.0.1:{d.port} did not prove it knows the API token in {bad / 'token'}")
    assert said[2] == (WARN, "ragweed: no results for \"tea\"")
    assert said[3][0] == ERROR and said[3][1].startswith(f"ragweed: cannot run {missing} (")
    assert "setup" in said[3][1]
    assert said[4] == (ERROR, not_running)
    assert len(said) == 5


def test_finds_the_daemon_as_ragweedctl_does(d, tools, tmp_path):
    """The state_dir setting (ragweedctl's --state-dir) wins over RAGWEED_STATE_DIR, as in ragweedctl;
    without it, RAGWEED_STATE_DIR is used (the other tests)."""
    gone = not_running_state(tmp_path)
    want = [target(h["uri"])["path"] for h in d.search("green tea", top_k=LIMIT)]
    res = nvim(tmp_path, tools.env(gone), f"""
require("ragweed").setup({{ state_dir = {lua(d.base / "state")}, results = "quickfix" }})
vim.cmd("RagweedSearch green tea")
wait_for(function() return #vim.fn.getqflist() > 0 or #result.notes > 0 end, "the quickfix list")
result.qf = quickfix()
""")
    assert res["notes"] == []
    assert [e["file"] or e["module"] for e in res["qf"]] == [
        p if not p.endswith(".pdf") else "notes/" + Path(p).name for p in want]
