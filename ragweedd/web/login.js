// The sign-in page: swaps the one-time code in its address for a web UI session. The code comes in
// the fragment (#code=...), which browsers never send to a server; POST /login answers the session's
// key and sets its HttpOnly cookie. The key is kept in sessionStorage, which only pages of this
// origin (scheme, host and port) can read: a server on another port of this machine receives the
// cookie but never the key, and the API refuses one without the other.
"use strict";

(async () => {
  const code = new URLSearchParams(location.hash.slice(1)).get("code") ||
    new URLSearchParams(location.search).get("code") || "";
  history.replaceState(null, "", "/login");  // the code, used or not, leaves the address bar
  const fail = (title, text) => {
    document.getElementById("login-title").textContent = title;
    document.getElementById("login-text").textContent = text;
    document.getElementById("login-again").hidden = false;
    document.title = "ragweedd: " + title;
  };
  if (!code) { fail("No sign-in code", "This address needs the code that ragweedctl open puts in it."); return; }
  let r, body = null;
  try {
    r = await fetch("/login", { method: "POST", credentials: "same-origin",
      headers: { "Content-Type": "application/json" }, body: JSON.stringify({ code }) });
    try { body = await r.json(); } catch (e) { body = null; }
  } catch (e) {
    fail("The daemon did not answer", "Is ragweedd still running? " + (e.message || String(e)));
    return;
  }
  if (!r.ok || !body || typeof body.key !== "string") {
    const msg = (body && body.error && body.error.message) || `HTTP ${r.status}`;
    fail("This sign-in link does not work", msg.charAt(0).toUpperCase() + msg.slice(1) + ".");
    return;
  }
  sessionStorage.setItem("ragweedd_key", body.key);
  location.replace("/");
})();
