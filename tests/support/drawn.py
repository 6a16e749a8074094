"""What a page's SVG graph looks like in a real browser: boxes, arrowheads, crossings, and
screenshots read back pixel by pixel (Chromium decodes the PNG; no image library needed)."""
from __future__ import annotations

import base64
from itertools import combinations
from pathlib import Path

Box = tuple[float, float, float, float]  # x, y, width, height on the page


def boxes(page, selector: str) -> list[Box]:
    return [tuple(b) for b in page.locator(selector).evaluate_all(
        "es => es.map(e => { const r = e.getBoundingClientRect(); return [r.x, r.y, r.width, r.height]; })")]


def overlapping(found: list[Box]) -> list[tuple[Box, Box]]:
    return [(a, b) for a, b in combinations(found, 2)
            if a[0] < b[0] + b[2] and b[0] < a[0] + a[2] and a[1] < b[1] + b[3] and b[1] < a[1] + a[3]]


def without_arrowhead(page, paths: str) -> list[str]:
    """The ``d`` of each edge path in ``paths`` whose marker-end is not a marker of the page
    with a visible shape."""
    return page.locator(paths).evaluate_all("""ps => ps.filter(p => {
        const m = /^url\\(#(.+)\\)$/.exec(p.getAttribute('marker-end') || '');
        const marker = m && document.getElementById(m[1]);
        return !(marker && marker.tagName === 'marker' && marker.querySelector('path'));
    }).map(p => p.getAttribute('d'))""")


def drawn_crossings(page, paths: str) -> int:
    """Pairs of drawn edges that join the same two columns and swap their vertical order."""
    ends = page.locator(paths).evaluate_all("""ps => ps.map(p => {
        const a = p.getPointAtLength(0), b = p.getPointAtLength(p.getTotalLength());
        return [Math.round(a.x), a.y, Math.round(b.x), b.y]; })""")
    return sum(1 for e, f in combinations(ends, 2)
               if (e[0], e[2]) == (f[0], f[2]) and (e[1] - f[1]) * (e[3] - f[3]) < 0)


def labels_off_their_edges(page, edges: str) -> list[tuple[str, str, float]]:
    """(kind, label, vertical distance in px from the label's box to its own edge's curve
    where the curve passes below the label's centre) for each edge group in ``edges``."""
    return [tuple(row) for row in page.locator(edges).evaluate_all("""gs => gs.map(g => {
        const path = g.querySelector('path'), text = g.querySelector('text'), b = text.getBBox();
        const cx = b.x + b.width / 2;
        let lo = 0, hi = path.getTotalLength();  // the curve runs left to right: bisect on x
        for (let i = 0; i < 40; i++) {
            const m = (lo + hi) / 2;
            if (path.getPointAtLength(m).x < cx) lo = m; else hi = m;
        }
        const y = path.getPointAtLength(lo).y;
        return [g.dataset.kind, text.textContent, Math.max(b.y - y, y - (b.y + b.height), 0)];
    })""")]


def screenshot(page, path: Path) -> bytes:
    """A full-page PNG saved at ``path``; a blank or tiny one fails here."""
    page.screenshot(path=str(path), full_page=True)
    png = path.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000, f"{path}: {len(png)} bytes"
    return png


def colours_at(browser, png: bytes, points: list[tuple[float, float]]) -> list[tuple[int, int, int]]:
    """The RGB of ``png`` at each point (page coordinates of a full-page screenshot)."""
    p = browser.new_page()
    try:
        p.set_content("<canvas></canvas>")
        found = p.evaluate("""async ([src, points]) => {
            const img = new Image(); img.src = src; await img.decode();
            const c = document.querySelector('canvas'); c.width = img.width; c.height = img.height;
            const g = c.getContext('2d'); g.drawImage(img, 0, 0);
            const at = ([x, y]) => g.getImageData(Math.round(x), Math.round(y), 1, 1).data;
            return points.map((p) => Array.from(at(p).slice(0, 3)));
        }""", ["data:image/png;base64," + base64.b64encode(png).decode(), [list(p) for p in points]])
    finally:
        p.close()
    return [tuple(c) for c in found]
