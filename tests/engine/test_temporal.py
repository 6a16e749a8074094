"""Temporal tables (``temporalTables``) through the real sandboxed engine.

The guarantee: each event is joined with its key's latest version at or before its event time
(a key a snapshot removed matches nothing after its removal), whatever the number of
deliveries and whichever input arrives first. Events wait for the temporal tables'
watermarks, so the comparison closes every chain with an explicit watermark past all the data
and then checks the whole output against DuckDB's ``ASOF JOIN`` over all of it.
"""
from __future__ import annotations

import random
from datetime import timedelta

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from engine_testkit import T0, input_schema, records, write_slice

from coordinator.engine.port import (
    EngineError,
    EngineErrorKind,
    ExecuteInput,
    InputSchema,
    LineageRequest,
    ProvenanceRequest,
    ValidateRequest,
)
from coordinator.metadata.objects import DatasetVocabulary, TemporalTable, TransformSql

pytestmark = pytest.mark.spark

EVENTS, STATIONS, REGIONS = "wx.temps", "ref.stations", "ref.regions"
SCHEMAS = {
    EVENTS: input_schema(id=pa.int64(), k=pa.int64()),
    STATIONS: input_schema(observed=pa.string(), k=pa.int64(), name=pa.string(), region_id=pa.int64()),
}
FAR = T0 + timedelta(days=365)
RNG = random.Random(31)


def hour(n: float):
    return T0 + timedelta(hours=n)


# Stations 0-5, each renamed at random hours (never two versions of a key at one time); station
# 5 is removed at hour 40 and comes back at hour 60; station 6 first appears at hour 20.
STATION_ROWS = sorted(
    [{"event_time": hour(h), "observed": "I" if h == 0 else "U", "k": k, "name": f"s{k}@{h}",
      "region_id": k % 2} for k in range(6) for h in sorted({0, *RNG.sample(range(1, 96), 4)})]
    + [{"event_time": hour(40), "observed": "D", "k": 5, "name": None, "region_id": None},
       {"event_time": hour(60), "observed": "I", "k": 5, "name": "s5-back", "region_id": 1},
       {"event_time": hour(20), "observed": "I", "k": 6, "name": "s6", "region_id": 0}],
    key=lambda r: r["event_time"],
)
# Events every 37 minutes for four days, over keys 0-7 (7 never exists: a left join keeps it).
EVENT_ROWS = [{"event_time": T0 + timedelta(minutes=37 * i), "id": i, "k": RNG.randrange(8)}
              for i in range(160)]

AS_OF = """SELECT e.event_time, e.id, e.k, d.name
FROM `wx.temps` AS e {join} `ref.stations` FOR SYSTEM_TIME AS OF e.event_time AS d ON e.k = d.k"""


KEYS = {STATIONS: ["k"], REGIONS: ["region_id"]}


def temporal(query: str, *tables: str) -> TransformSql:
    return TransformSql(engine="spark", query=query,
                        temporal_tables=[TemporalTable(id=t, primary_key=KEYS[t]) for t in tables])


def asof_answer(join: str) -> list[tuple]:
    """DuckDB's ASOF JOIN over all the data; a match with a removal is no match."""
    con = duckdb.connect()
    con.register("e", pa.Table.from_pylist(EVENT_ROWS))
    con.register("d", pa.Table.from_pylist(STATION_ROWS))
    kept = "WHERE d.observed IS DISTINCT FROM 'D'" if join == "JOIN" else ""
    name = "d.name" if join == "JOIN" else "CASE WHEN d.observed = 'D' THEN NULL ELSE d.name END"
    return sorted(con.sql(f"""SELECT e.event_time, e.id, e.k, {name}
        FROM e ASOF {'LEFT ' if join != 'JOIN' else ''}JOIN d ON e.k = d.k AND e.event_time >= d.event_time
        {kept}""").fetchall())


def rows(chain) -> list[tuple]:
    return sorted(tuple(r.values()) for r in chain.all_records())


def deliveries(rows: list[dict], n: int) -> list[list[dict]]:
    """``rows`` (ordered by event time) cut into ``n`` consecutive parts."""
    size = -(-len(rows) // n)
    return [rows[i:i + size] for i in range(0, len(rows), size)]


def run(chain, pulls: int, order: str) -> None:
    """Delivers both inputs in ``pulls`` parts: together, events first or stations first (a
    call with only one of them), then closes both with a watermark past all the data."""
    for events, stations in zip(deliveries(EVENT_ROWS, pulls), deliveries(STATION_ROWS, pulls), strict=True):
        if order == "together":
            chain.execute({EVENTS: [events], STATIONS: [stations]})
        else:
            first, second = ((EVENTS, events), (STATIONS, stations))[:: 1 if order == "events first" else -1]
            chain.execute({first[0]: [first[1]]})
            chain.execute({second[0]: [second[1]]})
    chain.execute(watermarks={EVENTS: FAR, STATIONS: FAR})


@pytest.mark.parametrize(("pulls", "order"), [(1, "together"), (2, "events first"), (4, "stations first")])
def test_temporal_join_equals_asof_join_whatever_the_deliveries(make_chain, pulls, order):
    chain = make_chain(temporal(AS_OF.format(join="JOIN"), STATIONS), SCHEMAS)
    chain.removals[STATIONS] = ("observed", "D")
    run(chain, pulls, order)
    assert rows(chain) == asof_answer("JOIN")


def test_left_temporal_join_keeps_unmatched_and_removed_keys(make_chain):
    chain = make_chain(temporal(AS_OF.format(join="LEFT JOIN"), STATIONS), SCHEMAS)
    chain.removals[STATIONS] = ("observed", "D")
    run(chain, 2, "together")
    answer = asof_answer("LEFT JOIN")
    assert any(r[3] is None and r[2] == 5 for r in answer)  # the removed station: no name
    assert rows(chain) == answer


def test_events_wait_for_the_temporal_tables_watermark(make_chain):
    chain = make_chain(temporal(AS_OF.format(join="JOIN"), STATIONS), SCHEMAS)
    early = [r for r in STATION_ROWS if r["event_time"] <= hour(30)]
    first = chain.execute({EVENTS: [EVENT_ROWS], STATIONS: [early]})
    emitted = records(first.output_path)
    assert emitted and max(r["event_time"] for r in emitted) <= hour(30)
    assert first.output_watermark <= hour(30)  # not the events' own watermark (day four)


def test_a_ledger_without_removals_keeps_removed_rows_as_versions(make_chain):
    """No observation column given (a ledger or a derivative): every row is a version."""
    chain = make_chain(temporal(AS_OF.format(join="JOIN"), STATIONS), SCHEMAS)
    run(chain, 1, "together")
    assert any(r[2] == 5 and r[3] is None for r in rows(chain))  # the "D" row is a version


WINDOW = """SELECT window.end AS event_time, r.region, count(*) AS n
FROM `wx.temps` AS e, LATERAL TABLE (`ref.stations`(e.event_time)) AS d,
     LATERAL TABLE (`ref.regions`(e.event_time)) AS r
WHERE e.k = d.k AND d.region_id = r.region_id
GROUP BY window(e.event_time, '1 day'), r.region"""
REGION_ROWS = [{"event_time": hour(0), "region_id": 0, "region": "north"},
               {"event_time": hour(0), "region_id": 1, "region": "south"},
               {"event_time": hour(50), "region_id": 1, "region": "south-east"}]


def test_daily_window_behind_two_lateral_temporal_tables(make_chain):
    schemas = {**SCHEMAS, REGIONS: input_schema(region_id=pa.int64(), region=pa.string())}
    chain = make_chain(temporal(WINDOW, STATIONS, REGIONS), schemas)
    chain.removals[STATIONS] = ("observed", "D")
    for events, stations in zip(deliveries(EVENT_ROWS, 2), deliveries(STATION_ROWS, 2), strict=True):
        regions = [REGION_ROWS] if events[0]["id"] == 0 else []  # all in the first delivery
        chain.execute({EVENTS: [events], STATIONS: [stations], REGIONS: regions})
    chain.execute(watermarks={EVENTS: FAR, STATIONS: FAR, REGIONS: FAR})

    con = duckdb.connect()
    con.register("e", pa.Table.from_pylist(EVENT_ROWS))
    con.register("d", pa.Table.from_pylist(STATION_ROWS))
    con.register("g", pa.Table.from_pylist(REGION_ROWS))
    answer = con.sql("""
        WITH named AS (SELECT e.event_time, d.region_id, d.observed FROM e ASOF JOIN d
                       ON e.k = d.k AND e.event_time >= d.event_time),
        placed AS (SELECT n.event_time, g.region FROM named n ASOF JOIN g
                   ON n.region_id = g.region_id AND n.event_time >= g.event_time WHERE n.observed <> 'D')
        SELECT time_bucket(INTERVAL 1 DAY, event_time) + INTERVAL 1 DAY AS event_time, region, count(*)
        FROM placed GROUP BY ALL""").fetchall()
    assert rows(chain) == sorted(answer)


def test_migrate_keeps_the_history_and_the_waiting_events(make_chain, engine_client):
    """A query change starts Spark's state afresh but keeps what the temporal join needs."""
    from coordinator.engine.port import MigrateRequest

    chain = make_chain(temporal(AS_OF.format(join="JOIN"), STATIONS), SCHEMAS)
    chain.removals[STATIONS] = ("observed", "D")
    early = [r for r in STATION_ROWS if r["event_time"] <= hour(30)]
    chain.execute({EVENTS: [EVENT_ROWS], STATIONS: [early]})
    changed = temporal(AS_OF.format(join="JOIN") + " WHERE e.id >= 0", STATIONS)
    migrated = chain.run_dir / "migrated"
    engine_client.migrate(MigrateRequest(
        transaction_id="migrate", dataset_id="com.example.derived", prev_transform=chain.transform,
        next_transform=changed, prev_checkpoint_dir=chain.checkpoint, new_checkpoint_dir=migrated))
    chain.transform, chain.checkpoint = changed, migrated
    chain.execute({STATIONS: [[r for r in STATION_ROWS if r["event_time"] > hour(30)]]},
                  watermarks={EVENTS: FAR, STATIONS: FAR})
    assert rows(chain) == asof_answer("JOIN")


# The current ODF's system columns, which a query may name like any other column; the words
# the rewrite looks for also appear in a comment and a string.
ODF_STATIONS = input_schema(offset=pa.int64(), op=pa.int32(), k=pa.int64(), name=pa.string())
ODF_STATION_ROWS = [{"event_time": r["event_time"], "offset": n, "op": 0, "k": r["k"], "name": r["name"]}
                    for n, r in enumerate(STATION_ROWS) if r["observed"] != "D"]
OFFSET_QUERY = """SELECT e.event_time, e.id, e.k, d.name -- not FOR SYSTEM_TIME AS OF d.event_time
FROM `wx.temps` AS e JOIN `ref.stations` FOR SYSTEM_TIME AS OF e.event_time AS d
ON e.k = d.k AND d.offset % 2 = 0 AND d.`op` = 0 AND d.name <> 'JOIN `ref.stations` ON d.offset'"""


def test_a_condition_on_the_versions_offset_and_op_keeps_the_events_whose_version_passes(make_chain):
    chain = make_chain(temporal(OFFSET_QUERY, STATIONS), {EVENTS: SCHEMAS[EVENTS], STATIONS: ODF_STATIONS})
    chain.execute({EVENTS: [EVENT_ROWS], STATIONS: [ODF_STATION_ROWS]})
    chain.execute(watermarks={EVENTS: FAR, STATIONS: FAR})

    con = duckdb.connect()
    con.register("e", pa.Table.from_pylist(EVENT_ROWS))
    con.register("d", pa.Table.from_pylist(ODF_STATION_ROWS))
    answer = con.sql("""SELECT e.event_time, e.id, e.k, d.name FROM e ASOF JOIN d
                        ON e.k = d.k AND e.event_time >= d.event_time WHERE d."offset" % 2 = 0""").fetchall()
    assert 0 < len(answer) < len(EVENT_ROWS)  # the condition drops some events, not all
    assert rows(chain) == sorted(answer)


# ----- planning: refusals and lineage (no data) -------------------------------------------------

VOCAB = DatasetVocabulary()
PLAN_INPUTS = [InputSchema(name, VOCAB, schema) for name, schema in SCHEMAS.items()]


def validate(engine_client, query: str):
    return engine_client.validate(ValidateRequest(
        transaction_id="validate-temporal", dataset_id="x", inputs=PLAN_INPUTS,
        transform=temporal(query, STATIONS), vocab=VOCAB))


@pytest.mark.parametrize(("query", "message"), [
    (AS_OF.format(join="RIGHT JOIN"), "a temporal join is an inner or left join, not RIGHT"),
    (AS_OF.format(join="JOIN").replace("ON e.k = d.k", "USING (k)"), "give the join condition with ON"),
    ("SELECT e.event_time FROM `wx.temps` AS e JOIN `wx.temps` FOR SYSTEM_TIME AS OF e.event_time AS d "
     "ON e.k = d.k", "FOR SYSTEM_TIME AS OF `wx.temps`: not a temporal table of this transform"),
], ids=["right-join", "using", "not-temporal"])
def test_a_temporal_join_spark_cannot_run_is_one_line(engine_client, query, message):
    with pytest.raises(EngineError) as failure:
        validate(engine_client, query)
    assert failure.value.kind is EngineErrorKind.INVALID_QUERY
    assert message in failure.value.message
    assert "\n" not in failure.value.message


JOINED = "SELECT e.event_time, d.name FROM `wx.temps` AS e "


@pytest.mark.parametrize("query", [
    JOINED + "JOIN `ref.stations` AS d ON e.k = d.k",
    JOINED + "JOIN IDENTIFIER('`ref.stations`') AS d ON e.k = d.k",
    "SELECT e.event_time FROM `wx.temps` AS e WHERE e.k IN (SELECT k FROM `ref.stations`)",
    JOINED + "JOIN `ref.stations` FOR SYSTEM_TIME AS OF d.event_time AS d ON e.k = d.k",
    JOINED + "JOIN `ref.stations` FOR SYSTEM_TIME AS OF TIMESTAMP '2024-06-01' AS d ON e.k = d.k",
    JOINED + "JOIN `ref.stations` FOR SYSTEM_TIME AS OF e.event_time + INTERVAL 1 DAY AS d ON e.k = d.k",
    JOINED + "JOIN `ref.stations` FOR SYSTEM_TIME AS OF e.id AS d ON e.k = d.k",
    "SELECT e.event_time, d.name FROM (SELECT k, CAST(id AS TIMESTAMP) AS event_time FROM `wx.temps`) AS e "
    "JOIN `ref.stations` FOR SYSTEM_TIME AS OF e.event_time AS d ON e.k = d.k",
], ids=["plain-join", "identifier", "subquery", "as-of-its-own-time", "as-of-a-constant",
        "as-of-a-later-time", "as-of-another-column", "as-of-a-renamed-column"])
def test_a_temporal_table_read_otherwise_than_as_of_the_event_time_is_refused(engine_client, query):
    """Read any other way, the temporal table would give an event versions from its future."""
    with pytest.raises(EngineError) as failure:
        validate(engine_client, query)
    message = failure.value.message
    assert failure.value.kind is EngineErrorKind.FORBIDDEN
    assert message.startswith("step 0 (the output): temporal table ref.stations ")
    assert "\n" not in message and "__odf" not in message


def test_a_primary_key_the_temporal_table_lacks_is_refused(engine_client):
    transform = TransformSql(engine="spark", query=AS_OF.format(join="JOIN"),
                             temporal_tables=[TemporalTable(id=STATIONS, primary_key=["iata"])])
    with pytest.raises(EngineError) as failure:
        engine_client.validate(ValidateRequest(transaction_id="validate-key", dataset_id="x",
                                               inputs=PLAN_INPUTS, transform=transform, vocab=VOCAB))
    assert failure.value.kind is EngineErrorKind.INVALID_QUERY
    assert failure.value.message.startswith("temporal table ref.stations: no column iata (it has system_time")


def numbered(paths: list) -> pa.Table:
    """The slices' rows, each with its identity: the file's name and its row in it."""
    tables = [pq.read_table(p) for p in paths]
    return pa.concat_tables([t.append_column("file", pa.array([p.name] * t.num_rows))
                             .append_column("row", pa.array(range(t.num_rows), pa.int64()))
                             for p, t in zip(paths, tables, strict=True)])


def test_provenance_of_a_temporal_join_names_the_version_in_force_at_each_event(engine_client, engine_root):
    """Each record of a left temporal join comes from its event and, when the key had a version
    then, the station row that started it: found by DuckDB's ASOF JOIN over the slices' rows,
    a removal being no version (station 5 between hours 40 and 60, station 7 never)."""
    folder = engine_root.data / "provenance"
    paths = {name: [write_slice(folder / name / f"slice{k}.parquet", part, SCHEMAS[name])
                    for k, part in enumerate(deliveries(rows, 2))]
             for name, rows in ((EVENTS, EVENT_ROWS), (STATIONS, STATION_ROWS))}
    con = duckdb.connect()
    con.register("e", numbered(paths[EVENTS]))
    con.register("d", numbered(paths[STATIONS]))
    answer = con.sql("""
        WITH matched AS (SELECT e.*, d.observed, d.name, d.file AS d_file, d.row AS d_row
                         FROM e ASOF LEFT JOIN d ON e.k = d.k AND e.event_time >= d.event_time)
        SELECT event_time, id, k, CASE WHEN observed = 'D' THEN NULL ELSE name END AS name, file, row,
               CASE WHEN observed = 'D' THEN NULL ELSE d_file END AS d_file, d_row
        FROM matched ORDER BY id""").to_arrow_table()
    removed = [r for r in answer.to_pylist() if r["k"] == 5 and r["d_file"] is None]
    assert removed and [r for r in answer.to_pylist() if r["k"] == 7]
    records = answer.select(["event_time", "id", "k", "name"]).append_column("__odf_record", answer["id"])

    derivations = engine_client.derive_provenance(ProvenanceRequest(
        transaction_id="provenance-temporal", dataset_id="x",
        transform=temporal(AS_OF.format(join="LEFT JOIN"), STATIONS),
        inputs=[ExecuteInput(EVENTS, VOCAB, SCHEMAS[EVENTS], paths[EVENTS]),
                ExecuteInput(STATIONS, VOCAB, SCHEMAS[STATIONS], paths[STATIONS], removal=("observed", "D"))],
        vocab=VOCAB, records=records)).derivations

    got: dict[int, set] = {}
    for d in derivations.to_pylist():
        got.setdefault(d["record"], set()).add((d["input"], d["file"], d["row"]))
    expected = {r["id"]: {(EVENTS, r["file"], r["row"])}
                | ({(STATIONS, r["d_file"], r["d_row"])} if r["d_file"] else set())
                for r in answer.to_pylist()}
    assert got == expected
    assert len(set(derivations["derivation"].to_pylist())) == len(EVENT_ROWS)  # one derivation each


def test_hidden_columns_stay_hidden_and_lineage_names_the_temporal_table(engine_client):
    query = ("SELECT e.id AS event_id, d.* FROM `wx.temps` AS e "
             "JOIN `ref.stations` FOR SYSTEM_TIME AS OF e.event_time AS d ON e.k = d.k")
    schema = validate(engine_client, query).schema
    assert not [n for n in schema.names if n.startswith("__odf")]
    lineage = engine_client.derive_field_lineage(LineageRequest(
        transaction_id="lineage-temporal", dataset_id="x", inputs=PLAN_INPUTS,
        transform=temporal(query, STATIONS), vocab=VOCAB))
    name = next(f for f in lineage.fields if f.field == "name")
    assert [(s.input, s.field) for s in name.sources] == [(STATIONS, "name")]
    conditions = {(c.input, c.field) for c in lineage.conditions or []}
    assert (STATIONS, "k") in conditions and (EVENTS, "event_time") in conditions
    assert not [c for c in conditions if c[1].startswith("__odf")]
