"""A keyed root's state as of an event time (``coord sql`` ``"<id>@state"`` with ``--as-of``,
``coord tail --state --as-of``) for every merge, polled and pushed, in both workspace formats.

One city -> region reference changes over four moments of 2003: six cities; Houston's region
renamed; Laredo deleted (nothing else changes then); Lubbock inserted. Every root is fed those
changes and read as of times before the first, at and between each, and after the last. The
expected answers are computed apart from ``coord``: DuckDB over the snapshot files (the one
in force at T: the latest dated at or before T), DuckDB over a ledger's exports (each key's
first record), and the pushed records of a stream replayed by hand in push order.
"""
from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.support.cli import coord, coord_here
from tests.support.push import push_source, root_manifest
from tests.support.snapshots import AIRPORTS, manifest

COLUMNS = ["city", "region", "population"]
SIX = [("Austin", "Central", 656562), ("Dallas", "North", 1188580), ("El Paso", "West", 563662),
       ("Houston", "Gulf Coast", 1953631), ("Laredo", "South", 176576), ("Waco", "Central", 113726)]
RENAMED = [("Houston", "Coastal", 1953631) if c == "Houston" else (c, r, p) for c, r, p in SIX]
DELETED = [row for row in RENAMED if row[0] != "Laredo"]
SNAPSHOTS = {"2003-01-01": SIX, "2003-04-01": RENAMED, "2003-07-01": DELETED,
             "2003-10-01": [*DELETED, ("Lubbock", "West", 199564)]}
# the same moments as changes: an upsert stream's (op 1 deletes) and a changelog's records
UPSERTS = {"2003-01-01": [(0, *row) for row in SIX], "2003-04-01": [(0, "Houston", "Coastal", 1953631)],
           "2003-07-01": [(1, "Laredo", "South", 176576)], "2003-10-01": [(0, "Lubbock", "West", 199564)]}
CHANGES = {**UPSERTS,
           "2003-04-01": [(2, "Houston", "Gulf Coast", 1953631), (3, "Houston", "Coastal", 1953631)]}
TIMES = ["2002-12-31T00:00:00Z", "2003-01-01T00:00:00Z", "2003-02-15T00:00:00Z",
         "2003-04-01T00:00:00Z", "2003-05-15T12:00:00Z", "2003-07-01T00:00:00Z",
         "2003-08-15T00:00:00Z", "2003-10-01T00:00:00Z", "2004-01-01T00:00:00Z"]

SNAPSHOT, LEDGER, DATED = "ref.cities", "ref.cities.ledger", "ref.cities.dated"
PUSHED, UPSERTED, CHANGED = "ref.cities.pushed", "ref.cities.upserts", "ref.cities.changes"
POLLED_UPSERTS, POLLED_CHANGES = "ref.cities.upserts.polled", "ref.cities.changes.polled"
SCHEMA = '["city STRING", "region STRING", "population BIGINT"]'
STREAM_DDL = "['op INT', 'city STRING', 'region STRING', 'population BIGINT']"
FROM_PATH = r"eventTime: {kind: FromPath, pattern: '(\d{4}-\d{2}-\d{2})'}"


def write_inputs(home: Path) -> None:
    """The snapshots as Parquet files, also with their day as a column of their own
    (``reported``), the stream records as CSV files, one per moment (the upserts with their
    own event time column, ``changed``)."""
    for folder in ("snaps", "dated", "upserts", "changes"):
        (home / folder).mkdir()
    for day, rows in SNAPSHOTS.items():
        table = pa.table(dict(zip(COLUMNS, map(list, zip(*rows, strict=True)), strict=True)))
        pq.write_table(table, home / "snaps" / f"cities-{day}.parquet")
        reported = pa.array([datetime.fromisoformat(f"{day}T00:00:00+00:00")] * len(rows),
                            pa.timestamp("ms", tz="UTC"))
        pq.write_table(table.append_column("reported", reported), home / "dated" / f"cities-{day}.parquet")
    for day, rows in UPSERTS.items():
        (home / "upserts" / f"{day}.csv").write_text(
            "op,city,region,population,changed\n" + "".join(f"{o},{c},{r},{p},{day}T00:00:00Z\n"
                                                            for o, c, r, p in rows))
    for day, rows in CHANGES.items():
        (home / "changes" / f"{day}.csv").write_text(
            "op,city,region,population\n" + "".join(f"{o},{c},{r},{p}\n" for o, c, r, p in rows))


def polling(name: str, folder: str, merge: str, own_time: bool = False) -> str:
    """A current-form root polling ``folder``'s CSV files, one per moment."""
    fetch = f"{{kind: FilesGlob, path: '{folder}/*.csv'{'' if own_time else ', ' + FROM_PATH}}}"
    ddl = STREAM_DDL[:-1] + ", 'changed TIMESTAMP']" if own_time else STREAM_DDL
    source = (f"- kind: SetPollingSource\n  fetch: {fetch}\n  read: {{kind: Csv, header: true, "
              f"ddlSchema: {ddl}}}\n  merge: {merge}\n")
    return root_manifest(name, source, event_time="changed" if own_time else None)


def pushed(name: str, read: str, merge: str, own_time: bool = False) -> str:
    return root_manifest(name, push_source("changes", read, merge),
                         event_time="changed" if own_time else None)


def add(home: Path, name: str, text: str) -> None:
    (home / f"{name}.yaml").write_text(text)
    coord_here("add", f"{name}.yaml", cwd=home)


@pytest.fixture(scope="module", params=["0.39", "0.18"])
def polled(request, tmp_path_factory) -> Path:
    """A workspace of each format with the snapshot root and the ledger, each fed the
    snapshot files (their day from the file's name: one block per snapshot), and a snapshot
    root fed them with their day as a column of their own."""
    home = tmp_path_factory.mktemp(f"polled-{request.param}")
    coord_here("init", "--odf", request.param, cwd=home)
    write_inputs(home)
    add(home, SNAPSHOT, manifest(SNAPSHOT, "snaps/*.parquet", "{kind: snapshot, primaryKey: [city]}",
                                 schema=SCHEMA))
    add(home, LEDGER, manifest(LEDGER, "snaps/*.parquet", "{kind: ledger, primaryKey: [city]}",
                               schema=SCHEMA))
    dated = SCHEMA[:-1] + ', "reported TIMESTAMP"]'
    add(home, DATED, manifest(DATED, "dated/*.parquet", "{kind: snapshot, primaryKey: [city]}", "",
                              dated) + "  vocab: {eventTimeColumn: reported}\n")
    coord_here("pull", SNAPSHOT, LEDGER, DATED, cwd=home)
    return home


@pytest.fixture(scope="module")
def streams(tmp_path_factory) -> Path:
    """A current-ODF workspace with a push-fed snapshot root, upsert and changelog streams
    pushed (``coord ingest``, one push per moment) and polled (one pull per file)."""
    home = tmp_path_factory.mktemp("streams")
    coord_here("init", cwd=home)
    write_inputs(home)
    stream_read = f"{{kind: Csv, header: true, ddlSchema: {STREAM_DDL}}}"
    add(home, PUSHED, pushed(PUSHED, "{kind: Parquet}", "{kind: Snapshot, primaryKey: [city]}"))
    add(home, UPSERTED, pushed(UPSERTED, stream_read[:-2] + ", 'changed TIMESTAMP']}",
                               "{kind: UpsertStream, primaryKey: [city]}", own_time=True))
    add(home, CHANGED, pushed(CHANGED, stream_read, "{kind: ChangelogStream, primaryKey: [city]}"))
    add(home, POLLED_UPSERTS, polling(POLLED_UPSERTS, "upserts", "{kind: UpsertStream, primaryKey: [city]}",
                                      own_time=True))
    add(home, POLLED_CHANGES, polling(POLLED_CHANGES, "changes",
                                      "{kind: ChangelogStream, primaryKey: [city]}"))
    for day in SNAPSHOTS:
        at = f"{day}T00:00:00Z"
        coord_here("ingest", PUSHED, f"snaps/cities-{day}.parquet", "--event-time", at, cwd=home)
        coord_here("ingest", UPSERTED, f"upserts/{day}.csv", cwd=home)
        coord_here("ingest", CHANGED, f"changes/{day}.csv", "--event-time", at, cwd=home)
    coord_here("pull", POLLED_UPSERTS, POLLED_CHANGES, cwd=home)
    return home


# --- the answers, computed apart from coord ----------------------------------------------------


def in_force(home: Path, as_of: str, columns: list[str] = COLUMNS) -> list[tuple]:
    """DuckDB over the snapshot files: the one dated latest at or before ``as_of``."""
    return duckdb.sql(f"""
        WITH s AS (SELECT *, regexp_extract(filename, '(\\d{{4}}-\\d{{2}}-\\d{{2}})', 1)::DATE AS day
                   FROM read_parquet('{home}/snaps/*.parquet', filename = true))
        SELECT {', '.join(columns)} FROM s
        WHERE day = (SELECT max(day) FROM s WHERE day <= TIMESTAMPTZ '{as_of}')
        ORDER BY 1""").fetchall()


def first_seen(home: Path, as_of: str) -> list[tuple]:
    """DuckDB over a ledger's exports dated at or before ``as_of``: each city's first record."""
    return duckdb.sql(f"""
        SELECT city, region, population
        FROM read_parquet('{home}/snaps/*.parquet', filename = true)
        WHERE regexp_extract(filename, '(\\d{{4}}-\\d{{2}}-\\d{{2}})', 1)::DATE <= TIMESTAMPTZ '{as_of}'
        QUALIFY row_number() OVER (PARTITION BY city ORDER BY filename) = 1
        ORDER BY city""").fetchall()


def replayed(records: dict[str, list[tuple]], as_of: str) -> list[tuple]:
    """The pushed records of the moments at or before ``as_of`` applied in order, by hand: a
    retraction (1) deletes its key, a correct-from (2) is its correct-to's half, anything
    else sets the key's row."""
    table: dict[str, tuple] = {}
    for day, rows in records.items():
        if day <= as_of[:10]:
            for op, city, region, population in rows:
                if op == 1:
                    del table[city]
                elif op != 2:
                    table[city] = (city, region, population)
    return sorted(table.values())


# --- reading through coord ---------------------------------------------------------------------


def state(home: Path, dataset: str, as_of: str) -> list[tuple]:
    out = coord("sql", "-o", "json", "--as-of", as_of, "-c",
                f'SELECT city, region, population FROM "{dataset}@state" ORDER BY city', cwd=home)
    return [tuple(r.values()) for r in json.loads(out.stdout)]


def tail_state(home: Path, dataset: str, as_of: str) -> list[tuple]:
    out = coord("tail", dataset, "--state", "--as-of", as_of, "-n", "100", "-o", "json", cwd=home)
    return sorted((r["city"], r["region"], r["population"]) for r in json.loads(out.stdout))


# --- the tests ---------------------------------------------------------------------------------


@pytest.mark.parametrize("as_of", TIMES)
def test_a_snapshot_roots_state_as_of_a_time_is_the_snapshot_in_force_then(polled, as_of):
    assert state(polled, SNAPSHOT, as_of) == in_force(polled, as_of)


@pytest.mark.parametrize("as_of", TIMES)
def test_a_snapshot_with_its_own_event_times_state_as_of_a_time_is_the_snapshot_in_force_then(polled, as_of):
    assert state(polled, DATED, as_of) == in_force(polled, as_of)


@pytest.mark.parametrize("as_of", TIMES)
def test_a_ledgers_state_as_of_a_time_is_each_keys_first_record_by_then(polled, as_of):
    assert state(polled, LEDGER, as_of) == first_seen(polled, as_of)


@pytest.mark.parametrize("as_of", TIMES)
def test_a_push_fed_snapshot_roots_state_as_of_a_time_is_the_push_in_force_then(streams, as_of):
    assert state(streams, PUSHED, as_of) == in_force(streams, as_of)


@pytest.mark.parametrize("dataset", [UPSERTED, POLLED_UPSERTS])
@pytest.mark.parametrize("as_of", TIMES)
def test_an_upsert_streams_state_as_of_a_time_is_its_records_of_then_replayed(streams, dataset, as_of):
    assert state(streams, dataset, as_of) == replayed(UPSERTS, as_of)


@pytest.mark.parametrize("dataset", [CHANGED, POLLED_CHANGES])
@pytest.mark.parametrize("as_of", TIMES)
def test_a_changelogs_state_as_of_a_time_is_its_records_of_then_replayed(streams, dataset, as_of):
    assert state(streams, dataset, as_of) == replayed(CHANGES, as_of)


def test_the_streams_records_describe_the_snapshots():
    """The stream inputs are the snapshots' changes: the answers above agree."""
    for day, rows in SNAPSHOTS.items():
        assert replayed(UPSERTS, day) == replayed(CHANGES, day) == sorted(rows)


@pytest.mark.parametrize("as_of", ["2003-05-15T12:00:00Z", "2003-08-15T00:00:00Z"])
def test_tail_state_as_of_a_time_agrees_with_sql(polled, streams, as_of):
    assert tail_state(polled, SNAPSHOT, as_of) == in_force(polled, as_of)
    for dataset, expected in ((PUSHED, in_force(streams, as_of)), (UPSERTED, replayed(UPSERTS, as_of)),
                              (CHANGED, replayed(CHANGES, as_of))):
        assert tail_state(streams, dataset, as_of) == expected, dataset


LARGE = "ref.places"


@pytest.mark.parametrize("odf", ["0.39", "0.18"])
def test_a_snapshot_diffed_out_of_core_places_its_removals_at_its_own_day(tmp_path, odf):
    """Two snapshots larger than a quarter slice (uncompressed: diffed on disk), each row
    carrying its snapshot's day; the second drops every seventh place."""
    coord_here("init", "--odf", odf, cwd=tmp_path)
    coord_here("config", "set", "ingest.maxSliceBytes", "1MiB", cwd=tmp_path)
    (tmp_path / "big").mkdir()
    for day, step in (("2003-01-01", 1), ("2003-07-01", 7)):
        kept = [i for i in range(30_000) if step == 1 or i % step]
        reported = datetime.fromisoformat(f"{day}T00:00:00+00:00")
        table = pa.table({"name": [f"place {i}" for i in kept], "population": [i * 3 for i in kept],
                          "reported": pa.array([reported] * len(kept), pa.timestamp("ms", tz="UTC"))})
        pq.write_table(table, tmp_path / "big" / f"{day}.parquet", compression="none", use_dictionary=False)
    schema = '["name STRING", "population BIGINT", "reported TIMESTAMP"]'
    add(tmp_path, LARGE, manifest(LARGE, "big/*.parquet", "{kind: snapshot, primaryKey: [name]}", "",
                                  schema) + "  vocab: {eventTimeColumn: reported}\n")
    coord_here("pull", LARGE, cwd=tmp_path)
    for as_of in ("2003-06-30T00:00:00Z", "2003-07-01T00:00:00Z"):
        counted = coord("sql", "-o", "json", "--as-of", as_of, "-c",
                        f'SELECT count(*) AS n, sum(population) AS people FROM "{LARGE}@state"', cwd=tmp_path)
        expected = duckdb.sql(f"""
            SELECT count(*), sum(population) FROM read_parquet('{tmp_path}/big/*.parquet')
            WHERE reported = (SELECT max(reported) FROM read_parquet('{tmp_path}/big/*.parquet')
                              WHERE reported <= TIMESTAMPTZ '{as_of}')""").fetchall()
        assert [tuple(json.loads(counted.stdout)[0].values())] == expected, as_of


README_AIRPORTS = {  # README, "State: ...": a rename and a deletion, then an insertion
    "2020-01-01": {"iata": ["AAA", "BBB", "CCC", "DDD"], "name": ["Alpha", "Bravo", "Charlie", "Delta"]},
    "2020-02-01": {"iata": ["AAA", "BBB", "DDD"], "name": ["Alpha", "Bravo Intl", "Delta"]},
    "2020-03-01": {"iata": ["AAA", "BBB", "DDD", "EEE"], "name": ["Alpha", "Bravo Intl", "Delta", "Echo"]},
}


@pytest.fixture(scope="module")
def airports(tmp_path_factory) -> Path:
    """The README's example in a default workspace: its three snapshots, pulled at once."""
    home = tmp_path_factory.mktemp("airports")
    coord_here("init", cwd=home)
    (home / "snaps").mkdir()
    for day, table in README_AIRPORTS.items():
        pq.write_table(pa.table(table), home / "snaps" / f"airports-{day}.parquet")
    add(home, AIRPORTS, manifest(AIRPORTS, "snaps/*.parquet", "{kind: snapshot, primaryKey: [iata]}"))
    coord_here("pull", AIRPORTS, cwd=home)
    return home


def test_the_readme_airports_example_as_of_a_day_between_snapshots(airports):
    names = coord("sql", "-o", "json", "--as-of", "2020-02-15T00:00:00Z", "-c",
                  f'SELECT iata, name FROM "{AIRPORTS}@state" ORDER BY iata', cwd=airports).stdout
    expected = in_force(airports, "2020-02-15T00:00:00Z", ["iata", "name"])
    assert [tuple(r.values()) for r in json.loads(names)] == expected
    assert [name for _, name in expected] == ["Alpha", "Bravo Intl", "Delta"]


def test_the_readme_airports_example_tail_as_of_the_first_snapshot_shows_its_four_rows(airports):
    out = coord("tail", AIRPORTS, "--state", "--as-of", "2020-01-15T00:00:00Z", "-o", "json", cwd=airports)
    rows = sorted((r["iata"], r["name"]) for r in json.loads(out.stdout))
    assert rows == in_force(airports, "2020-01-15T00:00:00Z", ["iata", "name"])
    assert len(rows) == 4
