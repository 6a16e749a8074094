"""A dataset's read model: everything the services ask of its chain, built in one walk.

``DatasetState`` is taken once per command (by a writer under its lock) and handed down to
whatever needs it (status, list, recover, the ingest and transform plans, commit), so no
service walks the chain again. It is frozen: a writer that commits gets a new state from
``appended`` instead of reading the chain back. A state describes the chain up to ``head``;
the chain is content-addressed, so a state whose head is still the dataset's head is current.

Nothing here opens a data file; ``schema`` reads the newest slice's Parquet footer when asked.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime
from functools import cached_property
from typing import TYPE_CHECKING

from ..metadata.chain import ChainBlock
from ..metadata.objects import (
    DatasetSource,
    DatasetSourceDerivative,
    DatasetVocabulary,
    DataSlice,
    MetadataBlock,
)

if TYPE_CHECKING:
    import pyarrow as pa

    from .dataset import Dataset


@dataclass(frozen=True)
class DataBlock:
    """A block that added a data slice."""

    hash: bytes
    system_time: datetime
    slice: DataSlice


@dataclass(frozen=True)
class DatasetState:
    id: str
    chain: tuple[ChainBlock, ...]  # checked blocks, newest first
    source: DatasetSource  # the definition in force (newest SetPollingSource/SetTransform)
    vocab: DatasetVocabulary
    watermark: datetime | None
    num_records: int
    data_blocks: tuple[DataBlock, ...]  # oldest first
    last_run: bytes | None  # the newest block a transform executed (it has inputSlices)
    fetch_states: frozenset[bytes]  # the blocks of the chain that committed a fetch state

    @staticmethod
    def build(dataset_id: str, chain: Iterable[ChainBlock],
              fetch_states: frozenset[bytes] = frozenset()) -> DatasetState:
        """One pass over ``chain`` (newest first); ``fetch_states``: the blocks whose fetch
        state is stored (a state no block of the chain names is left out)."""
        blocks: list[ChainBlock] = []
        source = vocab = watermark = last_run = None
        records = 0
        data: list[DataBlock] = []
        for cb in chain:
            b = cb.block
            blocks.append(cb)
            source = source or b.source
            vocab = vocab or b.vocab
            watermark = watermark or b.output_watermark
            if b.output_slice is not None:
                records += b.output_slice.num_records
                data.append(DataBlock(cb.hash, b.system_time, b.output_slice))
            if last_run is None and b.input_slices is not None:
                last_run = cb.hash
        assert source is not None, "chain.walk refuses a chain whose first block has no source"
        states = frozenset(cb.hash for cb in blocks if cb.hash in fetch_states)
        return DatasetState(dataset_id, tuple(blocks), source, vocab or DatasetVocabulary(), watermark,
                            records, tuple(reversed(data)), last_run, states)

    def appended(self, cb: ChainBlock, *, fetch_state: bool = False) -> DatasetState:
        """The state once ``cb`` (whose predecessor is this head) is committed."""
        b = cb.block
        return replace(
            self,
            chain=(cb, *self.chain),
            source=b.source or self.source,
            vocab=b.vocab or self.vocab,
            watermark=b.output_watermark or self.watermark,
            num_records=self.num_records + (b.output_slice.num_records if b.output_slice else 0),
            data_blocks=self.data_blocks + ((DataBlock(cb.hash, b.system_time, b.output_slice),)
                                            if b.output_slice else ()),
            last_run=cb.hash if b.input_slices is not None else self.last_run,
            fetch_states=self.fetch_states | {cb.hash} if fetch_state else self.fetch_states,
        )

    def up_to(self, block_hash: bytes) -> DatasetState:
        """The state as it was when ``block_hash`` (a block of this chain) was the head."""
        i = [cb.hash for cb in self.chain].index(block_hash)
        return DatasetState.build(self.id, self.chain[i:], self.fetch_states)

    # --- derived --------------------------------------------------------------------------------

    @property
    def head(self) -> bytes:
        return self.chain[0].hash

    @property
    def last_updated(self) -> datetime:
        """The head's system time."""
        return self.chain[0].block.system_time

    @property
    def num_blocks(self) -> int:
        return len(self.chain)

    @property
    def kind(self) -> str:
        return "derivative" if isinstance(self.source, DatasetSourceDerivative) else "root"

    @cached_property
    def blocks(self) -> tuple[tuple[bytes, MetadataBlock], ...]:
        """(hash, block), newest first: the form ``transform.builds`` reads."""
        return tuple((cb.hash, cb.block) for cb in self.chain)

    @cached_property
    def fetch_state_block(self) -> bytes | None:
        """The newest block that committed a fetch state: where the next fetch continues."""
        return next((cb.hash for cb in self.chain if cb.hash in self.fetch_states), None)

    @cached_property
    def hashes(self) -> frozenset[bytes]:
        return frozenset(cb.hash for cb in self.chain)

    def schema(self, ds: Dataset) -> pa.Schema | None:
        """The schema of the newest slice (None while there is no data): what the next slice
        must keep (``data.schema_growth``) and what an engine plans with."""
        import pyarrow.parquet as pq

        return pq.read_schema(ds.data_file(self.data_blocks[-1].hash)) if self.data_blocks else None
