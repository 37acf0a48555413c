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

const view = { stages: new Map(), total: 0, events: 0, inside: null, calls: new Map(), models: new Set(),
  modelFailed: false, deliverable: "", status: "", message: "", startTs: null };

async function openRun(runId) {
  show("run");
  page.runId = runId;
  Object.assign(view, { stages: new Map(), total: 0, events: 0, inside: null, calls: new Map(), models: new Set(),
    modelFailed: false, deliverable: "", status: "", message: "", startTs: null });
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
    onEnd: async (end) => { setStatus(end.status); await refreshRun(); showResult(); },
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
  view.message = run.message || "";
  $("run-totals").textContent = describeTotals(run);
  $("cancel").hidden = !["queued", "running", "paused"].includes(run.status);
  renderApprovals(run.approvals.filter((a) => a.status === "pending"));
}

function describeTotals(run) {
  const parts = [];
  if (run.stop_reasons && run.stop_reasons.length) parts.push(`stop reasons: ${run.stop_reasons.join(", ")}`);
  const t = run.totals;
  if (t) {
    const tokens = t.prompt_tokens + t.completion_tokens;
    if (!tokens && isOffline()) parts.push("offline explorer and writer, no model");
    else parts.push(`${t.model_calls} model calls`);
    parts.push(`${t.tool_executions} tool runs`);
    if (t.duplicates_avoided) parts.push(`${t.duplicates_avoided} duplicates avoided`);
    if (tokens || !isOffline()) parts.push(`${tokens} tokens`);
    if (t.cost) parts.push(`$${t.cost.toFixed(4)}`);
    if (t.duration_s) parts.push(`${t.duration_s.toFixed(1)} s`);
  }
  return parts.join(" · ");
}

// No language model took part: only the offline explorer answered, and no model call failed.
function isOffline() {
  return !view.modelFailed && [...view.models].every((name) => name.startsWith("offline"));
}

function setStatus(status) {
  view.status = status;
  const node = $("run-status");
  node.textContent = status;
  node.className = `status ${status}`;
  $("cancel").hidden = !["queued", "running", "paused"].includes(status);
}

// The bar: N of the plan's fixed stage count, and inside the running stage what it has done so far
// (files read of the planned set, figures made), moving the bar within that stage only.
function setProgress() {
  const done = [...view.stages.values()].filter((s) => s.state === "done" || s.state === "skipped").length;
  const current = [...view.stages.values()].filter((s) => s.state === "started").pop();
  const inside = current && view.inside && view.inside.stage === current.stage ? view.inside : null;
  const share = inside && inside.files_planned ? Math.min(inside.files_read / inside.files_planned, 0.99) : 0;
  const percent = view.total ? Math.round((100 * (done + share)) / view.total) : 0;
  $("progress-bar").style.width = `${percent}%`;
  $("progress").setAttribute("aria-valuenow", String(percent));
  const where = current ? ` · ${current.stage}${inside ? ` · ${insideText(inside)}` : ""}` : "";
  $("progress-label").textContent = `${percent}% · ${done}/${view.total || "?"}${where}`;
  const list = $("stages");
  list.replaceChildren();
  for (const stage of [...view.stages.values()].sort((a, b) => a.index - b.index)) {
    const extra = stage === current && inside ? ` (${insideText(inside)})` : "";
    list.appendChild(el("li", { className: stage.state, title: stage.state }, `${stage.index}. ${stage.stage}${extra}`));
  }
}

function insideText(p) {
  const figures = p.figures_made ? `, ${plural(p.figures_made, "figure")}` : "";
  return `${p.files_read}/${p.files_planned} files read${figures}`;
}

const plural = (n, word) => `${n} ${word}${n === 1 ? "" : "s"}`;

// The timeline tells what the run did as a scientist would say it: read X, drew Y, stopped a
// repeat. Bookkeeping events (a call proposed, a call allowed, a progress tick) stay in the list,
// hidden unless "every event" is ticked, so each event is still shown exactly once.
function story(e) {
  const call = view.calls.get(e.call_id) || {};
  const args = call.arguments && typeof call.arguments === "object" ? call.arguments : {};
  switch (e.type) {
    case "run_queued": return { text: `Queued: ${short(e.params.source)}` };
    case "milestone":
      if (e.state === "started") return { text: `${e.index}/${e.total} ${(e.detail && e.detail.label) || e.stage}`, kind: "stage" };
      if (e.state === "skipped") return { text: `Skipped ${e.stage}${e.detail && e.detail.reason ? `: ${e.detail.reason}` : ""}` };
      return { text: stageDone(e), quiet: !stageDone(e) };
    case "scan_done": {
      const counts = (e.scan && e.scan.counts) || {};
      const parts = Object.entries(counts).filter(([, n]) => n).map(([kind, n]) => `${n} ${kind}`);
      const total = Object.values(counts).reduce((a, b) => a + b, 0);
      return { text: `Listed the folder: ${plural(total, "file")}${parts.length ? ` (${parts.join(", ")})` : ""}` };
    }
    case "isolation_probed": return { text: `Figure sandbox: ${e.message}` };
    case "stage_progress": return { text: `${e.stage}: ${insideText(e)}`, quiet: true };
    case "model_called":
      return { text: `Asked ${e.model}${e.n_tool_calls ? ` → ${plural(e.n_tool_calls, "tool call")}` : ""}${e.text ? `: ${short(e.text)}` : ""}`,
        quiet: e.model.startsWith("offline") };
    case "model_failed": return { text: `The model failed (${e.kind}): ${short(e.message)}`, kind: "problem" };
    case "tool_call_proposed": return { text: `Proposed ${e.tool}(${argsText(e.arguments)})`, quiet: true };
    case "tool_call_finished": return toolStory(e, args);
    case "guard_verdict": return verdictStory(e);
    case "nudge_injected": return { text: `Told the model (${e.detector}): ${short(e.text)}` };
    case "exploration_cut_off": return { text: `Exploration cut off: ${e.message}`, kind: "cutoff" };
    case "phase_ended": return { text: `Phase ${e.phase} ended: ${e.status} (${e.stop_reason})`, quiet: e.status === "completed" };
    case "run_started": return { text: `Started ${e.model} with ${plural(e.tools.length, "tool")}`, quiet: true };
    case "run_finished": return { text: `Agent loop ended: ${e.stop_reason}`, quiet: true };
    case "figure_made": return { text: e.ok ? `Figure ${e.path}: ${e.caption}` : `Left out figure ${e.path}: ${e.message}` };
    case "exploration_done": {
      const r = e.record || {};
      const read = ((r.coverage && r.coverage.files) || []).filter((f) => f.status === "read").length;
      return { text: `Finished exploring: ${plural((r.key_findings || []).length, "finding")}, ${plural((r.figures || []).length, "figure")}, ${plural(read, "file")} read in full` };
    }
    case "gap_found": return { text: `Missing: ${e.message}`, kind: "problem" };
    case "injection_suspected": return { text: `Suspected prompt injection in ${e.path} (line ${e.line}): treated as data, not followed`, kind: "problem" };
    case "draft_rejected": return { text: `Draft attempt ${e.attempt}/${e.max_attempts} rejected: ${short(e.problem)}`, kind: "problem" };
    case "draft_failed": return { text: `No acceptable draft: ${e.message}`, kind: "problem" };
    case "reflection_verdict":
      return { text: `Review round ${e.round}: ${plural(e.major_issues.length, "major issue")}, ${plural(e.minor_issues.length, "minor issue")}${e.outcome ? ` (${e.outcome.replace(/_/g, " ")})` : ""}` };
    case "citations_removed": return { text: `Removed citations of no real source: ${e.keys.join(", ")}`, kind: "problem" };
    case "compile_error": return { text: `LaTeX did not compile${e.line ? ` (line ${e.line})` : ""}: ${short(e.message)}`, kind: "problem" };
    case "approval_required": return { text: `Waiting for approval: ${e.tool}(${argsText(e.arguments)}) ${e.reason || ""}` };
    case "approval_decided": return { text: `${e.approved ? "approved" : "denied"} ${e.tool || ""} ${e.call_id}${e.by ? ` by ${e.by}` : ""}` };
    case "report_finished": return { text: `Finished: ${e.status}${e.stop_reasons.length ? ` (${e.stop_reasons.join(", ")})` : ""}. ${e.message || ""}` };
    case "run_interrupted": return { text: `Interrupted: ${e.message || ""}` };
    default: {
      const said = e.message || e.reason || e.text || "";
      return { text: `${e.type.replace(/_/g, " ")}${said ? `: ${short(said)}` : ""}`, quiet: !said };
    }
  }
}

// Tool arguments as name=value, each value cut short: readable, not a JSON dump.
function argsText(args) {
  if (!args || typeof args !== "object") return short(String(args ?? ""), 120);
  return Object.entries(args).map(([k, v]) => `${k}=${short(typeof v === "string" ? v : String(v), 60)}`).join(", ");
}

function stageDone(e) {
  const d = e.detail || {};
  if (e.stage === "draft" && d.drafted_by) return `Drafted the report (${d.drafted_by === "offline writer" ? "offline writer, no model" : d.drafted_by})`;
  if (e.stage === "bib" && d.sources !== undefined) return `Bibliography: ${plural(d.cited || 0, "source")} cited of ${d.sources}`;
  if (e.stage === "compile") return d.pdf ? "Compiled the PDF" : `No PDF${d.passes ? `: ${short(d.passes)}` : ""}`;
  return "";
}

function toolStory(e, args) {
  const path = args.path || args.filename || "";
  if (!e.ok) {
    const what = { read_file: "read", read_image: "look at", make_figure: "draw", list_dir: "list" }[e.tool] || `run ${e.tool} on`;
    return { text: `Could not ${what} ${path}: ${short(e.message, 160)}`, kind: "problem" };
  }
  const again = e.cached ? " (answered from the earlier result)" : "";
  switch (e.tool) {
    case "read_file": return { text: `${args.offset ? "Read on in" : "Read"} ${path}${again}` };
    case "read_image": return { text: `Looked at the image ${path}${again}` };
    case "list_dir": return { text: `Looked into ${path && path !== "." ? path : "the folder"}${again}` };
    case "make_figure": return { text: `Drew ${path}${args.caption ? `: ${short(args.caption, 120)}` : ""}` };
    case "finish_exploration": return { text: "Wrote down the findings" };
    default: return { text: `Ran ${e.tool}${path ? ` on ${path}` : ""}${again}` };
  }
}

function verdictStory(e) {
  if (e.action === "allowed") return { text: `Allowed ${e.tool || ""}`, quiet: true };
  const repeat = /repeat|cycle|repetition/.test(e.detector);
  const what = e.action === "stopped" ? (repeat ? "Stopped a repeat" : "Stopped the loop")
    : e.action === "nudged" ? (repeat ? "Caught a repeat, told the model" : "Told the model to change course")
      : e.action === "cached" ? "Answered a repeat from the earlier result"
        : `${e.action[0].toUpperCase()}${e.action.slice(1)}`;
  // The evidence (call fingerprints) is for the "every event" view's tooltip, not the story.
  return { text: `${what}: ${e.tool || ""}${e.count ? ` ×${e.count}` : ""} — ${short(e.reason, 200)}`, kind: "verdict" };
}

function clock(ts) {
  if (view.startTs === null) view.startTs = ts;
  const s = Math.max(0, Math.round(ts - view.startTs));
  return `${Math.floor(s / 60)}:${String(s % 60).padStart(2, "0")}`;
}

function addEvent(e) {
  view.events += 1;
  if (e.type === "tool_call_proposed") view.calls.set(e.call_id, { tool: e.tool, arguments: e.arguments });
  if (e.type === "model_called") view.models.add(e.model);
  if (e.type === "model_failed") view.modelFailed = true;
  const told = story(e);
  const classes = [e.type.replace(/[^a-z_]/g, "")];
  if (told.kind) classes.push(told.kind);
  if (e.type === "guard_verdict" && e.action !== "allowed") classes.push(e.action);
  if (e.type === "report_finished" || e.type === "run_interrupted") classes.push("finished");
  if (told.quiet) classes.push("quiet");
  const line = el("li", { className: classes.join(" "), value: e.seq });
  line.dataset.seq = String(e.seq);
  line.dataset.type = e.type;
  if (typeof e.ts === "number") line.appendChild(el("span", { className: "when" }, clock(e.ts)));
  line.appendChild(el("span", { className: "what" }, told.text));
  $("timeline").appendChild(line);
  $("event-count").textContent = `(${view.events} events)`;
  if (e.type === "milestone") {
    view.total = Math.max(view.total, e.total);
    view.stages.set(e.index, { index: e.index, stage: e.stage, state: e.state });
    if (e.index === 1 && e.detail && e.detail.deliverable) view.deliverable = e.detail.deliverable;
    setProgress();
  } else if (e.type === "stage_progress") {
    view.inside = e;
    setProgress();
  } else if (e.type === "exploration_done" && e.record && e.record.coverage) {
    renderCoverage(e.record.coverage.files || []);
  } else if (e.type === "approval_required" || e.type === "approval_decided") {
    refreshRun();
  } else if (e.type === "report_finished") {
    view.message = e.message || view.message;
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
  $("no-pdf").textContent = noPdfReason();
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

// Why there is no PDF, from what the run said: never a guess about xelatex for a cancelled run.
function noPdfReason() {
  const status = view.status;
  if (status === "cancelled") return "The run was cancelled before a PDF was made.";
  if (status === "interrupted") return "The run was interrupted before a PDF was made.";
  if (status === "failed") return `The run failed, so no PDF was made${view.message ? `: ${view.message}` : "."}`;
  if (view.deliverable.includes("xelatex not found")) return "No PDF: xelatex is not installed on the server. See Markdown and LaTeX.";
  if (view.deliverable.includes("switched off")) return "No PDF: the PDF was switched off for this run. See Markdown and LaTeX.";
  if (/compile failed/.test(view.message)) return `No PDF: the LaTeX did not compile (see the timeline). See Markdown and LaTeX.`;
  return "No PDF was produced. See Markdown and LaTeX.";
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
  $("every-event").addEventListener("change", (event) => { $("timeline").classList.toggle("all", event.target.checked); });
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
