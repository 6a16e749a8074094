"""Compacted data files of a current-ODF (0.39) dataset: where the rows of a slice are once
``coord compact`` merged small slices into larger files (``compact.py`` writes them).

A compacted file holds a run of consecutive slices of the chain, each slice's rows in their
stored order one after the other; ``compacted/index.json`` (``store/layout.py``) says, for
each file, its multihash and size and, for each slice, the physical hash its block records,
the row of the file where its rows start, its offsets, whether its original file is kept and
whether its bytes are rebuilt from its rows byte for byte (``rebuilt``: the slice's rows
written again with the reference's writer settings, ``odf_slice.PARQUET_OPTIONS``).

Invariants:

- Not one block changes: the chain, its hashes and signatures are those before the
  compaction; the index and the compacted files are this workspace's own (never pushed, as
  ``signatures/`` is pushed only as a block's companion), and the folder stays the reference's
  layout plus ``compacted/``.
- Every slice in the index is checkable by its block: its rows (the file's rows from
  ``row``, as many as its offsets) hash to the block's logical hash, and, where ``rebuilds``,
  written again they are the block's bytes (physical hash and size). ``compact`` wrote the
  index only after checking both on the file as written, read back.
- An original file is removed only when it is rebuilt byte for byte from its rows, and only
  after the index naming its rows is durable; an original that cannot be rebuilt is kept.
- The index is replaced atomically (readers see the old or the new one) and only names
  files already durable in place; a compacted file no index names is a leftover of a killed
  compaction, which the next one removes.
- Readers resolve a slice here, and only here (``slice_files``, ``scan``): its original when
  present, else its bytes rebuilt into ``compacted/rows/`` (a cache, rebuilt when missing, and
  checked by its block's physical hash like an original), or, for a run of slices that covers
  a compacted file whole, that file (checked by the index's size and multihash).
"""
from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from ..metadata.multiformats import SHA3_256, Multihash
from ..workspace.fsutil import atomic_write, physical_hash
from . import layout
from .read import StoreError

if TYPE_CHECKING:
    import pyarrow as pa

INDEX_VERSION = 1
# rows per row group of a compacted file: DuckDB's unit of parallel scanning, and what a reader
# of one slice's rows reads at most beyond them
COMPACTED_ROW_GROUP = 122_880


class NotRebuildable(StoreError):
    """A compacted slice whose original is gone and whose bytes its rows do not give back."""


@dataclass(frozen=True)
class Placed:
    """One slice's rows in a compacted file."""

    physical: Multihash  # the physical hash its block records (the original file's name)
    row: int  # the file's row where its rows start
    start: int  # its first and last offset, as its block records them
    end: int
    size: int  # the original file's size, as its block records it
    rebuilds: bool  # its rows written again are its original bytes
    kept: bool  # its original file stays

    @property
    def rows(self) -> int:
        return self.end - self.start + 1


@dataclass(frozen=True)
class CompactedFile:
    name: Multihash  # SHA3-256 multihash of its bytes
    size: int
    slices: tuple[Placed, ...]

    @property
    def rows(self) -> int:
        return sum(p.rows for p in self.slices)


@dataclass(frozen=True)
class CompactionIndex:
    files: tuple[CompactedFile, ...] = ()

    @cached_property
    def _placed(self) -> dict[Multihash, tuple[CompactedFile, Placed]]:
        return {p.physical: (f, p) for f in self.files for p in f.slices}

    def placement(self, physical: Multihash) -> tuple[CompactedFile, Placed] | None:
        return self._placed.get(physical)

    def with_files(self, files: Sequence[CompactedFile]) -> CompactionIndex:
        return CompactionIndex((*self.files, *files))

    def to_json(self) -> bytes:
        return json.dumps({"version": INDEX_VERSION, "files": [
            {"name": str(f.name), "size": f.size, "slices": [
                {"physical": str(p.physical), "row": p.row, "start": p.start, "end": p.end,
                 "size": p.size, "rebuilds": p.rebuilds, "kept": p.kept} for p in f.slices]}
            for f in self.files]}, separators=(",", ":")).encode()

    @staticmethod
    def from_json(data: bytes, where: Path) -> CompactionIndex:
        try:
            doc = json.loads(data)
            if doc.get("version") != INDEX_VERSION:
                raise ValueError(f"version {doc.get('version')!r}")
            return CompactionIndex(tuple(CompactedFile(
                Multihash.parse(f["name"]), int(f["size"]), tuple(Placed(
                    Multihash.parse(p["physical"]), int(p["row"]), int(p["start"]), int(p["end"]),
                    int(p["size"]), bool(p["rebuilds"]), bool(p["kept"])) for p in f["slices"]))
                for f in doc["files"]))
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise StoreError(f"{where}: not a compaction index coord can read ({e}); restore it "
                             "from a backup, or pull the dataset again into a new workspace") from None


_loaded: dict[Path, tuple[tuple[int, int, int], CompactionIndex]] = {}


def load_index(root: Path) -> CompactionIndex:
    """The dataset's compaction index (empty: never compacted), read once per file state."""
    path = root / layout.COMPACTION_INDEX
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return CompactionIndex()
    key = (st.st_ino, st.st_size, st.st_mtime_ns)
    held = _loaded.get(path)
    if held is None or held[0] != key:
        held = key, CompactionIndex.from_json(path.read_bytes(), path)
        _loaded[path] = held
    return held[1]


def save_index(root: Path, index: CompactionIndex) -> None:
    atomic_write(root / layout.COMPACTION_INDEX, index.to_json())


def file_problem(root: Path, file: CompactedFile) -> str | None:
    """Why the compacted file is not the one its compaction wrote (checked before parsing)."""
    path = root / layout.compacted_file(file.name)
    if not path.is_file():
        return "missing"
    size = path.stat().st_size
    actual = Multihash(SHA3_256, physical_hash(path)) if size == file.size else None
    if actual == file.name:
        return None
    found = f"{size} bytes hashing to {actual}" if actual else f"{size} bytes"
    return (f"not the file its compaction wrote ({found}, it recorded {file.size} bytes hashing to "
            "its name; the file was changed)")


# --- rows and bytes ---------------------------------------------------------------------------


def rows_of(path: Path, placed: Sequence[Placed]) -> list[pa.Table]:
    """Each placed slice's rows from the compacted file ``path``, reading only the span of
    row groups that holds them."""
    import pyarrow.parquet as pq

    f = pq.ParquetFile(path)
    sizes = [f.metadata.row_group(g).num_rows for g in range(f.metadata.num_row_groups)]
    starts = [sum(sizes[:g]) for g in range(len(sizes))]
    held = [g for g in range(len(sizes))
            if any(starts[g] < p.row + p.rows and p.row < starts[g] + sizes[g] for p in placed)]
    if not held:
        return [f.schema_arrow.empty_table() for _ in placed]
    table = f.read_row_groups(range(held[0], held[-1] + 1))
    base = starts[held[0]]
    return [table.slice(p.row - base, p.rows).combine_chunks() for p in placed]


def rebuilt_bytes(rows: pa.Table) -> bytes:
    """A slice's rows written as the reference writes slices (``odf_slice.write_slice``)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ..data.odf_slice import PARQUET_OPTIONS

    sink = pa.BufferOutputStream()
    pq.write_table(rows, sink, **PARQUET_OPTIONS)
    return sink.getvalue().to_pybytes()


# --- what readers read --------------------------------------------------------------------------


def slice_files(root: Path, slices: Sequence[Multihash]) -> list[Path]:
    """The file holding the bytes of each slice (named by the physical hash its block records):
    its original, else (compacted) its bytes rebuilt from its rows into ``compacted/rows/``,
    written now if missing; an unknown missing original is left as its path (the caller's
    check says it is missing). Raises ``NotRebuildable`` for a compacted slice whose original
    is gone and whose rows do not give its bytes back."""
    paths = [root / layout.data_file(s) for s in slices]
    missing = [i for i, p in enumerate(paths) if not p.is_file()]
    if not missing:
        return paths
    index = load_index(root)
    todo: dict[CompactedFile, list[Placed]] = {}
    for i in missing:
        found = index.placement(slices[i])
        if found is None:
            continue
        file, placed = found
        paths[i] = root / layout.rebuilt_file(placed.physical)
        if not paths[i].is_file():
            if not placed.rebuilds:
                raise NotRebuildable(
                    f"dataset {root.name}: {layout.data_file(placed.physical)} was compacted and is "
                    "gone, and its rows do not give its bytes back; pull the dataset again from a "
                    "repository that holds it")
            todo.setdefault(file, []).append(placed)
    for file, placed_ in todo.items():
        for p, rows in zip(placed_, rows_of(root / layout.compacted_file(file.name), placed_), strict=True):
            atomic_write(root / layout.rebuilt_file(p.physical), rebuilt_bytes(rows))
    return paths


@dataclass(frozen=True)
class Piece:
    """Consecutive slices a reader reads as one file: a compacted file (``file``), or one
    slice (``file`` None) whose file ``slice_files`` gives."""

    first: int  # the index of its first slice in what was asked
    count: int
    file: CompactedFile | None


def scan(root: Path, slices: Sequence[Multihash]) -> list[Piece]:
    """The pieces that give exactly the rows of ``slices`` in their order, as few as may be:
    each run of them that is a compacted file's whole content is that file."""
    index = load_index(root)
    pieces: list[Piece] = []
    i = 0
    while i < len(slices):
        found = index.placement(slices[i])
        if found is not None and found[1] == found[0].slices[0]:
            file = found[0]
            n = len(file.slices)
            if list(slices[i:i + n]) == [p.physical for p in file.slices]:
                pieces.append(Piece(i, n, file))
                i += n
                continue
        pieces.append(Piece(i, 1, None))
        i += 1
    return pieces
