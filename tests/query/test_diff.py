"""``coord diff``: the rows added, removed and changed between two versions of a dataset.

A snapshot root over CSV snapshots (a rename and a new elevation, then a deletion, then an
insertion and a rename), in a 0.18 and a 0.39 workspace: each diff is checked against DuckDB
joining the two CSV files by key. The same files as an append root are compared whole (a
multiset of rows), and a 0.39 derivative that passes its input's retractions on (the DuckDB
test engine) against DuckDB's filter over the two snapshots."""
from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import duckdb
import pytest

from ..support.cli import coord, coord_here
from ..support.manifests import csv_root_manifest
from ..support.snapshots import manifest
from ..transform import test_retractions_derivative as cities

AIRPORTS, SEEN = "ref.airports", "ref.seen"
DAYS = ["2020-01-01", "2020-02-01", "2020-03-01", "2020-04-01"]
SNAPSHOTS = [
    [("AAA", "Alpha", 10), ("BBB", "Bravo", 20), ("CCC", "Charlie", 30), ("DDD", "Delta", 40)],
    [("AAA", "Alpha", 10), ("BBB", "Bravo Intl", 20), ("CCC", "Charlie", 31), ("DDD", "Delta", 40)],
    [("AAA", "Alpha", 10), ("BBB", "Bravo Intl", 20), ("DDD", "Delta", 40)],
    [("AAA", "Alpha", 10), ("BBB", "Bravo Intl", 20), ("DDD", "Delta Field", 40), ("EEE", "Echo", 50)],
]


def csv_file(home: Path, k: int) -> Path:
    return home / "snaps" / f"airports-{DAYS[k]}.csv"


def data_blocks(home: Path, dataset: str) -> list[str]:
    """The blocks that added records, oldest first, named as ``coord log`` names them."""
    blocks = json.loads(coord_here("log", dataset, "-o", "json", cwd=home).stdout)[::-1]
    return [b.get("blockHash") or b["hash"] for b in blocks
            if b.get("outputSlice") or (b.get("block", {}).get("event", {}).get("newData"))]


@pytest.fixture(scope="module", params=["0.18", "0.39"])
def home(request, tmp_path_factory) -> Path:
    """Both roots pulled after each snapshot (one data block each per pull)."""
    home = tmp_path_factory.mktemp(f"diff-{request.param}")
    coord_here("init", "--odf", request.param, cwd=home)
    pull_snapshots(home)
    return home


def pull_snapshots(home: Path) -> None:
    """``AIRPORTS`` and ``SEEN`` added to the workspace at ``home`` and pulled after each
    snapshot."""
    (home / "snaps").mkdir()
    for dataset, merge in ((AIRPORTS, "{kind: snapshot, primaryKey: [iata]}"), (SEEN, "{kind: append}")):
        text = manifest(dataset, "snaps/*.csv", merge, schema='["iata STRING", "name STRING", "elev BIGINT"]')
        (home / f"{dataset}.yaml").write_text(text.replace("kind: parquet", "kind: csv, header: true"))
    coord_here("add", f"{AIRPORTS}.yaml", f"{SEEN}.yaml", cwd=home)
    for k, rows in enumerate(SNAPSHOTS):
        csv_file(home, k).write_text("iata,name,elev\n" + "".join(f"{i},{n},{e}\n" for i, n, e in rows))
        coord_here("pull", AIRPORTS, SEEN, cwd=home)
    assert len(data_blocks(home, AIRPORTS)) == len(SNAPSHOTS)


def diff_json(home: Path, *args: str) -> dict:
    return json.loads(coord_here("diff", *args, "-o", "json", cwd=home).stdout)


def shown(answer: dict) -> list[tuple]:
    """Each row as (change, key, changed columns, old name and elev, new name and elev)."""
    def values(row: dict | None) -> tuple | None:
        return None if row is None else (row["name"], row["elev"])

    return [(r["change"], r["key"]["iata"], r["changed"], values(r["old"]), values(r["new"]))
            for r in answer["rows"]]


def expected(home: Path, a: int, b: int) -> list[tuple]:
    """DuckDB's answer from the two CSV snapshots: keys only in one, keys whose name or
    elevation differ; in the order added, removed, changed, then by key."""
    rows = duckdb.sql(f"""
        SELECT CASE WHEN a.iata IS NULL THEN 'added' WHEN b.iata IS NULL THEN 'removed'
                    ELSE 'changed' END AS c,
               coalesce(b.iata, a.iata) AS k,
               CASE WHEN a.iata IS NOT NULL AND b.iata IS NOT NULL THEN
                    list_filter([CASE WHEN a.name <> b.name THEN 'name' END,
                                 CASE WHEN a.elev <> b.elev THEN 'elev' END],
                                lambda x: x IS NOT NULL) END,
               CASE WHEN a.iata IS NOT NULL THEN (a.name, a.elev) END,
               CASE WHEN b.iata IS NOT NULL THEN (b.name, b.elev) END
        FROM read_csv('{csv_file(home, a)}') a FULL JOIN read_csv('{csv_file(home, b)}') b USING (iata)
        WHERE a.iata IS NULL OR b.iata IS NULL OR a.name <> b.name OR a.elev <> b.elev
        ORDER BY list_position(['added', 'removed', 'changed'], c), k""").fetchall()
    return [(c, k, changed, o, n) for c, k, changed, o, n in rows]


@pytest.mark.parametrize("pull", [1, 2, 3])
def test_the_diff_of_two_consecutive_pulls_is_the_difference_of_their_snapshots(home, pull):
    blocks = data_blocks(home, AIRPORTS)
    answer = diff_json(home, AIRPORTS, "--from", blocks[pull - 1][:16], "--to", blocks[pull][:16])
    assert shown(answer) == expected(home, pull - 1, pull)
    assert answer["key"] == ["iata"]


def test_the_diff_of_the_first_and_last_pulls_is_the_difference_of_their_snapshots(home):
    blocks = data_blocks(home, AIRPORTS)
    answer = diff_json(home, AIRPORTS, "--from", blocks[0], "--to", blocks[-1])
    assert shown(answer) == expected(home, 0, 3)
    assert {c: answer[c] for c in ("added", "removed", "changed")} == {"added": 1, "removed": 1, "changed": 2}


def test_without_versions_it_is_what_the_last_change_did(home):
    blocks = data_blocks(home, AIRPORTS)
    answer = diff_json(home, AIRPORTS)
    assert (answer["from"]["block"], answer["to"]["block"]) == (blocks[-2], blocks[-1])
    assert shown(answer) == expected(home, 2, 3)


def test_the_table_starts_with_the_counts_and_marks_a_changed_value(home):
    lines = coord_here("diff", AIRPORTS, cwd=home).stdout.splitlines()
    assert lines[0].startswith("1 added, 0 removed, 1 changed (ref.airports from block ")
    assert any("Delta → Delta Field" in line for line in lines)


def test_versions_given_by_system_time_are_the_blocks_of_then(home):
    times = [b["systemTime"] for b in json.loads(coord_here("log", AIRPORTS, "-o", "json", cwd=home).stdout)
             if (b.get("blockHash") or b["hash"]) in data_blocks(home, AIRPORTS)][::-1]
    assert shown(diff_json(home, AIRPORTS, "--from", times[0], "--to", times[2])) == expected(home, 0, 2)


def test_before_the_first_block_every_row_is_added(home):
    first = data_blocks(home, AIRPORTS)[0]
    answer = diff_json(home, AIRPORTS, "--from", "2000-01-01T00:00:00Z", "--to", first)
    assert answer["from"]["block"] is None
    assert [(r[0], r[1]) for r in shown(answer)] == [("added", i) for i, _, _ in SNAPSHOTS[0]]


def test_as_of_event_times_it_is_the_difference_of_the_snapshots_of_then(home):
    answer = diff_json(home, AIRPORTS, "--from-as-of", "2020-01-15T00:00:00Z",
                       "--to-as-of", "2020-03-15T00:00:00Z")
    assert shown(answer) == expected(home, 0, 2)


def test_from_after_to_is_the_way_back(home):
    blocks = data_blocks(home, AIRPORTS)
    back = shown(diff_json(home, AIRPORTS, "--from", blocks[3], "--to", blocks[0]))
    swap = {"added": "removed", "removed": "added", "changed": "changed"}
    forth = [(swap[c], k, ch, n, o) for c, k, ch, o, n in expected(home, 0, 3)]
    assert sorted(back) == sorted(forth)


def test_an_append_root_is_compared_row_by_row(home):
    blocks = data_blocks(home, SEEN)
    answer = diff_json(home, SEEN, "--from", blocks[0], "--to", blocks[2])
    got = sorted((r["change"], r["new"]["iata"], r["new"]["name"], r["new"]["elev"]) for r in answer["rows"])
    files = ", ".join(f"'{csv_file(home, k)}'" for k in (1, 2))
    rows = duckdb.sql(f"SELECT 'added', iata, name, elev FROM read_csv([{files}]) ORDER BY ALL").fetchall()
    assert got == rows  # every row of the two later snapshots, each copy once
    assert answer["key"] is None and answer["removed"] == answer["changed"] == 0


def test_csv_has_a_row_per_change_with_old_and_new_columns(home):
    out = list(csv.DictReader(io.StringIO(coord_here("diff", AIRPORTS, "-o", "csv", cwd=home).stdout)))
    assert list(out[0])[:4] == ["change", "changed", "old.event_time", "old.iata"]
    assert [(r["change"], r["old.name"], r["new.name"]) for r in out] == [
        ("added", "", "Echo"), ("changed", "Delta", "Delta Field")]


def refusal(home: Path, *args: str) -> str:
    proc = coord("diff", *args, cwd=home, check=False)
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1, proc.stderr
    return proc.stderr


def test_an_unknown_block_is_refused_in_one_line(home):
    assert refusal(home, AIRPORTS, "--from", "abcdef0123") == (
        f"coord: error: --from abcdef0123: no block of {AIRPORTS} starts with abcdef0123 "
        f"(coord log {AIRPORTS} lists them)\n")


def test_as_of_a_dataset_without_a_key_is_refused_in_one_line(home):
    line = refusal(home, SEEN, "--to-as-of", "2020-01-15T00:00:00Z")
    assert line.startswith(f"coord: error: --to-as-of: dataset {SEEN} has no state: "
                           "its merge strategy is append")


@pytest.fixture(scope="module")
def passed_on(tmp_path_factory) -> Path:
    """A 0.39 snapshot root of cities and a derivative passing its rows with pop >= 20 on,
    retractions and corrections included, pulled after each snapshot (the DuckDB engine)."""
    home = cities.workspace(tmp_path_factory.mktemp("passed-on"))
    cities.derivative(home, "test.large", cities.PASS_ON)
    cities.pull_all(home, "test.large", fake=True)
    return home


def test_a_derivative_with_retractions_is_the_difference_of_its_inputs_filtered(passed_on):
    blocks = data_blocks(passed_on, "test.large")
    assert len(blocks) == len(cities.PULLS)
    for k in range(1, len(blocks)):
        answer = diff_json(passed_on, "test.large", "--from", blocks[k - 1], "--to", blocks[k])
        got = sorted((r["change"], (r["new"] or r["old"])["id"], (r["new"] or r["old"])["city"])
                     for r in answer["rows"])
        assert got == held_difference(k - 1, k), k


def held_difference(a: int, b: int) -> list[tuple]:
    """DuckDB's answer from the snapshots: the rows with pop >= 20 of snapshot ``b`` minus those
    of ``a`` as multisets, a row being its id, city and the snapshot since which its city and
    pop are unchanged (its event time: a changed pop is a new row though the city is not)."""
    values = ", ".join(f"({j}, {i}, '{c}', {p})" for j, pull in enumerate(cities.PULLS) for i, c, p in pull)
    return duckdb.sql(f"""
        WITH s AS (SELECT * FROM (VALUES {values}) t(pull, id, city, pop)),
        starts AS (SELECT *, CASE WHEN lag(pull) OVER w IS DISTINCT FROM pull - 1
                                    OR lag((city, pop)) OVER w IS DISTINCT FROM (city, pop)
                                  THEN pull END AS new
                   FROM s WINDOW w AS (PARTITION BY id ORDER BY pull)),
        v AS (SELECT *, max(new) OVER (PARTITION BY id ORDER BY pull ROWS UNBOUNDED PRECEDING) AS since
              FROM starts)
        SELECT CASE WHEN n > 0 THEN 'added' ELSE 'removed' END, id, city
        FROM (SELECT id, city, since, sum(CASE WHEN pull = {b} THEN 1 ELSE -1 END) AS n
              FROM v WHERE pull IN ({a}, {b}) AND pop >= 20 GROUP BY ALL HAVING n <> 0)
        ORDER BY ALL""").fetchall()


def test_a_column_added_between_the_versions_is_null_in_the_older_and_marked_changed(tmp_path):
    """A snapshot root whose second CSV file gained a column: its slices have two schemas."""
    home = tmp_path / "ws"
    home.mkdir()
    coord_here("init", cwd=home)
    (home / "in").mkdir()
    merge = "{kind: snapshot, primaryKey: [id]}"
    (home / "cities.yaml").write_text(csv_root_manifest("cities", "in", merge=merge))
    coord_here("add", "cities.yaml", cwd=home)
    files = {"a.csv": "id,ts,city\n1,2024-01-01T00:00:00Z,Oslo\n2,2024-01-01T00:00:00Z,Lima\n",
             "b.csv": "id,ts,city,weather\n1,2024-01-02T00:00:00Z,Oslo,cold\n"
                      "3,2024-01-02T00:00:00Z,Pune,hot\n"}
    for name, text in files.items():
        (home / "in" / name).write_text(text)
        coord_here("pull", "cities", cwd=home)

    answer = diff_json(home, "cities")

    old, new = (f"read_csv('{home / 'in' / f}', union_by_name = true)" for f in files)
    want = duckdb.sql(f"""
        SELECT CASE WHEN a.id IS NULL THEN 'added' WHEN b.id IS NULL THEN 'removed' ELSE 'changed' END,
               coalesce(b.id, a.id), CASE WHEN a.id IS NOT NULL AND b.id IS NOT NULL THEN ['weather'] END,
               b.weather
        FROM (SELECT *, NULL::VARCHAR AS weather FROM {old}) a FULL JOIN {new} b USING (id)
        WHERE a.id IS NULL OR b.id IS NULL OR a.city <> b.city OR a.weather IS DISTINCT FROM b.weather
        """).fetchall()
    got = [(r["change"], r["key"]["id"], r["changed"], (r["new"] or {}).get("weather"))
           for r in answer["rows"]]
    assert sorted(got, key=lambda r: r[1]) == sorted(want, key=lambda r: r[1])
    assert [r["change"] for r in answer["rows"]] == ["added", "removed", "changed"]
    removed = next(r for r in answer["rows"] if r["change"] == "removed")
    assert removed["old"]["weather"] is None  # the older slice has no such column: null there
