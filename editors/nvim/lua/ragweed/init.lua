-- ragweed.nvim: search the ragweedd index and ask it questions from Neovim (0.7 or newer).
--
-- Every request goes through `ragweedctl --json`, so the plugin finds the daemon exactly as
-- ragweedctl does (--state-dir, else $RAGWEED_STATE_DIR, else the OS state directory) and inherits
-- its checks: the API token is sent only to a daemon that proved it knows it, a stale port file is
-- reported as such. Errors are ragweedctl's own words, shown with vim.notify, never a Lua traceback.

local M = {}

M.defaults = {
  cmd = { "ragweedctl" }, -- how to run ragweedctl: { "/path/to/.venv/bin/ragweedctl" }
  state_dir = nil, -- passed on as --state-dir
  collections = {}, -- only these collections (-c NAME each); empty: all
  path_glob = nil, -- only files whose path matches, e.g. "*/notes/*"
  limit = 20, -- hits of a search, passages retrieved for an answer
  results = "select", -- "select" (vim.ui.select) or "quickfix"; the command's ! picks the other
  pdf_viewer = nil, -- { "zathura", "--page={page}", "{path}" }; nil: the desktop's viewer (see below)
}
M.config = vim.deepcopy(M.defaults)

function M.setup(opts)
  -- shallow on purpose: a list such as cmd replaces the default, it is not merged into it
  M.config = vim.tbl_extend("force", vim.deepcopy(M.defaults), opts or {})
end

local function notify(msg, level)
  vim.notify("ragweed: " .. msg, level or vim.log.levels.ERROR)
end

-- A callback's failure as one line, never a traceback: the bug is still visible, the user is not
-- left with an E5108 screen.
local function guarded(fn)
  return function(...)
    -- xpcall takes no arguments for fn in Lua 5.1 (only LuaJIT does): a closure carries them
    local args, n = { ... }, select("#", ...)
    local ok, err = xpcall(function() return fn((table.unpack or unpack)(args, 1, n)) end,
      function(e) return tostring(e) end)
    if not ok then
      notify("internal error: " .. tostring(err):gsub("\n.*", ""))
    end
  end
end

local function val(v) -- JSON null arrives as vim.NIL
  if v == vim.NIL then return nil end
  return v
end

-- --------------------------------------------------------------------------- ragweedctl
local function ragweedctl(args, on_result)
  local c = M.config
  local argv = vim.list_extend(vim.deepcopy(c.cmd), { "--json" })
  if c.state_dir then vim.list_extend(argv, { "--state-dir", vim.fn.expand(c.state_dir) }) end
  vim.list_extend(argv, args)
  local out, err = {}, {}
  local ok, job = pcall(vim.fn.jobstart, argv, {
    stdin = "null",
    stdout_buffered = true,
    stderr_buffered = true,
    on_stdout = function(_, data) out = data end,
    on_stderr = function(_, data) err = data end,
    on_exit = function(_, code)
      vim.schedule(guarded(function()
        local text = table.concat(out, "\n")
        local decoded_ok, res = pcall(vim.json.decode, text)
        if decoded_ok and type(res) == "table" and type(val(res.error)) == "table" then
          local e = res.error
          local msg = type(val(e.message)) == "string" and e.message or "ragweedctl failed"
          -- ragweedctl's own last line on stderr says it for a person (the JSON's hint is worded for
          -- the HTTP API, and some messages are longer there): preferred when it is there
          local said
          for _, line in ipairs(err) do
            if line:sub(1, 12) == "ragweedctl: " then said = line:sub(13) end
          end
          if said then return notify(said) end
          if type(val(e.hint)) == "string" and e.hint ~= "" then msg = msg .. " — " .. e.hint end
          return notify(msg)
        end
        if code ~= 0 or not decoded_ok or type(res) ~= "table" then
          local why = vim.trim(table.concat(err, "\n"))
          return notify("ragweedctl failed: " .. (why ~= "" and why or ("exit code " .. code)))
        end
        on_result(res)
      end))
    end,
  })
  if not ok or job <= 0 then
    notify(("cannot run %s (%s): is ragweedd installed? Set cmd in require('ragweed').setup{}")
      :format(table.concat(c.cmd, " "), ok and "not executable" or tostring(job):gsub("^Vim:", "")))
  end
end

local function filters()
  local args = { "-n", tostring(M.config.limit) }
  for _, name in ipairs(M.config.collections or {}) do vim.list_extend(args, { "-c", name }) end
  if M.config.path_glob then vim.list_extend(args, { "--path-glob", M.config.path_glob }) end
  return args
end

-- --------------------------------------------------------------------------- places
local function unescape(s)
  return (s:gsub("%%(%x%x)", function(h) return string.char(tonumber(h, 16)) end))
end

-- A hit's uri (docs/api.md): file:///path#L12-L20 (lines of a text file), #page=3, #t=..., #member=...
function M.target(uri)
  local path, frag = uri:match("^file://([^#]*)#?(.*)$")
  if not path then return nil end
  local t = { uri = uri, path = unescape(path) } -- byte for byte: a name need not be UTF-8
  t.line = tonumber(frag:match("^L(%d+)"))
  t.page = tonumber(frag:match("^page=(%d+)"))
  return t
end

-- PDF viewers that take a page on their command line, by a word of the desktop file
-- `xdg-mime query default application/pdf` names. xdg-open cannot pass a page: its generic path
-- drops a #page= fragment and GNOME's `gio open` refuses a file uri that has one.
M.pdf_viewers = {
  { "evince", { "evince" }, { "--page-index={page}", "{path}" } },
  { "atril", { "atril" }, { "--page-index={page}", "{path}" } },
  { "xreader", { "xreader" }, { "--page-index={page}", "{path}" } },
  { "okular", { "okular" }, { "--page", "{page}", "{path}" } },
  { "zathura", { "zathura" }, { "--page={page}", "{path}" } },
  { "sioyek", { "sioyek" }, { "--page", "{page}", "{path}" } },
  { "qpdfview", { "qpdfview" }, { "--unique", "{path}#{page}" } },
  { "mupdf", { "mupdf" }, { "{path}", "{page}" } },
  { "xpdf", { "xpdf" }, { "{path}", "{page}" } },
  { "firefox", { "firefox", "firefox-esr" }, { "{uri}" } },
  { "chromium", { "chromium", "chromium-browser" }, { "{uri}" } },
  { "chrome", { "google-chrome", "google-chrome-stable" }, { "{uri}" } },
}

local function fill(template, t)
  local out = {}
  for _, a in ipairs(template) do
    out[#out + 1] = (a:gsub("{(%w+)}", function(k) return t[k] and tostring(t[k]) or "{" .. k .. "}" end))
  end
  return out
end

local function system_opener()
  return vim.fn.has("mac") == 1 and "open" or "xdg-open"
end

local function pdf_command(t)
  if M.config.pdf_viewer then return fill(M.config.pdf_viewer, t) end
  if vim.fn.has("mac") == 0 and vim.fn.executable("xdg-mime") == 1 then
    local app = vim.fn.system({ "xdg-mime", "query", "default", "application/pdf" }):lower()
    for _, v in ipairs(M.pdf_viewers) do
      if app:find(v[1], 1, true) then
        for _, exe in ipairs(v[2]) do
          if vim.fn.executable(exe) == 1 then return vim.list_extend({ exe }, fill(v[3], t)) end
        end
      end
    end
  end
  return { system_opener(), t.path } -- opens at its first page: no system opener passes a page on
end

local function run_detached(argv)
  local ok, job = pcall(vim.fn.jobstart, argv, { detach = true, stdin = "null" })
  if not ok or job <= 0 then
    notify(("cannot run %s: not found"):format(argv[1]))
    return false
  end
  return true
end

-- Open a target: a text file in this window at its line, anything else through the system opener
-- (a PDF in its viewer at the page).
function M.open(t)
  if vim.fn.filereadable(t.path) == 0 then
    return notify(t.path .. " is gone (moved or deleted since it was indexed)")
  end
  if t.line then
    local ok, err = pcall(vim.cmd, "edit " .. vim.fn.fnameescape(t.path))
    if not ok then return notify((tostring(err):gsub("^Vim%(%w+%):", ""))) end
    local last = vim.api.nvim_buf_line_count(0)
    vim.api.nvim_win_set_cursor(0, { math.min(t.line, last), 0 })
    vim.cmd("normal! zvzz")
  elseif t.page and t.path:lower():match("%.pdf$") then
    run_detached(pdf_command(t))
  else
    run_detached({ system_opener(), t.path })
  end
end

-- --------------------------------------------------------------------------- rows
local function strength(h)
  local rel = val(h.rel_score)
  if type(rel) ~= "number" or val(h.score) == nil then return nil end
  return rel >= 0.67 and "strong" or rel >= 0.33 and "partial" or "weak"
end

local function place(h)
  local bits = {}
  if val(h.member) then bits[#bits + 1] = "in " .. h.member end
  if val(h.page_label) then bits[#bits + 1] = "p. " .. h.page_label end
  if val(h.sheet) then bits[#bits + 1] = "sheet " .. h.sheet end
  if val(h.section) then bits[#bits + 1] = "§ " .. h.section end
  local lines = val(h.lines)
  if type(lines) == "table" and val(h.t_start) == nil then
    bits[#bits + 1] = lines[1] == lines[#lines] and ("line " .. lines[1]) or ("lines " .. lines[1] .. "-" .. lines[#lines])
  end
  return table.concat(bits, ", ")
end

local function name(h)
  local n = val(h.source_rel_path) or val(h.filename) or vim.fn.fnamemodify(val(h.source_file) or "?", ":t")
  return (val(h.collection) or "?") .. "/" .. n
end

local function oneline(s)
  -- a newline or another control character in a name or snippet would break the row
  return (tostring(s or ""):gsub("%c", " "))
end

local function snippet(h, chars)
  local s = oneline(val(h.snippet) or val(h.text) or ""):gsub("%s+", " ")
  if #s > chars then s = s:sub(1, chars):gsub("%s%S*$", "") .. " …" end
  return s
end

function M.row(n, h)
  local label = strength(h)
  local where = place(h)
  return oneline(("[%d] %s%s%s"):format(n, label and (label .. "  ") or "", name(h),
    where ~= "" and ("  " .. where) or "")) .. "  " .. snippet(h, 160)
end

-- --------------------------------------------------------------------------- results
local function to_quickfix(title, hits, uri_of)
  local items, targets = {}, {}
  for i, h in ipairs(hits) do
    local t = M.target(uri_of(h)) or { path = val(h.source_file) or "", uri = "" }
    local text = ((strength(h) and (strength(h) .. "  ") or "") .. place(h) .. "  " .. snippet(h, 200))
    if t.line then
      items[i] = { filename = t.path, lnum = t.line, col = 1, text = oneline(text) }
    else -- a PDF or a recording is no buffer: shown by name, opened by the <CR> below
      items[i] = { module = oneline(name(h)), text = oneline(text), valid = 0 }
    end
    targets[i] = t
  end
  vim.fn.setqflist({}, " ", { title = title, items = items, context = { ragweed = targets } })
  vim.cmd("botright copen")
  local buf = vim.api.nvim_get_current_buf()
  vim.keymap.set("n", "<CR>", guarded(function()
    local ctx = vim.fn.getqflist({ context = 1 }).context
    local list = type(ctx) == "table" and ctx.ragweed or nil
    local t = list and list[vim.fn.line(".")]
    if not t or t.line then
      -- a text entry, or a list that is not ours: Vim's own <CR> (it honours 'switchbuf')
      return vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes("<CR>", true, false, true), "n", false)
    end
    M.open(t)
  end), { buffer = buf, desc = "ragweed: open the entry at its place" })
end

local function to_select(prompt, hits, uri_of)
  vim.ui.select(hits, {
    prompt = prompt,
    kind = "ragweed",
    format_item = function(h) return M.row(h._n, h) end,
  }, guarded(function(h)
    if h then
      local t = M.target(uri_of(h))
      if t then M.open(t) else notify("cannot open " .. tostring(uri_of(h))) end
    end
  end))
end

local function show(prompt, hits, uri_of, quickfix)
  for i, h in ipairs(hits) do h._n = val(h.n) or i end
  if quickfix then to_quickfix(prompt, hits, uri_of) else to_select(prompt, hits, uri_of) end
end

local function want_quickfix(flip)
  local qf = M.config.results == "quickfix"
  if flip then return not qf end
  return qf
end

local function with_query(query, prompt, fn)
  query = vim.trim(query or "")
  if query ~= "" then return fn(query) end
  vim.ui.input({ prompt = prompt }, guarded(function(q)
    if q and vim.trim(q) ~= "" then fn(vim.trim(q)) end
  end))
end

function M.search(query, opts)
  opts = opts or {}
  with_query(query, "ragweed search: ", function(q)
    local args = vim.list_extend({ "search" }, filters())
    vim.list_extend(args, { "--", q })
    ragweedctl(args, function(res)
      local hits = type(val(res.results)) == "table" and res.results or {}
      if #hits == 0 then return notify(("no results for %q"):format(q), vim.log.levels.WARN) end
      show("ragweed: " .. q, hits, function(h) return h.uri end, want_quickfix(opts.flip))
    end)
  end)
end

-- --------------------------------------------------------------------------- answers
local function source_uri(s)
  -- the quoted sentence's own line or page when there is one, else the passage's
  local q = val(s.quote)
  return (type(q) == "table" and type(val(q.uri)) == "string") and q.uri or s.uri
end

local function answer_buffer(q, res)
  local lines = { "# " .. oneline(q), "" }
  for _, l in ipairs(vim.split(tostring(val(res.answer) or ""), "\n", { plain = true })) do lines[#lines + 1] = l end
  local sources = type(val(res.sources)) == "table" and res.sources or {}
  local by_n = {}
  if #sources > 0 then vim.list_extend(lines, { "", "Sources (Enter on [N] opens it):" }) end
  for i, s in ipairs(sources) do
    local n = val(s.n) or i
    by_n[n] = s
    lines[#lines + 1] = M.row(n, s):gsub("%s+$", "")
    local quote = val(s.quote)
    if type(quote) == "table" and val(quote.text) then lines[#lines + 1] = "    > " .. oneline(quote.text) end
  end
  if val(res.llm_setup) then vim.list_extend(lines, { "", "note: " .. oneline(res.llm_setup) }) end
  vim.cmd("botright new")
  local buf = vim.api.nvim_get_current_buf()
  vim.bo[buf].buftype, vim.bo[buf].bufhidden, vim.bo[buf].swapfile = "nofile", "wipe", false
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modifiable = false
  vim.bo[buf].filetype = "markdown"
  pcall(vim.api.nvim_buf_set_name, buf, "ragweed://answer/" .. tostring(val(res.history_id) or buf))
  vim.keymap.set("n", "<CR>", guarded(function()
    local line, col = vim.api.nvim_get_current_line(), vim.fn.col(".")
    local pick
    for s, num, e in line:gmatch("()%[(%d+)%]()") do -- the [N] under the cursor, else the line's first
      pick = pick or tonumber(num)
      if col >= s and col < e then pick = tonumber(num) break end
    end
    local s = pick and by_n[pick]
    if not s then return notify("no source under the cursor: put it on a [N]", vim.log.levels.WARN) end
    local t = M.target(source_uri(s))
    if not t then return notify("cannot open " .. tostring(source_uri(s))) end
    if t.line then vim.cmd("wincmd p") end -- the answer stays in view beside the file
    M.open(t)
  end), { buffer = buf, desc = "ragweed: open the source under the cursor" })
  return sources
end

function M.ask(query, opts)
  opts = opts or {}
  with_query(query, "ragweed ask: ", function(q)
    notify("asking…", vim.log.levels.INFO)
    local args = vim.list_extend({ "ask" }, filters())
    vim.list_extend(args, { "--", q })
    ragweedctl(args, function(res)
      local sources = answer_buffer(q, res)
      if #sources == 0 then return notify(("no sources found for %q"):format(q), vim.log.levels.WARN) end
      if want_quickfix(opts.flip) then
        vim.cmd("wincmd p")
        show("ragweed: " .. q, sources, source_uri, true)
      end
    end)
  end)
end

return M
