"""``coord pull`` of a 0.39 root whose polling source reads ``Json`` (an array of records, at the
top or under ``subPath``) or ``NdGeoJson`` (a GeoJSON feature per line), as the reference's
examples do (reth-vs-snp500's account.transactions, housing_prices' block outlines). The
records stored are checked against pyarrow's JSON reader reading the same records written as
NdJson by Python's ``json`` (the answer computed apart from ``coord``)."""
from __future__ import annotations

import io
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.json as pajson
import pyarrow.parquet as pq

from coordinator.store.dataset import CurrentDataset
from coordinator.workspace import Workspace

from ..support.cli import coord, coord_here

ROOT = """\
kind: DatasetSnapshot
version: 1
content:
  name: {name}
  kind: Root
  metadata:
    - kind: SetPollingSource
      fetch: {{kind: FilesGlob, path: 'in/*'}}
{prepare}      read: {read}
      merge: {{kind: Append}}
"""


def added(home: Path, read: str, *, name: str = "things", prepare: str = "", odf: str | None = None
          ) -> Path:
    """A workspace (the default one, or of ODF ``odf``) with the root ``name`` reading ``read``."""
    coord_here("init", *(("--odf", odf) if odf else ()), cwd=home)
    (home / "in").mkdir()
    (home / f"{name}.yaml").write_text(ROOT.format(name=name, read=read, prepare=prepare))
    return home / f"{name}.yaml"


def stored(home: Path, name: str, columns: list[str]) -> pa.Table:
    ds = CurrentDataset(Workspace.open(home), name)
    return pa.concat_tables(pq.read_table(ds.data_file(r.slice), columns=columns)
                            for r in ds.state().slices)


def as_read_by_pyarrow(records: list[dict], schema: pa.Schema | None = None) -> pa.Table:
    text = "".join(json.dumps(r) + "\n" for r in records).encode()
    parse = pajson.ParseOptions(explicit_schema=schema) if schema is not None else None
    return pajson.read_json(io.BytesIO(text), parse_options=parse)


RECORDS = [{"hash": "0xa1", "value": 10, "from": "0x01"}, {"hash": "0xb2", "value": None, "from": "0x02"},
           {"hash": "0xc3", "value": 2**53 + 1, "from": "0x03"}]


def test_a_json_document_under_a_sub_path_is_pulled_record_for_record(tmp_path):
    manifest = added(tmp_path, "{kind: Json, subPath: response.result}")
    document = {"status": "1", "response": {"result": RECORDS, "more": [1, 2]}}
    (tmp_path / "in" / "txs.json").write_text(json.dumps(document, indent=2))
    coord_here("add", str(manifest), cwd=tmp_path)
    coord_here("pull", "things", cwd=tmp_path)
    assert stored(tmp_path, "things", ["hash", "value", "from"]).sort_by("hash").equals(
        as_read_by_pyarrow(RECORDS))


def test_a_json_document_with_a_schema_is_read_in_its_types(tmp_path):
    # optional, as the records (a null value) and pyarrow's reading of them have them
    schema = ("{fields: [{name: hash, type: {kind: Option, inner: String}}, "
              "{name: value, type: {kind: Option, inner: Float64}}]}")
    manifest = added(tmp_path, f"{{kind: Json, schema: {schema}}}")
    (tmp_path / "in" / "txs.json").write_text(json.dumps(RECORDS))
    coord_here("add", str(manifest), cwd=tmp_path)
    coord_here("pull", "things", cwd=tmp_path)
    expected = as_read_by_pyarrow(RECORDS, pa.schema([("hash", pa.string()), ("value", pa.float64())]))
    assert stored(tmp_path, "things", ["hash", "value"]).sort_by("hash").equals(
        expected.select(["hash", "value"]))


def test_a_json_document_without_the_sub_path_is_refused_in_one_line(tmp_path):
    manifest = added(tmp_path, "{kind: Json, subPath: result}")
    (tmp_path / "in" / "txs.json").write_text(json.dumps({"status": "0", "message": "NOTOK"}))
    coord_here("add", str(manifest), cwd=tmp_path)
    refused = coord("pull", "things", cwd=tmp_path, check=False)
    assert refused.returncode == 1
    assert refused.stderr.strip().splitlines()[-1] == (
        "coord: error: things: txs.json: no 'result' in the document")


FEATURES = [
    {"type": "Feature", "properties": {"id": 1, "name": "Kitsilano", "geometry": "shadowed"},
     "geometry": {"type": "Point", "coordinates": [-123.16, 49.27]}},
    {"type": "Feature", "properties": {"id": 2, "name": None},
     "geometry": {"type": "MultiPolygon", "coordinates": [[[[0, 0], [1, 0], [1, 1], [0, 0]]]]}},
]


def test_newline_delimited_geojson_gives_properties_and_the_geometry_as_text(tmp_path):
    manifest = added(tmp_path, "{kind: NdGeoJson}")
    (tmp_path / "in" / "areas.ndgeojson").write_text("".join(json.dumps(f) + "\n\n" for f in FEATURES))
    coord_here("add", str(manifest), cwd=tmp_path)
    coord_here("pull", "things", cwd=tmp_path)
    table = stored(tmp_path, "things", ["id", "name", "geometry"]).sort_by("id")
    records = [{**f["properties"], "geometry": json.dumps(f["geometry"], separators=(",", ":"))}
               for f in FEATURES]
    assert table.equals(as_read_by_pyarrow(records).select(["id", "name", "geometry"]))
    assert [json.loads(g) for g in table["geometry"].to_pylist()] == [f["geometry"] for f in FEATURES]


def test_geojson_prepared_into_features_by_a_pipe_step_is_pulled(tmp_path):
    """As the reference's block-outlines example: a FeatureCollection cut into lines by jq."""
    prepare = "      prepare: [{kind: Pipe, command: [jq, '-c', '.features[]']}]\n"
    manifest = added(tmp_path, "{kind: NdGeoJson, schema: {fields: [{name: id, type: Int64}, "
                               "{name: geometry, type: String}]}}", prepare=prepare)
    collection = {"type": "FeatureCollection", "features": FEATURES}
    (tmp_path / "in" / "areas.geojson").write_text(json.dumps(collection))
    coord_here("add", str(manifest), cwd=tmp_path)
    coord_here("pull", "things", cwd=tmp_path)
    table = stored(tmp_path, "things", ["id", "geometry"]).sort_by("id")
    assert table["id"].to_pylist() == [1, 2]
    assert [json.loads(g) for g in table["geometry"].to_pylist()] == [f["geometry"] for f in FEATURES]


def test_a_line_that_is_not_a_feature_is_refused_naming_it(tmp_path):
    manifest = added(tmp_path, "{kind: NdGeoJson}")
    lines = [json.dumps(FEATURES[0]), json.dumps({"type": "FeatureCollection", "features": []})]
    (tmp_path / "in" / "areas.ndgeojson").write_text("\n".join(lines) + "\n")
    coord_here("add", str(manifest), cwd=tmp_path)
    refused = coord("pull", "things", cwd=tmp_path, check=False)
    assert refused.returncode == 1
    assert refused.stderr.strip().splitlines()[-1] == (
        "coord: error: things: areas.ndgeojson: feature 2: expected a GeoJSON Feature with an "
        "object of properties (got type 'FeatureCollection')")


def test_an_odf_0_18_workspace_refuses_a_json_read_saying_what_reads_it(tmp_path):
    manifest = added(tmp_path, "{kind: Json}", odf="0.18")
    refused = coord("add", str(manifest), cwd=tmp_path, check=False)
    assert refused.returncode == 1
    assert refused.stderr == (
        f"coord: error: {manifest}: content.metadata[0].read: read kind Json is not supported by "
        "ODF 0.18 workspaces yet (a 0.39 dataset reads it: make the workspace with coord init "
        "--odf 0.39)\n")
