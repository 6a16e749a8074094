"""What a root dataset already holds: its definition, watermark, source state and data.

Read once per pull from the metadata chain (under the writer lock) and updated in memory as
the pull commits blocks, so a pull that makes several blocks sees its own earlier ones.
Arrow is imported by the methods that read data: a pull that finds nothing new needs none.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from ..metadata.objects import DatasetSourceRoot, DatasetVocabulary, DataSlice, MergeStrategySnapshot
from ..metadata.timestamps import now_utc
from ..trust.slice_check import checked_slice_files
from ..workspace import Dataset, DatasetNotFound, DatasetState, layout
from ..workspace.source_state import SourceState
from .errors import IngestError

if TYPE_CHECKING:
    import pyarrow as pa

    from ..metadata.odf39.adapt import PushSource, StreamMerge
    from ..metadata.odf39.source import ReadStep
    from .merge import SnapshotColumns
    from .read import ReferenceReading


@dataclass
class DatasetHistory:
    ds: Dataset
    source: DatasetSourceRoot | PushSource  # a push source's steps: a 0.39 push (ingest.push)
    vocab: DatasetVocabulary
    watermark: datetime | None
    last_system_time: datetime | None  # of the last block, or the last handed out
    state: SourceState | None  # the fetch step's progress and where to resume (source_state.py)
    data_blocks: list[bytes] = field(default_factory=list)  # blocks with a slice, oldest first
    slices: dict[bytes, DataSlice] = field(default_factory=dict)  # the slice each one records
    # a 0.39 source's read step as written (the pipeline rewrites the files of a Json or
    # NdGeoJson one before reading them: ``reshape``); None for a 0.18 source
    given_read: ReadStep | None = None

    @property
    def reference_reading(self) -> ReferenceReading | None:
        """How the current ODF's reference reads a 0.39 source's files (None: a 0.18 source)."""
        from .read import ReferenceReading

        given = self.given_read
        return None if given is None else ReferenceReading(ddl_schema=given.ddl_schema is not None)

    @staticmethod
    def load(ds: Dataset, s: DatasetState | None) -> DatasetHistory:
        """From the dataset's state as its writer holds it."""
        if s is None:
            raise DatasetNotFound(ds.id)
        if not isinstance(s.source, DatasetSourceRoot):
            raise IngestError(f"{ds.id} is not a root dataset: it has no fetch/read/merge source")
        return DatasetHistory(ds=ds, source=s.source, vocab=s.vocab, watermark=s.watermark,
                              last_system_time=s.last_updated, state=ds.source_state(s),
                              data_blocks=[b.hash for b in s.data_blocks],
                              slices={b.hash: b.slice for b in s.data_blocks})

    def next_system_time(self) -> datetime:
        """Now, but strictly after the previous block and any system time handed out before
        (clocks step back; intervals must not): the block it is for may still be committing
        when the next one asks (``pipeline._Pull._committer``)."""
        t = now_utc()
        if self.last_system_time is not None and t <= self.last_system_time:
            t = self.last_system_time + timedelta(microseconds=1)
        self.last_system_time = t
        return t

    def committed(self, block_hash: bytes, watermark: datetime | None,
                  data: DataSlice | None, state: SourceState | None) -> None:
        """A block was committed (its system time came from ``next_system_time``)."""
        self.watermark = watermark
        if data is not None:
            self.data_blocks.append(block_hash)
            self.slices[block_hash] = data
        if state is not None:
            self.state = state

    # --- data ---------------------------------------------------------------------------------

    def schema(self) -> pa.Schema | None:
        """The schema of the newest slice: new slices must keep its columns and types."""
        import pyarrow.parquet as pq

        return pq.read_schema(self.slice_file(self.data_blocks[-1])) if self.data_blocks else None

    def files(self, blocks: list[bytes] | None = None) -> list[Path]:
        """The data files of ``blocks`` (default: all) in commit order, each checked against
        its block first (``trust.slice_check``)."""
        hashes = self.data_blocks if blocks is None else blocks
        return checked_slice_files(self.ds, [(h, self.slices[h]) for h in hashes])

    def read(self, blocks: list[bytes] | None = None, columns: list[str] | None = None):
        """The slices of ``blocks`` (default: all) concatenated in commit order, or None."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        files = self.files(blocks)
        if not files:
            return None
        tables = [pq.read_table(f, columns=columns) for f in files]
        return pa.concat_tables(tables, promote_options="permissive")

    # --- snapshot state, cached ---------------------------------------------------------------
    # The projection of a long history is costly to rebuild every pull, so the latest one is
    # kept in the cache folder, named by the newest block it includes. It is scratch: when it
    # is missing or stale it is rebuilt from the slices it does not cover.

    def projection_dir(self) -> Path:
        return self.ds.ws.meta / layout.cache_dir(self.ds.id, layout.SNAPSHOT_STATE)

    def cached_state(self, block: bytes) -> Path:
        """Where the snapshot state as of ``block`` (one of ``data_blocks``) is cached."""
        return self.projection_dir() / f"{block.hex()}.parquet"

    def slice_file(self, block: bytes) -> Path:
        """The data file of ``block`` (one of ``data_blocks``), unchecked."""
        return self.ds.data_file(block)

    def snapshot_roles(self, strategy: MergeStrategySnapshot | StreamMerge) -> SnapshotColumns:
        """The column roles of a snapshot merge into this dataset (0.18: observed rows)."""
        from .merge import SnapshotColumns

        return SnapshotColumns.of(strategy)

    def snapshot_state_bytes(self) -> int:
        """About how large the snapshot state is in memory: the cached one's size as stored in
        Parquet's metadata (uncompressed), else four times the slices' files."""
        import pyarrow.parquet as pq

        if not self.data_blocks:
            return 0
        cached = self.cached_state(self.data_blocks[-1])
        if cached.exists():
            md = pq.read_metadata(cached)
            return sum(md.row_group(i).total_byte_size for i in range(md.num_row_groups))
        return 4 * sum(self.slice_file(h).stat().st_size for h in self.data_blocks)

    def snapshot_state(self, roles: SnapshotColumns) -> pa.Table | None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        from .merge import projection

        if not self.data_blocks:
            return None
        for i in range(len(self.data_blocks) - 1, -1, -1):
            cached = self.cached_state(self.data_blocks[i])
            if cached.exists():
                newer = self.read(self.data_blocks[i + 1:])
                state = pq.read_table(cached)
                if newer is None:
                    return state
                state = projection(pa.concat_tables([state, newer], promote_options="permissive"),
                                   roles)
                break
        else:
            state = projection(self.read(), roles)
        self.remember_snapshot_state(state)
        return state

    def remember_snapshot_state(self, state: pa.Table) -> None:
        import pyarrow.parquet as pq

        tmp = self.projection_dir() / "state.tmp"
        tmp.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(state, tmp)
        self.install_snapshot_state(tmp)

    def install_snapshot_state(self, written: Path) -> Path:
        """Make the Parquet file ``written`` (on the cache's file system) the cached state of
        the newest block, replacing any older one; returns where it now is."""
        folder = self.projection_dir()
        folder.mkdir(parents=True, exist_ok=True)
        target = self.cached_state(self.data_blocks[-1])
        written.replace(target)
        for old in folder.iterdir():
            if old != target:
                old.unlink(missing_ok=True)
        return target
