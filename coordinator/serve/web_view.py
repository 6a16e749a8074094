"""The web view at ``/``: one self-contained page (no external script, style or font).

It lists the datasets with their status from ``/api/datasets`` and draws the dependency
graph from ``/api/graph`` as an inline SVG, in the layered layout that answer carries
(``lineage/layout.py``: roots on the left, each derivative right of its deepest input, the
order within a layer chosen for few crossings), arrows pointing to the reader, each dataset a
link to its lineage page (``/lineage/DS``). It listens to ``/api/events`` and fetches
the list again on events (one fetch at a time), so a commit shows without reloading.
"""
from __future__ import annotations

PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>coord serve</title>
<style>
  body { font: 14px system-ui, sans-serif; margin: 1.5em; color: #222; }
  h1 { font-size: 1.3em; }
  table { border-collapse: collapse; }
  th, td { text-align: left; padding: .25em .8em; border-bottom: 1px solid #ddd; }
  td.num { text-align: right; font-variant-numeric: tabular-nums; }
  .idle { color: #2a7d2a; } .queued, .running { color: #b36b00; } .failed { color: #b00020; }
  .error { color: #b00020; font-size: .9em; }
  #live { font-size: .9em; color: #666; }
  svg text { font: 12px system-ui, sans-serif; }
  svg rect.root { fill: #e8f0fe; stroke: #4a6fb5; } svg rect.derivative { fill: #eef7ee; stroke: #4a8a4a; }
  svg path.edge { fill: none; stroke: #888; stroke-width: 1.5; }
  svg a:hover rect, svg a:focus rect { stroke-width: 2.5; }
</style>
</head>
<body>
<h1>coord serve <span id="live">connecting...</span></h1>
<table>
  <thead><tr><th>dataset</th><th>kind</th><th>records</th><th>blocks</th><th>watermark</th>
  <th>head</th><th>state</th><th>status</th></tr></thead>
  <tbody id="datasets"></tbody>
</table>
<h2>Lineage</h2>
<svg id="graph" xmlns="http://www.w3.org/2000/svg" width="10" height="10"></svg>
<script>
"use strict";
const $ = (id) => document.getElementById(id);

function cell(row, text, cls) {
  const td = row.insertCell();
  td.textContent = text;
  if (cls) td.className = cls;
  return td;
}

let refreshing = null, again = false;
function refresh() {  // events in a burst make one fetch at a time, and one more after it
  if (refreshing) { again = true; return; }
  refreshing = load().finally(() => { refreshing = null; if (again) { again = false; refresh(); } });
}

async function load() {
  const response = await fetch("/api/datasets");
  if (!response.ok) { $("live").textContent = "error " + response.status; return; }
  const body = $("datasets");
  body.replaceChildren();
  for (const d of await response.json()) {
    const row = body.insertRow();
    row.dataset.id = d.id;
    cell(row, d.id);
    cell(row, d.kind);
    cell(row, d.records.toLocaleString("en"), "num records");
    cell(row, String(d.blocks), "num");
    cell(row, d.watermark || "-");
    cell(row, d.head.slice(0, 12));
    cell(row, d.state, d.state);
    const status = cell(row, d.outOfDate ? d.reasons.join("; ") : "up to date");
    if (d.lastError) {
      const e = document.createElement("div");
      e.className = "error";
      e.textContent = "error (attempt " + d.lastError.attempts + "): " + d.lastError.message;
      status.appendChild(e);
    }
  }
}

async function drawGraph() {
  const response = await fetch("/api/graph");
  if (!response.ok) return;
  const g = await response.json();
  const W = 220, H = 34, GX = 70, GY = 16, pos = {};
  for (const n of g.nodes) pos[n.id] = [n.layer * (W + GX) + 5, n.order * (H + GY) + 5];
  const svg = $("graph"), ns = "http://www.w3.org/2000/svg";
  svg.replaceChildren();
  const el = (parent, name, attrs, text) => {
    const e = document.createElementNS(ns, name);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (text) e.textContent = text;
    parent.appendChild(e);
    return e;
  };
  const marker = el(el(svg, "defs", {}), "marker", {id: "arrow", viewBox: "0 0 10 10", refX: 10, refY: 5,
                                                      markerWidth: 7, markerHeight: 7, orient: "auto"});
  el(marker, "path", {d: "M 0 0 L 10 5 L 0 10 z", fill: "#888"});
  for (const [a, b] of g.edges) {
    if (!pos[a] || !pos[b]) continue;
    const x1 = pos[a][0] + W, y1 = pos[a][1] + H / 2, x2 = pos[b][0], y2 = pos[b][1] + H / 2;
    const mid = (x1 + x2) / 2;
    el(svg, "path", {d: `M${x1},${y1} C${mid},${y1} ${mid},${y2} ${x2},${y2}`, class: "edge",
                     "marker-end": "url(#arrow)", "data-source": a, "data-target": b});
  }
  for (const n of g.nodes) {
    const [x, y] = pos[n.id];
    const link = el(svg, "a", {href: "/lineage/" + encodeURIComponent(n.id), "data-dataset": n.id});
    el(link, "title", {}, "lineage of " + n.id);
    el(link, "rect", {x, y, width: W, height: H, rx: 5, class: n.kind});
    el(link, "text", {x: x + 8, y: y + 21}, n.id);
  }
  const layers = Math.max(0, ...g.nodes.map((n) => n.layer + 1));
  const rows = Math.max(0, ...g.nodes.map((n) => n.order + 1));
  svg.setAttribute("width", layers * (W + GX) + 10);
  svg.setAttribute("height", rows * (H + GY) + 10);
}

const events = new EventSource("/api/events");
events.onopen = () => { $("live").textContent = "live"; refresh(); };
events.onerror = () => { $("live").textContent = "reconnecting..."; };
events.addEventListener("commit", refresh);
events.addEventListener("state", refresh);
refresh();
drawGraph();
</script>
</body>
</html>
"""
