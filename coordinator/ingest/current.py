"""Ingest into a current-ODF (0.39) root: the ``ingest.target.Target`` of a 0.39 dataset.

The pipeline (``ingest/pipeline.py``: fetch, prepare, read, preprocess, event time, merge,
conform) is the one of 0.18 roots; ``open_current`` gives it this dataset's history and commit
step, under the dataset's writer (its lock) for the whole pull. A commit, through the one
append path (``append.DatasetWriter``):

- the slice is ``odf_slice.build_slice`` of the merged records (offsets counting on from the
  last slice, the merge's operation types or 0, the block's system time), written by
  ``write_slice``; a ``SetDataSchema`` (``odf_schema.grown_schema`` of the stored table)
  comes before the first data and again wherever the schema grows (new optional columns at
  the end, as ``slice_layout.conform`` allows; anything else is refused there or by
  ``grown_schema``);
- then ``AddData(prevOffset, newData, newWatermark, newSourceState)``; a watermark moved alone
  (or ``coord pull --set-watermark``) is an AddData with only ``newWatermark`` and
  ``prevOffset``;
- the fetch state (``workspace.source_state``) is ``.coord/cache/<name>/state/<block
  multihash>.json``, written after the block and before the head moves (``append``'s
  ``beside``): a crash leaves no state of a block the chain does not reach, and the next pull
  removes any such (``CurrentHistory.load``), so each record is ingested exactly once;
- ``newSourceState`` is what the reference has a kind for (``source_state``), and for a glob
  taken by name, the last file's name as an ``odf/etag``: the reference's own state of a
  ``FilesGlob`` (kamu-cli ``fetch_service/file.rs``), from which it goes on with the files named
  after it; a block that ended within a file records none. A File Feed root (no source in its
  chain: ``store.feed_source``) records each update in coord's own kind. A push
  (``ingest.push``, through one of the root's push sources) records none and keeps no fetch state;
- a root whose workspace keeps no fetch state for it (its cache lost, or a chain written
  elsewhere) goes on from what its chain records, as the reference does: the newest AddData's
  ``odf/etag`` of a glob taken by name names the last file taken (``source_state.fetch_state``
  reads it back, for ``coord status`` too).

The first ``SetDataSchema`` records the nullability the read step declares, as the reference
reads and records it (``declared_required``: a current-form field without ``Option``, a DDL
``DATE`` or ``DECIMAL`` column), the system columns always required; a null in such a column
is refused as the file is read, naming it, the row and the column (``read.ReferenceReading``).
Afterwards the schema in force decides (``required_columns``): a column it records optional
stays optional, whatever the read step declares. Without a read schema, or behind a preprocess
query, the data columns are recorded optional.

Records are kept in their stored types from the event time step on (``stored_types``), so
the ledger's keys seen and the snapshot state (read from earlier slices) and the schema check
compare like with like. A snapshot merge gives records with the standard's operation types
(``merge.snapshot`` with ``snapshot_roles``: appends, correct-from/correct-to pairs,
retractions), which ``build_slice`` stores in the reference's order (``order_key``: by the
primary key, then the operation type), each pair kept together; its
state (the latest record per key by offset, retracted keys left out) is cached per block as
for 0.18, under the block's multihash.

Arrow and the slice modules are imported when there are records to commit: opening the
target and finding nothing new imports neither (a pull with nothing new costs what a 0.18
root's does).
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, cast

from ..metadata.multiformats import SHA3_256, Multihash
from ..metadata.objects import (
    DatasetSourceRoot,
    DatasetVocabulary,
    FetchStep,
    MergeStrategySnapshot,
)
from ..metadata.odf39 import events as e
from ..metadata.odf39.adapt import StreamMerge
from ..store.append import DatasetWriter, data_slice_of
from ..store.dataset import CurrentDataset
from ..store.read import DatasetState
from ..store.source_state import (
    ETAG,
    SOURCE_NAME,
    by_name,
    fetch_state,
    pulled_source,
    reference_source_state,
)
from ..trust.slice_check import ChangedSlice
from ..workspace.dataset import DatasetNotFound
from ..workspace.fsutil import atomic_write, physical_hash, remove
from ..workspace.source_state import FilesGlobState, SourceState
from .errors import IngestError
from .history import DatasetHistory

if TYPE_CHECKING:
    import pyarrow as pa

    from ..data.odf_slice import Vocabulary
    from ..metadata.odf39 import data as d
    from ..metadata.odf39.adapt import PushSource
    from ..metadata.odf39.source import ReadStep
    from ..workspace.workspace import Workspace
    from .merge import SnapshotColumns
    from .read import ReferenceReading


@contextmanager
def open_current(ws: Workspace, dataset_id: str, _known: object = None, *,
                 known: DatasetState | None = None,
                 push: Callable[[DatasetState], PushSource] | None = None) -> Iterator[Odf039Target]:
    """The 0.39 root's target, its writer held while the pull runs (``ingest.target.TargetOpener``;
    a 0.18 state the caller may hold says nothing of this dataset). ``known``: the dataset as
    the command already read it (the writer takes it if its head has not moved); ``push``: the
    push source to ingest through, chosen from the state the writer holds (``ingest.push``)."""
    ds = CurrentDataset(ws, dataset_id)
    with ds.writer(known) as w:
        chosen = push(w.state) if push is not None and w.state is not None else None
        yield Odf039Target(ds, w, CurrentHistory.load(ds, w.state, chosen))


def new_source_state(state: SourceState, fetch: FetchStep | None) -> e.SourceState | None:
    """An AddData's ``newSourceState`` for the fetch state ``state`` of the step ``fetch``."""
    known = reference_source_state(state)
    fetched = state.fetched
    if known is None and state.resume is None and isinstance(fetched, FilesGlobState) \
            and by_name(fetch):
        return e.SourceState(source_name=SOURCE_NAME, kind=ETAG, value=fetched.last_file)
    return known


def declared_required(read: ReadStep | None) -> dict[str, str]:
    """The columns the reference reads as required under the read step ``read``, each with how
    the step declares it so (kamu-cli ``DataSchema::to_arrow``, and ``parse_ddl_to_odf_schema``
    for DDL): a current-form field whose type is not an ``Option``; of a DDL schema, the
    ``NOT NULL`` columns and its ``DATE`` and ``DECIMAL`` ones (the reference's DDL conversion
    leaves those two types required and makes every other one optional)."""
    import pyarrow as pa

    from ..metadata.odf39 import data as d
    from ..metadata.schema_evolution import type_text
    from .schema_ddl import parse_schema

    schema = getattr(read, "schema", None)
    if schema is not None:
        return {f.name: f"the read step declares it {type_text(f.type)}, not an Option"
                for f in schema.fields if not isinstance(f.type, d.DataTypeOption)}
    ddl = getattr(read, "ddl_schema", None)
    if not ddl:
        return {}
    declared = parse_schema(ddl, declared_nullability=True)
    return {f.name: "the read step declares it NOT NULL" if not f.nullable else
                    f"the read step declares it {'DATE' if pa.types.is_date(f.type) else 'DECIMAL'} "
                    "in DDL, which the reference reads as required"
            for f in declared
            if not f.nullable or pa.types.is_date(f.type) or pa.types.is_decimal(f.type)}


@dataclass
class CurrentHistory(DatasetHistory):
    """A 0.39 root's history: its blocks are multihashes, its slices 0.39 DataSlices."""

    set_vocab: e.SetVocab | None = None  # the system columns' names, where not the defaults
    schema_in_force: d.DataSchema | None = None  # the newest SetDataSchema's
    prev_offset: int | None = None  # the last slice's last offset
    legacy_schema: bool = False  # the schema in force is a pre-RFC-016 one (no nullability)

    @property
    def vocabulary(self) -> Vocabulary:
        """The system columns' names the SetVocab gives (the defaults where it names none)."""
        from ..data.odf_slice import Vocabulary

        v, defaults = self.set_vocab, Vocabulary()
        if v is None:
            return defaults
        return Vocabulary(offset=v.offset_column or defaults.offset,
                          operation_type=v.operation_type_column or defaults.operation_type,
                          system_time=v.system_time_column or defaults.system_time,
                          event_time=v.event_time_column or defaults.event_time)

    def required_columns(self) -> dict[str, str]:
        """The data columns whose records must hold a value, each with why and what to do.

        Before the dataset's first schema: those the read step declares required
        (``declared_required``), as the reference reads and records them, unless a preprocess
        query reshapes what was read (its output's columns are recorded optional, as the
        reference's Spark engine outputs them). Afterwards the schema in force decides: of
        those, the ones it records as required (a column recorded optional, by an earlier
        coord say, stays optional and takes nulls)."""
        declared = declared_required(self.given_read)
        if not declared or self.legacy_schema:
            return {}
        if self.schema_in_force is None:
            if self.source.preprocess is not None:
                return {}
            return {c: f"{why}; give every record a value, or declare the column as an Option "
                       "(coord add --replace) before the dataset's first data"
                    for c, why in declared.items()}
        from ..metadata.schema_evolution import odf_columns

        kept = {c.name for c in odf_columns(self.schema_in_force) if c.required}
        return {c: "the dataset's schema records it as required; give every record a value "
                   "(a column keeps the nullability recorded first)"
                for c in declared if c in kept}

    @property
    def reference_reading(self) -> ReferenceReading | None:
        """The reference's reading (``DatasetHistory``'s), with the columns that must hold a
        value (``required_columns``)."""
        reading = super().reference_reading
        required = tuple(self.required_columns().items())
        return dataclasses.replace(reading, required=required) if reading and required else reading

    @staticmethod
    def load(ds: CurrentDataset, s: DatasetState | None,  # type: ignore[override]
             push: PushSource | None = None) -> CurrentHistory:
        """From the dataset's state as its writer holds it, its polling source or the push
        source ``push``; removes fetch states of blocks the chain does not reach (a pull
        killed before its head moved)."""
        from ..metadata.odf39.adapt import vocab_of

        if s is None:
            raise DatasetNotFound(ds.id)
        source: DatasetSourceRoot | PushSource
        given_read: ReadStep | None  # None: a File Feed's source, read the 0.18 way
        if push is not None:
            source, given_read = push, push.given
        else:
            polled = pulled_source(ds, s)  # a File Feed's is kept beside the chain, in 0.18 form
            if polled is None:
                raise IngestError(f"{ds.id} is not a root dataset with a polling source: it has "
                                  "nothing to fetch")
            source, given_read = polled, s.polling_source.read if s.polling_source else None
        vocab = vocab_of(s.vocab)
        hashes = {str(b.hash) for b in s.blocks}
        if ds.state_dir.is_dir():
            for path in ds.state_dir.iterdir():
                if path.stem not in hashes:
                    remove(path)
        # a push has no fetch state
        state = None
        if isinstance(source, DatasetSourceRoot):
            state = fetch_state(ds, s, source.fetch)
        return CurrentHistory(
            ds=ds,  # type: ignore[arg-type]
            source=source,
            vocab=vocab or DatasetVocabulary(),
            watermark=s.watermark,
            last_system_time=s.blocks[-1].block.system_time,
            state=state,
            data_blocks=[r.block_hash for r in s.slices],  # type: ignore[misc]
            slices={r.block_hash: r.slice for r in s.slices},  # type: ignore[misc]
            set_vocab=s.vocab,
            schema_in_force=s.schema.schema if s.schema is not None else None,
            prev_offset=s.last_offset,
            given_read=given_read,
            legacy_schema=s.schema is not None and s.schema.schema is None)

    def schema(self) -> pa.Schema | None:
        """The newest slice's stored schema less offset and operation type (what the next
        slice's records must keep; the system time column is left out by the comparison)."""
        if not self.data_blocks:
            return None
        import pyarrow as pa
        import pyarrow.parquet as pq

        # the footer only (no hash check: a slice this pull wrote would be hashed again per block)
        stored = pq.read_schema(self.dataset.data_file(self._slice(self.data_blocks[-1])))
        system = {self.vocabulary.offset, self.vocabulary.operation_type}
        return pa.schema([f for f in stored if f.name not in system])

    def files(self, blocks: list | None = None) -> list[Path]:
        """The data files of ``blocks`` (default: all), in commit order, each checked against
        its block first (size and SHA3-256, as ``verify`` does: a changed file is refused, not
        merged with). Unlike 0.18's (``trust.slice_check``) the check is not remembered."""
        hashes = self.data_blocks if blocks is None else blocks
        return [self._checked(self._slice(h)) for h in hashes]

    @property
    def order_key(self) -> list[str]:
        """The columns that lead the order of a slice: the primary key of a merge by key
        (snapshot, changelog and upsert streams), as the reference's merge strategies sort
        (key, then operation type); none for append and ledger, which it sorts by event time,
        as every slice is."""
        merge = self.source.merge
        return list(merge.primary_key) if isinstance(merge, MergeStrategySnapshot | StreamMerge) \
            else []

    def snapshot_roles(self, strategy: MergeStrategySnapshot | StreamMerge) -> SnapshotColumns:
        """A snapshot merge writes the standard's operation types here (``merge.snapshot``);
        the stream merges' state is the same projection."""
        from .merge import SnapshotColumns

        return SnapshotColumns.of(strategy, self.vocabulary.operation_type)

    def cached_state(self, block: object) -> Path:  # a multihash here
        return self.projection_dir() / f"{block}.parquet"

    def slice_file(self, block: object) -> Path:
        return self.dataset.data_file(self._slice(block))

    @property
    def dataset(self) -> CurrentDataset:
        return cast(CurrentDataset, self.ds)  # what ``load`` gives it

    def _slice(self, block: object) -> e.DataSlice:
        return cast(e.DataSlice, self.slices[block])  # type: ignore[index]  # 0.39 blocks and slices

    def _checked(self, data_slice: e.DataSlice) -> Path:
        path = self.dataset.data_file(data_slice)
        try:
            same = path.stat().st_size == data_slice.size and \
                Multihash(SHA3_256, physical_hash(path)) == data_slice.physical_hash
        except FileNotFoundError:
            same = False
        if not same:
            raise ChangedSlice(f"{self.ds.id}: {path} is missing or not the slice its block "
                               "records; restore it, then pull again (nothing was ingested)")
        return path


def _required(table: pa.Table, required: dict[str, str], dataset: str) -> pa.Table:
    """The first slice's ``table`` with the ``required`` columns it has made non-nullable, so
    the dataset's first schema records them required, as the reference does. Their nulls were
    refused as the files were read (``read.ReferenceReading``); records read otherwise (by the
    SQL engine) are refused here, naming the column."""
    import pyarrow as pa

    fields = []
    for f in table.schema:
        if f.name in required and f.nullable:
            nulls = table.column(f.name).null_count
            if nulls:
                raise IngestError(f"{dataset}: column {f.name!r} is null in {nulls} of the new "
                                  f"records, but {required[f.name]}")
            f = f.with_nullable(False)
        fields.append(f)
    schema = pa.schema(fields)
    return table if schema.equals(table.schema) else pa.Table.from_arrays(table.columns, schema=schema)


@dataclass
class Odf039Target:
    dataset: CurrentDataset
    writer: DatasetWriter
    history: CurrentHistory

    def stored_types(self, table: pa.Table) -> pa.Table:
        import pyarrow as pa

        from ..data.odf_slice import stored_type

        schema = pa.schema([f.with_type(stored_type(f.type, f.name, top_level=True))
                            for f in table.schema])
        return table if schema.equals(table.schema) else table.cast(schema, safe=False)

    def commit(self, table: pa.Table, system_time: datetime, watermark: datetime | None,
               state: SourceState, scratch: Path) -> tuple[bytes, pa.Table]:
        h = self.history
        new_data, data_file = None, None
        if len(table):
            from ..data.odf_schema import grown_schema
            from ..data.odf_slice import build_slice, write_slice

            stored = build_slice(table, system_time=system_time, prev_offset=h.prev_offset,
                                 vocabulary=h.vocabulary, key=h.order_key)
            if h.schema_in_force is None:
                stored = _required(stored, h.required_columns(), self.dataset.id)
            table, grown = grown_schema(self.dataset.id, stored, h.schema_in_force, "the new data")
            if grown is not None:
                self.writer.append(e.SetDataSchema(schema=grown), system_time=system_time)
                h.schema_in_force = grown
            data_file = scratch / "slice.parquet"
            new_data = data_slice_of(write_slice(table, data_file, h.vocabulary))
        fetch = h.source.fetch if isinstance(h.source, DatasetSourceRoot) else None
        event = e.AddData(prev_offset=h.prev_offset, new_data=new_data, new_watermark=watermark,
                          new_source_state=new_source_state(state, fetch))
        def write_state(block: Multihash) -> None:
            atomic_write(self.dataset.state_path(block), state.to_json())

        block = self.writer.append(event, system_time=system_time, data=data_file,
                                   beside=write_state)
        h.committed(block, watermark, new_data, state)  # type: ignore[arg-type]
        if new_data is not None:
            h.prev_offset = new_data.offset_interval.end
        return block.to_bytes(), table

    def set_watermark(self, t: datetime, system_time: datetime) -> bytes:
        event = e.AddData(prev_offset=self.history.prev_offset, new_watermark=t)
        return self.writer.append(event, system_time=system_time).to_bytes()
