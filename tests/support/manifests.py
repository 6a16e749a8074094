"""Manifests the tests write."""
from __future__ import annotations

import json


def _snapshot(dataset_id: str) -> str:
    """The start of a DatasetSnapshot manifest, up to its ``source:`` line."""
    return f"apiVersion: 1\nkind: DatasetSnapshot\ncontent:\n  id: {dataset_id}\n  source:\n"


def derivative_manifest(dataset_id: str, inputs: list[str], query: str) -> str:
    """A manifest of a Spark SQL derivative (one query step)."""
    return _snapshot(dataset_id) + f"""\
    kind: derivative
    inputs: [{", ".join(inputs)}]
    transform: {{kind: sql, engine: spark, query: "{query}"}}
"""


def with_event_time(manifest: str, column: str) -> str:
    """``manifest`` whose dataset's event time column is ``column``."""
    return manifest + f"  vocab: {{eventTimeColumn: {column}}}\n"


def csv_root_manifest(dataset_id: str, folder: str, schema: list[str] | None = None,
                      event_time: str = "ts", merge: str = "{kind: append}") -> str:
    """A manifest of a root over ``folder/*.csv`` (with a header line), its event time column
    ``event_time``; ``schema``: its read schema's entries (None: the files' columns)."""
    declared = f", schema: {json.dumps(schema)}" if schema else ""
    return with_event_time(_snapshot(dataset_id) + f"""\
    kind: root
    fetch: {{kind: filesGlob, path: "{folder}/*.csv"}}
    read: {{kind: csv, header: true{declared}}}
    merge: {merge}
""", event_time)
