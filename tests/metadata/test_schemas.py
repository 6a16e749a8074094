"""The JSON Schemas in coordinator/metadata/schemas/ are valid and stay in sync with the
dataclasses in objects.py."""
import json
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from coordinator.metadata import objects
from coordinator.metadata.shape import fields_of

SCHEMAS = Path(__file__).resolve().parents[2] / "coordinator" / "metadata" / "schemas"
SCHEMA_FILES = sorted(SCHEMAS.glob("*.json"))


def load(name: str) -> dict:
    return json.loads((SCHEMAS / f"{name}.json").read_text())


def reachable_classes() -> list:
    """Every table class a manifest can contain: union variants, manifest kinds and their fields."""
    todo = [v for variants in objects.UNIONS.values() for v in variants]
    todo += objects.MANIFEST_KINDS.values()
    seen = []
    while todo:
        cls = todo.pop()
        if cls in seen:
            continue
        seen.append(cls)
        for f in fields_of(cls):
            shape = f.shape.item if f.shape.kind == "list" else f.shape
            if shape.kind == "table":
                todo.append(shape.cls)
    return sorted(seen, key=lambda c: c.__name__)


def refs(node):
    if isinstance(node, dict):
        if "$ref" in node:
            yield node["$ref"]
        for value in node.values():
            yield from refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from refs(value)


@pytest.mark.parametrize("path", SCHEMA_FILES, ids=lambda p: p.name)
def test_schema_file_is_a_valid_2020_12_schema(path):
    schema = json.loads(path.read_text())
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    Draft202012Validator.check_schema(schema)


@pytest.mark.parametrize("path", SCHEMA_FILES, ids=lambda p: p.name)
def test_every_ref_resolves(path):
    registry = Registry().with_resources(
        (p.name, Resource.from_contents(json.loads(p.read_text()))) for p in SCHEMA_FILES
    )
    resolver = registry.resolver(base_uri=path.name)
    for ref in refs(json.loads(path.read_text())):
        resolver.lookup(ref)  # raises Unresolvable on a typo


@pytest.mark.parametrize("cls", reachable_classes(), ids=lambda c: c.__name__)
def test_schema_properties_are_the_dataclass_fields_in_order(cls):
    expected = [f.yaml for f in fields_of(cls)]
    if hasattr(cls, "KIND"):
        expected.insert(0, "kind")
    schema = load(cls.__name__)
    assert list(schema["properties"]) == expected
    assert schema["additionalProperties"] is False


@pytest.mark.parametrize("cls", reachable_classes(), ids=lambda c: c.__name__)
def test_schema_requires_every_field_the_dataclass_requires(cls):
    # a document the schema accepts must never fail in yaml_codec.from_dict for lack of a field
    needed = {f.yaml for f in fields_of(cls) if f.required}
    assert needed <= set(load(cls.__name__).get("required", []))


@pytest.mark.parametrize("union", objects.UNIONS)
def test_union_schema_dispatches_every_variant_by_kind(union):
    schema = load(union)
    variants = objects.UNIONS[union]
    assert schema["required"] == ["kind"]
    assert schema["properties"]["kind"]["enum"] == [v.KIND for v in variants]
    dispatch = {
        rule["if"]["properties"]["kind"]["const"]: rule["then"]["$ref"] for rule in schema["allOf"]
    }
    assert dispatch == {v.KIND: f"{v.__name__}.json" for v in variants}
    for v in variants:
        assert load(v.__name__)["properties"]["kind"]["const"] == v.KIND


def test_manifest_schema_wraps_every_manifest_kind():
    schema = load("Manifest")
    assert schema["properties"]["kind"]["enum"] == list(objects.MANIFEST_KINDS)
    dispatch = {
        rule["if"]["properties"]["kind"]["const"]: rule["then"]["properties"]["content"]["$ref"]
        for rule in schema["allOf"]
    }
    assert dispatch == {name: f"{name}.json" for name in objects.MANIFEST_KINDS}
