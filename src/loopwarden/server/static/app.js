// The loopwarden run page: start runs, list them, and watch one live. Events arrive over SSE
// read with fetch (so the bearer cookie/header works and we control reconnection): each frame's
// id is the event's sequence number; on a dropped connection we reconnect with Last-Event-ID and
// skip anything already shown, so no line is lost or duplicated. Everything from the model is
// put in the page with textContent, never as HTML.
"use strict";

const $ = (id) => document.getElementById(id);
const api = (path, options = {}) => fetch(path, { credentials: "same-origin", cache: "no-store", ...options });
const el = (tag, props = {}, text) => {
  const node = Object.assign(document.createElement(tag), props);
  if (text !== undefined) node.textContent = text;
  return node;
};
const short = (value, n = 160) => {
  const text = typeof value === "string" ? value : JSON.stringify(value);
  return text && text.length > n ? `${text.slice(0, n)}…` : text || "";
};

const page = { runId: null, stream: null, runsTimer: null };
window.loopwarden = page;

// ---------------------------------------------------------------------------------------- SSE

class RunStream {
  constructor(runId, handlers) {
    this.runId = runId;
    this.handlers = handlers;
    this.lastSeq = 0;
    this.ended = false;
    this.stopped = false;
    this.connections = 0;
    this.controller = null;
    this.delay = 500;
  }

  start() {
    this.connect();
  }

  stop() {
    this.stopped = true;
    if (this.controller) this.controller.abort();
  }

  // Drop the connection as a network failure would; the stream reconnects by itself.
  drop() {
    if (this.controller) this.controller.abort();
  }

  async connect() {
    if (this.stopped || this.ended) return;
    this.controller = new AbortController();
    const headers = { Accept: "text/event-stream" };
    if (this.lastSeq > 0) headers["Last-Event-ID"] = String(this.lastSeq);
    this.connections += 1;
    this.handlers.onState(this.connections > 1 ? "reconnecting…" : "connecting…");
    try {
      const response = await api(`/api/runs/${this.runId}/events`, { headers, signal: this.controller.signal });
      if (response.status === 401) return showLogin();
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      this.handlers.onState("live");
      this.delay = 500;
      await this.read(response.body.pipeThrough(new TextDecoderStream()).getReader());
    } catch (error) {
      this.handlers.onState(`disconnected (${error.name === "AbortError" ? "dropped" : error.message})`);
    }
    if (!this.ended && !this.stopped) {
      setTimeout(() => this.connect(), this.delay);
      this.delay = Math.min(this.delay * 2, 5000);
    }
  }

  async read(reader) {
    let buffer = "";
    let frame = { data: [] };
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += value;
      let match;
      while ((match = /\r\n|\r(?!$)|\n/.exec(buffer)) !== null) {
        const line = buffer.slice(0, match.index);
        buffer = buffer.slice(match.index + match[0].length);
        if (line === "") {
          if (this.dispatch(frame)) return;
          frame = { data: [] };
        } else if (!line.startsWith(":")) {
          const colon = line.indexOf(":");
          const field = colon < 0 ? line : line.slice(0, colon);
          let val = colon < 0 ? "" : line.slice(colon + 1);
          if (val.startsWith(" ")) val = val.slice(1);
          if (field === "data") frame.data.push(val);
          else if (field === "id") frame.id = val;
          else if (field === "event") frame.event = val;
        }
      }
    }
  }

  // Returns true when the stream is over.
  dispatch(frame) {
    if (frame.data.length === 0) return false;
    const data = frame.data.join("\n");
    if (frame.event === "end") {
      this.ended = true;
      this.controller.abort();
      this.handlers.onState("finished");
      this.handlers.onEnd(JSON.parse(data));
      return true;
    }
    const seq = Number.parseInt(frame.id, 10);
    if (!Number.isFinite(seq) || seq <= this.lastSeq) return false; // already shown
    this.lastSeq = seq;
    this.handlers.onEvent(JSON.parse(data));
    return false;
  }
}

// --------------------------------------------------------------------------------- navigation

function show(view) {
  for (const id of ["login", "home", "run"]) $(id).hidden = id !== view;
}

function showLogin() {
  show("login");
}

function route() {
  const match = /^#\/runs\/([0-9a-f]{32})$/.exec(location.hash);
  if (page.stream) page.stream.stop();
  page.stream = null;
  clearInterval(page.runsTimer);
  if (match) return openRun(match[1]);
  show("home");
  loadFolders();
  loadRuns();
  page.runsTimer = setInterval(loadRuns, 3000);
}

// -------------------------------------------------------------------------------------- home

async function loadFolders() {
  const response = await api("/api/folders");
  if (response.status === 401) return showLogin();
  const select = $("folder-select");
  select.replaceChildren();
  for (const folder of await response.json()) select.appendChild(el("option", { value: folder.path }, folder.name));
}

async function loadRuns() {
  const response = await api("/api/runs?limit=100");
  if (response.status === 401) return showLogin();
  const body = $("runs").tBodies[0];
  body.replaceChildren();
  for (const run of await response.json()) {
    const row = el("tr");
    row.dataset.id = run.id;
    row.appendChild(el("td", {}, run.id.slice(0, 8)));
    row.appendChild(el("td", {}, short(run.params.source || "", 60)));
    const status = el("td");
    status.appendChild(el("span", { className: `status ${run.status}` }, run.status));
    row.appendChild(status);
    const p = run.progress;
    row.appendChild(el("td", {}, p && p.total ? `${p.done}/${p.total}` : ""));
    row.appendChild(el("td", {}, new Date(run.created_at * 1000).toLocaleString()));
    row.addEventListener("click", () => { location.hash = `#/runs/${run.id}`; });
    body.appendChild(row);
  }
}

async function startRun(event) {
  event.preventDefault();
  const form = event.target;
  const data = new FormData();
  for (const name of ["template", "lang", "preset", "model"]) if (form[name].value) data.append(name, form[name].value);
  if (form.strict.checked) data.append("strict", "true");
  if (form.approve_code.checked) data.append("approve_code", "true");
  if (form.source.value === "upload") {
    for (const file of $("files").files) data.append("files", file, file.webkitRelativePath || file.name);
  } else {
    data.append("folder", form.folder.value);
  }
  $("start-error").textContent = "";
  const response = await api("/api/runs", { method: "POST", body: data });
  const body = await response.json().catch(() => ({}));
  if (!response.ok) {
    const retry = response.headers.get("Retry-After");
    $("start-error").textContent = `${body.detail || response.statusText}${retry ? ` (retry in ${retry}s)` : ""}`;
    return;
  }
  location.hash = `#/runs/${body.id}`;
}

// --------------------------------------------------------------------------------------- run

const view = { stages: new Map(), total: 0, events: 0 };

async function openRun(runId) {
  show("run");
  page.runId = runId;
  view.stages = new Map();
  view.total = 0;
  view.events = 0;
  $("run-id").textContent = runId;
  for (const id of ["timeline", "stages", "approvals", "downloads", "markdown", "latex"]) $(id).replaceChildren();
  $("coverage").tBodies[0].replaceChildren();
  for (const id of ["result-card", "coverage-card", "approvals-card"]) $(id).hidden = true;
  $("pdf").removeAttribute("src");
  $("run-message").textContent = "";
  setProgress();
  await refreshRun();
  page.stream = new RunStream(runId, {
    onEvent: addEvent,
    onEnd: (end) => { setStatus(end.status); refreshRun(); showResult(); },
    onState: (state) => { $("conn").textContent = state; },
  });
  page.stream.start();
}

async function refreshRun() {
  const response = await api(`/api/runs/${page.runId}`);
  if (response.status === 401) return showLogin();
  if (!response.ok) {
    $("run-message").textContent = "No such run.";
    return;
  }
  const run = await response.json();
  setStatus(run.status);
  $("run-source").textContent = `${run.params.source || ""} · template ${run.params.template || "?"} · ${run.params.lang || ""}`;
  if (run.message) $("run-message").textContent = run.message;
  $("run-totals").textContent = describeTotals(run);
  $("cancel").hidden = !["queued", "running", "paused"].includes(run.status);
  renderApprovals(run.approvals.filter((a) => a.status === "pending"));
}

function describeTotals(run) {
  const parts = [];
  if (run.stop_reasons && run.stop_reasons.length) parts.push(`stop reasons: ${run.stop_reasons.join(", ")}`);
  const t = run.totals;
  if (t) {
    parts.push(`${t.model_calls} model calls`, `${t.tool_executions} tool runs`);
    if (t.duplicates_avoided) parts.push(`${t.duplicates_avoided} duplicates avoided`);
    parts.push(`${t.prompt_tokens + t.completion_tokens} tokens`);
    if (t.cost) parts.push(`$${t.cost.toFixed(4)}`);
    if (t.duration_s) parts.push(`${t.duration_s.toFixed(1)} s`);
  }
  return parts.join(" · ");
}

function setStatus(status) {
  const node = $("run-status");
  node.textContent = status;
  node.className = `status ${status}`;
  $("cancel").hidden = !["queued", "running", "paused"].includes(status);
}

function setProgress() {
  const done = [...view.stages.values()].filter((s) => s.state === "done" || s.state === "skipped").length;
  const percent = view.total ? Math.round((100 * done) / view.total) : 0;
  $("progress-bar").style.width = `${percent}%`;
  $("progress").setAttribute("aria-valuenow", String(percent));
  const current = [...view.stages.values()].filter((s) => s.state === "started").pop();
  $("progress-label").textContent = `${percent}% · ${done}/${view.total || "?"}${current ? ` · ${current.stage}` : ""}`;
  const list = $("stages");
  list.replaceChildren();
  for (const stage of [...view.stages.values()].sort((a, b) => a.index - b.index)) {
    list.appendChild(el("li", { className: stage.state, title: stage.state }, `${stage.index}. ${stage.stage}`));
  }
}

function summary(e) {
  switch (e.type) {
    case "run_queued": return `queued: ${short(e.params.source)}`;
    case "milestone": return `stage ${e.index}/${e.total} ${e.stage} ${e.state}`;
    case "model_called": return `turn ${e.turn} ${e.model}${e.n_tool_calls ? ` → ${e.n_tool_calls} tool call(s)` : ""}${e.text ? `: ${short(e.text)}` : ""}`;
    case "tool_call_proposed": return `${e.tool}(${short(e.arguments, 120)})`;
    case "tool_call_finished": return `${e.tool} ${e.ok ? "ok" : `error ${e.error_type || ""}`}${e.cached ? " (cached)" : ""} ${short(e.message || e.preview, 120)}`;
    case "guard_verdict": return `${e.action === "allowed" ? "guard" : "GUARD"} ${e.detector}: ${e.action}${e.tool ? ` ${e.tool}` : ""}${e.count ? ` ×${e.count}` : ""} — ${e.reason}${e.evidence && e.evidence.length ? `\n  evidence: ${e.evidence.join("; ")}` : ""}`;
    case "nudge_injected": return `nudge (${e.detector}): ${short(e.text)}`;
    case "exploration_cut_off": return `CUT OFF: ${e.stop_reason} — ${e.message}`;
    case "phase_ended": return `phase ${e.phase} ended: ${e.status} (${e.stop_reason}) ${e.message || ""}`;
    case "approval_required": return `approval needed: ${e.tool}(${short(e.arguments, 120)}) ${e.reason || ""}`;
    case "approval_decided": return `${e.approved ? "approved" : "denied"} ${e.call_id}${e.by ? ` by ${e.by}` : ""}`;
    case "report_finished": return `finished: ${e.status}${e.stop_reasons.length ? ` (${e.stop_reasons.join(", ")})` : ""} ${e.message || ""}`;
    case "run_interrupted": return `interrupted: ${e.message || ""}`;
    default: {
      const { type, run_id, seq, ts, ...rest } = e;
      return short(rest, 200);
    }
  }
}

function addEvent(e) {
  view.events += 1;
  const classes = [e.type.replace(/[^a-z_]/g, "")];
  if (e.type === "guard_verdict" && e.action !== "allowed") classes.push("verdict", e.action);
  if (e.type === "exploration_cut_off") classes.push("cutoff");
  if (e.type === "report_finished" || e.type === "run_interrupted") classes.push("finished");
  const line = el("li", { className: classes.join(" "), value: e.seq }, `${e.type}  ${summary(e)}`);
  line.dataset.seq = String(e.seq);
  $("timeline").appendChild(line);
  $("event-count").textContent = `(${view.events} events)`;
  if (e.type === "milestone") {
    view.total = Math.max(view.total, e.total);
    view.stages.set(e.index, { index: e.index, stage: e.stage, state: e.state });
    setProgress();
  } else if (e.type === "exploration_done" && e.record && e.record.coverage) {
    renderCoverage(e.record.coverage.files || []);
  } else if (e.type === "approval_required" || e.type === "approval_decided") {
    refreshRun();
  } else if (e.type === "report_finished") {
    setStatus(e.status);
  }
}

function renderCoverage(files) {
  $("coverage-card").hidden = false;
  const body = $("coverage").tBodies[0];
  body.replaceChildren();
  for (const f of files) {
    const row = el("tr", { className: f.status });
    row.appendChild(el("td", {}, f.path));
    row.appendChild(el("td", {}, f.status));
    row.appendChild(el("td", {}, f.total_chars ? `${f.chars_read}/${f.total_chars}` : String(f.chars_read)));
    row.appendChild(el("td", {}, f.reason || ""));
    body.appendChild(row);
  }
}

function renderApprovals(pending) {
  $("approvals-card").hidden = pending.length === 0;
  const list = $("approvals");
  list.replaceChildren();
  for (const a of pending) {
    const item = el("li", { className: "approval" });
    item.dataset.callId = a.call_id;
    item.appendChild(el("strong", {}, a.tool));
    const args = a.arguments || {};
    if (typeof args.code === "string") {
      // Model-written code: shown whole (as text) so the person sees what they approve.
      const { code, ...rest } = args;
      item.appendChild(el("code", {}, ` ${short(rest, 400)} `));
      item.appendChild(el("pre", { className: "code" }, code));
    } else {
      item.appendChild(el("code", {}, ` ${short(a.arguments, 400)} `));
    }
    item.appendChild(el("span", { className: "muted" }, a.reason));
    for (const decision of ["approve", "deny"]) {
      const button = el("button", { type: "button", className: decision }, decision);
      button.addEventListener("click", () => decide(a.call_id, decision));
      item.appendChild(button);
    }
    list.appendChild(item);
  }
}

async function decide(callId, decision) {
  await api(`/api/runs/${page.runId}/approvals/${encodeURIComponent(callId)}`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ decision }),
  });
  refreshRun();
}

const artifactUrl = (name) => `/api/runs/${page.runId}/artifacts/${name.split("/").map(encodeURIComponent).join("/")}`;

async function showResult() {
  const response = await api(`/api/runs/${page.runId}/artifacts`);
  if (!response.ok) return;
  const files = await response.json();
  const names = new Set(files.map((f) => f.name));
  $("result-card").hidden = false;
  const hasPdf = names.has("report.pdf");
  $("no-pdf").hidden = hasPdf;
  $("pdf").hidden = !hasPdf;
  if (hasPdf) $("pdf").src = artifactUrl("report.pdf");
  if (names.has("report.md")) {
    const text = await (await api(artifactUrl("report.md"))).text();
    window.safeMarkdown.render($("markdown"), text, artifactUrl);
  }
  if (names.has("report.tex")) $("latex").textContent = await (await api(artifactUrl("report.tex"))).text();
  const list = $("downloads");
  list.replaceChildren();
  for (const f of files) {
    const item = el("li");
    item.appendChild(el("a", { href: `${artifactUrl(f.name)}?download=1` }, f.name));
    if (f.size !== null) item.appendChild(el("span", { className: "muted" }, ` ${f.size} bytes`));
    list.appendChild(item);
  }
}

// ------------------------------------------------------------------------------------ wiring

function selectTab(name) {
  for (const button of document.querySelectorAll(".tabs button")) button.classList.toggle("active", button.dataset.tab === name);
  for (const tab of ["pdf", "md", "tex", "files"]) $(`tab-${tab}`).hidden = tab !== name;
}

document.addEventListener("DOMContentLoaded", () => {
  $("new-run").addEventListener("submit", startRun);
  $("refresh").addEventListener("click", loadRuns);
  $("files").addEventListener("change", () => { $("new-run").source.value = "upload"; });
  $("cancel").addEventListener("click", async () => {
    await api(`/api/runs/${page.runId}/cancel`, { method: "POST" });
    refreshRun();
  });
  for (const button of document.querySelectorAll(".tabs button")) button.addEventListener("click", () => selectTab(button.dataset.tab));
  $("login-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const response = await api("/api/login", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ token: event.target.token.value }),
    });
    if (response.ok) route();
    else $("login-error").textContent = "Wrong token.";
  });
  window.addEventListener("hashchange", route);
  route();
});
