"""YAML codec: metadata objects <-> plain dicts <-> YAML text (the form users write and read).

camelCase keys, ``kind:`` tags on union values, enum values in camelCase, hashes in lowercase
hex, times in RFC 3339, intervals in the spec's text syntax. Absent optional fields are left
out and present ones (even ``[]``) are kept, so presence survives a round trip.

Text is someone else's as often as not, so loading it is bounded: a key given twice, nesting
deeper than ``MAX_DEPTH`` or more than ``MAX_VALUES`` values (an alias counted as what it
stands for) is a YAML error at its line, raised while the document is composed, before any
object is built (the byte size is the caller's bound: manifest.py).
"""
from __future__ import annotations

from typing import Any

import yaml
from yaml._yaml import CParser
from yaml.composer import Composer, ComposerError
from yaml.constructor import SafeConstructor
from yaml.resolver import Resolver

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
    dumper = _PlainTimesDumper if plain_times else _Dumper
    return yaml.dump(data, Dumper=dumper, sort_keys=False, allow_unicode=True, width=100)


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


class _PlainTimesDumper(_Dumper):
    pass


_PlainTimesDumper.yaml_implicit_resolvers = {
    ch: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for ch, resolvers in _Dumper.yaml_implicit_resolvers.items()
}


# Bounds on what a document may make the loader and every later pass (schema check, decoding)
# walk: a manifest is a few hundred values, a block's a few thousand.
MAX_DEPTH = 50  # nested mappings and lists
MAX_VALUES = 20_000  # scalars, mappings and lists, with every alias expanded


def load_yaml(text: str):
    """Parse YAML keeping timestamps as text (the codec parses them itself, exactly); refuse a
    key given twice, nesting deeper than ``MAX_DEPTH`` and more than ``MAX_VALUES`` values."""
    return _load(text, _Loader)


def load_untrusted_yaml(text: str):
    """``load_yaml`` for someone else's text, which the stores this reads from never write
    with aliases: an alias is refused."""
    return _load(text, _NoAliasLoader)


def _load(text: str, loader_class: type[_Loader]):
    loader = loader_class(text)  # what yaml.load does, whose stubs know only PyYAML's loaders
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


class _Loader(Composer, CParser, SafeConstructor, Resolver):
    """PyYAML's SafeLoader with libyaml's parser (a tenth of the pure-Python parser's time per
    byte) under PyYAML's own composer, whose hooks check each node as it is made.

    An alias costs nothing to parse but stands for its anchor's whole tree, which later passes
    walk in full (a few bytes of nested aliases make billions of values): each alias counts the
    values of its anchor, so the count is the size of the document those passes see.
    """

    def __init__(self, stream):
        CParser.__init__(self, stream)
        Composer.__init__(self)
        SafeConstructor.__init__(self)
        Resolver.__init__(self)
        self._depth = 0
        self._values = 0
        self._sizes: dict[int, int] = {}  # id of an anchored node -> its values, aliases expanded

    def compose_node(self, parent, index):
        mark = self.peek_event().start_mark
        if self.check_event(yaml.AliasEvent):
            node = super().compose_node(parent, index)
            size = self._sizes.get(id(node))
            if size is None:  # its anchor is still open: the alias is inside itself
                raise ComposerError(None, None, "an alias inside its own anchor", mark)
            self._count(size, mark)
            return node
        anchor = self.peek_event().anchor
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise ComposerError(None, None, f"nested more than {MAX_DEPTH} levels deep", mark)
        self._count(1, mark)
        before = self._values - 1
        try:
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
        if anchor is not None:
            self._sizes[id(node)] = self._values - before
        return node

    def _count(self, values: int, mark) -> None:
        self._values += values
        if self._values > MAX_VALUES:
            raise ComposerError(None, None, f"more than {MAX_VALUES:,} values (an alias counts "
                                "as the values it stands for)", mark)

    def compose_mapping_node(self, anchor):
        node = super().compose_mapping_node(anchor)
        first: dict[tuple[str, str], Any] = {}  # key -> where it is first
        for key, _ in node.value:
            if isinstance(key, yaml.ScalarNode):
                seen = first.setdefault((key.tag, key.value), key.start_mark)
                if seen is not key.start_mark:
                    raise ComposerError(None, None, f"duplicate key {key.value!r} (first on line "
                                        f"{seen.line + 1})", key.start_mark)
        return node


class _NoAliasLoader(_Loader):
    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            raise ComposerError(None, None, "aliases are not accepted here", self.peek_event().start_mark)
        return super().compose_node(parent, index)


# drop the implicit timestamp resolver: '2020-01-01' must stay a string for exact parsing
_Loader.yaml_implicit_resolvers = {
    ch: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for ch, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
