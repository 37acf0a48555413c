// Only in the desktop app (`loopwarden app`): the native folder dialog, "Open PDF" and "Show in
// folder". Served by `loopwarden serve` too, where /api/app does not exist and this does nothing.
"use strict";

(() => {
  const byId = (id) => document.getElementById(id);
  const call = (path, method = "GET") => fetch(path, { method, credentials: "same-origin", cache: "no-store" });
  const make = (tag, props, text) => {
    const node = Object.assign(document.createElement(tag), props);
    if (text !== undefined) node.textContent = text;
    return node;
  };
  const detail = async (response) => (await response.json().catch(() => ({}))).detail || response.statusText;

  function showFolder(folder) {
    byId("picked-folder").textContent = folder || "no folder chosen yet";
  }

  async function pickFolder() {
    byId("start-error").textContent = "";
    const button = byId("pick-folder");
    button.disabled = true;
    try {
      const response = await call("/api/app/folder", "POST");
      if (!response.ok) {
        byId("start-error").textContent = await detail(response);
        return;
      }
      const { folder } = await response.json();
      showFolder(folder);
      if (!folder) return;
      await window.loadFolders();
      const select = byId("folder-select");
      select.value = folder;
      byId("new-run").source.value = "folder";
      document.body.dataset.folder = folder;
    } finally {
      button.disabled = false;
    }
  }

  async function runAction(action, done) {
    const runId = window.loopwarden.runId;
    const status = byId("desktop-status");
    status.textContent = "";
    const response = await call(`/api/app/runs/${runId}/${action}`, "POST");
    if (!response.ok) {
      status.textContent = await detail(response);
      return;
    }
    const { path, opened } = await response.json();
    status.textContent = opened ? `${done} ${path}` : `No application took ${path}`;
    status.dataset.path = path;
  }

  async function setup() {
    const response = await call("/api/app");
    if (!response.ok) return; // a browser on `loopwarden serve`
    const info = await response.json();
    document.body.classList.add("desktop");
    const select = byId("folder-select");
    const pick = make("button", { type: "button", id: "pick-folder" }, "Choose folder…");
    pick.addEventListener("click", pickFolder);
    select.after(" ", pick, " ", make("span", { id: "picked-folder", className: "muted" }));
    showFolder(info.folder);
    const actions = make("p", { id: "desktop-actions" });
    const open = make("button", { type: "button", id: "open-pdf" }, "Open PDF");
    const reveal = make("button", { type: "button", id: "show-folder" }, "Show in folder");
    open.addEventListener("click", () => runAction("open", "Opened"));
    reveal.addEventListener("click", () => runAction("reveal", "Showed"));
    actions.append(open, " ", reveal, " ", make("span", { id: "desktop-status", className: "muted" }));
    byId("result-card").querySelector("h2").after(actions);
    document.body.dataset.desktop = "ready";
  }

  document.addEventListener("DOMContentLoaded", setup);
})();
