"""Current-ODF (0.39) dataset folders written as the reference writes them, through the one
append path (``coordinator.store.append``): a root of city populations and a derivative of the
large cities over it.

Root ``cities``: Seed, SetPollingSource (CSV over a URL, append), SetDataSchema, AddData with
three records (source state, watermark), AddData with two more. Derivative ``large-cities``:
Seed, SetTransform (``SELECT ... WHERE population > 1000000`` over the root, normalized),
SetDataSchema, ExecuteTransform over the root's first AddData (a checkpoint), ExecuteTransform
over its second (``prevOffset`` and ``prevCheckpoint`` carried on, a new checkpoint). The data
files are real slices (``odf_slice.build_slice`` / ``write_slice``); the derivative's records
are the root's records filtered as its query says. ``append_unchecked`` adds a block no chain
rule is asked about (as another writer could), for the tests of those rules.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from coordinator.data.odf_schema import data_schema
from coordinator.data.odf_slice import build_slice, write_slice
from coordinator.metadata.did import DatasetId
from coordinator.metadata.multiformats import Multihash
from coordinator.metadata.odf39 import codec
from coordinator.metadata.odf39 import data as d
from coordinator.metadata.odf39 import events as e
from coordinator.metadata.odf39 import source as s
from coordinator.metadata.signing import SigningKey
from coordinator.store import layout
from coordinator.store.append import DatasetWriter, checkpoint_of, data_slice_of
from coordinator.store.dataset import CurrentDataset, new_dataset_key
from coordinator.store.read import walk
from coordinator.workspace import Workspace

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
ROOT_KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
DERIVATIVE_KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(32, 64)))

CITIES = pa.schema([("event_time", pa.timestamp("ms", tz="UTC")), ("city", pa.string()),
                    ("population", pa.int64())])
BATCHES = [
    [(datetime(2025, 1, 1, tzinfo=UTC), "Lisbon", 545_923),
     (datetime(2025, 1, 1, tzinfo=UTC), "Vancouver", 662_248),
     (datetime(2025, 1, 2, tzinfo=UTC), "Toronto", 2_794_356)],
    [(datetime(2025, 2, 1, tzinfo=UTC), "Seoul", 9_586_195),
     (datetime(2025, 2, 3, tzinfo=UTC), "Oslo", 709_037)],
]
QUERY = "SELECT event_time, city, population FROM cities WHERE population > 1000000"


def _field(name: str, t, nullable: bool) -> d.DataField:
    return d.DataField(name=name, type=d.DataTypeOption(inner=t) if nullable else t)


MS_UTC = d.DataTypeTimestamp(unit=d.TimeUnit.MILLISECOND, timezone="UTC")
SCHEMA = e.SetDataSchema(schema=d.DataSchema(fields=[
    _field("offset", d.DataTypeInt64(), False), _field("op", d.DataTypeInt32(), False),
    _field("system_time", MS_UTC, False), _field("event_time", MS_UTC, False),
    _field("city", d.DataTypeString(), True), _field("population", d.DataTypeInt64(), True),
]))
SOURCE = e.SetPollingSource(
    fetch=s.FetchStepUrl(url="https://example.org/cities.csv"),
    read=s.ReadStepCsv(header=True, ddl_schema=["event_time TIMESTAMP", "city STRING",
                                                "population BIGINT"]),
    merge=s.MergeStrategyAppend())


@dataclass(frozen=True)
class Written:
    """A dataset folder written here, and the names a test needs to find its parts."""

    root: Path
    id: DatasetId
    blocks: tuple[Multihash, ...]  # oldest first
    data: tuple[Multihash, ...]  # the data files' physical hashes, oldest first
    checkpoints: tuple[Multihash, ...]


def sql(engine: str, query: str) -> s.TransformSql:
    """A one-query transform as the spec stores it and the reference writes it (normalized:
    ``queries: [{query}]``, never ``query``), as ``coord add`` writes it too."""
    return s.TransformSql(engine=engine, queries=[s.SqlQueryStep(query=query)])


def append_unchecked(folder: Path, event: e.MetadataEvent, *, minutes: int = 1) -> Multihash:
    """One more block of ``event`` on the dataset in ``folder``, ``minutes`` after its head,
    written as another writer could: sealed with the codec and linked to the head, its bytes
    and ``refs/head`` written directly, no chain rule asked (coord's append path would refuse
    what a test of a rule writes)."""
    [head, *_], problem = walk(folder)
    assert problem is None
    block = e.MetadataBlock(system_time=head.block.system_time + timedelta(minutes=minutes),
                            prev_block_hash=head.hash,
                            sequence_number=head.block.sequence_number + 1, event=event)
    sealed = codec.seal(block)
    (folder / layout.block_file(sealed.hash)).write_bytes(sealed.stored)
    (folder / layout.HEAD).write_text(str(sealed.hash))
    return sealed.hash


def rows(batch: list[tuple]) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(CITIES.names, r, strict=True)) for r in batch],
                                schema=CITIES)


def at(minutes: int) -> datetime:
    return T0 + timedelta(minutes=minutes)


def slice_file(table: pa.Table, when: datetime, prev_offset: int | None,
               scratch: Path) -> tuple[Path, e.DataSlice]:
    """The slice of ``table`` written to a file in ``scratch``, and what a block records of it
    (``table`` may hold an ``op`` column: every row an append if not)."""
    stored = build_slice(table, system_time=when, prev_offset=prev_offset)
    scratch.mkdir(parents=True, exist_ok=True)
    path = scratch / f"slice-{when:%H%M}-{prev_offset}.parquet"
    return path, data_slice_of(write_slice(stored, path))


def write_root(folder: Path, locks: Path, scratch: Path, *, key: Ed25519PrivateKey = ROOT_KEY,
               signer: SigningKey | None = None) -> Written:
    """The root dataset ``cities`` in ``folder``: with ``key`` as its ``did:odf``'s, each block
    signed by ``signer`` (None: unsigned, as the reference writes it)."""
    blocks, data = [], []
    with DatasetWriter(folder, locks / "cities.lock", signer=signer) as w:
        dataset_id = w.seed(key, e.DatasetKind.ROOT, at(0), alias="cities")
        blocks.append(w.head)
        blocks.append(w.append(SOURCE, system_time=at(1)))
        blocks.append(w.append(SCHEMA, system_time=at(1)))
        prev_offset = None
        for n, batch in enumerate(BATCHES):
            path, new_data = slice_file(rows(batch), at(10 * (n + 1)), prev_offset, scratch)
            event = e.AddData(prev_offset=prev_offset, new_data=new_data,
                              new_watermark=max(r[0] for r in batch),
                              new_source_state=e.SourceState(source_name="default", kind="odf/etag",
                                                             value=f'"etag-{n}"'))
            blocks.append(w.append(event, system_time=at(10 * (n + 1)), data=path))
            data.append(new_data.physical_hash)
            prev_offset = new_data.offset_interval.end
    return Written(folder, dataset_id, tuple(blocks), tuple(data), ())


def write_derivative(folder: Path, locks: Path, scratch: Path, root: Written,
                     query: str = QUERY, checkpoint: bytes | None = None) -> Written:
    """The derivative ``large-cities`` over ``root`` in ``folder``; its records are always
    ``QUERY``'s, whatever ``query`` its SetTransform says (another one makes a forgery); each
    step's checkpoint file holds ``checkpoint`` when given (an author may put anything there)."""
    add_data = root.blocks[-len(BATCHES):]  # the root's AddData blocks
    blocks, data, checkpoints = [], [], []
    with DatasetWriter(folder, locks / "large-cities.lock") as w:
        dataset_id = w.seed(DERIVATIVE_KEY, e.DatasetKind.DERIVATIVE, at(0), alias="large-cities")
        blocks.append(w.head)
        transform = e.SetTransform(
            inputs=[e.TransformInput(dataset_ref=str(root.id), alias="cities")],
            transform=sql("datafusion", query))
        blocks.append(w.append(transform, system_time=at(1)))
        blocks.append(w.append(SCHEMA, system_time=at(1)))
        prev_offset = prev_checkpoint = prev_block = input_offset = None
        for n, batch in enumerate(BATCHES):
            when = at(10 * (n + 1) + 5)
            table = rows(batch)
            large = table.filter(pc.greater(table["population"], 1_000_000))
            path, new_data = slice_file(large, when, prev_offset, scratch)
            state = scratch / f"checkpoint-{n}"  # slice_file made the folder
            state.write_bytes(checkpoint or f"engine state after {add_data[n]}".encode())
            new_checkpoint = checkpoint_of(state)
            new_offset = (-1 if input_offset is None else input_offset) + len(batch)
            step = e.ExecuteTransform(
                query_inputs=[e.ExecuteTransformInput(
                    dataset_id=root.id, prev_block_hash=prev_block, new_block_hash=add_data[n],
                    prev_offset=input_offset, new_offset=new_offset)],
                prev_checkpoint=prev_checkpoint, prev_offset=prev_offset, new_data=new_data,
                new_checkpoint=new_checkpoint, new_watermark=max(r[0] for r in batch))
            blocks.append(w.append(step, system_time=when, data=path, checkpoint=state))
            data.append(new_data.physical_hash)
            checkpoints.append(new_checkpoint.physical_hash)
            prev_offset, prev_checkpoint = new_data.offset_interval.end, new_checkpoint.physical_hash
            prev_block, input_offset = add_data[n], new_offset
    return Written(folder, dataset_id, tuple(blocks), tuple(data), tuple(checkpoints))


def append_rows(folder: Path, locks: Path, scratch: Path, batch: list[tuple], *,
                watermark: datetime | None = None, op: int | None = None) -> Multihash:
    """One more AddData of the cities in ``folder``: ``batch``'s records (each of operation
    type ``op`` when given); see ``append_table``."""
    table = rows(batch)
    if op is not None:
        table = table.append_column("op", pa.array([op] * len(batch), pa.int32()))
    return append_table(folder, locks, scratch, table, watermark=watermark)


def append_table(folder: Path, locks: Path, scratch: Path, table: pa.Table, *,
                 watermark: datetime | None = None) -> Multihash:
    """One more AddData on the root in ``folder``, ten minutes after its head: ``table``'s
    records (event time and data, maybe ``op``), the watermark ``watermark`` or else the
    newest event time; no records and a watermark: a block that only moves the watermark."""
    with DatasetWriter(folder, locks / f"{folder.name}.lock") as w:
        state = w.state
        assert state is not None
        when = state.blocks[-1].block.system_time + timedelta(minutes=10)
        newest = pc.max(table["event_time"]).as_py() if table.num_rows else None
        moved = max(t for t in (state.watermark, watermark, newest) if t is not None)
        if not table.num_rows:
            return w.append(e.AddData(prev_offset=state.last_offset, new_watermark=moved),
                            system_time=when)
        path, new_data = slice_file(table, when, state.last_offset, scratch)
        return w.append(e.AddData(prev_offset=state.last_offset, new_data=new_data,
                                  new_watermark=moved), system_time=when, data=path)


def write_table_root(ws: Workspace, name: str, table: pa.Table, scratch: Path) -> None:
    """A root ``name`` of ``ws`` (its own did:odf) holding ``table`` (event time and data) as
    its first slice, at ``at(5)``; more goes on with ``append_table``."""
    ds = CurrentDataset(ws, name)
    stored = build_slice(table, system_time=at(5), prev_offset=None)
    scratch.mkdir(parents=True, exist_ok=True)
    path = scratch / f"{name}-first.parquet"
    new_data = data_slice_of(write_slice(stored, path))
    with ds.writer() as w:
        w.seed(new_dataset_key(), e.DatasetKind.ROOT, at(0), alias=name)
        w.append(e.SetDataSchema(schema=data_schema(stored.schema)), system_time=at(5))
        w.append(e.AddData(new_data=new_data, new_watermark=pc.max(table["event_time"]).as_py()),
                 system_time=at(5), data=path)


def define_derivative(ws: Workspace, name: str, inputs: dict[str, DatasetId], query: str) -> None:
    """The derivative ``name`` of ``ws`` as ``coord add`` starts one: Seed and SetTransform
    (each input by its did:odf, under the alias the query reads it by)."""
    ds = CurrentDataset(ws, name)
    with ds.writer() as w:
        w.seed(new_dataset_key(), e.DatasetKind.DERIVATIVE, at(0), alias=name)
        w.append(_set_transform(inputs, sql("spark", query)), system_time=at(1))


def define_legacy_derivative(ws: Workspace, name: str, inputs: dict[str, DatasetId],
                             query: str) -> None:
    """``define_derivative`` as ``coord add`` wrote it before it normalized transforms: the
    query as ``query`` (written unchecked: the append path now refuses such a block)."""
    ds = CurrentDataset(ws, name)
    with ds.writer() as w:
        w.seed(new_dataset_key(), e.DatasetKind.DERIVATIVE, at(0), alias=name)
    append_unchecked(ds.root, _set_transform(inputs, s.TransformSql(engine="spark", query=query)))


def _set_transform(inputs: dict[str, DatasetId], transform: s.TransformSql) -> e.SetTransform:
    return e.SetTransform(
        inputs=[e.TransformInput(dataset_ref=str(i), alias=alias) for alias, i in inputs.items()],
        transform=transform)
