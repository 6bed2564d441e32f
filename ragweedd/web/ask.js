// The Ask tab is a conversation (docs/web.md): each question is a turn below the ones before it,
// asked in the same conversation, so a follow-up ("and black tea?") keeps its subject. A turn
// shows what the question was searched as when the daemon rewrote it. The address names the
// conversation (#ask/ID), so a reload or a link from the History tab reopens it; a bare #ask,
// and the "New conversation" button, start a new one. Loaded after app.js, whose helpers it uses.
"use strict";

let asking = null;
const thread = { id: null, turns: 0 };

async function* sseEvents(response) {
  const reader = response.body.getReader();
  const dec = new TextDecoder();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += dec.decode(value, { stream: true }).replace(/\r\n?/g, "\n");
    let i;
    while ((i = buf.indexOf("\n\n")) >= 0) {
      const frame = buf.slice(0, i);
      buf = buf.slice(i + 2);
      let name = "message";
      const data = [];
      for (const line of frame.split("\n")) {
        if (line.startsWith(":")) continue;  // keep-alive comment
        if (line.startsWith("event:")) name = line.slice(6).trim();
        else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
      }
      if (data.length) yield [name, JSON.parse(data.join("\n"))];
    }
  }
}

// The conversation the page shows: the address, the Ask tab's link and the bar above the turns.
function setThread(id, turns) {
  thread.id = id;
  thread.turns = turns;
  const hash = id ? `#ask/${id}` : "#ask";
  if (location.hash !== hash && (location.hash.startsWith("#ask") || location.hash === "")) {
    history.replaceState(null, "", hash);  // no hashchange: the page already shows it
  }
  document.querySelector('#tabs a[data-tab="ask"]').setAttribute("href", hash);
  $("ask-thread").textContent = id ? `Conversation ${id} · ${turns} turn${turns === 1 ? "" : "s"}` : "New conversation";
  $("ask-delete").hidden = !id;
  $("ask-query").placeholder = id ? "Ask a follow-up, e.g. “and in 2016?”" : "Ask a question about your documents";
}

// #ask/ID: that conversation, its turns read back; #ask: an empty, new one.
async function openThread(id) {
  if (id === thread.id && (id || !$("ask-out").childElementCount)) return;
  if (asking) { asking.abort(); asking = null; }
  $("ask-out").replaceChildren();
  setThread(null, 0);
  if (!id) return;
  let c;
  try { c = await api("GET", `/v1/conversations/${encodeURIComponent(id)}`); } catch (e) {
    showError(e);
    $("ask-out").replaceChildren(el("p", { class: "state failed ask-error" }, "This conversation cannot be opened: " + (e.message || String(e))));
    return;
  }
  for (const t of c.turns) {
    const { answer } = addTurn(t.query, t.rewrite, t.turn);
    if (t.status === "done") renderAnswer(answer, t);
    else answer.replaceChildren(el("p", { class: "state failed ask-error" },
      "No answer: " + ((t.error && t.error.message) || "the answer was not finished")));
  }
  setThread(c.id, c.turns.length);
}

// One turn: the question, what it was searched as, then its answer (filled in as it arrives).
function addTurn(question, rewrite, n) {
  const searched = el("p", { class: "searched muted small" });
  showSearched(searched, rewrite);
  const answer = el("div", { class: "turn-answer" });
  const box = el("div", { class: "turn", "data-turn": n || "" }, el("p", { class: "question" }, question), searched, answer);
  $("ask-out").append(box);
  return { box, searched, answer };
}

function showSearched(p, rw) {
  if (!rw || !rw.rewritten) { p.hidden = true; return; }
  const how = rw.method === "llm" ? "rewritten by the LLM from the earlier turns"
    : `carried from the earlier turns: ${(rw.carried || []).join(", ")}`;
  p.replaceChildren("Searched for: ", el("q", {}, rw.query), ` (${how})`);
  p.hidden = false;
}

async function ask(ev) {
  ev.preventDefault();
  const query = $("ask-query").value.trim();
  if (!query) return;
  if (asking) asking.abort();
  asking = new AbortController();
  const body = { query };
  if ($("ask-collection").value) body.collections = [$("ask-collection").value];
  if ($("ask-mode").value === "tree") body.mode = "tree";
  if (thread.id) body.conversation_id = thread.id;
  const { box, searched, answer } = addTurn(query, null, thread.turns + 1);
  const live = el("div", { class: "answer card streaming" }, el("span", { class: "muted" }, "searching…"));
  answer.replaceChildren(live);
  box.scrollIntoView({ block: "start" });
  $("ask-go").disabled = true;
  let text = "", sources = [], done = null;
  try {
    const r = await fetch("/v1/ask", {
      method: "POST", credentials: "same-origin", signal: asking.signal,
      headers: withKey({ "Content-Type": "application/json", "Accept": "text/event-stream" }), body: JSON.stringify(body),
    });
    if (!r.ok || !(r.headers.get("Content-Type") || "").startsWith("text/event-stream")) {
      await readJson(r);
      throw new Error("the daemon answered without an answer stream");
    }
    for await (const [name, data] of sseEvents(r)) {
      if (name === "sources" && data.conversation_id) {
        // the turn is recorded now: the next question continues this conversation, also if this one fails
        setThread(data.conversation_id, data.turn);
        box.dataset.turn = data.turn;
        showSearched(searched, data.rewrite);
      }
      if (name === "sources" || name === "context") sources = data.sources;
      else if (name === "token") text += data.text;
      else if (name === "done") done = data;
      else if (name === "error") throw new ApiError(500, { error: data.error });
      if (name === "token" || name === "context") live.replaceChildren(renderAnswerText(text, sources));
    }
    if (!done) throw new Error("the answer stream ended early (did ragweedd stop?)");
    renderAnswer(answer, done);
    $("ask-query").value = "";
  } catch (e) {
    if (e.name === "AbortError") {  // another conversation was opened (this turn left the page), or a newer question
      answer.replaceChildren(el("p", { class: "muted" }, "Stopped before the answer was finished."));
      return;
    }
    showError(e);
    // not "searching…" forever: the turn says the question got no answer, and why
    answer.replaceChildren(el("p", { class: "state failed ask-error" }, "No answer: " + (e.message || String(e))));
  } finally {
    $("ask-go").disabled = false;
  }
}

async function deleteThread() {
  if (!thread.id || !confirm("Delete this conversation and all its turns from the history?")) return;
  try {
    await api("DELETE", `/v1/conversations/${encodeURIComponent(thread.id)}`);
  } catch (e) { showError(e); return; }
  location.hash = "#ask";
}

// ------------------------------------------------------------------ the History tab's conversations
let threadsOffset = 0;

async function loadThreads(reset) {
  if (reset) threadsOffset = 0;
  let page;
  try { page = await api("GET", "/v1/conversations" + q({ offset: threadsOffset, limit: 20 })); } catch (e) { showError(e); return; }
  const items = page.items.map((c) => el("li", {},
    el("a", { href: `#ask/${c.id}`, "data-id": c.id }, c.title), " ",
    el("span", { class: "muted small" }, `${c.turn_count} turn${c.turn_count === 1 ? "" : "s"} · ${when(c.updated_at)}`), " ",
    el("button", { class: "danger small-button", title: "delete this conversation and its turns", onclick: async () => {
      if (!confirm(`Delete the conversation “${c.title}” and its ${c.turn_count} turn(s)?`)) return;
      try { await api("DELETE", `/v1/conversations/${encodeURIComponent(c.id)}`); } catch (e) { showError(e); return; }
      loadThreads(true);
      loadHistory(true);
    } }, "Delete")));
  if (reset) $("threads-list").replaceChildren(...items); else $("threads-list").append(...items);
  if (reset && !page.items.length) {
    $("threads-list").replaceChildren(el("li", { class: "muted empty" }, "No conversations yet: every question you ask starts one."));
  }
  threadsOffset += page.items.length;
  $("threads-more").hidden = threadsOffset >= page.total;
}
