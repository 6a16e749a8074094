"""The rows a current-ODF dataset's change log describes (appends and correct-tos add a row,
retractions and correct-froms take one away), as the tests compare them with DuckDB's."""
from __future__ import annotations

from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from coordinator.data.odf_slice import Vocabulary
from coordinator.data.row_changes import current_rows
from coordinator.store.dataset import CurrentDataset
from coordinator.workspace import Workspace


def described_rows(home: Path, name: str, columns: tuple[str, ...]) -> Counter:
    """The rows of dataset ``name`` of the workspace in ``home``, as tuples of ``columns``."""
    ds = CurrentDataset(Workspace.open(home), name)
    slices = [pq.read_table(ds.data_file(r.slice)) for r in ds.state().slices]
    if not slices:
        return Counter()
    table = current_rows(pa.concat_tables(slices, promote_options="permissive"), Vocabulary())
    return Counter(zip(*(table[c].to_pylist() for c in columns), strict=True))
