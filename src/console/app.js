// mcpgate console: a view of a running gateway (to a caller that is not an admin: its own usage only). The first screen answers "is
// everything healthy and what is happening": health at a glance (upstreams, held tools, recent calls, the last day's usage), the
// recent calls, and the tools held for review; the upstreams, usage, connected accounts and the (collapsed, searchable) catalogue
// follow. Its two actions: approving held tools (/console/api/pins/approve) and revoking connected upstream accounts
// (/oauth/tokens/revoke). Data comes from /console/api/*, with the caller's credential (kept in this tab's sessionStorage) when
// authentication is on.
"use strict";
const base = "/console";
let key = sessionStorage.getItem("mcpgate-key") || "";
// The link a gateway without authentication logs at start (/console#key=…) carries the console's
// key: kept for this tab, then taken out of the address bar.
const linked = new URLSearchParams(location.hash.slice(1)).get("key");
if (linked) {
  key = linked;
  sessionStorage.setItem("mcpgate-key", key);
  history.replaceState(null, "", location.pathname + location.search);
}
let catalog = [];
let visible = null;
let upstreamList = [];
let heldCount = 0;
let callsSince = null;

const $ = (sel) => document.querySelector(sel);
// "1 call", "2 calls": a number and the noun that agrees with it.
function count(n, one, many) { return n + " " + (n === 1 ? one : many); }

// The live-updates badge: grey until the stream runs (no key yet is not an error), green while
// it does, red once it dropped.
function setLive(text, tone) { const live = $("#live"); live.textContent = text; live.className = "badge " + tone; }

function headers() { return key ? { Authorization: "Bearer " + key } : {}; }
async function api(path) {
  const r = await fetch(base + "/api/" + path, { headers: headers() });
  if (r.status === 401 || r.status === 403) { throw Object.assign(new Error(await r.text()), { auth: true }); }
  if (!r.ok) { throw new Error(r.status + " " + await r.text()); }
  return r.json();
}
function cell(text, cls) { const td = document.createElement("td"); td.textContent = text == null ? "" : String(text); if (cls) td.className = cls; return td; }
function row(cells) { const tr = document.createElement("tr"); cells.forEach((c) => tr.appendChild(c)); return tr; }

function card(id, value, detail, tone) {
  const el = $("#" + id);
  el.querySelector(".value").textContent = value;
  el.querySelector(".detail").textContent = detail || "";
  el.className = "card " + (tone || "");
}

function renderHealth() {
  const ready = upstreamList.filter((u) => u.status === "ready" || u.status === "per caller").length;
  const down = upstreamList.filter((u) => u.status === "down").map((u) => u.id);
  const starting = upstreamList.filter((u) => u.status === "starting").map((u) => u.id);
  card("health-upstreams", ready + " of " + upstreamList.length + " up",
    down.length ? "down: " + down.join(", ") : starting.length ? "starting: " + starting.join(", ") : "all answering",
    down.length ? "bad" : starting.length ? "warn" : "good");
  card("health-held", String(heldCount), heldCount ? "waiting for approval (below)" : "nothing waiting", heldCount ? "warn" : "good");
  const rows = [...document.querySelectorAll("#calls tbody tr")];
  const failed = rows.filter((r) => r.dataset.outcome !== "ok").length;
  card("health-calls", String(rows.length), rows.length ? failed + " not ok" : "none yet", failed ? "warn" : "");
}

function renderUsageCard(u) {
  const sum = (f) => u.lines.reduce((n, l) => n + (l[f] || 0), 0);
  const calls = sum("calls"), refused = sum("refused"), errors = sum("errors");
  card("health-usage", count(calls, "call", "calls"), refused + " refused, " + count(errors, "error", "errors"), errors ? "warn" : "");
}

function renderUpstreams(list) {
  upstreamList = list;
  renderHealth();
  const body = $("#upstreams tbody");
  body.replaceChildren(...list.map((u) => row([
    cell(u.id, "name"), cell(u.transport), cell(u.era), cell(u.status, u.status),
    cell(u.tools), cell(u.latency_ms == null ? "-" : u.latency_ms + " ms"), cell(u.circuit, u.circuit),
  ])));
}

function buttonCell(label, cls, onClick) {
  const button = document.createElement("button");
  button.textContent = label;
  button.className = cls;
  button.addEventListener("click", onClick);
  const td = document.createElement("td");
  td.appendChild(button);
  return td;
}

function renderHeld(list) {
  heldCount = list.length;
  renderHealth();
  $("#held-section").hidden = list.length === 0;
  $("#held tbody").replaceChildren(...list.map((h) => {
    // The approval names the fingerprint of the definition shown here: if the upstream serves
    // another one by the time Approve is clicked, the gateway refuses it (409) and pins nothing.
    const action = buttonCell("Approve", "approve", () => approve(h.upstream, h.tool, h.fingerprint));
    if (!h.fingerprint) { action.firstChild.disabled = true; action.firstChild.title = "the upstream does not serve this " + (h.kind || "tool") + " now"; }
    const changes = cell(h.changes.join("\n"), "desc");
    changes.style.whiteSpace = "pre-wrap";
    if (h.definition) {
      const details = document.createElement("details");
      details.className = "definition";
      details.open = !h.changes.length || h.changes[0].startsWith("a new ");
      const summary = document.createElement("summary");
      summary.textContent = "Definition served now (fingerprint " + String(h.fingerprint).slice(0, 12) + "…)";
      const pre = document.createElement("pre");
      pre.textContent = JSON.stringify(h.definition, null, 2);
      details.append(summary, pre);
      changes.appendChild(details);
    }
    return row([cell(h.upstream), cell(h.tool, "name"), changes, action]);
  }));
}

async function approve(upstream, tool, fingerprint) {
  const r = await fetch(base + "/api/pins/approve", {
    method: "POST", headers: Object.assign({ "Content-Type": "application/json" }, headers()), body: JSON.stringify({ upstream, tool, fingerprint }),
  });
  if (!r.ok) { alert("Approving failed: " + r.status + " " + await r.text()); }
  const state = await api("state");
  renderHeld(state.held || []);
}

function renderAccounts(list) {
  $("#accounts-section").hidden = false;
  const now = Date.now() / 1000;
  $("#accounts tbody").replaceChildren(...list.map((t) => {
    const expires = t.expiresAt == null ? "-" : t.expiresAt <= now ? "expired" : new Date(t.expiresAt * 1000).toLocaleString();
    const action = buttonCell("Revoke", "revoke", () => revoke(t.caller, t.upstream));
    return row([cell(t.caller, "name"), cell(t.upstream), cell(t.issuer), cell(t.scope || "-"), cell(expires), cell(t.refreshable ? "yes" : "no"), action]);
  }));
}

async function revoke(caller, upstream) {
  const r = await fetch("/oauth/tokens/revoke", {
    method: "POST", headers: Object.assign({ "Content-Type": "application/json" }, headers()), body: JSON.stringify({ caller, upstream }),
  });
  if (!r.ok) { alert("Revoking failed: " + r.status + " " + await r.text()); return; }
  const state = await api("state");
  renderAccounts(state.tokens || []);
}

function renderCatalog() {
  const q = $("#filter").value.trim().toLowerCase();
  const body = $("#catalog tbody");
  let shown = 0;
  body.replaceChildren(...catalog.map((it) => {
    const tr = row([cell(it.kind), cell(it.name, "name"), cell(it.upstream), cell(it.description || it.title || "", "desc")]);
    const text = (it.name + " " + (it.title || "") + " " + (it.description || "")).toLowerCase();
    const match = (!q || q.split(/\s+/).every((w) => text.includes(w))) && (!visible || visible.has(it.kind + ":" + it.name));
    if (!match) tr.className = "hidden"; else shown++;
    tr.dataset.name = it.name;
    return tr;
  }));
  $("#catalog-count").textContent = shown + " of " + catalog.length;
}

function addCall(c, top) {
  $("#calls-empty").hidden = true;
  const tr = row([
    cell(new Date(c.ts_ms).toLocaleTimeString()), cell(c.caller), cell(c.method), cell(c.item, "name"),
    cell(c.upstream), cell(c.outcome, c.outcome === "ok" ? "ok" : "error"), cell(c.duration_ms == null ? "" : c.duration_ms + " ms"),
  ]);
  tr.dataset.outcome = c.outcome;
  const body = $("#calls tbody");
  if (top) body.prepend(tr); else body.appendChild(tr);
  while (body.children.length > 200) body.lastChild.remove();
  if (top) renderHealth();
}

function showCallsSince() {
  const since = callsSince ? new Date(callsSince).toLocaleString() : null;
  $("#calls-since").textContent = since ? "(kept since " + since + ", the last 200)" : "";
  const empty = $("#calls-empty");
  empty.hidden = $("#calls tbody").children.length > 0;
  empty.textContent = "No call has ended since the console was turned on" + (since ? " (" + since + ")" : "") + ".";
}

function renderUsage(u) {
  $("#usage-scope").textContent = u.scope === "self" ? "(your calls)" : "(every caller)";
  $("#usage tbody").replaceChildren(...u.lines.map((l) => row([
    cell(l.caller), cell(l.tool, "name"), cell(l.upstream), cell(l.endpoint), cell(l.calls), cell(l.refused), cell(l.errors, l.errors ? "error" : ""),
    cell((l.error_rate * 100).toFixed(1) + " %"), cell(l.mean_ms.toFixed(1) + " ms"),
  ])));
  $("#quotas").hidden = !u.quotas.length;
  $("#quotas tbody").replaceChildren(...u.quotas.map((q) => row([
    cell(q.caller), cell(q.tools, "name"), cell(q.limit + " per " + q.window), cell(q.used), cell(q.left, q.left ? "" : "error"),
    cell(new Date(q.resets_at * 1000).toLocaleString()),
  ])));
}
async function loadUsage() { renderUsage(await api("usage?since=" + encodeURIComponent($("#usage-since").value))); }
async function loadUsageCard() { renderUsageCard(await api("usage?since=24h")); }

async function load() {
  let state;
  try { state = await api("state"); } catch (e) {
    // Not an admin: the caller's own usage only.
    if (!(e.auth && key)) throw e;
    await loadUsage();
    setLive("your usage", "idle");
    document.querySelectorAll(".admin").forEach((el) => { el.hidden = true; });
    $("#login").hidden = true;
    $("#app").hidden = false;
    return;
  }
  document.querySelectorAll(".admin").forEach((el) => { el.hidden = false; });
  loadUsage().catch(() => {});
  loadUsageCard().catch(() => card("health-usage", "-", "usage could not be read"));
  $("#version").textContent = state.version;
  renderUpstreams(state.upstreams);
  if (state.tokens && state.tokens.length) renderAccounts(state.tokens);
  renderHeld(state.held || []);
  catalog = state.catalog;
  const select = $("#view-as");
  select.replaceChildren(new Option("everything", ""), ...state.callers.map((c) => new Option(c, c)));
  renderCatalog();
  callsSince = state.calls_since_ms || null;
  const calls = await api("calls");
  $("#calls tbody").replaceChildren();
  calls.forEach((c) => addCall(c, false));
  showCallsSince();
  renderHealth();
  $("#login").hidden = true;
  $("#app").hidden = false;
  follow();
}

// Live updates: an SSE stream read with fetch (EventSource cannot send the credential).
async function follow() {
  for (;;) {
    try {
      const r = await fetch(base + "/api/events", { headers: headers() });
      if (!r.ok || !r.body) throw new Error("events: " + r.status);
      setLive("live", "on");
      const reader = r.body.getReader();
      const dec = new TextDecoder();
      let buf = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += dec.decode(value, { stream: true });
        let i;
        while ((i = buf.indexOf("\n\n")) >= 0) {
          const ev = buf.slice(0, i); buf = buf.slice(i + 2);
          let type = "message", data = "";
          ev.split("\n").forEach((l) => { if (l.startsWith("event:")) type = l.slice(6).trim(); else if (l.startsWith("data:")) data += l.slice(5).trim(); });
          if (!data) continue;
          const msg = JSON.parse(data);
          if (type === "upstreams") renderUpstreams(msg);
          else if (type === "catalog") { catalog = msg; renderCatalog(); }
          else if (type === "call") addCall(msg, true);
        }
      }
    } catch (e) { /* retried below */ }
    setLive("reconnecting", "off");
    await new Promise((res) => setTimeout(res, 2000));
  }
}

$("#filter").addEventListener("input", renderCatalog);
$("#usage-since").addEventListener("change", () => { loadUsage().catch(() => {}); });
$("#view-as").addEventListener("change", async (e) => {
  const caller = e.target.value;
  visible = caller ? new Set((await api("view?caller=" + encodeURIComponent(caller))).visible) : null;
  renderCatalog();
});
$("#login-form").addEventListener("submit", (e) => {
  e.preventDefault();
  key = $("#key").value.trim();
  sessionStorage.setItem("mcpgate-key", key);
  start();
});

function start() {
  setLive("connecting", "idle");
  load().catch((e) => {
    $("#app").hidden = true;
    $("#login").hidden = false;
    setLive("waiting for a key", "idle");
    // Without authentication the key is the console's own (from the link in the gateway's log): say so.
    let why = "";
    try { why = JSON.parse(e.message).error || ""; } catch (_) { why = ""; }
    const linkNeeded = e.auth && !key && why.includes("console link");
    $("#login-error").textContent = linkNeeded ? why : e.auth && key ? "That key is not accepted." : (e.auth ? "" : String(e.message));
  });
}
start();
