// The lineage page (coordinator/lineage/page.py): draws the document embedded in the page
// (coordinator/lineage/document.py) as inline SVG. No library, no network; every string from the
// document is inserted as text, never as markup.
(function () {
  "use strict";
  var SVG = "http://www.w3.org/2000/svg";
  var doc = JSON.parse(document.getElementById("lineage-data").textContent);
  var datasets = new Map(doc.datasets.map(function (d) { return [d.id, d]; }));
  var NODE_H = 40, ROW_GAP = 26, COL_GAP = 120, PAD = 16, CHAR_W = 7.2, LABEL_MAX = 48;

  function svgEl(tag, attrs, text) {
    var e = document.createElementNS(SVG, tag);
    Object.keys(attrs || {}).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    if (text !== undefined && text !== null) e.textContent = text;
    return e;
  }
  function htmlEl(tag, attrs, text) {
    var e = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    if (text !== undefined && text !== null) e.textContent = text;
    return e;
  }
  function clip(text, n) { return text.length > n ? text.slice(0, n - 1) + "\u2026" : text; }

  // Layered layout of a DAG: a node's column is the longest path to it from a node without
  // inputs; within a column nodes follow the mean row of their inputs (fewer crossings).
  function layout(keys, links) {
    var column = new Map(keys.map(function (k) { return [k, 0]; }));
    for (var round = 0; round < keys.length; round++) {  // bounded: a cycle cannot loop forever
      var changed = false;
      links.forEach(function (l) {
        if (column.has(l.from) && column.has(l.to) && column.get(l.to) < column.get(l.from) + 1) {
          column.set(l.to, column.get(l.from) + 1); changed = true;
        }
      });
      if (!changed) break;
    }
    var columns = [];
    keys.forEach(function (k) { var c = column.get(k); (columns[c] = columns[c] || []).push(k); });
    var row = new Map();
    function meanRow(k) {
      var rows = links.filter(function (l) { return l.to === k && row.has(l.from); })
                      .map(function (l) { return row.get(l.from); });
      return rows.length ? rows.reduce(function (a, b) { return a + b; }, 0) / rows.length : 0;
    }
    columns.forEach(function (members) {
      var weight = new Map(members.map(function (k) { return [k, meanRow(k)]; }));
      members.sort(function (a, b) { return weight.get(a) - weight.get(b) || (a < b ? -1 : 1); });
      members.forEach(function (k, r) { row.set(k, r); });
    });
    return { column: column, row: row, columns: columns };
  }

  // nodes: [{key, label, sub, classes, data}]; links: [{from, to, label, title, classes, data}]
  function drawGraph(svg, nodes, links, onClick) {
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    var markerId = svg.id + "-arrow";
    var defs = svgEl("defs");
    var marker = svgEl("marker", { id: markerId, viewBox: "0 0 10 10", refX: 10, refY: 5,
                                   markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" });
    marker.appendChild(svgEl("path", { d: "M 0 0 L 10 5 L 0 10 z", fill: "#9aa3b5" }));
    defs.appendChild(marker);
    svg.appendChild(defs);
    var lay = layout(nodes.map(function (n) { return n.key; }), links);
    var width = new Map(nodes.map(function (n) {
      var chars = Math.max(n.label.length, (n.sub || "").length * 0.9);
      return [n.key, Math.max(110, Math.min(chars, LABEL_MAX) * CHAR_W + 24)];
    }));
    var colWidth = lay.columns.map(function (members) {
      return Math.max.apply(null, members.map(function (k) { return width.get(k); }));
    });
    // the gap after a column fits the widest label of the arrows leaving it
    var gap = colWidth.map(function () { return COL_GAP; });
    links.forEach(function (l) {
      var c = lay.column.get(l.from);
      if (l.label && c !== undefined) gap[c] = Math.max(gap[c], Math.min(l.label.length, LABEL_MAX) * 6.4 + 40);
    });
    var colX = [], x = PAD;
    colWidth.forEach(function (w, c) { colX[c] = x; x += w + gap[c]; });
    var pos = new Map();
    nodes.forEach(function (n) {
      var c = lay.column.get(n.key);
      pos.set(n.key, { x: colX[c], y: PAD + lay.row.get(n.key) * (NODE_H + ROW_GAP), w: colWidth[c] });
    });
    var maxRows = Math.max.apply(null, lay.columns.map(function (m) { return m.length; }).concat([1]));
    svg.setAttribute("width", Math.max(x - gap[gap.length - 1] + PAD, 200));
    svg.setAttribute("height", PAD * 2 + maxRows * (NODE_H + ROW_GAP) - ROW_GAP);

    links.forEach(function (l) {
      var a = pos.get(l.from), b = pos.get(l.to);
      if (!a || !b) return;
      var x1 = a.x + a.w, y1 = a.y + NODE_H / 2, x2 = b.x, y2 = b.y + NODE_H / 2, mid = (x1 + x2) / 2;
      var g = svgEl("g", Object.assign({ "class": "link " + (l.classes || "") }, l.data || {}));
      g.appendChild(svgEl("path", { d: "M" + x1 + "," + y1 + " C" + mid + "," + y1 + " " + mid + "," + y2 +
                                       " " + x2 + "," + y2, "marker-end": "url(#" + markerId + ")" }));
      if (l.label) {
        g.appendChild(svgEl("text", { x: mid, y: (y1 + y2) / 2 - 4, "text-anchor": "middle",
                                      "class": "link-label" }, clip(l.label, LABEL_MAX)));
      }
      if (l.title) g.appendChild(svgEl("title", {}, l.title));
      svg.appendChild(g);
    });
    nodes.forEach(function (n) {
      var p = pos.get(n.key);
      var g = svgEl("g", Object.assign({ "class": "node " + (n.classes || ""),
                                         transform: "translate(" + p.x + "," + p.y + ")" }, n.data || {}));
      g.appendChild(svgEl("rect", { width: p.w, height: NODE_H }));
      g.appendChild(svgEl("text", { x: 10, y: n.sub ? 16 : 24, "class": "label" }, clip(n.label, LABEL_MAX)));
      if (n.sub) g.appendChild(svgEl("text", { x: 10, y: 32, "class": "sub" }, clip(n.sub, LABEL_MAX)));
      g.appendChild(svgEl("title", {}, n.title || n.label));
      if (onClick) {
        g.classList.add("clickable");
        g.setAttribute("tabindex", "0");
        g.setAttribute("role", "button");
        g.addEventListener("click", function () { onClick(n); });
        g.addEventListener("keydown", function (e) { if (e.key === "Enter" || e.key === " ") onClick(n); });
      }
      svg.appendChild(g);
    });
  }

  // Level 1: the datasets and which reads which.
  function drawDatasets(selected) {
    var nodes = doc.datasets.map(function (d) {
      var facts = d.kind === "missing" ? "not in this workspace" : d.kind + ", " + d.records.toLocaleString("en") + " records";
      return { key: d.id, label: d.id, sub: facts, title: d.id + " (" + facts + ")",
               classes: d.kind + (d.id === selected ? " selected" : "") + (d.id === doc.dataset ? " focus" : ""),
               data: { "data-dataset": d.id } };
    });
    var links = doc.edges.map(function (e) {
      return { from: e[0], to: e[1], data: { "data-source": e[0], "data-target": e[1] } };
    });
    drawGraph(document.getElementById("dataset-graph"), nodes, links, function (n) { showDataset(n.key); });
  }

  // Level 2: one dataset's fields.
  function showDataset(id) {
    var d = datasets.get(id);
    drawDatasets(id);
    document.getElementById("fields-panel").hidden = false;
    document.getElementById("field-panel").hidden = true;
    document.getElementById("fields-title").textContent = id;
    var facts = document.getElementById("dataset-facts");
    facts.textContent = "";
    var from = { data: "its newest data slice", readStep: "its read step (no data yet)",
                 fieldLineage: "its recorded field lineage (no data yet)" };
    [["kind", d.kind], ["records", d.kind === "missing" ? null : d.records.toLocaleString("en")],
     ["watermark", d.watermark], [d.kind === "root" ? "source" : "engine", d.origin],
     ["inputs", d.inputs.join(", ")], ["fields from", from[d.fieldsFrom]]].forEach(function (f) {
      if (!f[1]) return;
      facts.appendChild(htmlEl("dt", {}, f[0]));
      facts.appendChild(htmlEl("dd", {}, f[1]));
    });
    var list = document.getElementById("fields");
    list.textContent = "";
    if (!d.fields.length) list.appendChild(htmlEl("li", { "class": "hint" }, "No fields known."));
    d.fields.forEach(function (f) {
      var li = htmlEl("li");
      var b = htmlEl("button", { type: "button", "class": "field", "data-field": f.name });
      b.appendChild(htmlEl("span", { "class": "name" }, f.name));
      var links = f.backward.length + f.forward.length;
      b.appendChild(htmlEl("span", { "class": "type" }, (f.type || "") + (links ? "  \u00b7 " + links + " links" : "")));
      b.addEventListener("click", function () { showField(id, f); });
      li.appendChild(b);
      list.appendChild(li);
    });
  }

  // Level 3: one field's lineage, backward and forward, with the operation on each edge.
  function fieldKey(ref) { return ref.dataset + "\u0000" + (ref.field === null ? "*" : ref.field); }
  function fieldName(ref) { return ref.dataset + "." + (ref.field === null ? "*" : ref.field); }

  function showField(datasetId, field) {
    Array.prototype.forEach.call(document.querySelectorAll("button.field"), function (b) {
      b.classList.toggle("selected", b.getAttribute("data-field") === field.name);
    });
    var panel = document.getElementById("field-panel");
    panel.hidden = false;
    var self = { dataset: datasetId, field: field.name };
    document.getElementById("field-title").textContent = fieldName(self);
    var used = field.backward.concat(field.forward).filter(function (i, k, all) { return all.indexOf(i) === k; })
                    .map(function (i) { return doc.fieldEdges[i]; });
    var nodes = new Map([[fieldKey(self), self]]);
    used.forEach(function (e) { nodes.set(fieldKey(e.source), e.source); nodes.set(fieldKey(e.target), e.target); });
    var selfKey = fieldKey(self);
    var graphNodes = Array.from(nodes.entries()).map(function (entry) {
      var ref = entry[1];
      return { key: entry[0], label: ref.field === null ? "every row" : ref.field, sub: ref.dataset,
               title: fieldName(ref), classes: (ref.field === null ? "rows" : "column") + (entry[0] === selfKey ? " selected" : ""),
               data: { "data-field": fieldName(ref) } };
    });
    var links = used.map(function (e) {
      var op = e.kind + (e.expression ? ": " + e.expression : "");
      return { from: fieldKey(e.source), to: fieldKey(e.target), label: op,
               title: fieldName(e.source) + " \u2192 " + fieldName(e.target) + " (" + op + ")",
               classes: "field-edge" + (e.target.field === null ? " condition" : ""),
               data: { "data-source": fieldName(e.source), "data-target": fieldName(e.target),
                       "data-kind": e.kind, "data-expression": e.expression || "" } };
    });
    drawGraph(document.getElementById("field-graph"), graphNodes, links, null);
    document.getElementById("field-none").hidden = used.length > 0;
    var body = document.getElementById("field-edges-body");
    body.textContent = "";
    used.forEach(function (e) {
      var tr = htmlEl("tr");
      tr.appendChild(htmlEl("td", {}, fieldName(e.source)));
      var op = htmlEl("td");
      op.appendChild(htmlEl("strong", {}, e.kind));
      if (e.expression) { op.appendChild(document.createTextNode(" ")); op.appendChild(htmlEl("code", {}, e.expression)); }
      tr.appendChild(op);
      tr.appendChild(htmlEl("td", {}, e.target.field === null ? e.target.dataset + " (every row)" : fieldName(e.target)));
      tr.appendChild(htmlEl("td", {}, e.version));
      body.appendChild(tr);
    });
    document.getElementById("field-edges").hidden = used.length === 0;
  }

  document.getElementById("title").textContent = doc.dataset;
  document.getElementById("generated").textContent = "From the metadata chains, " + doc.generated +
    ". Click a dataset for its fields, a field for its lineage.";
  drawDatasets(null);
  if (datasets.has(doc.dataset) && datasets.get(doc.dataset).kind !== "missing") showDataset(doc.dataset);
})();
