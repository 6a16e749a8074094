"""Ingest steps that run in the SQL engine: a root's ``preprocess`` query, and reading the
source files when ``ingest.engine`` says so (``spark``, or ``auto`` for files of at least
``ingest.engineThreshold``), so that a Spark cluster does the parsing.

Reading in the engine gives the records ``read.read_pieces`` gives, in the same order and
with the same types and values, for CSV, JSON Lines and Parquet (other formats are read by
the coordinator):

- the types are fixed before Spark reads: the declared ``schema``, or what the coordinator's
  reader finds in the file's first piece (CSV), or the file's own (Parquet); JSON Lines needs
  a declared schema;
- the read step's options go to Spark by Spark's names (ODF's options are Spark's), with the
  coordinator's defaults where they differ: quotes inside a quoted value are doubled (escape
  ``"``), and a quoted empty value is an empty string (only an unquoted one is null);
- Spark parses in ``FAILFAST`` mode: a record or value that does not fit is an error, never a
  silent null; the coordinator's reader then goes through the file to name the line and
  column (Spark names neither).

One difference is left: a quoted value equal to ``nullValue`` (``"NA"``) is null to Spark and
text to the coordinator.

The merge, the hashes and the commits stay in the coordinator, piece by piece as for files it
reads itself; a block holds the same records either way, but where a pull larger than
``ingest.maxSliceBytes`` cuts its blocks depends on the pieces, which Spark sizes its own way.
"""
from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..metadata.objects import ReadStep, ReadStepCsv, ReadStepJsonLines, ReadStepParquet, TransformSql
from .errors import IngestError

if TYPE_CHECKING:
    from ..engine.port import Engine

# Spark's name of each CSV option of the read step (the rest are JSON Lines' or shared)
_SPARK_OPTIONS = {
    "separator": "sep", "encoding": "encoding", "quote": "quote", "escape": "escape",
    "comment": "comment", "header": "header", "enforce_schema": "enforceSchema",
    "ignore_leading_white_space": "ignoreLeadingWhiteSpace",
    "ignore_trailing_white_space": "ignoreTrailingWhiteSpace", "null_value": "nullValue",
    "empty_value": "emptyValue", "nan_value": "nanValue", "positive_inf": "positiveInf",
    "negative_inf": "negativeInf", "date_format": "dateFormat",
    "timestamp_format": "timestampFormat", "multi_line": "multiLine",
    "primitives_as_string": "primitivesAsString",
}
_FORMATS = {ReadStepCsv: "csv", ReadStepJsonLines: "jsonLines", ReadStepParquet: "parquet"}
# What Spark gives for a quoted empty CSV value, so it can be told from an unquoted one
_EMPTY = "\x00odf:empty\x00"


def run_preprocess(engine: Engine, dataset_id: str, table: pa.Table,
                   transform: TransformSql) -> pa.Table:
    """The root's preprocess query over ``table`` (the view ``input``), run in the engine."""
    from ..engine.port import PreprocessRequest

    scratch = engine.workdir(f"preprocess-{uuid.uuid4().hex[:12]}")
    source, result = scratch / "input.parquet", scratch / "output.parquet"
    pq.write_table(table, source)
    engine.preprocess(PreprocessRequest(transaction_id=scratch.name, dataset_id=dataset_id,
                                        input_path=source, transform=transform, output_path=result))
    return pq.read_table(result)


def can_read(step: ReadStep) -> bool:
    """Whether the engine reads files of this read step (others are read by the coordinator)."""
    return type(step) in _FORMATS


def read_in_engine(engine: Engine, dataset_id: str, path: Path, step: ReadStep, name: str,
                   piece_bytes: int, private: bool) -> Iterator[pa.Table]:
    """The file's records in order, read by the engine in pieces of about ``piece_bytes`` of
    the file; at least one table, maybe empty. ``private``: the file is the pull's own copy
    (fetched or prepared), which the engine may be given as a hard link; the user's own files
    are copied, since the engine can write its run folder."""
    from ..engine.port import EngineError, ReadSourceRequest

    schema = _schema(path, step, name, piece_bytes)
    options = {_SPARK_OPTIONS[k]: _text(v) for k, v in vars(step).items()
               if k in _SPARK_OPTIONS and v is not None}
    quoted_empty = isinstance(step, ReadStepCsv) and step.empty_value is None
    if isinstance(step, ReadStepCsv):
        options.setdefault("escape", '"')
        if quoted_empty:
            options["emptyValue"] = _EMPTY
    scratch = engine.workdir(f"read-{uuid.uuid4().hex[:12]}")
    try:
        source = scratch / ("source" + "".join(path.suffixes[-2:]))
        _place(path, source, private)
        try:
            parts = engine.read_source(ReadSourceRequest(
                transaction_id=scratch.name, dataset_id=dataset_id, input_path=source,
                format=_FORMATS[type(step)], options=options, schema=schema, output_dir=scratch,
                split_bytes=piece_bytes,
            ))
        except EngineError as e:
            _locate(path, step, name, piece_bytes)
            raise IngestError(f"{name}: Spark could not read it ({e.message}), though the "
                              "coordinator's reader can; set ingest.engine to coordinator "
                              "for this source") from None
        finally:
            source.unlink()
        if not parts:
            yield schema.empty_table()
        for part in parts:
            table = pq.read_table(part, columns=schema.names).cast(schema)
            part.unlink()  # the disk holds what is not yet ingested, no more
            yield _empty_strings(table) if quoted_empty else table
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _schema(path: Path, step: ReadStep, name: str, piece_bytes: int) -> pa.Schema:
    from .read import read_pieces
    from .schema_ddl import parse_schema

    if step.schema:
        return parse_schema(step.schema)
    if isinstance(step, ReadStepParquet):
        try:
            return pq.read_schema(path)
        except (pa.ArrowInvalid, OSError) as e:
            raise IngestError(f"{name}: not a readable Parquet file: {e}") from None
    if isinstance(step, ReadStepJsonLines):
        raise IngestError(f"{name}: reading JSON Lines in the engine needs the read step's "
                          "schema; declare it, or set ingest.engine to coordinator")
    # CSV: typed by its first piece, as the coordinator's own reader of a large file does
    return next(read_pieces(path, step, name, piece_bytes)).schema


def _locate(path: Path, step: ReadStep, name: str, piece_bytes: int) -> None:
    """After Spark failed on the file: the coordinator's reader goes through it, and its error
    names the line and column (Spark's names neither); returns if it finds nothing wrong."""
    from .read import read_pieces

    for _ in read_pieces(path, step, name, piece_bytes):
        pass


def _text(value: object) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def _place(path: Path, target: Path, private: bool) -> None:
    """Puts the file where the engine can read it (its run folder)."""
    if private:
        try:
            os.link(path, target)
            return
        except OSError:  # another file system
            pass
    shutil.copyfile(path, target)


def _empty_strings(table: pa.Table) -> pa.Table:
    """Quoted empty values (Spark gave them as ``_EMPTY``) back to empty strings."""
    for i, f in enumerate(table.schema):
        if pa.types.is_string(f.type) or pa.types.is_large_string(f.type):
            column = table.column(i)
            table = table.set_column(i, f, pc.if_else(pc.equal(column, _EMPTY), "", column))
    return table
