"""Record provenance (``coord provenance``): the input records behind output records of a block.

For chosen records of one block of a derivative, the engine replays the query in force at
that block over every slice its inputs had up to what the block consumed, carrying a row
identity through the plan (DeriveProvenance, see engines/spark/README.md). Each replayed row
equal to a chosen record is a *derivation* of it; its identities name the input records
(dataset, block, row) that made it: why-provenance. For each output column, the recorded
field lineage says which input columns it is computed from, and how; their values in those
input records are its where-provenance.

Invariants:
- Exact or refused: a plan shape the engine cannot trace is refused by name, and a record the
  replay does not produce (e.g. rows a watermark dropped as late) is reported as such, never
  approximated.
- A query that neither joins nor aggregates makes each record from one row of the slices the
  block consumed, so only those are candidates; otherwise older slices are candidates too (a
  window is fed by every slice since it opened; a temporal join's event may have waited in
  the engine for the temporal table's watermark, and its version may be of any older slice).
- A temporal table's slices go with its snapshot merge's removal rule (``removal``), so the
  replay's view ends a key where the Execute call's did.
- A current-ODF block that names no checkpoint was recomputed: its records are the query over
  its inputs' rows, so a streamed input is given as the records that stand for its rows then
  (``row_changes.standing``: a retracted or corrected record is not), each still named by its
  place in its own slice. A retraction such a block wrote is a row the query no longer gives:
  the replay does not produce it.
- Every slice read (the block's own, its inputs') is first checked against its block
  (``trust.slice_check``).
- Several derivations of one record mean the replay made identical records from different
  input rows; all are listed, none is picked.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..engine.port import Engine, ExecuteInput, ProvenanceRequest
from ..errors import Invalid
from ..metadata.multiformats import Multihash
from ..metadata.objects import FieldLineage, MetadataBlock
from ..metadata.odf39.events import ExecuteTransform, SetTransform
from ..metadata.timestamps import IntervalType
from ..transform.builds import source_in_force_at
from ..transform.plan import InputPlan, plan_input
from ..trust.slice_check import checked_slices
from ..workspace import Dataset, Workspace
from ..workspace.catalog import find_block
from ..workspace.config import OdfVersion

RECORD = "__odf_record"  # the engine's key of each record to explain
BLOCK_TABLE, ROW_NUMBER = "_block", "_row_number"  # --where's table (no dataset id has a _)


class ProvenanceError(Invalid):
    pass


@dataclass(frozen=True)
class InputRecord:
    dataset: str
    block: bytes  # 0.39: the block's binary multihash
    row: int  # 0-based, in that block's slice
    values: dict[str, Any]
    offset: int | None = None  # 0.39: the record's offset in its dataset (its ODF identity)


@dataclass(frozen=True)
class ColumnOrigin:
    """Where-provenance: an output column's source column and its values in the derivation."""

    column: str
    kind: str  # copy | transform | aggregate | window
    dataset: str
    field: str
    values: tuple[Any, ...]


@dataclass(frozen=True)
class Derivation:
    inputs: tuple[InputRecord, ...]
    columns: tuple[ColumnOrigin, ...]  # empty when the block's field lineage is not recorded


@dataclass(frozen=True)
class RecordProvenance:
    row: int  # 0-based, in the block's slice
    values: dict[str, Any]
    derivations: tuple[Derivation, ...]  # none: the replay does not produce this record
    offset: int | None = None  # 0.39: the record's offset


@dataclass(frozen=True)
class BlockProvenance:
    dataset: str
    block: bytes  # 0.39: the block's binary multihash
    records: tuple[RecordProvenance, ...]
    odf: OdfVersion = OdfVersion.V018


def provenance_reads(ws: Workspace, dataset_id: str) -> list[str]:
    """The datasets an engine replaying ``dataset_id``'s blocks reads: every input of every
    query its chain has had (a 0.39 chain's: those in force), as ``engine_reads`` says."""
    from ..engine.session import engine_reads
    from ..store.overview import CurrentDatasets
    from ..workspace.graph import DatasetGraph

    return engine_reads(ws, [dataset_id], every_query=True,
                        graph=DatasetGraph(ws, current=CurrentDatasets(ws).inputs))


def block_provenance(ws: Workspace, dataset_id: str, block_prefix: str | None, engine: Callable[[], Engine],
                     *, rows: list[int] | None = None, where: str | None = None,
                     offsets: list[int] | None = None) -> BlockProvenance:
    """The provenance of the records of block ``block_prefix`` of ``dataset_id`` chosen by
    ``rows`` (0-based), ``offsets`` (a 0.39 dataset's: the block is then the one holding
    them when not given) or ``where`` (a SQL condition over its columns); all when none."""
    if ws.odf_of(dataset_id) is OdfVersion.V039:
        return _current_block_provenance(ws, dataset_id, block_prefix, engine, rows, offsets, where)
    if offsets:
        raise ProvenanceError(f"--offset: {dataset_id} is an ODF 0.18 dataset, whose records have "
                              "no offsets; name them by --row")
    if block_prefix is None:
        raise ProvenanceError(f"{dataset_id}: give --block (a data block of it)")
    ds = ws.dataset(dataset_id)
    state = ds.state()
    block_hash = find_block(ds, block_prefix)
    block = dict(state.blocks)[block_hash]
    if block.input_slices is None:
        raise ProvenanceError(f"block {block_hash.hex()[:12]} of {dataset_id} ran no transform; "
                              "provenance is for the data blocks of a derivative")
    if block.output_slice is None:
        raise ProvenanceError(f"block {block_hash.hex()[:12]} of {dataset_id} added no records")
    table = pq.read_table(checked_slices(ds, [(block_hash, block)])[0])
    chosen = _choose(ws, f"block {block_hash.hex()[:12]} of {ds.id}", block_hash.hex(), table, rows, where)
    _, source = source_in_force_at(list(state.blocks), block_hash)
    vocab = state.vocab
    history, new = [], []
    for input_id, consumed in zip(source.inputs, block.input_slices, strict=True):
        iv = consumed.interval
        until = block.system_time if iv.type is IntervalType.EMPTY else iv.right
        every = plan_input(ws.dataset(input_id), None, until)
        history.append(every)
        new.append(set() if iv.type is IntervalType.EMPTY else
                   {every.dataset.data_file(h).name for h, b in every.blocks
                    if b.output_slice is not None and (iv.left is None or b.system_time > iv.left)})
    waiting = [p.dataset.id for p in history if p.schema is None]
    if waiting:
        raise ProvenanceError(f"input {waiting[0]} had no data when block {block_hash.hex()[:12]} ran")
    query_columns = [c for c in table.column_names if c != vocab.system_time]
    records = table.select(query_columns).take(chosen).append_column(RECORD, pa.array(chosen, pa.int64()))
    answer = engine().derive_provenance(ProvenanceRequest(
        transaction_id=f"provenance-{block_hash.hex()[:12]}", dataset_id=dataset_id,
        transform=source.transform,
        inputs=[ExecuteInput(p.dataset.id, p.vocab, p.schema, p.data_paths, removal=p.removal)
                for p in history],
        vocab=vocab, records=records,
    ))
    derivations = answer.derivations
    if not answer.stateful:  # one row of a slice this block consumed makes each record
        keep = [f in new[source.inputs.index(i)] for i, f in
                zip(derivations.column("input").to_pylist(), derivations.column("file").to_pylist(),
                    strict=True)]
        derivations = derivations.filter(pa.array(keep, pa.bool_()))
    lineage = _field_lineage_at(state.blocks, block_hash)
    inputs = _InputRows(history)
    found: dict[int, dict[int, list[dict]]] = {}
    for d in derivations.to_pylist():
        found.setdefault(d["record"], {}).setdefault(d["derivation"], []).append(d)
    out = []
    for row in chosen:
        derivation_rows = found.get(row, {})
        out.append(RecordProvenance(row, table.slice(row, 1).to_pylist()[0], tuple(
            _derivation(inputs.record, parts, lineage) for _, parts in sorted(derivation_rows.items()))))
    return BlockProvenance(dataset_id, block_hash, tuple(out))


def _current_block_provenance(ws: Workspace, name: str, block_prefix: str | None,
                              engine: Callable[[], Engine], rows: list[int] | None,
                              offsets: list[int] | None, where: str | None) -> BlockProvenance:
    """``block_provenance`` of a current-ODF (0.39) derivative: the block's inputs are what its
    ``ExecuteTransform`` read (every slice up to ``newBlockHash``, its new part the offsets in
    ``(prevOffset, newOffset]``), read as the 0.39 step reads them; records are named by offset."""
    from ..build.current_derivative import alias_of, engine_transform, engine_vocab, plan_input
    from ..store.checked import checked_current_files
    from ..store.dataset import CurrentDataset
    from ..store.field_lineage import recorded_versions
    from ..store.overview import CurrentDatasets
    from ..store.verify import vocabulary_of

    ds = CurrentDataset(ws, name)
    state = ds.state()
    stored = _current_block(name, state, block_prefix, offsets)
    label = f"block {stored.block.sequence_number} ({stored.hash}) of {name}"
    event = stored.block.event
    if not isinstance(event, ExecuteTransform):
        raise ProvenanceError(f"{label} ran no transform; provenance is for the data blocks of a derivative")
    if event.new_data is None:
        raise ProvenanceError(f"{label} added no records")
    [record] = [r for r in state.slices if r.block_hash == stored.hash]
    table = pq.read_table(checked_current_files(ds, [record])[0])
    first = record.slice.offset_interval.start
    if offsets:
        rows = [o - first for o in offsets]
        bad = [o for o in offsets if not first <= o <= record.slice.offset_interval.end]
        if bad:
            raise ProvenanceError(f"--offset {bad[0]}: {label} holds offsets {first} to "
                                  f"{record.slice.offset_interval.end}")
    chosen = _choose(ws, label, str(stored.hash), table, rows, where)
    in_force = next(b.block.event for b in reversed(state.blocks[:state.blocks.index(stored)])
                    if isinstance(b.block.event, SetTransform))
    current = CurrentDatasets(ws)
    history, new, names = [], [], {}
    for given, used in zip(in_force.inputs, event.query_inputs, strict=True):
        until = used.new_block_hash or used.prev_block_hash
        if until is None:
            raise ProvenanceError(f"input {alias_of(given)} had no data when {label} ran")
        input_ds = current.input_dataset(given, name)
        step = plan_input(current, input_ds, alias_of(given), input_ds.state(), None, until)
        history.append(step)
        names[step.alias] = (input_ds, {input_ds.data_file(r.slice).name: r for r in step.slices})
        after = -1 if used.prev_offset is None else used.prev_offset
        new.append({input_ds.data_file(r.slice).name for r in step.slices
                    if used.new_block_hash is not None and r.slice.offset_interval.start > after})
    vocab = vocabulary_of(state.vocab)
    system = (vocab.offset, vocab.operation_type, vocab.system_time)
    query_columns = [c for c in table.column_names if c not in system]
    records = table.select(query_columns).take(chosen).append_column(RECORD, pa.array(chosen, pa.int64()))
    running = engine()
    transaction = f"provenance-{stored.hash.digest.hex()[:12]}"
    inputs = [step.execute_input() for step in history]
    # a recomputed block (no checkpoint) is the query over its inputs' rows: a streamed input's
    # records that still stand for a row, each named by its place in its own slice
    recomputed = event.new_checkpoint is None
    positions: dict[str, dict[str, np.ndarray]] = {}
    temporal = {t.name for t in in_force.transform.temporal_tables or ()}
    for k, step in enumerate(history):
        if recomputed and step.alias not in temporal:
            inputs[k], positions[step.alias] = _standing_input(
                inputs[k], step.vocab, running.workdir(transaction) / f"standing-{k}")
    answer = running.derive_provenance(ProvenanceRequest(
        transaction_id=transaction, dataset_id=name,
        transform=engine_transform(in_force), inputs=inputs,
        vocab=engine_vocab(vocab),
        records=records,
    ))
    derivations = answer.derivations
    if not answer.stateful and not recomputed:  # one row of a slice this block read makes each record
        aliases = [step.alias for step in history]
        keep = [f in new[aliases.index(i)] for i, f in
                zip(derivations.column("input").to_pylist(), derivations.column("file").to_pylist(),
                    strict=True)]
        derivations = derivations.filter(pa.array(keep, pa.bool_()))
    tables: dict[Path, pa.Table] = {}

    offset_of = {step.alias: step.vocab.offset for step in history}

    def input_record(alias: str, file: str, row: int) -> InputRecord:
        """The record at ``row`` of an input's slice (checked above, by ``execute_input``)."""
        input_ds, files = names[alias]
        r = files[file]
        if alias in positions:  # the row of the standing records, in the slice's
            row = int(positions[alias][file][row])
        path = input_ds.data_file(r.slice)
        if path not in tables:
            tables[path] = pq.read_table(path)
        values = tables[path].slice(row, 1).to_pylist()[0]
        return InputRecord(input_ds.id, r.block_hash.to_bytes(), row, values, values[offset_of[alias]])

    # the field lineage kept for the version in force at the block (store.field_lineage)
    lineage = next((v for b, v in reversed(recorded_versions(ds, state))
                    if b.block.sequence_number <= stored.block.sequence_number), None)
    found: dict[int, dict[int, list[dict]]] = {}
    for d in derivations.to_pylist():
        found.setdefault(d["record"], {}).setdefault(d["derivation"], []).append(d)
    out = []
    for row in chosen:
        made = tuple(_derivation(input_record, parts, lineage)
                     for _, parts in sorted(found.get(row, {}).items()))
        out.append(RecordProvenance(row, table.slice(row, 1).to_pylist()[0], made, first + row))
    return BlockProvenance(name, stored.hash.to_bytes(), tuple(out), OdfVersion.V039)


def _standing_input(given: ExecuteInput, v, folder: Path) -> tuple[ExecuteInput, dict[str, np.ndarray]]:
    """``given`` (an input's slices) as the records that stand for its rows
    (``row_changes.standing``): each slice's, written in ``folder`` under the slice's file name,
    and by file name where each of them is in its slice."""
    from ..data.row_changes import standing

    tables = [pq.read_table(p) for p in given.data_paths]
    mask = standing(pa.concat_tables(tables, promote_options="permissive"), v).to_numpy(zero_copy_only=False)
    folder.mkdir(parents=True, exist_ok=True)
    paths, positions, at = [], {}, 0
    for path, table in zip(given.data_paths, tables, strict=True):
        kept = mask[at:at + table.num_rows]
        at += table.num_rows
        paths.append(folder / path.name)
        pq.write_table(table.filter(pa.array(kept)), paths[-1])
        positions[path.name] = np.flatnonzero(kept)
    return replace(given, data_paths=paths), positions


def _current_block(name: str, state, block_prefix: str | None, offsets: list[int] | None):
    """The block ``block_prefix`` names, else the one whose slice holds ``offsets``."""
    from ..store.read import blocks_named

    if block_prefix is not None:
        found = blocks_named(state, block_prefix)
        if len(found) != 1:
            raise ProvenanceError(f"--block {block_prefix}: {'no' if not found else len(found)} blocks "
                                  f"of {name} start with it" + ("; give more digits" if found else ""))
        return found[0]
    if not offsets:
        raise ProvenanceError(f"{name}: give --block or --offset")
    held = {r.block_hash for o in offsets for r in state.slices
            if r.slice.offset_interval.start <= o <= r.slice.offset_interval.end}
    if len(held) != 1:
        raise ProvenanceError(f"--offset {', '.join(map(str, offsets))}: "
                              + (f"no slice of {name} holds them" if not held else
                                 "they are in several blocks; ask for one block at a time"))
    return next(b for b in state.blocks if b.hash in held)


def _choose(ws: Workspace, block: str, as_at: str, table: pa.Table,
            rows: list[int] | None, where: str | None) -> list[int]:
    """The rows of ``table`` (the slice of ``block``, named so in errors; ``as_at``: how
    ``--where`` names it to read other datasets as they were then) chosen by ``rows`` or
    ``where``; all when neither."""
    if rows is not None:
        bad = [r for r in rows if not 0 <= r < table.num_rows]
        if bad:
            raise ProvenanceError(f"--row {bad[0]}: {block} has rows 0 to {table.num_rows - 1}")
        return list(dict.fromkeys(rows))
    if where is None:
        return list(range(table.num_rows))
    from ..query.sql import SqlError, SqlSession, resolve_as_at, split_script

    # the block's records with their row numbers, under a name no dataset has
    numbered = table.append_column(ROW_NUMBER, pa.array(range(table.num_rows), pa.int64()))
    script = f"SELECT {ROW_NUMBER} FROM {BLOCK_TABLE} WHERE {where}"
    try:
        statements = split_script(script)
        if len(statements) != 1:
            raise SqlError("--where must be one condition")
        with SqlSession(ws, resolve_as_at(ws, as_at), {BLOCK_TABLE: numbered}) as session:
            numbers = session.query(statements[0], script).column(0).to_pylist()
    except SqlError as e:
        raise ProvenanceError(f"--where {where!r}: {e}") from None
    if not numbers:
        raise ProvenanceError(f"--where {where!r}: no record of {block} matches")
    return sorted(numbers)


def _field_lineage_at(blocks, block_hash: bytes) -> FieldLineage | None:
    """The newest field lineage recorded at or before ``block_hash``."""
    seen = False
    for h, b in blocks:
        seen = seen or h == block_hash
        if seen and b.field_lineage is not None:
            return b.field_lineage
    return None


class _InputRows:
    """The input records a derivation names, read from their slices once per file."""

    def __init__(self, plans: list[InputPlan]):
        self._files: dict[tuple[str, str], tuple[Dataset, bytes, MetadataBlock]] = {}
        for p in plans:
            for h, b in p.blocks:
                if b.output_slice is not None:
                    self._files[(p.dataset.id, p.dataset.data_file(h).name)] = (p.dataset, h, b)
        self._tables: dict[Path, pa.Table] = {}

    def record(self, dataset_id: str, file: str, row: int) -> InputRecord:
        ds, h, _ = self._files[(dataset_id, file)]
        path = ds.data_file(h)
        if path not in self._tables:
            self._tables[path] = pq.read_table(path)
        return InputRecord(dataset_id, h, row, self._tables[path].slice(row, 1).to_pylist()[0])


def _derivation(record: Callable[[str, str, int], InputRecord], parts: list[dict],
                lineage: FieldLineage | None) -> Derivation:
    """One derivation from the engine's ``parts`` (input, file, row), each input record read by
    ``record``; per output column, its source columns' values in them (where-provenance)."""
    records = tuple(record(p["input"], p["file"], p["row"])
                    for p in sorted(parts, key=lambda p: (p["input"], p["file"], p["row"])))
    columns = []
    for origin in lineage.fields if lineage is not None else []:
        for s in origin.sources:
            values = tuple(r.values.get(s.field) for r in records if r.dataset == s.input)
            columns.append(ColumnOrigin(origin.field, s.kind, s.input, s.field, values))
    return Derivation(records, tuple(columns))


def as_json(result: BlockProvenance) -> dict:
    """The answer as JSON (the CLI's ``-o json`` and the HTTP API's body)."""
    from ..query.tail import json_value

    def values(row: dict[str, Any]) -> dict[str, Any]:
        return {k: json_value(v) if v is not None else None for k, v in row.items()}

    def block(raw: bytes) -> str:  # a 0.39 block by its multihash, as everywhere
        return raw.hex() if result.odf is OdfVersion.V018 else str(Multihash.from_bytes(raw))

    def offset(r: InputRecord | RecordProvenance) -> dict[str, int]:  # 0.39 records only
        return {} if r.offset is None else {"offset": r.offset}

    return {"dataset": result.dataset, "block": block(result.block), "records": [{
        "row": r.row, **offset(r), "values": values(r.values), "derivations": [{
            "inputs": [{"dataset": i.dataset, "block": block(i.block), "row": i.row, **offset(i),
                        "values": values(i.values)} for i in d.inputs],
            "columns": [{"column": c.column, "kind": c.kind, "dataset": c.dataset, "field": c.field,
                         "values": [json_value(v) if v is not None else None for v in c.values]}
                        for c in d.columns],
        } for d in r.derivations],
    } for r in result.records]}
