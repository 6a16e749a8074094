"""Feeds for the File Feed tests: a local folder or a prefix of a real moto S3 server.

``Feed`` writes and deletes objects with plain file operations or plain boto3, never with
the coordinator's own feed code, so the consumer is tested against an independent producer.
"""
from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

import boto3
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from coordinator.workspace import Workspace

from ..ingest.conftest import add_dataset
from ..repository.conftest import BUCKET, moto_endpoint, s3_env, s3_url  # noqa: F401 (fixtures)


@dataclass
class Feed:
    url: str
    folder: Path | None = None  # local feeds
    client: object = None  # S3 feeds
    prefix: str = ""

    def put(self, rel: str, data: bytes | str) -> None:
        data = data.encode() if isinstance(data, str) else data
        if self.folder is not None:
            path = self.folder / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        else:
            self.client.put_object(Bucket=BUCKET, Key=f"{self.prefix}/{rel}", Body=data)

    def delete(self, rel: str) -> None:
        if self.folder is not None:
            (self.folder / rel).unlink()
        else:
            self.client.delete_object(Bucket=BUCKET, Key=f"{self.prefix}/{rel}")

    def get(self, rel: str) -> bytes | None:
        if self.folder is not None:
            path = self.folder / rel
            return path.read_bytes() if path.exists() else None
        try:
            return self.client.get_object(Bucket=BUCKET, Key=f"{self.prefix}/{rel}")["Body"].read()
        except self.client.exceptions.NoSuchKey:
            return None

    def names(self) -> list[str]:
        if self.folder is not None:
            return sorted(str(p.relative_to(self.folder)) for p in self.folder.rglob("*")
                          if p.is_file())
        listed = self.client.list_objects_v2(Bucket=BUCKET, Prefix=f"{self.prefix}/")
        return sorted(o["Key"][len(self.prefix) + 1:] for o in listed.get("Contents", ()))

    def update(self, name: str, parts: dict[str, str | bytes], *, success: str | None = "count"):
        """An update as a producer following the convention writes it: parts, then _SUCCESS."""
        for part, data in parts.items():
            self.put(f"{name}/{part}", data)
        if success == "count":
            self.put(f"{name}/_SUCCESS", str(len(parts)))
        elif success is not None:
            self.put(f"{name}/_SUCCESS", success)


def local_feed(tmp_path: Path) -> Feed:
    folder = tmp_path / "feed" / "v1.0"
    folder.mkdir(parents=True)
    return Feed(url=folder.as_uri(), folder=folder)


def s3_feed(url: str) -> Feed:
    endpoint = url.split("/")[2]
    client = boto3.client("s3", endpoint_url=f"http://{endpoint}")
    return Feed(url=f"s3+http://{endpoint}/{BUCKET}/feeds/v1.0/", client=client,
                prefix="feeds/v1.0")


@pytest.fixture(params=["folder", "s3"])
def feed(request, tmp_path) -> Feed:
    if request.param == "folder":
        return local_feed(tmp_path)
    return s3_feed(request.getfixturevalue("s3_url"))


@pytest.fixture
def folder_feed(tmp_path) -> Feed:
    return local_feed(tmp_path)


def csv_part(*rows: tuple[str, int]) -> str:
    return "name,value\n" + "".join(f"{n},{v}\n" for n, v in rows)


def parquet_bytes(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.getvalue()


CSV_READ = {"kind": "csv", "header": True, "schema": ["name STRING", "value BIGINT"]}


def feed_source(feed: Feed, *, read: dict | None = None, merge: dict | None = None,
                prepare: list | None = None, **fetch) -> dict:
    """A root source (a 0.18 manifest's) whose fetch step is ``fileFeed`` on ``feed``
    (``fetch``: more options)."""
    source = {"kind": "root", "fetch": {"kind": "fileFeed", "url": feed.url, **fetch}}
    if prepare is not None:
        source["prepare"] = prepare
    source["read"] = read or CSV_READ
    source["merge"] = merge or {"kind": "append"}
    return source


def add_feed_dataset(ws: Workspace, feed: Feed, *, dataset_id: str = "feed.ds", **options) -> str:
    """A root dataset of ``feed_source(feed, **options)``, added to ``ws`` (ODF 0.18)."""
    return add_dataset(ws, yaml.safe_dump({"source": feed_source(feed, **options)}, sort_keys=False),
                       dataset_id)
