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

  // Does box a overlap box b (with a margin)?
  function overlaps(a, b) {
    return a.x < b.x + b.width + 2 && b.x < a.x + a.width + 2 && a.y < b.y + b.height + 1 && b.y < a.y + a.height + 1;
  }

  // nodes: [{key, label, sub, classes, data, href}]; links: [{from, to, label, title, classes, data}];
  // place: key -> [layer, order], the layout the document carries (coordinator/lineage/layout.py).
  function drawGraph(svg, nodes, links, place) {
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    var markerId = svg.id + "-arrow";
    var defs = svgEl("defs");
    var marker = svgEl("marker", { id: markerId, viewBox: "0 0 10 10", refX: 10, refY: 5,
                                   markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" });
    marker.appendChild(svgEl("path", { d: "M 0 0 L 10 5 L 0 10 z", fill: "#9aa3b5" }));
    defs.appendChild(marker);
    svg.appendChild(defs);
    var columns = [];
    nodes.forEach(function (n) { var p = place.get(n.key); (columns[p[0]] = columns[p[0]] || []).push(n.key); });
    var lay = { column: new Map(nodes.map(function (n) { return [n.key, place.get(n.key)[0]]; })),
                row: new Map(nodes.map(function (n) { return [n.key, place.get(n.key)[1]]; })),
                columns: columns.map(function (c) { return c || []; }) };
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

    var boxes = nodes.map(function (n) { var p = pos.get(n.key); return { x: p.x, y: p.y, width: p.w, height: NODE_H }; });
    var labels = [];
    links.forEach(function (l) {
      var a = pos.get(l.from), b = pos.get(l.to);
      if (!a || !b) return;
      var x1 = a.x + a.w, y1 = a.y + NODE_H / 2, x2 = b.x, y2 = b.y + NODE_H / 2, mid = (x1 + x2) / 2;
      var g = svgEl("g", Object.assign({ "class": "link " + (l.classes || "") }, l.data || {}));
      g.appendChild(svgEl("path", { d: "M" + x1 + "," + y1 + " C" + mid + "," + y1 + " " + mid + "," + y2 +
                                       " " + x2 + "," + y2, "marker-end": "url(#" + markerId + ")" }));
      if (l.label) labels.push({ g: g, text: clip(l.label, LABEL_MAX) });
      if (l.title) g.appendChild(svgEl("title", {}, l.title));
      svg.appendChild(g);
    });
    // Each label sits on its own edge: at the middle of the curve, else slid along it to the
    // first place where it overlaps no node and no label placed before it. Where none is
    // free (many edges into one node), it is moved off the curve a line at a time; its edge's
    // tooltip and the table below name the operation too.
    var bottom = Number(svg.getAttribute("height"));
    labels.forEach(function (lab) {
      var path = lab.g.querySelector("path"), length = path.getTotalLength();
      var text = svgEl("text", { "text-anchor": "middle", "class": "link-label" }, lab.text);
      lab.g.appendChild(text);
      function at(t, dy) {
        var p = path.getPointAtLength(length * t);
        text.setAttribute("x", p.x);
        text.setAttribute("y", p.y - 4 + dy);
        return text.getBBox();
      }
      function free(box) { return !boxes.some(function (o) { return overlaps(box, o); }); }
      var box = null;
      [0.5, 0.4, 0.6, 0.3, 0.7, 0.2, 0.8].some(function (t) { box = at(t, 0); return free(box); });
      for (var i = 1; i < 60 && !free(box); i++) {
        var dy = (i % 2 ? 1 : -1) * Math.ceil(i / 2) * (box.height + 2);
        if (at(0.5, dy).y < 0) continue;  // above the top it would be cut off
        box = at(0.5, dy);
      }
      boxes.push(box);
      bottom = Math.max(bottom, box.y + box.height + PAD);
    });
    svg.setAttribute("height", bottom);
    nodes.forEach(function (n) {
      var p = pos.get(n.key);
      // a node with a page of its own is a link to it
      var g = svgEl(n.href ? "a" : "g", Object.assign({ "class": "node " + (n.classes || ""),
                                         transform: "translate(" + p.x + "," + p.y + ")" }, n.data || {}));
      if (n.href) g.setAttribute("href", n.href);
      g.appendChild(svgEl("rect", { width: p.w, height: NODE_H }));
      g.appendChild(svgEl("text", { x: 10, y: n.sub ? 16 : 24, "class": "label" }, clip(n.label, LABEL_MAX)));
      if (n.sub) g.appendChild(svgEl("text", { x: 10, y: 32, "class": "sub" }, clip(n.sub, LABEL_MAX)));
      g.appendChild(svgEl("title", {}, n.title || n.label));
      svg.appendChild(g);
    });
  }

  // Level 1: the datasets and which reads which.
  function drawDatasets(selected) {
    var nodes = doc.datasets.map(function (d) {
      var facts = d.kind === "missing" ? "not in this workspace" : d.kind + ", " + d.records.toLocaleString("en") + " records";
      return { key: d.id, label: d.id, sub: facts, title: d.id + " (" + facts + ")",
               classes: d.kind + (d.id === selected ? " selected" : "") + (d.id === doc.dataset ? " focus" : ""),
               data: { "data-dataset": d.id }, href: "#dataset=" + encodeURIComponent(d.id) };
    });
    var place = new Map(doc.datasets.map(function (d) { return [d.id, d.place]; }));
    var links = doc.edges.map(function (e) {
      return { from: e[0], to: e[1], data: { "data-source": e[0], "data-target": e[1] } };
    });
    drawGraph(document.getElementById("dataset-graph"), nodes, links, place);
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
    var place = new Map(field.places.map(function (p) {
      return [fieldKey({ dataset: p[0], field: p[1] }), [p[2], p[3]]];
    }));
    drawGraph(document.getElementById("field-graph"), graphNodes, links, place);
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
  // Each dataset's node links to #dataset=ID, its section of this page.
  function showLinked() {
    var m = /^#dataset=(.*)$/.exec(location.hash), id = m ? decodeURIComponent(m[1]) : doc.dataset;
    if (datasets.has(id) && (m || datasets.get(id).kind !== "missing")) showDataset(id);
    else drawDatasets(null);
  }
  window.addEventListener("hashchange", showLinked);
  showLinked();
})();
