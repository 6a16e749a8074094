"""The shape of every field of the metadata objects, read once from their type hints.

Both codecs (YAML and FlatBuffers) walk objects through these shapes, so a field is described
in exactly one place: its declaration in ``objects.py``.
"""
from __future__ import annotations

import dataclasses
import enum
import types
import typing
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any

from . import objects
from .timestamps import TimeInterval


@dataclass(frozen=True)
class Shape:
    kind: str  # str bool int bytes timestamp interval enum table union list
    cls: Any = None  # dataclass (table), Enum class (enum) or union name (union)
    item: Shape | None = None  # element shape for lists

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
    if origin in (typing.Union, types.UnionType):
        if len(args) == 1:
            return _shape_of(args[0])
        unions = {getattr(a, "UNION", None) for a in args}
        if len(unions) != 1 or None in unions:
            raise TypeError(f"unsupported union {hint}")
        return Shape("union", unions.pop())
    if origin in (list, list):
        return Shape("list", item=_shape_of(args[0]))
    if hint is str:
        return Shape("str")
    if hint is bool:
        return Shape("bool")
    if hint is int:
        return Shape("int")
    if hint is bytes:
        return Shape("bytes")
    if hint is datetime:
        return Shape("timestamp")
    if hint is TimeInterval:
        return Shape("interval")
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return Shape("enum", hint)
    if dataclasses.is_dataclass(hint):
        if hasattr(hint, "UNION"):  # a single-variant union (Transform, SourceCaching)
            return Shape("union", hint.UNION)
        return Shape("table", hint)
    raise TypeError(f"unsupported field type {hint!r}")


@cache
def fields_of(cls) -> tuple[FieldInfo, ...]:
    hints = typing.get_type_hints(cls, vars(objects))
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


def variants(union: str) -> tuple:
    return objects.UNIONS[union]


def union_tag(cls) -> int:
    """A variant's FlatBuffers type tag: its 1-based place in the union, unless it declares
    one (an extension variant, ``TAG``)."""
    return getattr(cls, "TAG", None) or objects.UNIONS[cls.UNION].index(cls) + 1


def variant_by_tag(union: str, tag: int):
    """The variant of ``union`` with type tag ``tag`` (None if there is none)."""
    return next((v for v in objects.UNIONS[union] if union_tag(v) == tag), None)


def variant_by_kind(union: str, kind: str):
    for v in objects.UNIONS[union]:
        if v.KIND == kind:
            return v
    return None
