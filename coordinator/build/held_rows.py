"""The rows a current-ODF dataset's change log describes up to a block, as a recomputed step
reads them: folded once, kept, and brought forward by the slices that came after.

A recomputed step (``current_derivative``, RECOMPUTE) runs its query over each input's rows
and compares the answer with the derivative's own rows. Folding every slice each step costs
the whole history, step after step; so the reader keeps, in its own cache folder
(``.coord/cache/<reader>/held-rows/<dataset>@<block>.parquet``), each dataset's rows counted
(``row_changes.write_row_counts``) as of the last data block it read, and the next step adds
only the newer slices' records to them.

Invariants:

- A kept file holds exactly the counts of the dataset's slices up to the block it is named
  after: it is written whole under another name and renamed into place. Counts are sums, so
  a kept file plus the newer slices gives what folding every slice at once gives: a step's
  records do not depend on whether a file was kept. DuckDB spills into the step's folder, never the
  cache's; a half-written file a killed step left is removed by the next.
- A file is used only when its block is one of the dataset's chain up to the step (after a
  reset, one of a block no longer there is never read); one that cannot be read is set aside
  and the rows are folded from every slice. Each reader keeps one file per dataset (the
  newest; each reader moves forward through its inputs, so readers never trade one file).
- It is a cache, not a record: replays and the invariance check fold from the slices alone
  (``cached=False``), so what they check never depends on it; deleting it costs one full
  fold.
"""
from __future__ import annotations

import os
from pathlib import Path

import duckdb

from ..data.row_changes import write_counted_rows, write_row_counts
from ..store.checked import checked_current_files
from ..store.dataset import CurrentDataset
from ..store.read import DatasetState, SliceRecord
from ..store.verify import vocabulary_of
from ..workspace import layout as ws_layout
from ..workspace.fsutil import remove

HELD_ROWS = "held-rows"


def write_held_rows(reader: CurrentDataset, ds: CurrentDataset, state: DatasetState, target: Path,
                    *, cached: bool) -> None:
    """The rows ``state`` (``ds``'s chain up to a block with data) describes, written to
    ``target``; with ``cached``, from the file ``reader`` keeps of ``ds`` and the slices after
    it, and kept anew (module docstring)."""
    slices = state.slices
    v = vocabulary_of(state.vocab)
    folder = reader.ws.meta / ws_layout.cache_dir(reader.id, HELD_ROWS)
    kept = {p.name: p for p in folder.glob(f"{ds.id}@*.parquet")} if cached else {}
    since = next((k for k in range(len(slices), 0, -1) if _name(ds, slices[k - 1]) in kept), 0)
    base = kept[_name(ds, slices[since - 1])] if since else None
    if since == len(slices) and base is not None:
        write_counted_rows(base, target)
        return
    if cached:
        folder.mkdir(parents=True, exist_ok=True)
        for left in folder.glob(f".{ds.id}@*.partial"):  # a step killed while it wrote one
            remove(left)
        counts = folder / f".{_name(ds, slices[-1])}.partial"
    else:
        counts = target.with_name(target.name + ".counts")
    try:
        write_row_counts(checked_current_files(ds, slices[since:]), v, counts, base=base,
                         spill=target.parent)
    except duckdb.Error:
        if base is None:
            raise
        # a kept file that cannot be read: fold every slice
        write_row_counts(checked_current_files(ds, slices), v, counts, spill=target.parent)
    write_counted_rows(counts, target)
    if cached:
        os.replace(counts, folder / _name(ds, slices[-1]))
        for old in kept.values():
            remove(old)
    else:
        counts.unlink()


def _name(ds: CurrentDataset, record: SliceRecord) -> str:
    return f"{ds.id}@{record.block_hash}.parquet"
