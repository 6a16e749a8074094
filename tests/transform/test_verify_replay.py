"""Reproducibility: verify replays every transform in the engine and compares the hashes."""
from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Callable

import pytest

from coordinator.metadata.objects import FieldLineage, FieldOrigin, MetadataBlock, TransformSql
from coordinator.workspace import Workspace

from ..support.cli import coord
from .pipeline import HOURLY, ORDERS, order_rows, write_manifests, write_orders_file

pytestmark = pytest.mark.spark


@pytest.fixture
def home(tmp_path):
    coord("init", "--odf", "0.18", cwd=tmp_path)
    rows = order_rows(6)
    coord("add", str(write_manifests(tmp_path)), cwd=tmp_path)
    write_orders_file(tmp_path, "2024-01-01-a.csv", rows[:10])
    coord("pull", "-r", HOURLY, cwd=tmp_path)
    write_orders_file(tmp_path, "2024-01-01-b.csv", rows[10:])
    coord("pull", "-r", HOURLY, cwd=tmp_path)
    return tmp_path


def forge_with_query(ws: Workspace, dataset_id: str, forged_id: str, query: str) -> None:
    """A copy of the dataset whose recorded query was swapped, re-signed and re-linked: the
    chain is valid, the data is the original's, only a replay can tell."""
    def swap(block: MetadataBlock) -> MetadataBlock:
        if block.source is None:
            return block
        return dataclasses.replace(block, source=dataclasses.replace(
            block.source, transform=TransformSql(engine="spark", query=query)))
    forge(ws, dataset_id, forged_id, swap)


def forge(ws: Workspace, dataset_id: str, forged_id: str,
          change: Callable[[MetadataBlock], MetadataBlock]) -> None:
    """A copy of the dataset with ``change`` applied to every block, re-signed and re-linked."""
    original = list(reversed(list(ws.dataset(dataset_id).blocks())))
    forged = ws.dataset(forged_id)
    scratch = ws.run_dir / "forge"
    with forged.writer() as w:
        for h, block in original:
            block = change(block)
            data = ckpt = None
            if block.output_slice is not None:
                data = scratch / f"{h.hex()}.parquet"
                data.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(ws.dataset(dataset_id).data_file(h), data)
            if ws.dataset(dataset_id).checkpoint_dir(h).exists():
                ckpt = scratch / f"{h.hex()}-checkpoint"
                shutil.copytree(ws.dataset(dataset_id).checkpoint_dir(h), ckpt)
            w.commit(dataclasses.replace(block, prev_block_hash=None), data_file=data, checkpoint_dir=ckpt)


def test_verify_reproduces_every_step(home):
    out = coord("verify", HOURLY, cwd=home).stdout
    assert "reproducibility: reproduced" in out


def test_verify_catches_a_field_lineage_tampered_with_in_the_metadata(home):
    # Someone claims `total` is computed from the customer column, not from the amounts.
    def claim(block: MetadataBlock) -> MetadataBlock:
        if block.field_lineage is None:
            return block
        fields = [FieldOrigin(field=o.field, sources=[dataclasses.replace(s, field="customer")
                                                      for s in o.sources])
                  if o.field == "total" else o for o in block.field_lineage.fields]
        return dataclasses.replace(block, field_lineage=FieldLineage(
            fields=fields, conditions=block.field_lineage.conditions))
    forge(Workspace.open(home), HOURLY, "com.example.forged", claim)
    proc = coord("verify", "com.example.forged", cwd=home, check=False)
    assert proc.returncode == 1
    assert "the recorded field lineage of column 'total' differs from the engine's" in proc.stdout


def test_verify_catches_a_query_tampered_with_in_the_metadata(home):
    ws = Workspace.open(home)
    tampered = ("SELECT window.end AS event_time, customer, count(*) AS orders, sum(amount) * 2 AS total "
                f"FROM `{ORDERS}` GROUP BY window(event_time, '1 hour'), customer")
    forge_with_query(ws, HOURLY, "com.example.forged", tampered)
    assert coord("verify", "--integrity", "com.example.forged", cwd=home).returncode == 0
    proc = coord("verify", "com.example.forged", cwd=home, check=False)
    assert proc.returncode == 1
    assert "did not reproduce" in proc.stdout
    assert "first bad block" in proc.stderr


def test_verify_of_a_pulled_dataset_whose_query_breaks_the_policy_reports_it(home, tmp_path):
    # Someone publishes a dataset whose recorded query reads a file of whoever replays it.
    ws = Workspace.open(home)
    secret = home / "secret.txt"
    secret.write_text("the replayer's secret")
    leaking = f"SELECT o.*, s.value AS leaked FROM `{ORDERS}` o CROSS JOIN text.`{secret}` s"
    forge_with_query(ws, HOURLY, "com.example.leaky", leaking)
    coord("repo", "add", "shared", (tmp_path / "repo").as_uri(), cwd=home)
    coord("push", "com.example.leaky", "--to", "shared", cwd=home)
    coord("pull", "shared/com.example.leaky", "--as", "com.example.pulled", cwd=home)

    proc = coord("verify", "com.example.pulled", cwd=home, check=False)
    assert proc.returncode == 1
    problems = [line.strip() for line in proc.stdout.splitlines() if "problem:" in line]
    assert len(problems) == 1
    assert problems[0].endswith(
        "not replayed, the engine refuses its query: step 0 (the output): path relation "
        f"text.`{secret}` is not allowed: read the declared inputs; see the README's \"Allowed SQL\""
    )
    assert "Traceback" not in proc.stderr
