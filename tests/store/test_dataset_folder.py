"""Current-ODF dataset folders (``coordinator/store``): the reference's layout, the state read in
one pass, verify, and each kind of damage reported in one line naming block, file and fault.

The datasets are the fixture's (``tests/support/odf39_datasets.py``), written once through the
append path; a test that damages one works on its own copy.
"""
from __future__ import annotations

import dataclasses
import hashlib
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest

from coordinator.metadata.did import DatasetId
from coordinator.metadata.multiformats import Multihash
from coordinator.metadata.odf39 import codec
from coordinator.metadata.odf39 import events as e
from coordinator.metadata.odf39 import source as s
from coordinator.store import layout
from coordinator.store.read import ChainBroken, StoreError, read_head, read_state
from coordinator.store.verify import verify_folder
from tests.support.odf39_datasets import (
    QUERY,
    ROOT_KEY,
    SCHEMA,
    SOURCE,
    Written,
    write_derivative,
    write_root,
)
from tests.support.tamper import flip_a_byte


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> tuple[Written, Written]:
    base = tmp_path_factory.mktemp("odf39")
    root = write_root(base / "cities", base / "locks", base / "scratch")
    return root, write_derivative(base / "large-cities", base / "locks", base / "scratch", root)


@pytest.fixture
def root(written) -> Written:
    return written[0]


@pytest.fixture
def derivative(written) -> Written:
    return written[1]


def copy(dataset: Written, tmp_path: Path) -> Written:
    """A copy of ``dataset`` this test may damage."""
    folder = tmp_path / dataset.root.name
    shutil.copytree(dataset.root, folder)
    return dataclasses.replace(dataset, root=folder)


def problems(dataset: Written) -> list[str]:
    return [str(p) for p in verify_folder(dataset.root)]


# --- the layout ------------------------------------------------------------------------------


def test_refs_head_names_the_newest_block_in_base16_without_a_newline(root):
    text = (root.root / "refs" / "head").read_text()
    assert text == str(root.blocks[-1]) and text.startswith("f1620") and len(text) == 69


def test_every_object_is_named_by_the_sha3_multihash_of_its_bytes(derivative):
    for folder in ("blocks", "data", "checkpoints"):
        files = list((derivative.root / folder).iterdir())
        assert files
        for f in files:
            assert f.name == "f1620" + hashlib.sha3_256(f.read_bytes()).hexdigest()


def test_the_folder_holds_blocks_data_checkpoints_refs_and_the_alias(derivative):
    assert sorted(p.name for p in derivative.root.iterdir()) == sorted(layout.FOLDERS)
    names = sorted(f.name for f in (derivative.root / "blocks").iterdir())
    assert names == sorted(map(str, derivative.blocks))
    assert sorted(f.name for f in (derivative.root / "data").iterdir()) == sorted(map(str, derivative.data))
    assert (derivative.root / "info" / "alias").read_text() == "large-cities"


def test_blocks_are_stored_as_version_3_manifests_linked_by_hash(root):
    stored = (root.root / layout.block_file(root.blocks[1])).read_bytes()
    assert codec.decode_envelope(stored).version == 3
    assert codec.decode_block(stored).prev_block_hash == root.blocks[0]


# --- read in one pass ------------------------------------------------------------------------


def test_a_root_reads_back_with_its_id_source_schema_slices_and_watermark(root):
    state = read_state(root.root)
    assert state.id == root.id == DatasetId.from_public_key(ROOT_KEY)
    assert state.kind == e.DatasetKind.ROOT
    assert state.head == root.blocks[-1] and state.sequence_number == len(root.blocks) - 1
    assert state.polling_source == SOURCE and state.schema == SCHEMA and state.transform is None
    offsets = [(r.slice.offset_interval.start, r.slice.offset_interval.end) for r in state.slices]
    assert offsets == [(0, 2), (3, 4)]
    assert [r.slice.physical_hash for r in state.slices] == list(root.data)
    assert [r.slice.size for r in state.slices] == [
        (root.root / layout.data_file(h)).stat().st_size for h in root.data]
    assert state.last_offset == 4
    assert state.watermark == datetime(2025, 2, 3, tzinfo=UTC)
    assert state.source_state == e.SourceState(source_name="default", kind="odf/etag", value='"etag-1"')


def test_a_derivative_reads_back_with_its_transform_and_chained_checkpoints(derivative, root):
    state = read_state(derivative.root)
    assert state.kind == e.DatasetKind.DERIVATIVE and state.polling_source is None
    assert state.transform.transform.queries == [s.SqlQueryStep(query=QUERY)]
    assert state.transform.inputs[0].dataset_ref == str(root.id)
    assert [c.checkpoint.physical_hash for c in state.checkpoints] == list(derivative.checkpoints)
    assert [c.block_hash for c in state.checkpoints] == list(derivative.blocks[-2:])
    assert state.last_checkpoint.physical_hash == derivative.checkpoints[-1]
    assert state.last_offset == 1  # one large city per batch


def test_an_empty_folder_holds_no_dataset(tmp_path):
    assert read_state(tmp_path) is None


def test_a_block_is_hashed_against_its_name_before_it_is_decoded(root, tmp_path):
    ds = copy(root, tmp_path)
    block = ds.root / layout.block_file(ds.blocks[2])
    block.write_bytes(b"\0" * 8)  # not a manifest at all: decoding would fail otherwise
    with pytest.raises(ChainBroken, match=rf"^block 2 \({ds.blocks[2]}\): blocks/{ds.blocks[2]}: "
                                          "its bytes hash to f1620"):
        read_state(ds.root)


# --- verify ----------------------------------------------------------------------------------


def test_the_fixture_datasets_verify_clean(root, derivative):
    assert problems(root) == [] and problems(derivative) == []


def test_a_flipped_byte_in_a_block_is_reported_at_that_block(root, tmp_path):
    ds = copy(root, tmp_path)
    block = ds.root / layout.block_file(ds.blocks[3])
    flip_a_byte(block, at=40)
    assert problems(ds) == [f"block 3 ({ds.blocks[3]}): blocks/{ds.blocks[3]}: its bytes hash to "
                            f"{Multihash.sha3_256(block.read_bytes())}; the stored block is damaged"]


def test_a_flipped_byte_in_a_data_file_is_reported_before_the_file_is_parsed(root, tmp_path):
    ds = copy(root, tmp_path)
    name = layout.data_file(ds.data[1])
    flip_a_byte(ds.root / name, at=4)  # inside the Parquet magic: parsing it would fail otherwise
    [problem] = problems(ds)
    assert problem.startswith(f"block 4 ({ds.blocks[4]}): {name}: its bytes hash to f1620")
    assert problem.endswith("not to its name (the file was changed)")


def test_a_flipped_byte_in_a_checkpoint_is_reported(derivative, tmp_path):
    ds = copy(derivative, tmp_path)
    name = layout.checkpoint_file(ds.checkpoints[0])
    flip_a_byte(ds.root / name, at=3)
    [problem] = problems(ds)
    assert problem.startswith(f"block 3 ({ds.blocks[3]}): {name}: its bytes hash to ")


def test_a_missing_data_file_is_reported(derivative, tmp_path):
    ds = copy(derivative, tmp_path)
    (ds.root / layout.data_file(ds.data[1])).unlink()
    assert problems(ds) == [f"block 4 ({ds.blocks[4]}): {layout.data_file(ds.data[1])}: missing"]


def test_a_truncated_checkpoint_is_reported_by_its_size(derivative, tmp_path):
    ds = copy(derivative, tmp_path)
    path = ds.root / layout.checkpoint_file(ds.checkpoints[1])
    size = path.stat().st_size
    path.write_bytes(path.read_bytes()[:-1])
    assert problems(ds) == [f"block 4 ({ds.blocks[4]}): {layout.checkpoint_file(ds.checkpoints[1])}: "
                            f"{size - 1} bytes, the block records {size}"]


def test_a_renamed_block_is_reported_as_missing_where_the_chain_links_it(root, tmp_path):
    ds = copy(root, tmp_path)
    block = ds.root / layout.block_file(ds.blocks[1])
    block.rename(block.with_name("f1620" + "0" * 64))
    assert problems(ds) == [f"block 1 ({ds.blocks[1]}): the next block links it, but "
                            f"blocks/{ds.blocks[1]} is missing"]


def test_refs_head_moved_to_an_unknown_block_is_reported(root, tmp_path):
    ds = copy(root, tmp_path)
    unknown = Multihash.sha3_256(b"no such block")
    (ds.root / layout.HEAD).write_text(str(unknown))
    assert problems(ds) == [f"head block ({unknown}): refs/head names it, but blocks/{unknown} is missing"]


def test_a_block_breaking_a_chain_rule_is_reported_with_the_rule(root, tmp_path):
    ds = copy(root, tmp_path)
    state = read_state(ds.root)
    last = state.blocks[-1].block
    # a valid block, stored and linked as a writer would, but its data does not follow on
    bad = codec.seal(e.MetadataBlock(
        system_time=last.system_time, prev_block_hash=state.head, sequence_number=5,
        event=dataclasses.replace(last.event, prev_offset=2)))
    (ds.root / layout.block_file(bad.hash)).write_bytes(bad.stored)
    (ds.root / layout.HEAD).write_text(str(bad.hash))
    assert problems(ds) == [f"block 5 ({bad.hash}): prevOffset is 2, the last offset of the chain is 4"]


def test_a_malformed_refs_head_is_refused_naming_the_file(root, tmp_path):
    ds = copy(root, tmp_path)
    (ds.root / layout.HEAD).write_text("main")
    with pytest.raises(StoreError, match=r"refs/head: .* is not a block hash"):
        read_head(ds.root)


def test_a_refs_head_with_a_trailing_newline_is_refused_as_the_reference_refuses_it(root, tmp_path):
    ds = copy(root, tmp_path)
    head = (ds.root / layout.HEAD).read_text()
    (ds.root / layout.HEAD).write_text(head + "\n")
    with pytest.raises(StoreError, match=r"refs/head: .* is not a block hash \(f1620... without a newline\)"):
        read_head(ds.root)


def test_every_problem_is_listed_oldest_block_first(derivative, tmp_path):
    ds = copy(derivative, tmp_path)
    (ds.root / layout.data_file(ds.data[1])).unlink()
    (ds.root / layout.checkpoint_file(ds.checkpoints[0])).unlink()
    assert [p.split(":")[0] for p in problems(ds)] == [
        f"block 3 ({ds.blocks[3]})", f"block 4 ({ds.blocks[4]})"]


def test_a_block_whose_logical_hash_lies_about_its_file_is_found_by_a_deep_verify_only(tmp_path):
    """The physical hash proves the bytes are the ones the block was written with; that the
    block's logical hash is the records' own is the deep check (the file is read)."""
    from coordinator.metadata.multiformats import ARROW0_SHA3_256
    from coordinator.store.append import DatasetWriter
    from tests.support.odf39_datasets import at, rows, slice_file

    folder = tmp_path / "cities"
    with DatasetWriter(folder, tmp_path / "cities.lock") as w:
        w.seed(ROOT_KEY, e.DatasetKind.ROOT, at(0))
        w.append(SOURCE, system_time=at(1))
        w.append(SCHEMA, system_time=at(1))
        path, data = slice_file(rows([(at(0), "Oslo", 709_037)]), at(10), None, tmp_path / "s")
        lying = dataclasses.replace(data, logical_hash=Multihash(ARROW0_SHA3_256, bytes(32)))
        w.append(e.AddData(new_data=lying, new_watermark=at(0)), system_time=at(10), data=path)
    assert verify_folder(folder, deep=False) == []
    [found] = verify_folder(folder)
    assert "its records hash to f" in str(found) and str(found).startswith("block 3 (")
