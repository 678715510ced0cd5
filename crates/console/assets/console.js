// Slipway console: progressive enhancement only; every page works without it.
"use strict";

// Follows the job's output (Server-Sent Events from /ui/operation/output) into #output;
// when the job ends, the page is read again for its final status.
function followOutput() {
  const out = document.getElementById("output");
  if (!out || !out.dataset.follow || typeof EventSource === "undefined") return;
  const state = document.getElementById("output-state");
  const source = new EventSource(out.dataset.follow);
  source.onmessage = (e) => {
    out.textContent += e.data + "\n";
    out.scrollTop = out.scrollHeight;
  };
  source.addEventListener("end", (e) => {
    source.close();
    if (state) state.textContent = "The job ended: " + e.data + ".";
    refresh();
  });
  source.addEventListener("unavailable", (e) => {
    source.close();
    if (state) state.textContent = "No output: " + e.data;
  });
  source.onerror = () => {
    source.close();
    if (state && !out.textContent) state.textContent = "No output to show.";
  };
}

// Replaces each [data-refresh] region with the same region of a fresh copy of the page.
async function refresh() {
  try {
    const resp = await fetch(location.href, { credentials: "same-origin", cache: "no-store" });
    if (!resp.ok) return false;
    const doc = new DOMParser().parseFromString(await resp.text(), "text/html");
    for (const region of document.querySelectorAll("[data-refresh]")) {
      const fresh = doc.querySelector('[data-refresh="' + region.dataset.refresh + '"]');
      if (fresh) region.replaceWith(document.importNode(fresh, true));
    }
    const live = doc.body.dataset.live === "1";
    document.body.dataset.live = live ? "1" : "0";
    if (!live) for (const f of document.querySelectorAll("#cancel-form")) f.remove();
    return live;
  } catch (_) {
    return false;
  }
}

// What the event feed tells of (docs/arm-contract.md#event-feed).
const EVENT_TYPES = [
  "resourceCreated", "resourceStateChanged", "resourceOutputsChanged", "resourceDeleted",
  "operationCreated", "operationStatusChanged",
];

// Follows the page's event feed (Server-Sent Events from /ui/resource/events): each change it
// tells of reads the page again, whoever made it. Without a feed, or once it ends, the page
// polls while live instead.
function followEvents() {
  const el = document.getElementById("live-events");
  if (!el || !el.dataset.events || typeof EventSource === "undefined") return false;
  const source = new EventSource(el.dataset.events);
  // The feed starts where it connects: a change between the page's rendering (or a lost
  // connection) and now would be missed, so the page is read again whenever it connects.
  source.onopen = () => refresh();
  let pending = false;
  const changed = () => {
    if (pending) return;
    pending = true;
    setTimeout(() => { pending = false; refresh(); }, 200);
  };
  for (const type of EVENT_TYPES) source.addEventListener(type, changed);
  const stop = () => { source.close(); pollWhileLive(); };
  for (const type of ["end", "gone", "unavailable"]) source.addEventListener(type, stop);
  source.onerror = () => { if (source.readyState === EventSource.CLOSED) pollWhileLive(); };
  return true;
}

// While what the page shows is still changing, reads it again every two seconds.
function pollWhileLive() {
  if (document.body.dataset.live !== "1") return;
  setTimeout(async () => {
    if (await refresh()) pollWhileLive();
  }, 2000);
}

function confirmForms() {
  for (const form of document.querySelectorAll("form[data-confirm]")) {
    form.addEventListener("submit", (e) => {
      if (!window.confirm(form.dataset.confirm)) e.preventDefault();
    });
  }
}

document.addEventListener("DOMContentLoaded", () => {
  confirmForms();
  followOutput();
  if (!followEvents()) pollWhileLive();
});
