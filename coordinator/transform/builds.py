"""The build catalog of a derivative, read from its metadata chain alone (no data files).

Every executed block records, per input in the order of ``inputs``, the system-time interval
of the input blocks it consumed (``schemas/DERIVATIVE-BLOCKS.md``); the query in force is the
one of the newest block at or before it that sets the source. From that follow where the
next step continues in each input (``consumed_until``), which input blocks and which query
produced each block (``builds``), and whether the query changed since the last run.
Nothing here reads Parquet, so ``coord status`` and ``coord log --builds`` stay cheap.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from ..errors import Invalid
from ..metadata.objects import DatasetSourceDerivative, MetadataBlock, TransformSql
from ..metadata.timestamps import IntervalType, TimeInterval
from ..workspace import Dataset, Workspace

Chain = Sequence[tuple[bytes, MetadataBlock]]  # newest first, as Dataset.blocks() yields


@dataclass(frozen=True)
class InputUse:
    dataset_id: str
    interval: TimeInterval  # the input's system times consumed
    blocks: list[bytes]  # the input blocks in that interval, oldest first
    num_records: int


@dataclass(frozen=True)
class Build:
    block_hash: bytes
    system_time: datetime
    inputs: list[InputUse]
    query_block: bytes  # the block that set the query in force
    transform: TransformSql
    num_records: int  # records the block added
    late_rows: int = 0  # rows its step dropped for arriving behind a watermark


def late_rows_words(dataset_id: str, inputs: Sequence[str], late_rows: int, *,
                    corrected: bool = False) -> str:
    """What dropping (or, ``corrected``, recomputing the step for) ``late_rows`` rows in a step
    of ``dataset_id`` means, in one sentence. Spark does not say which input they came from;
    with one input there is no doubt."""
    rows, were = (f"{late_rows:,} rows", "were") if late_rows != 1 else ("1 row", "was")
    of = f" of {inputs[0]}" if len(inputs) == 1 else ""
    if corrected:
        return (f"{rows}{of} arrived behind the watermark of {dataset_id} and corrected its results "
                "(lateRows: correct): it is recomputed over its inputs' rows at each step from now on")
    return f"{rows}{of} arrived behind the watermark of {dataset_id} and {were} dropped"


def consumed_until(chain: Chain, num_inputs: int) -> list[datetime | None]:
    """Per input, the system time of the last input block already consumed (None: nothing yet)."""
    after: list[datetime | None] = [None] * num_inputs
    for _, b in reversed(chain):  # oldest first, so newer bounds win
        for i, s in enumerate((b.input_slices or [])[:num_inputs]):
            if s.interval.type is not IntervalType.EMPTY:
                after[i] = s.interval.right
    return after


def query_in_force_at(chain: Chain, block_hash: bytes) -> tuple[bytes, TransformSql]:
    """The newest block at or before ``block_hash`` that sets the source, and its transform."""
    h, source = source_in_force_at(chain, block_hash)
    return h, source.transform


def source_in_force_at(chain: Chain, block_hash: bytes) -> tuple[bytes, DatasetSourceDerivative]:
    """The newest block at or before ``block_hash`` that sets the source, and that source."""
    seen = False
    for h, b in chain:
        seen = seen or h == block_hash
        if seen and isinstance(b.source, DatasetSourceDerivative):
            return h, b.source
    raise ValueError("no source before the executed block")


def last_run_query(chain: Chain) -> TransformSql | None:
    """The query of the newest executed block (None: never run)."""
    last = next((h for h, b in chain if b.input_slices is not None), None)
    return query_in_force_at(chain, last)[1] if last is not None else None


def source_of(chain: Chain, dataset_id: str) -> DatasetSourceDerivative:
    source = next((b.source for _, b in chain if b.source is not None), None)
    if not isinstance(source, DatasetSourceDerivative):
        raise Invalid(f"{dataset_id} is not a derivative dataset")
    return source


def builds(ws: Workspace, ds: Dataset) -> list[Build]:
    """Every executed block of ``ds``, newest first, with the input blocks and query behind it."""
    chain = list(ds.blocks())
    source = source_of(chain, ds.id)
    input_chains = {i: [(h, b.system_time) for h, b in ws.dataset(i).blocks()] for i in source.inputs}
    out = []
    for h, b in chain:
        if b.input_slices is None:
            continue
        query_block, transform = query_in_force_at(chain, h)
        uses = [
            InputUse(i, s.interval, _blocks_in(input_chains[i], s.interval), s.num_records)
            for i, s in zip(source.inputs, b.input_slices, strict=False)
        ]
        n = b.output_slice.num_records if b.output_slice else 0
        out.append(Build(h, b.system_time, uses, query_block, transform, n, b.late_rows or 0))
    return out


def _blocks_in(chain: list[tuple[bytes, datetime]], interval: TimeInterval) -> list[bytes]:
    if interval.type is IntervalType.EMPTY:
        return []
    left, right = interval.left, interval.right
    return [h for h, t in reversed(chain) if (left is None or t > left) and (right is None or t <= right)]
