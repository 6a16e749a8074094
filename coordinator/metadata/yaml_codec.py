"""YAML codec: metadata objects <-> plain dicts <-> YAML text (the form users write and read).

camelCase keys, ``kind:`` tags on union values, enum values in camelCase, hashes in lowercase
hex, times in RFC 3339, intervals in the spec's text syntax. Absent optional fields are left
out and present ones (even ``[]``) are kept, so presence survives a round trip.

Text is someone else's as often as not, so loading it is bounded: a key given twice, nesting
deeper than ``MAX_DEPTH`` or more than ``MAX_VALUES`` values (an alias counted as what it
stands for) is a YAML error at its line, raised while the document is composed, before any
object is built (the byte size is the caller's bound: manifest.py).

The objects and dicts need no YAML library: the text's loader and dumpers (``yaml_text``) are
imported when text is first written or read, so a command that only reads chains and shows a
table (``coord list``, ``coord status``) does not import PyYAML.
"""
from __future__ import annotations

from typing import Any

from ..errors import Invalid
from .shape import Shape, Union, fields_of, name_matches, rfc013_names, variant_by_kind
from .timestamps import format_interval, format_timestamp, parse_interval, parse_timestamp


class DecodeError(Invalid, ValueError):
    """A structurally wrong document; ``path`` names the place (``content.source.fetch``)."""

    def __init__(self, path: str, message: str):
        super().__init__(f"{path}: {message}" if path else message)
        self.path = path
        self.message = message


# --- objects -> dicts ----------------------------------------------------------------------


def to_dict(obj: object) -> dict:
    out: dict = {}
    if hasattr(obj, "KIND"):
        out["kind"] = obj.KIND
    # mypy does not see a class as Hashable (the unbound object.__hash__), hence the ignore
    for f in fields_of(type(obj)):  # type: ignore[arg-type]
        value = getattr(obj, f.name)
        if value is not None:
            out[f.yaml] = _value_to_yaml(value, f.shape)
    return out


def _value_to_yaml(value, shape: Shape):
    k = shape.kind
    if k == "list":
        return [_value_to_yaml(v, shape.element) for v in value]
    if k in ("table", "union"):
        return to_dict(value)
    if k == "bytes":
        return value.hex()
    if k == "value":
        return str(value)
    if k == "json":
        return value.to_json_value()
    if k == "timestamp":
        return format_timestamp(value)
    if k == "interval":
        return format_interval(value)
    if k == "enum":
        return value.value[0]
    return value


# --- dicts -> objects ----------------------------------------------------------------------


def from_dict(cls, data: Any, path: str = ""):
    if not isinstance(data, dict):
        raise DecodeError(path, f"expected a mapping for {cls.__name__}, got {type(data).__name__}")
    known = {f.yaml: f for f in fields_of(cls)}
    extra = set(data) - set(known) - ({"kind"} if hasattr(cls, "KIND") else set())
    if extra:
        raise DecodeError(_join(path, sorted(extra)[0]), f"unknown field in {cls.__name__}")
    kwargs = {}
    hints = getattr(cls, "YAML_HINTS", {})  # what a field's likely mistake is, for its error
    for name, f in known.items():
        if name in data and data[name] is not None:
            place = _join(path, name)
            try:
                kwargs[f.name] = _value_from_yaml(data[name], f.shape, place)
            except DecodeError as e:
                if name not in hints or e.path != place:  # a mistake deeper in is its own
                    raise
                raise DecodeError(e.path, f"{e.message} ({hints[name]})") from None
        elif f.required:
            raise DecodeError(_join(path, name), "is required")
    return cls(**kwargs)


def _value_from_yaml(value, shape: Shape, path: str):
    k = shape.kind
    try:
        if k == "list":
            if not isinstance(value, list):
                raise DecodeError(path, "expected a list")
            return [_value_from_yaml(v, shape.element, f"{path}[{i}]") for i, v in enumerate(value)]
        if k == "table":
            return from_dict(shape.cls, value, path)
        if k == "union":
            return union_from_dict(shape.cls, value, path)
        if k == "bytes":
            return bytes.fromhex(value)
        if k == "value":
            if not isinstance(value, str):
                raise DecodeError(path, "expected a string")
            return shape.cls.parse(value)
        if k == "json":
            if not isinstance(value, dict):
                raise DecodeError(path, "expected a mapping")
            return shape.cls.from_json(value)
        if k == "timestamp":
            return parse_timestamp(value)
        if k == "interval":
            return parse_interval(value)
        if k == "enum":
            rfc013 = rfc013_names(shape.cls)
            for member in shape.cls:
                if isinstance(value, str) and name_matches(value, member.value[0], rfc013):
                    return member
            allowed = ", ".join(m.value[0] for m in shape.cls)
            raise DecodeError(path, f"expected one of: {allowed}")
        if k == "bool" and not isinstance(value, bool):
            raise DecodeError(path, "expected true or false")
        if k == "int" and (not isinstance(value, int) or isinstance(value, bool)):
            raise DecodeError(path, "expected an integer")
        if k == "str" and not isinstance(value, str):
            raise DecodeError(path, "expected a string")
        return value
    except DecodeError:
        raise
    except (ValueError, TypeError, AttributeError) as e:
        raise DecodeError(path, str(e)) from None


def union_from_dict(union: Union, data: Any, path: str = ""):
    """The variant of ``union`` a mapping's ``kind:`` names, built from the mapping."""
    if isinstance(data, str) and union.rfc013_names:
        data = {"kind": data}  # the short form of a variant given by its kind alone
    kind = data.get("kind") if isinstance(data, dict) else None
    variant = variant_by_kind(union, kind) if isinstance(kind, str) else None
    if variant is None:
        allowed = ", ".join(v.KIND for v in union.variants)
        raise DecodeError(_join(path, "kind"), f"expected one of: {allowed}")
    return from_dict(variant, data, path)


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


# --- manifests and YAML text -----------------------------------------------------------------


def manifest_to_dict(obj) -> dict:
    return {"apiVersion": 1, "kind": type(obj).__name__, "content": to_dict(obj)}


def dump_yaml(data, *, plain_times: bool = False) -> str:
    """YAML text of plain data; ``plain_times`` writes RFC 3339 times unquoted, as the ODF 0.39
    reference does (this module reads them back as text either way)."""
    from .yaml_text import dump

    return dump(data, plain_times=plain_times)


def render(obj) -> str:
    """The YAML manifest of an object, as ``coord log`` shows it."""
    return dump_yaml(manifest_to_dict(obj))


# Bounds on what a document may make the loader and every later pass (schema check, decoding)
# walk: a manifest is a few hundred values, a block's a few thousand.
MAX_DEPTH = 50  # nested mappings and lists
MAX_VALUES = 20_000  # scalars, mappings and lists, with every alias expanded


def load_yaml(text: str):
    """Parse YAML keeping timestamps as text (the codec parses them itself, exactly); refuse a
    key given twice, nesting deeper than ``MAX_DEPTH`` and more than ``MAX_VALUES`` values."""
    from .yaml_text import load

    return load(text, aliases=True, max_depth=MAX_DEPTH, max_values=MAX_VALUES)


def load_untrusted_yaml(text: str):
    """``load_yaml`` for someone else's text, which the stores this reads from never write
    with aliases: an alias is refused."""
    from .yaml_text import load

    return load(text, aliases=False, max_depth=MAX_DEPTH, max_values=MAX_VALUES)
