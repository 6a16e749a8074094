"""Files read by the real Spark engine (``ingest.engine: spark``) make the same blocks as files
read by the coordinator: same logical hashes, same records in the same order.

Each case pulls the same input into two workspaces, one per reader, and compares the slices.
One sandboxed engine serves the module (Spark starts once).
"""
from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from coordinator.engine.session import open_engine
from coordinator.engine.settings import EngineSettings
from coordinator.ingest import IngestError, pull_root
from coordinator.workspace import Workspace

from .conftest import DATASET, add_dataset
from .test_bounded_memory import big_csv

pytestmark = pytest.mark.spark

SOURCE = """
source:
  kind: root
  fetch: {kind: filesGlob, path: "in/*"}
  read: %s
  merge: {kind: append}
vocab: {eventTimeColumn: at}
"""

# Values where readers tend to differ: quoted and unquoted empties, doubled quotes, separators
# and the null marker inside quotes, unicode, decimals, dates, times with and without a zone.
AWKWARD_CSV = '''\
id,at,name,price,day,ok
1,2024-01-01T10:00:00Z,plain,1.50,2024-01-01,true
2,2024-01-01T10:00:00Z,"",0,2024-01-02,false
3,2024-01-01 11:30:00,,-2.25,,
4,2024-01-02T00:00:00.123456Z,"say ""hi""",1e3,2024-02-29,TRUE
5,2024-01-02T00:00:00Z,"a,b",NA,1999-12-31,false
6,2024-01-03T00:00:00+02:00,"quoted, NA",3.14159,2024-03-01,true
7,2024-01-03T00:00:00Z,Zürich — ✓,12345678.9,2000-01-01,false
'''
AWKWARD_SCHEMA = ('["id BIGINT", "at TIMESTAMP", "name STRING", "price DECIMAL(12,4)", "day DATE", '
                  '"ok BOOLEAN"]')


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    home = Workspace.init(tmp_path_factory.mktemp("spark-reader") / "ws")
    with open_engine(home, [], EngineSettings(runtime="sandbox")) as running:
        yield running


def pull_both_ways(tmp_path, engine, read: str, files: dict[str, bytes], limit: str = "1GiB"):
    """The same input pulled by each reader: {reader: ([DataSlice], [its records])}."""
    pulled = {}
    for reader in ("coordinator", "spark"):
        ws = Workspace.init(tmp_path / reader)
        ws.save_config(ws.config().set("ingest.engine", reader).set("ingest.maxSliceBytes", limit))
        add_dataset(ws, SOURCE % read)
        for name, data in files.items():
            (ws.root / "in").mkdir(exist_ok=True)
            (ws.root / "in" / name).write_bytes(data)
        pull_root(ws, DATASET, engine=lambda: engine)
        ds = ws.dataset(DATASET)
        slices = [b.output_slice for _, b in reversed(list(ds.blocks())) if b.output_slice]
        # without system_time: the time of each pull
        pulled[reader] = slices, [pq.read_table(f).drop_columns(["system_time"]) for f in ds.data_files()]
    return pulled


def same_blocks(pulled) -> bool:
    (spark, spark_records), (ours, our_records) = pulled["spark"], pulled["coordinator"]
    return [(s.hash, s.num_records) for s in spark] == [(s.hash, s.num_records) for s in ours] \
        and pa.concat_tables(spark_records).equals(pa.concat_tables(our_records))


def test_a_typed_csv_with_awkward_values_makes_the_same_block(tmp_path, engine):
    read = f'{{kind: csv, header: true, nullValue: NA, schema: {AWKWARD_SCHEMA}}}'
    pulled = pull_both_ways(tmp_path, engine, read, {"a.csv": AWKWARD_CSV.encode()})
    assert pulled["spark"][0][0].num_records == 7
    assert same_blocks(pulled)


def test_an_untyped_csv_is_typed_by_the_coordinator_and_read_alike(tmp_path, engine):
    text = AWKWARD_CSV.replace(",NA,", ",,")  # inference would read "NA" as text
    assert same_blocks(pull_both_ways(tmp_path, engine, "{kind: csv, header: true}",
                                      {"a.csv": text.encode()}))


def test_a_large_csv_split_by_spark_keeps_the_files_record_order(tmp_path, engine):
    path = big_csv(tmp_path / "src.csv", 120_000)  # ~5.5 MB: Spark splits of 1 MiB (slice/4)
    read = '{kind: csv, header: true, schema: ["id BIGINT", "at TIMESTAMP", "name STRING"]}'
    pulled = pull_both_ways(tmp_path, engine, read, {"a.csv": path.read_bytes()}, limit="4MiB")
    # blocks are cut where the pieces add up to the limit, and the pieces differ; each block
    # holds the next run of the file's records
    spark_blocks = [sorted(t.column("id").to_pylist()) for t in pulled["spark"][1]]
    assert len(spark_blocks) > 1
    assert [i for ids in spark_blocks for i in ids] == list(range(120_000))


def test_json_lines_with_a_schema_make_the_same_block(tmp_path, engine):
    lines = b"".join(b'{"id": %d, "at": "2024-01-0%dT00:00:00Z", "name": %s}\n'
                     % (i, 1 + i % 3, b'null' if i % 4 == 0 else b'"n%d"' % i) for i in range(50))
    read = '{kind: jsonLines, schema: ["id BIGINT", "at TIMESTAMP", "name STRING"]}'
    assert same_blocks(pull_both_ways(tmp_path, engine, read, {"a.jsonl": lines}))


def test_a_parquet_file_makes_the_same_block(tmp_path, engine):
    table = pa.table({"id": pa.array(range(1000), pa.int64()),
                      "at": pa.array([1_700_000_000_000_000 + i for i in range(1000)],
                                     pa.timestamp("us", tz="UTC")),
                      "score": pa.array([i / 3 if i % 9 else None for i in range(1000)])})
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    read = "{kind: parquet}"
    assert same_blocks(pull_both_ways(tmp_path, engine, read, {"a.parquet": sink.getvalue().to_pybytes()}))


def test_a_value_spark_cannot_read_as_its_type_fails_the_pull_naming_its_line_and_column(ws, engine):
    ws.save_config(ws.config().set("ingest.engine", "spark"))
    add_dataset(ws, SOURCE % '{kind: csv, header: true, schema: ["id BIGINT", "at TIMESTAMP"]}')
    (ws.root / "in").mkdir()
    (ws.root / "in" / "bad.csv").write_text("id,at\n1,2024-01-01T00:00:00Z\nseven,2024-01-01T00:00:00Z\n")
    with pytest.raises(IngestError, match=r"bad\.csv:3: column 'id'"):
        pull_root(ws, DATASET, engine=lambda: engine)
    assert not ws.dataset(DATASET).data_files()
