"""Repositories written by the reference implementation (kamu-cli of the ODF 0.18 era, v0.50).

Its ``kamu push`` lays a dataset out as this project does (``meta/refs/head``,
``meta/blocks/<hash>``, ``data/<block hash>``, ``checkpoint/<block hash>/``) with three
differences, which the fixture below reproduces: each block is stored as a YAML manifest
(``kind: MetadataBlock``, ``serde_yaml``'s ``---`` first) instead of FlatBuffers, the head has
no trailing newline, and nothing is signed (nor has a physical hash: 0.18 has no such field).
A block in YAML is taken when the hash of its FlatBuffers form equals its name.
"""
from __future__ import annotations

import csv
import io
from datetime import UTC, datetime

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from coordinator.metadata.block_hash import seal
from coordinator.metadata.ids import DatasetRef
from coordinator.metadata.manifest import MAX_BLOCK_MANIFEST, load_block_manifest
from coordinator.metadata.signing import SignatureStatus
from coordinator.metadata.timestamps import IntervalType
from coordinator.metadata.yaml_codec import render
from coordinator.repository import open_url, pull_from_repository, push_dataset
from coordinator.repository.fileio import FileIO
from coordinator.trust.verify import verify_dataset
from coordinator.workspace import Dataset, Workspace

from ..support.cli import coord
from .conftest import append_slices, make_derivative, make_root, with_repo

UP, DER = "org.example.events", "org.example.derived"


def lay_out_as_reference(ds: Dataset, store: FileIO, name: str | None = None) -> None:
    """Write ``ds`` into a repository the way kamu-cli v0.50's ``kamu push`` leaves it."""
    name = name or ds.id
    for h, block in ds.blocks():
        store.write_bytes(f"{name}/meta/blocks/{h.hex()}", b"---\n" + render(block).encode())
        if ds.data_file(h).exists():
            store.write_bytes(f"{name}/data/{h.hex()}", ds.data_file(h).read_bytes())
        folder = ds.checkpoint_dir(h)
        for f in folder.rglob("*") if folder.is_dir() else ():
            if f.is_file():
                store.write_bytes(f"{name}/checkpoint/{h.hex()}/{f.relative_to(folder).as_posix()}",
                                  f.read_bytes())
    store.write_bytes(f"{name}/meta/refs/head", ds.head().hex().encode())


@pytest.fixture
def reference_repo(ws, repo_url) -> str:
    """A root and a derivative of it, in the reference layout at ``repo_url``."""
    up = make_root(ws, UP, slices=2, physical=False)
    der = make_derivative(ws, DER, up, physical=False)
    store = open_url(repo_url)
    lay_out_as_reference(up, store)
    lay_out_as_reference(der, store)
    return repo_url


def test_a_reference_repository_is_pulled_stored_as_flatbuffers_and_verifies(ws, other_ws, reference_repo):
    with_repo(other_ws, reference_repo)
    for name in (UP, DER):
        coord("pull", f"shared/{name}", cwd=other_ws.root)
        copy, original = other_ws.dataset(name), ws.dataset(name)
        assert copy.head() == original.head()
        for h, block in original.blocks():  # this project's form, byte for byte
            assert copy.block_path(h).read_bytes() == seal(block)[1]
            assert not copy.signature_path(h).exists()
        proc = coord("verify", name, "--integrity", cwd=other_ws.root)
        assert "integrity: ok" in proc.stdout


def test_a_pulled_reference_root_reads_and_grows(ws, other_ws, reference_repo):
    with_repo(other_ws, reference_repo)
    coord("pull", f"shared/{UP}", cwd=other_ws.root)
    tail = coord("tail", UP, "-n", "100", "-o", "csv", cwd=other_ws.root).stdout
    original = ws.dataset(UP)
    written = [pq.read_table(original.data_file(h)) for h, b in original.blocks() if b.output_slice]
    expected = pa.concat_tables(written).column("value").to_pylist()
    assert sorted(row["value"] for row in csv.DictReader(io.StringIO(tail))) == sorted(expected)
    append_slices(other_ws.dataset(UP), 1)  # our own signed block on top of the unsigned chain
    assert "integrity: ok" in coord("verify", UP, "--integrity", cwd=other_ws.root).stdout


@pytest.fixture
def reference_root(ws, tmp_path) -> str:
    """A root dataset in the reference layout in a folder (what is refused is the same on S3)."""
    url = (tmp_path / "reference").as_uri()
    lay_out_as_reference(make_root(ws, UP, slices=2, physical=False), open_url(url))
    return url


def test_a_yaml_block_whose_flatbuffers_hash_is_not_its_name_is_refused(ws, other_ws, reference_root):
    repo = open_url(reference_root)
    h = ws.dataset(UP).head()
    path = f"{UP}/meta/blocks/{h.hex()}"
    text = repo.read_bytes(path, MAX_BLOCK_MANIFEST).decode()
    repo.write_bytes(path, text.replace("numRecords: 5", "numRecords: 6").encode())
    proc = coord("pull", f"shared/{UP}", cwd=with_repo(other_ws, reference_root).root, check=False)
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1
    assert f"block {h.hex()}: content hash does not match its name (YAML block" in proc.stderr
    assert not other_ws.dataset(UP).exists()


YAML_GARBAGE = {
    "alias": (b"---\napiVersion: 1\nkind: MetadataBlock\ncontent: &a {}\nx: *a\n",
              "aliases are not accepted"),
    "oversized": (b"---\n" + b"#" * MAX_BLOCK_MANIFEST, f"larger than {MAX_BLOCK_MANIFEST} bytes"),
    "not UTF-8": (b"apiVersion: 1\n\xff\xfe", "not UTF-8"),
    "nested deeply": (b"kind: " + b"[" * 50_000, "nested more than"),
    "another kind": (b"apiVersion: 1\nkind: DatasetSnapshot\ncontent: {}\n", "content"),
}


@pytest.mark.parametrize("case", YAML_GARBAGE)
def test_a_yaml_block_that_is_not_a_block_is_refused_in_one_line(ws, other_ws, reference_root, case):
    data, reason = YAML_GARBAGE[case]
    h = ws.dataset(UP).head()
    open_url(reference_root).write_bytes(f"{UP}/meta/blocks/{h.hex()}", data)
    proc = coord("pull", f"shared/{UP}", cwd=with_repo(other_ws, reference_root).root, check=False)
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1, proc.stderr
    assert f"block {h.hex()}: YAML block" in proc.stderr and reason in proc.stderr, proc.stderr
    assert not other_ws.dataset(UP).exists()


@pytest.mark.spark
def test_a_derivative_is_built_on_a_pulled_reference_root_and_replays(ws, other_ws, tmp_path):
    url = (tmp_path / "reference").as_uri()
    original = make_root(ws, UP, slices=2, physical=False)
    lay_out_as_reference(original, open_url(url))
    home = with_repo(other_ws, url).root
    coord("pull", f"shared/{UP}", cwd=home)
    doc = {"apiVersion": 1, "kind": "DatasetSnapshot", "content": {"id": DER, "source": {
        "kind": "derivative", "inputs": [UP],
        "transform": {"kind": "sql", "engine": "spark",
                      "query": f"SELECT event_time, upper(value) AS value FROM `{UP}`"}}}}
    (tmp_path / "derived.yaml").write_text(yaml.safe_dump(doc))
    coord("add", str(tmp_path / "derived.yaml"), cwd=home)
    coord("pull", DER, cwd=home)

    derived = other_ws.dataset(DER)
    got = pa.concat_tables(pq.read_table(f) for f in derived.data_files()).column("value").to_pylist()
    written = [pq.read_table(original.data_file(h)) for h, b in original.blocks() if b.output_slice]
    assert sorted(got) == sorted(v.upper() for v in pa.concat_tables(written).column("value").to_pylist())
    assert "reproducibility: reproduced" in coord("verify", DER, cwd=home).stdout


# A first block as the reference's serde_yaml writes one: `---` first, timestamps double-quoted
# with AutoSi sub-seconds, intervals in the spec's text syntax, lists indented, no final newline.
REFERENCE_STYLE = """---
apiVersion: 1
kind: MetadataBlock
content:
  blockHash: {block_hash}
  systemTime: "2021-06-01T12:00:00.000Z"
  outputWatermark: "2021-06-01T11:59:59.250Z"
  inputSlices:
    - hash: {input_hash}
      interval: "(-inf, 2021-06-01T12:00:00.000Z]"
      numRecords: 10
    - hash: {input_hash}
      interval: ()
      numRecords: 0
  source:
    kind: derivative
    inputs:
      - org.example.left
      - org.example.right
    transform:
      kind: sql
      engine: spark
      query: SELECT * FROM left UNION ALL SELECT * FROM right
  vocab:
    eventTimeColumn: date"""


def test_a_block_in_the_reference_style_is_read_and_pulled(other_ws, tmp_path):
    unsealed = REFERENCE_STYLE.format(block_hash="ff" * 32, input_hash="ab" * 32).encode()
    block, stored = seal(load_block_manifest(unsealed, "reference block"))
    assert block.system_time == datetime(2021, 6, 1, 12, tzinfo=UTC)
    assert block.output_watermark == datetime(2021, 6, 1, 11, 59, 59, 250_000, tzinfo=UTC)
    assert [s.interval.type for s in block.input_slices] == [IntervalType.UNBOUNDED_CLOSED_RIGHT,
                                                             IntervalType.EMPTY]
    url = (tmp_path / "reference").as_uri()
    store = open_url(url)
    h = block.block_hash.hex()
    store.write_bytes(f"{DER}/meta/blocks/{h}",
                      REFERENCE_STYLE.format(block_hash=h, input_hash="ab" * 32).encode())
    store.write_bytes(f"{DER}/checkpoint/{h}/offsets/0", b"the reference engine's state")
    store.write_bytes(f"{DER}/meta/refs/head", h.encode())
    coord("pull", f"shared/{DER}", cwd=with_repo(other_ws, url).root)
    assert other_ws.dataset(DER).block_path(block.block_hash).read_bytes() == stored


def test_blocks_pushed_on_top_of_a_reference_chain_are_read_back_with_it(ws, other_ws, reference_root,
                                                                       tmp_path):
    pull_from_repository(with_repo(other_ws, reference_root), DatasetRef.parse(f"shared/{UP}"))
    grown = other_ws.dataset(UP)
    append_slices(grown, 1)
    push_dataset(other_ws, UP, "shared")  # FlatBuffers blocks beside the YAML ones
    third = with_repo(Workspace.init(tmp_path / "third"), reference_root)
    third.save_config(third.config().set("trustedKeys", [other_ws.signing_key.public_key.hex()]))
    pull_from_repository(third, DatasetRef.parse(f"shared/{UP}"))
    assert third.dataset(UP).head() == grown.head()
    report = verify_dataset(third, UP, integrity_only=True)
    assert report.ok and report.blocks[-1].signature is SignatureStatus.TRUSTED
