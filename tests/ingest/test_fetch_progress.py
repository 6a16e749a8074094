"""What a root has taken stays taken when its fetch step changes in a way that does not change
what it takes: an append source never holds the same file twice."""
from __future__ import annotations

import hashlib
import json

import yaml

from coordinator.metadata.objects import FetchStepFilesGlob
from coordinator.metadata.yaml_codec import to_dict
from coordinator.workspace import Workspace, layout

from ..support.cli import coord
from ..transform.pipeline import ORDERS, manifest, order_rows, root_source, write_orders_file


def add_orders(home, **fetch) -> None:
    source = root_source()
    source["merge"] = {"kind": "append"}
    source["fetch"].pop("order")
    source["fetch"].update(fetch)
    (home / "orders.yaml").write_text(yaml.safe_dump(manifest(ORDERS, source)))
    coord("add", "--replace", "orders.yaml", cwd=home)


def records(home) -> int:
    return Workspace.open(home).dataset(ORDERS).state().num_records


def pulled_once(tmp_path):
    coord("init", "--odf", "0.18", cwd=tmp_path)
    add_orders(tmp_path)
    write_orders_file(tmp_path, "1.csv", order_rows(2))
    coord("pull", ORDERS, cwd=tmp_path)
    assert records(tmp_path) == 8
    return tmp_path


def test_a_default_written_out_and_a_cache_setting_keep_what_was_taken(tmp_path):
    home = pulled_once(tmp_path)
    add_orders(home, order="byName", cache={"kind": "forever"})
    assert coord("pull", ORDERS, cwd=home).stdout == f"{ORDERS}: up to date\n"
    assert records(home) == 8


def test_another_path_takes_its_files_from_the_start(tmp_path):
    home = pulled_once(tmp_path)
    add_orders(home, path="orders/[0-9].csv")
    coord("pull", ORDERS, cwd=home)
    assert records(home) == 16  # the same file, matched by a new pattern, is new to it


def test_a_state_written_by_an_earlier_version_still_applies(tmp_path):
    """Earlier versions fingerprinted the whole fetch step (its canonical JSON)."""
    home = pulled_once(tmp_path)
    ds = Workspace.open(home).dataset(ORDERS)
    state_file = home / ".coord" / layout.state_file(ORDERS, ds.head())
    state = json.loads(state_file.read_text())
    step = FetchStepFilesGlob(path="orders/*.csv")
    state["fetch"] = hashlib.sha256(json.dumps(to_dict(step), sort_keys=True).encode()).hexdigest()[:16]
    state_file.write_text(json.dumps(state, sort_keys=True))
    assert coord("pull", ORDERS, cwd=home).stdout == f"{ORDERS}: up to date\n"
    assert records(home) == 8
