"""The diff view of ``coord serve``'s page, in a real headless Chromium: a dataset's "changes"
opens what its last change did, two blocks picked from its chain or a time show their
difference, counts first, then the rows, a changed row's changed columns marked with old and
new values; a refused request shows the API's message.

The snapshot root of the diff tests (tests/query/test_diff.py), pulled after each of its four
CSV snapshots; every answer is checked against DuckDB joining two of those files by key."""
from __future__ import annotations

import duckdb
import pytest

from ..query.test_diff import AIRPORTS, csv_file, data_blocks, expected
from .conftest import Served


@pytest.fixture(scope="module")
def served(snapshots_served) -> Served:
    return snapshots_served


@pytest.fixture
def page(served, browser):
    page = browser.new_page()
    page.goto(served.url + "/")
    yield page
    page.close()


def counts(rows: list[tuple]) -> str:
    return ", ".join(f"{sum(r[0] == c for r in rows)} {c}" for c in ("added", "removed", "changed"))


def shown(page) -> list[tuple]:
    """Each row of the view as ``test_diff.expected`` gives it: change, key, changed columns,
    old (name, elev), new (name, elev); a marked cell's old and new values are its own."""
    rows = page.locator("#diff-rows tbody tr").evaluate_all("""trs => trs.map(tr => {
        const names = [...tr.closest('table').tHead.rows[0].cells].map(c => c.textContent);
        const cells = {};
        [...tr.cells].forEach((td, i) => {
            const del = td.querySelector('del'), ins = td.querySelector('ins');
            cells[names[i]] = del ? [del.textContent, ins.textContent, td.dataset.column] : td.textContent;
        });
        return cells; })""")
    out = []
    for r in rows:
        marked = [c for c in ("name", "elev") if isinstance(r[c], list)]
        old = tuple(r[c][0] if isinstance(r[c], list) else r[c] for c in ("name", "elev"))
        new = tuple(r[c][1] if isinstance(r[c], list) else r[c] for c in ("name", "elev"))
        change = r["change"]
        out.append((change, r["iata"], marked if change == "changed" else None,
                    None if change == "added" else (old[0], int(old[1])),
                    None if change == "removed" else (new[0], int(new[1]))))
    return out


def wait_for_rows(page, n: int) -> None:
    page.wait_for_function(f"() => document.querySelectorAll('#diff-rows tbody tr').length === {n}"
                           " && document.getElementById('diff-counts').textContent !== ''")


def test_changes_of_a_dataset_shows_its_last_change_counts_first_then_rows(served, page):
    want = expected(served.home, 2, 3)  # the last snapshot: an insertion and a rename
    page.locator(f'#datasets tr[data-id="{AIRPORTS}"] button.open-diff').click()
    wait_for_rows(page, len(want))
    assert page.locator("#diff-dataset").inner_text() == AIRPORTS
    assert page.locator("#diff-counts").inner_text() == counts(want)
    assert shown(page) == want
    # counts before rows on the page
    assert page.locator("#diff-counts").bounding_box()["y"] < page.locator("#diff-rows").bounding_box()["y"]


def test_two_blocks_picked_from_the_chain_show_their_difference(served, page):
    blocks = data_blocks(served.home, AIRPORTS)
    want = expected(served.home, 0, 2)  # a rename, a new elevation, a deletion
    page.goto(served.url + f"/#diff={AIRPORTS}")
    page.wait_for_function("() => document.getElementById('diff-from').options.length > 1")
    page.select_option("#diff-from", blocks[0])
    page.select_option("#diff-to", blocks[2])
    page.click("#diff-compare")
    page.wait_for_function(f"() => document.getElementById('diff-versions').textContent"
                           f".includes('to block {blocks[2][:16]}')")
    wait_for_rows(page, len(want))
    assert page.locator("#diff-counts").inner_text() == counts(want)
    assert shown(page) == want
    assert page.locator("td.changed").evaluate_all("tds => tds.map(td => td.dataset.column)") == \
        [c for r in want if r[2] for c in r[2]]


def test_from_a_time_before_the_first_block_every_row_is_added(served, page):
    blocks = data_blocks(served.home, AIRPORTS)
    page.goto(served.url + f"/#diff={AIRPORTS}")
    page.wait_for_function("() => document.getElementById('diff-from').options.length > 1")
    page.fill("#diff-from-time", "2000-01-01T00:00:00Z")
    page.select_option("#diff-to", blocks[0])
    page.click("#diff-compare")
    page.wait_for_function("() => document.getElementById('diff-versions').textContent"
                           ".startsWith('from before the first block')")
    first = duckdb.sql("SELECT 'added', iata, NULL, NULL, (name, elev) "
                       f"FROM read_csv('{csv_file(served.home, 0)}') ORDER BY iata").fetchall()
    wait_for_rows(page, len(first))
    assert page.locator("#diff-counts").inner_text() == f"{len(first)} added, 0 removed, 0 changed"
    assert shown(page) == first


def test_a_refused_version_shows_the_apis_message(served, page):
    page.goto(served.url + f"/#diff={AIRPORTS}")
    wait_for_rows(page, len(expected(served.home, 2, 3)))
    page.fill("#diff-from-time", "last tuesday")
    page.click("#diff-compare")
    page.wait_for_function("() => !document.getElementById('diff-error').hidden")
    assert page.locator("#diff-error").inner_text() == \
        "from last tuesday: neither a block (hex digits, as coord log shows them) nor an RFC 3339 time " \
        "(e.g. 2024-01-01T00:00:00Z)"
    assert page.locator("#diff-rows tbody tr").count() == 0
    assert page.locator("#diff-counts").inner_text() == ""
