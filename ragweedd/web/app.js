// The ragweedd web UI: plain DOM, no framework. The session cookie is HttpOnly, so this script never
// sees it (nor the token); fetch() sends it with every same-origin request. The cookie alone signs
// nothing in (any server on this machine receives it): every call also carries the session's key,
// which the sign-in page (login.js) left in sessionStorage, and an original file opened as a link
// carries ?t=HMAC-SHA256(key, doc key) instead, a ticket good for that one file only.
"use strict";

const KEY_HEADER = "X-Ragweedd-Key";
const sessionKey = () => sessionStorage.getItem("ragweedd_key") || "";
const withKey = (headers) => Object.assign({ [KEY_HEADER]: sessionKey() }, headers || {});

// The address of a document's original file, with its ticket; "#frag" is kept (a PDF's page).
async function fileHref(key, frag) {
  if (!(crypto && crypto.subtle)) {
    throw new Error("this browser offers no WebCrypto on this address: open the UI at http://127.0.0.1:PORT");
  }
  const enc = new TextEncoder();
  const k = await crypto.subtle.importKey("raw", enc.encode(sessionKey()), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  const mac = new Uint8Array(await crypto.subtle.sign("HMAC", k, enc.encode(key)));
  const hex = Array.from(mac, (b) => b.toString(16).padStart(2, "0")).join("");
  return `/v1/files/${encodeURIComponent(key)}?t=${hex}` + (frag ? `#${frag}` : "");
}

const $ = (id) => document.getElementById(id);

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") e.className = v;
    else if (k === "style") Object.assign(e.style, v);  // CSSOM: the page's CSP refuses style attributes
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const kid of kids.flat()) {
    if (kid === null || kid === undefined || kid === false) continue;
    e.append(kid instanceof Node ? kid : String(kid));
  }
  return e;
}

// ------------------------------------------------------------------ API
class ApiError extends Error {
  constructor(status, body) {
    const err = (body && body.error) || {};
    super(err.message || `HTTP ${status}`);
    this.status = status;
    this.hint = webHint(err.action) || err.hint || "";
    this.code = err.code || "";
  }
}

// What to do, in this page's words, for the actions an API error names (ragweedd/errors.py FIXES;
// a unit test keeps the two lists in step). The API's own hint names routes, which a person here
// does not type.
const WEB_FIXES = {
  list_collections: "the Documents tab lists the collections",
  list_documents: "the Documents tab lists the documents",
  list_history: "the History tab lists past answers",
  list_conversations: "the History tab lists the conversations; New conversation starts one",
  start_daemon: "start it with `ragweedd run` (or `make run`), then reload this page",
  wait_for_indexing: "files still being read are searchable in moments (the Documents tab shows the progress); " +
    "an empty collection needs files in its folders",
  add_collection: "add a collection of folders with `ragweedctl add NAME FOLDER`",
  collection_name_taken: "choose another name, or remove the collection first",
};

function webHint(action) {
  if (!action || typeof action.id !== "string" || !Object.hasOwn(WEB_FIXES, action.id)) return "";
  return WEB_FIXES[action.id];
}

async function api(method, path, body, headers) {
  const opts = { method, headers: withKey(headers), credentials: "same-origin" };
  if (body instanceof Blob) opts.body = body;
  else if (body !== undefined) {
    opts.body = JSON.stringify(body);
    opts.headers["Content-Type"] = "application/json";
  }
  const r = await fetch(path, opts);
  return readJson(r);
}

async function readJson(r) {
  let data = null;
  try { data = await r.json(); } catch (e) { data = null; }
  if (!r.ok) {
    if (r.status === 401) $("signin").hidden = false;
    throw new ApiError(r.status, data);
  }
  $("signin").hidden = true;
  return data;
}

function showError(e) {
  const box = $("error");
  // replaceChildren() writes a null as the text "null": leave the hint out when there is none
  const kids = [el("strong", {}, "Error: "), e.message || String(e)];
  if (e.hint) kids.push(el("span", { class: "muted" }, " — " + e.hint));
  kids.push(el("button", { class: "close", onclick: () => { box.hidden = true; } }, "×"));
  box.replaceChildren(...kids);
  box.hidden = !(e && !(e instanceof ApiError && e.status === 401));
  // the box sits at the top of the page: an error of a form further down (upload) is not left unseen
  if (!box.hidden) window.scrollTo({ top: 0 });
}

function q(params) {
  const u = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== "" && v !== null && v !== undefined) u.set(k, v);
  const s = u.toString();
  return s ? "?" + s : "";
}

// ------------------------------------------------------------------ tabs and routes
function show(tab) {
  for (const s of document.querySelectorAll("section.tab")) s.hidden = s.id !== "tab-" + tab;
  for (const a of document.querySelectorAll("#tabs a")) a.classList.toggle("active", a.dataset.tab === tab);
}

function route() {
  const h = decodeURIComponent(location.hash.slice(1)) || "ask";
  const parts = h.split("/");
  if (parts[0] === "view" && parts[1]) { openTextView(parts[1], parts[2], parts[3]); return; }
  const tab = ["ask", "search", "documents", "history"].includes(parts[0]) ? parts[0] : "ask";
  show(tab);
  // #ask/ID reopens a conversation (ask.js); a bare #ask is a new one
  if (tab === "ask") openThread(parts[1] || null);
  if (tab === "documents") { loadCollections(); loadDocuments(true); pollStatus(); }
  if (tab === "history") { loadThreads(true); loadHistory(true); }
}

// ------------------------------------------------------------------ collections (select boxes)
let collections = [];

async function loadCollections() {
  try {
    collections = (await api("GET", "/v1/collections")).items;
  } catch (e) { showError(e); return; }
  for (const sel of document.querySelectorAll("select.collections")) {
    const keep = sel.value;
    const first = sel.id === "upload-collection" ? [] : [el("option", { value: "" }, "all collections")];
    sel.replaceChildren(...first, ...collections.map((c) => el("option", { value: c.name }, c.name)));
    if ([...sel.options].some((o) => o.value === keep)) sel.value = keep;
  }
  renderCollections();
}

function renderCollections() {
  const rows = collections.map((c) => el("tr", {},
    el("td", {}, el("strong", {}, c.name), c.topic ? el("div", { class: "muted" }, c.topic) : null),
    el("td", {}, c.roots.map((r) => el("div", { class: "root" }, el("span", { class: "path" }, r.path), " ",
      el("span", { class: "state " + r.state }, r.state), " ", el("span", { class: "muted" }, "watch: " + r.watch)))),
    el("td", { class: "num" }, c.documents),
    el("td", {}, c.available ? "available" : el("span", { class: "state missing" }, "unavailable"),
      c.last_scan ? el("div", { class: "muted" }, "scanned " + when(c.last_scan.at)) : null),
    el("td", { class: "actions" },
      el("button", { onclick: () => collectionAction("POST", c.name, "/scan", "scan queued") }, "Scan"),
      el("button", {
        class: "danger", title: c.from_config ? "defined in the config file: remove it there" : "forget this collection",
        onclick: () => forget(c.name),
      }, "Forget"))));
  $("collections").tBodies[0].replaceChildren(...rows);
}

async function collectionAction(method, name, suffix, done) {
  try {
    await api(method, "/v1/collections/" + encodeURIComponent(name) + suffix);
    $("upload-msg").textContent = `${name}: ${done}`;
    loadCollections();
  } catch (e) { showError(e); }
}

function forget(name) {
  if (!confirm(`Forget the collection ${name} and its index? Your files stay where they are.`)) return;
  collectionAction("DELETE", name, "", "forgotten");
}

// ------------------------------------------------------------------ ingest progress
function duration(s) {
  s = Math.round(s);
  if (s < 90) return `${s} s`;
  if (s < 5400) return `${Math.round(s / 60)} min`;
  return `${Math.floor(s / 3600)} h ${String(Math.floor(s / 60) % 60).padStart(2, "0")} min`;
}

function when(iso) {
  if (!iso) return "";
  const d = new Date(iso);
  return isNaN(d) ? iso : d.toLocaleString();
}

function count(n) { return Number(n).toLocaleString("en-US"); }

// What the daemon is doing, in one line, and how far along it is. Idle only when every file is
// read and every chunk has its vector: chunks without one are not found by meaning yet.
function progressLine(s) {
  const ing = s.ingest, v = s.vectors;
  if (ing.running || ing.total) {
    let line = `Indexing: ${count(ing.done)} of ${count(ing.total)} files · ${ing.files_per_s.toFixed(1)} files/s`
      + (ing.eta_s !== null ? ` · about ${duration(ing.eta_s)} left` : "");
    if (v.pending_chunks) line += ` · ${count(v.pending_chunks)} chunks waiting for vectors`;
    return { line, pct: ing.total ? Math.min(99, Math.floor(100 * ing.done / ing.total)) : 0 };
  }
  if (v.pending_chunks || v.running) {
    const n = v.pending_chunks;
    const line = !n ? "Embedding: writing the last vectors"
      : `Embedding: ${count(n)} chunk${n === 1 ? "" : "s"} waiting for vectors` + (v.eta_s ? `, about ${duration(v.eta_s)}` : "");
    const detail = "keyword search finds them already, search by meaning once they have their vectors";
    const files = v.files_searchable || 0;
    return { line, detail, pct: files ? Math.min(99, Math.floor(100 * (v.files_with_vectors || 0) / files)) : 0 };
  }
  // the daemon's own word for idle: scans walking, events settling, a repair due are work too
  const busy = s.idle === false ? (ing.busy_with || []) : [];
  if (busy.length) {
    const line = "Working: " + busy[0].charAt(0).toUpperCase() + busy[0].slice(1);
    return { line, detail: busy.slice(1).join(" · ") || undefined, pct: 0 };
  }
  const files = Object.values(s.files_by_state).reduce((a, b) => a + b, 0);
  return { line: `Idle · ${count(files)} file${files === 1 ? "" : "s"}`, pct: 100 };
}

// After an upload the documents page follows the ingest: its tables are read again whenever the
// files' states change, until the ingest is idle (and a little after: the upload's file may not have
// reached the queue at the first poll), so the counts do not wait for the page to reopen.
let followUntil = 0, lastStates = "";

async function pollStatus() {
  let s;
  try {
    const r = await fetch("/v1/status", { credentials: "same-origin", headers: withKey() });
    if (r.status === 401) { $("signin").hidden = false; return; }
    s = await r.json();
    if (!r.ok) return;
    $("signin").hidden = true;
  } catch (e) { return; }
  const { line, detail, pct } = progressLine(s);
  $("progress").textContent = line;
  $("ingest").replaceChildren(...[
    el("div", {}, el("strong", {}, line), detail ? el("span", { class: "muted" }, " · " + detail) : null),
    el("div", { class: "bar" }, el("span", { style: { width: `${pct}%` } })),
    el("div", { class: "muted" }, Object.entries(s.files_by_state).map(([k, n]) => `${k} ${n}`).join(" · ")),
    s.degraded.length ? el("ul", { class: "degraded" }, s.degraded.map((d) => el("li", {}, d))) : null].filter(Boolean));
  const states = JSON.stringify(s.files_by_state);
  const busy = s.ingest.running || s.ingest.total;
  const following = Date.now() < followUntil || (followUntil && busy);
  if (following && states !== lastStates) {
    followUntil = Math.max(followUntil, Date.now() + 5000);
    if (!$("tab-documents").hidden) { loadCollections(); loadDocuments(true); }
  }
  if (!following) followUntil = 0;
  lastStates = states;
}

// ------------------------------------------------------------------ sources and citations
function globEscape(s) { return s.replace(/[*?[]/g, (c) => `[${c}]`); }

const keyCache = new Map();

// A source this daemon cannot open: its collection is not one of the daemon's (an answer of a
// one-shot `ragweedd ask` on another index, or a collection forgotten since), or its file left the index.
class Unresolvable extends Error {}

// The document key of a cited file: sources name the collection and the (shown) path.
async function docKey(src) {
  const id = src.collection + "\u0000" + src.source_file;
  if (!keyCache.has(id)) {
    const lookup = api("GET", "/v1/documents" + q({ collection: src.collection, path_glob: globEscape(src.source_file), limit: 20 }))
      .catch((e) => {
        // the documents of an unknown collection are a 404; any other error is the daemon's
        if (e instanceof ApiError && e.status === 404) {
          throw new Unresolvable(`not in this daemon's index: it has no collection '${src.collection}'`);
        }
        throw e;
      })
      .then((page) => {
        const d = page.items.find((x) => x.source_file === src.source_file && x.state !== "superseded");
        if (!d) throw new Unresolvable("not in this daemon's index: it has no indexed file at this path");
        return d.doc_key;
      });
    // a failure is kept a little only: the collection may be added, the file indexed again, the
    // daemon answer (a streamed answer renders its pills again with every piece: one look-up serves them)
    lookup.catch(() => setTimeout(() => keyCache.delete(id), 10000));
    keyCache.set(id, lookup);
  }
  return keyCache.get(id);
}

function fragment(uri) {
  const i = (uri || "").indexOf("#");
  return i < 0 ? "" : uri.slice(i + 1);
}

// Where a citation opens: PDFs (and audio/video) in the browser's own viewer at their page or
// time, everything else in the text view with the cited span marked.
async function sourceHref(src, key) {
  const quote = src.quote || null;
  const frag = fragment((quote && quote.uri) || src.uri);
  if (/^page=\d+/.test(frag) || /^t=/.test(frag)) return fileHref(key, frag);
  const span = (quote && quote.span) || src.span || [];
  const s = span[0] ?? "", e = span[1] ?? "";
  return `#view/${encodeURIComponent(key)}/${s}/${e}`;
}

function where(src) {
  // the path under the collection root: two files of one name in two subfolders stay apart
  const bits = [src.collection + "/" + (src.source_rel_path || src.filename)];
  if (src.page_label) bits.push("p. " + src.page_label);
  if (src.sheet) bits.push("sheet " + src.sheet);
  if (Number.isInteger(src.table)) bits.push("table " + src.table);
  const rows = src.rows;
  if (Array.isArray(rows) && Number.isInteger(rows[0])) {  // a CSV has rows and no sheet
    const last = Number.isInteger(rows[rows.length - 1]) ? rows[rows.length - 1] : rows[0];
    bits.push(last === rows[0] ? `row ${rows[0]}` : `rows ${rows[0]}-${last}`);
  }
  if (src.section) bits.push("§ " + src.section);
  if (src.lines) bits.push(src.lines[0] === src.lines[1] ? `line ${src.lines[0]}` : `lines ${src.lines[0]}-${src.lines[1]}`);
  return bits.join(" · ");
}

// Give an <a> the href of its source once the document key is known. Until then it has no href,
// so a click goes nowhere (an href of "#" would open the Ask tab); a source that cannot be opened
// becomes plain text saying why.
function linkSource(a, src) {
  a.removeAttribute("href");
  a.classList.add("pending");
  docKey(src).then((key) => sourceHref(src, key)).then((href) => {
    a.href = href;
    if (href.startsWith("/v1/files/")) { a.target = "_blank"; a.rel = "noopener"; }
    a.classList.remove("pending");
  }).catch((e) => {
    const why = e.message || String(e);
    const plain = el("span", { class: a.className.replace("pending", "unresolved"), title: why }, ...a.childNodes);
    for (const [k, v] of Object.entries(a.dataset)) plain.dataset[k] = v;
    // a pill keeps its tooltip only; a named source says it in the text
    a.replaceWith(plain, ...(a.classList.contains("pill") ? [] : [el("span", { class: "muted small unresolved-note" }, ` — ${why}`)]));
  });
  return a;
}

// The numbers a citation names: [3], [1, 3], [1; 3], [2-4] (as the answer checker reads them).
function citedNumbers(inner) {
  const out = [];
  for (const part of inner.split(/[,;]/)) {
    const m = part.trim().match(/^(\d+)(?:\s*[-–]\s*(\d+))?$/);
    if (!m) return null;
    const a = Number(m[1]), b = m[2] ? Number(m[2]) : a;
    if (b < a || b - a > 50) return null;
    for (let n = a; n <= b; n++) out.push(n);
  }
  return out;
}

// The check of citation n whose claim holds the mark at ``at``: the claim starting last at or before it.
function checkAt(checks, n, at) {
  let best = null;
  for (const c of checks || []) {
    if (c.n !== n || !c.answer_span || c.answer_span[0] > at) continue;
    if (!best || c.answer_span[0] > best.answer_span[0]) best = c;
  }
  return best;
}

// Text with its [N] citations made pills; ``base`` is the offset of ``text`` in the whole answer
// (the citation checks' answer spans count from there).
function appendCited(out, text, base, byN, checks) {
  const re = /\[(\d+(?:\s*[-–,;]\s*\d+)*)\]/g;
  let last = 0, m;
  while ((m = re.exec(text)) !== null) {
    out.append(text.slice(last, m.index));
    const nums = citedNumbers(m[1]);
    if (nums && nums.every((n) => byN.has(n))) {
      for (const n of nums) {
        const src = byN.get(n);
        const check = checkAt(checks, n, base + m.index);
        const bad = check && !check.supported;
        const title = bad ? `source ${n} does not support this: it lacks ${(check.missing || []).join(", ") || "its terms"}`
          : where(src);
        out.append(linkSource(el("a", { class: bad ? "pill unsupported" : "pill", "data-n": n, title },
          bad ? `${n}?` : String(n)), src));
      }
    } else {
      // a number no source has: the claim stands on nothing the reader can open
      out.append(el("span", { class: "pill unsupported no-source", title: `there is no such source: the answer was given ${byN.size}` }, m[0]));
    }
    last = re.lastIndex;
  }
  out.append(text.slice(last));
}

// The answer's lines as runs of plain and quoted lines. A quoted line is markdown's "> text" (the
// answer without an LLM quotes its passages so, and LLMs do too): the reader sees a blockquote,
// not the marker. Each line keeps its offset in the whole text.
function quoteRuns(text) {
  const runs = [];
  let at = 0;
  for (const line of text.split("\n")) {
    const m = line.match(/^ {0,3}> ?/);
    const quoted = m !== null;
    const piece = { text: quoted ? line.slice(m[0].length) : line, at: at + (quoted ? m[0].length : 0) };
    const run = runs[runs.length - 1];
    if (run && run.quoted === quoted) run.lines.push(piece); else runs.push({ quoted, lines: [piece] });
    at += line.length + 1;
  }
  return runs;
}

function renderAnswerText(text, sources, checks) {
  const byN = new Map(sources.map((s, i) => [s.n || i + 1, s]));
  const out = el("div", { class: "answer-text" });
  for (const run of quoteRuns(text)) {
    // a blockquote is a block of its own: the line breaks around it would show as blank lines
    const box = run.quoted ? el("blockquote", { class: "quoted" }) : out;
    run.lines.forEach((line, i) => {
      if (i) box.append("\n");
      appendCited(box, line.text, line.at, byN, checks);
    });
    if (run.quoted) out.append(box);
  }
  return out;
}

function renderSources(sources) {
  if (!sources.length) return null;
  return el("ol", { class: "sources" }, sources.map((s, i) => el("li", { value: s.n || i + 1 },
    linkSource(el("a", { class: "where" }, where(s)), s),
    quotesOf(s).length ? quotesOf(s).map((t) => el("blockquote", {}, t))
      : (s.excerpt ? el("div", { class: "muted" }, s.excerpt) : null))));
}

// Every sentence a source is quoted for (an answer without an LLM quotes several), each once.
function quotesOf(s) {
  const all = (s.quotes && s.quotes.length ? s.quotes : [s.quote]).map((x) => x && x.text).filter(Boolean);
  return [...new Set(all)];
}

// Claims the answer checker found unsupported by the source they cite (docs/answers.md).
function renderUnsupported(checks) {
  const bad = (checks || []).filter((c) => !c.supported);
  if (!bad.length) return null;
  return el("div", { class: "unsupported-list" },
    el("p", {}, `${bad.length} claim${bad.length > 1 ? "s" : ""} not supported by the cited source:`),
    el("ul", {}, bad.map((c) => el("li", {}, `“${c.claim}” [${c.n}]`,
      c.no_source ? el("span", { class: "muted" }, ` — there is no source ${c.n}`) : null,
      (c.missing && c.missing.length) ? el("span", { class: "muted" }, ` — source ${c.n} lacks ${c.missing.join(", ")}`) : null,
      (c.source_sentence && c.source_sentence.text) ? el("blockquote", {}, c.source_sentence.text) : null))));
}

// What a tree-mode answer read (docs/answers.md, Tree mode): documents chosen, sections opened
// with their pages and what did not fit, or why it fell back to ordinary retrieval.
function renderTree(tree) {
  if (!tree) return null;
  if (tree.fallback) {
    return el("div", { class: "tree card" }, el("p", { class: "tree-fallback" },
      `Tree mode fell back to ordinary retrieval at the ${tree.fallback.stage} step: ${tree.fallback.reason}`));
  }
  const docs = tree.documents || [];
  return el("div", { class: "tree card" },
    el("p", {}, `Tree mode: ${docs.length} of ${tree.candidates ?? "?"} documents chosen`,
      docs.length ? ` (${docs.map((d) => d.title || d.source_file).join(", ")})` : "", "; sections opened:"),
    el("ul", {}, (tree.sections || []).map((s) => {
      const p = s.pages;
      const pages = !p ? "" : p[0] === p[1] ? ` (p. ${p[0]})` : ` (pp. ${p[0]}-${p[1]})`;
      return el("li", {}, el("code", {}, s.id), " ", (s.path && s.path.length ? s.path : [s.title]).join(" › "), pages,
        s.chunks_left_out ? el("span", { class: "muted" }, ` — read ${s.chunks_read} of ${s.chunks} chunks, the rest did not fit`) : null);
    })));
}

// Who wrote the answer, unless its first line says so already (the answer without an LLM opens
// with its label, "No LLM configured: ...").
function answeredBy(rec) {
  if (!rec.mode) return null;
  if (rec.mode === "llm") return el("p", { class: "muted small" }, `written by ${rec.provider || "the LLM"}`);
  if (rec.label && (rec.answer || "").startsWith(rec.label)) return null;
  return el("p", { class: "muted small" }, "quoted passages (no LLM configured)");
}

function renderAnswer(box, rec) {
  const sources = rec.sources || [];
  // replaceChildren() writes a null as the text "null": the parts an answer lacks are left out
  box.replaceChildren(...[
    el("div", { class: "answer card" }, renderAnswerText(rec.answer || "", sources, rec.citation_checks),
      renderUnsupported(rec.citation_checks),
      rec.finish_reason === "max_tokens" ? el("p", { class: "muted" }, "The answer was cut at max_tokens.") : null,
      answeredBy(rec)),
    renderTree(rec.tree),
    el("h3", {}, "Sources"), renderSources(sources) || el("p", { class: "muted" }, "none")].filter(Boolean));
}

// ------------------------------------------------------------------ search
// A hit's snippet: the text around the matched words with each match in a <mark> (``snippet`` and
// its [start, end) ``snippet_marks``, offsets in code points as the daemon counts them), built of
// text nodes. A hit without a snippet shows the start of its chunk.
function renderSnippet(h) {
  const box = el("div", { class: "snippet" });
  if (typeof h.snippet !== "string") {
    box.append(cutAtWord(String(h.text || ""), 400));
    return box;
  }
  const chars = Array.from(h.snippet);
  const marks = (Array.isArray(h.snippet_marks) ? h.snippet_marks : [])
    .map(([a, b]) => [Math.max(0, Number(a)), Math.min(chars.length, Number(b))])
    .filter(([a, b]) => Number.isInteger(a) && Number.isInteger(b) && a < b)
    .sort((x, y) => x[0] - y[0]);
  let at = 0;
  for (const [a, b] of marks) {
    if (a < at) continue;  // overlapping ranges: the first one stands
    box.append(chars.slice(at, a).join(""), el("mark", {}, chars.slice(a, b).join("")));
    at = b;
  }
  box.append(chars.slice(at).join(""));
  return box;
}

// The first ``n`` characters of a text, ended at a word and marked as cut.
function cutAtWord(text, n) {
  if (text.length <= n) return text;
  const cut = text.slice(0, n);
  const space = cut.search(/\s\S*$/);
  return (space > n / 2 ? cut.slice(0, space) : cut).trimEnd() + " …";
}

// How well a hit matched, in words: its score relative to the best and the weakest of these
// results (rel_score, 0..1). The raw score (negative for some) stays in the tooltip.
function strength(h) {
  const r = Number(h.rel_score);
  const word = !Number.isFinite(r) ? "" : r >= 0.67 ? "strong" : r >= 0.33 ? "partial" : "weak";
  return el("span", { class: "strength " + word, title: `score ${Number(h.score).toFixed(3)}, relative ${Number.isFinite(r) ? Math.round(100 * r) + "%" : "?"} of these results` },
    word ? `${word} match` : `score ${Number(h.score).toFixed(3)}`);
}

function renderHits(box, results) {
  if (!results.length) { box.replaceChildren(el("p", { class: "muted" }, "no results")); return; }
  box.replaceChildren(el("ol", { class: "hits" }, results.map((h) => el("li", { class: "card" },
    el("div", {}, linkSource(el("a", { class: "where" }, where(h)), h),
      " ", strength(h)),
    renderSnippet(h)))));
}

async function search(ev) {
  ev.preventDefault();
  const body = { query: $("search-query").value.trim() };
  if (!body.query) return;
  if ($("search-collection").value) body.collections = [$("search-collection").value];
  if ($("search-path").value.trim()) body.path_glob = $("search-path").value.trim();
  if ($("search-type").value.trim()) body.file_type = $("search-type").value.trim();
  $("search-go").disabled = true;
  try {
    renderHits($("search-out"), (await api("POST", "/v1/search", body)).results);
  } catch (e) { showError(e); } finally { $("search-go").disabled = false; }
}

// ------------------------------------------------------------------ documents
let docsOffset = 0;

function size(n) {
  if (n < 1024) return `${n} B`;
  if (n < 1048576) return `${(n / 1024).toFixed(1)} KB`;
  return `${(n / 1048576).toFixed(1)} MB`;
}

// Why a file is not indexed. A skip (a type ragweedd does not read, an empty file) is a choice,
// said plainly; a failure (a damaged file, a tool that broke) is an error to look at. The reason
// is shown without the path the row already names.
function docNote(d) {
  if (!d.error) return null;
  const prefix = d.source_file + ": ";
  const why = d.error.startsWith(prefix) ? d.error.slice(prefix.length) : d.error;
  if (d.state === "skipped") return el("div", { class: "skip-reason muted small" }, "Skipped: " + why.replace(/;\s*skipped$/, ""));
  return el("div", { class: "state failed" }, why);
}

// A link to a document's original file; its href (which holds the file's ticket) follows.
function originalLink(key) {
  const a = el("a", { target: "_blank", rel: "noopener" }, "original");
  fileHref(key).then((href) => { a.href = href; }).catch((e) => { a.title = e.message || String(e); });
  return a;
}

async function loadDocuments(reset) {
  if (reset) docsOffset = 0;
  const params = { collection: $("docs-collection").value, state: $("docs-state").value,
    path_glob: $("docs-path").value.trim(), offset: docsOffset, limit: 50 };
  let page;
  try { page = await api("GET", "/v1/documents" + q(params)); } catch (e) { showError(e); return; }
  const rows = page.items.map((d) => el("tr", {},
    el("td", {}, el("div", {}, d.filename), el("div", { class: "muted small" }, d.source_file), docNote(d)),
    el("td", {}, d.collection), el("td", {}, el("span", { class: "state " + d.state }, d.state)),
    el("td", { class: "num" }, d.chunks), el("td", { class: "num" }, size(d.size_bytes)),
    el("td", { class: "actions" }, d.state === "indexed" ? [
      el("a", { href: `#view/${encodeURIComponent(d.doc_key)}//` }, "text"), " ",
      originalLink(d.doc_key)] : null)));
  const body = $("documents").tBodies[0];
  if (reset) body.replaceChildren(...rows); else body.append(...rows);
  docsOffset += page.items.length;
  $("docs-count").textContent = `${docsOffset} of ${page.total} documents`;
  $("docs-more").hidden = docsOffset >= page.total;
}

async function upload(ev) {
  ev.preventDefault();
  const file = $("upload-file").files[0];
  const coll = $("upload-collection").value;
  if (!file || !coll) return;
  $("upload-go").disabled = true;
  try {
    const res = await api("POST", `/v1/collections/${encodeURIComponent(coll)}/documents` + q({ filename: file.name }),
      file, { "Content-Type": "application/octet-stream" });
    $("upload-msg").textContent = `uploaded ${file.name} (${size(res.size_bytes)}): ${res.state}`;
    $("upload-form").reset();
    followUntil = Date.now() + 5000;
    lastStates = "";  // the next poll reads the tables again, whatever the states
    loadDocuments(true);
  } catch (e) { showError(e); } finally { $("upload-go").disabled = false; }
}

// ------------------------------------------------------------------ text view
// The document's text from its chunks (which overlap), each character at its own offset, so the
// cited span [start, end) of the extracted text can be marked. Offsets count code points.
function mergeChunks(chunks) {
  const ordered = chunks.slice().sort((a, b) => ((a.span || [0])[0] || 0) - ((b.span || [0])[0] || 0) || a.chunk_idx - b.chunk_idx);
  const parts = [];
  let end = null;
  for (const c of ordered) {
    const chars = Array.from(c.text || "");
    const start = c.span ? c.span[0] : null;
    if (start === null || start === undefined) { parts.push({ start: null, chars }); continue; }
    if (end === null || start >= end) { parts.push({ start, chars, gap: end !== null && start > end }); end = start + chars.length; }
    else if (start + chars.length > end) { parts.push({ start: end, chars: chars.slice(end - start) }); end = start + chars.length; }
  }
  return parts;
}

async function openTextView(key, s, e) {
  show("view");
  const pre = $("view-text");
  pre.replaceChildren(el("span", { class: "muted" }, "loading…"));
  $("view-original").removeAttribute("href");
  fileHref(key).then((href) => { $("view-original").href = href; }).catch((err) => { $("view-original").title = err.message; });
  let d;
  try { d = await api("GET", `/v1/documents/${encodeURIComponent(key)}`); } catch (err) { showError(err); return; }
  $("view-title").textContent = d.source_file;
  const lo = s === "" || s === undefined ? null : Number(s), hi = e === "" || e === undefined ? null : Number(e);
  const nodes = [];
  for (const p of mergeChunks(d.chunks_detail)) {
    if (p.gap) nodes.push(el("span", { class: "muted" }, "\n[…]\n"));
    if (p.start === null || lo === null || hi === null || hi <= p.start || lo >= p.start + p.chars.length) {
      nodes.push(p.chars.join(""));
      continue;
    }
    const a = Math.max(0, lo - p.start), b = Math.min(p.chars.length, hi - p.start);
    nodes.push(p.chars.slice(0, a).join(""), el("mark", {}, p.chars.slice(a, b).join("")), p.chars.slice(b).join(""));
  }
  if (!d.chunks_detail.length) nodes.push(el("span", { class: "muted" }, d.error || "no indexed text"));
  pre.replaceChildren(...nodes);
  const mark = pre.querySelector("mark");
  if (mark) mark.scrollIntoView({ block: "center" });
}

// ------------------------------------------------------------------ history
let historyOffset = 0;

async function loadHistory(reset) {
  if (reset) historyOffset = 0;
  let page;
  try { page = await api("GET", "/v1/history" + q({ offset: historyOffset, limit: 50 })); } catch (e) { showError(e); return; }
  // the kind badge stands before the link: the underlined text is the query alone
  const items = page.items.map((h) => el("li", {},
    el("span", { class: "kind " + h.kind }, h.kind), " ",
    el("a", { href: "#history", "data-id": h.id, onclick: (ev) => { ev.preventDefault(); showHistory(h.id); } }, h.query),
    el("div", { class: "muted small" }, when(h.created_at),
      h.conversation_id ? [" · ", el("a", { href: `#ask/${h.conversation_id}`, class: "thread-link" }, `turn ${h.turn} of a conversation`)] : null)));
  if (reset) $("history-list").replaceChildren(...items); else $("history-list").append(...items);
  if (reset && !page.items.length) {
    $("history-list").replaceChildren(el("li", { class: "muted empty" }, "No searches or answers yet: what you ask and search is kept here."));
  }
  historyOffset += page.items.length;
  $("history-more").hidden = historyOffset >= page.total;
}

async function showHistory(id) {
  const box = $("history-out");
  let h;
  try { h = await api("GET", `/v1/history/${encodeURIComponent(id)}`); } catch (e) { showError(e); return; }
  const inner = el("div", {});
  const searched = h.rewrite && h.rewrite.rewritten ? el("p", { class: "searched muted small" }, "Searched for: ", el("q", {}, h.rewrite.query)) : null;
  const thread = h.conversation_id ? [" · ", el("a", { href: `#ask/${h.conversation_id}` }, `turn ${h.turn} of a conversation: open it`)] : null;
  box.replaceChildren(...[el("h2", {}, h.query), el("p", { class: "muted small" }, `${h.kind} · ${when(h.created_at)}`, thread),
    searched, inner].filter(Boolean));
  if (h.kind === "ask") {
    if (h.error) inner.append(el("p", { class: "state failed" }, h.error.message));
    renderAnswer(inner, h);
  } else {
    renderHits(inner, h.results || []);
  }
  for (const a of document.querySelectorAll("#history-list a")) a.classList.toggle("active", a.dataset.id === id);
  // The detail stays beside the list as it scrolls (CSS sticky); where it cannot (one column on a
  // narrow window) it is brought into view, so an entry low in a long list does not open off-screen.
  box.scrollTop = 0;
  const r = box.getBoundingClientRect();
  if (r.top < 0 || r.top > window.innerHeight - 80) box.scrollIntoView({ block: "start" });
}

// ------------------------------------------------------------------ start
document.addEventListener("DOMContentLoaded", () => {
  $("ask-form").addEventListener("submit", ask);
  $("ask-new").addEventListener("click", () => { location.hash = "#ask"; });
  $("ask-delete").addEventListener("click", deleteThread);
  $("threads-more").addEventListener("click", () => loadThreads(false));
  $("search-form").addEventListener("submit", search);
  $("upload-form").addEventListener("submit", upload);
  $("docs-form").addEventListener("submit", (ev) => { ev.preventDefault(); loadDocuments(true); });
  $("docs-more").addEventListener("click", () => loadDocuments(false));
  $("history-more").addEventListener("click", () => loadHistory(false));
  $("view-back").addEventListener("click", (ev) => { ev.preventDefault(); history.back(); });
  window.addEventListener("hashchange", route);
  loadCollections();
  route();
  pollStatus();
  setInterval(pollStatus, 2000);
});
