"""The read model, the append path and the typed config: each read once, written one way.

Chain walks and config parses are counted by wrapping the real functions
(``metadata.chain.walk``, ``Config.load``) while real commands run.
"""
from __future__ import annotations

import textwrap
from collections import Counter

import pytest
import yaml

from coordinator.build.pull import pull_datasets
from coordinator.build.status import status
from coordinator.cli.main import main as coord_main
from coordinator.metadata import chain
from coordinator.metadata import objects as o
from coordinator.metadata.timestamps import now_utc
from coordinator.store import read as current_read
from coordinator.store.overview import CurrentDatasets
from coordinator.workspace import CommitError, Config, ConfigError, SealedBlock, Workspace
from coordinator.workspace.catalog import add_datasets
from coordinator.workspace.config import DEFAULT_SPARK_MASTER, OdfVersion
from tests.ingest.conftest import DATASET, write
from tests.ingest.test_pull import GLOB_SOURCE, glob_dataset
from tests.repository.conftest import append_slices, make_root
from tests.support.cli import coord, coord_here

ROOT_DS, DERIVED = "org.example.root", "org.example.derived"


@pytest.fixture
def counted(monkeypatch):
    """Counts chain walks per dataset folder name and config.yaml parses."""
    walks: Counter[str] = Counter()
    parses: list[str] = []
    walk, load = chain.walk, Config.load

    def counting_walk(source, head, **kw):
        walks[getattr(source, "id", "remote")] += 1
        return walk(source, head, **kw)

    def counting_load(path):
        parses.append(str(path))
        return load(path)

    monkeypatch.setattr(chain, "walk", counting_walk)
    monkeypatch.setattr(Config, "load", staticmethod(counting_load))
    return walks, parses


# --- one walk per command ------------------------------------------------------------------------


def test_a_root_pull_with_new_data_walks_its_chain_once_and_parses_the_config_once(ws, counted):
    glob_dataset(ws)
    write(ws.root / "in" / "2020-01-01.csv", "id,name\n1,a\n2,b\n")
    walks, parses = counted
    walks.clear(), parses.clear()

    fresh = Workspace.open(ws.root)  # as a new `coord pull` process starts
    [outcome] = pull_datasets(fresh, [DATASET])

    assert outcome.message == "2 new records"
    assert walks == {DATASET: 1} and len(parses) == 1
    assert Workspace.open(ws.root).dataset(DATASET).state().num_records == 2  # it did commit


@pytest.mark.spark
def test_a_derivative_pull_with_new_input_walks_its_chain_once_and_parses_the_config_once(
        tmp_path, counted):
    from tests.transform.pipeline import LARGE, ORDERS, order_rows, write_manifests, write_orders_file

    coord("init", "--odf", "0.18", cwd=tmp_path)
    rows = order_rows(2)
    write_orders_file(tmp_path, "2024-01-01.csv", rows)
    coord("add", str(write_manifests(tmp_path)), cwd=tmp_path)
    coord("pull", ORDERS, cwd=tmp_path)
    walks, parses = counted
    walks.clear(), parses.clear()

    [outcome] = pull_datasets(Workspace.open(tmp_path), [LARGE])

    expected = sum(1 for *_, amount in rows if amount > 10)  # the query keeps amount > 10
    assert outcome.message == f"{expected:,} new records"
    assert walks[LARGE] == 1 and len(parses) == 1


@pytest.fixture
def current_walks(monkeypatch):
    """Counts walks of current-ODF (0.39) chains per dataset folder name."""
    walks: Counter[str] = Counter()
    walk = current_read.walk

    def counting_walk(root, head=None):
        walks[root.name] += 1
        return walk(root, head)

    monkeypatch.setattr(current_read, "walk", counting_walk)
    return walks


@pytest.mark.parametrize("new_file", [True, False], ids=["new data", "nothing new"])
def test_a_current_odf_root_pull_walks_its_chain_once(tmp_path, current_walks, new_file):
    ws = Workspace.init(tmp_path / "ws", OdfVersion.V039)
    manifest = write(ws.root / "ds.yaml", f"apiVersion: 1\nkind: DatasetSnapshot\ncontent:\n  id: {DATASET}\n"
                     + textwrap.indent(GLOB_SOURCE % "{kind: append}", "  "))
    coord_here("add", str(manifest), cwd=ws.root)
    write(ws.root / "in" / "2020-01-01.csv", "id,name\n1,a\n2,b\n")
    pull_datasets(ws, [DATASET])
    if new_file:
        write(ws.root / "in" / "2020-01-02.csv", "id,name\n3,c\n")
    current_walks.clear()

    [outcome] = pull_datasets(Workspace.open(ws.root), [DATASET])  # as a new `coord pull` does

    assert outcome.message == ("1 new record" if new_file else "up to date")
    assert current_walks == {DATASET: 1}
    assert CurrentDatasets(ws).overview(DATASET).num_records == (3 if new_file else 2)


def test_status_walks_each_chain_once_even_where_it_is_anothers_input(ws, counted):
    make_root(ws, ROOT_DS, slices=2)
    transform = o.TransformSql(engine="spark", query="SELECT * FROM input")
    add_datasets(ws, [o.DatasetSnapshot(id=DERIVED, source=o.DatasetSourceDerivative(
        inputs=[ROOT_DS], transform=transform))])
    walks, parses = counted
    walks.clear(), parses.clear()

    derived = {s.dataset_id: s for s in status(Workspace.open(ws.root))}[DERIVED]

    assert derived.new_input == {ROOT_DS: 3}  # its source block and two slices
    assert walks == {ROOT_DS: 1, DERIVED: 1} and len(parses) == 1


def test_list_walks_each_chain_once(ws, counted, capsys):
    make_root(ws, ROOT_DS, slices=1)
    transform = o.TransformSql(engine="spark", query="SELECT * FROM input")
    add_datasets(ws, [o.DatasetSnapshot(id=DERIVED, source=o.DatasetSourceDerivative(
        inputs=[ROOT_DS], transform=transform))])
    walks, _ = counted
    walks.clear()

    coord_main(["-w", str(ws.root), "list"])

    assert ROOT_DS in capsys.readouterr().out
    assert walks == {ROOT_DS: 1, DERIVED: 1}


def test_a_writer_does_not_take_a_state_the_head_has_moved_past(ws):
    ds = make_root(ws, ROOT_DS, slices=1)
    before = ds.state()
    [newer] = append_slices(ds, 1)
    with ds.writer(before) as w:
        assert w.state.head == newer and w.state.num_records == before.num_records + 5


# --- one append path -----------------------------------------------------------------------------


def test_installing_a_sealed_block_whose_bytes_do_not_hash_to_its_name_installs_nothing(ws, tmp_path):
    ds = make_root(ws, ROOT_DS, slices=1)
    other = make_root(Workspace.init(tmp_path / "other"), ROOT_DS, slices=2)
    head = ds.head()
    newest = next(other.chain())
    damaged = bytearray(other.read_block(newest.hash))
    damaged[8] ^= 1
    with ds.writer() as w, pytest.raises(CommitError, match="nothing was installed"):
        w.install_sealed([SealedBlock(newest, bytes(damaged), other.read_signature(newest.hash))])
    assert ds.head() == head and not ds.block_path(newest.hash).exists()


def test_installing_a_block_that_does_not_follow_the_head_installs_nothing(ws, tmp_path):
    ds = make_root(ws, ROOT_DS, slices=1)
    other = make_root(Workspace.init(tmp_path / "other"), ROOT_DS, slices=2)
    newest = next(other.chain())
    with ds.writer() as w, pytest.raises(CommitError, match="does not follow the head"):
        w.install_sealed([SealedBlock(newest, other.read_block(newest.hash), None)])
    assert not ds.block_path(newest.hash).exists()


def test_a_commit_after_the_writer_reset_sees_the_shorter_chain(ws):
    ds = make_root(ws, ROOT_DS, slices=2)
    first = [h for h, _ in ds.blocks()][-1]
    with ds.writer() as w:
        w.reset(first)
        assert w.state.num_blocks == 1 and w.state.num_records == 0
        h = w.commit(o.MetadataBlock(system_time=now_utc(), output_watermark=now_utc()))
    assert [x for x, _ in ds.blocks()] == [h, first]


# --- one typed config ----------------------------------------------------------------------------

FIRST_CONFIG = """\
engine:
  runtime: auto
  sparkMaster: local[2]
  allowNetwork: false
  sparkConf: {}
repositories: {}
trustedKeys: []
"""


def test_a_config_written_before_the_trust_section_existed_loads_with_its_defaults(ws):
    ws.config_path.write_text(FIRST_CONFIG)
    config = Workspace.open(ws.root).config()
    assert config.trust.require == "known" and config.engine.spark_master == "local[2]"
    assert yaml.safe_load(FIRST_CONFIG).items() <= config.to_dict().items()


def test_a_new_workspace_writes_the_config_format_it_always_had(ws):
    assert yaml.safe_load(ws.config_path.read_text()) == {
        "engine": {"runtime": "auto", "sparkMaster": "local[2]", "allowNetwork": False, "sparkConf": {}},
        "repositories": {}, "trustedKeys": [], "trust": {"require": "known"},
    }


@pytest.mark.parametrize(("text", "where"), [
    ("engine: {runtime: vm}", "engine.runtime: must be one of auto, container, sandbox"),
    ("engine: {allowNetwork: maybe}", "engine.allowNetwork: expected true or false"),
    ("engine: {keepWarm: -5s}", "engine.keepWarm: expected a duration such as 30s"),
    ("engine: {runtme: sandbox}", "engine.runtme: unknown setting"),
    ("trust: {require: nobody}", "trust.require: 'nobody' is not one of trusted, known, any"),
    ("trustedKeys: [zz]", "trustedKeys: 'zz' is not a hex public key"),
    ("repositories: [a]", "repositories: expected a mapping"),
    ("engine: [", "not valid YAML (line 2)"),
])
def test_a_bad_config_value_is_one_line_naming_the_file_and_the_key(ws, text, where):
    make_root(ws, ROOT_DS, slices=1)  # listing it checks its signatures against trustedKeys
    ws.config_path.write_text(text + "\n")
    proc = coord("list", cwd=ws.root, check=False)
    assert proc.returncode == 1
    assert proc.stderr.startswith(f"coord: error: {ws.config_path}: {where}")
    assert len(proc.stderr.strip().splitlines()) == 1


def test_settings_are_read_and_changed_by_dotted_path(ws):
    config = ws.config().set("engine.sparkConf", {"spark.sql.shuffle.partitions": 4})
    assert config.get("engine.sparkConf") == {"spark.sql.shuffle.partitions": "4"}
    assert config.engine.spark_conf["spark.sql.shuffle.partitions"] == "4"
    with pytest.raises(ConfigError, match="no setting engine.nothing"):
        config.get("engine.nothing")
    with pytest.raises(ConfigError, match="engine.sparkMaster: 'spark://h:7077' needs network"):
        config.set("engine.sparkMaster", "spark://h:7077")


def test_keep_warm_is_two_minutes_unless_set_and_zero_turns_it_off(ws):
    assert ws.config().engine.keep_warm_s == 120
    assert "keepWarm" not in ws.config().to_dict()["engine"]  # files keep the form they had
    off = ws.config().set("engine.keepWarm", "0")
    assert off.engine.keep_warm_s == 0 and off.to_dict()["engine"]["keepWarm"] == "0s"
    assert ws.config().set("engine.keepWarm", "5m").engine.keep_warm_s == 300
    assert ws.config().get("engine.keepWarm") == "120s"  # a setting at its default is there to get


def test_both_engine_runtimes_default_to_one_spark_master():
    from coordinator.engine.settings import EngineSettings

    assert EngineSettings().spark_master == Config().engine.spark_master == DEFAULT_SPARK_MASTER


def test_a_config_changed_on_disk_is_read_again_by_the_same_workspace(ws):
    assert ws.config().trust.require == "known"
    other = Workspace.open(ws.root)
    other.save_config(other.config().set("trust.require", "any"))
    assert ws.config().trust.require == "any"
