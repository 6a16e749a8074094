"""The lineage web page: one self-contained HTML document for a lineage document
(``document.lineage_document``), usable offline and servable as is.

Invariants:
- Everything the page needs is inside it: the CSS and the script (``assets/``, written for
  this page, no library), the document as JSON. A Content-Security-Policy forbids every load
  from elsewhere, so opening the page contacts nothing.
- The document's strings (dataset ids, queries' expressions: someone else's text) never
  become markup: the JSON is embedded with ``<``, ``>`` and ``&`` escaped, so it cannot end its
  script element, and the script inserts every string with ``textContent``.
"""
from __future__ import annotations

import json
from html import escape
from importlib.resources import files
from typing import Any

CSP = ("default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; "
       "img-src data:; base-uri 'none'; form-action 'none'")

TEMPLATE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{csp}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Lineage of {title}</title>
<style>
{css}
</style>
</head>
<body>
<header><h1>Lineage of <span id="title"></span></h1><p id="generated"></p></header>
<main>
<section id="datasets-panel">
<h2>Datasets</h2>
<p class="hint">Which dataset is computed from which (arrows point to the reader).</p>
<svg id="dataset-graph" role="img" aria-label="dataset graph"></svg>
</section>
<section id="fields-panel" hidden>
<h2>Fields of <span id="fields-title"></span></h2>
<dl id="dataset-facts"></dl>
<ul id="fields"></ul>
</section>
<section id="field-panel" hidden>
<h2>Lineage of <span id="field-title"></span></h2>
<p class="hint">Backward to the columns it is computed from, forward to the columns computed from
it; each arrow names the operation. Dashed: used only to decide which rows there are.</p>
<p id="field-none" class="hint">No recorded lineage reaches this field.</p>
<svg id="field-graph" role="img" aria-label="field lineage graph"></svg>
<table id="field-edges">
<thead><tr><th>from</th><th>operation</th><th>to</th><th>query version since</th></tr></thead>
<tbody id="field-edges-body"></tbody>
</table>
</section>
</main>
<script type="application/json" id="lineage-data">{data}</script>
<script>
{js}
</script>
</body>
</html>
"""


def render_lineage_page(document: dict[str, Any]) -> str:
    """The page for ``document`` (see ``document.lineage_document``), as one HTML string."""
    assets = files("coordinator") / "assets"
    data = (json.dumps(document, ensure_ascii=False, separators=(",", ":"))
            .replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e"))
    return TEMPLATE.format(csp=CSP, title=escape(str(document.get("dataset", ""))), data=data,
                           css=(assets / "lineage.css").read_text(encoding="utf-8"),
                           js=(assets / "lineage.js").read_text(encoding="utf-8"))
