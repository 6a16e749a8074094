"""YAML codec: metadata objects <-> plain dicts <-> YAML text (the form users write and read).

camelCase keys, ``kind:`` tags on union values, enum values in camelCase, hashes in lowercase
hex, times in RFC 3339, intervals in the spec's text syntax. Absent optional fields are left
out and present ones (even ``[]``) are kept, so presence survives a round trip.
"""
from __future__ import annotations

from typing import Any

import yaml

from ..errors import Invalid
from . import objects
from .shape import Shape, fields_of, variant_by_kind
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
    for name, f in known.items():
        if name in data and data[name] is not None:
            kwargs[f.name] = _value_from_yaml(data[name], f.shape, _join(path, name))
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
            kind = value.get("kind") if isinstance(value, dict) else None
            variant = variant_by_kind(shape.cls, kind) if kind else None
            if variant is None:
                allowed = ", ".join(v.KIND for v in objects.UNIONS[shape.cls])
                raise DecodeError(_join(path, "kind"), f"expected one of: {allowed}")
            return from_dict(variant, value, path)
        if k == "bytes":
            return bytes.fromhex(value)
        if k == "timestamp":
            return parse_timestamp(value)
        if k == "interval":
            return parse_interval(value)
        if k == "enum":
            for member in shape.cls:
                if member.value[0] == value:
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


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


# --- manifests and YAML text -----------------------------------------------------------------


def manifest_to_dict(obj) -> dict:
    return {"apiVersion": 1, "kind": type(obj).__name__, "content": to_dict(obj)}


def dump_yaml(data) -> str:
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100)


def render(obj) -> str:
    """The YAML manifest of an object, as ``coord log`` shows it."""
    return dump_yaml(manifest_to_dict(obj))


class _Dumper(yaml.SafeDumper):
    pass


_YAML_BREAKS = ("\x85", "\u2028", "\u2029", "\r")


def _str_presenter(dumper, data: str):
    if any(ch in data for ch in _YAML_BREAKS):
        style = '"'  # YAML folds these line breaks in other styles; escape them
    elif "\n" in data:
        style = "|"  # multi-line SQL stays readable
    else:
        style = None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_Dumper.add_representer(str, _str_presenter)


def load_yaml(text: str):
    """Parse YAML keeping timestamps as text (the codec parses them itself, exactly)."""
    return yaml.load(text, Loader=_Loader)


def load_untrusted_yaml(text: str):
    """``load_yaml`` for someone else's text: aliases are refused and deep nesting is an error.

    An alias lets a few bytes stand for an exponential tree that later passes (schema check,
    decoding) would walk in full; the stores this reads from never write them.
    """
    try:
        return yaml.load(text, Loader=_NoAliasLoader)
    except RecursionError:
        raise yaml.YAMLError("nested too deeply") from None


class _Loader(yaml.SafeLoader):
    pass


class _NoAliasLoader(_Loader):
    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            raise yaml.composer.ComposerError(None, None, "aliases are not accepted here",
                                              self.peek_event().start_mark)
        return super().compose_node(parent, index)


# drop the implicit timestamp resolver: '2020-01-01' must stay a string for exact parsing
_Loader.yaml_implicit_resolvers = {
    ch: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for ch, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
