"""The web view at ``/``: one self-contained page (no external script, style or font).

It lists the datasets with their status from ``/api/datasets`` and draws the dependency
graph from ``/api/graph`` as an inline SVG, in the layered layout that answer carries
(``lineage/layout.py``: roots on the left, each derivative right of its deepest input, the
order within a layer chosen for few crossings), arrows pointing to the reader, each dataset a
link to its lineage page (``/lineage/DS``). It listens to ``/api/events`` and fetches
the list again on events (one fetch at a time), so a commit shows without reloading.

Each dataset's "changes" button (or ``/#diff=DS``) opens the diff view: two versions picked
from its chain (``/api/datasets/DS/chain``, its newest 1,000 blocks) or given as system times,
by default what its last change did (the API's defaults: the block before the last one that
added records, and the head); it shows ``/api/datasets/DS/diff``'s counts first, then its rows
(bounded as that answer is, the cut said), a changed row's changed columns marked with their
old and new values; a refusal shows the API's message. Every string from an answer is
inserted as text, never as markup.
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
  #diff fieldset { display: inline-block; border: 1px solid #ddd; margin: 0 .8em .8em 0; }
  #diff-counts { font-weight: 600; }
  tr.added td.change { color: #2a7d2a; } tr.removed td.change { color: #b00020; }
  tr.changed td.change { color: #b36b00; }
  td.changed { background: #fff4d6; }
  td.changed del { color: #b00020; } td.changed ins { color: #2a7d2a; text-decoration: none; }
</style>
</head>
<body>
<h1>coord serve <span id="live">connecting...</span></h1>
<table>
  <thead><tr><th>dataset</th><th>kind</th><th>records</th><th>blocks</th><th>watermark</th>
  <th>head</th><th>state</th><th>status</th><th></th></tr></thead>
  <tbody id="datasets"></tbody>
</table>
<section id="diff" hidden>
<h2>Changes in <span id="diff-dataset"></span></h2>
<form id="diff-form">
  <fieldset><legend>from</legend>
    <select id="diff-from"><option value="">the block before the last change</option></select>
    or at <input id="diff-from-time" placeholder="2024-01-01T00:00:00Z" size="22"></fieldset>
  <fieldset><legend>to</legend>
    <select id="diff-to"><option value="">the head</option></select>
    or at <input id="diff-to-time" placeholder="2024-01-01T00:00:00Z" size="22"></fieldset>
  <button id="diff-compare" type="submit">compare</button>
</form>
<p id="diff-error" class="error" hidden></p>
<p id="diff-counts"></p>
<p id="diff-versions"></p>
<table id="diff-rows"><thead></thead><tbody></tbody></table>
<p id="diff-cut"></p>
</section>
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
    const open = document.createElement("button");
    open.textContent = "changes";
    open.className = "open-diff";
    open.addEventListener("click", () => { location.hash = "diff=" + encodeURIComponent(d.id); });
    row.insertCell().appendChild(open);
  }
}

// ----- the diff view: two versions of one dataset, the rows added, removed and changed -----
let diffing = null;  // the dataset the view shows

function option(select, value, text) {
  const o = document.createElement("option");
  o.value = value;
  o.textContent = text;
  select.appendChild(o);
}

async function openDiff(id) {
  diffing = id;
  $("diff").hidden = false;
  $("diff-dataset").textContent = id;
  for (const side of ["from", "to"]) {
    const select = $("diff-" + side);
    select.replaceChildren(select.options[0]);
    $("diff-" + side + "-time").value = "";
  }
  const response = await fetch("/api/datasets/" + encodeURIComponent(id) + "/chain?limit=1000");
  if (response.ok && diffing === id) {
    const chain = await response.json();
    chain.blocks.forEach((b, i) => {
      const kind = b.block.event ? b.block.event.kind : (b.block.outputSlice ? "data" : "metadata");
      const text = "#" + (b.sequenceNumber ?? chain.total - 1 - i) + " " + b.hash.slice(0, 16) + " "
                   + b.block.systemTime + " " + kind;
      for (const side of ["from", "to"]) option($("diff-" + side), b.hash, text);
    });
  }
  await showDiff();
}

async function showDiff() {
  const id = diffing, params = new URLSearchParams();
  for (const side of ["from", "to"]) {
    const at = $("diff-" + side + "-time").value.trim() || $("diff-" + side).value;
    if (at) params.set(side, at);
  }
  const response = await fetch("/api/datasets/" + encodeURIComponent(id) + "/diff?" + params);
  const answer = await response.json();
  if (diffing !== id) return;
  const error = $("diff-error");
  error.hidden = response.ok;
  error.textContent = response.ok ? "" : (answer.error || "error " + response.status);
  for (const part of ["diff-counts", "diff-versions", "diff-cut"]) $(part).textContent = "";
  const [head, body] = [$("diff-rows").tHead, $("diff-rows").tBodies[0]];
  head.replaceChildren();
  body.replaceChildren();
  if (!response.ok) return;
  const total = answer.added + answer.removed + answer.changed;
  $("diff-counts").textContent = answer.added + " added, " + answer.removed + " removed, "
                                 + answer.changed + " changed";
  const version = (v) => v.block ? "block " + v.block.slice(0, 16) + " (" + v.systemTime + ")"
                                 : "before the first block";
  $("diff-versions").textContent = "from " + version(answer.from) + " to " + version(answer.to)
    + (answer.key ? ", rows matched by " + answer.key.join(", ") : ", whole rows compared");
  if (answer.truncated) {
    $("diff-cut").textContent = answer.rows.length + " of " + total + " rows shown ("
                                + answer.truncatedBy + ")";
  }
  if (!answer.rows.length) return;
  const columns = Object.keys(answer.rows[0].new || answer.rows[0].old);
  const titles = head.insertRow();
  for (const c of ["change", ...columns]) titles.appendChild(document.createElement("th")).textContent = c;
  const text = (v) => v === null || v === undefined ? "NULL"
                      : typeof v === "object" ? JSON.stringify(v) : String(v);
  for (const r of answer.rows) {
    const row = body.insertRow();
    row.className = r.change;
    cell(row, r.change, "change");
    for (const c of columns) {
      if (r.change === "changed" && r.changed.includes(c)) {
        const td = cell(row, "", "changed");
        td.dataset.column = c;
        td.appendChild(document.createElement("del")).textContent = text(r.old[c]);
        td.appendChild(document.createTextNode(" \u2192 "));
        td.appendChild(document.createElement("ins")).textContent = text(r.new[c]);
      } else {
        cell(row, text((r.new || r.old)[c]));
      }
    }
  }
}

function route() {
  const m = /^#diff=(.+)$/.exec(location.hash);
  if (m) openDiff(decodeURIComponent(m[1]));
}
$("diff-form").addEventListener("submit", (e) => { e.preventDefault(); showDiff(); });
window.addEventListener("hashchange", route);

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
route();
</script>
</body>
</html>
"""
