"""The shape of every field of the metadata objects, read once from their type hints.

Both codecs (YAML and FlatBuffers) walk objects through these shapes, so a field is described
in exactly one place: its declaration in an object module (``objects.py`` for ODF 0.18, the
``odf39`` package for ODF 0.39). A type hint is read in its class's own module, and a union's
variants are that module's ``UNIONS[name]``, so the same walkers serve every object model.

An object module may declare ``RFC013_NAMES = True``: its union ``kind:`` tags and enum names
are then read in any case RFC-013 allows (as written, camelCase or lowercase).
"""
from __future__ import annotations

import dataclasses
import enum
import sys
import types
import typing
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Annotated, Any

from .timestamps import TimeInterval


@dataclass(frozen=True)
class Scalar:
    """A FlatBuffers scalar type, as a ``struct`` format character (``Q`` uint64, ``h`` int16),
    put on a field's hint with ``Annotated``; plain ``int`` is int64, an enum int32."""

    fmt: str


U64 = Annotated[int, Scalar("Q")]
U32 = Annotated[int, Scalar("I")]
I32 = Annotated[int, Scalar("i")]


@dataclass(frozen=True)
class Union:
    """A union: its name, its variants in type-tag order, and the tags later ODF versions give
    variants this model does not read (refused by name)."""

    name: str
    variants: tuple[Any, ...]  # the variant classes
    later_tags: tuple[tuple[int, str], ...] = ()
    rfc013_names: bool = False


@dataclass(frozen=True)
class Shape:
    # str bool int bytes timestamp interval enum table union list, and:
    # value (an object stored as bytes and written as text: a multihash, a DID) and
    # json (ExtraAttributes: a JSON object, a table of one string in FlatBuffers)
    kind: str
    cls: Any = None  # dataclass (table), Enum or value class, or the Union (union)
    item: Shape | None = None  # element shape for lists
    scalar: str = ""  # struct format of an int, bool or enum field

    @property
    def element(self) -> Shape:
        """The shape of a list's elements."""
        if self.item is None:
            raise TypeError(f"a {self.kind} field has no elements")
        return self.item


@dataclass(frozen=True)
class FieldInfo:
    name: str  # python name
    yaml: str  # camelCase name
    shape: Shape
    required: bool
    fb_default: Any  # a schema default (omitted when equal), or dataclasses.MISSING


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def _shape_of(hint) -> Shape:
    origin = typing.get_origin(hint)
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if origin is Annotated:
        scalar = next(m for m in hint.__metadata__ if isinstance(m, Scalar))
        return dataclasses.replace(_shape_of(args[0]), scalar=scalar.fmt)
    if origin in (typing.Union, types.UnionType):
        if len(args) == 1:
            return _shape_of(args[0])
        unions = {getattr(a, "UNION", None) for a in args}
        if len(unions) != 1 or None in unions:
            raise TypeError(f"unsupported union {hint}")
        return Shape("union", union_of(args[0]))
    if origin in (list, list):
        return Shape("list", item=_shape_of(args[0]))
    if hint is str:
        return Shape("str")
    if hint is bool:
        return Shape("bool", scalar="?")
    if hint is int:
        return Shape("int", scalar="q")
    if isinstance(hint, type) and hasattr(hint, "from_bytes") and hasattr(hint, "parse"):
        return Shape("value", hint)
    if isinstance(hint, type) and hasattr(hint, "from_json"):
        return Shape("json", hint)
    if hint is bytes:
        return Shape("bytes")
    if hint is datetime:
        return Shape("timestamp")
    if hint is TimeInterval:
        return Shape("interval")
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return Shape("enum", hint, scalar="i")
    if dataclasses.is_dataclass(hint):
        if hasattr(hint, "UNION"):  # a single-variant union (Transform, SourceCaching)
            return Shape("union", union_of(hint))  # type: ignore[arg-type]  # a class is hashable
        return Shape("table", hint)
    raise TypeError(f"unsupported field type {hint!r}")


@cache
def fields_of(cls) -> tuple[FieldInfo, ...]:
    hints = typing.get_type_hints(cls, include_extras=True)
    out = []
    for f in dataclasses.fields(cls):
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        out.append(
            FieldInfo(
                name=f.name,
                yaml=camel(f.name),
                shape=_shape_of(hints[f.name]),
                required=required,
                fb_default=f.metadata.get("fb_default", dataclasses.MISSING),
            )
        )
    return tuple(out)


def _module(cls) -> Any:
    return sys.modules[cls.__module__]


def rfc013_names(cls) -> bool:
    """Whether ``cls``'s model reads names in any case RFC-013 allows."""
    return getattr(_module(cls), "RFC013_NAMES", False)


@cache
def union_of(variant) -> Union:
    """The union ``variant`` belongs to, from its module's ``UNIONS`` and ``LATER_ODF_TAGS``."""
    module = _module(variant)
    later = getattr(module, "LATER_ODF_TAGS", {}).get(variant.UNION, {})
    return Union(variant.UNION, module.UNIONS[variant.UNION], tuple(later.items()),
                 rfc013_names(variant))


def union_tag(cls) -> int:
    """A variant's FlatBuffers type tag: its 1-based place in the union, unless it declares
    one (an extension variant, ``TAG``)."""
    return getattr(cls, "TAG", None) or union_of(cls).variants.index(cls) + 1


def variant_by_tag(union: Union, tag: int):
    """The variant of ``union`` with type tag ``tag`` (None if there is none)."""
    return next((v for v in union.variants if union_tag(v) == tag), None)


def name_matches(written: str, name: str, rfc013: bool) -> bool:
    """Whether a name as written denotes ``name``: exactly, or under RFC-013 also in camelCase
    (first letter lowered) or all lowercase."""
    if written == name:
        return True
    return rfc013 and written in (name[:1].lower() + name[1:], name.lower())


def variant_by_kind(union: Union, kind: str):
    return next((v for v in union.variants if name_matches(kind, v.KIND, union.rfc013_names)), None)
