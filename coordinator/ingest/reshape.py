"""A ``Json`` or ``NdGeoJson`` file rewritten as the NdJson the read step then reads (0.18's
readers, which the pipeline runs, have neither; ``odf39.adapt.as_ndjson`` gives the step), as
the reference does (kamu-cli v0.265, ``ReaderJson``, ``ReaderNdGeoJson``):

- ``Json``: the array of records of the document (at ``subPath``, keys joined by dots), a line
  per element in their order; the document is decoded with its ``encoding`` and written in
  UTF-8.
- ``NdGeoJson``: a line per feature, its ``properties`` as the record's fields (none when
  null) and its ``geometry`` as one more field, ``geometry``, holding the geometry's GeoJSON
  text (a property of that name gives way to it); a line that is not a ``Feature`` is refused.

DuckDB parses and writes, so there is no Python object per record: a JSON document is checked
and its array found by one parse, and its array reader gives each element's text to a line;
an NdGeoJson line's parts are read as JSON values and merged back into one. The read step
then names a bad record by its place in the array (or the feature's line among the
features) as a row.
"""
from __future__ import annotations

import os
from pathlib import Path
from tempfile import mkstemp

from ..metadata.odf39 import source as s
from .errors import IngestError


def rewritten(path: Path, given: s.ReadStep | None, scratch: Path, name: str) -> Path:
    """``path`` as the NdJson its read step ``given`` (as written) is read as, else ``path``;
    ``name``: how messages call the file."""
    if not isinstance(given, s.ReadStepJson | s.ReadStepNdGeoJson):
        return path
    fd, out = mkstemp(suffix=".ndjson", dir=scratch)
    os.close(fd)
    if isinstance(given, s.ReadStepNdGeoJson):
        _ndgeojson_as_ndjson(path, name, Path(out))
        return Path(out)
    if given.encoding and given.encoding.replace("-", "").lower() != "utf8":
        decoded = Path(out).with_suffix(".utf8.json")  # DuckDB reads UTF-8 only
        try:
            decoded.write_text(path.read_text(encoding=given.encoding), encoding="utf-8")
        except (UnicodeDecodeError, LookupError) as e:
            raise IngestError(f"{name}: not {given.encoding} text: {e}") from None
        path = decoded
    _json_as_ndjson(path, name, given.sub_path or None, Path(out))
    return Path(out)


def _json_as_ndjson(source: Path, name: str, sub_path: str | None, out: Path) -> None:
    """The array of records of the JSON document ``source`` (at ``sub_path``) written to
    ``out`` as NdJson, each element as DuckDB writes the JSON it read (numbers as they were
    written). DuckDB parses the whole document once, which checks it (its array reader alone
    stops quietly at a truncated end) and says where the array is; an array under ``sub_path``
    is written out as a document of its own (a second parse); then the array reader hands out
    the elements' texts, joined by Arrow."""
    import duckdb

    parts = sub_path.split(".") if sub_path else []
    # JSON Pointers (RFC 6901) to each object on the way and to the array
    pointers = ["/" + "/".join(p.replace("~", "~0").replace("/", "~1") for p in parts[:i + 1])
                for i in range(len(parts))]
    with duckdb.connect() as con:
        con.execute("SET enable_progress_bar = false")  # on stdout under python -c
        try:  # the types of the document, each object on the way and the array: one parse
            [(found,)] = con.execute("SELECT json_type(content, $2) FROM read_text($1)",
                                     [str(source), ["$", *pointers]]).fetchall()
        except duckdb.Error as err:
            raise IngestError(f"{name}: not JSON: {_json_problem(err)}") from None
        if any(t != "OBJECT" for t in found[:-1]) or found[-1] is None:
            raise IngestError(f"{name}: no {sub_path!r} in the document")
        if found[-1] != "ARRAY":
            raise IngestError(f"{name}: expected an array of records"
                              + (f" at {sub_path!r}" if sub_path else ""))
        path = source
        if parts:
            path = out.with_suffix(".json")
            # one value as it is: minified JSON holds neither a raw newline nor a control
            # character such as the delimiter, so nothing needs quoting
            con.execute(f"COPY (SELECT json_extract(content, $2)::VARCHAR FROM read_text($1)) TO "
                        f"'{_sql_text(path)}' {_AS_LINES}", [str(source), pointers[-1]])
        size = max(path.stat().st_size, 1 << 24)  # an element may be as large as the file
        reader = con.sql(
            "SELECT coalesce(j::VARCHAR, 'null') FROM read_json($1, format = 'array', records = "
            "false, columns = {'j': 'JSON'}, maximum_object_size = $2)",
            params=[str(path), min(size, (1 << 32) - 1)]).to_arrow_reader(1 << 16)
        _write_lines(reader, out)


# a value per line as it is (see _json_as_ndjson: minified JSON needs no quoting)
_AS_LINES = "(FORMAT csv, HEADER false, QUOTE '', ESCAPE '', DELIMITER '\x1f')"
_FEATURES = ("read_json($1, format = 'newline_delimited', columns = {'type': 'VARCHAR', "
             "'properties': 'JSON', 'geometry': 'JSON'}, maximum_object_size = $2)")


def _ndgeojson_as_ndjson(source: Path, name: str, out: Path) -> None:
    """Each feature of the NdGeoJson file ``source`` as a record (module doc) on a line of
    ``out``; a line that is not a feature is refused, naming it among the features."""
    import duckdb

    size = min(max(source.stat().st_size, 1 << 24), (1 << 32) - 1)
    not_feature = ("type IS DISTINCT FROM 'Feature' OR coalesce(json_type(properties), 'NULL') "
                   "NOT IN ('OBJECT', 'NULL')")
    with duckdb.connect() as con:
        con.execute("SET enable_progress_bar = false")
        try:
            con.execute(
                f"COPY (SELECT CASE WHEN {not_feature} THEN error('not a feature') ELSE "
                "json_merge_patch(coalesce(properties, '{}'), json_object('geometry', "
                f"geometry::VARCHAR))::VARCHAR END FROM {_FEATURES}) TO '{_sql_text(out)}' "
                f"{_AS_LINES}", [str(source), size])
        except duckdb.Error as err:
            if "not a feature" not in str(err):
                raise IngestError(f"{name}: not newline-delimited GeoJSON: {_json_problem(err)}") from None
            # the error path only: which one (a second parse)
            [(n, kind)] = con.execute(
                f"SELECT n, type FROM (SELECT row_number() OVER () AS n, * FROM {_FEATURES}) "
                f"WHERE {not_feature} LIMIT 1", [str(source), size]).fetchall()
            raise IngestError(f"{name}: feature {n}: expected a GeoJSON Feature with an object of "
                              f"properties (got type {kind!r})") from None


def _write_lines(reader, out: Path) -> None:
    """The texts of ``reader``'s one column written to ``out``, a line each, joined by Arrow."""
    import pyarrow as pa
    import pyarrow.compute as pc

    with open(out, "wb") as sink:
        before = b""  # a line ends where the next one starts: no newline after the last
        for batch in reader:
            if batch.num_rows:
                lines = pa.ListArray.from_arrays(pa.array([0, batch.num_rows], pa.int32()),
                                                 batch.column(0).cast(pa.string()))
                sink.write(before)
                sink.write(pc.binary_join(lines, pa.scalar("\n"))[0].as_buffer())
                before = b"\n"


def _sql_text(path: Path) -> str:
    return str(path).replace("'", "''")


def _json_problem(err: Exception) -> str:
    """DuckDB's words for a document that is not JSON, without the text it quotes."""
    first = str(err).splitlines()[0].split(": ", 1)[-1]
    return first.split("  Input:", 1)[0].split(" You may want", 1)[0].strip()
