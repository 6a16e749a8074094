"""``ingest.engine``: who reads a root's files, and how the engine's pieces go through the pull.

The DuckDB test engine stands in for Spark here (it reads with Arrow); that Spark reads the
same records as the coordinator is ``test_read_in_spark.py``'s business.
"""
import pytest

from coordinator.ingest import IngestError, pull_root
from coordinator.workspace import Workspace
from coordinator.workspace.config import ConfigError

from ..support.cli import coord
from ..support.fake_engine import FakeEngine
from .conftest import DATASET, add_dataset, rows_of, slices_of, write
from .test_bounded_memory import big_csv, dataset, expected_ids, limit


class CountingEngine(FakeEngine):
    def __init__(self, run_dir):
        super().__init__(run_dir)
        self.reads, self.inodes = [], []

    def read_source(self, request):
        self.reads.append((request.format, request.options))
        self.inodes.append(request.input_path.stat().st_ino)
        return super().read_source(request)


def reading_engine(ws: Workspace, mode: str) -> CountingEngine:
    ws.save_config(ws.config().set("ingest.engine", mode))
    return CountingEngine(ws.run_dir / "engine")


def test_with_ingest_engine_spark_the_engine_reads_the_files_and_the_block_is_the_same(tmp_path):
    blocks = {}
    for mode in ("coordinator", "spark"):
        ws = Workspace.init(tmp_path / mode)
        dataset(ws)
        big_csv(ws.root / "in" / "2024-01-01.csv", 5_000)
        engine = reading_engine(ws, mode)
        pull_root(ws, DATASET, engine=lambda engine=engine: engine)
        assert bool(engine.reads) == (mode == "spark")
        [block] = [b for _, b in ws.dataset(DATASET).blocks() if b.output_slice]
        blocks[mode] = block.output_slice
    assert blocks["spark"].hash == blocks["coordinator"].hash
    assert blocks["spark"].num_records == 5_000


def test_the_engine_is_told_the_coordinators_csv_conventions(ws):
    dataset(ws)
    big_csv(ws.root / "in" / "a.csv", 10)
    engine = reading_engine(ws, "spark")
    pull_root(ws, DATASET, engine=lambda: engine)
    [(format, options)] = engine.reads
    assert format == "csv"
    assert options["header"] == "true" and options["escape"] == '"'  # quotes are doubled
    assert "emptyValue" in options  # a quoted empty value stays an empty string


def test_the_engine_gets_a_copy_of_the_users_file_never_a_link_it_could_write_through(ws):
    dataset(ws)
    path = big_csv(ws.root / "in" / "a.csv", 10)  # read in place: no fetch or prepare copy
    engine = reading_engine(ws, "spark")
    pull_root(ws, DATASET, engine=lambda: engine)
    assert engine.inodes and path.stat().st_ino not in engine.inodes
    assert path.stat().st_nlink == 1


def test_a_file_the_engine_reads_in_several_parts_is_ingested_in_order_across_blocks(ws):
    dataset(ws)
    path = big_csv(ws.root / "in" / "a.csv", 100_000)  # ~4.6 MB, parts of 1 MiB
    limit(ws, "2MiB")
    engine = reading_engine(ws, "spark")
    result = pull_root(ws, DATASET, engine=lambda: engine)
    assert len(result.blocks) >= 2 and result.num_records == 100_000
    in_blocks = [sorted(t.column("id").to_pylist()) for t in slices_of(ws)]
    assert [i for ids in in_blocks for i in ids] == expected_ids(path)  # each block a run of the file


def test_a_pull_read_by_the_engine_and_killed_between_blocks_resumes_exactly_once(ws):
    dataset(ws)
    path = big_csv(ws.root / "in" / "one.csv", 120_000)
    limit(ws, "1MiB")
    ws.save_config(ws.config().set("ingest.engine", "spark"))
    killed = coord("pull", DATASET, cwd=ws.root, env={"COORD_CRASH_AT": "head-updated"},
                   check=False, fake_engine=True)
    assert killed.returncode == -9
    assert ws.dataset(DATASET).source_state().resume.records > 0
    coord("pull", DATASET, cwd=ws.root, fake_engine=True)
    assert sorted(r["id"] for r in rows_of(ws)) == expected_ids(path)  # none lost, none twice


def test_with_auto_only_files_from_the_threshold_on_go_to_the_engine(ws):
    dataset(ws)
    big_csv(ws.root / "in" / "small.csv", 10)
    big_csv(ws.root / "in" / "large.csv", 50_000, start=10)  # ~2.3 MB
    ws.save_config(ws.config().set("ingest.engineThreshold", "2MiB"))
    engine = reading_engine(ws, "auto")
    pull_root(ws, DATASET, engine=lambda: engine)
    assert len(engine.reads) == 1
    assert len(rows_of(ws)) == 50_010


def test_reading_in_the_engine_without_one_is_a_clear_error(ws):
    dataset(ws)
    big_csv(ws.root / "in" / "a.csv", 10)
    ws.save_config(ws.config().set("ingest.engine", "spark"))
    with pytest.raises(IngestError, match="a.csv: ingest.engine asks the SQL engine to read it"):
        pull_root(ws, DATASET)


def test_json_lines_without_a_schema_are_not_read_in_the_engine(ws):
    add_dataset(ws, """
        source:
          kind: root
          fetch: {kind: filesGlob, path: "in/*.jsonl"}
          read: {kind: jsonLines}
          merge: {kind: append}
        """)
    write(ws.root / "in" / "a.jsonl", '{"id": 1}\n')
    engine = reading_engine(ws, "spark")
    with pytest.raises(IngestError, match="a.jsonl: reading JSON Lines in the engine needs the "
                                          "read step's schema"):
        pull_root(ws, DATASET, engine=lambda: engine)


def test_an_unknown_ingest_engine_is_refused_by_the_config(ws):
    with pytest.raises(ConfigError, match="ingest.engine: expected coordinator, spark or auto"):
        ws.config().set("ingest.engine", "duckdb")
