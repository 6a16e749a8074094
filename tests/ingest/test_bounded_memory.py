"""Pulls larger than ``ingest.maxSliceBytes``: several blocks, files read in pieces, exactly once.

The expected records are computed independently of the ingest path (pyarrow's own reader over
the whole file), and the blocks are compared with a pull of the same input in one go.
"""
import functools
import shutil

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from coordinator.ingest import IngestError, pull_root
from coordinator.ingest.read import read_pieces
from coordinator.metadata.objects import ReadStepCsv, ReadStepParquet
from coordinator.workspace import Workspace, layout

from ..support.cli import coord
from .conftest import DATASET, add_dataset, rows_of, slices_of

MiB = 1 << 20

SOURCE = """
source:
  kind: root
  fetch: {kind: filesGlob, path: "in/*.csv"}
  read: {kind: csv, header: true%s}
  merge: %s
"""
TYPED = ', schema: ["id BIGINT", "at TIMESTAMP", "name STRING"]'


def big_csv(path, rows, start=0):
    """``rows`` records of about 40 bytes (ids from ``start``), event times in file order."""
    lines = "".join(f"{i},2024-01-{1 + i % 28:02d}T00:00:00Z,name {i} {'x' * (i % 17)}\n"
                    for i in range(start, start + rows))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("id,at,name\n" + lines)
    return path


def expected_ids(*paths):
    return sorted(i for p in paths for i in pacsv.read_csv(p).column("id").to_pylist())


def limit(ws: Workspace, size: str) -> None:
    ws.save_config(ws.config().set("ingest.maxSliceBytes", size))


def dataset(ws, merge="{kind: append}", schema=TYPED):
    return add_dataset(ws, (SOURCE % (schema, merge)) +
                       "vocab: {eventTimeColumn: at}\n")


def test_a_pull_larger_than_the_slice_limit_commits_several_blocks_holding_every_record_once(ws):
    dataset(ws)
    files = [big_csv(ws.root / "in" / f"{k}.csv", 60_000, start=k * 60_000) for k in range(2)]
    limit(ws, "1MiB")
    result = pull_root(ws, DATASET)
    assert len(result.blocks) >= 3 and result.num_records == 120_000
    assert sorted(r["id"] for r in rows_of(ws)) == expected_ids(*files)
    for table in slices_of(ws):  # each block stays near the limit
        assert table.nbytes < 3 * MiB


def test_a_file_read_in_pieces_into_one_block_is_identical_to_reading_it_whole(tmp_path):
    path = big_csv(tmp_path / "in" / "one.csv", 80_000)  # ~3.7 MB: 4 pieces of 1 MiB
    blocks = {}
    for size in ("4MiB", "1GiB"):
        ws = Workspace.init(tmp_path / size)
        dataset(ws)
        (ws.root / "in").mkdir()
        (ws.root / "in" / "one.csv").write_bytes(path.read_bytes())
        limit(ws, size)
        pull_root(ws, DATASET)
        [(h, block)] = [(h, b) for h, b in ws.dataset(DATASET).blocks() if b.output_slice]
        blocks[size] = block.output_slice
    assert blocks["4MiB"].hash == blocks["1GiB"].hash
    assert blocks["4MiB"].num_records == 80_000


def test_pieces_of_an_untyped_csv_are_typed_by_the_first_piece(tmp_path):
    path = big_csv(tmp_path / "a.csv", 50_000)
    pieces = list(read_pieces(path, ReadStepCsv(header=True), "a.csv", MiB))
    assert len(pieces) > 1
    assert {p.schema for p in pieces} == {pieces[0].schema}
    assert pa.concat_tables(pieces).equals(pacsv.read_csv(path))


def test_a_late_value_that_does_not_fit_the_first_pieces_type_asks_for_a_schema(tmp_path):
    path = big_csv(tmp_path / "a.csv", 50_000)
    with open(path, "a") as f:
        f.write("1.5,2024-01-01T00:00:00Z,late\n")
    with pytest.raises(IngestError, match=r"a\.csv:50002: column 'id': .*declare the column types"):
        list(read_pieces(path, ReadStepCsv(header=True), "a.csv", MiB))


def test_a_bad_value_in_a_later_piece_is_reported_at_its_line_in_the_file(tmp_path):
    path = big_csv(tmp_path / "a.csv", 50_000)
    with open(path, "a") as f:
        f.write("oops,2024-01-01T00:00:00Z,late\n")
    step = ReadStepCsv(header=True, schema=["id BIGINT", "at STRING", "name STRING"])
    with pytest.raises(IngestError, match=r"a\.csv:50002: column 'id'"):
        list(read_pieces(path, step, "a.csv", MiB))


def test_comment_lines_and_a_commented_header_are_skipped_in_every_piece(tmp_path):
    path = big_csv(tmp_path / "a.csv", 40_000)
    text = path.read_text().splitlines(keepends=True)
    commented = ["# made by a test\n", text[0]] + [
        line for i, line in enumerate(text[1:]) for line in (["# note\n", line] if i % 1000 == 0 else [line])]
    path.write_text("".join(commented))
    step = ReadStepCsv(header=True, comment="#")
    pieces = list(read_pieces(path, step, "a.csv", MiB))
    assert len(pieces) > 1
    assert pa.concat_tables(pieces).column("id").to_pylist() == list(range(40_000))


def test_a_parquet_file_is_read_in_batches_of_rows(tmp_path):
    pq.write_table(pacsv.read_csv(big_csv(tmp_path / "a.csv", 60_000)), tmp_path / "a.parquet",
                   row_group_size=10_000)
    table = pq.read_table(tmp_path / "a.parquet")
    pieces = list(read_pieces(tmp_path / "a.parquet", ReadStepParquet(), "a.parquet", MiB // 2))
    assert len(pieces) > 1 and pa.concat_tables(pieces).equals(table)


def test_a_ledger_split_into_blocks_keeps_the_first_record_of_each_key(ws):
    dataset(ws, merge="{kind: ledger, primaryKey: [id]}")
    first = big_csv(ws.root / "in" / "1.csv", 60_000)
    again = big_csv(ws.root / "in" / "2.csv", 60_000, start=30_000)  # half of them seen
    limit(ws, "1MiB")
    result = pull_root(ws, DATASET)
    assert len(result.blocks) > 2
    ids = [r["id"] for r in rows_of(ws)]
    assert sorted(ids) == sorted(set(expected_ids(first, again))) == list(range(90_000))


def test_a_pull_killed_between_blocks_resumes_within_the_file_exactly_once(tmp_path):
    ws = Workspace.init(tmp_path / "w")
    dataset(ws)
    path = big_csv(ws.root / "in" / "one.csv", 120_000)
    limit(ws, "1MiB")
    killed = coord("pull", DATASET, cwd=ws.root, env={"COORD_CRASH_AT": "head-updated"}, check=False)
    assert killed.returncode == -9
    ds = ws.dataset(DATASET)
    [first] = [b for _, b in ds.blocks() if b.output_slice]
    state = ds.source_state()
    assert state.resume.file == "one.csv" and state.resume.records > 0

    coord("pull", DATASET, cwd=ws.root)
    ids = [r["id"] for r in rows_of(ws)]
    assert sorted(ids) == expected_ids(path)  # none lost, none twice
    assert ds.source_state().resume is None
    assert "up to date" in coord("pull", DATASET, cwd=ws.root).stdout


def test_a_file_changed_after_a_partial_pull_is_ingested_whole_with_a_note(tmp_path):
    ws = Workspace.init(tmp_path / "w")
    dataset(ws)
    path = big_csv(ws.root / "in" / "one.csv", 120_000)
    limit(ws, "1MiB")
    coord("pull", DATASET, cwd=ws.root, env={"COORD_CRASH_AT": "head-updated"}, check=False)
    partial = ws.dataset(DATASET).state().num_records
    big_csv(path, 10, start=500_000)  # rewritten before the next pull
    result = pull_root(ws, DATASET)
    assert result.num_records == 10
    assert result.notes == [f"one.csv is gone or changed since an earlier pull ingested its first "
                            f"{partial} records; what the source holds now is ingested whole"]


SNAPSHOT = """
source:
  kind: root
  fetch: {kind: filesGlob, path: "in/*.csv",
          eventTime: {kind: fromPath, pattern: 'snap-(\\d{4}-\\d\\d-\\d\\d)\\.csv'}}
  read: {kind: csv, header: true, schema: [%s]}
  merge: {kind: snapshot, primaryKey: [region, id]%s}
"""


def snapshot_file(path, day: int, rows: int, extra: bool) -> None:
    """Day ``day``'s snapshot: keys come and go with the day, some values change, some are
    NaN or null on some days (which must compare equal to themselves)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(snapshot_text(day, rows, extra))


@functools.cache  # the cases of a test write the same days
def snapshot_text(day: int, rows: int, extra: bool) -> str:
    out = ["region,id,price,label,note"]
    for i in range(rows):
        if (i + day) % 11 == 0:  # removed this day
            continue
        price = "NaN" if i % 13 == 0 else "" if i % 17 == 0 else f"{(i * (1 + (i % 7 == day % 7))) / 4}"
        line = f"r{i % 3},{i},{price},label {i % 5 if i % 19 else day}"
        out.append(line + (f",n{day}" if extra else ","))
    return "\n".join(out) + "\n"


def comparable(table: pa.Table, *, sort: bool = False) -> pa.Table:
    """Records without their system time, floats as their shortest text (and with ``sort`` in
    the order of their values): tables that compare equal hold the same values in the same
    order, NaN as NaN, null as null."""
    table = table.drop_columns(["system_time"])
    table = pa.table([pc.cast(c, pa.string()) if pa.types.is_floating(c.type) else c for c in table.columns],
                     names=table.column_names)
    return table.sort_by([(name, "ascending") for name in table.column_names]) if sort else table


@pytest.mark.parametrize("compare", ["", ", compareColumns: [price]"])
def test_a_snapshot_larger_than_the_slice_limit_is_merged_on_disk_into_the_same_blocks(tmp_path, compare):
    results = {}
    for case in ("on disk", "on disk, state cache lost", "in memory"):
        ws = Workspace.init(tmp_path / f"{case}{bool(compare)}".replace(" ", "-").replace(",", ""))
        columns = '"region STRING", "id BIGINT", "price DOUBLE", "label STRING", "note STRING"'
        add_dataset(ws, SNAPSHOT % (columns, compare))
        limit(ws, "1GiB" if case == "in memory" else "1MiB")
        for day in (1, 2):  # two snapshots in one pull
            snapshot_file(ws.root / "in" / f"snap-2024-01-0{day}.csv", day, 60_000, extra=False)
        assert (ws.root / "in" / "snap-2024-01-01.csv").stat().st_size > MiB  # so merged on disk
        pull_root(ws, DATASET)
        for day in (3, 4):  # then one pull each, the second with notes (nulls before)
            if case.endswith("lost"):  # rebuilt from every slice: rows superseded, removals
                shutil.rmtree(ws.meta / layout.cache_dir(DATASET, layout.SNAPSHOT_STATE))
            snapshot_file(ws.root / "in" / f"snap-2024-01-0{day}.csv", day, 60_000, extra=day == 4)
            pull_root(ws, DATASET)
        ds = ws.dataset(DATASET)
        results[case] = [(b.output_slice.hash, b.output_slice.num_records,
                          comparable(pq.read_table(ds.data_file(h))))
                         for h, b in reversed(list(ds.blocks())) if b.output_slice]
    in_memory = results["in memory"]
    assert len(in_memory) == 4 and all(n > 0 for _, n, _ in in_memory)
    # the same records in the same order (NaN as NaN), hashes
    assert results["on disk"] == results["on disk, state cache lost"] == in_memory


def test_a_snapshot_merged_on_disk_refuses_a_key_given_twice_naming_both_rows(ws):
    add_dataset(ws, SNAPSHOT % ('"region STRING", "id BIGINT", "price DOUBLE", "label STRING", '
                                '"note STRING"', ""))
    limit(ws, "1MiB")
    path = ws.root / "in" / "snap-2024-01-01.csv"
    snapshot_file(path, 1, 60_000, extra=False)
    with open(path, "a") as f:
        f.write("r0,3,1.0,again,\n")
    with pytest.raises(IngestError, match=r"rows 4 and 54547 have the same primary key "
                                          r"\{'region': 'r0', 'id': 3\}"):
        pull_root(ws, DATASET)
    assert not ws.dataset(DATASET).state().data_blocks  # nothing committed


@pytest.mark.parametrize("again", [
    ["r1,4,1.0,label 4,"],  # as in the state and the file: no change event shows it
    ["r1,4,2.5,label 4,"],  # one of the two changed
    ["r0,100000,1.0,new,", "r0,100000,1.0,new,"],  # a new key, twice
], ids=["unchanged", "changed", "new"])
def test_a_snapshot_diffed_on_disk_refuses_a_key_given_twice_before_committing(ws, again):
    add_dataset(ws, SNAPSHOT % ('"region STRING", "id BIGINT", "price DOUBLE", "label STRING", '
                                '"note STRING"', ""))
    limit(ws, "1MiB")
    snapshot_file(ws.root / "in" / "snap-2024-01-01.csv", 1, 60_000, extra=False)
    pull_root(ws, DATASET)
    held = ws.dataset(DATASET).state().data_blocks
    path = ws.root / "in" / "snap-2024-01-02.csv"
    snapshot_file(path, 2, 60_000, extra=False)
    rows = len(path.read_text().splitlines()) - 1
    assert path.read_text().splitlines()[5] == "r1,4,1.0,label 4,"  # row 5 (day 1's too)
    with open(path, "a") as f:
        f.write("\n".join(again) + "\n")
    first, key = (5, "'r1', 'id': 4") if len(again) == 1 else (rows + 1, "'r0', 'id': 100000")
    with pytest.raises(IngestError, match=rf"rows {first} and {rows + len(again)} have the same "
                                          rf"primary key \{{'region': {key}\}}"):
        pull_root(ws, DATASET)
    assert ws.dataset(DATASET).state().data_blocks == held  # nothing committed


def test_a_download_split_into_blocks_and_killed_resumes_in_the_same_version_once(tmp_path, site):
    ws = Workspace.init(tmp_path / "w")
    body = big_csv(tmp_path / "d.csv", 120_000).read_bytes()
    url = site.put("/d.csv", body, etag='"v1"')
    add_dataset(ws, f"""
        source:
          kind: root
          fetch: {{kind: url, url: "{url}"}}
          read: {{kind: csv, header: true{TYPED}}}
          merge: {{kind: append}}
        vocab: {{eventTimeColumn: at}}
    """)
    limit(ws, "1MiB")
    coord("pull", DATASET, cwd=ws.root, env={"COORD_CRASH_AT": "head-updated"}, check=False)
    assert ws.dataset(DATASET).source_state().resume.of.state.etag == '"v1"'

    result = pull_root(ws, DATASET)

    assert site.requests[-1].get("If-None-Match") is None  # fetched again from the start
    assert sorted(r["id"] for r in rows_of(ws)) == list(range(120_000)) and not result.notes
    assert pull_root(ws, DATASET).message == "up to date"


def latest_values(ws) -> str:
    """What the snapshot history says holds now, computed with pandas: the last row per key,
    unless it is a removal; as CSV text in key order."""
    table = pa.concat_tables(slices_of(ws), promote_options="permissive").to_pandas()
    latest = table.drop_duplicates(["region", "id"], keep="last")
    latest = latest[latest["observed"] != "D"]
    latest = latest[["region", "id", "price", "label", "note"]].sort_values(["region", "id"])
    return latest.to_csv(index=False)


def test_a_change_set_larger_than_a_slice_is_committed_in_blocks_and_resumed_after_a_kill(tmp_path):
    columns = '"region STRING", "id BIGINT", "price DOUBLE", "label STRING", "note STRING"'
    outcomes = {}
    for case in ("in memory", "on disk", "killed"):
        ws = Workspace.init(tmp_path / case.replace(" ", "-"))
        add_dataset(ws, SNAPSHOT % (columns, ""))
        limit(ws, "1GiB" if case == "in memory" else "1MiB")
        snapshot_file(ws.root / "in" / "snap-2024-01-01.csv", 1, 90_000, extra=False)
        if case == "killed":
            coord("pull", DATASET, cwd=ws.root, env={"COORD_CRASH_AT": "head-updated"}, check=False)
            assert len(ws.dataset(DATASET).state().data_blocks) == 1
        first = pull_root(ws, DATASET)
        snapshot_file(ws.root / "in" / "snap-2024-01-02.csv", 2, 90_000, extra=True)
        second = pull_root(ws, DATASET)
        day2 = pa.concat_tables([pq.read_table(ws.dataset(DATASET).data_file(h)) for h in second.blocks])
        outcomes[case] = (len(first.blocks), comparable(day2, sort=True),
                          latest_values(ws), ws.dataset(DATASET).state().num_records)
    memory, disk, killed = outcomes["in memory"], outcomes["on disk"], outcomes["killed"]
    assert memory[0] == 1 and disk[0] > 1 and killed[0] == disk[0] - 1
    assert memory[1:] == disk[1:] == killed[1:]  # same changes, same state, no record twice


def test_status_says_how_much_of_a_partly_ingested_file_is_in(tmp_path):
    ws = Workspace.init(tmp_path / "w")
    dataset(ws)
    big_csv(ws.root / "in" / "one.csv", 120_000)
    limit(ws, "1MiB")
    coord("pull", DATASET, cwd=ws.root, env={"COORD_CRASH_AT": "head-updated"}, check=False)
    records = ws.dataset(DATASET).state().num_records
    assert 0 < records < 120_000
    shown = coord("status", cwd=ws.root).stdout
    assert f"source changed: 1 file to ingest (one.csv; {records} records of the first already in)" in shown
