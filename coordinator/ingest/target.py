"""Where a pull's records go: the root's chain, in the ODF version it is stored in.

The pipeline (``pipeline.py``) is one for both versions; what differs is behind ``Target``,
opened once per pull by the caller's ``TargetOpener`` (``build.pull.pull_one`` routes by
``Workspace.odf_of``):

- what the dataset holds (``history``: its source as a 0.18 source, which the pipeline's
  steps take, its watermark, fetch state, slices and schema);
- the types records are kept in (``stored_types``: a 0.39 slice stores timestamps in
  milliseconds; every merge and the schema check then compare like with like);
- committing one merged slice, or a watermark alone (``commit``, ``set_watermark``).

ODF 0.18 (``Odf018Target``, here): one block per commit through
``workspace.commit.DatasetWriter``, the fetch state written with it. ODF 0.39:
``ingest.current`` (on the store, which reads 0.39 folders).
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from ..metadata.objects import MetadataBlock
from ..workspace import DatasetState, DatasetWriter, Workspace
from ..workspace.source_state import SourceState
from .history import DatasetHistory

if TYPE_CHECKING:
    import pyarrow as pa


class Target(Protocol):
    @property
    def history(self) -> DatasetHistory:
        """What the dataset holds, as the pull advances it."""

    def stored_types(self, table: pa.Table) -> pa.Table:
        """``table`` (event time and data columns) in the types its slice stores them in."""

    def commit(self, table: pa.Table, system_time: datetime, watermark: datetime | None,
               state: SourceState, scratch: Path) -> tuple[bytes, pa.Table]:
        """Commit the conformed records ``table`` (may be empty: the watermark moved) with the
        fetch state; (the block's hash, the records as stored)."""

    def set_watermark(self, t: datetime, system_time: datetime) -> bytes:
        """Commit a block that only moves the watermark to ``t``."""


TargetOpener = Callable[[Workspace, str, DatasetState | None], AbstractContextManager[Target]]


@contextmanager
def open_018(ws: Workspace, dataset_id: str, state: DatasetState | None) -> Iterator[Target]:
    """A 0.18 dataset's target, its writer held (the dataset's lock) while the pull runs;
    ``state``: the dataset as the command already read it."""
    ds = ws.dataset(dataset_id)
    with ds.writer(state) as writer:
        yield Odf018Target(writer, DatasetHistory.load(ds, writer.state))


# --- ODF 0.18 ---------------------------------------------------------------------------------


@dataclass
class Odf018Target:
    writer: DatasetWriter
    history: DatasetHistory

    def stored_types(self, table: pa.Table) -> pa.Table:
        return table  # a 0.18 slice stores what the steps give (slice_layout)

    def commit(self, table: pa.Table, system_time: datetime, watermark: datetime | None,
               state: SourceState, scratch: Path) -> tuple[bytes, pa.Table]:
        from ..data.hashing import canonical_rows, sha3_of
        from ..data.slices import output_slice
        from . import slice_layout

        vocab = self.history.vocab
        block = MetadataBlock(system_time=system_time, output_watermark=watermark)
        data_file = None
        if len(table):
            table = slice_layout.finish(table, system_time, vocab)
            data_file = scratch / "slice.parquet"
            # The logical hash runs while the file is written (both release the GIL). Rows of
            # one event time (one file's) are rendered first, on every core: the write then
            # overlaps the hash's sort and SHA3, which use one core.
            rows = canonical_rows(table, vocab.event_time, vocab.system_time)
            with ThreadPoolExecutor(max_workers=1) as pool:
                logical = pool.submit(sha3_of, rows)
                physical = slice_layout.write(table, data_file)
                block = dataclasses.replace(block, output_slice=output_slice(
                    logical_hash=logical.result(), physical_hash=physical,
                    num_records=len(table), system_time=system_time))
            del rows
        h = self.writer.commit(block, data_file=data_file, source_state=state)
        self.history.committed(h, watermark, block.output_slice, state)
        return h, table

    def set_watermark(self, t: datetime, system_time: datetime) -> bytes:
        return self.writer.commit(MetadataBlock(system_time=system_time, output_watermark=t))
