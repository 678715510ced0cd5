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
  pollWhileLive();
});
