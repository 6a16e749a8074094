"""ODF 0.39 objects as YAML manifests, in the reference's forms.

``{kind: MetadataBlock, version: 3, content: {...}}`` and ``{kind: DatasetSnapshot, version: 1,
content: {name, kind: Root|Derivative, metadata: [events]}}``. Written as the reference writes
them (kamu-cli's serde_yaml): keys in schema order, absent fields left out, PascalCase
``kind:`` tags and enum names, hashes as ``f1620...``, ids as ``did:odf:...``, times unquoted
RFC 3339. Read with RFC-013's leniency (a tag or enum name also in camelCase or lowercase, a
``DataType`` without fields given by its kind alone) and the bounds of ``load_yaml``.
"""
from __future__ import annotations

from typing import Any

from ..yaml_codec import DecodeError, dump_yaml, from_dict, load_yaml, to_dict
from .events import DatasetSnapshot, MetadataBlock

# manifest kind -> (its class, the versions read, the version written)
KINDS: dict[str, tuple[type, tuple[int, ...], int]] = {
    "MetadataBlock": (MetadataBlock, (2, 3), 3),
    "DatasetSnapshot": (DatasetSnapshot, (1,), 1),
}


def dump_manifest(obj) -> str:
    """The YAML manifest of a block or a dataset snapshot."""
    kind = type(obj).__name__
    version = KINDS[kind][2]
    return dump_yaml({"kind": kind, "version": version, "content": to_dict(obj)}, plain_times=True)


def load_manifest(text: str, expected: type | None = None) -> Any:
    """The object a YAML manifest holds (of class ``expected`` when given)."""
    return from_document(load_yaml(text), expected)


def from_document(data: Any, expected: type | None = None) -> Any:
    """The object a parsed YAML manifest holds (of class ``expected`` when given)."""
    if not isinstance(data, dict):
        raise DecodeError("", "a manifest is a mapping of kind, version and content")
    kind = data.get("kind")
    if kind not in KINDS or (expected is not None and KINDS[kind][0] is not expected):
        wanted = expected.__name__ if expected is not None else " or ".join(KINDS)
        raise DecodeError("kind", f"expected {wanted}, got {kind!r}")
    cls, versions, _ = KINDS[kind]
    if data.get("version") not in versions:
        raise DecodeError("version", f"{kind} manifest version {data.get('version')!r} is not "
                          f"supported (this coordinator reads {', '.join(map(str, versions))})")
    extra = set(data) - {"kind", "version", "content"}
    if extra:
        raise DecodeError(sorted(extra)[0], "unknown field in a manifest")
    return from_dict(cls, data.get("content"), "content")
