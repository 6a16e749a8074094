"""Manifests the tests write."""
from __future__ import annotations


def derivative_manifest(dataset_id: str, inputs: list[str], query: str) -> str:
    """A manifest of a Spark SQL derivative (one query step)."""
    return f"""\
apiVersion: 1
kind: DatasetSnapshot
content:
  id: {dataset_id}
  source:
    kind: derivative
    inputs: [{", ".join(inputs)}]
    transform: {{kind: sql, engine: spark, query: "{query}"}}
"""
