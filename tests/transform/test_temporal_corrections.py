"""A temporal join with reference data that changes and is corrected late, and an aggregate
behind it, in a default (current-ODF) workspace through the real coord command and Spark.

Monthly sales by city are joined as of each sale's time with a city -> region snapshot root
that renames a region, deletes a city and inserts one, and then, late, says a city's region
had changed a month before the reference's watermark. Until then the join streams (each sale
waits for the reference's watermark and meets the version in force at its time); the late
version corrects the sales already joined (``lateRows: correct``, what ``coord add`` gives), and
the aggregate behind it follows. After each pull the rows the change logs describe are checked
against DuckDB over the sales and the versions written down by hand below.
"""
from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest
import yaml

from coordinator.store.dataset import CurrentDataset
from coordinator.workspace import Workspace

from ..support.cli import coord
from ..support.described_rows import described_rows
from .pipeline import manifest

pytestmark = pytest.mark.spark

SALES, REGIONS = "tx.sales", "tx.regions"
ENRICHED, MONTHLY = "tx.sales.regional", "tx.sales.by-region"
ENRICHED_SQL = f"""SELECT s.event_time, s.city, s.amount, r.region
FROM `{SALES}` AS s JOIN `{REGIONS}` FOR SYSTEM_TIME AS OF s.event_time AS r ON s.city = r.city"""
MONTHLY_SQL = f"""SELECT window.end AS event_time, region, count(*) AS sales, sum(amount) AS total
FROM `{ENRICHED}` GROUP BY window(event_time, '30 days'), region"""


def day(month: int, d: int = 1) -> datetime:
    return datetime(2024, month, d, tzinfo=UTC)


CITIES = ["Austin", "Dallas", "El Paso", "Tyler"]
SALE_ROWS = [{"event_time": day(m, 15), "city": c, "amount": 10 * m + k}
             for m in range(1, 7) for k, c in enumerate(CITIES)]
# each snapshot of the reference, as delivered: (city, region, since); `since` is its event time
SNAPSHOTS = [
    [("Austin", "Central", day(1)), ("Dallas", "North", day(1)), ("El Paso", "West", day(1))],
    # Austin's region renamed, El Paso gone, Tyler new
    [("Austin", "Capital", day(3)), ("Dallas", "North", day(1)), ("Tyler", "East", day(3))],
    # late: Dallas was North Central since February, before the watermark (March)
    [("Austin", "Capital", day(3)), ("Dallas", "North Central", day(2)), ("Tyler", "Piney Woods", day(5))],
]
NEVER = datetime(9999, 1, 1, tzinfo=UTC)
# the versions in force after each snapshot, by hand: (city, region, from, until)
VERSIONS = [
    [("Austin", "Central", day(1), NEVER), ("Dallas", "North", day(1), NEVER),
     ("El Paso", "West", day(1), NEVER)],
    [("Austin", "Central", day(1), day(3)), ("Austin", "Capital", day(3), NEVER),
     ("Dallas", "North", day(1), NEVER), ("El Paso", "West", day(1), day(3)),
     ("Tyler", "East", day(3), NEVER)],
    [("Austin", "Central", day(1), day(3)), ("Austin", "Capital", day(3), NEVER),
     ("Dallas", "North", day(1), day(2)), ("Dallas", "North Central", day(2), NEVER),
     ("El Paso", "West", day(1), day(3)), ("Tyler", "East", day(3), day(5)),
     ("Tyler", "Piney Woods", day(5), NEVER)],
]


rows = described_rows


def expected(k: int, *, sold_by: datetime = NEVER) -> duckdb.DuckDBPyConnection:
    """DuckDB with `enriched`: the sales up to ``sold_by`` joined with versions ``k``."""
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    schema = pa.schema([("event_time", pa.timestamp("us", "UTC")), ("city", pa.string()),
                        ("amount", pa.int64())])
    sold = [r for r in SALE_ROWS if r["event_time"] <= sold_by]
    con.register("sales", pa.Table.from_pylist(sold, schema=schema))
    con.register("versions", pa.Table.from_pylist(
        [{"city": c, "region": r, "valid_from": f, "valid_to": t} for c, r, f, t in VERSIONS[k]]))
    con.execute("""CREATE VIEW enriched AS SELECT s.event_time, s.city, s.amount, v.region
        FROM sales s JOIN versions v ON s.city = v.city
        AND s.event_time >= v.valid_from AND s.event_time < v.valid_to""")
    return con


ENRICHED_COLUMNS = ("event_time", "city", "amount", "region")
MONTHLY_COLUMNS = ("event_time", "region", "sales", "total")


def enriched(k: int, **kw) -> Counter:
    return Counter(expected(k, **kw).execute("SELECT * FROM enriched").fetchall())


def monthly(k: int, *, closed_by: datetime = NEVER, **kw) -> Counter:
    got = expected(k, **kw).execute("""SELECT time_bucket(INTERVAL 30 DAY, event_time,
        TIMESTAMPTZ '1970-01-01') + INTERVAL 30 DAY AS event_time, region, count(*), sum(amount)
        FROM enriched GROUP BY ALL""").fetchall()
    return Counter(r for r in got if r[0] <= closed_by)


def watermark(home: Path, name: str) -> datetime | None:
    return CurrentDataset(Workspace.open(home), name).state().watermark


def deliver_reference(home: Path, k: int) -> None:
    (home / "regions" / f"{k}.csv").write_text("city,region,since\n" + "".join(
        f"{c},{r},{t.strftime('%Y-%m-%dT%H:%M:%SZ')}\n" for c, r, t in SNAPSHOTS[k]))
    coord("pull", REGIONS, cwd=home)


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    return pipeline(tmp_path_factory.mktemp("temporal-corrections"))


def pipeline(home: Path) -> Path:
    """A default workspace in ``home`` with the four datasets and every sale pulled."""
    coord("init", cwd=home)
    (home / "regions").mkdir()
    (home / "sales").mkdir()
    sources = {
        SALES: {"kind": "root", "fetch": {"kind": "filesGlob", "path": "sales/*.csv"},
                "read": {"kind": "csv", "header": True,
                         "schema": ["event_time TIMESTAMP", "city STRING", "amount BIGINT"]},
                "merge": {"kind": "append"}},
        REGIONS: {"kind": "root", "fetch": {"kind": "filesGlob", "path": "regions/*.csv", "order": "byName"},
                  "read": {"kind": "csv", "header": True,
                           "schema": ["city STRING", "region STRING", "since TIMESTAMP"]},
                  "merge": {"kind": "snapshot", "primaryKey": ["city"]}},
        ENRICHED: {"kind": "derivative", "inputs": [SALES, REGIONS],
                   "transform": {"kind": "sql", "engine": "spark", "query": ENRICHED_SQL,
                                 "temporalTables": [{"id": REGIONS, "primaryKey": ["city"]}]}},
        MONTHLY: {"kind": "derivative", "inputs": [ENRICHED],
                  "transform": {"kind": "sql", "engine": "spark", "query": MONTHLY_SQL}},
    }
    for name, source in sources.items():
        doc = manifest(name, source)
        if name == REGIONS:
            doc["content"]["vocab"] = {"eventTimeColumn": "since"}
        (home / f"{name}.yaml").write_text(yaml.safe_dump(doc))
    coord("add", *(str(home / f"{n}.yaml") for n in sources), cwd=home)
    (home / "sales" / "1.csv").write_text("event_time,city,amount\n" + "".join(
        f"{r['event_time'].strftime('%Y-%m-%dT%H:%M:%SZ')},{r['city']},{r['amount']}\n" for r in SALE_ROWS))
    coord("pull", SALES, cwd=home)
    return home


@pytest.fixture(scope="module")
def streamed(home) -> list[tuple[Counter, Counter, Counter, Counter]]:
    """The first two snapshots, each pulled through both derivatives: (got, expected) of each."""
    seen = []
    for k in (0, 1):
        deliver_reference(home, k)
        coord("pull", "-r", MONTHLY, cwd=home)
        released = watermark(home, REGIONS)
        seen.append((rows(home, ENRICHED, ENRICHED_COLUMNS), enriched(k, sold_by=released),
                     rows(home, MONTHLY, MONTHLY_COLUMNS),
                     monthly(k, sold_by=released, closed_by=watermark(home, MONTHLY))))
    return seen


@pytest.fixture(scope="module")
def corrected(home, streamed) -> str:
    deliver_reference(home, 2)
    return coord("pull", "-r", MONTHLY, cwd=home).stdout


def test_while_the_reference_only_moves_forward_each_sale_meets_the_version_of_its_time(streamed):
    for got, want, _, _ in streamed:
        assert got == want
    assert len(streamed[1][0]) == 6  # January and February: El Paso still West, Tyler unknown


def test_the_aggregate_behind_it_closes_the_windows_its_input_watermark_passed(streamed):
    for _, _, got, want in streamed:
        assert got == want


def test_a_late_version_corrects_the_sales_already_joined(home, corrected):
    assert rows(home, ENRICHED, ENRICHED_COLUMNS) == enriched(2)
    assert (f"{ENRICHED}: " in corrected and f"1 version of {REGIONS} dated behind its watermark "
            "corrected the rows joined before (lateRows: correct)" in corrected)


def test_the_aggregate_follows_the_correction(home, corrected):
    assert rows(home, MONTHLY, MONTHLY_COLUMNS) == monthly(2)


def test_a_deleted_city_matches_nothing_after_its_deletion(home, corrected):
    el_paso = [r for r in rows(home, ENRICHED, ENRICHED_COLUMNS) if r[1] == "El Paso"]
    assert sorted(r[0] for r in el_paso) == [day(1, 15), day(2, 15)]


@pytest.mark.parametrize("name", [ENRICHED, MONTHLY])
def test_verify_replays_streamed_and_recomputed_steps(home, corrected, name):
    assert "reproducibility: reproduced" in coord("verify", name, cwd=home).stdout


LISTINGS, LISTED = "tx.listings", "tx.listings.regional"
LISTED_SQL = f"""SELECT l.event_time, l.city, l.price, r.region
FROM `{LISTINGS}` AS l JOIN `{REGIONS}` FOR SYSTEM_TIME AS OF l.event_time AS r ON l.city = r.city"""
# snapshots of a listings root, (city, price, listed): a price changed, a listing gone, one new
LISTING_SNAPSHOTS = [
    [("Austin", 300, day(2, 10)), ("Dallas", 250, day(4, 10)), ("Tyler", 150, day(6, 10))],
    [("Austin", 320, day(2, 10)), ("Tyler", 150, day(6, 10)), ("El Paso", 90, day(2, 20))],
]


@pytest.fixture(scope="module")
def listed(home, corrected) -> list[tuple[Counter, Counter]]:
    """A join whose events retract and change (a snapshot root), each snapshot pulled through
    it: (got, DuckDB's) after each."""
    (home / "listings").mkdir()
    (home / f"{LISTINGS}.yaml").write_text(yaml.safe_dump(manifest(LISTINGS, {
        "kind": "root", "fetch": {"kind": "filesGlob", "path": "listings/*.csv", "order": "byName"},
        "read": {"kind": "csv", "header": True,
                 "schema": ["city STRING", "price BIGINT", "event_time TIMESTAMP"]},
        "merge": {"kind": "snapshot", "primaryKey": ["city"]}})))
    (home / f"{LISTED}.yaml").write_text(yaml.safe_dump(manifest(LISTED, {
        "kind": "derivative", "inputs": [LISTINGS, REGIONS],
        "transform": {"kind": "sql", "engine": "spark", "query": LISTED_SQL,
                      "temporalTables": [{"id": REGIONS, "primaryKey": ["city"]}]}})))
    coord("add", str(home / f"{LISTINGS}.yaml"), str(home / f"{LISTED}.yaml"), cwd=home)
    seen = []
    for k, snapshot in enumerate(LISTING_SNAPSHOTS):
        (home / "listings" / f"{k}.csv").write_text("city,price,event_time\n" + "".join(
            f"{c},{p},{t.strftime('%Y-%m-%dT%H:%M:%SZ')}\n" for c, p, t in snapshot))
        coord("pull", LISTINGS, cwd=home)
        coord("pull", LISTED, cwd=home)
        con = expected(2)
        con.register("listings", pa.Table.from_pylist(
            [{"event_time": t, "city": c, "price": p} for c, p, t in snapshot]))
        want = Counter(con.execute("""SELECT l.event_time, l.city, l.price, v.region FROM listings l
            JOIN versions v ON l.city = v.city AND l.event_time >= v.valid_from
            AND l.event_time < v.valid_to""").fetchall())
        seen.append((rows(home, LISTED, ("event_time", "city", "price", "region")), want))
    return seen


def test_a_join_whose_events_change_is_recomputed_with_each_event_meeting_its_version(listed):
    for got, want in listed:
        assert got == want
    assert len(listed[1][0]) == 3  # El Paso listed in February, while it was West


FAR = datetime(2030, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize("order", ["reference last", "each snapshot pulled through"])
def test_once_both_watermarks_pass_every_sale_every_delivery_order_gives_the_same_rows(tmp_path, order):
    # the fixtures above interleave the reference's snapshots with pulls of the derivatives;
    # here the derivatives run once at the end, or after each snapshot, then both roots' watermarks
    # move past every sale, which releases what waits and closes every window
    home = pipeline(tmp_path)
    for k in range(len(SNAPSHOTS)):
        deliver_reference(home, k)
        if order == "each snapshot pulled through":
            coord("pull", "-r", MONTHLY, cwd=home)
    for root_name in (SALES, REGIONS):
        coord("pull", root_name, "--set-watermark", FAR.isoformat(), cwd=home)
    coord("pull", "-r", MONTHLY, cwd=home)
    assert rows(home, ENRICHED, ENRICHED_COLUMNS) == enriched(2)
    assert rows(home, MONTHLY, MONTHLY_COLUMNS) == monthly(2)
