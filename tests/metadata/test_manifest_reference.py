"""docs/manifests.md stays true to the schemas: every field and every enumerated value a
DatasetSnapshot manifest can hold is named in it, and its complete manifests load, as the
repository's own examples they say they are."""
import json
import re
from pathlib import Path

import pytest
import yaml

from coordinator.metadata import objects
from coordinator.metadata.manifest import load_manifest, load_manifests

REPO = Path(__file__).resolve().parents[2]
SCHEMAS = REPO / "coordinator" / "metadata" / "schemas"
REFERENCE = REPO / "docs" / "manifests.md"
SHIPPED = [REPO / "examples" / "datasets", REPO / "tests" / "fixtures" / "manifests"]


def snapshot_schema_nodes() -> list[dict]:
    """Every schema node reachable from DatasetSnapshot.json, following $ref across files."""
    nodes, seen = [], set()
    todo = [("DatasetSnapshot.json", "")]
    while todo:
        file, pointer = todo.pop()
        if (file, pointer) in seen:
            continue
        seen.add((file, pointer))
        node = json.loads((SCHEMAS / file).read_text())
        for part in filter(None, pointer.split("/")):
            node = node[part]
        for sub in walk(node):
            nodes.append(sub)
            if "$ref" in sub:
                target, _, fragment = sub["$ref"].partition("#")
                todo.append((target or file, fragment))
    return nodes


def walk(node):
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from walk(value)


def reference_text() -> str:
    return REFERENCE.read_text(encoding="utf-8")


def full_manifests() -> list[str]:
    """The reference's YAML blocks that are whole manifests (not a fragment of one)."""
    blocks = re.findall(r"^```yaml\n(.*?)^```", reference_text(), re.M | re.S)
    return [b for b in blocks if "apiVersion" in (yaml.safe_load(b) or {})]


def written(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "example.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_every_field_of_a_dataset_snapshot_is_in_the_reference():
    names = {name for node in snapshot_schema_nodes() for name in node.get("properties", {})}
    text = reference_text()
    assert len(names) > 50  # the walk followed the $refs
    assert sorted(n for n in names if f"`{n}`" not in text) == []


def test_every_enumerated_value_is_in_the_reference():
    # kinds (url, snapshot, ...), fetch order, success markers, archive formats
    values = {v for node in snapshot_schema_nodes()
              for v in [*node.get("enum", []), *([node["const"]] if "const" in node else [])]}
    text = reference_text()
    assert {"fileFeed", "parquet", "byEventTime", "hadoop"} <= values
    assert sorted(v for v in values if f"`{v}`" not in text and f"`kind: {v}`" not in text) == []


@pytest.mark.parametrize("index", range(len(full_manifests())))
def test_complete_manifests_in_the_reference_load(tmp_path, index):
    snapshot = load_manifest(written(tmp_path, full_manifests()[index]))
    assert isinstance(snapshot, objects.DatasetSnapshot)


def test_the_reference_shows_a_root_and_a_derivative():
    kinds = {yaml.safe_load(m)["content"]["source"]["kind"] for m in full_manifests()}
    assert kinds == {"root", "derivative"}


def test_the_reference_examples_are_the_repositorys_own(tmp_path):
    # comments may be added; the definitions must be those the repository ships and runs
    shipped = {s.id: s for s in load_manifests(SHIPPED)}
    for text in full_manifests():
        example = load_manifest(written(tmp_path, text))
        assert example == shipped.get(example.id), f"{example.id} differs from the shipped manifest"
