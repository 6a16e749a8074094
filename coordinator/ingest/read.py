"""Read step: a prepared file → an Arrow table, with the step's schema applied.

CSV and JSON Lines use Arrow's multi-threaded readers; Parquet (an extension read step, see
``schemas/EXTENSIONS.md``) is read as stored. Columns Arrow cannot convert the way a
read step asks (see ``convert.TextOptions.needs_text``) are read as text and converted by
``convert``. Errors name the file and the line (CSV, JSON Lines) or the row; a CSV header with
more columns than a read schema that names them by position names the ones it lacks.

Defaults follow Spark's CSV reader, which ODF 0.18 manifests were written for: ``header``
false, separator ``,``, quote ``"``, an empty field is null. Deliberate differences: with no
``schema`` the types are inferred unless ``inferSchema: false`` (then every column is text);
there is no default ``escape`` (the CSV convention of doubled quotes works); ``comment`` lines
are skipped only when the comment character starts the line.
"""
from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from ..data import parquet_reader
from ..metadata.objects import (
    ReadStep,
    ReadStepCsv,
    ReadStepEsriShapefile,
    ReadStepGeoJson,
    ReadStepJsonLines,
    ReadStepParquet,
)
from .convert import ConversionError, TextOptions, convert_column, reading_decimal
from .errors import IngestError
from .schema_ddl import parse_schema
from .time_patterns import to_strftime

_CSV_ROW_ERROR = re.compile(r"^(?:In CSV column #(\d+): )?(?:CSV parse error: )?Row #(\d+): (.*)$",
                            re.S)
_JSON_ROW_ERROR = re.compile(r"^(?:JSON parse error: )?(.*) in row (\d+)$", re.S)


def read(path: Path, step: ReadStep, name: str, *, reference: ReferenceReading | None = None) -> pa.Table:
    """Read one prepared file; ``name`` is how messages call it (the fetched file's name).
    ``reference``: a current-ODF dataset's file, read as the reference reads it."""
    table = _read(path, step, name, reference)
    if reference is not None:
        reference.check_required(table, name)
    return table


def _read(path: Path, step: ReadStep, name: str, reference: ReferenceReading | None) -> pa.Table:
    try:
        if isinstance(step, ReadStepCsv):
            return _read_csv(path, step, name, None, reference)
        if isinstance(step, ReadStepJsonLines):
            return _read_json_lines(path, step, name, reference)
        if isinstance(step, ReadStepGeoJson):
            return _read_geojson(path, step, name, reference)
        if isinstance(step, ReadStepParquet):
            return _read_parquet(path, step, name, reference)
    except ConversionError as e:
        raise IngestError(f"{name}: {e}") from None
    assert isinstance(step, ReadStepEsriShapefile)
    raise IngestError(f"{name}: reading Esri shapefiles is not supported (no shapefile library "
                      "is installed); convert it to GeoJSON in a prepare 'pipe' step, e.g. with "
                      "ogr2ogr -f GeoJSON /vsistdout/ /vsistdin/")


def read_pieces(path: Path, step: ReadStep, name: str, piece_bytes: int, *,
                reference: ReferenceReading | None = None) -> Iterator[pa.Table]:
    """The file's records in order, in tables read from about ``piece_bytes`` of the file each,
    so a file larger than memory can be ingested; at least one table, maybe empty.

    The records and types are those ``read`` gives, with one difference: without a schema,
    a CSV file is typed by its first piece (``read`` types it by all of it), and a later value
    that does not fit that type is an error asking for a schema. Split: CSV of a one-byte-
    newline encoding without ``multiLine`` (a piece ends at a line end and gets the header
    line again), and Parquet (by batches of rows). Other files are read whole.
    """
    if reference is None:
        yield from _read_pieces(path, step, name, piece_bytes, None)
        return
    rows = 0
    for table in _read_pieces(path, step, name, piece_bytes, reference):
        reference.check_required(table, name, rows)
        rows += table.num_rows
        yield table


def _read_pieces(path: Path, step: ReadStep, name: str, piece_bytes: int,
                 reference: ReferenceReading | None) -> Iterator[pa.Table]:
    size = path.stat().st_size
    try:
        if size > piece_bytes and isinstance(step, ReadStepCsv) and not step.multi_line \
                and _codec(step.encoding).replace("-", "").lower() in _SPLITTABLE_CODECS:
            yield from _csv_pieces(path, step, name, piece_bytes, reference)
            return
        if size > piece_bytes and isinstance(step, ReadStepParquet):
            yield from _parquet_pieces(path, step, name, piece_bytes, reference)
            return
    except ConversionError as e:
        raise IngestError(f"{name}: {e}") from None
    yield _read(path, step, name, reference)


@dataclass(frozen=True)
class ReferenceReading:
    """A current-ODF (0.39) dataset's file, read as the reference (kamu-cli 0.265) reads it:
    a timestamp's digits finer than its column's unit are dropped, flooring the instant (not
    refused: ``convert``); with ``ddl_schema`` (the read step's schema is DDL text, its
    ``ddlSchema``), a ``TIMESTAMP`` column of any precision is parsed from text in
    milliseconds, UTC, as the reference converts DDL to an ODF schema (a Parquet column is
    converted as stored, then truncated to milliseconds with the rest of the slice, as the
    reference's cast does).

    ``required``: the columns whose records must hold a value, each with why and what to do
    (``ingest.current.CurrentHistory.required_columns``): the reference reads a column its read
    schema declares required as non-nullable, and refuses a file with a null in it (arrow-rs:
    "declared as non-nullable but contains null values"); so is the file here, in one line
    naming it, the row and the column."""

    ddl_schema: bool
    required: tuple[tuple[str, str], ...] = ()  # (column, why it is required and what to do)

    def check_required(self, table: pa.Table, name: str, rows_before: int = 0) -> None:
        """Refuse a null in a required column of ``table``, the records of the file ``name``
        after its first ``rows_before``."""
        for column, why in self.required:
            if column in table.column_names and table.column(column).null_count:
                row = pc.index(pc.is_null(table.column(column)), True).as_py()
                raise IngestError(f"{name}: row {rows_before + row + 1}: column {column!r} is "
                                  f"null, but {why}")


def _schema(step: ReadStep, reference: ReferenceReading | None) -> pa.Schema | None:
    if not step.schema:
        return None
    schema = parse_schema(step.schema)
    if reference is None or not reference.ddl_schema or isinstance(step, ReadStepParquet):
        return schema
    return pa.schema([f.with_type(pa.timestamp("ms", tz="UTC")) if pa.types.is_timestamp(f.type) else f
                      for f in schema])


def _text_options(step, reference: ReferenceReading | None) -> TextOptions:
    def fmt(value):
        return to_strftime(value) if value else None

    return TextOptions(
        date_format=fmt(step.date_format), timestamp_format=fmt(step.timestamp_format),
        nan_value=getattr(step, "nan_value", None),
        positive_inf=getattr(step, "positive_inf", None),
        negative_inf=getattr(step, "negative_inf", None),
        trim_leading=bool(getattr(step, "ignore_leading_white_space", False)),
        trim_trailing=bool(getattr(step, "ignore_trailing_white_space", False)),
        empty_value=getattr(step, "empty_value", None),
        floor_times=reference is not None,
    )


def _apply_schema(table: pa.Table, schema: pa.Schema, text: TextOptions) -> pa.Table:
    """Columns in schema order and type; text columns and decimals go through ``convert``.

    A declared column the data lacks is all nulls (as in Spark); undeclared columns are dropped.
    """
    columns = []
    for f in schema:
        if f.name not in table.column_names:
            columns.append(pa.nulls(table.num_rows, f.type))
            continue
        col = table.column(f.name)
        is_text = pa.types.is_string(col.type) or pa.types.is_large_string(col.type)
        if is_text or pa.types.is_decimal(f.type):
            columns.append(convert_column(f.name, col, f.type, text))
        elif col.type == f.type:
            columns.append(col)
        else:
            try:
                columns.append(col.cast(f.type))
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                raise IngestError(
                    f"column {f.name!r}: cannot convert {col.type} to {f.type}: {e}") from None
    return pa.Table.from_arrays(columns, schema=schema)


# --- CSV ---------------------------------------------------------------------------------------


# where a piece's newlines are the byte 0x0A and nothing else is
_SPLITTABLE_CODECS = ("utf8", "ascii", "usascii", "latin1", "iso88591", "cp1252", "windows1252")


@dataclass(frozen=True)
class _CsvPiece:
    data: bytes | bytearray  # whole lines of the file (after the first piece: the header line first)
    rows_before: int  # records of the file in earlier pieces
    types: dict[str, pa.DataType] | None  # without a schema: the first piece's, by column


def _csv_pieces(path: Path, step: ReadStepCsv, name: str, piece_bytes: int,
                reference: ReferenceReading | None) -> Iterator[pa.Table]:
    comment = step.comment.encode() if step.comment else None
    header = b""
    rows = 0
    types = None
    with open(path, "rb") as f:
        for line in iter(f.readline, b"") if step.header else ():
            if not (comment and line.startswith(comment)):  # the first line not a comment
                header = line
                break
        while True:
            # the header line, then the piece read in place behind it (each copy of a piece
            # is tens of MB to fault in and fill)
            data = bytearray(len(header) + piece_bytes)
            data[:len(header)] = header
            got = f.readinto(memoryview(data)[len(header):])
            del data[len(header) + got:]
            if got and not data.endswith(b"\n"):
                data += f.readline()  # the rest of the line
            if not got and types is not None:
                return
            table = _read_csv(path, step, name, _CsvPiece(data, rows, types), reference)
            if types is None:  # later pieces are typed like the first (with a schema: as it says)
                raw = table.column_names if step.header else [f"f{i}" for i in range(table.num_columns)]
                types = {n: t for n, t in zip(raw, table.schema.types, strict=True)} \
                    if step.schema is None else {}
            rows += table.num_rows
            yield table
            if not got:
                return


def _parquet_pieces(path: Path, step: ReadStepParquet, name: str, piece_bytes: int,
                    reference: ReferenceReading | None) -> Iterator[pa.Table]:
    schema = _schema(step, reference)
    try:
        f = parquet_reader(path)
        md = f.metadata
        stored = sum(md.row_group(i).total_byte_size for i in range(md.num_row_groups))
        batch = max(1, md.num_rows * piece_bytes // max(stored, 1))
        columns = None if schema is None else [c for c in schema.names if c in f.schema_arrow.names]
        batches = f.iter_batches(batch_size=batch, columns=columns)
        tables = (pa.Table.from_batches([b]) for b in batches)
        rows = 0
        for table in tables:
            yield _parquet_table(table, schema, rows, reference)
            rows += table.num_rows
        if not rows:
            yield _parquet_table(f.schema_arrow.empty_table(), schema, 0, reference)
    except (pa.ArrowInvalid, OSError) as e:
        raise IngestError(f"{name}: not a readable Parquet file: {e}") from None


def _read_csv(path: Path, step: ReadStepCsv, name: str, piece: _CsvPiece | None,
              reference: ReferenceReading | None = None) -> pa.Table:
    schema, text = _schema(step, reference), _text_options(step, reference)
    if step.separator is not None and len(step.separator) != 1:
        raise IngestError(f"{name}: csv separator must be one character, got {step.separator!r}")
    header = bool(step.header)
    by_name = schema is not None and header and step.enforce_schema is False
    # Declared types: 4 MiB blocks, so more threads share a file (~5% of a pull). Inferred:
    # 16 MiB, where a type that changes in a later block costs less (Arrow converts again)
    block_size = 1 << 22 if schema is not None or (piece is not None and piece.types) else 1 << 24
    read_opts = dict(encoding=_codec(step.encoding), block_size=block_size)
    # an empty unquoted field is null; a quoted "" is an empty string (or emptyValue)
    convert_opts = dict(null_values=sorted({step.null_value or "", ""}),
                        strings_can_be_null=True, quoted_strings_can_be_null=False)
    if schema is not None:
        if by_name:  # enforceSchema false: the header names the columns, matched by name
            convert_opts["include_columns"] = schema.names
        else:  # the schema names the columns by position; a header line is skipped
            read_opts.update(column_names=schema.names, skip_rows=1 if header else 0)
        convert_opts["column_types"] = {
            f.name: pa.string() if text.needs_text(f.type) else f.type for f in schema}
    else:
        read_opts["autogenerate_column_names"] = not header
        if text.timestamp_format:
            convert_opts["timestamp_parsers"] = [text.timestamp_format, pacsv.ISO8601]
        if piece is not None and piece.types:  # typed like the first piece
            convert_opts["column_types"] = piece.types
    parse_opts = pacsv.ParseOptions(
        delimiter=step.separator or ",",
        quote_char=(step.quote or False) if step.quote is not None else '"',
        escape_char=step.escape or False,
        newlines_in_values=bool(step.multi_line),
    )
    data = piece.data if piece is not None else path.read_bytes() if step.comment else None
    if data is not None and step.comment:
        data = _without_comments(data, step.comment)

    def source():  # the file, or its bytes without comment lines
        return str(path) if data is None else pa.BufferReader(data)

    if by_name:
        assert schema is not None  # by_name implies a schema
        header_names = pacsv.open_csv(source(),
                                      read_options=pacsv.ReadOptions(encoding=read_opts["encoding"]),
                                      parse_options=parse_opts).schema.names
        missing = [n for n in schema.names if n not in header_names]
        if missing:
            raise IngestError(f"{name}: the header has no column {missing[0]!r} of the schema")

    def attempt(threads: bool, **extra_convert) -> pa.Table:
        def read_csv() -> pa.Table:
            return pacsv.read_csv(
                source(),
                read_options=pacsv.ReadOptions(use_threads=threads, **read_opts),
                parse_options=parse_opts,
                convert_options=pacsv.ConvertOptions(**{**convert_opts, **extra_convert}),
            )

        try:
            return read_csv()
        except pa.ArrowInvalid as e:
            if "straddl" not in str(e):
                raise
        # a record longer than a block: read it all as one block (Arrow's limit is 2 GiB)
        size = len(data) if data is not None else path.stat().st_size
        read_opts["block_size"] = min(max(size + 1, 1 << 24), (1 << 31) - 1)
        return read_csv()

    typed = "column_types" in convert_opts
    rows_before = piece.rows_before if piece is not None else 0
    try:
        table = attempt(True)
        if not typed and step.infer_schema is False:  # every column as text
            table = attempt(True, column_types={n: pa.string() for n in table.column_names})
    except pa.ArrowInvalid:
        if schema is not None and header and not by_name and not rows_before:
            first = data.split(b"\n", 1)[0] if data is not None else _first_line(path)
            extra = _header(first, _codec(step.encoding), parse_opts)[len(schema):]  # by position
            if extra:
                raise IngestError(_extra_columns(name, extra, schema.names)) from None
        # Arrow knows the row number of a bad row only when reading on one thread
        try:
            attempt(False)
        except pa.ArrowInvalid as e:
            hint = ("; the file is read in pieces, typed by the first: declare the column types "
                    "in the read step's schema") if rows_before and schema is None else ""
            raise IngestError(_csv_error(name, str(e), path, step, read_opts, rows_before)
                              + hint) from None
        raise
    try:
        if schema is None:
            if not header:  # Spark's names for headerless files
                table = table.rename_columns([f"_c{i}" for i in range(table.num_columns)])
            return _apply_text_options(table, text)
        return _apply_schema(table, schema, text)
    except ConversionError as e:
        raise e.shifted(rows_before) from None


def _apply_text_options(table: pa.Table, text: TextOptions) -> pa.Table:
    """Without a schema: trimming and emptyValue still apply to text columns."""
    for i, f in enumerate(table.schema):
        if pa.types.is_string(f.type) and text.needs_text(f.type):
            table = table.set_column(i, f, convert_column(f.name, table.column(i), f.type, text))
    return table


def _codec(encoding: str | None) -> str:
    return encoding or "utf8"


def _without_comments(data: bytes | bytearray, comment: str) -> bytes:
    """The lines without comment lines (``_line_of_row`` skips them too when counting)."""
    return re.sub(rb"(?m)^" + re.escape(comment.encode()) + rb"[^\n]*(?:\n|$)", b"", data)


def _csv_error(name: str, message: str, path: Path, step: ReadStepCsv, read_opts: dict,
               rows_before: int = 0) -> str:
    """``file.csv:LINE: column 'x': ...`` from Arrow's 'Row #N' message (N counted in a piece
    whose records start after ``rows_before`` of the file's)."""
    m = _CSV_ROW_ERROR.match(message)
    if not m:
        return f"{name}: {message}"
    column, row, detail = m.group(1), int(m.group(2)) + rows_before, m.group(3)
    where = f"column {_column_name(int(column), read_opts, path, step)!r}: " if column else ""
    line = None if step.multi_line else _line_of_row(path, row, step.comment)
    place = f"{name}:{line}" if line else f"{name}: row {row}"
    return f"{place}: {where}{detail}"


def _first_line(path: Path) -> bytes:
    with open(path, "rb") as f:
        return f.readline()


def _header(line: bytes | bytearray, encoding: str, parse_opts: pacsv.ParseOptions) -> list[str]:
    """The column names a header line gives (none when it is not one CSV line)."""
    try:
        return pacsv.read_csv(pa.BufferReader(line), read_options=pacsv.ReadOptions(encoding=encoding),
                              parse_options=parse_opts).column_names
    except pa.ArrowInvalid:
        return []


def _extra_columns(name: str, extra: list[str], declared: list[str]) -> str:
    """A CSV whose header names more columns than the read schema declares."""
    listed, them = ", ".join(repr(c) for c in extra), "them" if len(extra) > 1 else "it"
    return (f"{name}: the header has the column{'s' if len(extra) > 1 else ''} {listed}, which the "
            f"dataset's read schema ({', '.join(declared)}) does not declare: remove {them} from "
            f"the file, or declare {them} in the read step's schema (coord add --replace)")


def _column_name(index: int, read_opts: dict, path: Path, step: ReadStepCsv):
    names = read_opts.get("column_names")
    if names is None and step.header:
        with open(path, encoding=_codec(step.encoding), errors="replace") as f:
            names = f.readline().rstrip("\r\n").split(step.separator or ",")
    return names[index] if names and index < len(names) else f"#{index + 1}"


def _line_of_row(path: Path, row: int, comment: str | None) -> int | None:
    """The 1-based line of Arrow's row number (Arrow counts neither blank nor comment lines)."""
    skip = comment.encode() if comment else None
    seen = 0
    with open(path, "rb") as f:
        for line_no, line in enumerate(f, start=1):
            if not line.strip(b"\r\n") or (skip and line.startswith(skip)):
                continue
            seen += 1
            if seen == row:
                return line_no
    return None


# --- JSON Lines, GeoJSON -----------------------------------------------------------------------


def _read_json_lines(path: Path, step: ReadStepJsonLines, name: str,
                     reference: ReferenceReading | None) -> pa.Table:
    import pyarrow.json as pajson  # only here: a CSV pull need not load Arrow's JSON reader

    schema, text = _schema(step, reference), _text_options(step, reference)
    explicit = None
    if schema is not None and not step.primitives_as_string:
        explicit = pa.schema([pa.field(f.name, _json_reading_type(f.type, text)) for f in schema])
    parse_opts = pajson.ParseOptions(
        explicit_schema=explicit, newlines_in_values=bool(step.multi_line),
        unexpected_field_behavior="ignore" if explicit else "infer")
    if step.encoding and step.encoding.replace("-", "").lower() != "utf8":
        source = pa.BufferReader(path.read_text(encoding=step.encoding).encode())
    else:
        source = str(path)

    def attempt(threads: bool) -> pa.Table:
        if isinstance(source, pa.BufferReader):
            source.seek(0)
        return pajson.read_json(source, read_options=pajson.ReadOptions(use_threads=threads),
                                parse_options=parse_opts)

    try:
        table = attempt(True)
    except pa.ArrowInvalid:
        try:
            attempt(False)
        except pa.ArrowInvalid as e:
            m = _JSON_ROW_ERROR.match(str(e))
            if m and not step.multi_line:
                raise IngestError(f"{name}:{int(m.group(2)) + 1}: {m.group(1)}") from None
            raise IngestError(f"{name}: {e}") from None
        raise
    if step.primitives_as_string:
        table = pa.table({f.name: _as_text(table.column(f.name)) for f in table.schema})
    return table if schema is None else _apply_schema(table, schema, text)


def _json_reading_type(target: pa.DataType, text: TextOptions) -> pa.DataType:
    """JSON numbers cannot be read as text: a decimal is read exactly into a wide decimal and
    rounded to its scale by ``convert`` like a CSV one."""
    if pa.types.is_decimal(target):
        return reading_decimal(target)
    return pa.string() if text.needs_text(target) else target


def _as_text(col: pa.ChunkedArray) -> pa.ChunkedArray:
    t = col.type
    return col if pa.types.is_nested(t) or pa.types.is_string(t) else pc.cast(col, pa.string())


def _read_geojson(path: Path, step: ReadStepGeoJson, name: str,
                  reference: ReferenceReading | None) -> pa.Table:
    """Features → their properties as columns, plus ``geometry`` as GeoJSON text."""
    try:
        doc = json.loads(path.read_bytes())
    except (ValueError, UnicodeDecodeError) as e:
        raise IngestError(f"{name}: not valid JSON: {e}") from None
    if not isinstance(doc, dict) or doc.get("type") != "FeatureCollection":
        raise IngestError(f"{name}: GeoJSON must be a FeatureCollection")
    features = doc.get("features") or []
    table = pa.Table.from_pylist([f.get("properties") or {} for f in features])
    geometry = pa.array([json.dumps(f.get("geometry"), separators=(",", ":")) for f in features],
                        pa.string())
    table = table.append_column("geometry", geometry)
    schema = _schema(step, reference)
    return table if schema is None else _apply_schema(table, schema,
                                                       TextOptions(floor_times=reference is not None))


# --- Parquet -----------------------------------------------------------------------------------


def _read_parquet(path: Path, step: ReadStepParquet, name: str,
                  reference: ReferenceReading | None) -> pa.Table:
    """The file's columns as stored; a schema selects and converts them (text via ``convert``)."""
    schema = _schema(step, reference)
    try:
        present = pq.read_schema(path).names
        columns = None if schema is None else [c for c in schema.names if c in present]
        table = pq.read_table(path, columns=columns)
    except (pa.ArrowInvalid, OSError) as e:
        raise IngestError(f"{name}: not a readable Parquet file: {e}") from None
    return _parquet_table(table, schema, 0, reference)


def _parquet_table(table: pa.Table, schema: pa.Schema | None, rows_before: int,
                   reference: ReferenceReading | None) -> pa.Table:
    if schema is None:
        return table
    try:
        return _apply_schema(table, schema, TextOptions(floor_times=reference is not None))
    except ConversionError as e:
        raise e.shifted(rows_before) from None
